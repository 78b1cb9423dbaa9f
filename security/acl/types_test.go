package acl

import (
	"slices"
	"strings"
	"testing"
)

func TestEnumCodes(t *testing.T) {
	// The wire codes are Kafka's; CreateAcls and DescribeAcls map them 1:1.
	for _, c := range []struct {
		got, want int8
		name      string
	}{
		{int8(UnknownResourceType), 0, "UnknownResourceType"},
		{int8(AnyResourceType), 1, "AnyResourceType"},
		{int8(Topic), 2, "Topic"},
		{int8(Group), 3, "Group"},
		{int8(Cluster), 4, "Cluster"},
		{int8(TransactionalID), 5, "TransactionalID"},
		{int8(DelegationToken), 6, "DelegationToken"},
		{int8(User), 7, "User"},
		{int8(Mirror), 64, "Mirror"},
		{int8(UnknownPatternType), 0, "UnknownPatternType"},
		{int8(AnyPatternType), 1, "AnyPatternType"},
		{int8(Match), 2, "Match"},
		{int8(Literal), 3, "Literal"},
		{int8(Prefixed), 4, "Prefixed"},
		{int8(UnknownOperation), 0, "UnknownOperation"},
		{int8(AnyOperation), 1, "AnyOperation"},
		{int8(All), 2, "All"},
		{int8(Read), 3, "Read"},
		{int8(Write), 4, "Write"},
		{int8(Create), 5, "Create"},
		{int8(Delete), 6, "Delete"},
		{int8(Alter), 7, "Alter"},
		{int8(Describe), 8, "Describe"},
		{int8(ClusterAction), 9, "ClusterAction"},
		{int8(DescribeConfigs), 10, "DescribeConfigs"},
		{int8(AlterConfigs), 11, "AlterConfigs"},
		{int8(IdempotentWrite), 12, "IdempotentWrite"},
		{int8(CreateTokens), 13, "CreateTokens"},
		{int8(DescribeTokens), 14, "DescribeTokens"},
		{int8(UnknownPermission), 0, "UnknownPermission"},
		{int8(AnyPermission), 1, "AnyPermission"},
		{int8(Deny), 2, "Deny"},
		{int8(Allow), 3, "Allow"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestEnumStrings(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{UnknownResourceType.String(), "Unknown"},
		{AnyResourceType.String(), "Any"},
		{Topic.String(), "Topic"},
		{Group.String(), "Group"},
		{Cluster.String(), "Cluster"},
		{TransactionalID.String(), "TransactionalId"},
		{DelegationToken.String(), "DelegationToken"},
		{User.String(), "User"},
		{Mirror.String(), "Mirror"},
		{ResourceType(8).String(), "ResourceType(8)"},
		{ResourceType(-1).String(), "ResourceType(-1)"},
		{Literal.String(), "Literal"},
		{Prefixed.String(), "Prefixed"},
		{Match.String(), "Match"},
		{AnyPatternType.String(), "Any"},
		{UnknownPatternType.String(), "Unknown"},
		{PatternType(5).String(), "PatternType(5)"},
		{Read.String(), "Read"},
		{DescribeConfigs.String(), "DescribeConfigs"},
		{IdempotentWrite.String(), "IdempotentWrite"},
		{ClusterAction.String(), "ClusterAction"},
		{All.String(), "All"},
		{AnyOperation.String(), "Any"},
		{Operation(15).String(), "Operation(15)"},
		{Allow.String(), "Allow"},
		{Deny.String(), "Deny"},
		{AnyPermission.String(), "Any"},
		{Permission(4).String(), "Permission(4)"},
	} {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
}

// variants returns spellings of a CamelCase name that parsing must accept:
// as is, lower, upper, and with '-' or '_' between words.
func variants(name string) []string {
	var words []string
	start := 0
	for i := 1; i < len(name); i++ {
		if name[i] >= 'A' && name[i] <= 'Z' {
			words = append(words, name[start:i])
			start = i
		}
	}
	words = append(words, name[start:])
	kebab := strings.ToLower(strings.Join(words, "-"))
	snake := strings.ToUpper(strings.Join(words, "_"))
	return []string{name, strings.ToLower(name), strings.ToUpper(name), kebab, snake, strings.ToLower(snake), " " + name + " "}
}

// roundTrip checks that every value of an enum parses back from its String
// in every accepted spelling, and that nonsense is refused with the accepted
// names listed.
func roundTrip[T interface {
	~int8
	String() string
}](t *testing.T, kind string, names []enumName[T], parse func(string) (T, error)) {
	t.Helper()
	for code := -128; code <= 127; code++ {
		v := T(code)
		if !known(names, v) {
			if _, err := parse(v.String()); err == nil {
				t.Errorf("%s: parsing %q (unknown code) succeeded", kind, v.String())
			}
			continue
		}
		for _, s := range variants(v.String()) {
			got, err := parse(s)
			if err != nil || got != v {
				t.Errorf("%s: parse(%q) = %v, %v; want %v", kind, s, got, err, v)
			}
		}
	}
	for _, s := range []string{"", "nonsense", "-", "Read Write"} {
		_, err := parse(s)
		if err == nil {
			t.Errorf("%s: parse(%q) succeeded", kind, s)
			continue
		}
		for _, n := range names {
			if !strings.Contains(err.Error(), n.name) {
				t.Errorf("%s: error %q does not list %q", kind, err, n.name)
			}
		}
		if !strings.Contains(err.Error(), kind) {
			t.Errorf("%s: error %q does not say what was parsed", kind, err)
		}
	}
}

func TestParseRoundTrip(t *testing.T) {
	roundTrip(t, "resource type", resourceTypeNames, ParseResourceType)
	roundTrip(t, "pattern type", patternTypeNames, ParsePatternType)
	roundTrip(t, "operation", operationNames, ParseOperation)
	roundTrip(t, "permission", permissionNames, ParsePermission)
}

func TestParseSpellings(t *testing.T) {
	ops := map[string]Operation{
		"describe-configs": DescribeConfigs,
		"DESCRIBE_CONFIGS": DescribeConfigs,
		"describeConfigs":  DescribeConfigs,
		"idempotent_write": IdempotentWrite,
		"Idempotent-Write": IdempotentWrite,
		"cluster_action":   ClusterAction,
		"alter-configs":    AlterConfigs,
		"create_tokens":    CreateTokens,
		"describe-tokens":  DescribeTokens,
		"ALL":              All,
		"read":             Read,
	}
	for s, want := range ops {
		if got, err := ParseOperation(s); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	types := map[string]ResourceType{
		"transactional-id": TransactionalID,
		"TRANSACTIONAL_ID": TransactionalID,
		"TransactionalId":  TransactionalID,
		"delegation-token": DelegationToken,
		"topic":            Topic,
		"MIRROR":           Mirror,
		"cluster":          Cluster,
	}
	for s, want := range types {
		if got, err := ParseResourceType(s); err != nil || got != want {
			t.Errorf("ParseResourceType(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if got, err := ParsePatternType("PREFIXED"); err != nil || got != Prefixed {
		t.Errorf("ParsePatternType(PREFIXED) = %v, %v", got, err)
	}
	if got, err := ParsePermission("deny"); err != nil || got != Deny {
		t.Errorf("ParsePermission(deny) = %v, %v", got, err)
	}
	if _, err := ParseOperation("describe configs"); err == nil {
		t.Error("ParseOperation accepted a space between words")
	}
}

func TestOperationsTable(t *testing.T) {
	// Kafka's table, plus twinlog's Mirror.
	want := map[ResourceType][]Operation{
		Topic:           {All, Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs},
		Group:           {All, Read, Delete, Describe},
		Cluster:         {All, Create, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite},
		TransactionalID: {All, Write, Describe},
		DelegationToken: {All, Describe},
		User:            {All, CreateTokens, DescribeTokens},
		Mirror:          {All, Read, Create, Delete, Alter, Describe},
	}
	if got := ResourceTypes(); !slices.Equal(got, []ResourceType{Topic, Group, Cluster, TransactionalID, DelegationToken, User, Mirror}) {
		t.Errorf("ResourceTypes() = %v", got)
	}
	for code := -128; code <= 127; code++ {
		rt := ResourceType(code)
		w := want[rt]
		if got := Operations(rt); !slices.Equal(got, w) {
			t.Errorf("Operations(%v) = %v, want %v", rt, got, w)
		}
		for op := Operation(0); op <= DescribeTokens+1; op++ {
			if got := op.ValidFor(rt); got != slices.Contains(w, op) {
				t.Errorf("%v.ValidFor(%v) = %v", op, rt, got)
			}
		}
	}
	// Operations returns a copy.
	ops := Operations(Topic)
	ops[0] = Read
	if Operations(Topic)[0] != All {
		t.Error("Operations shares its table")
	}
}

func TestImplies(t *testing.T) {
	implied := map[[2]Operation]bool{
		{Read, Describe}:                true,
		{Write, Describe}:               true,
		{Delete, Describe}:              true,
		{Alter, Describe}:               true,
		{AlterConfigs, DescribeConfigs}: true,
	}
	concrete := []Operation{Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens}
	for _, o := range append([]Operation{All}, concrete...) {
		for _, op := range concrete {
			want := o == op || o == All || implied[[2]Operation{o, op}]
			if got := o.Implies(op); got != want {
				t.Errorf("%v.Implies(%v) = %v, want %v", o, op, got, want)
			}
		}
	}
	for _, c := range [][2]Operation{{Describe, Read}, {DescribeConfigs, AlterConfigs}, {Create, Describe}, {AlterConfigs, Describe}, {Alter, DescribeConfigs}, {ClusterAction, Describe}} {
		if c[0].Implies(c[1]) {
			t.Errorf("%v.Implies(%v)", c[0], c[1])
		}
	}
}
