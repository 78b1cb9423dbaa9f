package acl

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Config is the authorizer's configuration, as Kafka's broker settings.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything without
	// consulting any ACL: Kafka's super.users.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows a request when no binding at all names
	// its resource: Kafka's allow.everyone.if.no.acl.found, false by default.
	AllowEveryoneIfNoACLFound bool
}

// Request is one authorization question: may Principal, connecting from
// Host, perform Operation on the resource of type ResourceType named
// ResourceName?
type Request struct {
	// Principal is the authenticated principal, "Type:name".
	Principal string
	// Host is the client's IP address as text, or "" if unknown; an unknown
	// host matches only bindings for the host "*".
	Host string
	// Operation is a concrete operation: not Unknown, Any or All.
	Operation Operation
	// ResourceType is a concrete resource type: not Unknown or Any.
	ResourceType ResourceType
	// ResourceName is the resource's name; for Cluster, [ClusterName].
	ResourceName string
}

// Validate reports whether r can be decided: its principal is not empty, its
// operation is a known one other than Unknown, Any and All, and its resource
// type is a known one other than Unknown and Any.
func (r Request) Validate() error {
	var errs []error
	if r.Principal == "" {
		errs = append(errs, errors.New(`acl: invalid request Principal "": must not be empty`))
	}
	if r.Operation == UnknownOperation || r.Operation == AnyOperation || r.Operation == All || !known(operationNames, r.Operation) {
		errs = append(errs, fmt.Errorf("acl: invalid request Operation %v: a request needs a concrete operation", r.Operation))
	}
	if r.ResourceType == UnknownResourceType || r.ResourceType == AnyResourceType || !known(resourceTypeNames, r.ResourceType) {
		errs = append(errs, fmt.Errorf("acl: invalid request ResourceType %v: a request needs a concrete resource type", r.ResourceType))
	}
	return errors.Join(errs...)
}

// Decision is the answer to a [Request].
type Decision struct {
	// Allowed reports whether the request may go ahead.
	Allowed bool
	// Reason says why, for logs and audit: "super user", "denied by
	// <binding>", "allowed by <binding>", "no ACL matches the resource;
	// allow.everyone.if.no.acl.found=<true|false>", "no matching ALLOW ACL",
	// or the request's validation error. When several bindings decide, the
	// one named is the first in [Compare] order.
	Reason string
}

// The reasons of decisions.
const (
	reasonSuperUser     = "super user"
	reasonNoAllow       = "no matching ALLOW ACL"
	reasonNoACLAllowed  = "no ACL matches the resource; allow.everyone.if.no.acl.found=true"
	reasonNoACLDenied   = "no ACL matches the resource; allow.everyone.if.no.acl.found=false"
	reasonDeniedPrefix  = "denied by "
	reasonAllowedPrefix = "allowed by "
)

// resourceKey names one resource pattern.
type resourceKey struct {
	rt   ResourceType
	pt   PatternType
	name string
}

// span is the range [lo, hi) of Authorizer.all holding one resource
// pattern's bindings, which Compare order keeps together and sorted by
// principal.
type span struct{ lo, hi int32 }

// host is a binding's host prepared for matching.
type host struct {
	any  bool       // "*"
	addr netip.Addr // the address, unmapped, when the host is an IP address
	text string     // the host, when it is neither "*" nor an IP address
}

func parseHost(h string) host {
	if h == Wildcard {
		return host{any: true}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return host{addr: a.Unmap()}
	}
	return host{text: h}
}

// matches reports whether a request from h (reqAddr its address, if it is
// one) matches the binding host.
func (b *host) matches(h string, reqAddr netip.Addr) bool {
	switch {
	case b.any:
		return true
	case h == "":
		return false
	case b.addr.IsValid():
		return b.addr == reqAddr
	default:
		return b.text == h
	}
}

// Authorizer decides requests against a fixed set of bindings. It is
// immutable and safe for concurrent use. Its index finds a request's
// bindings with one map look-up for the literal name, one for the wildcard
// name, and one for each distinct length of the prefixes bound for the
// resource type, then a binary search by principal, so deciding costs
// nothing like a scan of all bindings.
//
// A nil *Authorizer behaves as one with no bindings and the zero [Config]:
// it denies everything.
type Authorizer struct {
	superUsers   map[string]struct{}
	allowIfNoACL bool
	all          []Binding // sorted by Compare, without duplicates
	hosts        []host    // hosts[i] is all[i].Host prepared
	index        map[resourceKey]span
	prefixLens   map[ResourceType][]int // distinct lengths of Prefixed names, ascending
}

// New returns an authorizer for cfg and bindings, copying both. Duplicate
// bindings count once.
//
// New does not validate: check the bindings with [Binding.Validate] or
// [ValidateAll] first. An invalid binding is kept and follows the matching
// rules as written, which may not be what its author meant: for example, a
// binding with an operation or permission this package does not know allows
// and denies nothing but still names its resource, and a host that is not
// an IP address matches only a request host of the same text. A binding
// whose pattern type is neither Literal nor Prefixed applies to no request
// and names no resource.
func New(cfg Config, bindings []Binding) *Authorizer {
	a := &Authorizer{
		superUsers:   make(map[string]struct{}, len(cfg.SuperUsers)),
		allowIfNoACL: cfg.AllowEveryoneIfNoACLFound,
		all:          SortBindings(slices.Clone(bindings)),
		index:        make(map[resourceKey]span),
		prefixLens:   make(map[ResourceType][]int),
	}
	for _, u := range cfg.SuperUsers {
		a.superUsers[u] = struct{}{}
	}
	a.all = slices.Clip(a.all)
	a.hosts = make([]host, len(a.all))
	for i := 0; i < len(a.all); {
		b := a.all[i]
		j := i
		for ; j < len(a.all) && a.all[j].ResourceType == b.ResourceType && a.all[j].PatternType == b.PatternType && a.all[j].ResourceName == b.ResourceName; j++ {
			a.hosts[j] = parseHost(a.all[j].Host)
		}
		if b.PatternType == Literal || b.PatternType == Prefixed {
			a.index[resourceKey{b.ResourceType, b.PatternType, b.ResourceName}] = span{int32(i), int32(j)}
		}
		if b.PatternType == Prefixed {
			lens := a.prefixLens[b.ResourceType]
			if k, found := slices.BinarySearch(lens, len(b.ResourceName)); !found {
				a.prefixLens[b.ResourceType] = slices.Insert(lens, k, len(b.ResourceName))
			}
		}
		i = j
	}
	return a
}

var empty = New(Config{}, nil)

// Authorize decides r; see the package documentation for the rules. An
// invalid request (see [Request.Validate]) is refused, even for a super user.
func (a *Authorizer) Authorize(r Request) Decision {
	if a == nil {
		a = empty
	}
	if err := r.Validate(); err != nil {
		return Decision{Reason: err.Error()}
	}
	if _, ok := a.superUsers[r.Principal]; ok {
		return Decision{Allowed: true, Reason: reasonSuperUser}
	}
	s := search{a: a, r: &r, deny: -1, allow: -1}
	if r.Host != "" {
		if addr, err := netip.ParseAddr(r.Host); err == nil {
			s.addr = addr.Unmap()
		}
	}
	s.check(resourceKey{r.ResourceType, Literal, r.ResourceName})
	if r.ResourceName != Wildcard {
		s.check(resourceKey{r.ResourceType, Literal, Wildcard})
	}
	for _, n := range a.prefixLens[r.ResourceType] {
		if n > len(r.ResourceName) {
			break
		}
		s.check(resourceKey{r.ResourceType, Prefixed, r.ResourceName[:n]})
	}
	switch {
	case s.deny >= 0:
		return Decision{Reason: a.all[s.deny].format(reasonDeniedPrefix)}
	case s.allow >= 0:
		return Decision{Allowed: true, Reason: a.all[s.allow].format(reasonAllowedPrefix)}
	case !s.named && a.allowIfNoACL:
		return Decision{Allowed: true, Reason: reasonNoACLAllowed}
	case !s.named:
		return Decision{Reason: reasonNoACLDenied}
	}
	return Decision{Reason: reasonNoAllow}
}

// search gathers, for one request, whether any binding names the resource
// and the first applying DENY and ALLOW bindings (indexes into all, -1 if
// none).
type search struct {
	a           *Authorizer
	r           *Request
	addr        netip.Addr
	named       bool
	deny, allow int
}

// check considers the bindings of one resource pattern.
func (s *search) check(k resourceKey) {
	sp, ok := s.a.index[k]
	if !ok {
		return
	}
	s.named = true
	s.checkPrincipal(sp, s.r.Principal)
	if s.r.Principal != WildcardPrincipal {
		s.checkPrincipal(sp, WildcardPrincipal)
	}
}

// checkPrincipal considers the bindings in sp for principal p.
func (s *search) checkPrincipal(sp span, p string) {
	all := s.a.all
	lo, hi := int(sp.lo), int(sp.hi)
	i := lo + sort.Search(hi-lo, func(k int) bool { return all[lo+k].Principal >= p })
	for ; i < hi && all[i].Principal == p; i++ {
		b := &all[i]
		if !s.a.hosts[i].matches(s.r.Host, s.addr) {
			continue
		}
		switch b.Permission {
		case Deny:
			if (b.Operation == All || b.Operation == s.r.Operation) && (s.deny < 0 || i < s.deny) {
				s.deny = i
			}
		case Allow:
			if b.Operation.Implies(s.r.Operation) && (s.allow < 0 || i < s.allow) {
				s.allow = i
			}
		}
	}
}

// Bindings returns a copy of the authorizer's bindings in [Compare] order,
// without duplicates.
func (a *Authorizer) Bindings() []Binding {
	if a == nil {
		return nil
	}
	return slices.Clone(a.all)
}

// Len returns the number of distinct bindings.
func (a *Authorizer) Len() int {
	if a == nil {
		return 0
	}
	return len(a.all)
}

// Match returns the bindings that f matches (see [Filter.Matches]), in
// [Compare] order.
func (a *Authorizer) Match(f Filter) []Binding {
	if a == nil {
		return nil
	}
	var out []Binding
	for _, b := range a.all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// AuthorizeAny decides whether r's principal may perform r's operation on
// at least one resource of r's type, whatever its name (r.ResourceName is
// ignored): Kafka's authorizeByResourceType, which KIP-679 uses to let an
// idempotent producer start with Write on any topic instead of
// IdempotentWrite on the cluster. Super users may; a DENY of the operation
// on the literal "*" forbids; otherwise an applying ALLOW on some pattern
// that no applying DENY covers (the same literal name, or a prefix of the
// allowed name) permits. With no binding of the type at all,
// AllowEveryoneIfNoACLFound decides. It scans the type's bindings: meant
// for rare requests (a producer's start), not for every record.
func (a *Authorizer) AuthorizeAny(r Request) Decision {
	if a == nil {
		a = empty
	}
	r.ResourceName = Wildcard
	if err := r.Validate(); err != nil {
		return Decision{Reason: err.Error()}
	}
	if _, ok := a.superUsers[r.Principal]; ok {
		return Decision{Allowed: true, Reason: reasonSuperUser}
	}
	var addr netip.Addr
	if r.Host != "" {
		if ad, err := netip.ParseAddr(r.Host); err == nil {
			addr = ad.Unmap()
		}
	}
	var allows []int
	denyLiteral := map[string]bool{}
	var denyPrefixes []string
	named := false
	for i := range a.all {
		b := &a.all[i]
		if b.ResourceType != r.ResourceType || (b.PatternType != Literal && b.PatternType != Prefixed) {
			continue
		}
		named = true
		if (b.Principal != r.Principal && b.Principal != WildcardPrincipal) || !a.hosts[i].matches(r.Host, addr) {
			continue
		}
		switch {
		case b.Permission == Deny && (b.Operation == All || b.Operation == r.Operation):
			if b.PatternType == Literal {
				denyLiteral[b.ResourceName] = true
			} else {
				denyPrefixes = append(denyPrefixes, b.ResourceName)
			}
		case b.Permission == Allow && b.Operation.Implies(r.Operation):
			allows = append(allows, i)
		}
	}
	if !named {
		if a.allowIfNoACL {
			return Decision{Allowed: true, Reason: reasonNoACLAllowed}
		}
		return Decision{Reason: reasonNoACLDenied}
	}
	if denyLiteral[Wildcard] {
		return Decision{Reason: "denied on every resource of the type by a DENY on " + strconv.Quote(Wildcard)}
	}
	for _, i := range allows {
		b := &a.all[i]
		covered := b.PatternType == Literal && denyLiteral[b.ResourceName]
		for _, p := range denyPrefixes {
			covered = covered || strings.HasPrefix(b.ResourceName, p)
		}
		if !covered {
			return Decision{Allowed: true, Reason: b.format(reasonAllowedPrefix)}
		}
	}
	return Decision{Reason: reasonNoAllow}
}
