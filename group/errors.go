package group

import (
	"errors"
	"strconv"
)

// ErrorCode is a Kafka protocol error code, as the group APIs put it on the
// wire. The numbers are Kafka's (clients/.../protocol/Errors.java); a test
// pins each one against franz-go's kerr table.
type ErrorCode int16

// The codes the group coordinator answers with.
const (
	UnknownServerError        ErrorCode = -1
	None                      ErrorCode = 0
	UnknownTopicOrPartition   ErrorCode = 3
	InvalidFetchSize          ErrorCode = 4
	NotLeaderOrFollower       ErrorCode = 6
	RequestTimedOut           ErrorCode = 7
	MessageTooLarge           ErrorCode = 10
	OffsetMetadataTooLarge    ErrorCode = 12
	NetworkException          ErrorCode = 13
	CoordinatorLoadInProgress ErrorCode = 14
	CoordinatorNotAvailable   ErrorCode = 15
	NotCoordinator            ErrorCode = 16
	RecordListTooLarge        ErrorCode = 18
	NotEnoughReplicas         ErrorCode = 19
	IllegalGeneration         ErrorCode = 22
	InconsistentGroupProtocol ErrorCode = 23
	InvalidGroupID            ErrorCode = 24
	UnknownMemberID           ErrorCode = 25
	InvalidSessionTimeout     ErrorCode = 26
	RebalanceInProgress       ErrorCode = 27
	KafkaStorageError         ErrorCode = 56
	NonEmptyGroup             ErrorCode = 68
	GroupIDNotFound           ErrorCode = 69
	MemberIDRequired          ErrorCode = 79
	GroupMaxSizeReached       ErrorCode = 81
	FencedInstanceID          ErrorCode = 82
	GroupSubscribedToTopic    ErrorCode = 86
)

var codeNames = map[ErrorCode]string{
	UnknownServerError:        "UNKNOWN_SERVER_ERROR",
	None:                      "NONE",
	UnknownTopicOrPartition:   "UNKNOWN_TOPIC_OR_PARTITION",
	InvalidFetchSize:          "INVALID_FETCH_SIZE",
	NotLeaderOrFollower:       "NOT_LEADER_OR_FOLLOWER",
	RequestTimedOut:           "REQUEST_TIMED_OUT",
	MessageTooLarge:           "MESSAGE_TOO_LARGE",
	OffsetMetadataTooLarge:    "OFFSET_METADATA_TOO_LARGE",
	NetworkException:          "NETWORK_EXCEPTION",
	CoordinatorLoadInProgress: "COORDINATOR_LOAD_IN_PROGRESS",
	CoordinatorNotAvailable:   "COORDINATOR_NOT_AVAILABLE",
	NotCoordinator:            "NOT_COORDINATOR",
	RecordListTooLarge:        "RECORD_LIST_TOO_LARGE",
	NotEnoughReplicas:         "NOT_ENOUGH_REPLICAS",
	IllegalGeneration:         "ILLEGAL_GENERATION",
	InconsistentGroupProtocol: "INCONSISTENT_GROUP_PROTOCOL",
	InvalidGroupID:            "INVALID_GROUP_ID",
	UnknownMemberID:           "UNKNOWN_MEMBER_ID",
	InvalidSessionTimeout:     "INVALID_SESSION_TIMEOUT",
	RebalanceInProgress:       "REBALANCE_IN_PROGRESS",
	KafkaStorageError:         "KAFKA_STORAGE_ERROR",
	NonEmptyGroup:             "NON_EMPTY_GROUP",
	GroupIDNotFound:           "GROUP_ID_NOT_FOUND",
	MemberIDRequired:          "MEMBER_ID_REQUIRED",
	GroupMaxSizeReached:       "GROUP_MAX_SIZE_REACHED",
	FencedInstanceID:          "FENCED_INSTANCE_ID",
	GroupSubscribedToTopic:    "GROUP_SUBSCRIBED_TO_TOPIC",
}

// String is Kafka's name of the code.
func (e ErrorCode) String() string {
	if n, ok := codeNames[e]; ok {
		return n
	}
	return "ERROR_CODE(" + strconv.Itoa(int(e)) + ")"
}

// appendErrorToResponse is the code a request waiting on a failed append
// gets, from the append's own code: Kafka's coordinator turns log errors
// into the coordinator errors a client knows how to retry
// (CoordinatorOperationExceptionHelper, appendGroupMetadataErrorToResponseError).
func appendErrorToResponse(code ErrorCode) ErrorCode {
	switch code {
	case UnknownTopicOrPartition, NotEnoughReplicas, RequestTimedOut:
		return CoordinatorNotAvailable
	case NotLeaderOrFollower, KafkaStorageError:
		return NotCoordinator
	case MessageTooLarge, RecordListTooLarge, InvalidFetchSize, None:
		return UnknownServerError
	case NetworkException:
		return CoordinatorLoadInProgress
	}
	return code
}

// Sentinel errors.
var (
	// ErrInvalidConfig: Config.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("group: invalid config")
	// ErrCorruptRecord: a __consumer_offsets record does not decode.
	ErrCorruptRecord = errors.New("group: corrupt record")
	// ErrUnsupportedRecord: a record of a type this coordinator does not
	// keep (Kafka's consumer, share or transaction records, key version > 2).
	ErrUnsupportedRecord = errors.New("group: unsupported record type")
	// ErrNoGroup: Group of a group the coordinator does not hold.
	ErrNoGroup = errors.New("group: no such group")
	// ErrNotLoading: Replay after Loaded, or on an unloaded coordinator.
	ErrNotLoading = errors.New("group: coordinator is not loading")
)
