package acl

import (
	"fmt"
	"strings"
	"testing"
)

// benchBindings returns n bindings shaped like a large cluster's: literal
// topic and group grants for many users, prefixed grants of many lengths,
// some denies, and wildcard-principal grants.
func benchBindings(n int) []Binding {
	bs := make([]Binding, 0, n)
	for i := 0; len(bs) < n; i++ {
		user := fmt.Sprintf("User:user-%d", i%5000)
		topic := fmt.Sprintf("topic-%06d", i)
		switch i % 10 {
		case 0, 1, 2, 3:
			bs = append(bs, bind(Allow, Read, Topic, Literal, topic, user, Wildcard))
		case 4:
			bs = append(bs, bind(Allow, Write, Topic, Literal, topic, user, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)))
		case 5:
			bs = append(bs, bind(Allow, Read, Group, Literal, fmt.Sprintf("group-%d", i), user, Wildcard))
		case 6:
			// Prefixes of 64 different lengths.
			bs = append(bs, bind(Allow, Write, Topic, Prefixed, fmt.Sprintf("team-%d.%s", i, strings.Repeat("x", i%64)), user, Wildcard))
		case 7:
			bs = append(bs, bind(Deny, Delete, Topic, Literal, topic, user, Wildcard))
		case 8:
			bs = append(bs, bind(Allow, Describe, Topic, Literal, topic, WildcardPrincipal, Wildcard))
		case 9:
			bs = append(bs, bind(Allow, Alter, Mirror, Literal, fmt.Sprintf("link-%d", i), user, Wildcard))
		}
	}
	return bs
}

// BenchmarkAuthorize decides requests against 100k bindings.
func BenchmarkAuthorize(b *testing.B) {
	const n = 100_000
	a := New(Config{SuperUsers: []string{"User:admin"}}, benchBindings(n))
	if a.Len() != n {
		b.Fatalf("Len() = %d", a.Len())
	}
	const pi = 6 + 10*1234 // a prefixed binding's i in benchBindings
	longPrefixed := fmt.Sprintf("team-%d.%s-partition-events", pi, strings.Repeat("x", pi%64))
	for _, c := range []struct {
		name    string
		r       Request
		allowed bool
	}{
		{"literal-allow", req("User:user-3", "192.168.0.1", Read, Topic, "topic-000003"), true},
		{"implied-describe", req("User:user-3", "192.168.0.1", Describe, Topic, "topic-000003"), true},
		{"deny", req("User:user-7", "192.168.0.1", Delete, Topic, "topic-000007"), false},
		{"host", req("User:user-4", "10.0.0.4", Write, Topic, "topic-000004"), true},
		{"wildcard-principal", req("User:someone", "", Describe, Topic, "topic-000008"), true},
		{"prefixed-allow", req(fmt.Sprintf("User:user-%d", pi%5000), "", Write, Topic, longPrefixed), true},
		{"no-acl", req("User:user-3", "", Read, Topic, "unknown-topic-with-a-long-name-to-probe-every-prefix-length"), false},
		{"super-user", req("User:admin", "", Alter, Cluster, ClusterName), true},
	} {
		if d := a.Authorize(c.r); d.Allowed != c.allowed {
			b.Fatalf("%s: %+v", c.name, d)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.Authorize(c.r)
			}
		})
	}
}

// BenchmarkNew builds an authorizer from 100k bindings.
func BenchmarkNew(b *testing.B) {
	bs := benchBindings(100_000)
	b.ReportAllocs()
	for b.Loop() {
		New(Config{}, bs)
	}
}
