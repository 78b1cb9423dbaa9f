package serve

import (
	"errors"
	"fmt"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/producer"
)

// ProduceLimits are the broker's checks of a producer's batches beyond
// their format: log.message.max.bytes per batch and
// log.message.timestamp.{before,after}.max.ms (before 0: unbounded);
// RequireKeys for a compacted topic (cleanup.policy compact), which
// refuses a record without a key (Kafka's INVALID_RECORD).
type ProduceLimits struct {
	MaxBatchBytes      int
	TimestampBeforeMax time.Duration
	TimestampAfterMax  time.Duration
	RequireKeys        bool
}

// KeylessRecordMessage is the error message of a compacted topic's
// refusal of a keyless record (storage.ErrKeylessRecord).
const KeylessRecordMessage = "compacted topic cannot accept a record without a key"

// ValidateProduce checks a producer's batches at broker time nowMs (SPEC
// §2.2, storage.ValidateProducerBatches: dense offsets, a true
// maxTimestamp, else INVALID_RECORD; CORRUPT_MESSAGE for what does not
// parse or check; INVALID_TIMESTAMP, MESSAGE_TOO_LARGE by the limits;
// INVALID_RECORD for a keyless record with RequireKeys) and returns them
// validated with the number of offsets they take.
func ValidateProduce(records []byte, nowMs int64, l ProduceLimits) (storage.Validated, int, pb.ErrorCode) {
	v, n, code, _ := ValidateProduceMessage(records, nowMs, l)
	return v, n, code
}

// ValidateProduceMessage is ValidateProduce with the error message that
// goes with the code: KeylessRecordMessage for a keyless record, else "".
func ValidateProduceMessage(records []byte, nowMs int64, l ProduceLimits) (storage.Validated, int, pb.ErrorCode, string) {
	if len(records) == 0 {
		return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, ""
	}
	validate := storage.ValidateProducerBatches
	if l.RequireKeys {
		validate = storage.ValidateKeyedProducerBatches
	}
	v, ts, err := validate(records)
	switch {
	case errors.Is(err, storage.ErrKeylessRecord):
		return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_INVALID_RECORD, KeylessRecordMessage
	case errors.Is(err, storage.ErrInvalidProducerBatch):
		return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_INVALID_RECORD, ""
	case err != nil:
		return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, ""
	case !TimestampsAllowed(ts, nowMs, l.TimestampBeforeMax, l.TimestampAfterMax):
		return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_INVALID_TIMESTAMP, ""
	}
	n := 0
	for _, bv := range v.Batches() {
		if bv.Size() > l.MaxBatchBytes {
			return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE, ""
		}
		n += int(bv.LastOffsetDelta()) + 1
		if n > 1<<30 {
			return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, ""
		}
	}
	return v, n, pb.ErrorCode_ERROR_CODE_NONE, ""
}

// TimestampsAllowed applies the before and after bounds to the records'
// timestamp range at broker time nowMs. The bounds are computed on the
// clock side (a Duration is under 2^63 ns, so nowMs ± it cannot
// overflow), never as nowMs − timestamp, which overflows for extreme
// timestamps.
func TimestampsAllowed(ts storage.TimestampRange, nowMs int64, before, after time.Duration) bool {
	if before > 0 && ts.Min < nowMs-before.Milliseconds() {
		return false
	}
	return ts.Max <= nowMs+after.Milliseconds()
}

// ProducerChecker is a partition log's idempotent-producer check
// (storage.Log.CheckProducers).
type ProducerChecker interface {
	CheckProducers(v storage.Validated) (producer.Verdict, int)
}

// Propose proposes a producer's batches v (p, validated) to the leader's
// replica r (partition locked) and fills what the decision settles of the
// partition's answer: its LE and log start, and on a refusal the error,
// with the leader for NOT_LEADER_OR_FOLLOWER. The host appends the
// batches with the Ready it processes next (and answers the producer when
// the replica reports the proposal's result).
//
// A leader first asks its log's producer state (storage/producer) about
// idempotent producers' batches: a retry of a batch the log holds is
// answered with the original's offsets and appends nothing (duplicate
// reports it: the host has no batch to append), one out of sequence or of
// a fenced epoch is refused with Kafka's code and why.
func Propose(r *replica.Replica, log ProducerChecker, v storage.Validated, p replica.Proposal, nowMs int64, out *pb.ProducePartitionResponse) (d replica.ProposeDecision, duplicate bool) {
	verdict := producer.Verdict{Outcome: producer.Append}
	at := -1
	if r.Role() == replica.RoleLeader && r.Writable() {
		verdict, at = log.CheckProducers(v)
	}
	switch verdict.Outcome {
	case producer.Append:
		d = r.Propose(p, nowMs)
	case producer.Duplicate:
		d = r.ProposeDuplicate(p, verdict.Original.FirstOffset, verdict.Original.LastOffset, nowMs)
		duplicate = d.Error == pb.ErrorCode_ERROR_CODE_NONE
	default:
		out.LeaderEpoch = int32(r.LeaderEpoch())
		out.LogStartOffset = int64(r.LogStartOffset())
		out.Error, out.ErrorMessage = ProducerRefusal(verdict, v.Batches()[at])
		return replica.ProposeDecision{Error: out.Error, BaseOffset: twinlog.NoOffset, LastOffset: twinlog.NoOffset, LeaderEpoch: r.LeaderEpoch()}, false
	}
	out.LeaderEpoch = int32(d.LeaderEpoch)
	out.LogStartOffset = int64(r.LogStartOffset())
	if d.Error != pb.ErrorCode_ERROR_CODE_NONE {
		out.Error = d.Error
		if d.Error == pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER {
			out.LeaderId = int32(r.Leader())
		}
		return d, false
	}
	out.BaseOffset = int64(d.BaseOffset)
	return d, duplicate
}

// ReadOnlyRefusal is the answer to a produce that a mirror partition's
// leader refused as read-only (READ_ONLY_TOPIC), given the topic's desired
// mirror state in the leader's metadata. While the mirror runs (MIRRORING,
// PAUSED, FAILED) the topic is read-only until a failover: READ_ONLY_TOPIC,
// which Kafka clients get as INVALID_REQUEST and do not retry. Once an
// operator has stopped it, a leader that is not writable yet is one that
// took over after the stop and whose mirror runner has not yet read the
// STOPPED state back (SPEC §6.6): NOT_LEADER_OR_FOLLOWER, which every client
// retries after a metadata refresh, instead of failing an idempotent
// producer that is moving to the destination.
func ReadOnlyRefusal(desired pb.MirrorState) (pb.ErrorCode, string) {
	if desired == pb.MirrorState_MIRROR_STATE_STOPPED {
		return pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, "the mirror topic was stopped (failed over) and this leader is not writable yet; retry"
	}
	return pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC, "a mirror topic is read-only until it is stopped (failover)"
}

// ProducerRefusal is the error and message for a batch b the producer
// state refused.
func ProducerRefusal(v producer.Verdict, b storage.BatchView) (pb.ErrorCode, string) {
	last := b.LastSequence()
	switch v.Outcome {
	case producer.StaleEpoch:
		return pb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH, fmt.Sprintf("producer %d epoch %d is fenced: the partition has epoch %d",
			b.ProducerID(), b.ProducerEpoch(), v.CurrentEpoch)
	case producer.OutOfOrder:
		return pb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER, fmt.Sprintf("producer %d epoch %d: sequence %d..%d, expected %d",
			b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), last, v.Expected)
	case producer.DuplicateAmongOthers:
		return pb.ErrorCode_ERROR_CODE_DUPLICATE_SEQUENCE_NUMBER, fmt.Sprintf("producer %d epoch %d: sequence %d..%d is at offsets %d..%d already, and the request has other batches",
			b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), last, v.Original.FirstOffset, v.Original.LastOffset)
	}
	return pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, fmt.Sprintf("producer check: %v", v.Outcome)
}

// InternalWriter decides an AppendInternal's writer (SPEC §6.4: only a
// live broker writes __mirror_state): reg is the writer's registration in
// the leader's metadata (nil: none), epoch the broker epoch it sent. A
// writer registered with another epoch (it restarted, or was fenced and
// re-registered) is refused, so a late append of its earlier incarnation
// lands nowhere.
func InternalWriter(reg *pb.BrokerRecord, id int32, epoch int64) (pb.ErrorCode, string) {
	if reg == nil || reg.GetBrokerEpoch() != epoch {
		return pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, fmt.Sprintf("broker %d epoch %d is not a registration in this broker's metadata", id, epoch)
	}
	return pb.ErrorCode_ERROR_CODE_NONE, ""
}
