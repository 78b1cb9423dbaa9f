package acl

import "testing"

// TestAuthorizeAny: Kafka's authorizeByResourceType, as KIP-679 uses it
// for idempotent producers: an ALLOW of the operation (or one implying it)
// on any pattern of the type suffices unless a DENY covers it; a DENY on
// "*" covers everything; super users pass; with no binding of the type
// allow.everyone.if.no.acl.found decides.
func TestAuthorizeAny(t *testing.T) {
	b := func(name string, pt PatternType, principal string, op Operation, perm Permission) Binding {
		return Binding{ResourceType: Topic, ResourceName: name, PatternType: pt, Principal: principal, Host: Wildcard, Operation: op, Permission: perm}
	}
	req := Request{Principal: "User:alice", Host: "10.0.0.1", Operation: Write, ResourceType: Topic}
	for _, tc := range []struct {
		name     string
		cfg      Config
		bindings []Binding
		want     bool
	}{
		{"no bindings", Config{}, nil, false},
		{"no bindings, allow everyone", Config{AllowEveryoneIfNoACLFound: true}, nil, true},
		{"bindings of another type only, allow everyone", Config{AllowEveryoneIfNoACLFound: true},
			[]Binding{{ResourceType: Group, ResourceName: "g", PatternType: Literal, Principal: "User:bob", Host: Wildcard, Operation: Read, Permission: Allow}}, true},
		{"super user", Config{SuperUsers: []string{"User:alice"}}, []Binding{b("*", Literal, "User:alice", All, Deny)}, true},
		{"write on one topic", Config{}, []Binding{b("orders", Literal, "User:alice", Write, Allow)}, true},
		{"All on a prefix", Config{}, []Binding{b("logs.", Prefixed, "User:alice", All, Allow)}, true},
		{"every user", Config{}, []Binding{b("orders", Literal, "User:*", Write, Allow)}, true},
		{"read only", Config{}, []Binding{b("orders", Literal, "User:alice", Read, Allow)}, false},
		{"someone else's", Config{}, []Binding{b("orders", Literal, "User:bob", Write, Allow)}, false},
		{"denied on the same topic", Config{}, []Binding{b("orders", Literal, "User:alice", Write, Allow), b("orders", Literal, "User:alice", Write, Deny)}, false},
		{"denied by a covering prefix", Config{}, []Binding{b("logs.app", Prefixed, "User:alice", Write, Allow), b("logs.", Prefixed, "User:*", All, Deny)}, false},
		{"a narrower deny leaves the prefix", Config{}, []Binding{b("logs.", Prefixed, "User:alice", Write, Allow), b("logs.app", Prefixed, "User:alice", Write, Deny)}, true},
		{"denied everywhere", Config{}, []Binding{b("orders", Literal, "User:alice", Write, Allow), b("*", Literal, "User:alice", Write, Deny)}, false},
		{"deny of another operation", Config{}, []Binding{b("orders", Literal, "User:alice", Write, Allow), b("*", Literal, "User:alice", Read, Deny)}, true},
		{"other host", Config{}, []Binding{{ResourceType: Topic, ResourceName: "orders", PatternType: Literal, Principal: "User:alice", Host: "10.9.9.9", Operation: Write, Permission: Allow}}, false},
	} {
		if got := New(tc.cfg, tc.bindings).AuthorizeAny(req); got.Allowed != tc.want {
			t.Errorf("%s: %+v, want allowed %v", tc.name, got, tc.want)
		}
	}
}
