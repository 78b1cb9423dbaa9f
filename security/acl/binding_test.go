package acl

import (
	"slices"
	"strings"
	"testing"
)

// valid is a binding that passes Validate; tests change one field.
var valid = Binding{
	ResourceType: Topic, ResourceName: "orders", PatternType: Literal,
	Principal: "User:alice", Host: "*", Operation: Read, Permission: Allow,
}

func with(f func(*Binding)) Binding {
	b := valid
	f(&b)
	return b
}

func TestBindingValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		b    Binding
		want []string // substrings of the error; none means valid
	}{
		{"valid", valid, nil},
		{"prefixed", with(func(b *Binding) { b.PatternType = Prefixed }), nil},
		{"literal wildcard name", with(func(b *Binding) { b.ResourceName = "*" }), nil},
		{"wildcard principal", with(func(b *Binding) { b.Principal = "User:*" }), nil},
		{"other principal type", with(func(b *Binding) { b.Principal = "Group:ops" }), nil},
		{"principal name with colon", with(func(b *Binding) { b.Principal = "User:CN=a:b,O=c" }), nil},
		{"ipv4 host", with(func(b *Binding) { b.Host = "10.1.2.3" }), nil},
		{"ipv6 host", with(func(b *Binding) { b.Host = "2001:db8::1" }), nil},
		{"deny", with(func(b *Binding) { b.Permission = Deny }), nil},
		{"all", with(func(b *Binding) { b.Operation = All }), nil},
		{"cluster", with(func(b *Binding) {
			b.ResourceType, b.ResourceName, b.Operation = Cluster, ClusterName, IdempotentWrite
		}), nil},
		{"mirror", with(func(b *Binding) { b.ResourceType, b.ResourceName = Mirror, "east" }), nil},

		{"unknown type", with(func(b *Binding) { b.ResourceType = UnknownResourceType }), []string{"ResourceType", "Unknown"}},
		{"any type", with(func(b *Binding) { b.ResourceType = AnyResourceType }), []string{"ResourceType", "Any", "Topic, Group"}},
		{"undefined type", with(func(b *Binding) { b.ResourceType = 9 }), []string{"ResourceType", "ResourceType(9)"}},
		{"unknown pattern", with(func(b *Binding) { b.PatternType = UnknownPatternType }), []string{"PatternType", "Unknown"}},
		{"any pattern", with(func(b *Binding) { b.PatternType = AnyPatternType }), []string{"PatternType", "Any"}},
		{"match pattern", with(func(b *Binding) { b.PatternType = Match }), []string{"PatternType", "Match"}},
		{"empty name", with(func(b *Binding) { b.ResourceName = "" }), []string{"ResourceName", `""`, "empty"}},
		{"prefixed wildcard", with(func(b *Binding) { b.PatternType, b.ResourceName = Prefixed, "*" }), []string{"ResourceName", `"*"`, "Prefixed"}},
		{"cluster name", with(func(b *Binding) {
			b.ResourceType, b.ResourceName, b.Operation = Cluster, "other", Alter
		}), []string{"ResourceName", `"other"`, ClusterName}},
		{"no principal", with(func(b *Binding) { b.Principal = "" }), []string{"Principal", `""`}},
		{"principal without type", with(func(b *Binding) { b.Principal = "alice" }), []string{"Principal", `"alice"`, "Type:name"}},
		{"empty principal type", with(func(b *Binding) { b.Principal = ":alice" }), []string{"Principal", `":alice"`, "type"}},
		{"empty principal name", with(func(b *Binding) { b.Principal = "User:" }), []string{"Principal", `"User:"`, "name"}},
		{"host name", with(func(b *Binding) { b.Host = "localhost" }), []string{"Host", `"localhost"`, "IP"}},
		{"empty host", with(func(b *Binding) { b.Host = "" }), []string{"Host", `""`}},
		{"cidr host", with(func(b *Binding) { b.Host = "10.0.0.0/8" }), []string{"Host", `"10.0.0.0/8"`}},
		{"unknown op", with(func(b *Binding) { b.Operation = UnknownOperation }), []string{"Operation", "Unknown"}},
		{"any op", with(func(b *Binding) { b.Operation = AnyOperation }), []string{"Operation", "Any"}},
		{"undefined op", with(func(b *Binding) { b.Operation = 15 }), []string{"Operation", "Operation(15)"}},
		{"op for type", with(func(b *Binding) { b.Operation = ClusterAction }), []string{"Operation", "ClusterAction", "Topic", "valid: All, Read"}},
		{"unknown permission", with(func(b *Binding) { b.Permission = UnknownPermission }), []string{"Permission", "Unknown"}},
		{"any permission", with(func(b *Binding) { b.Permission = AnyPermission }), []string{"Permission", "Any"}},
		{"several", Binding{}, []string{"ResourceType", "PatternType", "ResourceName", "Principal", "Host", "Operation", "Permission"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.b.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestOperationValidity checks Validate against the per-resource table for
// every operation, each way.
func TestOperationValidity(t *testing.T) {
	allowed := map[ResourceType][]Operation{
		Topic:           {Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, All},
		Group:           {Read, Describe, Delete, All},
		Cluster:         {Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe, All},
		TransactionalID: {Describe, Write, All},
		DelegationToken: {Describe, All},
		User:            {CreateTokens, DescribeTokens, All},
		Mirror:          {Describe, Alter, Read, Create, Delete, All},
	}
	for rt, ops := range allowed {
		name := "x"
		if rt == Cluster {
			name = ClusterName
		}
		for op := All; op <= DescribeTokens; op++ {
			b := with(func(b *Binding) { b.ResourceType, b.ResourceName, b.Operation = rt, name, op })
			err := b.Validate()
			if want := slices.Contains(ops, op); (err == nil) != want {
				t.Errorf("%v %v: Validate() = %v, want valid=%v", rt, op, err, want)
			}
		}
	}
}

func TestValidateAll(t *testing.T) {
	if err := ValidateAll([]Binding{valid, valid}); err != nil {
		t.Fatal(err)
	}
	err := ValidateAll([]Binding{valid, with(func(b *Binding) { b.Host = "nowhere" })})
	if err == nil || !strings.Contains(err.Error(), "binding 1") || !strings.Contains(err.Error(), `"nowhere"`) {
		t.Fatalf("ValidateAll = %v", err)
	}
}

func TestBindingString(t *testing.T) {
	for _, c := range []struct {
		b    Binding
		want string
	}{
		{valid, "Allow principal=User:alice host=* operation=Read resource=Topic:orders pattern=Literal"},
		{with(func(b *Binding) {
			b.ResourceType, b.ResourceName, b.PatternType, b.Permission, b.Operation, b.Host = Mirror, "east", Prefixed, Deny, Alter, "::1"
		}), "Deny principal=User:alice host=::1 operation=Alter resource=Mirror:east pattern=Prefixed"},
		{with(func(b *Binding) { b.ResourceName, b.Principal = "a b", "User:x=y" }),
			`Allow principal="User:x=y" host=* operation=Read resource=Topic:"a b" pattern=Literal`},
		{Binding{}, `Unknown principal="" host="" operation=Unknown resource=Unknown:"" pattern=Unknown`},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("String() = %s\nwant        %s", got, c.want)
		}
	}
	f := Filter{ResourceType: AnyResourceType, PatternType: Match, ResourceName: "t", Operation: AnyOperation, Permission: AnyPermission}
	if got, want := f.String(), "Any principal=<any> host=<any> operation=Any resource=Any:t pattern=Match"; got != want {
		t.Errorf("Filter.String() = %s, want %s", got, want)
	}
}

func TestCompareAndSort(t *testing.T) {
	a := valid
	b := with(func(b *Binding) { b.Permission = Deny })
	c := with(func(b *Binding) { b.ResourceType = Group })
	d := with(func(b *Binding) { b.PatternType = Prefixed })
	e := with(func(b *Binding) { b.ResourceName = "a" })
	got := SortBindings([]Binding{c, d, b, a, e, a, c})
	want := []Binding{e, b, a, d, c} // Deny (2) sorts before Allow (3)
	if !slices.Equal(got, want) {
		t.Errorf("SortBindings = %v\nwant %v", got, want)
	}
	if Compare(a, a) != 0 || Compare(b, a) != -1 || Compare(a, b) != 1 {
		t.Error("Compare is not a three-way comparison")
	}
}

func TestFilterValidate(t *testing.T) {
	any := Filter{ResourceType: AnyResourceType, PatternType: AnyPatternType, Operation: AnyOperation, Permission: AnyPermission}
	for _, c := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"any", any, nil},
		{"match", Filter{ResourceType: Topic, PatternType: Match, ResourceName: "x", Operation: All, Permission: Deny, Principal: "User:*", Host: "*"}, nil},
		{"binding", valid.Filter(), nil},
		{"zero", Filter{}, []string{"ResourceType Unknown", "PatternType Unknown", "Operation Unknown", "Permission Unknown"}},
		{"undefined", Filter{ResourceType: 8, PatternType: 5, Operation: 15, Permission: 4},
			[]string{"ResourceType(8)", "PatternType(5)", "Operation(15)", "Permission(4)"}},
		{"principal", func() Filter { f := any; f.Principal = "alice"; return f }(), []string{"Principal", `"alice"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.f.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestFilterMatches(t *testing.T) {
	lit := func(name string) Binding { return with(func(b *Binding) { b.ResourceName = name }) }
	pre := func(name string) Binding {
		return with(func(b *Binding) { b.ResourceName, b.PatternType = name, Prefixed })
	}
	anyF := Filter{ResourceType: AnyResourceType, PatternType: AnyPatternType, Operation: AnyOperation, Permission: AnyPermission}
	f := func(m func(*Filter)) Filter { x := anyF; m(&x); return x }
	for _, c := range []struct {
		name string
		f    Filter
		b    Binding
		want bool
	}{
		{"any matches all", anyF, valid, true},
		{"any matches prefixed", anyF, pre("o"), true},
		{"type equal", f(func(x *Filter) { x.ResourceType = Topic }), valid, true},
		{"type differs", f(func(x *Filter) { x.ResourceType = Group }), valid, false},

		{"match literal same name", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "orders" }), lit("orders"), true},
		{"match literal wildcard", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "orders" }), lit("*"), true},
		{"match literal other", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "orders" }), lit("order"), false},
		{"match prefixed prefix", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "orders" }), pre("ord"), true},
		{"match prefixed whole", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "orders" }), pre("orders"), true},
		{"match prefixed longer", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "orders" }), pre("orders."), false},
		{"match prefixed other", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "orders" }), pre("x"), false},
		{"match no name", f(func(x *Filter) { x.PatternType = Match }), pre("x"), true},
		{"match wildcard name", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "*" }), lit("*"), true},
		{"match wildcard name literal", f(func(x *Filter) { x.PatternType, x.ResourceName = Match, "*" }), lit("a"), false},

		{"any pattern exact literal", f(func(x *Filter) { x.ResourceName = "orders" }), lit("orders"), true},
		{"any pattern exact prefixed", f(func(x *Filter) { x.ResourceName = "orders" }), pre("orders"), true},
		{"any pattern no wildcard", f(func(x *Filter) { x.ResourceName = "orders" }), lit("*"), false},
		{"any pattern no prefix", f(func(x *Filter) { x.ResourceName = "orders" }), pre("ord"), false},

		{"literal exact", f(func(x *Filter) { x.PatternType, x.ResourceName = Literal, "orders" }), lit("orders"), true},
		{"literal vs prefixed", f(func(x *Filter) { x.PatternType, x.ResourceName = Literal, "orders" }), pre("orders"), false},
		{"literal no wildcard", f(func(x *Filter) { x.PatternType, x.ResourceName = Literal, "orders" }), lit("*"), false},
		{"literal any name", f(func(x *Filter) { x.PatternType = Literal }), lit("x"), true},
		{"prefixed exact", f(func(x *Filter) { x.PatternType, x.ResourceName = Prefixed, "ord" }), pre("ord"), true},
		{"prefixed no prefix", f(func(x *Filter) { x.PatternType, x.ResourceName = Prefixed, "orders" }), pre("ord"), false},
		{"prefixed vs literal", f(func(x *Filter) { x.PatternType = Prefixed }), lit("x"), false},

		{"principal equal", f(func(x *Filter) { x.Principal = "User:alice" }), valid, true},
		{"principal differs", f(func(x *Filter) { x.Principal = "User:bob" }), valid, false},
		{"principal wildcard is exact", f(func(x *Filter) { x.Principal = "User:*" }), valid, false},
		{"principal wildcard binding", f(func(x *Filter) { x.Principal = "User:*" }), with(func(b *Binding) { b.Principal = "User:*" }), true},
		{"host wildcard is exact", f(func(x *Filter) { x.Host = "*" }), with(func(b *Binding) { b.Host = "1.2.3.4" }), false},
		{"host equal", f(func(x *Filter) { x.Host = "1.2.3.4" }), with(func(b *Binding) { b.Host = "1.2.3.4" }), true},
		{"host same address", f(func(x *Filter) { x.Host = "0:0:0:0:0:0:0:1" }), with(func(b *Binding) { b.Host = "::1" }), true},
		{"host mapped", f(func(x *Filter) { x.Host = "::ffff:1.2.3.4" }), with(func(b *Binding) { b.Host = "1.2.3.4" }), true},
		{"host differs", f(func(x *Filter) { x.Host = "1.2.3.5" }), with(func(b *Binding) { b.Host = "1.2.3.4" }), false},
		{"host vs wildcard", f(func(x *Filter) { x.Host = "1.2.3.4" }), valid, false},
		{"op equal", f(func(x *Filter) { x.Operation = Read }), valid, true},
		{"op differs", f(func(x *Filter) { x.Operation = Write }), valid, false},
		{"op all is exact", f(func(x *Filter) { x.Operation = All }), valid, false},
		{"op no implication", f(func(x *Filter) { x.Operation = Describe }), valid, false},
		{"permission equal", f(func(x *Filter) { x.Permission = Allow }), valid, true},
		{"permission differs", f(func(x *Filter) { x.Permission = Deny }), valid, false},
		{"exact filter", valid.Filter(), valid, true},
		{"exact filter differs", valid.Filter(), with(func(b *Binding) { b.Operation = Write }), false},
	} {
		if got := c.f.Matches(c.b); got != c.want {
			t.Errorf("%s: %v.Matches(%v) = %v", c.name, c.f, c.b, got)
		}
	}
}

func TestFilterIsConcrete(t *testing.T) {
	if !valid.Filter().IsConcrete() {
		t.Error("a binding's filter is not concrete")
	}
	if Binding(valid.Filter()) != valid {
		t.Error("Binding(b.Filter()) != b")
	}
	for name, m := range map[string]func(*Filter){
		"any type":        func(f *Filter) { f.ResourceType = AnyResourceType },
		"unknown type":    func(f *Filter) { f.ResourceType = UnknownResourceType },
		"undefined type":  func(f *Filter) { f.ResourceType = 9 },
		"any pattern":     func(f *Filter) { f.PatternType = AnyPatternType },
		"match":           func(f *Filter) { f.PatternType = Match },
		"unknown pattern": func(f *Filter) { f.PatternType = UnknownPatternType },
		"any op":          func(f *Filter) { f.Operation = AnyOperation },
		"unknown op":      func(f *Filter) { f.Operation = UnknownOperation },
		"any permission":  func(f *Filter) { f.Permission = AnyPermission },
		"no name":         func(f *Filter) { f.ResourceName = "" },
		"no principal":    func(f *Filter) { f.Principal = "" },
		"no host":         func(f *Filter) { f.Host = "" },
	} {
		f := valid.Filter()
		m(&f)
		if f.IsConcrete() {
			t.Errorf("%s: IsConcrete() = true", name)
		}
	}
}
