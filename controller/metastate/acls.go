package metastate

import (
	"fmt"
	"net/netip"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/security/acl"
)

// ACL bounds: every request and the stored set stay bounded in memory.
const (
	// MaxACLBindings is the most bindings a cluster holds.
	MaxACLBindings = 100_000
	// MaxACLField is the longest resource name, principal or host, in bytes.
	MaxACLField = 1024
)

// CreateAcls adds bindings (Kafka's CreateAcls). Each creation is checked
// on its own: a binding that is not concrete, not valid for its resource
// type, or has a field longer than MaxACLField is INVALID_REQUEST; one
// that would take the cluster past MaxACLBindings is REQUEST_LIMIT_REACHED.
// A binding that exists already (or twice in the request) succeeds without
// a change. Hosts are stored in their canonical form (an IPv4-mapped IPv6
// address as IPv4), so one host has one binding.
func (s *State) CreateAcls(req *twinlogv1.CreateAclsRequest) (*twinlogv1.MetadataDelta, *twinlogv1.CreateAclsResponse) {
	resp := &twinlogv1.CreateAclsResponse{}
	d := &twinlogv1.MetadataDelta{Offset: s.Offset() + 1}
	added := map[metadata.ACLKey]bool{}
	for _, r := range req.GetCreations() {
		res := &twinlogv1.AclResult{}
		resp.Results = append(resp.Results, res)
		b := metadata.ACLBinding(r)
		b.Host = canonicalHost(b.Host)
		if err := validBinding(b); err != nil {
			res.Error, res.ErrorMessage = ecInvalid, err.Error()
			continue
		}
		rec := metadata.ACLRecord(b)
		k := metadata.KeyOf(rec)
		switch {
		case s.HasACL(k) || added[k]:
		case s.ACLCount()+len(added) >= MaxACLBindings:
			res.Error = twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED
			res.ErrorMessage = fmt.Sprintf("the cluster holds %d ACL bindings, the most it keeps; remove some first", MaxACLBindings)
		default:
			added[k] = true
			d.Acls = append(d.Acls, rec)
		}
	}
	if len(d.Acls) == 0 {
		return nil, resp
	}
	return d, resp
}

// DeleteAcls removes the bindings each filter matches (Kafka's
// DeleteAcls). A filter with an unknown code or a malformed principal is
// INVALID_REQUEST and removes nothing; a binding two filters match is
// reported under the first.
func (s *State) DeleteAcls(req *twinlogv1.DeleteAclsRequest) (*twinlogv1.MetadataDelta, *twinlogv1.DeleteAclsResponse) {
	resp := &twinlogv1.DeleteAclsResponse{}
	d := &twinlogv1.MetadataDelta{Offset: s.Offset() + 1}
	removed := map[metadata.ACLKey]bool{}
	all := s.ACLs()
	for _, fr := range req.GetFilters() {
		res := &twinlogv1.DeleteAclsFilterResult{}
		resp.Results = append(resp.Results, res)
		f := metadata.ACLFilter(fr)
		if err := validFilter(f); err != nil {
			res.Error, res.ErrorMessage = ecInvalid, err.Error()
			continue
		}
		for _, rec := range all {
			k := metadata.KeyOf(rec)
			if removed[k] || !f.Matches(metadata.ACLBinding(rec)) {
				continue
			}
			removed[k] = true
			res.Deleted = append(res.Deleted, rec)
			d.RemovedAcls = append(d.RemovedAcls, rec)
		}
	}
	if len(d.RemovedAcls) == 0 {
		return nil, resp
	}
	return d, resp
}

// DescribeAcls returns the bindings the filter matches, sorted (Kafka's
// DescribeAcls).
func (s *State) DescribeAcls(req *twinlogv1.DescribeAclsRequest) *twinlogv1.DescribeAclsResponse {
	f := metadata.ACLFilter(req.GetFilter())
	if err := validFilter(f); err != nil {
		return &twinlogv1.DescribeAclsResponse{Error: ecInvalid, ErrorMessage: err.Error()}
	}
	resp := &twinlogv1.DescribeAclsResponse{}
	for _, rec := range s.ACLs() {
		if f.Matches(metadata.ACLBinding(rec)) {
			resp.Acls = append(resp.Acls, rec)
		}
	}
	return resp
}

// canonicalHost returns an IP address host in its canonical text form and
// any other host unchanged (Validate then judges it).
func canonicalHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

func validBinding(b acl.Binding) error {
	if err := boundFields(b.ResourceName, b.Principal, b.Host); err != nil {
		return err
	}
	return b.Validate()
}

func validFilter(f acl.Filter) error {
	if err := boundFields(f.ResourceName, f.Principal, f.Host); err != nil {
		return err
	}
	return f.Validate()
}

func boundFields(fields ...string) error {
	for _, v := range fields {
		if len(v) > MaxACLField {
			return fmt.Errorf("acl: a field of %d bytes; at most %d", len(v), MaxACLField)
		}
	}
	return nil
}
