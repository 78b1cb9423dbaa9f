package acl

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Binding is one ACL: Kafka's AclBinding, a resource pattern with an access
// control entry. It has the same fields as [Filter], so each converts to the
// other with a plain conversion.
type Binding struct {
	// ResourceType is the kind of resource protected.
	ResourceType ResourceType
	// ResourceName is the resource's name, the name "*" ([Wildcard]) for
	// every resource of the type (Literal only), or a name prefix (Prefixed).
	ResourceName string
	// PatternType is Literal or Prefixed.
	PatternType PatternType
	// Principal is "Type:name", such as "User:alice"; "User:*"
	// ([WildcardPrincipal]) stands for every principal.
	Principal string
	// Host is the client's IP address, or "*" ([Wildcard]) for every host.
	Host string
	// Operation is the operation allowed or denied; All stands for every one.
	Operation Operation
	// Permission is Allow or Deny.
	Permission Permission
}

// Validate reports whether b is a concrete binding that Kafka would accept:
// a known resource type and an operation valid for it, Literal or Prefixed,
// Allow or Deny, a principal of the form "Type:name" with both parts
// non-empty, a host that is "*" or an IP address, and a non-empty resource
// name, which for Cluster must be [ClusterName] and for Prefixed must not be
// "*". The error names every field at fault and its value.
func (b Binding) Validate() error {
	var errs []error
	bad := func(field string, value any, format string, args ...any) {
		errs = append(errs, fmt.Errorf("acl: invalid %s %s: %s", field, value, fmt.Sprintf(format, args...)))
	}
	typeOK := false
	switch {
	case b.ResourceType == UnknownResourceType || b.ResourceType == AnyResourceType || !known(resourceTypeNames, b.ResourceType):
		bad("ResourceType", b.ResourceType, "a binding needs one of %s", joinNames(ResourceTypes()))
	default:
		typeOK = true
	}
	if b.PatternType != Literal && b.PatternType != Prefixed {
		bad("PatternType", b.PatternType, "a binding needs Literal or Prefixed")
	}
	switch {
	case b.ResourceName == "":
		bad("ResourceName", `""`, "must not be empty")
	case b.ResourceType == Cluster && b.ResourceName != ClusterName:
		bad("ResourceName", strconv.Quote(b.ResourceName), "the Cluster resource is named %q", ClusterName)
	case b.PatternType == Prefixed && b.ResourceName == Wildcard:
		bad("ResourceName", strconv.Quote(b.ResourceName), `a Prefixed pattern cannot be "*"; use Literal "*" for every resource`)
	}
	if err := checkPrincipal(b.Principal); err != nil {
		bad("Principal", strconv.Quote(b.Principal), "%v", err)
	}
	if b.Host != Wildcard {
		if _, err := netip.ParseAddr(b.Host); err != nil {
			bad("Host", strconv.Quote(b.Host), `must be "*" or an IP address`)
		}
	}
	switch {
	case b.Operation == UnknownOperation || b.Operation == AnyOperation || !known(operationNames, b.Operation):
		bad("Operation", b.Operation, "a binding needs a concrete operation")
	case typeOK && !b.Operation.ValidFor(b.ResourceType):
		bad("Operation", b.Operation, "not valid for resource type %v (valid: %s)", b.ResourceType, joinNames(validOps[b.ResourceType]))
	}
	if b.Permission != Allow && b.Permission != Deny {
		bad("Permission", b.Permission, "a binding needs Allow or Deny")
	}
	return errors.Join(errs...)
}

// ValidateAll validates every binding and joins the errors, each prefixed
// with the binding's index.
func ValidateAll(bindings []Binding) error {
	var errs []error
	for i, b := range bindings {
		if err := b.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("binding %d (%v): %w", i, b, err))
		}
	}
	return errors.Join(errs...)
}

// checkPrincipal checks the "Type:name" form, splitting at the first colon as
// Kafka does; the name may itself contain colons.
func checkPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	switch {
	case !ok:
		return errors.New(`must have the form "Type:name", such as "User:alice"`)
	case typ == "":
		return errors.New("the principal type before ':' is empty")
	case name == "":
		return errors.New("the principal name after ':' is empty")
	}
	return nil
}

func joinNames[T fmt.Stringer](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, ", ")
}

// String returns b on one line, such as
//
//	Allow principal=User:alice host=* operation=Read resource=Topic:orders pattern=Prefixed
//
// Names that are empty or hold spaces, quotes, '=' or unprintable characters
// are quoted, so the form reads back unambiguously.
func (b Binding) String() string { return b.format("") }

// format returns prefix followed by b's String, built in one allocation.
func (b Binding) format(prefix string) string {
	return prefix + b.Permission.String() + " principal=" + quoteIfNeeded(b.Principal) +
		" host=" + quoteIfNeeded(b.Host) + " operation=" + b.Operation.String() +
		" resource=" + b.ResourceType.String() + ":" + quoteIfNeeded(b.ResourceName) +
		" pattern=" + b.PatternType.String()
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"'=\\") || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// Filter returns the filter that matches exactly b: Kafka's
// AclBinding.toFilter.
func (b Binding) Filter() Filter { return Filter(b) }

// Compare orders bindings by resource type, pattern type, resource name,
// principal, host, operation and permission, the order of
// [Authorizer.Bindings] and [Authorizer.Match]. It returns -1, 0 or +1.
func Compare(a, b Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.ResourceName, b.ResourceName),
		strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// SortBindings sorts bs in [Compare] order and drops duplicates, returning
// the shortened slice. It reuses bs's storage.
func SortBindings(bs []Binding) []Binding {
	slices.SortFunc(bs, Compare)
	return slices.Compact(bs)
}

// Filter selects bindings, as Kafka's AclBindingFilter does for DescribeAcls
// and DeleteAcls. It has the same fields as [Binding], so each converts to the
// other with a plain conversion. Each field is a condition on the binding's
// field of the same name:
//
//   - ResourceType: AnyResourceType matches every type; another value
//     requires it.
//   - PatternType and ResourceName: see [Filter.Matches].
//   - Principal and Host: empty matches anything; otherwise the binding's
//     must be equal (hosts compare as IP addresses). The principal "User:*"
//     matches only bindings for "User:*".
//   - Operation: AnyOperation matches every operation; another value, All
//     included, requires it.
//   - Permission: AnyPermission matches both; another value requires it.
type Filter struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// AnyFilter is the filter that selects every binding; set fields narrow it.
func AnyFilter() Filter {
	return Filter{ResourceType: AnyResourceType, PatternType: AnyPatternType, Operation: AnyOperation, Permission: AnyPermission}
}

// Validate reports whether f can be used: no field is Unknown or a code this
// package does not know, and a non-empty principal has the "Type:name" form.
// The error names every field at fault and its value.
func (f Filter) Validate() error {
	var errs []error
	bad := func(field string, value any, why string) {
		errs = append(errs, fmt.Errorf("acl: invalid filter %s %v: %s", field, value, why))
	}
	if f.ResourceType == UnknownResourceType || !known(resourceTypeNames, f.ResourceType) {
		bad("ResourceType", f.ResourceType, "must be Any or a known resource type")
	}
	if f.PatternType == UnknownPatternType || !known(patternTypeNames, f.PatternType) {
		bad("PatternType", f.PatternType, "must be Any, Match, Literal or Prefixed")
	}
	if f.Operation == UnknownOperation || !known(operationNames, f.Operation) {
		bad("Operation", f.Operation, "must be Any or a known operation")
	}
	if f.Permission == UnknownPermission || !known(permissionNames, f.Permission) {
		bad("Permission", f.Permission, "must be Any, Allow or Deny")
	}
	if f.Principal != "" {
		if err := checkPrincipal(f.Principal); err != nil {
			bad("Principal", strconv.Quote(f.Principal), err.Error())
		}
	}
	return errors.Join(errs...)
}

// Matches reports whether f selects b, with Kafka's semantics. For the
// resource name and pattern type:
//
//   - PatternType Match with a name selects the bindings that would apply to
//     a resource of that name: Literal bindings with that name or "*", and
//     Prefixed bindings whose name is a prefix of it.
//   - PatternType Any selects bindings of every pattern type whose name is
//     equal to the filter's.
//   - Literal or Prefixed selects bindings of that pattern type whose name is
//     equal to the filter's.
//
// An empty ResourceName leaves only the pattern type condition: Any and
// Match then select every binding.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != AnyResourceType && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	if f.Principal != "" && f.Principal != b.Principal {
		return false
	}
	if f.Host != "" && !sameHost(f.Host, b.Host) {
		return false
	}
	if f.Operation != AnyOperation && f.Operation != b.Operation {
		return false
	}
	return f.Permission == AnyPermission || f.Permission == b.Permission
}

func (f Filter) matchesPattern(b Binding) bool {
	switch f.PatternType {
	case AnyPatternType:
		return f.ResourceName == "" || f.ResourceName == b.ResourceName
	case Match:
		switch {
		case f.ResourceName == "":
			return true
		case b.PatternType == Literal:
			return f.ResourceName == b.ResourceName || b.ResourceName == Wildcard
		case b.PatternType == Prefixed:
			return strings.HasPrefix(f.ResourceName, b.ResourceName)
		}
		return false
	default:
		return f.PatternType == b.PatternType && (f.ResourceName == "" || f.ResourceName == b.ResourceName)
	}
}

// IsConcrete reports whether f names one binding: no field is empty, Unknown,
// Any or Match, so Binding(f) is that binding (which may still fail
// [Binding.Validate], for example for an operation the resource type does
// not take).
func (f Filter) IsConcrete() bool {
	return f.ResourceType != UnknownResourceType && f.ResourceType != AnyResourceType && known(resourceTypeNames, f.ResourceType) &&
		(f.PatternType == Literal || f.PatternType == Prefixed) &&
		f.Operation != UnknownOperation && f.Operation != AnyOperation && known(operationNames, f.Operation) &&
		(f.Permission == Allow || f.Permission == Deny) &&
		f.ResourceName != "" && f.Principal != "" && f.Host != ""
}

// String returns f on one line, in the form of [Binding.String], with "<any>"
// for empty names.
func (f Filter) String() string {
	orAny := func(s string) string {
		if s == "" {
			return "<any>"
		}
		return quoteIfNeeded(s)
	}
	return fmt.Sprintf("%v principal=%s host=%s operation=%v resource=%v:%s pattern=%v",
		f.Permission, orAny(f.Principal), orAny(f.Host), f.Operation,
		f.ResourceType, orAny(f.ResourceName), f.PatternType)
}

// sameHost reports whether two hosts are the same as text or as IP
// addresses (an IPv4-mapped IPv6 address being its IPv4 address).
func sameHost(a, b string) bool {
	return a == b || parseHost(a) == parseHost(b)
}
