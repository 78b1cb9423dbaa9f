package errcode

import (
	"strconv"
	"strings"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Info is what the code base knows about one ErrorCode, written once.
type Info struct {
	// Name is the SPEC §1.4 name: the enum value's name without its
	// ERROR_CODE_ prefix, e.g. "NOT_LEADER_OR_FOLLOWER".
	Name string
	// Kafka is the code's number on the Kafka wire protocol (kerr's table):
	// the same name's where Kafka has one, else the nearest Kafka code, so
	// a Kafka client takes the action the twinlog code asks for (the
	// mapping is pinned in errcode_test.go with franz-go's names).
	Kafka int16
	// Description says in one line what the code means, for operators.
	Description string
	// Retriable: the same request may succeed later (SPEC §1.4's list, and
	// Kafka's RetriableException where SPEC is silent). It does not say that
	// a retried produce cannot be appended twice: REQUEST_TIMED_OUT and
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND are retriable and may duplicate.
	Retriable bool
	// RefreshMetadata: a data-plane client (produce, consumer fetch,
	// ListOffsets) answers the code by refreshing Metadata and retrying the
	// same request at once, as twinctl does: the leader, its epoch or its
	// ISR has moved, or is about to. Implies Retriable.
	RefreshMetadata bool
	// MirrorFatal: a source answering the code ends the mirror run in FAILED
	// instead of being retried within the run (SPEC §6.3, §6.6 step 1).
	MirrorFatal bool
	// MirrorFatalReason is the run's lastError text for a MirrorFatal code
	// (`twinctl mirrors describe`): what happened at the source, that the
	// partition's records are kept, and what the operator may do.
	MirrorFatalReason string
	// Phrase is how twinctl words the code after its subject ("topic t:
	// already exists"); empty means Name.
	Phrase string
	// Hint is twinctl's next step for an operator who got the code, with
	// {topic} standing for the topic at hand (see HintFor); may be empty.
	Hint string
}

// topicPlaceholder stands for the topic in a Hint.
const topicPlaceholder = "{topic}"

// HintFor returns i's Hint for an operator working on topic.
func (i Info) HintFor(topic string) string {
	return strings.ReplaceAll(i.Hint, topicPlaceholder, topic)
}

// Of returns the table's entry for c. A value the table does not know (a
// newer server's code) gets its number as Name and nothing else: not
// retriable, not fatal to a mirror run, no hint.
func Of(c twinlogv1.ErrorCode) Info {
	if c >= 0 && int(c) < len(table) && table[c].Name != "" {
		return table[c]
	}
	return Info{Name: strconv.Itoa(int(c)), Kafka: -1, Description: "an error code this build does not know (a newer server's?)"}
}

// Hints shared by two codes.
const (
	notEnoughReplicasHint   = "the ISR is below min.insync.replicas; check `twinctl partitions describe` or produce with --acks 1"
	noAcceptableReplicaHint = "no acceptable replica; check `twinctl brokers list` and `twinctl partitions describe`"
)

// table is indexed by ErrorCode. Retriable follows SPEC §1.4 where Kafka's
// clients would differ (noted per entry): twinlog answers a missing or
// re-created topic for good, where Kafka's clients wait for metadata to
// catch up.
var table = [...]Info{
	twinlogv1.ErrorCode_ERROR_CODE_NONE: {
		Name:        "NONE",
		Kafka:       0,
		Description: "no error",
	},
	twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR: {
		Name:        "UNKNOWN_SERVER_ERROR",
		Kafka:       -1,
		Description: "the server failed in a way no other code names; its message and log say more",
	},
	twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER: {
		Name:        "NOT_LEADER_OR_FOLLOWER",
		Kafka:       6,
		Description: "the broker does not lead the partition: leadership moved, or was lost while the request waited",
		Retriable:   true,
		// A produce waiting for acks=all when the leader loses leadership
		// gets it too (SPEC §4.1); its batch may survive on the new leader,
		// so a retry may duplicate it, as with Kafka's non-idempotent
		// producer.
		RefreshMetadata: true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH: {
		Name:            "FENCED_LEADER_EPOCH",
		Kafka:           74,
		Description:     "the request's leader epoch is older than the leader's: the requester's metadata is stale",
		Retriable:       true,
		RefreshMetadata: true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH: {
		Name:            "UNKNOWN_LEADER_EPOCH",
		Kafka:           75,
		Description:     "the request's leader epoch is newer than the broker's, or its truncation is not done yet: the broker lags",
		Retriable:       true,
		RefreshMetadata: true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER: {
		Name:        "NOT_CONTROLLER",
		Kafka:       41,
		Description: "the server is not the cluster's controller, or has not seen the epochs the request names",
		// Retriable once sent to the controller; twinctl leaves finding it
		// to the operator (the hint).
		Retriable: true,
		Hint:      "point --bootstrap at the cluster's controller",
	},
	twinlogv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS: {
		Name:        "NOT_ENOUGH_REPLICAS",
		Kafka:       19,
		Description: "acks=all produce refused: the ISR is below min.insync.replicas; nothing was appended",
		Retriable:   true,
		// It appends nothing (SPEC §4.1), so a retry cannot duplicate. The
		// refresh finds a new leader if the ISR shrank with a leadership
		// change; Kafka's producer retries without one.
		RefreshMetadata: true,
		Hint:            notEnoughReplicasHint,
	},
	twinlogv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND: {
		Name:        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
		Kafka:       20,
		Description: "the ISR fell below min.insync.replicas after the batch was appended; it may still commit",
		// Retriable in Kafka, but the batch is in the leader's log and may
		// commit: a retry can duplicate it, so twinctl reports the error
		// instead of retrying.
		Retriable: true,
		Hint:      notEnoughReplicasHint,
	},
	twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT: {
		Name:        "REQUEST_TIMED_OUT",
		Kafka:       7,
		Description: "the request did not complete within its timeout; a produce's batch may still commit",
		// Retriable in Kafka, but an acks=all batch that timed out is in the
		// leader's log and may commit: a retry can duplicate it, so twinctl
		// reports the error instead of retrying a produce.
		Retriable: true,
		Hint:      "retry, or raise --timeout",
	},
	twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE: {
		Name:        "CORRUPT_MESSAGE",
		Kafka:       2,
		Description: "a batch failed its checks (CRC, lengths, counts, compression)",
		// A batch damaged on the way is whole when sent again; a mirror run
		// fails after repeated ones (SPEC §6.3).
		Retriable: true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS: {
		Name:        "COORDINATOR_LOAD_IN_PROGRESS",
		Kafka:       14,
		Description: "the __mirror_state leader has not read its partition up to its high watermark yet, or the broker has no producer id block from the controller yet (InitProducerId)",
		Retriable:   true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_SOURCE: {
		Name:        "INVALID_MIRROR_SOURCE",
		Kafka:       -1,
		Description: "the partition is a mirror target that is not stopped, so it cannot serve as a mirror source",
		// Only mirror fetchers get it, which refresh Metadata and back off
		// (SPEC §6.3), as for every code that is not MirrorFatal.
		Retriable: true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED: {
		Name:        "REQUEST_LIMIT_REACHED",
		Kafka:       89,
		Description: "the response was cut at the partition limit; send the request again with its next cursor",
		Retriable:   true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE: {
		Name:        "OFFSET_OUT_OF_RANGE",
		Kafka:       1,
		Description: "the offset is outside the partition's log; reposition",
	},
	twinlogv1.ErrorCode_ERROR_CODE_LOG_TRUNCATED: {
		Name:        "LOG_TRUNCATED",
		Kafka:       74,
		Description: "the log was truncated below the consumer's position since its leader epoch; reposition to the offset given",
	},
	twinlogv1.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC: {
		Name:        "READ_ONLY_TOPIC",
		Kafka:       42,
		Description: "the topic is a mirror target: only its mirror writes to it",
		Hint:        "the topic is a mirror target; stop the mirror with `twinctl mirrors stop` before producing",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID: {
		Name:        "INCONSISTENT_TOPIC_ID",
		Kafka:       103,
		Description: "the topic's id is not the one expected: the topic was re-created, or the id belongs to another topic",
		// Retriable in Kafka (metadata may lag); a mirror's source that
		// re-created the topic holds other records, so it is fatal here.
		MirrorFatal: true,
		MirrorFatalReason: "source topic re-created (another topic id): records kept, partition read-only; " +
			"stop the mirror topic to make it writable",
	},
	twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION: {
		Name:        "UNKNOWN_TOPIC_OR_PARTITION",
		Kafka:       3,
		Description: "no such topic or partition",
		// Retriable in Kafka (metadata may lag); twinlog answers for good.
		MirrorFatal: true,
		MirrorFatalReason: "source topic or partition gone (deleted?): records kept, partition read-only; " +
			"stop the mirror topic to make it writable, or re-create the mirror",
		Phrase: "unknown topic or partition",
		Hint:   "list topics with `twinctl topics list`",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST: {
		Name:        "INVALID_REQUEST",
		Kafka:       42,
		Description: "the request is malformed or contradicts the state it names",
	},
	twinlogv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH: {
		Name:        "STALE_BROKER_EPOCH",
		Kafka:       77,
		Description: "the broker epoch in the request is not the broker's registered one (an older incarnation)",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION: {
		Name:        "INVALID_UPDATE_VERSION",
		Kafka:       95,
		Description: "AlterPartition's partition epoch is older than the controller's",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA: {
		Name:        "INELIGIBLE_REPLICA",
		Kafka:       107,
		Description: "AlterPartition names an ISR member that is not acceptable or not in its registered broker epoch",
	},
	twinlogv1.ErrorCode_ERROR_CODE_NEW_LEADER_ELECTED: {
		Name:        "NEW_LEADER_ELECTED",
		Kafka:       108,
		Description: "AlterPartition completed a reassignment that moved leadership to another replica",
	},
	twinlogv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED: {
		Name:              "TOPIC_AUTHORIZATION_FAILED",
		Kafka:             29,
		Description:       "not authorized for the topic",
		MirrorFatal:       true,
		MirrorFatalReason: "not authorized at the source: records kept, partition read-only",
	},
	twinlogv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS: {
		Name:        "TOPIC_ALREADY_EXISTS",
		Kafka:       36,
		Description: "a topic of that name exists",
		Phrase:      "already exists",
		Hint:        "inspect it with `twinctl topics describe " + topicPlaceholder + "`",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC: {
		Name:        "INVALID_TOPIC",
		Kafka:       17,
		Description: "the topic name is invalid, collides with another's, or names an internal topic",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG: {
		Name:        "INVALID_CONFIG",
		Kafka:       40,
		Description: "a config key is unknown or its value invalid",
		Hint:        "check the key and value against `twinctl configs get`",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS: {
		Name:        "INVALID_PARTITIONS",
		Kafka:       37,
		Description: "the partition count is invalid",
		Hint:        "use --partitions ≥ 1",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR: {
		Name:        "INVALID_REPLICATION_FACTOR",
		Kafka:       38,
		Description: "the replication factor is invalid or larger than the number of brokers",
		Hint:        "use a replication factor no larger than the number of brokers (`twinctl brokers list`)",
	},
	twinlogv1.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE: {
		Name:        "MESSAGE_TOO_LARGE",
		Kafka:       10,
		Description: "a batch is larger than the broker accepts",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUIRED_ACKS: {
		Name:        "INVALID_REQUIRED_ACKS",
		Kafka:       21,
		Description: "acks is not -1 (all), 0 or 1",
	},
	twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE: {
		Name:        "BROKER_NOT_AVAILABLE",
		Kafka:       8,
		Description: "a broker or cluster the request needs (a mirror's source) did not answer",
		// Not retriable, as in Kafka: the operator repeats the command once
		// the source answers (the server's message says so).
	},
	twinlogv1.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR: {
		Name:        "KAFKA_STORAGE_ERROR",
		Kafka:       56,
		Description: "the broker's copy of the partition is offline: its log failed to open, or failed since",
		Retriable:   true,
		// Retriable in Kafka's clients too (an InvalidMetadataException):
		// the controller moves leadership to a replica that can serve, which
		// a refresh finds. A retried produce cannot duplicate when the log
		// was offline from the start (it appended nothing); when it failed
		// during this very append the batch may or may not have been
		// written, as with Kafka's non-idempotent producer.
		RefreshMetadata: true,
		Hint: "the leader's copy of the partition is offline (its log failed); `twinctl brokers list` shows which broker (OFFLINE), " +
			"and docs/operations.md (\"A corrupt partition on a broker's disk\") how to recover",
	},
	twinlogv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED: {
		Name:        "ELECTION_NOT_NEEDED",
		Kafka:       84,
		Description: "no election needed: the preferred replica leads already",
		Hint:        "the preferred replica already leads",
	},
	twinlogv1.ErrorCode_ERROR_CODE_ELIGIBLE_LEADERS_NOT_AVAILABLE: {
		Name:        "ELIGIBLE_LEADERS_NOT_AVAILABLE",
		Kafka:       83,
		Description: "no eligible replica can take leadership",
		// Retriable in Kafka's admin client; an election is the operator's
		// to repeat.
		Hint: noAcceptableReplicaHint,
	},
	twinlogv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE: {
		Name:        "PREFERRED_LEADER_NOT_AVAILABLE",
		Kafka:       80,
		Description: "the preferred replica cannot take leadership now",
		// As ELIGIBLE_LEADERS_NOT_AVAILABLE.
		Hint: noAcceptableReplicaHint,
	},
	twinlogv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS: {
		Name:        "NO_REASSIGNMENT_IN_PROGRESS",
		Kafka:       85,
		Description: "no reassignment of the partition is in progress",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT: {
		Name:        "INVALID_REPLICA_ASSIGNMENT",
		Kafka:       39,
		Description: "the replica assignment names unregistered brokers, or a broker twice",
		Hint:        "name only registered brokers (`twinctl brokers list`), each once per partition",
	},
	twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR: {
		Name:        "UNKNOWN_MIRROR",
		Kafka:       91,
		Description: "no mirror of that name",
		Phrase:      "no such mirror",
		Hint:        "list mirrors with `twinctl mirrors describe`",
	},
	twinlogv1.ErrorCode_ERROR_CODE_MIRROR_ALREADY_EXISTS: {
		Name:        "MIRROR_ALREADY_EXISTS",
		Kafka:       92,
		Description: "a mirror of that name exists",
		Phrase:      "mirror already exists",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE: {
		Name:        "INVALID_MIRROR_STATE",
		Kafka:       42,
		Description: "the mirror topic's state does not allow the operation",
		Hint:        "check the partition states with `twinctl mirrors describe`",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_RECORD: {
		Name:        "INVALID_RECORD",
		Kafka:       87,
		Description: "a batch is well-formed but not one a producer may send",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_FETCH_SESSION_EPOCH: {
		Name:        "INVALID_FETCH_SESSION_EPOCH",
		Kafka:       71,
		Description: "a follower fetch older than one the leader already evaluated in this leader epoch",
		// The follower's next fetch supersedes it.
		Retriable: true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION: {
		Name:        "DUPLICATE_BROKER_REGISTRATION",
		Kafka:       101,
		Description: "another incarnation of the broker id holds a live session",
		// The registration succeeds once the old session expires.
		Retriable: true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_BROKER_ID_NOT_REGISTERED: {
		Name:        "BROKER_ID_NOT_REGISTERED",
		Kafka:       102,
		Description: "the broker id is not registered",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_TIMESTAMP: {
		Name:        "INVALID_TIMESTAMP",
		Kafka:       32,
		Description: "a record's timestamp is outside the window the broker accepts around its clock",
	},
	twinlogv1.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER: {
		Name:        "OUT_OF_ORDER_SEQUENCE_NUMBER",
		Kafka:       45,
		Description: "an idempotent producer's batch does not follow its previous one in the partition",
	},
	twinlogv1.ErrorCode_ERROR_CODE_DUPLICATE_SEQUENCE_NUMBER: {
		Name:        "DUPLICATE_SEQUENCE_NUMBER",
		Kafka:       46,
		Description: "a request repeats a batch the partition holds among batches it does not",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH: {
		Name:        "INVALID_PRODUCER_EPOCH",
		Kafka:       47,
		Description: "an idempotent producer's epoch is older than the partition's: a newer producer with its id fenced it",
	},
	twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE: {
		Name:        "COORDINATOR_NOT_AVAILABLE",
		Kafka:       15,
		Description: "no group coordinator is available yet: the group's __consumer_offsets partition has no leader, or the topic cannot be created with fewer brokers than offsets.topic.replication.factor",
		Retriable:   true,
		Hint:        "check `twinctl brokers list`: __consumer_offsets needs offsets.topic.replication.factor unfenced brokers",
	},
	twinlogv1.ErrorCode_ERROR_CODE_NOT_COORDINATOR: {
		Name:        "NOT_COORDINATOR",
		Kafka:       16,
		Description: "this broker does not coordinate the group (any more): find its coordinator again",
		Retriable:   true,
	},
	twinlogv1.ErrorCode_ERROR_CODE_ILLEGAL_GENERATION: {
		Name:        "ILLEGAL_GENERATION",
		Kafka:       22,
		Description: "the member's generation is not the group's: it must rejoin",
	},
	twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID: {
		Name:        "UNKNOWN_MEMBER_ID",
		Kafka:       25,
		Description: "the member is not in the group; an administrator's offset commit is refused while the group has members",
		Hint:        "stop the group's consumers (`twinctl groups describe` lists them), then retry",
	},
	twinlogv1.ErrorCode_ERROR_CODE_REBALANCE_IN_PROGRESS: {
		Name:        "REBALANCE_IN_PROGRESS",
		Kafka:       27,
		Description: "the group is rebalancing: its members rejoin",
	},
	twinlogv1.ErrorCode_ERROR_CODE_NON_EMPTY_GROUP: {
		Name:        "NON_EMPTY_GROUP",
		Kafka:       68,
		Description: "the group has members and cannot be deleted",
		Hint:        "stop the group's consumers (`twinctl groups describe` lists them), then retry",
	},
	twinlogv1.ErrorCode_ERROR_CODE_GROUP_ID_NOT_FOUND: {
		Name:        "GROUP_ID_NOT_FOUND",
		Kafka:       69,
		Description: "the group does not exist",
		Hint:        "`twinctl groups list` lists the groups",
	},
	twinlogv1.ErrorCode_ERROR_CODE_INVALID_GROUP_ID: {
		Name:        "INVALID_GROUP_ID",
		Kafka:       24,
		Description: "the group id is empty or invalid",
	},
	twinlogv1.ErrorCode_ERROR_CODE_OFFSET_METADATA_TOO_LARGE: {
		Name:        "OFFSET_METADATA_TOO_LARGE",
		Kafka:       12,
		Description: "a committed offset's metadata is longer than offset.metadata.max.bytes",
	},
	twinlogv1.ErrorCode_ERROR_CODE_GROUP_SUBSCRIBED_TO_TOPIC: {
		Name:        "GROUP_SUBSCRIBED_TO_TOPIC",
		Kafka:       86,
		Description: "the group still consumes the topic whose offsets were to be deleted",
	},
	twinlogv1.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED: {
		Name:        "GROUP_AUTHORIZATION_FAILED",
		Kafka:       30,
		Description: "not authorized for the group",
		Hint:        "ask an administrator for an ACL on the group (`twinctl acls add`)",
	},
	twinlogv1.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED: {
		Name:              "CLUSTER_AUTHORIZATION_FAILED",
		Kafka:             31,
		Description:       "not authorized for the cluster (or the mirror) operation",
		MirrorFatal:       true,
		MirrorFatalReason: "the source refuses this cluster's mirror principal: records kept, partition read-only; grant it the Mirror ACL at the source and restart the mirror",
		Hint:              "ask an administrator for an ACL on the cluster (`twinctl acls add`)",
	},
	twinlogv1.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED: {
		Name:              "SASL_AUTHENTICATION_FAILED",
		Kafka:             58,
		Description:       "the connection carries no identity the server accepts",
		MirrorFatal:       true,
		MirrorFatalReason: "the source does not accept this cluster's credentials: records kept, partition read-only",
		Hint:              "connect with a client certificate the server trusts (--tls-cert, --tls-key, --tls-ca)",
	},
	twinlogv1.ErrorCode_ERROR_CODE_UNACCEPTABLE_CREDENTIAL: {
		Name:        "UNACCEPTABLE_CREDENTIAL",
		Kafka:       93,
		Description: "the SCRAM credential is refused (iterations outside 4096..16384, or a malformed salt or salted password)",
	},
	twinlogv1.ErrorCode_ERROR_CODE_RESOURCE_NOT_FOUND: {
		Name:        "RESOURCE_NOT_FOUND",
		Kafka:       91,
		Description: "the named resource does not exist",
	},
}

// fromKafka maps a Kafka code to the enum value with that Kafka code (the
// smallest, where several share one).
var fromKafka = func() map[int16]twinlogv1.ErrorCode {
	m := map[int16]twinlogv1.ErrorCode{}
	for c := len(table) - 1; c >= 0; c-- {
		if table[c].Name != "" {
			m[table[c].Kafka] = twinlogv1.ErrorCode(c)
		}
	}
	return m
}()

// FromKafka is the ErrorCode for a Kafka error code (a group coordinator's
// answer carried on the gRPC API): the value whose Kafka code it is, with
// ok false and UNKNOWN_SERVER_ERROR for a Kafka code the enum has no value
// for.
func FromKafka(k int16) (twinlogv1.ErrorCode, bool) {
	if k == 0 {
		return twinlogv1.ErrorCode_ERROR_CODE_NONE, true
	}
	c, ok := fromKafka[k]
	if !ok || k == -1 {
		return twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR, false
	}
	return c, true
}

// byName maps each code's Name to the code.
var byName = func() map[string]twinlogv1.ErrorCode {
	m := map[string]twinlogv1.ErrorCode{}
	for c, in := range table {
		if in.Name != "" {
			m[in.Name] = twinlogv1.ErrorCode(c)
		}
	}
	return m
}()

// ByName returns the code whose Name is name ("TOPIC_AUTHORIZATION_FAILED"),
// false for a name the table does not know.
func ByName(name string) (twinlogv1.ErrorCode, bool) {
	c, ok := byName[name]
	return c, ok
}

// DeniedMessagePrefix is how an authorization refusal carried outside an
// ErrorCode field (a gRPC PermissionDenied status, security/authz) starts:
// the code's Name and a colon. Denied reads it back.
func DeniedMessagePrefix(c twinlogv1.ErrorCode) string { return Of(c).Name + ": " }

// Denied returns the code a PermissionDenied message names (see
// DeniedMessagePrefix), CLUSTER_AUTHORIZATION_FAILED when it names none.
func Denied(msg string) twinlogv1.ErrorCode {
	name, _, _ := strings.Cut(msg, ":")
	if c, ok := ByName(name); ok && c != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return c
	}
	return twinlogv1.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED
}
