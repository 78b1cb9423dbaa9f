package acl

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// naive decides r by scanning every binding: the reference the indexed
// Authorizer must agree with, decision and reason alike. It restates the
// rules from the package documentation directly.
func naive(cfg Config, bindings []Binding, r Request) Decision {
	if err := r.Validate(); err != nil {
		return Decision{Reason: err.Error()}
	}
	if slices.Contains(cfg.SuperUsers, r.Principal) {
		return Decision{Allowed: true, Reason: "super user"}
	}
	sorted := slices.Clone(bindings)
	slices.SortFunc(sorted, Compare)
	sorted = slices.Compact(sorted)
	named := false
	var deny, allow *Binding
	for i := range sorted {
		b := &sorted[i]
		if !naiveNames(*b, r.ResourceType, r.ResourceName) {
			continue
		}
		named = true
		if b.Principal != r.Principal && b.Principal != "User:*" {
			continue
		}
		if !naiveHost(b.Host, r.Host) {
			continue
		}
		if deny == nil && b.Permission == Deny && (b.Operation == All || b.Operation == r.Operation) {
			deny = b
		}
		if allow == nil && b.Permission == Allow && naiveImplies(b.Operation, r.Operation) {
			allow = b
		}
	}
	switch {
	case deny != nil:
		return Decision{Reason: "denied by " + deny.String()}
	case allow != nil:
		return Decision{Allowed: true, Reason: "allowed by " + allow.String()}
	case !named:
		return Decision{Allowed: cfg.AllowEveryoneIfNoACLFound,
			Reason: "no ACL matches the resource; allow.everyone.if.no.acl.found=" + strconv.FormatBool(cfg.AllowEveryoneIfNoACLFound)}
	}
	return Decision{Reason: "no matching ALLOW ACL"}
}

// naiveNames reports whether b's resource pattern covers the resource.
func naiveNames(b Binding, rt ResourceType, name string) bool {
	if b.ResourceType != rt {
		return false
	}
	switch b.PatternType {
	case Literal:
		return b.ResourceName == name || b.ResourceName == "*"
	case Prefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

func naiveHost(bindingHost, reqHost string) bool {
	if bindingHost == "*" {
		return true
	}
	if reqHost == "" {
		return false
	}
	canon := func(h string) string {
		if a, err := netip.ParseAddr(h); err == nil {
			return a.Unmap().String()
		}
		return h
	}
	return canon(bindingHost) == canon(reqHost)
}

func naiveImplies(have, want Operation) bool {
	switch {
	case have == want, have == All:
		return true
	case want == Describe:
		return have == Read || have == Write || have == Delete || have == Alter
	case want == DescribeConfigs:
		return have == AlterConfigs
	}
	return false
}

// Small alphabets, so that random bindings and requests collide often.
var (
	genNames      = []string{"", "a", "ab", "abc", "abd", "b", "ba", "*", "a*", ClusterName}
	genTypes      = []ResourceType{Topic, Topic, Topic, Topic, Group, Cluster, Mirror, UnknownResourceType, AnyResourceType, 99}
	genPatterns   = []PatternType{Literal, Literal, Prefixed, Prefixed, Match, AnyPatternType, UnknownPatternType}
	genPrincipals = []string{"User:alice", "User:bob", "User:*", "Group:alice", "Group:*", "alice", ""}
	genHosts      = []string{"*", "10.0.0.1", "10.0.0.2", "::1", "0:0:0:0:0:0:0:1", "::ffff:10.0.0.1", "localhost", ""}
	genPerms      = []Permission{Allow, Allow, Deny, UnknownPermission, AnyPermission, 7}
)

// genOperation draws a concrete operation three times in four, else any
// code, known or not.
func genOperation(t *rapid.T, label string) Operation {
	if rapid.IntRange(0, 3).Draw(t, label+" kind") > 0 {
		return rapid.SampledFrom([]Operation{Read, Write, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, Create, ClusterAction}).Draw(t, label)
	}
	return Operation(rapid.IntRange(-1, 16).Draw(t, label))
}

func genBinding(t *rapid.T) Binding {
	return Binding{
		ResourceType: rapid.SampledFrom(genTypes).Draw(t, "type"),
		ResourceName: rapid.SampledFrom(genNames).Draw(t, "name"),
		PatternType:  rapid.SampledFrom(genPatterns).Draw(t, "pattern"),
		Principal:    rapid.SampledFrom(genPrincipals).Draw(t, "principal"),
		Host:         rapid.SampledFrom(genHosts).Draw(t, "host"),
		Operation:    genOperation(t, "op"),
		Permission:   rapid.SampledFrom(genPerms).Draw(t, "perm"),
	}
}

func genRequest(t *rapid.T) Request {
	return Request{
		Principal:    rapid.SampledFrom(genPrincipals).Draw(t, "req principal"),
		Host:         rapid.SampledFrom(genHosts).Draw(t, "req host"),
		Operation:    genOperation(t, "req op"),
		ResourceType: rapid.SampledFrom(genTypes).Draw(t, "req type"),
		ResourceName: rapid.SampledFrom(genNames).Draw(t, "req name"),
	}
}

// genRequestNear draws a request, half the time one aimed at a random
// binding's resource, principal and host, so that bindings apply often.
func genRequestNear(t *rapid.T, bindings []Binding) Request {
	r := genRequest(t)
	if len(bindings) == 0 || rapid.Bool().Draw(t, "aimed") {
		return r
	}
	b := rapid.SampledFrom(bindings).Draw(t, "target")
	r.ResourceType, r.ResourceName = b.ResourceType, b.ResourceName
	if b.PatternType == Prefixed {
		r.ResourceName += rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "suffix")
	}
	if b.Principal != WildcardPrincipal {
		r.Principal = b.Principal
	}
	if b.Host != Wildcard && rapid.IntRange(0, 2).Draw(t, "same host") > 0 {
		r.Host = b.Host
	}
	if rapid.Bool().Draw(t, "same op") {
		r.Operation = b.Operation
	}
	return r
}

func genConfig(t *rapid.T) Config {
	return Config{
		SuperUsers:                rapid.SliceOfN(rapid.SampledFrom(genPrincipals[:3]), 0, 1).Draw(t, "super users"),
		AllowEveryoneIfNoACLFound: rapid.Bool().Draw(t, "allow everyone"),
	}
}

// TestAuthorizeMatchesNaiveScan checks the index against the linear scan on
// random, sometimes invalid, bindings and requests.
func TestAuthorizeMatchesNaiveScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		bindings := rapid.SliceOfN(rapid.Custom(genBinding), 0, 30).Draw(t, "bindings")
		a := New(cfg, bindings)
		for range 50 {
			r := genRequestNear(t, bindings)
			got, want := a.Authorize(r), naive(cfg, bindings, r)
			if got != want {
				t.Fatalf("Authorize(%+v)\n got %+v\nwant %+v", r, got, want)
			}
		}
	})
}

// TestAuthorizeMatchesNaiveScanValid does the same with valid bindings and
// requests only, where decisions are more often allowed and denied by a
// binding rather than refused for want of one.
func TestAuthorizeMatchesNaiveScanValid(t *testing.T) {
	names := []string{"a", "ab", "abc", "abd", "b", "ba", "*"}
	principals := []string{"User:alice", "User:bob", "User:*", "Group:alice"}
	hosts := []string{"*", "*", "10.0.0.1", "10.0.0.2", "::1"}
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t)
		bindings := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Binding {
			rt := rapid.SampledFrom([]ResourceType{Topic, Group, Mirror}).Draw(t, "type")
			b := Binding{
				ResourceType: rt,
				ResourceName: rapid.SampledFrom(names).Draw(t, "name"),
				PatternType:  rapid.SampledFrom([]PatternType{Literal, Prefixed}).Draw(t, "pattern"),
				Principal:    rapid.SampledFrom(principals).Draw(t, "principal"),
				Host:         rapid.SampledFrom(hosts).Draw(t, "host"),
				Operation:    rapid.SampledFrom(Operations(rt)).Draw(t, "op"),
				Permission:   rapid.SampledFrom([]Permission{Allow, Allow, Allow, Deny}).Draw(t, "perm"),
			}
			if b.PatternType == Prefixed && b.ResourceName == "*" {
				b.PatternType = Literal
			}
			if err := b.Validate(); err != nil {
				t.Fatalf("generated an invalid binding: %v", err)
			}
			return b
		}), 0, 40).Draw(t, "bindings")
		a := New(cfg, bindings)
		for range 20 {
			r := Request{
				Principal:    rapid.SampledFrom(principals[:2]).Draw(t, "req principal"),
				Host:         rapid.SampledFrom([]string{"", "10.0.0.1", "10.0.0.2", "0:0::1"}).Draw(t, "req host"),
				Operation:    rapid.SampledFrom([]Operation{Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs}).Draw(t, "req op"),
				ResourceType: rapid.SampledFrom([]ResourceType{Topic, Group, Mirror}).Draw(t, "req type"),
				ResourceName: rapid.SampledFrom(names[:6]).Draw(t, "req name"),
			}
			got, want := a.Authorize(r), naive(cfg, bindings, r)
			if got != want {
				t.Fatalf("Authorize(%+v)\n got %+v\nwant %+v", r, got, want)
			}
		}
	})
}

// TestMatchFilterAgreesWithAuthorize checks that a Match filter for a
// resource selects exactly the bindings that name the resource when
// authorizing, and that Bindings and Match agree with a sort and a scan.
func TestMatchFilterAgreesWithAuthorize(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bindings := rapid.SliceOfN(rapid.Custom(genBinding), 0, 30).Draw(t, "bindings")
		a := New(Config{}, bindings)
		sorted := slices.Clone(bindings)
		slices.SortFunc(sorted, Compare)
		sorted = slices.Compact(sorted)
		if got := a.Bindings(); !slices.Equal(got, sorted) {
			t.Fatalf("Bindings() = %v, want %v", got, sorted)
		}
		rt := rapid.SampledFrom([]ResourceType{Topic, Group, Cluster, Mirror}).Draw(t, "filter type")
		name := rapid.SampledFrom(genNames[1:]).Draw(t, "filter name")
		f := Filter{ResourceType: rt, ResourceName: name, PatternType: Match, Operation: AnyOperation, Permission: AnyPermission}
		var want []Binding
		for _, b := range sorted {
			if naiveNames(b, rt, name) {
				want = append(want, b)
			}
		}
		if got := a.Match(f); !slices.Equal(got, want) {
			t.Fatalf("Match(%v) = %v, want %v", f, got, want)
		}
	})
}
