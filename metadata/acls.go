package metadata

import (
	"cmp"
	"math"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
)

// ACLKey is a binding's identity: its seven fields (Kafka dedupes
// identical bindings the same way).
type ACLKey struct {
	ResourceType twinlogv1.AclResourceType
	ResourceName string
	PatternType  twinlogv1.AclPatternType
	Principal    string
	Host         string
	Operation    twinlogv1.AclOperation
	Permission   twinlogv1.AclPermission
}

// KeyOf returns b's identity.
func KeyOf(b *twinlogv1.AclBinding) ACLKey {
	return ACLKey{
		ResourceType: b.GetResourceType(),
		ResourceName: b.GetResourceName(),
		PatternType:  b.GetPatternType(),
		Principal:    b.GetPrincipal(),
		Host:         b.GetHost(),
		Operation:    b.GetOperation(),
		Permission:   b.GetPermission(),
	}
}

// Binding returns the record of k.
func (k ACLKey) Binding() *twinlogv1.AclBinding {
	return &twinlogv1.AclBinding{
		ResourceType: k.ResourceType,
		ResourceName: k.ResourceName,
		PatternType:  k.PatternType,
		Principal:    k.Principal,
		Host:         k.Host,
		Operation:    k.Operation,
		Permission:   k.Permission,
	}
}

// CompareACLKeys orders bindings by resource type, pattern type, resource
// name, principal, host, operation and permission: the order DescribeAcls
// answers in and snapshots store.
func CompareACLKeys(a, b ACLKey) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// ACLs returns the image's bindings in CompareACLKeys order, as new records
// the caller owns.
func (img *Image) ACLs() []*twinlogv1.AclBinding {
	keys := make([]ACLKey, 0, len(img.acls))
	for k := range img.acls {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, CompareACLKeys)
	out := make([]*twinlogv1.AclBinding, len(keys))
	for i, k := range keys {
		out[i] = k.Binding()
	}
	return out
}

// HasACL reports whether the image holds the binding k.
func (img *Image) HasACL(k ACLKey) bool {
	_, ok := img.acls[k]
	return ok
}

// ACLCount returns how many bindings the image holds.
func (img *Image) ACLCount() int { return len(img.acls) }

// ACLOffset returns the offset of the last delta or snapshot that changed
// the bindings (0: none yet): a reader that builds an authorizer from them
// rebuilds it only when this moves.
func (img *Image) ACLOffset() int64 { return img.aclOffset }

func (img *Image) applyACLs(d *twinlogv1.MetadataDelta) {
	if len(d.GetAcls()) == 0 && len(d.GetRemovedAcls()) == 0 {
		return
	}
	for _, b := range d.GetRemovedAcls() {
		delete(img.acls, KeyOf(b))
	}
	for _, b := range d.GetAcls() {
		img.acls[KeyOf(b)] = struct{}{}
	}
	img.aclOffset = d.GetOffset()
}

// code narrows a wire enum value to security/acl's int8 codes; a value
// outside int8 becomes 0 (Unknown) instead of wrapping onto another code.
func code[T ~int8](v int32) T {
	if v < math.MinInt8 || v > math.MaxInt8 {
		return 0
	}
	return T(v)
}

// ACLBinding converts a record to security/acl's Binding.
func ACLBinding(r *twinlogv1.AclBinding) acl.Binding {
	return acl.Binding{
		ResourceType: code[acl.ResourceType](int32(r.GetResourceType())),
		ResourceName: r.GetResourceName(),
		PatternType:  code[acl.PatternType](int32(r.GetPatternType())),
		Principal:    r.GetPrincipal(),
		Host:         r.GetHost(),
		Operation:    code[acl.Operation](int32(r.GetOperation())),
		Permission:   code[acl.Permission](int32(r.GetPermission())),
	}
}

// ACLRecord converts a security/acl Binding to its record.
func ACLRecord(b acl.Binding) *twinlogv1.AclBinding {
	return &twinlogv1.AclBinding{
		ResourceType: twinlogv1.AclResourceType(b.ResourceType),
		ResourceName: b.ResourceName,
		PatternType:  twinlogv1.AclPatternType(b.PatternType),
		Principal:    b.Principal,
		Host:         b.Host,
		Operation:    twinlogv1.AclOperation(b.Operation),
		Permission:   twinlogv1.AclPermission(b.Permission),
	}
}

// ACLFilter converts a filter message to security/acl's Filter.
func ACLFilter(f *twinlogv1.AclFilter) acl.Filter {
	return acl.Filter{
		ResourceType: code[acl.ResourceType](int32(f.GetResourceType())),
		ResourceName: f.GetResourceName(),
		PatternType:  code[acl.PatternType](int32(f.GetPatternType())),
		Principal:    f.GetPrincipal(),
		Host:         f.GetHost(),
		Operation:    code[acl.Operation](int32(f.GetOperation())),
		Permission:   code[acl.Permission](int32(f.GetPermission())),
	}
}

// Authorizer returns an authorizer over the image's bindings. It is
// immutable: the image's owner builds a new one when ACLOffset moves.
func (img *Image) Authorizer(cfg acl.Config) *acl.Authorizer {
	bs := make([]acl.Binding, 0, len(img.acls))
	for k := range img.acls {
		bs = append(bs, ACLBinding(k.Binding()))
	}
	return acl.New(cfg, bs)
}

// ACLFilterRecord converts a security/acl Filter to its message.
func ACLFilterRecord(f acl.Filter) *twinlogv1.AclFilter {
	b := ACLRecord(acl.Binding(f))
	return &twinlogv1.AclFilter{
		ResourceType: b.GetResourceType(), ResourceName: b.GetResourceName(), PatternType: b.GetPatternType(),
		Principal: b.GetPrincipal(), Host: b.GetHost(), Operation: b.GetOperation(), Permission: b.GetPermission(),
	}
}
