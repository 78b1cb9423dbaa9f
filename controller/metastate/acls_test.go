package metastate

import (
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

const (
	rtTopic   = twinlogv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC
	rtGroup   = twinlogv1.AclResourceType_ACL_RESOURCE_TYPE_GROUP
	rtCluster = twinlogv1.AclResourceType_ACL_RESOURCE_TYPE_CLUSTER
	ptLiteral = twinlogv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL
	ptPrefix  = twinlogv1.AclPatternType_ACL_PATTERN_TYPE_PREFIXED
	ptMatch   = twinlogv1.AclPatternType_ACL_PATTERN_TYPE_MATCH
	ptAny     = twinlogv1.AclPatternType_ACL_PATTERN_TYPE_ANY
	opRead    = twinlogv1.AclOperation_ACL_OPERATION_READ
	opWrite   = twinlogv1.AclOperation_ACL_OPERATION_WRITE
	opAny     = twinlogv1.AclOperation_ACL_OPERATION_ANY
	allow     = twinlogv1.AclPermission_ACL_PERMISSION_ALLOW
	permAny   = twinlogv1.AclPermission_ACL_PERMISSION_ANY
	rtAny     = twinlogv1.AclResourceType_ACL_RESOURCE_TYPE_ANY
)

func aclB(rt twinlogv1.AclResourceType, name string, pt twinlogv1.AclPatternType, principal, host string, op twinlogv1.AclOperation) *twinlogv1.AclBinding {
	return &twinlogv1.AclBinding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: allow}
}

func applyACL(t *testing.T, s *State, d *twinlogv1.MetadataDelta) {
	t.Helper()
	if d == nil {
		return
	}
	if _, err := s.Apply(d); err != nil {
		t.Fatal(err)
	}
}

// TestCreateAcls: each creation is judged on its own; duplicates (in the
// image, in the request, or the same host spelled as a mapped IPv6
// address) change nothing; invalid bindings and over-long fields are
// INVALID_REQUEST.
func TestCreateAcls(t *testing.T) {
	s := New(Config{ClusterID: "a"})
	d, resp := s.CreateAcls(&twinlogv1.CreateAclsRequest{Creations: []*twinlogv1.AclBinding{
		aclB(rtTopic, "orders", ptLiteral, "User:alice", "*", opRead),
		aclB(rtTopic, "orders", ptLiteral, "User:alice", "*", opRead),
		aclB(rtTopic, "orders", ptLiteral, "alice", "*", opRead),                            // no principal type
		aclB(rtCluster, "other", ptLiteral, "User:alice", "*", opRead),                      // cluster name
		aclB(rtGroup, "g", ptPrefix, "User:alice", "*", opWrite),                            // Write on a group
		aclB(rtTopic, "t", ptMatch, "User:alice", "*", opRead),                              // not concrete
		aclB(rtTopic, strings.Repeat("x", MaxACLField+1), ptLiteral, "User:a", "*", opRead), // too long
		aclB(rtTopic, "orders", ptLiteral, "User:alice", "::ffff:10.0.0.1", opRead),
		{ResourceType: 1000, ResourceName: "x", PatternType: ptLiteral, Principal: "User:a", Host: "*", Operation: opRead, Permission: allow}, // past int8
	}})
	wantErr := []bool{false, false, true, true, true, true, true, false, true}
	for i, r := range resp.GetResults() {
		if (r.GetError() != ecNone) != wantErr[i] || (wantErr[i] && (r.GetError() != ecInvalid || r.GetErrorMessage() == "")) {
			t.Errorf("creation %d: %v %q", i, r.GetError(), r.GetErrorMessage())
		}
	}
	if len(resp.GetResults()) != len(wantErr) || len(d.GetAcls()) != 2 || d.GetAcls()[1].GetHost() != "10.0.0.1" {
		t.Fatalf("results %v, delta %v", resp.GetResults(), d)
	}
	applyACL(t, s, d)
	d, resp = s.CreateAcls(&twinlogv1.CreateAclsRequest{Creations: []*twinlogv1.AclBinding{aclB(rtTopic, "orders", ptLiteral, "User:alice", "10.0.0.1", opRead)}})
	if d != nil || resp.GetResults()[0].GetError() != ecNone {
		t.Fatalf("existing binding: delta %v, %v", d, resp)
	}
}

// TestCreateAclsLimit: the cluster keeps at most MaxACLBindings.
func TestCreateAclsLimit(t *testing.T) {
	s := New(Config{ClusterID: "a"})
	req := &twinlogv1.CreateAclsRequest{}
	for i := range MaxACLBindings - 1 {
		req.Creations = append(req.Creations, aclB(rtTopic, "t"+itoa(i), ptLiteral, "User:a", "*", opRead))
	}
	d, _ := s.CreateAcls(req)
	applyACL(t, s, d)
	_, resp := s.CreateAcls(&twinlogv1.CreateAclsRequest{Creations: []*twinlogv1.AclBinding{
		aclB(rtTopic, "last", ptLiteral, "User:a", "*", opRead), aclB(rtTopic, "over", ptLiteral, "User:a", "*", opRead),
		aclB(rtTopic, "t0", ptLiteral, "User:a", "*", opRead)}})
	got := []twinlogv1.ErrorCode{resp.Results[0].GetError(), resp.Results[1].GetError(), resp.Results[2].GetError()}
	if got[0] != ecNone || got[1] != twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED || got[2] != ecNone {
		t.Fatalf("at the limit: %v", got)
	}
}

// TestDeleteAndDescribeAcls: filters with Kafka's semantics (Match finds
// the literal, wildcard and prefix bindings that apply to a name); a
// binding two filters match is deleted once, under the first; a bad filter
// is INVALID_REQUEST and deletes nothing.
func TestDeleteAndDescribeAcls(t *testing.T) {
	s := New(Config{ClusterID: "a"})
	d, _ := s.CreateAcls(&twinlogv1.CreateAclsRequest{Creations: []*twinlogv1.AclBinding{
		aclB(rtTopic, "orders", ptLiteral, "User:alice", "*", opRead),
		aclB(rtTopic, "*", ptLiteral, "User:bob", "*", opRead),
		aclB(rtTopic, "ord", ptPrefix, "User:carol", "*", opWrite),
		aclB(rtTopic, "payments", ptLiteral, "User:alice", "*", opRead),
		aclB(rtGroup, "orders", ptLiteral, "User:alice", "*", opRead),
	}})
	applyACL(t, s, d)
	match := &twinlogv1.AclFilter{ResourceType: rtTopic, ResourceName: "orders", PatternType: ptMatch, Operation: opAny, Permission: permAny}
	desc := s.DescribeAcls(&twinlogv1.DescribeAclsRequest{Filter: match})
	if desc.GetError() != ecNone || len(desc.GetAcls()) != 3 {
		t.Fatalf("describe match orders: %v", desc)
	}
	if bad := s.DescribeAcls(&twinlogv1.DescribeAclsRequest{Filter: &twinlogv1.AclFilter{}}); bad.GetError() != ecInvalid {
		t.Fatalf("unknown filter codes: %v", bad)
	}
	any := &twinlogv1.AclFilter{ResourceType: rtAny, PatternType: ptAny, Operation: opAny, Permission: permAny, Principal: "User:alice"}
	d, resp := s.DeleteAcls(&twinlogv1.DeleteAclsRequest{Filters: []*twinlogv1.AclFilter{match, any, {}}})
	r := resp.GetResults()
	if len(r) != 3 || len(r[0].GetDeleted()) != 3 || len(r[1].GetDeleted()) != 2 || r[2].GetError() != ecInvalid || len(d.GetRemovedAcls()) != 5 {
		t.Fatalf("delete: %v", resp)
	}
	applyACL(t, s, d)
	if s.ACLCount() != 0 {
		t.Fatalf("left: %v", s.ACLs())
	}
	if d, _ := s.DeleteAcls(&twinlogv1.DeleteAclsRequest{Filters: []*twinlogv1.AclFilter{any}}); d != nil {
		t.Fatalf("nothing to delete, delta %v", d)
	}
}
