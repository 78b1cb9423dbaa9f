package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/epoch"
)

// partition is one hosted replica: the pure replica machine, its log and the
// shell state around them. mu serialises every call into r and the Ready
// handling that follows it (persist, then send, then Advance).
type partition struct {
	b       *Broker
	tp      twinlog.TopicPartition
	topicID string
	dir     *storage.LogDir
	log     *storage.Log
	logger  *slog.Logger

	mu        sync.Mutex
	r         *replica.Replica
	nextID    replica.ProposalID
	proposals map[replica.ProposalID]storage.Validated // batches awaiting their OpAppend
	results   map[replica.ProposalID]*produceWaiter    // acks=1/all waiting for a result
	fetched   storage.Validated                        // follower batches for the OpAppend of the current response
	state     *pb.PartitionRecord                      // last applied controller record
	closed    bool
	failed    error // sticky: a LogOp failed; the log dir is offline

	// mirrorWritable: the mirror runner made this mirror partition writable
	// (STOPPED, SPEC §1.2) in LE mirrorWritableLE; reset whenever this
	// broker takes leadership, also by a later LE its runner did not cause.
	mirrorWritable   bool
	mirrorWritableLE twinlog.Epoch

	wmu     sync.Mutex
	waiters map[*fetchWaiter]struct{} // long-poll fetches

	sync syncer // group commit (FlushEveryBatch)
}

type produceWaiter struct {
	last twinlog.Offset
	ch   chan replica.ProduceResult
}

func newPartition(b *Broker, tp twinlog.TopicPartition, topicID string, dir *storage.LogDir, l *storage.Log, aligned twinlog.Epoch) (*partition, error) {
	r, err := replica.New(replica.Config{
		ID:                  b.cfg.ID,
		Partition:           tp,
		ReplicaLagTimeMaxMs: b.cfg.ReplicaLagTimeMax.Milliseconds(),
		FetchSeqStart:       fetchSeqStart(),
	}, replica.LogState{
		LogStartOffset: l.LogStartOffset(),
		LogEndOffset:   l.LogEndOffset(),
		HighWatermark:  l.HighWatermark(),
		Epochs:         l.Epochs().Entries(),
		AlignedEpoch:   aligned,
	})
	if err != nil {
		return nil, err
	}
	p := &partition{
		b: b, tp: tp, topicID: topicID, dir: dir, log: l, r: r,
		logger:    b.log.With("topic", tp.Topic, "partition", tp.Partition),
		proposals: map[replica.ProposalID]storage.Validated{},
		results:   map[replica.ProposalID]*produceWaiter{},
		waiters:   map[*fetchWaiter]struct{}{},
	}
	p.sync.log = l
	return p, nil
}

// usableLocked reports why the partition cannot serve. p.mu is held.
func (p *partition) usableLocked() error {
	if p.closed {
		return ErrPartitionClosed
	}
	return p.failed
}

// processReadyLocked handles the machine's output per the Ready contract:
// (1) log ops, epoch checkpoint, aligned epoch; (2) HW, produce results,
// AlterPartition; (3) Advance, and after a truncation the log's real end
// (ConfirmTruncation). p.mu is held.
func (p *partition) processReadyLocked() {
	changed := false
	progressOnly := true // only appends and HW moves: wake only waiters they help
	for p.r.HasReady() {
		rd := p.r.Ready()
		if !onlyHWEvents(rd.Events) || rd.EpochsChanged || rd.AlignedEpoch != nil || p.failed != nil {
			progressOnly = false
		}
		for _, op := range rd.LogOps {
			if op.Kind != replica.OpAppend {
				progressOnly = false
			}
		}
		truncated := false
		if p.failed == nil {
			truncated = p.applyLogOpsLocked(rd)
		}
		if p.failed == nil && rd.EpochsChanged {
			p.syncEpochsLocked(rd.EpochEntries)
		}
		if p.failed == nil && rd.AlignedEpoch != nil {
			if err := p.log.WritePartitionMetadata(storage.PartitionMetadata{TopicID: p.topicID, AlignedEpoch: *rd.AlignedEpoch}); err != nil {
				p.failLocked(err)
			}
		}
		if len(rd.LogOps) > 0 {
			changed = true
		}
		if len(rd.TaintsCleared) > 0 {
			p.b.repaired(p.tp, rd.TaintsCleared)
		}
		if rd.HighWatermark != nil && p.failed == nil {
			p.log.SetHighWatermark(*rd.HighWatermark)
			changed = true
		}
		for _, res := range rd.ProduceResults {
			p.deliverLocked(res)
		}
		if rd.AlterPartition != nil && p.failed == nil {
			p.b.sendAlterPartition(p, *rd.AlterPartition, len(p.r.ISR()))
		}
		for _, ev := range rd.Events {
			p.logEvent(ev)
		}
		p.r.Advance()
		if truncated && p.failed == nil {
			// Storage truncates in whole batches: a batch straddling the
			// offset went too, and the replica takes the log's end (the
			// follower refetches from there, SPEC §4.4).
			if err := p.r.ConfirmTruncation(p.log.LogEndOffset(), p.b.nowMs()); err != nil {
				p.failLocked(err)
			}
		}
	}
	p.fetched = storage.Validated{}
	if changed {
		if progressOnly && p.failed == nil {
			p.signalProgress(p.r.LogEndOffset(), p.r.HighWatermark())
		} else {
			p.signal()
		}
		p.b.notifyChange()
	}
}

// onlyHWEvents reports whether evs are at most HW moves. Every HW move comes
// with an EventHighWatermark: counting it as more than progress made each
// acks=all completion wake every follower long-poll of the partition (their
// bound is the LEO, which did not move), and each woken fetch re-evaluated
// all its partitions for nothing, competing with the produce answer. An HW that
// drops (truncation, a new leader's lower HW) comes with a log op, role
// change or epoch change, which still wakes everyone.
func onlyHWEvents(evs []replica.Event) bool {
	for _, ev := range evs {
		if ev.Type != replica.EventHighWatermark {
			return false
		}
	}
	return true
}

// applyLogOpsLocked applies rd's log ops and reports whether one was a
// truncation. p.mu is held.
func (p *partition) applyLogOpsLocked(rd replica.Ready) (truncated bool) {
	for _, op := range rd.LogOps {
		var err error
		switch op.Kind {
		case replica.OpAppend:
			if op.Leader {
				buf, ok := p.proposals[op.ProposalID]
				delete(p.proposals, op.ProposalID)
				if !ok {
					err = errors.New("broker: leader append without its batch")
					break
				}
				// One call for all of the request's batches: one write.
				var info storage.AppendInfo
				info, err = p.log.AppendValidatedAsLeader(buf, op.Batches[0].Epoch)
				if err == nil && (info.FirstOffset != op.Batches[0].BaseOffset || info.LastOffset != op.Batches[len(op.Batches)-1].LastOffset) {
					err = errors.New("broker: leader append offsets disagree with the replica")
				}
				if err == nil {
					p.b.obs.ObserveBytesIn(info.Bytes)
					if p.b.cfg.FlushPolicy == FlushEveryBatch {
						// Fsync while the followers replicate: the ack
						// still waits for it (deliverLocked), but by the
						// time the HW passes the batch it is usually done,
						// instead of starting only then.
						p.sync.start(info.LastOffset + 1)
					}
				}
			} else {
				if len(p.fetched.Batches()) == 0 {
					err = errors.New("broker: follower append without fetched bytes")
					break
				}
				_, err = p.log.AppendValidatedAsFollower(p.fetched)
				p.fetched = storage.Validated{}
			}
		case replica.OpTruncate:
			truncated = true
			err = p.log.TruncateTo(op.Offset)
		case replica.OpRestart:
			err = p.log.TruncateFullyAndStartAt(op.Offset)
		case replica.OpAdvanceLogStart:
			// storage has no log-start advance outside retention yet; the
			// replica's view moves, the files keep the older prefix.
			p.logger.Debug("log start advance not applied to storage", "offset", op.Offset)
		}
		if err != nil {
			p.failLocked(err)
			return truncated
		}
	}
	return truncated
}

// syncEpochsLocked makes the log's epoch cache match the machine's
// (storage.Log.SyncEpochs).
func (p *partition) syncEpochsLocked(want []epoch.Entry) {
	ok, err := p.log.SyncEpochs(want)
	if err != nil {
		p.failLocked(err)
		return
	}
	if !ok {
		p.logger.Debug("epoch cache differs from the replica's view", "log", p.log.Epochs().Entries(), "replica", want)
	}
}

func (p *partition) failLocked(err error) {
	if p.failed != nil {
		return
	}
	p.failed = err
	p.logger.Error("partition log failed; replica offline until restart", "err", err)
	for id, w := range p.results {
		w.ch <- replica.ProduceResult{ID: id, Error: pb.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR}
		delete(p.results, id)
	}
	p.signal()
}

// deliverLocked completes a produce waiter, after the leader's own fsync
// when the flush policy asks for it.
func (p *partition) deliverLocked(res replica.ProduceResult) {
	w, ok := p.results[res.ID]
	if !ok {
		return
	}
	delete(p.results, res.ID)
	if res.Error == pb.ErrorCode_ERROR_CODE_NONE && p.b.cfg.FlushPolicy == FlushEveryBatch {
		p.sync.after(w.last, func(err error) {
			if err != nil {
				res.Error = pb.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR
			}
			w.ch <- res
		})
		return
	}
	w.ch <- res
}

func (p *partition) logEvent(ev replica.Event) {
	switch ev.Type {
	case replica.EventTruncation:
		p.logger.Warn("truncation", "cause", ev.Cause.Label(), "detail", ev.Detail)
		if ev.Cause != replica.CauseAsLeader {
			// A mirror leader's cut is counted by its runner, which
			// knows the reason (mirrorRunner.truncate).
			p.b.obs.ObserveTruncation(ev.Cause.Label())
		}
	case replica.EventFenced, replica.EventAlterRejected:
		p.logger.Warn(ev.String())
	case replica.EventRoleChange, replica.EventISRChange, replica.EventTaintCleared, replica.EventTaintsPending:
		p.logger.Info(ev.String())
	default:
		// Mostly HW moves, several per acks=all request: build the
		// message only when it is logged.
		if p.logger.Enabled(context.Background(), slog.LevelDebug) {
			p.logger.Debug(ev.String())
		}
	}
}

// fetchWaiter is one long-poll fetch's interest in one partition. A fetch
// can only gain bytes when its read bound grows: the LEO for a follower, the
// HW for consumers and mirrors (replica.FetchDecision.ReadUpTo).
type fetchWaiter struct {
	ch       chan struct{} // shared by the fetch's partitions, buffered 1
	follower bool
	seen     atomic.Int64 // read bound at the last evaluation; -1: none yet
}

func (w *fetchWaiter) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// signal wakes every long-poll fetch waiting on this partition (state
// changes other than progress: roles, epochs, truncation, failure, close).
func (p *partition) signal() {
	p.wmu.Lock()
	for w := range p.waiters {
		w.wake()
	}
	p.wmu.Unlock()
}

// signalProgress wakes the long-poll fetches whose read bound moved past
// what they last saw. Before, every HW move woke every fetch, and each
// re-evaluated all its partitions to find nothing new: a follower's bound
// is the LEO, so an HW move alone never gives it bytes.
func (p *partition) signalProgress(leo, hw twinlog.Offset) {
	p.wmu.Lock()
	for w := range p.waiters {
		bound := hw
		if w.follower {
			bound = leo
		}
		if int64(bound) > w.seen.Load() {
			w.wake()
		}
	}
	p.wmu.Unlock()
}

func (p *partition) addWaiter(w *fetchWaiter) {
	p.wmu.Lock()
	p.waiters[w] = struct{}{}
	p.wmu.Unlock()
}

func (p *partition) removeWaiter(w *fetchWaiter) {
	p.wmu.Lock()
	delete(p.waiters, w)
	p.wmu.Unlock()
}

// close stops the partition: pending produce requests fail, waiters wake.
func (p *partition) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for id, w := range p.results {
		w.ch <- replica.ProduceResult{ID: id, Error: pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER}
		delete(p.results, id)
	}
	p.signal()
}

func (p *partition) stats() PartitionStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PartitionStats{
		Topic: p.tp.Topic, Partition: p.tp.Partition,
		HighWatermark: int64(p.r.HighWatermark()), LogEndOffset: int64(p.r.LogEndOffset()),
	}
	if p.r.Role() == replica.RoleLeader && p.state != nil {
		isr := len(p.r.ISR())
		st.Leader = true
		st.ISRSize = isr
		st.UnderReplicated = isr < len(p.state.GetReplicas())
		st.UnderMinISR = isr < min(p.b.minISR(p.tp.Topic), len(p.state.GetReplicas()))
	}
	return st
}

// syncer group-commits fsyncs of one partition log: callers queue "after
// offset o is durable" callbacks; one goroutine fsyncs everything appended
// so far and runs every callback it covered, so concurrent produce requests
// share one fsync. A leader append starts the goroutine right away (start),
// so its fsync overlaps replication rather than following it.
type syncer struct {
	log     *storage.Log
	mu      sync.Mutex
	durable twinlog.Offset // everything below is fsynced
	target  twinlog.Offset // make everything below durable even without waiters
	waiting []syncWaiter
	running bool
}

// start makes everything below end durable soon, before anyone waits for it.
func (s *syncer) start(end twinlog.Offset) {
	s.mu.Lock()
	s.target = max(s.target, end)
	s.runLocked()
	s.mu.Unlock()
}

// runLocked starts the fsync goroutine if there is work and none runs.
// s.mu is held.
func (s *syncer) runLocked() {
	if !s.running && (len(s.waiting) > 0 || s.target > s.durable) {
		s.running = true
		go s.loop()
	}
}

type syncWaiter struct {
	last twinlog.Offset
	fn   func(error)
}

func (s *syncer) after(last twinlog.Offset, fn func(error)) {
	s.mu.Lock()
	if last < s.durable {
		s.mu.Unlock()
		fn(nil)
		return
	}
	s.waiting = append(s.waiting, syncWaiter{last, fn})
	s.runLocked()
	s.mu.Unlock()
}

func (s *syncer) loop() {
	for {
		s.mu.Lock()
		if len(s.waiting) == 0 && s.target <= s.durable {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		leo := s.log.LogEndOffset()
		err := s.log.Flush()
		s.mu.Lock()
		if err == nil {
			s.durable = max(s.durable, leo)
		} else {
			// Failed: the waiters get the error below; stop chasing target
			// (the partition goes offline) rather than spinning on Flush.
			s.target = s.durable
		}
		var fire []syncWaiter
		kept := s.waiting[:0]
		for _, w := range s.waiting {
			if err != nil || w.last < s.durable {
				fire = append(fire, w)
			} else {
				kept = append(kept, w)
			}
		}
		s.waiting = kept
		s.mu.Unlock()
		for _, w := range fire {
			w.fn(err)
		}
	}
}
