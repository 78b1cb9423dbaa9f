// Package acl is twinlog's authorization model: Apache Kafka's ACL rules,
// expressed as pure values and an immutable authorizer.
//
// # Bindings
//
// An ACL is a [Binding]. It says that a principal, connecting from a host,
// is allowed or denied an operation on a resource:
//
//	Allow User:alice from any host to Read the topics whose names start with "orders."
//
//	Binding{
//		ResourceType: Topic, ResourceName: "orders.", PatternType: Prefixed,
//		Principal: "User:alice", Host: "*",
//		Operation: Read, Permission: Allow,
//	}
//
// A resource pattern is Literal (the name must be equal; the name "*" matches
// every resource of the type) or Prefixed (the name is a prefix of the
// resource's name). The principal "User:*" stands for every principal, and the
// host "*" for every host.
//
// # Decisions
//
// [Authorizer.Authorize] decides a [Request] the way Kafka's StandardAuthorizer
// (and the older AclAuthorizer) does:
//
//  1. A request whose operation or resource type is not concrete, or whose
//     principal is empty, is refused.
//  2. A super user (see [Config]) is allowed everything; no ACL is consulted.
//  3. A binding applies to the request when its resource type is the
//     request's, its pattern matches the resource name, its principal is the
//     request's or "User:*", and its host is the request's or "*".
//  4. If an applying DENY binding has the request's operation or All, the
//     request is denied. Deny wins over allow.
//  5. Otherwise the request is allowed if an applying ALLOW binding has the
//     request's operation, All, or an operation that implies it: Read, Write,
//     Delete and Alter imply Describe, and AlterConfigs implies
//     DescribeConfigs. Implication only widens ALLOW bindings: denying Read
//     does not deny Describe.
//  6. Otherwise, if no binding at all names the resource (whatever its
//     principal, host, operation or permission), the request is allowed
//     exactly when [Config.AllowEveryoneIfNoACLFound] is set. If some binding
//     names it, the request is refused.
//
// # Wire codes
//
// The numeric values of [ResourceType], [PatternType], [Operation] and
// [Permission] are Kafka's wire codes, so they convert one to one to and from
// the fields of the CreateAcls, DescribeAcls and DeleteAcls requests:
//
//	ResourceType  Unknown=0 Any=1 Topic=2 Group=3 Cluster=4 TransactionalId=5
//	              DelegationToken=6 User=7 Mirror=64
//	PatternType   Unknown=0 Any=1 Match=2 Literal=3 Prefixed=4
//	Operation     Unknown=0 Any=1 All=2 Read=3 Write=4 Create=5 Delete=6
//	              Alter=7 Describe=8 ClusterAction=9 DescribeConfigs=10
//	              AlterConfigs=11 IdempotentWrite=12 CreateTokens=13
//	              DescribeTokens=14
//	Permission    Unknown=0 Any=1 Deny=2 Allow=3
//
// [Mirror] (64) is not a Kafka resource type. It is twinlog's own: the
// resource is a mirror link, named by the link's name, and its operations are
// Describe, Alter, Read (a destination cluster fetching from this source),
// Create, Delete and All. Kafka clients do not know the code, so only
// twinlog's tools create such bindings.
//
// Any, Match and Unknown appear only in a [Filter], Kafka's AclBindingFilter,
// which selects bindings for describing and deleting.
//
// # Hosts
//
// Hosts are IP addresses written as text. Two hosts are the same when they
// parse to the same address, so "::1" and "0:0:0:0:0:0:0:1" match each other,
// and an IPv4-mapped IPv6 address matches the IPv4 address it maps. A host that
// is not an IP address is compared as text.
//
// # Purity
//
// The package does no I/O and keeps no global state. An [Authorizer] is
// immutable once built, so it may be shared by any number of goroutines; to
// change the ACLs, build a new one and swap it in.
package acl
