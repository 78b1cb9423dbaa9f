package acl

import (
	"fmt"
	"strings"
)

// ResourceType is the kind of resource a binding protects. Its values are
// Kafka's wire codes, plus twinlog's [Mirror].
type ResourceType int8

// The resource types.
const (
	// UnknownResourceType is the zero value: a type this package does not know.
	UnknownResourceType ResourceType = 0
	// AnyResourceType matches every resource type; filters only.
	AnyResourceType ResourceType = 1
	// Topic is a topic, named by the topic's name.
	Topic ResourceType = 2
	// Group is a consumer group, named by the group ID.
	Group ResourceType = 3
	// Cluster is the cluster itself; its only name is [ClusterName].
	Cluster ResourceType = 4
	// TransactionalID is a transactional producer, named by its transactional ID.
	TransactionalID ResourceType = 5
	// DelegationToken is a delegation token, named by the token ID.
	DelegationToken ResourceType = 6
	// User is a user principal's name, for creating and describing delegation
	// tokens on its behalf.
	User ResourceType = 7
	// Mirror is twinlog's own type, not Kafka's: a mirror link, named by the
	// link's name.
	Mirror ResourceType = 64
)

// PatternType says how a binding's resource name matches resource names.
// Its values are Kafka's wire codes.
type PatternType int8

// The pattern types.
const (
	// UnknownPatternType is the zero value: a pattern type this package does not know.
	UnknownPatternType PatternType = 0
	// AnyPatternType matches bindings of every pattern type whose name is the
	// filter's; filters only.
	AnyPatternType PatternType = 1
	// Match selects the bindings that would apply to a resource of the
	// filter's name: Literal ones with that name or "*", and Prefixed ones
	// whose name is a prefix of it; filters only.
	Match PatternType = 2
	// Literal matches the resource of exactly that name; the name "*"
	// ([Wildcard]) matches every resource of the type.
	Literal PatternType = 3
	// Prefixed matches every resource whose name starts with the binding's name.
	Prefixed PatternType = 4
)

// Operation is what a principal does to a resource. Its values are Kafka's
// wire codes.
type Operation int8

// The operations.
const (
	// UnknownOperation is the zero value: an operation this package does not know.
	UnknownOperation Operation = 0
	// AnyOperation matches every operation; filters only.
	AnyOperation Operation = 1
	// All, in a binding, stands for every operation.
	All Operation = 2
	// Read consumes records (topics), joins and commits (groups), or fetches
	// as a mirror destination (mirror links).
	Read Operation = 3
	// Write produces records.
	Write Operation = 4
	// Create creates topics or mirror links.
	Create Operation = 5
	// Delete deletes topics, records, groups, offsets or mirror links.
	Delete Operation = 6
	// Alter changes a resource, such as adding partitions.
	Alter Operation = 7
	// Describe reads a resource's metadata. Read, Write, Delete and Alter
	// imply it.
	Describe Operation = 8
	// ClusterAction is broker-to-broker work, such as replication.
	ClusterAction Operation = 9
	// DescribeConfigs reads a resource's configuration. AlterConfigs implies it.
	DescribeConfigs Operation = 10
	// AlterConfigs changes a resource's configuration.
	AlterConfigs Operation = 11
	// IdempotentWrite lets a producer be idempotent.
	IdempotentWrite Operation = 12
	// CreateTokens creates delegation tokens.
	CreateTokens Operation = 13
	// DescribeTokens describes delegation tokens.
	DescribeTokens Operation = 14
)

// Permission says whether a binding allows or denies. Its values are
// Kafka's wire codes.
type Permission int8

// The permissions.
const (
	// UnknownPermission is the zero value: a permission this package does not know.
	UnknownPermission Permission = 0
	// AnyPermission matches both permissions; filters only.
	AnyPermission Permission = 1
	// Deny refuses the operation, whatever any ALLOW binding says.
	Deny Permission = 2
	// Allow grants the operation unless a DENY binding applies.
	Allow Permission = 3
)

// ClusterName is the name of the one Cluster resource, as in Kafka.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name of a Literal binding that matches every
// resource of its type, and the host that matches every host. The principal
// that matches every principal is [WildcardPrincipal].
const Wildcard = "*"

// WildcardPrincipal is the principal that a binding names to apply to every
// principal.
const WildcardPrincipal = "User:*"

// enumName is one value of an enum and its Kafka name.
type enumName[T ~int8] struct {
	v    T
	name string
}

var resourceTypeNames = []enumName[ResourceType]{
	{UnknownResourceType, "Unknown"},
	{AnyResourceType, "Any"},
	{Topic, "Topic"},
	{Group, "Group"},
	{Cluster, "Cluster"},
	{TransactionalID, "TransactionalId"},
	{DelegationToken, "DelegationToken"},
	{User, "User"},
	{Mirror, "Mirror"},
}

var patternTypeNames = []enumName[PatternType]{
	{UnknownPatternType, "Unknown"},
	{AnyPatternType, "Any"},
	{Match, "Match"},
	{Literal, "Literal"},
	{Prefixed, "Prefixed"},
}

var operationNames = []enumName[Operation]{
	{UnknownOperation, "Unknown"},
	{AnyOperation, "Any"},
	{All, "All"},
	{Read, "Read"},
	{Write, "Write"},
	{Create, "Create"},
	{Delete, "Delete"},
	{Alter, "Alter"},
	{Describe, "Describe"},
	{ClusterAction, "ClusterAction"},
	{DescribeConfigs, "DescribeConfigs"},
	{AlterConfigs, "AlterConfigs"},
	{IdempotentWrite, "IdempotentWrite"},
	{CreateTokens, "CreateTokens"},
	{DescribeTokens, "DescribeTokens"},
}

var permissionNames = []enumName[Permission]{
	{UnknownPermission, "Unknown"},
	{AnyPermission, "Any"},
	{Deny, "Deny"},
	{Allow, "Allow"},
}

// lookupName returns v's name, or "" if v is not a known value.
func lookupName[T ~int8](names []enumName[T], v T) string {
	for _, n := range names {
		if n.v == v {
			return n.name
		}
	}
	return ""
}

func known[T ~int8](names []enumName[T], v T) bool { return lookupName(names, v) != "" }

// enumString is v's name, or "<kind>(<code>)" for an unknown code.
func enumString[T ~int8](names []enumName[T], kind string, v T) string {
	if n := lookupName(names, v); n != "" {
		return n
	}
	return fmt.Sprintf("%s(%d)", kind, int8(v))
}

// foldName lowercases s and drops the '-' and '_' that may separate words,
// so that "describe-configs", "DESCRIBE_CONFIGS" and "DescribeConfigs" fold
// alike.
func foldName(s string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(strings.TrimSpace(s)))
}

// parseEnum finds the value named s; see foldName for the spellings accepted.
func parseEnum[T ~int8](names []enumName[T], kind, s string) (T, error) {
	if f := foldName(s); f != "" {
		for _, n := range names {
			if foldName(n.name) == f {
				return n.v, nil
			}
		}
	}
	accepted := make([]string, len(names))
	for i, n := range names {
		accepted[i] = n.name
	}
	return 0, fmt.Errorf("acl: unknown %s %q (accepted, case-insensitive, words optionally separated by '-' or '_': %s)",
		kind, s, strings.Join(accepted, ", "))
}

// String returns Kafka's name for t, such as "Topic" or "TransactionalId",
// or "ResourceType(<code>)" for a code this package does not know.
func (t ResourceType) String() string { return enumString(resourceTypeNames, "ResourceType", t) }

// String returns Kafka's name for t, such as "Literal", or
// "PatternType(<code>)" for a code this package does not know.
func (t PatternType) String() string { return enumString(patternTypeNames, "PatternType", t) }

// String returns Kafka's name for o, such as "DescribeConfigs", or
// "Operation(<code>)" for a code this package does not know.
func (o Operation) String() string { return enumString(operationNames, "Operation", o) }

// String returns Kafka's name for p, "Allow" or "Deny" (or "Any",
// "Unknown"), or "Permission(<code>)" for a code this package does not know.
func (p Permission) String() string { return enumString(permissionNames, "Permission", p) }

// ParseResourceType returns the resource type named s. Names are Kafka's
// ("Topic", "TransactionalId", ...) plus "Mirror", matched without regard to
// case or to '-' and '_' between words ("transactional-id",
// "TRANSACTIONAL_ID"); surrounding white space is ignored. The error lists
// the accepted names.
func ParseResourceType(s string) (ResourceType, error) {
	return parseEnum(resourceTypeNames, "resource type", s)
}

// ParsePatternType returns the pattern type named s ("Literal", "Prefixed",
// "Match", "Any", "Unknown"), without regard to case, to '-' and '_', or to
// surrounding white space. The error lists the accepted names.
func ParsePatternType(s string) (PatternType, error) {
	return parseEnum(patternTypeNames, "pattern type", s)
}

// ParseOperation returns the operation named s. Names are Kafka's ("Read",
// "DescribeConfigs", "IdempotentWrite", ...), matched without regard to case
// or to '-' and '_' between words ("describe-configs", "DESCRIBE_CONFIGS",
// "idempotent_write"); surrounding white space is ignored. The error lists
// the accepted names.
func ParseOperation(s string) (Operation, error) {
	return parseEnum(operationNames, "operation", s)
}

// ParsePermission returns the permission named s ("Allow", "Deny", "Any",
// "Unknown"), without regard to case, to '-' and '_', or to surrounding white
// space. The error lists the accepted names.
func ParsePermission(s string) (Permission, error) {
	return parseEnum(permissionNames, "permission", s)
}

// ResourceTypes returns the resource types a binding may have, in code order.
func ResourceTypes() []ResourceType {
	return []ResourceType{Topic, Group, Cluster, TransactionalID, DelegationToken, User, Mirror}
}

// validOps is Kafka's table of the operations each resource type accepts,
// plus twinlog's Mirror. All is valid for every type.
var validOps = map[ResourceType][]Operation{
	Topic:           {All, Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs},
	Group:           {All, Read, Delete, Describe},
	Cluster:         {All, Create, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite},
	TransactionalID: {All, Write, Describe},
	DelegationToken: {All, Describe},
	User:            {All, CreateTokens, DescribeTokens},
	Mirror:          {All, Read, Create, Delete, Alter, Describe},
}

// Operations returns the operations a binding on resource type t may have,
// in code order, All included; nil for a type that takes no bindings.
func Operations(t ResourceType) []Operation {
	ops := validOps[t]
	if ops == nil {
		return nil
	}
	out := make([]Operation, len(ops))
	copy(out, ops)
	return out
}

// ValidFor reports whether a binding on resource type t may have operation o.
func (o Operation) ValidFor(t ResourceType) bool {
	for _, v := range validOps[t] {
		if v == o {
			return true
		}
	}
	return false
}

// Implies reports whether an ALLOW binding for o also allows op: o is op or
// All, or o is Read, Write, Delete or Alter and op is Describe, or o is
// AlterConfigs and op is DescribeConfigs. DENY bindings do not use it: they
// deny only their own operation (or every one, for All).
func (o Operation) Implies(op Operation) bool {
	switch {
	case o == op || o == All:
		return true
	case op == Describe:
		return o == Read || o == Write || o == Delete || o == Alter
	case op == DescribeConfigs:
		return o == AlterConfigs
	}
	return false
}
