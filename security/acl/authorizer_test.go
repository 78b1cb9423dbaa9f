package acl

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// bind builds a binding tersely for the tables.
func bind(perm Permission, op Operation, rt ResourceType, pt PatternType, name, principal, host string) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func req(principal, host string, op Operation, rt ResourceType, name string) Request {
	return Request{Principal: principal, Host: host, Operation: op, ResourceType: rt, ResourceName: name}
}

const (
	alice = "User:alice"
	bob   = "User:bob"
	admin = "User:admin"
	anyP  = WildcardPrincipal
	anyH  = Wildcard
)

var (
	noACLFalse = "no ACL matches the resource; allow.everyone.if.no.acl.found=false"
	noACLTrue  = "no ACL matches the resource; allow.everyone.if.no.acl.found=true"
)

type authCase struct {
	name     string
	cfg      Config
	bindings []Binding
	req      Request
	allowed  bool
	// by is the index in bindings of the deciding binding, or -1 when reason
	// is the expected reason instead. A reason starting with "~" need only be
	// contained in the actual reason.
	by     int
	reason string
}

func runAuthCases(t *testing.T, cases []authCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := New(c.cfg, c.bindings).Authorize(c.req)
			want := c.reason
			if c.by >= 0 {
				prefix := "denied by "
				if c.allowed {
					prefix = "allowed by "
				}
				want = prefix + c.bindings[c.by].String()
			}
			okReason := d.Reason == want
			if w, found := strings.CutPrefix(want, "~"); found {
				okReason = strings.Contains(d.Reason, w)
			}
			if d.Allowed != c.allowed || !okReason {
				t.Errorf("Authorize(%+v) = %+v\nwant allowed=%v reason %q", c.req, d, c.allowed, want)
			}
		})
	}
}

func TestSuperUsers(t *testing.T) {
	su := Config{SuperUsers: []string{admin, "User:ops"}}
	runAuthCases(t, []authCase{
		{"super user without ACLs", su, nil, req(admin, "", Alter, Cluster, ClusterName), true, -1, "super user"},
		{"second super user", su, nil, req("User:ops", "1.2.3.4", Delete, Topic, "t"), true, -1, "super user"},
		{"super user beats deny all", su, []Binding{
			bind(Deny, All, Topic, Literal, "t", admin, anyH),
			bind(Deny, All, Topic, Literal, "*", anyP, anyH),
		}, req(admin, "", Write, Topic, "t"), true, -1, "super user"},
		{"super user beats missing allow", su, []Binding{
			bind(Allow, Read, Topic, Literal, "t", bob, anyH),
		}, req(admin, "", Write, Topic, "t"), true, -1, "super user"},
		{"super user names are exact", su, nil, req("User:Admin", "", Read, Topic, "t"), false, -1, noACLFalse},
		{"not a super user", su, nil, req("User:admin2", "", Read, Topic, "t"), false, -1, noACLFalse},
		{"invalid request even for super user", su, nil, req(admin, "", All, Topic, "t"), false, -1, "~Operation All"},
	})
}

func TestResourceMatching(t *testing.T) {
	runAuthCases(t, []authCase{
		{"literal equal", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "orders", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), true, 0, ""},
		{"literal other name", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "orders", alice, anyH),
		}, req(alice, "", Read, Topic, "orders2"), false, -1, noACLFalse},
		{"literal is not a prefix", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "ord", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), false, -1, noACLFalse},
		{"names are case-sensitive", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "Orders", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), false, -1, noACLFalse},
		{"literal wildcard", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "*", alice, anyH),
		}, req(alice, "", Read, Topic, "anything"), true, 0, ""},
		{"prefixed", Config{}, []Binding{
			bind(Allow, Read, Topic, Prefixed, "ord", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), true, 0, ""},
		{"prefixed whole name", Config{}, []Binding{
			bind(Allow, Read, Topic, Prefixed, "orders", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), true, 0, ""},
		{"prefix longer than name", Config{}, []Binding{
			bind(Allow, Read, Topic, Prefixed, "orders.", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), false, -1, noACLFalse},
		{"prefix not a prefix", Config{}, []Binding{
			bind(Allow, Read, Topic, Prefixed, "rders", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), false, -1, noACLFalse},
		{"prefixed star is literal text", Config{}, []Binding{
			bind(Allow, Read, Topic, Prefixed, "*", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), false, -1, noACLFalse},
		{"several prefix lengths", Config{}, []Binding{
			bind(Allow, Write, Topic, Prefixed, "a", alice, anyH),
			bind(Allow, Read, Topic, Prefixed, "abc", alice, anyH),
			bind(Allow, Read, Topic, Prefixed, "abd", alice, anyH),
			bind(Allow, Read, Topic, Prefixed, "abcdef", alice, anyH),
		}, req(alice, "", Read, Topic, "abcde"), true, 1, ""},
		{"other resource type", Config{}, []Binding{
			bind(Allow, Read, Group, Literal, "orders", alice, anyH),
			bind(Allow, Read, Mirror, Literal, "*", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), false, -1, noACLFalse},
		{"wildcard of other type", Config{}, []Binding{
			bind(Allow, Read, Group, Literal, "*", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), false, -1, noACLFalse},
		{"mirror", Config{}, []Binding{
			bind(Allow, Read, Mirror, Literal, "east", "User:dest", anyH),
			bind(Allow, All, Topic, Literal, "east", alice, anyH),
		}, req("User:dest", "", Read, Mirror, "east"), true, 0, ""},
		{"mirror is not topic", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "east", alice, anyH),
		}, req(alice, "", Read, Mirror, "east"), false, -1, noACLFalse},
		{"cluster", Config{}, []Binding{
			bind(Allow, ClusterAction, Cluster, Literal, ClusterName, "User:broker", anyH),
		}, req("User:broker", "", ClusterAction, Cluster, ClusterName), true, 0, ""},
		{"literal first reported", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "*", alice, anyH),
			bind(Allow, Read, Topic, Literal, "orders", alice, anyH),
			bind(Allow, Read, Topic, Prefixed, "o", alice, anyH),
		}, req(alice, "", Read, Topic, "orders"), true, 0, ""},
	})
}

func TestPrincipalMatching(t *testing.T) {
	runAuthCases(t, []authCase{
		{"equal", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), true, 0, ""},
		{"other principal", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", bob, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"principals are case-sensitive", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", "User:Alice", anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"wildcard user", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", anyP, anyH),
		}, req(bob, "", Read, Topic, "t"), true, 0, ""},
		{"wildcard user matches any principal type", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", anyP, anyH),
		}, req("ServiceAccount:ci", "", Read, Topic, "t"), true, 0, ""},
		{"only User:* is a wildcard", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", "Group:*", anyH),
		}, req("Group:ops", "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"no partial wildcard", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", "User:al*", anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"wildcard with prefixed", Config{}, []Binding{
			bind(Allow, Write, Topic, Prefixed, "logs-", anyP, anyH),
		}, req(bob, "", Write, Topic, "logs-1"), true, 0, ""},
	})
}

func TestHostMatching(t *testing.T) {
	runAuthCases(t, []authCase{
		{"wildcard host", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "10.0.0.9", Read, Topic, "t"), true, 0, ""},
		{"wildcard host, unknown client", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), true, 0, ""},
		{"equal host", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, "10.0.0.1"),
		}, req(alice, "10.0.0.1", Read, Topic, "t"), true, 0, ""},
		{"other host", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, "10.0.0.1"),
		}, req(alice, "10.0.0.2", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"unknown client host", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, "10.0.0.1"),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"ipv6 spellings", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, "0:0:0:0:0:0:0:1"),
		}, req(alice, "::1", Read, Topic, "t"), true, 0, ""},
		{"ipv4-mapped client", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, "10.0.0.1"),
		}, req(alice, "::ffff:10.0.0.1", Read, Topic, "t"), true, 0, ""},
		{"ipv4-mapped binding", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, "::ffff:10.0.0.1"),
		}, req(alice, "10.0.0.1", Read, Topic, "t"), true, 0, ""},
		{"deny from one host", Config{}, []Binding{
			bind(Deny, Read, Topic, Literal, "t", alice, "10.0.0.66"),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "10.0.0.66", Read, Topic, "t"), false, 0, ""},
		{"deny from other host", Config{}, []Binding{
			bind(Deny, Read, Topic, Literal, "t", alice, "10.0.0.66"),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "10.0.0.1", Read, Topic, "t"), true, 1, ""},
		{"deny host, unknown client", Config{}, []Binding{
			bind(Deny, Read, Topic, Literal, "t", alice, "10.0.0.66"),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), true, 1, ""},
		{"host name binding is text", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, "localhost"),
		}, req(alice, "127.0.0.1", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
	})
}

func TestOperations(t *testing.T) {
	var cases []authCase
	// Which requested operations an ALLOW binding for each operation grants.
	grants := map[Operation][]Operation{
		All:             {Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens},
		Read:            {Read, Describe},
		Write:           {Write, Describe},
		Delete:          {Delete, Describe},
		Alter:           {Alter, Describe},
		AlterConfigs:    {AlterConfigs, DescribeConfigs},
		Describe:        {Describe},
		DescribeConfigs: {DescribeConfigs},
		Create:          {Create},
		ClusterAction:   {ClusterAction},
		IdempotentWrite: {IdempotentWrite},
		CreateTokens:    {CreateTokens},
		DescribeTokens:  {DescribeTokens},
	}
	for have, ops := range grants {
		for op := Read; op <= DescribeTokens; op++ {
			c := authCase{
				name:     fmt.Sprintf("allow %v, request %v", have, op),
				bindings: []Binding{bind(Allow, have, Topic, Literal, "t", alice, anyH)},
				req:      req(alice, "", op, Topic, "t"),
				by:       -1,
				reason:   "no matching ALLOW ACL",
			}
			if slices.Contains(ops, op) {
				c.allowed, c.by = true, 0
			}
			cases = append(cases, c)
			// A DENY binding denies only its own operation, or all for All.
			d := authCase{
				name:     fmt.Sprintf("deny %v, allow All, request %v", have, op),
				bindings: []Binding{bind(Deny, have, Topic, Literal, "t", alice, anyH), bind(Allow, All, Topic, Literal, "t", alice, anyH)},
				req:      req(alice, "", op, Topic, "t"),
				allowed:  true,
				by:       1,
			}
			if have == op || have == All {
				d.allowed, d.by = false, 0
			}
			cases = append(cases, d)
		}
	}
	runAuthCases(t, cases)
}

func TestDenyWins(t *testing.T) {
	runAuthCases(t, []authCase{
		{"deny beats allow", Config{}, []Binding{
			bind(Deny, Read, Topic, Literal, "t", alice, anyH),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), false, 0, ""},
		{"deny all beats allow", Config{}, []Binding{
			bind(Deny, All, Topic, Literal, "t", alice, anyH),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), false, 0, ""},
		{"deny all denies describe", Config{}, []Binding{
			bind(Deny, All, Topic, Literal, "t", alice, anyH),
			bind(Allow, Describe, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Describe, Topic, "t"), false, 0, ""},
		{"deny read leaves write", Config{}, []Binding{
			bind(Deny, Read, Topic, Literal, "t", alice, anyH),
			bind(Allow, All, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Write, Topic, "t"), true, 1, ""},
		{"deny read does not deny implied describe", Config{}, []Binding{
			bind(Deny, Read, Topic, Literal, "t", alice, anyH),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Describe, Topic, "t"), true, 1, ""},
		{"deny alter configs does not deny describe configs", Config{}, []Binding{
			bind(Deny, AlterConfigs, Topic, Literal, "t", alice, anyH),
			bind(Allow, AlterConfigs, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", DescribeConfigs, Topic, "t"), true, 1, ""},
		{"deny describe beats implied describe", Config{}, []Binding{
			bind(Deny, Describe, Topic, Literal, "t", alice, anyH),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Describe, Topic, "t"), false, 0, ""},
		{"deny for wildcard principal", Config{}, []Binding{
			bind(Deny, Write, Topic, Literal, "t", anyP, anyH),
			bind(Allow, Write, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Write, Topic, "t"), false, 0, ""},
		{"deny prefixed beats allow literal", Config{}, []Binding{
			bind(Deny, Write, Topic, Prefixed, "secret-", alice, anyH),
			bind(Allow, Write, Topic, Literal, "secret-plans", alice, anyH),
		}, req(alice, "", Write, Topic, "secret-plans"), false, 0, ""},
		{"deny wildcard name beats allow literal", Config{}, []Binding{
			bind(Allow, Write, Topic, Literal, "t", alice, anyH),
			bind(Deny, Write, Topic, Literal, "*", alice, anyH),
		}, req(alice, "", Write, Topic, "t"), false, 1, ""},
		{"deny for other principal", Config{}, []Binding{
			bind(Deny, Read, Topic, Literal, "t", bob, anyH),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), true, 1, ""},
		{"deny on other resource", Config{}, []Binding{
			bind(Deny, Read, Topic, Literal, "u", alice, anyH),
			bind(Allow, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), true, 1, ""},
		{"deny without allow", Config{AllowEveryoneIfNoACLFound: true}, []Binding{
			bind(Deny, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), false, 0, ""},
		{"first deny in Compare order reported", Config{}, []Binding{
			bind(Deny, All, Topic, Literal, "t", alice, anyH),
			bind(Deny, Read, Topic, Literal, "t", alice, anyH),
			bind(Deny, Read, Topic, Literal, "*", anyP, anyH), // "*" sorts before "t"
		}, req(alice, "", Read, Topic, "t"), false, 2, ""},
	})
}

func TestNoACLFound(t *testing.T) {
	everyone := Config{AllowEveryoneIfNoACLFound: true}
	runAuthCases(t, []authCase{
		{"no bindings, default false", Config{}, nil, req(alice, "", Read, Topic, "t"), false, -1, noACLFalse},
		{"no bindings, true", everyone, nil, req(alice, "", Read, Topic, "t"), true, -1, noACLTrue},
		{"bindings elsewhere, true", everyone, []Binding{
			bind(Allow, Read, Topic, Literal, "u", bob, anyH),
			bind(Deny, Read, Topic, Prefixed, "tt", alice, anyH),
			bind(Deny, All, Group, Literal, "t", alice, anyH),
			bind(Deny, All, Group, Literal, "*", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), true, -1, noACLTrue},
		{"bindings elsewhere, false", Config{}, []Binding{
			bind(Allow, Read, Topic, Literal, "u", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, noACLFalse},
		{"binding for another principal names the resource", everyone, []Binding{
			bind(Allow, Read, Topic, Literal, "t", bob, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"binding for another host names the resource", everyone, []Binding{
			bind(Allow, Read, Topic, Literal, "t", alice, "10.0.0.1"),
		}, req(alice, "10.0.0.2", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"binding for another operation names the resource", everyone, []Binding{
			bind(Allow, Write, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"deny for another principal names the resource", everyone, []Binding{
			bind(Deny, Read, Topic, Literal, "t", bob, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"wildcard name names the resource", everyone, []Binding{
			bind(Allow, Read, Topic, Literal, "*", bob, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"prefix names the resource", everyone, []Binding{
			bind(Allow, Read, Topic, Prefixed, "t", bob, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
	})
}

func TestRequestValidation(t *testing.T) {
	everyone := Config{AllowEveryoneIfNoACLFound: true}
	allowAll := []Binding{bind(Allow, All, Topic, Literal, "*", anyP, anyH)}
	runAuthCases(t, []authCase{
		{"unknown operation", everyone, allowAll, req(alice, "", UnknownOperation, Topic, "t"), false, -1, "~Operation Unknown"},
		{"any operation", everyone, allowAll, req(alice, "", AnyOperation, Topic, "t"), false, -1, "~Operation Any"},
		{"all operation", everyone, allowAll, req(alice, "", All, Topic, "t"), false, -1, "~Operation All"},
		{"undefined operation", everyone, allowAll, req(alice, "", 99, Topic, "t"), false, -1, "~Operation(99)"},
		{"negative operation", everyone, allowAll, req(alice, "", -1, Topic, "t"), false, -1, "~Operation(-1)"},
		{"unknown type", everyone, allowAll, req(alice, "", Read, UnknownResourceType, "t"), false, -1, "~ResourceType Unknown"},
		{"any type", everyone, allowAll, req(alice, "", Read, AnyResourceType, "t"), false, -1, "~ResourceType Any"},
		{"undefined type", everyone, allowAll, req(alice, "", Read, 99, "t"), false, -1, "~ResourceType(99)"},
		{"no principal", everyone, allowAll, req("", "", Read, Topic, "t"), false, -1, `~Principal ""`},
		{"valid", everyone, allowAll, req(alice, "", Read, Topic, "t"), true, 0, ""},
	})
	if err := (Request{}).Validate(); err == nil {
		t.Error("zero Request validates")
	}
}

func TestInvalidBindings(t *testing.T) {
	everyone := Config{AllowEveryoneIfNoACLFound: true}
	runAuthCases(t, []authCase{
		{"unknown operation names the resource", everyone, []Binding{
			bind(Allow, UnknownOperation, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"any operation grants nothing", everyone, []Binding{
			bind(Allow, AnyOperation, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"unknown permission names the resource", everyone, []Binding{
			bind(UnknownPermission, Read, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), false, -1, "no matching ALLOW ACL"},
		{"match pattern applies to nothing", everyone, []Binding{
			bind(Deny, All, Topic, Match, "t", alice, anyH),
		}, req(alice, "", Read, Topic, "t"), true, -1, noACLTrue},
		{"operation invalid for type still applies", Config{}, []Binding{
			bind(Allow, ClusterAction, Topic, Literal, "t", alice, anyH),
		}, req(alice, "", ClusterAction, Topic, "t"), true, 0, ""},
	})
}

func TestNewCopiesInputs(t *testing.T) {
	users := []string{admin}
	bs := []Binding{bind(Allow, Read, Topic, Literal, "t", alice, anyH)}
	a := New(Config{SuperUsers: users}, bs)
	users[0] = "User:mallory"
	bs[0].Principal = "User:mallory"
	if d := a.Authorize(req(admin, "", Read, Topic, "x")); !d.Allowed {
		t.Errorf("super user lost: %+v", d)
	}
	if d := a.Authorize(req(alice, "", Read, Topic, "t")); !d.Allowed {
		t.Errorf("binding changed: %+v", d)
	}
	got := a.Bindings()
	got[0].Principal = "User:eve"
	if a.Bindings()[0].Principal != alice {
		t.Error("Bindings shares storage")
	}
	m := a.Match(Filter{ResourceType: AnyResourceType, PatternType: AnyPatternType, Operation: AnyOperation, Permission: AnyPermission})
	m[0].Principal = "User:eve"
	if a.Bindings()[0].Principal != alice {
		t.Error("Match shares storage")
	}
}

func TestBindingsAndMatch(t *testing.T) {
	bs := []Binding{
		bind(Allow, Read, Topic, Prefixed, "ord", alice, anyH),
		bind(Allow, Read, Group, Literal, "g", alice, anyH),
		bind(Deny, Write, Topic, Literal, "orders", bob, anyH),
		bind(Allow, Read, Topic, Literal, "*", anyP, anyH),
		bind(Allow, Read, Topic, Prefixed, "ord", alice, anyH), // duplicate
		bind(Allow, Alter, Mirror, Literal, "east", alice, "10.0.0.1"),
	}
	a := New(Config{}, bs)
	want := []Binding{bs[3], bs[2], bs[0], bs[1], bs[5]}
	if got := a.Bindings(); !slices.Equal(got, want) {
		t.Errorf("Bindings() =\n%v\nwant\n%v", got, want)
	}
	if a.Len() != 5 {
		t.Errorf("Len() = %d", a.Len())
	}
	anyF := Filter{ResourceType: AnyResourceType, PatternType: AnyPatternType, Operation: AnyOperation, Permission: AnyPermission}
	for _, c := range []struct {
		name string
		f    Filter
		want []Binding
	}{
		{"all", anyF, want},
		{"match orders", func() Filter {
			f := anyF
			f.ResourceType, f.PatternType, f.ResourceName = Topic, Match, "orders"
			return f
		}(), []Binding{bs[3], bs[2], bs[0]}},
		{"any pattern orders", func() Filter { f := anyF; f.ResourceName = "orders"; return f }(), []Binding{bs[2]}},
		{"alice", func() Filter { f := anyF; f.Principal = alice; return f }(), []Binding{bs[0], bs[1], bs[5]}},
		{"deny", func() Filter { f := anyF; f.Permission = Deny; return f }(), []Binding{bs[2]}},
		{"host", func() Filter { f := anyF; f.Host = "::ffff:10.0.0.1"; return f }(), []Binding{bs[5]}},
		{"none", func() Filter { f := anyF; f.ResourceType = User; return f }(), nil},
	} {
		if got := a.Match(c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestNilAuthorizer(t *testing.T) {
	var a *Authorizer
	if d := a.Authorize(req(alice, "", Read, Topic, "t")); d.Allowed || d.Reason != noACLFalse {
		t.Errorf("nil Authorize = %+v", d)
	}
	if a.Bindings() != nil || a.Match(Filter{}) != nil || a.Len() != 0 {
		t.Error("nil authorizer has bindings")
	}
}

func TestConcurrentUse(t *testing.T) {
	bs := []Binding{
		bind(Allow, Read, Topic, Prefixed, "t", anyP, anyH),
		bind(Deny, Read, Topic, Literal, "t9", alice, anyH),
	}
	a := New(Config{}, bs)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				name := fmt.Sprintf("t%d", (g+i)%10)
				d := a.Authorize(req(alice, "10.0.0.1", Read, Topic, name))
				if d.Allowed == (name == "t9") {
					t.Errorf("%s: %+v", name, d)
					return
				}
			}
		})
	}
	wg.Wait()
}
