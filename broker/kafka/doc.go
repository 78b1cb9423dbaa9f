// Package kafka serves the Kafka wire protocol in front of a broker, so
// that Kafka clients (franz-go, librdkafka/kcat, confluent-kafka-python,
// the Java client) produce to and consume from twinlog's partitions with
// nothing changed but the bootstrap address.
//
// The package decides nothing about partitions: each handler translates a
// Kafka request (decoded with franz-go's kmsg) into the broker's own
// request, calls the Backend or the Admin — the same methods the gRPC
// services call; admin requests are forwarded to the controller as the
// gRPC admin service forwards them — and translates the answer back, error codes through the one table
// (errcode.Info.Kafka). Record batches pass through untouched: the broker
// stores Kafka's RecordBatch v2 byte for byte (storage), so a fetch serves
// the bytes a producer sent.
//
// # Connections
//
// Each connection reads one size-prefixed frame at a time, at most
// Config.MaxRequestBytes (socket.request.max.bytes), and handles its
// requests one after another, in order, as Kafka's brokers do; responses
// go out in request order. Produce and OffsetCommit are pipelined
// (pipeline.go): the next request is read once one of them is applied (its
// batches in the leader's log, its commit in the coordinator's state), not
// once it is replicated, up to maxPipelined answers outstanding; any
// other request runs after every earlier answer is written, so it sees
// what they did. A malformed frame, an unknown
// API key or a version the package cannot decode closes that connection
// only; a supported API at a version outside the advertised range is
// answered UNSUPPORTED_VERSION. acks=0 produce requests get no response,
// as in Kafka.
//
// # Versions
//
// Server.Versions lists the APIs and versions served, and ApiVersions
// advertises exactly them (the group APIs only with Config.Groups):
// Produce from v3 and Fetch from v4, the first with RecordBatch v2, the
// other APIs from the versions librdkafka's feature checks ask for (kcat
// 1.7 probes ListOffsets v1 and Metadata v0), up to the last version
// before topic ids replace names in requests.
// Versions before the leader epoch fields (Fetch v9, ListOffsets v4,
// OffsetForLeaderEpoch v2) and a current leader epoch of −1 mean no
// check, as in Kafka (docs/spec-deviations.md: SPEC §4.3 step 2 asks
// every consumer for one).
//
// InitProducerId (v0-v4) gives idempotent producers a producer id from
// the broker's block of the cluster's id space; a transactional id is
// refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as twinlog has no
// transactions (FindCoordinator answers a transaction key with the code
// Config.Groups gives it, never a coordinator).
//
// The ACL APIs (CreateAcls, DescribeAcls, DeleteAcls, v0-v3) translate
// to the AdminService's, forwarded to the controller like the topic APIs;
// their enums are Kafka's codes on both sides (acls.go). So do the SCRAM
// credential APIs (DescribeUserScramCredentials, AlterUserScramCredentials,
// v0), with or without SASL on the listener, as Kafka serves them; a user
// described twice is DUPLICATE_RESOURCE, as in Kafka (scramcreds.go).
//
// # Authentication
//
// With Config.SASL, a connection authenticates with SASL (KIP-43, KIP-152;
// sasl.go) after Authorizer.Principal: SaslHandshake v1 chooses the
// mechanism (SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN, those Config.SASL
// enables; PLAIN only over TLS unless PlainWithoutTLS) and SaslAuthenticate
// v0-v2 carries its messages, which package scram checks against the
// credentials Config.SASL.Lookup finds. Until it succeeds only ApiVersions,
// SaslHandshake and SaslAuthenticate are served: any other request, a
// failed exchange (after its SASL_AUTHENTICATION_FAILED answer, whose
// message says only what package scram allows), a second handshake or an
// authenticate before one (after ILLEGAL_SASL_STATE) closes the
// connection, counted as "authentication", and so does not succeeding
// within the idle timeout of connecting; a frame is at most 512 KiB
// (Kafka's sasl.server.max.receive.size) and a SASL message 16 KiB. An
// unknown mechanism is UNSUPPORTED_SASL_MECHANISM with the connection's
// list, and the client may ask again. On success the connection's
// principal is "User:" and the SASL user, whatever its certificate said;
// the session does not expire (no re-authentication, KIP-368), and a
// later SaslHandshake or SaslAuthenticate is refused ILLEGAL_SASL_STATE.
// ApiVersions lists SaslHandshake and SaslAuthenticate only with SASL;
// SaslHandshake v0, whose tokens follow outside Kafka's framing, is
// UNSUPPORTED_VERSION.
//
// # Authorization
//
// With Config.Authorizer, each connection's principal is found once,
// before its first request (Authorizer.Principal, which completes a TLS
// handshake, within the idle timeout; a failure closes the connection,
// counted as "authentication"), and every request is checked with it and
// the connection's IP address, as Kafka's brokers and twinlog's gRPC
// services (security/authz) decide for the same operations: Write to
// produce, Read to fetch, Describe for offsets and metadata, Create,
// Delete, DescribeConfigs and AlterConfigs for the admin APIs, the group
// APIs' Read, Describe and Delete on the group and the topics, Alter and
// Describe on the cluster for the ACL and SCRAM credential APIs,
// IdempotentWrite on the cluster or Write on any topic for InitProducerId
// (KIP-679); ApiVersions, SaslHandshake, SaslAuthenticate and
// DescribeCluster need no ACL (authz.go has every decision). A denied item is
// never asked of the broker, the controller or the coordinator, and is
// answered with Kafka's TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED;
// lists the principal may partly see leave out what it may not describe
// (Metadata and DescribeTopicPartitions for every topic, OffsetFetch for
// every committed topic, ListGroups), with DescribeTopicPartitions' paging
// unchanged (SPEC §5). Without an Authorizer everything is allowed and
// every connection is User:ANONYMOUS (or its SASL user).
//
// # Consumer groups
//
// With Config.Groups set, the classic consumer-group APIs are served
// (groups.go), each translated to and from the group coordinator's own
// requests (package group), which decides everything: FindCoordinator
// v0-v5 (batched keys from v4), JoinGroup v0-v9, SyncGroup v0-v5,
// Heartbeat v0-v4, LeaveGroup v0-v5 (a v0-v2 member is a batch of one),
// OffsetCommit v2-v9, OffsetFetch v1-v9 (batched groups from v8, one
// Groups call each), DescribeGroups v0-v6, ListGroups v0-v5, DeleteGroups
// v0-v2 and OffsetDelete v0: from the versions librdkafka's
// balanced-consumer check asks for to the last before topic ids or
// semantics the coordinator does not have (apis.go says which, API by
// API). A JoinGroup gets its header's client id and its connection's host
// ("/" and the IP, as Kafka reports it) and may wait its rebalance
// timeout, a SyncGroup five minutes. A JoinGroup or SyncGroup that a newer
// one of the same member superseded is never answered, as in Kafka: the
// connection's next response is the next request's.
//
// Concurrency: a Server is safe for concurrent use; each connection has
// its own goroutine (and one writing its pipelined answers), and the
// Backend is called concurrently.
package kafka
