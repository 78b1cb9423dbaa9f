package broker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/assign"
	"github.com/twinlog/twinlog/broker/ready"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
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
	}, assign.LogState(l, aligned))
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

// processReadyLocked carries out the machine's output (ready.Drain, the
// Ready contract) and wakes the waiters it may help. p.mu is held.
func (p *partition) processReadyLocked() {
	sum := ready.Drain(p.r, p.log, p.topicID, readyHost{p})
	p.fetched = storage.Validated{}
	if sum.Changed {
		if sum.ProgressOnly {
			p.signalProgress(p.r.LogEndOffset(), p.r.HighWatermark())
		} else {
			p.signal()
		}
		p.b.notifyChange()
	}
}

// readyHost is the partition as ready.Drain's host. p.mu is held.
type readyHost struct{ p *partition }

func (h readyHost) Err() error                        { return h.p.failed }
func (h readyHost) Fail(err error)                    { h.p.failLocked(err) }
func (h readyHost) NowMs() int64                      { return h.p.b.nowMs() }
func (h readyHost) Event(ev replica.Event)            { h.p.logEvent(ev) }
func (h readyHost) Deliver(res replica.ProduceResult) { h.p.deliverLocked(res) }
func (h readyHost) Cut(replica.LogOp)                 {}

func (h readyHost) Repaired(cleared []twinlog.BrokerID) { h.p.b.repaired(h.p.tp, cleared) }

func (h readyHost) AlterPartition(ap replica.AlterPartitionProposal) {
	h.p.b.sendAlterPartition(h.p, ap, len(h.p.r.ISR()))
}

func (h readyHost) Proposal(id replica.ProposalID) (storage.Validated, bool) {
	v, ok := h.p.proposals[id]
	delete(h.p.proposals, id)
	return v, ok
}

func (h readyHost) Fetched() storage.Validated {
	v := h.p.fetched
	h.p.fetched = storage.Validated{}
	return v
}

// Appended counts a leader's bytes in and, with FlushEveryBatch, starts
// its fsync while the followers replicate: the ack still waits for it
// (deliverLocked), but by the time the HW passes the batch it is usually
// done, instead of starting only then. A follower's fetch flushes once per
// response (fetcher.go), a mirror's once per append (mirror.go).
func (h readyHost) Appended(op replica.LogOp, info storage.AppendInfo, _ storage.Validated) {
	if !op.Leader {
		return
	}
	p := h.p
	p.b.obs.ObserveBytesIn(info.Bytes)
	if p.b.cfg.FlushPolicy == FlushEveryBatch {
		p.sync.start(info.LastOffset + 1)
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
			// knows the reason (mirror/runner.Runner's truncate, counted by mirrorObserver).
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
