package cli

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/testing/protocmp"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
)

// fakeACLs is a controller's ACL store in front of a fakeAdmin: it answers
// CreateAcls, DescribeAcls and DeleteAcls as controller/metastate does
// (security/acl's checks and matching, hosts stored canonical, bindings
// sorted, a binding two filters match reported under the first) and
// records every request.
type fakeACLs struct {
	*fakeAdmin

	aclMu sync.Mutex
	acls  []acl.Binding // sorted, without duplicates
	// refuse answers each creation for the principal with the code.
	refuse map[string]twinlogv1.ErrorCode
	// adminErr, if set, is DescribeAcls' answer and every DeleteAcls
	// filter's.
	adminErr twinlogv1.ErrorCode
	// shortAnswer makes CreateAcls answer one result fewer than asked.
	shortAnswer bool

	creates   []*twinlogv1.CreateAclsRequest
	describes []*twinlogv1.DescribeAclsRequest
	deletes   []*twinlogv1.DeleteAclsRequest
}

func newFakeACLs(bindings ...acl.Binding) *fakeACLs {
	return &fakeACLs{fakeAdmin: newFakeAdmin(nil), acls: acl.SortBindings(slices.Clone(bindings)), refuse: map[string]twinlogv1.ErrorCode{}}
}

// startACLs serves f on bufconn as startFake serves a fakeAdmin.
func startACLs(t *testing.T, f *fakeACLs) *harness {
	t.Helper()
	h := &harness{fake: f.fakeAdmin, lis: bufconn.Listen(1 << 20), srv: grpc.NewServer()}
	twinlogv1.RegisterAdminServiceServer(h.srv, f)
	go func() { _ = h.srv.Serve(h.lis) }()
	t.Cleanup(h.srv.Stop)
	return h
}

func filterFromProto(p *twinlogv1.AclFilter) acl.Filter {
	return acl.Filter(aclFromProto(&twinlogv1.AclBinding{
		ResourceType: p.GetResourceType(), ResourceName: p.GetResourceName(), PatternType: p.GetPatternType(),
		Principal: p.GetPrincipal(), Host: p.GetHost(), Operation: p.GetOperation(), Permission: p.GetPermission(),
	}))
}

func (f *fakeACLs) CreateAcls(_ context.Context, req *twinlogv1.CreateAclsRequest) (*twinlogv1.CreateAclsResponse, error) {
	f.aclMu.Lock()
	defer f.aclMu.Unlock()
	f.creates = append(f.creates, req)
	resp := &twinlogv1.CreateAclsResponse{}
	for _, c := range req.GetCreations() {
		b := aclFromProto(c)
		if a, err := netip.ParseAddr(b.Host); err == nil {
			b.Host = a.Unmap().String()
		}
		r := &twinlogv1.AclResult{}
		switch err := b.Validate(); {
		case err != nil:
			r.Error, r.ErrorMessage = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, err.Error()
		case f.refuse[b.Principal] != twinlogv1.ErrorCode_ERROR_CODE_NONE:
			r.Error, r.ErrorMessage = f.refuse[b.Principal], "fake says no to "+b.Principal
		default:
			f.acls = acl.SortBindings(append(f.acls, b))
		}
		resp.Results = append(resp.Results, r)
	}
	if f.shortAnswer && len(resp.Results) > 0 {
		resp.Results = resp.Results[:len(resp.Results)-1]
	}
	return resp, nil
}

func (f *fakeACLs) DescribeAcls(_ context.Context, req *twinlogv1.DescribeAclsRequest) (*twinlogv1.DescribeAclsResponse, error) {
	f.aclMu.Lock()
	defer f.aclMu.Unlock()
	f.describes = append(f.describes, req)
	if f.adminErr != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return &twinlogv1.DescribeAclsResponse{Error: f.adminErr, ErrorMessage: "fake says no"}, nil
	}
	filter := filterFromProto(req.GetFilter())
	if err := filter.Validate(); err != nil {
		return &twinlogv1.DescribeAclsResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, ErrorMessage: err.Error()}, nil
	}
	resp := &twinlogv1.DescribeAclsResponse{}
	for _, b := range f.acls {
		if filter.Matches(b) {
			resp.Acls = append(resp.Acls, aclToProto(b))
		}
	}
	return resp, nil
}

func (f *fakeACLs) DeleteAcls(_ context.Context, req *twinlogv1.DeleteAclsRequest) (*twinlogv1.DeleteAclsResponse, error) {
	f.aclMu.Lock()
	defer f.aclMu.Unlock()
	f.deletes = append(f.deletes, req)
	resp := &twinlogv1.DeleteAclsResponse{}
	for _, fp := range req.GetFilters() {
		r := &twinlogv1.DeleteAclsFilterResult{}
		resp.Results = append(resp.Results, r)
		filter := filterFromProto(fp)
		if f.adminErr != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			r.Error, r.ErrorMessage = f.adminErr, "fake says no"
			continue
		}
		if err := filter.Validate(); err != nil {
			r.Error, r.ErrorMessage = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, err.Error()
			continue
		}
		f.acls = slices.DeleteFunc(f.acls, func(b acl.Binding) bool {
			if filter.Matches(b) {
				r.Deleted = append(r.Deleted, aclToProto(b))
				return true
			}
			return false
		})
	}
	return resp, nil
}

// state returns the stored bindings, one String per binding.
func (f *fakeACLs) state() []string {
	f.aclMu.Lock()
	defer f.aclMu.Unlock()
	out := []string{}
	for _, b := range f.acls {
		out = append(out, b.String())
	}
	return out
}

// requests counts the ACL requests received.
func (f *fakeACLs) requests() (creates, describes, deletes int) {
	f.aclMu.Lock()
	defer f.aclMu.Unlock()
	return len(f.creates), len(f.describes), len(f.deletes)
}

func bnd(perm acl.Permission, principal, host string, op acl.Operation, rt acl.ResourceType, name string, pt acl.PatternType) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// goldenACLs are the bindings the golden tests start from.
func goldenACLs() []acl.Binding {
	return []acl.Binding{
		bnd(acl.Allow, "User:alice", "*", acl.Read, acl.Topic, "orders", acl.Literal),
		bnd(acl.Allow, "User:alice", "*", acl.Describe, acl.Topic, "orders", acl.Literal),
		bnd(acl.Allow, "User:bob", "*", acl.Write, acl.Topic, "orders", acl.Literal),
		bnd(acl.Deny, "User:bob", "10.0.0.66", acl.Read, acl.Topic, "orders", acl.Literal),
		bnd(acl.Allow, "User:*", "*", acl.Describe, acl.Topic, "*", acl.Literal),
		bnd(acl.Allow, "User:etl", "*", acl.Write, acl.Topic, "logs.", acl.Prefixed),
		bnd(acl.Allow, "User:alice", "*", acl.Read, acl.Group, "orders-app", acl.Literal),
		bnd(acl.Allow, "User:admin", "*", acl.All, acl.Cluster, acl.ClusterName, acl.Literal),
		bnd(acl.Allow, "User:tx", "*", acl.Write, acl.TransactionalID, "tx-1", acl.Literal),
		bnd(acl.Allow, "User:b-mirror", "*", acl.Read, acl.Mirror, "a-to-b", acl.Literal),
	}
}

func bindingStrings(bs []acl.Binding) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, b.String())
	}
	return out
}

// TestACLsGolden runs each acls command against a fresh fakeACLs holding
// goldenACLs and checks its output (testdata/acls_*.golden) and what it
// left stored.
func TestACLsGolden(t *testing.T) {
	unchanged := func(t *testing.T, f *fakeACLs) {
		t.Helper()
		if diff := cmp.Diff(bindingStrings(acl.SortBindings(goldenACLs())), f.state()); diff != "" {
			t.Errorf("stored bindings changed (-want +got):\n%s", diff)
		}
		if c, _, d := f.requests(); c+d > 0 {
			t.Errorf("%d CreateAcls and %d DeleteAcls requests, want none", c, d)
		}
	}
	without := func(removed ...acl.Binding) func(*testing.T, *fakeACLs) {
		return func(t *testing.T, f *fakeACLs) {
			t.Helper()
			want := slices.DeleteFunc(acl.SortBindings(goldenACLs()), func(b acl.Binding) bool { return slices.Contains(removed, b) })
			if diff := cmp.Diff(bindingStrings(want), f.state()); diff != "" {
				t.Errorf("stored bindings (-want +got):\n%s", diff)
			}
		}
	}
	with := func(added ...acl.Binding) func(*testing.T, *fakeACLs) {
		return func(t *testing.T, f *fakeACLs) {
			t.Helper()
			want := acl.SortBindings(append(goldenACLs(), added...))
			if diff := cmp.Diff(bindingStrings(want), f.state()); diff != "" {
				t.Errorf("stored bindings (-want +got):\n%s", diff)
			}
		}
	}
	g := goldenACLs()
	tests := []struct {
		name  string
		args  []string
		setup func(*fakeACLs)
		check func(*testing.T, *fakeACLs)
	}{
		{name: "acls_list", args: []string{"acls", "list"}, check: unchanged},
		{name: "acls_list_json", args: []string{"acls", "list", "--principal", "User:alice", "--json"}, check: unchanged},
		// What applies to topic orders: its literal bindings and the
		// wildcard one, not the prefix logs.
		{name: "acls_list_match", args: []string{"acls", "list", "--topic", "orders", "--resource-pattern-type", "match"}, check: unchanged},
		{name: "acls_list_refused", args: []string{"acls", "list", "--resource-type", "group"},
			setup: func(f *fakeACLs) { f.adminErr = twinlogv1.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED }, check: unchanged},
		{name: "acls_add", args: []string{"acls", "add", "--allow-principal", "User:carol", "--allow-principal", "User:dave",
			"--operation", "read", "--operation", "DESCRIBE", "--topic", "payments"},
			check: with(
				bnd(acl.Allow, "User:carol", "*", acl.Read, acl.Topic, "payments", acl.Literal),
				bnd(acl.Allow, "User:carol", "*", acl.Describe, acl.Topic, "payments", acl.Literal),
				bnd(acl.Allow, "User:dave", "*", acl.Read, acl.Topic, "payments", acl.Literal),
				bnd(acl.Allow, "User:dave", "*", acl.Describe, acl.Topic, "payments", acl.Literal))},
		{name: "acls_add_json", args: []string{"--json", "acls", "add", "--allow-principal", "User:app", "--consumer", "--topic", "orders", "--group", "orders-app"},
			check: with(
				bnd(acl.Allow, "User:app", "*", acl.Read, acl.Topic, "orders", acl.Literal),
				bnd(acl.Allow, "User:app", "*", acl.Describe, acl.Topic, "orders", acl.Literal),
				bnd(acl.Allow, "User:app", "*", acl.Read, acl.Group, "orders-app", acl.Literal))},
		{name: "acls_add_dry_run", args: []string{"acls", "add", "--allow-principal", "User:etl", "--producer", "--topic", "logs.",
			"--transactional-id", "etl-", "--resource-pattern-type", "prefixed", "--dry-run"}, check: unchanged},
		{name: "acls_add_dry_run_json", args: []string{"acls", "add", "--deny-principal", "User:*", "--deny-host", "10.0.0.66",
			"--operation", "all", "--cluster", "--dry-run", "--json"}, check: unchanged},
		// The controller refuses mallory's binding: carol's is created,
		// the command fails naming mallory's.
		{name: "acls_add_refused", args: []string{"acls", "add", "--allow-principal", "User:carol", "--allow-principal", "User:mallory", "--operation", "Read", "--topic", "orders"},
			setup: func(f *fakeACLs) {
				f.refuse["User:mallory"] = twinlogv1.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED
			},
			check: with(bnd(acl.Allow, "User:carol", "*", acl.Read, acl.Topic, "orders", acl.Literal))},
		// An answer without a result for a binding does not pass for
		// success.
		{name: "acls_add_no_answer", args: []string{"acls", "add", "--allow-principal", "User:carol", "--operation", "Read", "--operation", "Write", "--topic", "t"},
			setup: func(f *fakeACLs) { f.shortAnswer = true }},
		{name: "acls_remove", args: []string{"acls", "remove", "--principal", "User:bob"}, check: without(g[2], g[3])},
		{name: "acls_remove_json", args: []string{"--json", "acls", "remove", "--topic", "logs.", "--resource-pattern-type", "prefixed"}, check: without(g[5])},
		{name: "acls_remove_dry_run", args: []string{"acls", "remove", "--topic", "orders", "--dry-run"}, check: unchanged},
		{name: "acls_remove_all", args: []string{"acls", "remove", "--all", "--yes"}, check: without(g...)},
		{name: "acls_remove_none", args: []string{"acls", "remove", "--principal", "User:nobody", "--topic", "orders"}, check: without()},
		{name: "acls_remove_refused", args: []string{"acls", "remove", "--principal", "User:bob"},
			setup: func(f *fakeACLs) { f.adminErr = twinlogv1.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED }, check: without()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeACLs(goldenACLs()...)
			if tt.setup != nil {
				tt.setup(f)
			}
			h := startACLs(t, f)
			stdout, stderr, code := h.run(t, tt.args...)
			checkGolden(t, tt.name, groupsOutput(stdout, stderr, code))
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func pb(b acl.Binding) *twinlogv1.AclBinding { return aclToProto(b) }

// TestACLsAddRequests checks the CreateAcls request each add command line
// sends: exactly these bindings, in the order acls list shows them.
func TestACLsAddRequests(t *testing.T) {
	const (
		allow, deny = acl.Allow, acl.Deny
		lit, pre    = acl.Literal, acl.Prefixed
	)
	tests := []struct {
		name string
		args []string
		want []acl.Binding
	}{
		{"operations on a topic, hosts default to any", []string{"--allow-principal", "User:alice", "--operation", "Write", "--operation", "read", "--topic", "orders"}, []acl.Binding{
			bnd(allow, "User:alice", "*", acl.Read, acl.Topic, "orders", lit),
			bnd(allow, "User:alice", "*", acl.Write, acl.Topic, "orders", lit),
		}},
		{"a repeated operation counts once", []string{"--allow-principal", "User:alice", "--operation", "Read", "--operation", "READ", "--topic", "orders"}, []acl.Binding{
			bnd(allow, "User:alice", "*", acl.Read, acl.Topic, "orders", lit),
		}},
		{"allow and deny principals times their hosts", []string{"--allow-principal", "User:alice", "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2",
			"--deny-principal", "User:bob", "--deny-principal", "User:carol", "--operation", "Describe", "--group", "g"}, []acl.Binding{
			bnd(allow, "User:alice", "10.0.0.1", acl.Describe, acl.Group, "g", lit),
			bnd(allow, "User:alice", "10.0.0.2", acl.Describe, acl.Group, "g", lit),
			bnd(deny, "User:bob", "*", acl.Describe, acl.Group, "g", lit),
			bnd(deny, "User:carol", "*", acl.Describe, acl.Group, "g", lit),
		}},
		{"hosts as the controller stores them", []string{"--deny-principal", "User:*", "--deny-host", "0:0:0:0:0:0:0:1", "--deny-host", "::ffff:10.0.0.7",
			"--operation", "All", "--topic", "*"}, []acl.Binding{
			bnd(deny, "User:*", "10.0.0.7", acl.All, acl.Topic, "*", lit),
			bnd(deny, "User:*", "::1", acl.All, acl.Topic, "*", lit),
		}},
		{"prefixed group", []string{"--allow-principal", "User:a", "--operation", "read", "--group", "app-", "--resource-pattern-type", "PREFIXED"}, []acl.Binding{
			bnd(allow, "User:a", "*", acl.Read, acl.Group, "app-", pre),
		}},
		{"cluster", []string{"--allow-principal", "User:ops", "--operation", "alter-configs", "--operation", "DESCRIBE_CONFIGS", "--cluster"}, []acl.Binding{
			bnd(allow, "User:ops", "*", acl.DescribeConfigs, acl.Cluster, acl.ClusterName, lit),
			bnd(allow, "User:ops", "*", acl.AlterConfigs, acl.Cluster, acl.ClusterName, lit),
		}},
		{"transactional id", []string{"--allow-principal", "User:tx", "--operation", "write", "--transactional-id", "tx-1"}, []acl.Binding{
			bnd(allow, "User:tx", "*", acl.Write, acl.TransactionalID, "tx-1", lit),
		}},
		{"mirror", []string{"--allow-principal", "User:b", "--operation", "Read", "--mirror", "a-to-b"}, []acl.Binding{
			bnd(allow, "User:b", "*", acl.Read, acl.Mirror, "a-to-b", lit),
		}},
		{"producer", []string{"--allow-principal", "User:p", "--producer", "--topic", "orders"}, []acl.Binding{
			bnd(allow, "User:p", "*", acl.Write, acl.Topic, "orders", lit),
			bnd(allow, "User:p", "*", acl.Create, acl.Topic, "orders", lit),
			bnd(allow, "User:p", "*", acl.Describe, acl.Topic, "orders", lit),
			bnd(allow, "User:p", "*", acl.IdempotentWrite, acl.Cluster, acl.ClusterName, lit),
		}},
		{"prefixed producer with a transactional id: the cluster stays literal", []string{"--allow-principal", "User:p", "--allow-host", "10.1.1.1",
			"--producer", "--topic", "logs.", "--transactional-id", "p-", "--resource-pattern-type", "prefixed"}, []acl.Binding{
			bnd(allow, "User:p", "10.1.1.1", acl.Write, acl.Topic, "logs.", pre),
			bnd(allow, "User:p", "10.1.1.1", acl.Create, acl.Topic, "logs.", pre),
			bnd(allow, "User:p", "10.1.1.1", acl.Describe, acl.Topic, "logs.", pre),
			bnd(allow, "User:p", "10.1.1.1", acl.IdempotentWrite, acl.Cluster, acl.ClusterName, lit),
			bnd(allow, "User:p", "10.1.1.1", acl.Write, acl.TransactionalID, "p-", pre),
			bnd(allow, "User:p", "10.1.1.1", acl.Describe, acl.TransactionalID, "p-", pre),
		}},
		{"consumer", []string{"--allow-principal", "User:c", "--consumer", "--topic", "orders", "--group", "orders-app"}, []acl.Binding{
			bnd(allow, "User:c", "*", acl.Read, acl.Topic, "orders", lit),
			bnd(allow, "User:c", "*", acl.Describe, acl.Topic, "orders", lit),
			bnd(allow, "User:c", "*", acl.Read, acl.Group, "orders-app", lit),
		}},
		{"producer and consumer share Describe", []string{"--allow-principal", "User:pc", "--producer", "--consumer", "--topic", "t", "--group", "g"}, []acl.Binding{
			bnd(allow, "User:pc", "*", acl.Read, acl.Topic, "t", lit),
			bnd(allow, "User:pc", "*", acl.Write, acl.Topic, "t", lit),
			bnd(allow, "User:pc", "*", acl.Create, acl.Topic, "t", lit),
			bnd(allow, "User:pc", "*", acl.Describe, acl.Topic, "t", lit),
			bnd(allow, "User:pc", "*", acl.Read, acl.Group, "g", lit),
			bnd(allow, "User:pc", "*", acl.IdempotentWrite, acl.Cluster, acl.ClusterName, lit),
		}},
		{"principal names may hold colons", []string{"--allow-principal", "User:CN=a,O=b:c", "--operation", "Read", "--topic", "t"}, []acl.Binding{
			bnd(allow, "User:CN=a,O=b:c", "*", acl.Read, acl.Topic, "t", lit),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeACLs()
			h := startACLs(t, f)
			_, stderr, code := h.run(t, append([]string{"acls", "add"}, tt.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			want := &twinlogv1.CreateAclsRequest{}
			for _, b := range tt.want {
				want.Creations = append(want.Creations, pb(b))
			}
			if diff := cmp.Diff([]*twinlogv1.CreateAclsRequest{want}, f.creates, protocmp.Transform()); diff != "" {
				t.Errorf("CreateAcls requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestACLsFilterRequests checks the filter list sends with DescribeAcls and
// remove with DeleteAcls (or DescribeAcls, with --dry-run).
func TestACLsFilterRequests(t *testing.T) {
	anyFilter := func(mod func(*acl.Filter)) *twinlogv1.AclFilter {
		f := acl.Filter{ResourceType: acl.AnyResourceType, PatternType: acl.AnyPatternType, Operation: acl.AnyOperation, Permission: acl.AnyPermission}
		if mod != nil {
			mod(&f)
		}
		return aclFilterToProto(f)
	}
	tests := []struct {
		name string
		args []string
		want *twinlogv1.AclFilter
	}{
		{"list everything", []string{"list"}, anyFilter(nil)},
		{"list a topic's matching bindings", []string{"list", "--topic", "orders", "--resource-pattern-type", "match"}, anyFilter(func(f *acl.Filter) {
			f.ResourceType, f.ResourceName, f.PatternType = acl.Topic, "orders", acl.Match
		})},
		{"list a resource type", []string{"list", "--resource-type", "transactional-id"}, anyFilter(func(f *acl.Filter) { f.ResourceType = acl.TransactionalID })},
		{"list any resource type", []string{"list", "--resource-type", "ANY", "--permission", "allow"}, anyFilter(func(f *acl.Filter) { f.Permission = acl.Allow })},
		{"list the cluster", []string{"list", "--cluster"}, anyFilter(func(f *acl.Filter) { f.ResourceType, f.ResourceName = acl.Cluster, acl.ClusterName })},
		{"list a mirror's literal bindings", []string{"list", "--mirror", "a-to-b", "--resource-pattern-type", "literal"}, anyFilter(func(f *acl.Filter) {
			f.ResourceType, f.ResourceName, f.PatternType = acl.Mirror, "a-to-b", acl.Literal
		})},
		{"list by principal, host, operation and permission", []string{"list", "--principal", "User:alice", "--host", "10.0.0.1", "--operation", "describe-configs", "--permission", "DENY"},
			anyFilter(func(f *acl.Filter) {
				f.Principal, f.Host, f.Operation, f.Permission = "User:alice", "10.0.0.1", acl.DescribeConfigs, acl.Deny
			})},
		{"list by an IPv4-mapped host", []string{"list", "--host", "::ffff:10.0.0.1"}, anyFilter(func(f *acl.Filter) { f.Host = "10.0.0.1" })},
		{"list the All bindings of every user", []string{"list", "--principal", "User:*", "--operation", "all"}, anyFilter(func(f *acl.Filter) {
			f.Principal, f.Operation = "User:*", acl.All
		})},
		{"remove a principal's", []string{"remove", "--principal", "User:bob"}, anyFilter(func(f *acl.Filter) { f.Principal = "User:bob" })},
		{"remove a prefixed group's", []string{"remove", "--group", "app-", "--resource-pattern-type", "prefixed"}, anyFilter(func(f *acl.Filter) {
			f.ResourceType, f.ResourceName, f.PatternType = acl.Group, "app-", acl.Prefixed
		})},
		{"remove all", []string{"remove", "--all", "--yes"}, anyFilter(nil)},
		{"remove dry run", []string{"remove", "--transactional-id", "tx", "--dry-run"}, anyFilter(func(f *acl.Filter) {
			f.ResourceType, f.ResourceName = acl.TransactionalID, "tx"
		})},
		{"remove all dry run needs no --yes", []string{"remove", "--all", "--dry-run"}, anyFilter(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeACLs(goldenACLs()...)
			h := startACLs(t, f)
			_, stderr, code := h.run(t, append([]string{"acls"}, tt.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			var wantDescribes []*twinlogv1.DescribeAclsRequest
			var wantDeletes []*twinlogv1.DeleteAclsRequest
			if tt.args[0] == "list" || slices.Contains(tt.args, "--dry-run") {
				wantDescribes = []*twinlogv1.DescribeAclsRequest{{Filter: tt.want}}
			} else {
				wantDeletes = []*twinlogv1.DeleteAclsRequest{{Filters: []*twinlogv1.AclFilter{tt.want}}}
			}
			if diff := cmp.Diff(wantDescribes, f.describes, protocmp.Transform()); diff != "" {
				t.Errorf("DescribeAcls requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantDeletes, f.deletes, protocmp.Transform()); diff != "" {
				t.Errorf("DeleteAcls requests (-want +got):\n%s", diff)
			}
			if len(f.creates) > 0 {
				t.Errorf("CreateAcls requests: %v", f.creates)
			}
		})
	}
}

// TestACLsUsage: malformed command lines are usage errors (exit 2) that
// say what is wrong, and send nothing.
func TestACLsUsage(t *testing.T) {
	ops := "All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"acls"}, "acls needs a subcommand"},
		{"list takes no arguments", []string{"acls", "list", "orders"}, `unknown command "orders"`},

		{"add: no principal", []string{"acls", "add", "--operation", "Read", "--topic", "t"}, "say who: pass --allow-principal Type:name or --deny-principal Type:name"},
		{"add: principal without type", []string{"acls", "add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t"},
			`bad --allow-principal "alice": want Type:name, such as User:alice`},
		{"add: principal without name", []string{"acls", "add", "--deny-principal", "User:", "--operation", "Read", "--topic", "t"}, `bad --deny-principal "User:"`},
		{"add: no resource", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "Read"},
			"name the resource: --topic NAME, --group NAME, --cluster, --transactional-id NAME or --mirror NAME"},
		{"add: two resources", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t", "--group", "g"},
			"pass one resource, not --topic and --group"},
		{"add: empty resource name", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", ""}, "--topic needs a name"},
		{"add: no operation", []string{"acls", "add", "--allow-principal", "User:a", "--topic", "t"}, "pass --operation OP (repeatable), or --producer or --consumer"},
		{"add: unknown operation", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "raed", "--topic", "t"},
			`bad --operation "raed": want one of ` + ops + " (any case"},
		{"add: operation any", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "any", "--topic", "t"}, `bad --operation "any": want one of All, Read`},
		{"add: operation not for the type", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "write", "--group", "g"},
			"--operation Write does not apply to --group: a Group binding takes All, Read, Delete, Describe"},
		{"add: match pattern", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t", "--resource-pattern-type", "match"},
			`bad --resource-pattern-type "match": want one of Literal, Prefixed`},
		{"add: prefixed cluster", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "Alter", "--cluster", "--resource-pattern-type", "prefixed"},
			"--cluster is always Literal"},
		{"add: prefixed star", []string{"acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "*", "--resource-pattern-type", "prefixed"},
			`a Prefixed pattern cannot be "*"`},
		{"add: host name", []string{"acls", "add", "--allow-principal", "User:a", "--allow-host", "localhost", "--operation", "Read", "--topic", "t"},
			`bad --allow-host "localhost": want "*" (any host) or an IP address`},
		{"add: allow host without allow principal", []string{"acls", "add", "--deny-principal", "User:a", "--allow-host", "10.0.0.1", "--operation", "Read", "--topic", "t"},
			"--allow-host needs --allow-principal"},
		{"add: deny host without deny principal", []string{"acls", "add", "--allow-principal", "User:a", "--deny-host", "10.0.0.1", "--operation", "Read", "--topic", "t"},
			"--deny-host needs --deny-principal"},
		{"producer: no topic", []string{"acls", "add", "--allow-principal", "User:a", "--producer"}, "--producer needs --topic NAME"},
		{"consumer: no topic", []string{"acls", "add", "--allow-principal", "User:a", "--consumer", "--group", "g"}, "--consumer needs --topic NAME"},
		{"consumer: no group", []string{"acls", "add", "--allow-principal", "User:a", "--consumer", "--topic", "t"}, "--consumer needs --group NAME"},
		{"producer: with operation", []string{"acls", "add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--operation", "Read"}, "drop --operation"},
		{"producer: with deny principal", []string{"acls", "add", "--deny-principal", "User:a", "--producer", "--topic", "t"}, "--producer and --consumer only allow"},
		{"producer: with group", []string{"acls", "add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--group", "g"}, "--group goes with --consumer"},
		{"consumer: with transactional id", []string{"acls", "add", "--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g", "--transactional-id", "x"},
			"--transactional-id goes with --producer"},
		{"consumer: with cluster", []string{"acls", "add", "--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g", "--cluster"},
			"take no --cluster"},
		{"producer: with mirror", []string{"acls", "add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--mirror", "m"}, "take no --mirror"},

		{"list: unknown resource type", []string{"acls", "list", "--resource-type", "queue"},
			`bad --resource-type "queue": want one of Any, Topic, Group, Cluster, TransactionalId, DelegationToken, User, Mirror`},
		{"list: two resources", []string{"acls", "list", "--topic", "t", "--cluster"}, "pass at most one of"},
		{"list: resource and resource type", []string{"acls", "list", "--topic", "t", "--resource-type", "group"}, "not --topic and --resource-type"},
		{"list: unknown pattern type", []string{"acls", "list", "--resource-pattern-type", "regex"}, `bad --resource-pattern-type "regex": want one of Any, Match, Literal, Prefixed`},
		{"list: unknown permission", []string{"acls", "list", "--permission", "maybe"}, `bad --permission "maybe": want one of Any, Allow, Deny`},
		{"list: unknown operation", []string{"acls", "list", "--operation", "fly"}, `bad --operation "fly": want one of Any, ` + ops},
		{"list: bad principal", []string{"acls", "list", "--principal", "alice"}, `bad --principal "alice"`},
		{"list: bad host", []string{"acls", "list", "--host", "db1"}, `bad --host "db1"`},

		{"remove: nothing narrows", []string{"acls", "remove"}, "nothing narrows the removal"},
		{"remove: match narrows nothing", []string{"acls", "remove", "--resource-pattern-type", "match", "--operation", "any"}, "nothing narrows the removal"},
		{"remove: all without yes", []string{"acls", "remove", "--all"}, "--all removes every ACL binding of the cluster: pass --yes as well"},
		{"remove: all with a filter", []string{"acls", "remove", "--all", "--yes", "--principal", "User:a"}, "pass either filter flags or --all, not both"},
		{"remove: bad filter", []string{"acls", "remove", "--permission", "never"}, `bad --permission "never"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeACLs(goldenACLs()...)
			h := startACLs(t, f)
			_, stderr, code := h.run(t, tt.args...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "run `twinctl --help` for usage") {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, ExitUsage, tt.want)
			}
			if c, d, r := f.requests(); c+d+r > 0 {
				t.Errorf("sent %d CreateAcls, %d DescribeAcls, %d DeleteAcls requests; want none", c, d, r)
			}
		})
	}
}

// TestACLsOldController: a server without the ACL RPCs is named, with
// exit 1.
func TestACLsOldController(t *testing.T) {
	h := startFake(t, newFakeAdmin(nil))
	for _, args := range [][]string{
		{"acls", "list"},
		{"acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"},
		{"acls", "remove", "--principal", "User:a"},
	} {
		_, stderr, code := h.run(t, args...)
		if code != ExitError || !strings.Contains(stderr, "--bootstrap fake:1 does not serve") {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 naming the server", args, code, stderr)
		}
	}
}

// TestBindingOperations: the operations add accepts are every operation
// some resource type takes, in code order.
func TestBindingOperations(t *testing.T) {
	var want []acl.Operation
	for o := acl.All; o <= acl.DescribeTokens; o++ {
		want = append(want, o)
	}
	if diff := cmp.Diff(want, bindingOperations()); diff != "" {
		t.Errorf("bindingOperations (-want +got):\n%s", diff)
	}
}

func TestWrapWords(t *testing.T) {
	got := wrapWords("aa bb cc dddddddd e", 8, "  ")
	if want := "  aa bb\n  cc\n  dddddddd\n  e"; got != want {
		t.Errorf("wrapWords = %q, want %q", got, want)
	}
}
