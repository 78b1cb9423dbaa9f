package acl

import (
	"slices"
	"strings"
	"testing"
)

func TestParseFilterSet(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Filter
		err      string
	}{
		{name: "empty is nothing", in: "", want: nil},
		{name: "everything", in: `{"aclFilters":[{"resourceFilter":{"resourceType":"any","patternType":"any"},"accessFilter":{"operation":"any","permissionType":"any"}}]}`,
			want: []Filter{{ResourceType: AnyResourceType, PatternType: AnyPatternType, Operation: AnyOperation, Permission: AnyPermission}}},
		{name: "missing fields are any", in: `{"aclFilters":[{}]}`,
			want: []Filter{{ResourceType: AnyResourceType, PatternType: AnyPatternType, Operation: AnyOperation, Permission: AnyPermission}}},
		{name: "Cluster Linking's spelling", in: `{"aclFilters":[{"resourceFilter":{"resourceType":"TOPIC","name":"orders.","patternType":"PREFIXED"},
			"accessFilter":{"principal":"User:app","host":"*","operation":"READ","permissionType":"ALLOW"}},
			{"resourceFilter":{"resourceType":"GROUP","patternType":"MATCH","name":"g1"}}]}`,
			want: []Filter{
				{ResourceType: Topic, ResourceName: "orders.", PatternType: Prefixed, Principal: "User:app", Host: "*", Operation: Read, Permission: Allow},
				{ResourceType: Group, ResourceName: "g1", PatternType: Match, Operation: AnyOperation, Permission: AnyPermission},
			}},
		{name: "not JSON", in: `aclFilters`, err: "acl filters: invalid character"},
		{name: "no list", in: `{}`, err: `no "aclFilters" list`},
		{name: "misspelt field", in: `{"aclFilters":[{"resourceFilter":{"resourceTyp":"TOPIC"}}]}`, err: `unknown field "resourceTyp"`},
		{name: "unknown operation", in: `{"aclFilters":[{"accessFilter":{"operation":"READS"}}]}`, err: `filter 0: acl: unknown operation "READS"`},
		{name: "malformed principal", in: `{"aclFilters":[{"accessFilter":{"principal":"app"}}]}`, err: "filter 0: acl: invalid filter Principal"},
		{name: "trailing text", in: `{"aclFilters":[]} {}`, err: "text after the JSON object"},
		{name: "too many", in: `{"aclFilters":[` + strings.Repeat(`{},`, MaxSyncFilters) + `{}]}`, err: "at most 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFilterSet(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestSyncPlan(t *testing.T) {
	b := func(typ ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
		return Binding{ResourceType: typ, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: Allow}
	}
	ordersRead := b(Topic, "orders", Literal, "User:app", Read)
	ordersWrite := b(Topic, "orders", Literal, "User:app", Write)
	paymentsRead := b(Topic, "payments", Literal, "User:app", Read)
	groupRead := b(Group, "g", Literal, "User:app", Read)
	localOnly := b(Topic, "orders", Literal, "User:ops", Describe)
	topics := []Filter{{ResourceType: Topic, PatternType: AnyPatternType, Principal: "User:app", Operation: AnyOperation, Permission: AnyPermission}}
	for _, tc := range []struct {
		name           string
		source, dest   []Binding
		filters        []Filter
		removals       bool
		create, remove []Binding
	}{
		{name: "copies what the filters select", source: []Binding{ordersRead, groupRead, paymentsRead}, filters: topics, removals: true,
			create: []Binding{ordersRead, paymentsRead}},
		{name: "nothing without filters", source: []Binding{ordersRead}, removals: true},
		{name: "removes what the source lost, within the filters only", source: []Binding{ordersRead},
			dest: []Binding{ordersRead, ordersWrite, localOnly, groupRead}, filters: topics, removals: true, remove: []Binding{ordersWrite}},
		{name: "no removals when a source did not answer", source: []Binding{paymentsRead},
			dest: []Binding{ordersWrite}, filters: topics, removals: false, create: []Binding{paymentsRead}},
		{name: "in step", source: []Binding{ordersRead, ordersRead}, dest: []Binding{ordersRead}, filters: topics, removals: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			create, remove := SyncPlan(tc.source, tc.dest, tc.filters, tc.removals)
			if !slices.Equal(create, tc.create) || !slices.Equal(remove, tc.remove) {
				t.Fatalf("create %v remove %v; want %v and %v", create, remove, tc.create, tc.remove)
			}
		})
	}
}

// FuzzParseFilterSet: mirror.acl.sync.filters is operator input: any text
// is refused with an error or gives at most MaxSyncFilters valid filters,
// and never panics.
func FuzzParseFilterSet(f *testing.F) {
	f.Add(`{"aclFilters":[{"resourceFilter":{"resourceType":"TOPIC","name":"orders.","patternType":"PREFIXED"},"accessFilter":{"principal":"User:app","host":"*","operation":"READ","permissionType":"ALLOW"}}]}`)
	f.Add(`{"aclFilters":[{}]}`)
	f.Add(`{"aclFilters":null}`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := ParseFilterSet(s)
		if err != nil {
			return
		}
		if len(fs) > MaxSyncFilters {
			t.Fatalf("%d filters", len(fs))
		}
		for _, f := range fs {
			if err := f.Validate(); err != nil {
				t.Fatalf("%q gave an invalid filter %v: %v", s, f, err)
			}
		}
	})
}
