package kafka

import (
	"context"
	"iter"
	"net"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
)

// Authorization (issue 17). Every connection has a principal, found once
// before its first request is read (Authorizer.Principal) and, with SASL,
// replaced by "User:" and the SASL user once it authenticates (sasl.go),
// and every request is checked against what that principal may do, API by
// API, with the decisions Kafka's brokers take and the gRPC services take
// for the same operations (security/authz's rules.go). The decisions are all in
// this file, one method of access per API; the handlers only leave the
// denied items out of what they ask the Backend, the Admin or the Groups
// (no data, no side effect) and answer them with Kafka's codes:
// TOPIC_AUTHORIZATION_FAILED per topic (or per partition),
// GROUP_AUTHORIZATION_FAILED per group, CLUSTER_AUTHORIZATION_FAILED for
// the cluster. Lists the principal may partly see (Metadata,
// DescribeTopicPartitions and OffsetFetch for every topic, ListGroups)
// leave out what it may not describe.

// Authorizer decides what a connection's principal may do
// (Config.Authorizer; nil: everything is allowed, every connection is
// User:ANONYMOUS).
type Authorizer interface {
	// Principal returns the principal of a new connection, completing its
	// TLS handshake if it has not happened (bounded by ctx). An error
	// closes the connection.
	Principal(ctx context.Context, c net.Conn) (string, error)
	// Allowed reports whether principal, connecting from host (an IP
	// address as text), may perform op on the resource.
	Allowed(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool
	// IdempotentProducer reports whether principal may start an
	// idempotent producer: IdempotentWrite on the cluster, or Write on
	// any topic (KIP-679).
	IdempotentProducer(principal, host string) bool
}

// anonymousPrincipal is every connection's principal without an
// Authorizer, as Kafka names an unauthenticated client.
const anonymousPrincipal = "User:ANONYMOUS"

// Kafka's authorization codes.
const (
	topicAuthorizationFailed   int16 = 29
	groupAuthorizationFailed   int16 = 30
	clusterAuthorizationFailed int16 = 31
)

// peer is who a connection's requests come from: its principal and its
// IP address as text ("" when the address is no IP, which matches only
// ACLs for every host).
type peer struct {
	principal string
	host      string
}

// requestPeer is the peer of the connection whose request's handler got
// ctx (serveConn puts it in the request header).
func requestPeer(ctx context.Context) peer { return requestHeader(ctx).peer }

// peerHost is a connection's remote address as ACL hosts name it: the IP
// address (an IPv4-mapped one as IPv4), "" for an address that is no IP.
func peerHost(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return ""
	}
	return ap.Addr().Unmap().String()
}

// access answers one request's authorization questions for its
// connection's peer, each question once (a topic named by many partitions
// is decided once). A nil Authorizer allows everything.
type access struct {
	a    Authorizer
	p    peer
	memo map[need]bool
}

// need is one authorization question.
type need struct {
	op   acl.Operation
	rt   acl.ResourceType
	name string
}

// access returns the authorization of the request whose handler got ctx.
func (s *Server) access(ctx context.Context) *access {
	return &access{a: s.cfg.Authorizer, p: requestPeer(ctx)}
}

// enabled reports whether anything is checked.
func (a *access) enabled() bool { return a.a != nil }

func (a *access) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	if a.a == nil {
		return true
	}
	n := need{op, rt, name}
	if ok, seen := a.memo[n]; seen {
		return ok
	}
	ok := a.a.Allowed(a.p.principal, a.p.host, op, rt, name)
	if a.memo == nil {
		a.memo = map[need]bool{}
	}
	a.memo[n] = ok
	return ok
}

func (a *access) topic(op acl.Operation, name string) bool { return a.allowed(op, acl.Topic, name) }
func (a *access) group(op acl.Operation, id string) bool   { return a.allowed(op, acl.Group, id) }
func (a *access) cluster(op acl.Operation) bool            { return a.allowed(op, acl.Cluster, acl.ClusterName) }

// deniedTopics returns the topics among names the peer may not op, nil
// when there is none.
func (a *access) deniedTopics(op acl.Operation, names iter.Seq[string]) map[string]bool {
	var denied map[string]bool
	for n := range names {
		if !a.topic(op, n) {
			if denied == nil {
				denied = map[string]bool{}
			}
			denied[n] = true
		}
	}
	return denied
}

// clusterCode is 0 when the peer may op on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
func (a *access) clusterCode(op acl.Operation) int16 {
	if a.cluster(op) {
		return 0
	}
	return clusterAuthorizationFailed
}

// groupCode is 0 when the peer may op on group id, else
// GROUP_AUTHORIZATION_FAILED.
func (a *access) groupCode(op acl.Operation, id string) int16 {
	if a.group(op, id) {
		return 0
	}
	return groupAuthorizationFailed
}

// topicNames iterates over the topic name of each element of ts.
func topicNames[T any](ts []T, name func(*T) string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range ts {
			if !yield(name(&ts[i])) {
				return
			}
		}
	}
}

// The decisions, API by API.

// produce: Write on each topic (acks=0 too).
func (a *access) produce(req *kmsg.ProduceRequest) map[string]bool {
	return a.deniedTopics(acl.Write, topicNames(req.Topics, func(t *kmsg.ProduceRequestTopic) string { return t.Topic }))
}

// fetch: Read on each topic (a consumer's; followers do not fetch here).
func (a *access) fetch(req *kmsg.FetchRequest) map[string]bool {
	return a.deniedTopics(acl.Read, topicNames(req.Topics, func(t *kmsg.FetchRequestTopic) string { return t.Topic }))
}

// listOffsets: Describe on each topic.
func (a *access) listOffsets(req *kmsg.ListOffsetsRequest) map[string]bool {
	return a.deniedTopics(acl.Describe, topicNames(req.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic }))
}

// offsetForLeaderEpoch: Describe on each topic.
func (a *access) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) map[string]bool {
	return a.deniedTopics(acl.Describe, topicNames(req.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic }))
}

// describeTopic: Describe on the topic (Metadata, DescribeTopicPartitions:
// listed and denied is TOPIC_AUTHORIZATION_FAILED, unlisted is left out).
func (a *access) describeTopic(name string) bool { return a.topic(acl.Describe, name) }

// createTopic: Create on the cluster or on the topic, as Kafka.
func (a *access) createTopic(name string) bool {
	return a.cluster(acl.Create) || a.topic(acl.Create, name)
}

// deleteTopic: Delete on the topic. A topic named by id whose name the
// peer may not Describe is refused without its name (showName false), as
// Kafka does: the id is not secret, the name is.
func (a *access) deleteTopic(name string, byID bool) (code int16, showName bool) {
	if byID && !a.describeTopic(name) {
		return topicAuthorizationFailed, false
	}
	if !a.topic(acl.Delete, name) {
		return topicAuthorizationFailed, true
	}
	return 0, true
}

// config: op (DescribeConfigs or AlterConfigs) on the topic for a topic's
// configs, on the cluster for the cluster's and the brokers'.
func (a *access) config(op acl.Operation, res *pb.ConfigResource) int16 {
	if res.GetType() == pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC {
		if !a.topic(op, res.GetName()) {
			return topicAuthorizationFailed
		}
		return 0
	}
	return a.clusterCode(op)
}

// initProducerID: IdempotentWrite on the cluster or, since Kafka 3.0
// (KIP-679), Write on any topic (a transactional id is refused before,
// whatever the ACLs).
func (a *access) initProducerID() int16 {
	if a.a == nil || a.a.IdempotentProducer(a.p.principal, a.p.host) {
		return 0
	}
	return clusterAuthorizationFailed
}

// alterACLs: Alter on the cluster (CreateAcls, DeleteAcls).
func (a *access) alterACLs() int16 { return a.clusterCode(acl.Alter) }

// describeACLs: Describe on the cluster.
func (a *access) describeACLs() int16 { return a.clusterCode(acl.Describe) }

// alterSCRAMCredentials: Alter on the cluster (AlterUserScramCredentials).
func (a *access) alterSCRAMCredentials() int16 { return a.clusterCode(acl.Alter) }

// describeSCRAMCredentials: Describe on the cluster
// (DescribeUserScramCredentials).
func (a *access) describeSCRAMCredentials() int16 { return a.clusterCode(acl.Describe) }

// findCoordinator: Describe on the group for a group key (type 0); other
// key types have no coordinator in twinlog and go to Groups, which
// refuses them.
func (a *access) findCoordinator(keyType int8, key string) int16 {
	if keyType != 0 {
		return 0
	}
	return a.groupCode(acl.Describe, key)
}

// groupMember: Read on the group (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup).
func (a *access) groupMember(id string) int16 { return a.groupCode(acl.Read, id) }

// offsetCommit: Read on the group (else every partition is
// GROUP_AUTHORIZATION_FAILED) and Read on each topic.
func (a *access) offsetCommit(req *kmsg.OffsetCommitRequest) (groupCode int16, denied map[string]bool) {
	if code := a.groupCode(acl.Read, req.Group); code != 0 {
		return code, nil
	}
	return 0, a.deniedTopics(acl.Read, topicNames(req.Topics, func(t *kmsg.OffsetCommitRequestTopic) string { return t.Topic }))
}

// offsetFetchGroup: Describe on the group; the topics are offsetFetchTopic's.
func (a *access) offsetFetchGroup(id string) int16 { return a.groupCode(acl.Describe, id) }

// offsetFetchTopic: Describe on the topic: a listed topic denied is
// TOPIC_AUTHORIZATION_FAILED on each partition, and when every topic is
// asked for the denied ones are left out.
func (a *access) offsetFetchTopic(name string) bool { return a.topic(acl.Describe, name) }

// listGroup: Describe on the group, or on the cluster for every group.
func (a *access) listGroup(id string) bool {
	return a.cluster(acl.Describe) || a.group(acl.Describe, id)
}

// describeGroup: Describe on the group.
func (a *access) describeGroup(id string) int16 { return a.groupCode(acl.Describe, id) }

// deleteGroup: Delete on the group.
func (a *access) deleteGroup(id string) int16 { return a.groupCode(acl.Delete, id) }

// offsetDelete: Delete on the group (else every partition is
// GROUP_AUTHORIZATION_FAILED) and Read on each topic.
func (a *access) offsetDelete(req *kmsg.OffsetDeleteRequest) (groupCode int16, denied map[string]bool) {
	if code := a.groupCode(acl.Delete, req.Group); code != 0 {
		return code, nil
	}
	return 0, a.deniedTopics(acl.Read, topicNames(req.Topics, func(t *kmsg.OffsetDeleteRequestTopic) string { return t.Topic }))
}
