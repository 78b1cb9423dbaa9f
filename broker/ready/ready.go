// Package ready carries out a replica's output (broker/replica's Ready
// contract) on its storage.Log and hands the rest to the partition's host.
// It is the one copy of that loop: the broker shell (broker/partition.go)
// and the simulator (internal/sim) both run Drain, each with its own Host.
//
// The contract, per Ready: (1) the log ops, the epoch cache and the aligned
// epoch reach storage; (2) the HW is published, produce results delivered,
// an AlterPartition sent, events reported; (3) Advance, and after a
// truncation the log's real end goes back to the machine
// (ConfirmTruncation), since storage truncates in whole batches.
package ready

import (
	"errors"
	"fmt"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// Host is a partition's host: its failure state, the bytes the machine's
// appends name, and where results, ISR changes and events go. Drain calls
// it under the host's partition lock (if it has one); no method may call
// Drain again.
type Host interface {
	// Err is the partition's sticky failure. Once it is set Drain writes
	// nothing more to the log and sends no AlterPartition; produce results
	// and events still flow, and the machine still Advances.
	Err() error
	// Fail records a storage failure; it becomes Err.
	Fail(err error)
	// Proposal returns, and forgets, the validated batches of the leader
	// proposal id.
	Proposal(id replica.ProposalID) (storage.Validated, bool)
	// Fetched returns, and forgets, the validated batches a follower fetch
	// or a mirror read handed to the machine with the current append.
	Fetched() storage.Validated
	// Appended reports batches now in the log (a leader's stamped with
	// their offsets and epoch).
	Appended(op replica.LogOp, info storage.AppendInfo, batches storage.Validated)
	// Cut reports a truncation or restart now applied to the log.
	Cut(op replica.LogOp)
	// Repaired forwards the taints the replica cleared (to __mirror_state).
	Repaired(cleared []twinlog.BrokerID)
	// Deliver completes a produce request.
	Deliver(res replica.ProduceResult)
	// AlterPartition sends an ISR change to the controller.
	AlterPartition(ap replica.AlterPartitionProposal)
	// Event reports one machine event (logs, metrics, traces).
	Event(ev replica.Event)
	// NowMs is the host's clock.
	NowMs() int64
}

// Summary says what a Drain changed, for waking waiters.
type Summary struct {
	// Changed: the log or the HW moved.
	Changed bool
	// ProgressOnly: every change was an append or an HW move (no
	// truncation, role or epoch change, failure): only waiters that
	// progress helps need waking.
	ProgressOnly bool
}

// Drain handles every Ready the replica has, in order, applying it to log
// (topicID names the partition in partition.metadata).
func Drain(r *replica.Replica, log *storage.Log, topicID string, h Host) Summary {
	sum := Summary{ProgressOnly: true}
	for r.HasReady() {
		rd := r.Ready()
		if !onlyHWEvents(rd.Events) || rd.EpochsChanged || rd.AlignedEpoch != nil || h.Err() != nil {
			sum.ProgressOnly = false
		}
		truncated := false
		if h.Err() == nil {
			truncated = applyLogOps(rd, log, h)
		}
		for _, op := range rd.LogOps {
			if op.Kind != replica.OpAppend {
				sum.ProgressOnly = false
			}
		}
		if len(rd.LogOps) > 0 {
			sum.Changed = true
		}
		if h.Err() == nil && rd.EpochsChanged {
			if _, err := log.SyncEpochs(rd.EpochEntries); err != nil {
				h.Fail(err)
			}
		}
		if h.Err() == nil && rd.AlignedEpoch != nil {
			if err := log.WritePartitionMetadata(storage.PartitionMetadata{TopicID: topicID, AlignedEpoch: *rd.AlignedEpoch}); err != nil {
				h.Fail(err)
			}
		}
		if len(rd.TaintsCleared) > 0 {
			h.Repaired(rd.TaintsCleared)
		}
		if rd.HighWatermark != nil && h.Err() == nil {
			log.SetHighWatermark(*rd.HighWatermark)
			sum.Changed = true
		}
		for _, res := range rd.ProduceResults {
			h.Deliver(res)
		}
		if rd.AlterPartition != nil && h.Err() == nil {
			h.AlterPartition(*rd.AlterPartition)
		}
		for _, ev := range rd.Events {
			h.Event(ev)
		}
		r.Advance()
		if truncated && h.Err() == nil {
			// Storage truncates in whole batches: a batch straddling the
			// offset went too, and the replica takes the log's end (the
			// follower refetches from there, SPEC §4.4).
			if err := r.ConfirmTruncation(log.LogEndOffset(), h.NowMs()); err != nil {
				h.Fail(err)
			}
		}
	}
	if h.Err() != nil {
		sum.ProgressOnly = false
	}
	return sum
}

// onlyHWEvents reports whether evs are at most HW moves. Every HW move comes
// with an EventHighWatermark: counting it as more than progress made each
// acks=all completion wake every follower long-poll of the partition (their
// bound is the LEO, which did not move), and each woken fetch re-evaluated
// all its partitions for nothing, competing with the produce answer. An HW
// that drops (truncation, a new leader's lower HW) comes with a log op, role
// change or epoch change, which still wakes everyone.
func onlyHWEvents(evs []replica.Event) bool {
	for _, ev := range evs {
		if ev.Type != replica.EventHighWatermark {
			return false
		}
	}
	return true
}

// applyLogOps applies rd's log ops and reports whether one was a
// truncation; the first failure goes to h.Fail and stops it.
func applyLogOps(rd replica.Ready, log *storage.Log, h Host) (truncated bool) {
	for _, op := range rd.LogOps {
		var err error
		switch op.Kind {
		case replica.OpAppend:
			err = appendOp(op, log, h)
		case replica.OpTruncate:
			truncated = true
			if err = log.TruncateTo(op.Offset); err == nil {
				h.Cut(op)
			}
		case replica.OpRestart:
			if err = log.TruncateFullyAndStartAt(op.Offset); err == nil {
				h.Cut(op)
			}
		case replica.OpAdvanceLogStart:
			// storage has no log-start advance outside retention yet; the
			// replica's view moves, the files keep the older prefix.
		}
		if err != nil {
			h.Fail(fmt.Errorf("%v: %w", op, err))
			return truncated
		}
	}
	return truncated
}

// appendOp appends the batches op names: a leader proposal's, stamped with
// their offsets and epoch in one write, or the fetched ones, which must be
// exactly the batches the machine accepted.
func appendOp(op replica.LogOp, log *storage.Log, h Host) error {
	if op.Leader {
		v, ok := h.Proposal(op.ProposalID)
		if !ok {
			return errors.New("leader append without its batch")
		}
		info, err := log.AppendValidatedAsLeader(v, op.Batches[0].Epoch)
		if err != nil {
			return err
		}
		if info.FirstOffset != op.Batches[0].BaseOffset || info.LastOffset != op.Batches[len(op.Batches)-1].LastOffset {
			return fmt.Errorf("leader append at [%d, %d], the replica says %v", info.FirstOffset, info.LastOffset, op.Batches)
		}
		h.Appended(op, info, v)
		return nil
	}
	v := h.Fetched()
	bs := v.Batches()
	if len(bs) != len(op.Batches) {
		return fmt.Errorf("append of %d batches with %d fetched", len(op.Batches), len(bs))
	}
	for i, b := range bs {
		if m := op.Batches[i]; b.BaseOffset() != m.BaseOffset || b.LastOffset() != m.LastOffset {
			return fmt.Errorf("fetched batch [%d, %d] where the replica appends %v", b.BaseOffset(), b.LastOffset(), m)
		}
	}
	info, err := log.AppendValidatedAsFollower(v)
	if err != nil {
		return err
	}
	h.Appended(op, info, v)
	return nil
}
