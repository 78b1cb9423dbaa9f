package brokertest

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/transport"
)

// secureTwoClusters starts clusters a and b on one network with mutual TLS
// and the authorizer, their certificates from one CA: each node's principal
// is its node name (User:a-1, User:b-controller), the test clients are
// User:admin; each cluster's own daemons and admin are its super users.
// configure, if given, adjusts each cluster's Options.
func secureTwoClusters(t *testing.T, configure ...func(name string, o *Options)) (a, b *Cluster) {
	p := newSecurePKI(t)
	nw := NewNetwork()
	start := func(name string) *Cluster {
		supers := []string{"User:admin", "User:" + name + "-controller"}
		for id := 1; id <= 3; id++ {
			supers = append(supers, "User:"+name+"-"+string(rune('0'+id)))
		}
		o := Options{Cluster: name, Network: nw,
			Transport: func(node string) *transport.Transport {
				cn := node
				if strings.HasSuffix(node, "-client") {
					cn = "admin"
				}
				return p.transport(node, cn)
			},
			Authz: authz.Config{Enabled: true, ACL: acl.Config{SuperUsers: supers}, BrokerPrincipalTemplate: "User:" + name + "-{id}"},
		}
		for _, f := range configure {
			f(name, &o)
		}
		return NewCluster(t, o)
	}
	return start("a"), start("b")
}

// TestSecureMirror: a destination cluster whose daemons the source has not
// granted gets nothing from it (mirror creation is refused: the source
// does not show it the topic); with Read and DescribeConfigs on the topic
// and Read on the Mirror named by its cluster id it mirrors; when the
// source revokes the Mirror grant, the mirror partition goes FAILED with
// the authorization error and keeps its records (SPEC §6.3).
func TestSecureMirror(t *testing.T) {
	a, b := secureTwoClusters(t)
	a.CreateTopic("orders", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a.MustProduce(ctx, "orders", 0, -1, []byte("one"), []byte("two"))

	create := func() *pb.CreateMirrorResponse {
		resp, err := b.MirrorAdmin().CreateMirror(ctx, &pb.CreateMirrorRequest{Name: "m", SourceBootstrap: a.BootstrapAddrs(), Topics: []string{"orders"}})
		if err != nil {
			t.Fatalf("CreateMirror: %v", err)
		}
		return resp
	}
	resp := create()
	if resp.GetError() == pb.ErrorCode_ERROR_CODE_NONE && mirrorResults("CreateMirror", resp.GetTopics()) == nil {
		t.Fatalf("CreateMirror without grants at the source succeeded: %v", resp)
	}

	principals := []string{"User:b-controller", "User:b-1", "User:b-2", "User:b-3"}
	binding := func(principal string, rt pb.AclResourceType, name string, op pb.AclOperation) *pb.AclBinding {
		return &pb.AclBinding{ResourceType: rt, ResourceName: name, PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
			Principal: principal, Host: "*", Operation: op, Permission: pb.AclPermission_ACL_PERMISSION_ALLOW}
	}
	var grants []*pb.AclBinding
	for _, p := range principals {
		grants = append(grants,
			binding(p, pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, "orders", pb.AclOperation_ACL_OPERATION_READ),
			binding(p, pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, "orders", pb.AclOperation_ACL_OPERATION_DESCRIBE_CONFIGS),
			binding(p, pb.AclResourceType_ACL_RESOURCE_TYPE_MIRROR, "cluster-b", pb.AclOperation_ACL_OPERATION_READ))
	}
	cr, err := a.Admin().CreateAcls(ctx, &pb.CreateAclsRequest{Creations: grants})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cr.GetResults() {
		if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("CreateAcls: %v %s", r.GetError(), r.GetErrorMessage())
		}
	}
	pollFor(t, "CreateMirror once the source grants b's daemons", func() bool {
		r := create()
		return r.GetError() == pb.ErrorCode_ERROR_CODE_NONE && mirrorResults("CreateMirror", r.GetTopics()) == nil
	})
	b.WaitMirrorState("orders", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	b.WaitForTimeout("b holds a's two records", 60*time.Second, func() bool {
		st := b.MirrorState("orders", 0)
		return st != nil && st.GetHighWatermark() == 2
	})

	// The source revokes the Mirror grant: b's next fetch (its long polls
	// go on without new records) is refused as cluster-b, and the run
	// fails and keeps what it copied. Nothing is produced meanwhile: a
	// record could be copied before the revocation reaches a's brokers.
	var mirrorGrants []*pb.AclFilter
	for _, p := range principals {
		mirrorGrants = append(mirrorGrants, &pb.AclFilter{ResourceType: pb.AclResourceType_ACL_RESOURCE_TYPE_MIRROR, ResourceName: "cluster-b",
			PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL, Principal: p, Operation: pb.AclOperation_ACL_OPERATION_ANY, Permission: pb.AclPermission_ACL_PERMISSION_ANY})
	}
	if _, err := a.Admin().DeleteAcls(ctx, &pb.DeleteAclsRequest{Filters: mirrorGrants}); err != nil {
		t.Fatal(err)
	}
	st := b.WaitMirrorState("orders", 0, pb.MirrorState_MIRROR_STATE_FAILED)
	if !strings.Contains(st.GetLastError(), "AUTHORIZATION") && !strings.Contains(st.GetLastError(), "authoriz") {
		t.Fatalf("FAILED with %q, want the authorization error", st.GetLastError())
	}
	if st.GetHighWatermark() != 2 {
		t.Fatalf("b's copy after FAILED: HW %d, want 2 kept", st.GetHighWatermark())
	}
}
