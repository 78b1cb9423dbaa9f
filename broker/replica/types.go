package replica

import (
	"errors"
	"fmt"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage/epoch"
)

// ErrorCode is the protocol error table (SPEC §1.4), shared with the wire.
type ErrorCode = pb.ErrorCode

// Shorthands for the codes the replica produces.
const (
	errNone             = pb.ErrorCode_ERROR_CODE_NONE
	errNotLeader        = pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
	errFenced           = pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH
	errUnknownEpoch     = pb.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH
	errNotEnough        = pb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS
	errNotEnoughAfter   = pb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND
	errTimedOut         = pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
	errOutOfRange       = pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE
	errLogTruncated     = pb.ErrorCode_ERROR_CODE_LOG_TRUNCATED
	errReadOnly         = pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC
	errInvalidRequest   = pb.ErrorCode_ERROR_CODE_INVALID_REQUEST
	errInvalidMirrorSrc = pb.ErrorCode_ERROR_CODE_INVALID_MIRROR_SOURCE
	errStaleBrokerEpoch = pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH
	errStaleFetch       = pb.ErrorCode_ERROR_CODE_INVALID_FETCH_SESSION_EPOCH
	errLoadInProgress   = pb.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS
)

// Sentinel errors returned by the shell-facing hooks (never for protocol
// outcomes, which are ErrorCodes).
var (
	ErrNotLeader     = errors.New("replica: not leader")
	ErrInvalidBatch  = errors.New("replica: invalid batch")
	ErrInvalidConfig = errors.New("replica: invalid config")
	// ErrLogMismatch: the shell reported a log that disagrees with the
	// machine's view (ConfirmTruncation); rebuild the replica from disk.
	ErrLogMismatch = errors.New("replica: log disagrees with the replica")
	// ErrTruncationUnconfirmed: an append was refused because the shell has
	// not reported where the last truncation left the log (ConfirmTruncation).
	ErrTruncationUnconfirmed = errors.New("replica: truncation not confirmed")
)

// Role is what the replica currently does for its partition.
type Role int8

const (
	// RoleNone: no leader known, or this broker is not in the replica set.
	RoleNone Role = iota
	// RoleLeader serves produce and fetch.
	RoleLeader
	// RoleFollower fetches from the leader.
	RoleFollower
)

func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	default:
		return "none"
	}
}

// Config is the static configuration of one partition replica.
type Config struct {
	// ID is this broker.
	ID twinlog.BrokerID
	// Partition is the partition replicated.
	Partition twinlog.TopicPartition
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms (SPEC §4.5); 0 means
	// the default 30000.
	ReplicaLagTimeMaxMs int64
	// FetchSeqStart: the first follower fetch is numbered FetchSeqStart+1
	// (FetchRequest.Seq). A shell that rebuilds the replica of a partition
	// within one broker epoch starts it above every seq its predecessor
	// sent, or the leader refuses the new replica's fetches as stale until
	// its next leader epoch.
	FetchSeqStart int64
}

func (c Config) withDefaults() Config {
	if c.ReplicaLagTimeMaxMs == 0 {
		c.ReplicaLagTimeMaxMs = 30000
	}
	return c
}

// Validate reports a malformed configuration.
func (c Config) Validate() error {
	if c.ID < 0 {
		return fmt.Errorf("%w: broker id %d", ErrInvalidConfig, c.ID)
	}
	if c.ReplicaLagTimeMaxMs < 0 {
		return fmt.Errorf("%w: negative replica lag %d", ErrInvalidConfig, c.ReplicaLagTimeMaxMs)
	}
	if c.FetchSeqStart < 0 {
		return fmt.Errorf("%w: negative fetch seq start %d", ErrInvalidConfig, c.FetchSeqStart)
	}
	return nil
}

// LogState is the durable state of the local log the replica starts from:
// what the shell read from storage at open (SPEC §2.5).
type LogState struct {
	LogStartOffset twinlog.Offset
	LogEndOffset   twinlog.Offset
	// HighWatermark from the checkpoint; clamped to [LogStartOffset, LogEndOffset].
	HighWatermark twinlog.Offset
	// Epochs is the leader-epoch cache (checkpoint).
	Epochs []epoch.Entry
	// AlignedEpoch is partition.metadata's aligned_epoch (SPEC §6.6), −1 none.
	AlignedEpoch twinlog.Epoch
}

// TruncationPoint is a recorded mirror truncation (SPEC §6.2f): leader epoch
// LeaderEpoch truncated the log to Offset.
type TruncationPoint struct {
	LeaderEpoch twinlog.Epoch
	Offset      twinlog.Offset
}

// PartitionState is the controller's view of the partition as applied from
// the metadata stream.
//
// The versioned fields (Leader … RecoveryState) are applied only if
// LeaderEpoch is newer, or equal with a newer PartitionEpoch. Brokers, MinISR
// and TruncationPoints are not versioned by the partition and are always
// taken, since the stream delivers them in order.
type PartitionState struct {
	Leader         twinlog.BrokerID
	LeaderEpoch    twinlog.Epoch
	PartitionEpoch twinlog.PartitionEpoch
	Replicas       []twinlog.BrokerID
	ISR            []twinlog.BrokerID
	RecoveryState  pb.LeaderRecoveryState

	// MinISR is min.insync.replicas; m = min(MinISR, |Replicas|) (SPEC §1.2).
	MinISR int
	// Brokers maps every acceptable broker (SPEC §1.2) to its registered
	// broker epoch. A broker missing here is not acceptable.
	Brokers map[twinlog.BrokerID]twinlog.BrokerEpoch
	// Registered maps every registered broker, acceptable or not (fenced,
	// in controlled shutdown, with an offline log dir), to its registered
	// broker epoch: a FOLLOWER fetch is served only with exactly this epoch
	// (fenceFollowerFetch). A broker missing here is looked up in Brokers
	// (a subset of the registrations), so callers that know only acceptable
	// brokers may leave it nil.
	Registered map[twinlog.BrokerID]twinlog.BrokerEpoch
	// TruncationPoints are the partition's recorded truncations (§6.2f).
	TruncationPoints []TruncationPoint
	// AddingReplicas, ELR and LastKnownELR are the partition record's
	// adding replicas (SPEC §3.8), eligible leader replicas and last known
	// ELR (§3.3), versioned like Replicas.
	AddingReplicas []twinlog.BrokerID
	ELR            []twinlog.BrokerID
	LastKnownELR   []twinlog.BrokerID
}

// BatchMeta is what the machine needs to know about one record batch: its
// offsets and record epoch (SPEC §2.2). The shell parses it from the batch
// header.
type BatchMeta struct {
	BaseOffset twinlog.Offset
	LastOffset twinlog.Offset
	Epoch      twinlog.Epoch
}

func (b BatchMeta) String() string {
	if b.BaseOffset == b.LastOffset {
		return fmt.Sprintf("%d@%d", b.BaseOffset, b.Epoch)
	}
	return fmt.Sprintf("%d-%d@%d", b.BaseOffset, b.LastOffset, b.Epoch)
}

// Acks is the produce acks setting.
type Acks int8

const (
	AcksNone   Acks = 0
	AcksLeader Acks = 1
	AcksAll    Acks = -1
)

// ProposalID identifies a produce request in the shell; results refer to it.
type ProposalID uint64

// Proposal is one produce request's batch as the leader sees it.
type Proposal struct {
	ID         ProposalID
	Acks       Acks
	TimeoutMs  int64
	NumRecords int
}

// ProposeDecision answers Propose synchronously. With Error NONE the batch is
// accepted: it gets offsets [BaseOffset, LastOffset] and record epoch
// LeaderEpoch, and Ready.LogOps carries the append.
type ProposeDecision struct {
	Error       ErrorCode
	BaseOffset  twinlog.Offset
	LastOffset  twinlog.Offset
	LeaderEpoch twinlog.Epoch
}

// ProduceResult completes an acks=1 or acks=all proposal.
type ProduceResult struct {
	ID         ProposalID
	Error      ErrorCode
	BaseOffset twinlog.Offset
}

// FetchRequest is one partition of a Fetch (SPEC §4.3).
type FetchRequest struct {
	ReplicaID          twinlog.BrokerID
	BrokerEpoch        twinlog.BrokerEpoch
	FetcherType        pb.FetcherType
	FetchOffset        twinlog.Offset
	CurrentLeaderEpoch twinlog.Epoch
	LastFetchedEpoch   twinlog.Epoch
	// Seq numbers a FOLLOWER's fetches (FetchPartition.fetch_seq): each
	// NextFetch takes the next one. The leader refuses a fetch that is not
	// newer than one it already evaluated in this LE (see
	// fenceFollowerFetch). Unused for CONSUMER and MIRROR fetches.
	Seq int64
	// CommittedInEpoch (CONSUMER fetches): serve only once this leader has
	// committed in its LE (HW ≥ LESO); until then its HW may lag records
	// the previous leader committed (FetchRequest.committed_in_epoch).
	CommittedInEpoch bool
	// LeaderEpochOptional (CONSUMER fetches from the Kafka listener): a
	// CurrentLeaderEpoch of NoEpoch skips the leader epoch check, as
	// Kafka's protocol defines it, instead of INVALID_REQUEST.
	LeaderEpochOptional bool
}

// EpochEndOffset is a DivergingEpoch or an OffsetForLeaderEpoch answer.
type EpochEndOffset struct {
	Epoch     twinlog.Epoch
	EndOffset twinlog.Offset
}

// FetchDecision is the leader's answer to one FetchRequest. With Error NONE
// and no DivergingEpoch the shell returns the records in [ReadFrom, ReadUpTo)
// (none if ReadUpTo ≤ ReadFrom).
type FetchDecision struct {
	Error          ErrorCode
	DivergingEpoch *EpochEndOffset
	// TruncationOffset is LOG_TRUNCATED's offset, −1 otherwise.
	TruncationOffset twinlog.Offset
	ReadFrom         twinlog.Offset
	ReadUpTo         twinlog.Offset
	HighWatermark    twinlog.Offset
	LogStartOffset   twinlog.Offset
	LogEndOffset     twinlog.Offset
	LeaderEpoch      twinlog.Epoch
}

// FetchTarget is a fetch the follower wants sent to Leader.
type FetchTarget struct {
	Leader  twinlog.BrokerID
	Request FetchRequest
}

// FetchResponse is the leader's answer as the follower received it. Request
// is the request it answers, exactly as NextFetch produced it (the machine
// drops answers to stale requests). Batches are the records' metadata in log
// order.
type FetchResponse struct {
	Request        FetchRequest
	Error          ErrorCode
	LeaderEpoch    twinlog.Epoch
	HighWatermark  twinlog.Offset
	LogStartOffset twinlog.Offset
	LogEndOffset   twinlog.Offset
	DivergingEpoch *EpochEndOffset
	Batches        []BatchMeta
}

// Taint marks a replica skipped by a mirror start (SPEC §6.6 step 4): its
// records of epochs > Epoch from Offset on may not be the other cluster's.
type Taint struct {
	Epoch  twinlog.Epoch
	Offset twinlog.Offset
}

// LogOpKind says what a LogOp does to the local log.
type LogOpKind int8

const (
	// OpAppend appends Batches. For a leader proposal ProposalID names the
	// produce request whose batch it is (stamped with the batch's offsets and
	// epoch); otherwise the batches come from the fetch response or mirror
	// read just handed to the machine.
	OpAppend LogOpKind = iota + 1
	// OpTruncate removes every record at or above Offset, in whole batches:
	// a batch straddling Offset goes too (storage.Log.TruncateTo, Kafka's
	// truncateTo), so the log may end below Offset; the shell reports where
	// with ConfirmTruncation. At or above the LEO it removes no record but
	// still drops epoch-cache entries starting at or after Offset.
	OpTruncate
	// OpRestart deletes the whole log; it restarts empty at Offset.
	OpRestart
	// OpAdvanceLogStart moves the log start up to Offset.
	OpAdvanceLogStart
)

// LogOp is one change to the local log, to be applied in order.
type LogOp struct {
	Kind       LogOpKind
	Offset     twinlog.Offset
	Batches    []BatchMeta
	ProposalID ProposalID
	Leader     bool // OpAppend by the leader (Propose); false: as follower/mirror
}

func (o LogOp) String() string {
	switch o.Kind {
	case OpAppend:
		if o.Leader {
			return fmt.Sprintf("append %v (proposal %d)", o.Batches, o.ProposalID)
		}
		return fmt.Sprintf("append %v", o.Batches)
	case OpTruncate:
		return fmt.Sprintf("truncate to %d", o.Offset)
	case OpRestart:
		return fmt.Sprintf("restart at %d", o.Offset)
	case OpAdvanceLogStart:
		return fmt.Sprintf("log start %d", o.Offset)
	}
	return "?"
}

// AlterPartitionProposal is an ISR change for the controller. Seq identifies
// it: the shell hands it back with the response.
type AlterPartitionProposal struct {
	Seq     uint64
	Request *pb.AlterPartitionRequest
}

// EventType classifies an Event.
type EventType int8

const (
	EventRoleChange EventType = iota + 1
	EventISRChange
	EventHighWatermark
	EventTruncation
	EventFenced
	EventAlterRejected
	EventTaintCleared
	EventIgnored
	EventTaintsPending // SetTaintsPending changed (SPEC §6.4)
)

var eventNames = map[EventType]string{
	EventRoleChange: "role", EventISRChange: "isr", EventHighWatermark: "hw",
	EventTruncation: "truncation", EventFenced: "fenced", EventAlterRejected: "alter-rejected",
	EventTaintCleared: "taint-cleared", EventIgnored: "ignored", EventTaintsPending: "taints-pending",
}

// Event is a notable transition the shell logs (and counts in metrics).
type Event struct {
	Type   EventType
	Detail string
	// Cause says why the log was cut (EventTruncation only).
	Cause TruncationCause
}

// TruncationCause classifies a truncation of the local log, for the shell's
// metrics (SPEC §7's reason label) without reading the event's text.
type TruncationCause int8

const (
	// CauseDivergence: a follower cut at the leader's DivergingEpoch, or
	// restarted its log because the leader's batches contradict it (a
	// foreign epoch, a batch straddling the LEO).
	CauseDivergence TruncationCause = iota + 1
	// CauseOutOfRange: a follower's fetch offset was below the leader's log
	// start (OFFSET_OUT_OF_RANGE, SPEC §4.4).
	CauseOutOfRange
	// CauseAsLeader: TruncateAsLeader / TruncateFullyAsLeader, a mirror
	// leader's cut; its runner knows the reason (LMLE, divergence or out of
	// range at the source) and counts it.
	CauseAsLeader
	// CauseAddedBack: the log predates the replica's addition to the
	// replica set and was discarded (discardLogIfAddedBack).
	CauseAddedBack
)

// Label is the cause's metric label.
func (c TruncationCause) Label() string {
	switch c {
	case CauseDivergence:
		return "divergence"
	case CauseOutOfRange:
		return "out_of_range"
	case CauseAsLeader:
		return "as_leader"
	case CauseAddedBack:
		return "added_back"
	}
	return "unknown"
}

func (e Event) String() string { return eventNames[e.Type] + ": " + e.Detail }

// Ready is the work the shell must do after stepping the machine. Contract
// (persist, then send):
//
//  1. Apply LogOps in order to the log, then write EpochEntries (if
//     EpochsChanged) to the leader-epoch checkpoint, AlignedEpoch (if set)
//     to partition.metadata and TaintsCleared to __mirror_state; make them
//     durable as the flush policy requires (MustSync). A cleared taint is
//     written asynchronously (acks=all); the follower stays out of the ISR
//     until the shell calls ConfirmTaintCleared after that write (§6.6).
//  2. Only then expose HighWatermark, answer ProduceResults and send
//     AlterPartition: an acknowledgement or a controller ISR change must
//     never precede the local write it depends on.
//  3. Call Advance. If LogOps held an OpTruncate, then call
//     ConfirmTruncation with the log's end offset, before stepping the
//     machine again: a batch straddling the offset went whole, and the
//     machine takes the log's LEO (the follower refetches from there; its
//     HW, cache and, on a leader, LESO follow). That may produce another
//     Ready.
//
// The machine has already moved its view of the log; if a LogOp fails (or
// ConfirmTruncation reports a mismatch), the log dir is offline and the
// replica must be rebuilt from disk with New.
type Ready struct {
	LogOps         []LogOp
	EpochsChanged  bool
	EpochEntries   []epoch.Entry
	AlignedEpoch   *twinlog.Epoch
	TaintsCleared  []twinlog.BrokerID
	HighWatermark  *twinlog.Offset
	AlterPartition *AlterPartitionProposal
	ProduceResults []ProduceResult
	Events         []Event
}

// IsEmpty reports whether there is nothing to do.
func (rd *Ready) IsEmpty() bool {
	return len(rd.LogOps) == 0 && !rd.EpochsChanged && rd.AlignedEpoch == nil &&
		len(rd.TaintsCleared) == 0 && rd.HighWatermark == nil && rd.AlterPartition == nil &&
		len(rd.ProduceResults) == 0 && len(rd.Events) == 0
}
