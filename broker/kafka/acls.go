package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// The ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) translate to the
// AdminService's, which the broker forwards to the controller. The enums
// of both are Kafka's wire codes (acl.proto), so they convert by number;
// the controller validates them (INVALID_REQUEST for a binding that is
// not concrete or not valid for its resource type). Before v1 there is no
// pattern type: it is LITERAL (kmsg's default), as Kafka reads v0.
//
// Kafka answers SECURITY_DISABLED without an authorizer; twinlog keeps
// its ACLs in the cluster's metadata whether or not they are enforced, so
// the APIs are served either way.

// createACLs answers CreateAcls (key 30): Alter on the cluster, else
// every creation is CLUSTER_AUTHORIZATION_FAILED and nothing is created.
func (s *Server) createACLs(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	if code := s.access(ctx).alterACLs(); code != 0 {
		return failCreateACLs(req, code), nil
	}
	preq := &pb.CreateAclsRequest{}
	for _, c := range req.Creations {
		preq.Creations = append(preq.Creations, &pb.AclBinding{
			ResourceType: pb.AclResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: pb.AclPatternType(c.ResourcePatternType),
			Principal:   c.Principal, Host: c.Host,
			Operation: pb.AclOperation(c.Operation), Permission: pb.AclPermission(c.PermissionType),
		})
	}
	presp, err := s.admin.CreateAcls(ctx, preq)
	if err != nil {
		resp := failCreateACLs(req, s.errorCode(err)).(*kmsg.CreateACLsResponse)
		for i := range resp.Results {
			resp.Results[i].ErrorMessage = kmsg.StringPtr(err.Error())
		}
		return resp, nil
	}
	resp := failCreateACLs(req, 0).(*kmsg.CreateACLsResponse) // one result per creation
	for i := range resp.Results {
		if i >= len(presp.GetResults()) {
			resp.Results[i].ErrorCode = unknownServerError
			continue
		}
		r := presp.GetResults()[i]
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kafkaCode(r.GetError()), optional(r.GetErrorMessage())
	}
	return resp, nil
}

func failCreateACLs(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.SetVersion(req.GetVersion())
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = code
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// aclFilter is a Kafka ACL filter as the AdminService takes it: a null
// name, principal or host matches any, as the empty string does there.
func aclFilter(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) *pb.AclFilter {
	orAny := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	return &pb.AclFilter{
		ResourceType: pb.AclResourceType(rt), ResourceName: orAny(name), PatternType: pb.AclPatternType(pt),
		Principal: orAny(principal), Host: orAny(host),
		Operation: pb.AclOperation(op), Permission: pb.AclPermission(perm),
	}
}

// describeACLs answers DescribeAcls (key 29): Describe on the cluster,
// else CLUSTER_AUTHORIZATION_FAILED. The bindings come back grouped by
// resource pattern, as Kafka answers them.
func (s *Server) describeACLs(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	if code := s.access(ctx).describeACLs(); code != 0 {
		return failDescribeACLs(req, code), nil
	}
	presp, err := s.admin.DescribeAcls(ctx, &pb.DescribeAclsRequest{Filter: aclFilter(req.ResourceType, req.ResourceName,
		req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)})
	if err != nil {
		resp := failDescribeACLs(req, s.errorCode(err)).(*kmsg.DescribeACLsResponse)
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return resp, nil
	}
	resp := failDescribeACLs(req, kafkaCode(presp.GetError())).(*kmsg.DescribeACLsResponse)
	resp.ErrorMessage = optional(presp.GetErrorMessage())
	type pattern struct {
		rt   pb.AclResourceType
		name string
		pt   pb.AclPatternType
	}
	at := map[pattern]int{} // index in resp.Resources
	for _, b := range presp.GetAcls() {
		k := pattern{b.GetResourceType(), b.GetResourceName(), b.GetPatternType()}
		i, ok := at[k]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName = kmsg.ACLResourceType(k.rt), k.name
			r.ResourcePatternType = kmsg.ACLResourcePatternType(k.pt)
			i = len(resp.Resources)
			at[k] = i
			resp.Resources = append(resp.Resources, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host = b.GetPrincipal(), b.GetHost()
		a.Operation, a.PermissionType = kmsg.ACLOperation(b.GetOperation()), kmsg.ACLPermissionType(b.GetPermission())
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp, nil
}

func failDescribeACLs(kreq kmsg.Request, code int16) kmsg.Response {
	resp := kreq.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.SetVersion(kreq.GetVersion())
	resp.ErrorCode = code
	return resp
}

// deleteACLs answers DeleteAcls (key 31): Alter on the cluster, else every
// filter's result is CLUSTER_AUTHORIZATION_FAILED and nothing is deleted.
func (s *Server) deleteACLs(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	if code := s.access(ctx).alterACLs(); code != 0 {
		return failDeleteACLs(req, code), nil
	}
	preq := &pb.DeleteAclsRequest{}
	for _, f := range req.Filters {
		preq.Filters = append(preq.Filters, aclFilter(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType))
	}
	presp, err := s.admin.DeleteAcls(ctx, preq)
	if err != nil {
		resp := failDeleteACLs(req, s.errorCode(err)).(*kmsg.DeleteACLsResponse)
		for i := range resp.Results {
			resp.Results[i].ErrorMessage = kmsg.StringPtr(err.Error())
		}
		return resp, nil
	}
	resp := failDeleteACLs(req, 0).(*kmsg.DeleteACLsResponse) // one result per filter
	for i := range resp.Results {
		if i >= len(presp.GetResults()) {
			resp.Results[i].ErrorCode = unknownServerError
			continue
		}
		r := presp.GetResults()[i]
		rr := &resp.Results[i]
		rr.ErrorCode, rr.ErrorMessage = kafkaCode(r.GetError()), optional(r.GetErrorMessage())
		for _, b := range r.GetDeleted() {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.GetResourceType()), b.GetResourceName()
			m.ResourcePatternType = kmsg.ACLResourcePatternType(b.GetPatternType())
			m.Principal, m.Host = b.GetPrincipal(), b.GetHost()
			m.Operation, m.PermissionType = kmsg.ACLOperation(b.GetOperation()), kmsg.ACLPermissionType(b.GetPermission())
			rr.MatchingACLs = append(rr.MatchingACLs, m)
		}
	}
	return resp, nil
}

func failDeleteACLs(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.SetVersion(req.GetVersion())
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = code
		resp.Results = append(resp.Results, r)
	}
	return resp
}
