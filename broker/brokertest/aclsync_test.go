package brokertest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/security/acl"
)

// aclSyncWatch is a controller observer that keeps the ACL syncs'
// outcomes (the syncs run on the controller's own schedule; a test waits
// for one that ended after a point it knows).
type aclSyncWatch struct {
	mu      sync.Mutex
	results []controller.ACLSyncResult
}

func (w *aclSyncWatch) ObserveACLSync(r controller.ACLSyncResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.results = append(w.results, r)
}

func (*aclSyncWatch) ObservePartition(controller.PartitionStats) {}
func (*aclSyncWatch) ForgetPartition(string, int32)              {}
func (*aclSyncWatch) ObserveCluster(controller.ClusterStats)     {}
func (*aclSyncWatch) ObserveElections(int, int)                  {}
func (*aclSyncWatch) ObserveCommit(time.Duration)                {}

// after waits for a sync that started after since and reports it.
func (w *aclSyncWatch) after(t *testing.T, what string, since time.Time) controller.ACLSyncResult {
	t.Helper()
	var got controller.ACLSyncResult
	pollFor(t, what, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, r := range w.results {
			if r.At.After(since) {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// aclsOf are the bindings of c for principal.
func aclsOf(ctx context.Context, t *testing.T, c *Cluster, principal string) []acl.Binding {
	t.Helper()
	resp, err := c.Admin().DescribeAcls(ctx, &pb.DescribeAclsRequest{Filter: metadata.ACLFilterRecord(acl.Filter{
		ResourceType: acl.AnyResourceType, PatternType: acl.AnyPatternType, Principal: principal, Operation: acl.AnyOperation, Permission: acl.AnyPermission})})
	if err != nil || resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("DescribeAcls on %s: %v %v", c.Name, resp, err)
	}
	var out []acl.Binding
	for _, r := range resp.GetAcls() {
		out = append(out, metadata.ACLBinding(r))
	}
	return out
}

// aclSyncOf is the ACL sync status mirror m's description shows on c.
func aclSyncOf(ctx context.Context, t *testing.T, c *Cluster) *pb.MirrorAclSyncStatus {
	t.Helper()
	d, err := c.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"m"}})
	if err != nil {
		t.Fatalf("DescribeMirrors on %s: %v", c.Name, err)
	}
	return d.GetMirrors()[0].GetAclSync()
}

func changeACLs(ctx context.Context, t *testing.T, c *Cluster, create []acl.Binding, remove []acl.Binding) {
	t.Helper()
	if len(create) > 0 {
		req := &pb.CreateAclsRequest{}
		for _, b := range create {
			req.Creations = append(req.Creations, metadata.ACLRecord(b))
		}
		resp, err := c.Admin().CreateAcls(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetResults() {
			if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				t.Fatalf("CreateAcls on %s: %v %s", c.Name, r.GetError(), r.GetErrorMessage())
			}
		}
	}
	if len(remove) > 0 {
		req := &pb.DeleteAclsRequest{}
		for _, b := range remove {
			req.Filters = append(req.Filters, metadata.ACLFilterRecord(b.Filter()))
		}
		if _, err := c.Admin().DeleteAcls(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMirrorACLSync: with mirror.acl.sync.enable and filters selecting
// User:app's topic bindings, b copies a's such bindings and removes its
// own that a lacks, and leaves alone what the filters do not select. The
// source authorizes the sync: until a grants b's controller Describe on
// its Cluster, the syncs fail and change nothing; when a revokes it, a
// binding a removed meanwhile stays on b (no removal without the source's
// word). DescribeMirrors shows each sync: nothing before it is enabled,
// then the source's refusal, then the bindings read and those created and
// removed, and nothing again once it is off.
func TestMirrorACLSync(t *testing.T) {
	watch := &aclSyncWatch{}
	a, b := secureTwoClusters(t, func(name string, o *Options) {
		if name == "b" {
			o.ControllerObserver = watch
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a.CreateTopic("orders", 1, 3, nil)
	allow := func(principal string, rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
		return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: acl.Literal, Principal: principal, Host: "*", Operation: op, Permission: acl.Allow}
	}
	var grants []acl.Binding
	for _, p := range []string{"User:b-controller", "User:b-1", "User:b-2", "User:b-3"} {
		grants = append(grants, allow(p, acl.Topic, "orders", acl.Read), allow(p, acl.Topic, "orders", acl.DescribeConfigs), allow(p, acl.Mirror, "cluster-b", acl.Read))
	}
	appRead, appWrite := allow("User:app", acl.Topic, "orders", acl.Read), allow("User:app", acl.Topic, "orders", acl.Write)
	appGroup := allow("User:app", acl.Group, "g", acl.Read)           // not a topic: outside the filters
	appLocal := allow("User:app", acl.Topic, "local", acl.Describe)   // b's own, inside the filters
	opsOrders := allow("User:ops", acl.Topic, "orders", acl.Describe) // b's own, outside the filters
	changeACLs(ctx, t, a, append(grants, appRead, appWrite, appGroup), nil)
	b.CreateMirror("m", a, "orders")
	changeACLs(ctx, t, b, []acl.Binding{appLocal, opsOrders}, nil)
	if st := aclSyncOf(ctx, t, b); st != nil {
		t.Fatalf("ACL sync status while it is off: %v", st)
	}

	start := time.Now()
	resp, err := b.Admin().AlterConfigs(ctx, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
		Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER},
		Set: map[string]string{metadata.KeyMirrorACLSyncEnable: "true", metadata.KeyMirrorACLSyncIntervalMs: "200",
			metadata.KeyMirrorACLSyncFilters: `{"aclFilters":[{"resourceFilter":{"resourceType":"TOPIC"},"accessFilter":{"principal":"User:app"}}]}`},
	}}})
	if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("AlterConfigs: %v %v", resp, err)
	}
	if r := watch.after(t, "a first ACL sync", start); r.Err == "" || r.Created != 0 || r.Removed != 0 || !r.Incomplete {
		t.Fatalf("a sync without Describe on a's Cluster: %+v, want it refused, changing nothing", r)
	}
	if got := aclsOf(ctx, t, b, "User:app"); !slices.Equal(got, []acl.Binding{appLocal}) {
		t.Fatalf("b's bindings of User:app after a refused sync: %v", got)
	}
	if st := aclSyncOf(ctx, t, b); st == nil || !st.GetRemovalsSkipped() || !strings.Contains(st.GetError(), "DescribeAcls") || st.GetSourceBindings() != 0 {
		t.Fatalf("described ACL sync after a refused one: %v, want the source's refusal and no removals", st)
	}

	describeCluster := allow("User:b-controller", acl.Cluster, acl.ClusterName, acl.Describe)
	changeACLs(ctx, t, a, []acl.Binding{describeCluster}, nil)
	pollFor(t, "b holding a's topic bindings of User:app, and not its own", func() bool {
		return slices.Equal(aclsOf(ctx, t, b, "User:app"), acl.SortBindings([]acl.Binding{appRead, appWrite}))
	})
	// a holds the grants above, describeCluster and User:app's three.
	wantRead := int32(len(grants) + 4)
	pollFor(t, "a described sync reading a's bindings without error", func() bool {
		st := aclSyncOf(ctx, t, b)
		return st.GetError() == "" && !st.GetRemovalsSkipped() && st.GetSourceBindings() == wantRead && st.GetSyncedAtMs() > start.UnixMilli()
	})
	if got := aclsOf(ctx, t, b, "User:ops"); !slices.Equal(got, []acl.Binding{opsOrders}) {
		t.Fatalf("b's bindings of User:ops (outside the filters): %v", got)
	}

	changeACLs(ctx, t, a, nil, []acl.Binding{appWrite})
	pollFor(t, "a's removal reaching b", func() bool { return slices.Equal(aclsOf(ctx, t, b, "User:app"), []acl.Binding{appRead}) })

	revoked := time.Now()
	changeACLs(ctx, t, a, nil, []acl.Binding{describeCluster})
	pollFor(t, "a sync refused after the revocation", func() bool {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		r := watch.results[len(watch.results)-1]
		return r.At.After(revoked) && r.Err != ""
	})
	removed := time.Now()
	changeACLs(ctx, t, a, nil, []acl.Binding{appRead})
	if r := watch.after(t, "a sync after a's removal", removed); r.Err == "" || r.Removed != 0 {
		t.Fatalf("a sync while a refuses: %+v, want it refused, removing nothing", r)
	}
	if got := aclsOf(ctx, t, b, "User:app"); !slices.Equal(got, []acl.Binding{appRead}) {
		t.Fatalf("b's bindings of User:app while a refuses the sync: %v, want %v kept", got, appRead)
	}

	resp, err = b.Admin().AlterConfigs(ctx, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
		Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER},
		Set:      map[string]string{metadata.KeyMirrorACLSyncEnable: "false"},
	}}})
	if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("AlterConfigs: %v %v", resp, err)
	}
	pollFor(t, "no ACL sync described once it is off", func() bool { return aclSyncOf(ctx, t, b) == nil })
}
