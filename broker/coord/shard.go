package coord

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twinlog/twinlog/group"
)

// errUnloaded: the shard unloaded without its coordinator answering the
// request; the host answers NOT_COORDINATOR.
var errUnloaded = errors.New("coord: coordinator unloaded")

// shard is the coordinator of one partition this broker leads, in one
// leader epoch. mu serialises the calls into c and the handling of the
// Ready after each.
type shard struct {
	h     *Host
	p     int32
	epoch int32

	mu      sync.Mutex
	c       *group.Coordinator
	dead    bool // unloaded: the host replaces it
	nextRef group.Ref
	// waiters are the requests waiting for their answer, by Ref: each
	// is called once, with mu held.
	waiters map[group.Ref]func(group.ResponseBody)
	// tickAt is the armed timer's deadline (group.NoTick: none).
	tickAt    int64
	stopTimer func()
	// loadFrom is the next offset a loading shard reads; loadTimer its
	// retry while the high watermark trails the log end.
	loadFrom  int64
	loadTimer func()
	// pending are the appends not yet reported to the coordinator, oldest
	// first: outcomes arrive in any order and are reported in this one.
	pending []*pendingAppend
}

// pendingAppend is one append and, once settled, its outcome.
type pendingAppend struct {
	id      group.AppendID
	settled bool
	code    group.ErrorCode
	// refused: refused before it was written (AppendFailed); otherwise a
	// code other than None is an unknown outcome.
	refused bool
}

func (s *shard) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// start runs fn (one coordinator call with a fresh Ref); reply gets the
// answer to that Ref once, with the shard's lock held (it must not call
// into the shard), possibly before start returns: the coordinator's
// body, a *group.Superseded (no answer is sent), or nil when the shard
// unloaded without answering. cancel forgets the request: reply is not
// called after it returns.
func (s *shard) start(fn func(nowMs int64, ref group.Ref), reply func(group.ResponseBody)) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		reply(nil)
		return func() {}
	}
	s.nextRef++
	ref := s.nextRef
	s.waiters[ref] = reply
	fn(s.h.env.NowMs(), ref)
	s.drainLocked()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.waiters, ref)
	}
}

// call is start's blocking form: it waits for the answer or ctx. A nil
// body with a nil error: the request was superseded (no answer is sent).
func (s *shard) call(ctx context.Context, fn func(nowMs int64, ref group.Ref)) (group.ResponseBody, error) {
	body, err := wait(ctx, func(done func(group.ResponseBody, error)) func() {
		return s.start(fn, func(body group.ResponseBody) { done(body, nil) })
	})
	if err != nil {
		return nil, err
	}
	return bodyOf(body)
}

// bodyOf reads a waiter's answer: errUnloaded for none, nil for a
// superseded request.
func bodyOf(body group.ResponseBody) (group.ResponseBody, error) {
	if body == nil {
		return nil, errUnloaded
	}
	if _, ok := body.(*group.Superseded); ok {
		return nil, nil
	}
	return body, nil
}

// read runs fn, a coordinator read answered directly.
func (s *shard) read(fn func(c *group.Coordinator)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.c)
}

// drainLocked carries out the coordinator's Ready (appends in order,
// answers, the timer), then reports the outcomes that have arrived, in
// append order, each followed by the Ready it leaves.
func (s *shard) drainLocked() {
	for {
		rd := s.c.Ready()
		for _, a := range rd.Appends {
			s.appendLocked(a)
		}
		for _, r := range rd.Responses {
			if reply, ok := s.waiters[r.Ref]; ok {
				delete(s.waiters, r.Ref)
				reply(r.Body)
			}
		}
		s.armLocked(rd.TickAtMs)
		if !s.reportLocked() {
			return
		}
	}
}

// appendLocked appends a to the partition now; its outcome comes through
// settle (or at once, for a refusal).
func (s *shard) appendLocked(a group.Append) {
	pa := &pendingAppend{id: a.ID}
	s.pending = append(s.pending, pa)
	if code := s.h.env.Append(s.p, s.epoch, a.Records, func(code group.ErrorCode) { s.settle(pa, code) }); code != group.None {
		pa.settled, pa.code, pa.refused = true, code, true
	}
}

// settle records an append's outcome and reports what is now reportable.
func (s *shard) settle(pa *pendingAppend, code group.ErrorCode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead || pa.settled {
		return
	}
	pa.settled, pa.code = true, code
	s.drainLocked()
}

// reportLocked hands the oldest append's outcome to the coordinator if it
// has arrived (false if not): durable, refused before it was written, or
// unknown (the shard unloads: the next one loads what the log holds).
func (s *shard) reportLocked() bool {
	if s.dead || len(s.pending) == 0 || !s.pending[0].settled {
		return false
	}
	pa := s.pending[0]
	s.pending[0] = nil
	s.pending = s.pending[1:]
	now := s.h.env.NowMs()
	switch {
	case pa.code == group.None:
		s.c.Appended(now, pa.id)
	case pa.refused:
		s.c.AppendFailed(now, pa.id, pa.code)
	default:
		s.h.log.Warn("group coordinator append outcome unknown; unloading", "partition", s.p, "leader_epoch", s.epoch, "code", pa.code)
		s.unloadLocked()
		return false
	}
	return true
}

// armLocked sets the timer for the coordinator's next deadline.
func (s *shard) armLocked(at int64) {
	if at == s.tickAt || s.dead {
		return
	}
	if s.stopTimer != nil {
		s.stopTimer()
		s.stopTimer = nil
	}
	s.tickAt = at
	if at == group.NoTick {
		return
	}
	d := time.Duration(max(at-s.h.env.NowMs(), 0)) * time.Millisecond
	s.stopTimer = s.h.env.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.dead || s.tickAt != at {
			return
		}
		s.tickAt = group.NoTick
		s.stopTimer = nil
		s.c.Tick(s.h.env.NowMs())
		s.drainLocked()
	})
}

// unload ends the shard: its coordinator answers what it parked with
// NOT_COORDINATOR and outcomes still to come are ignored.
func (s *shard) unload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unloadLocked()
}

func (s *shard) unloadLocked() {
	if s.dead {
		return
	}
	s.dead = true
	s.pending = nil // their outcomes are not reported after Unload
	s.c.Unload()
	s.drainLocked()
	if s.stopTimer != nil {
		s.stopTimer()
		s.stopTimer = nil
	}
	if s.loadTimer != nil {
		s.loadTimer()
		s.loadTimer = nil
	}
	// Requests still waiting were never answered by the coordinator (it
	// answers what it parked or held at Unload): a nil body, which
	// bodyOf turns into errUnloaded; in Ref order (a simulated host's
	// answers are messages, sent in a reproducible order).
	for _, ref := range slices.Sorted(maps.Keys(s.waiters)) {
		reply := s.waiters[ref]
		delete(s.waiters, ref)
		reply(nil)
	}
}

// load reads the partition from its start once its high watermark covers
// its log end, one Read per step (each step on a goroutine of the run),
// replays it, and starts the coordinator. A read that is not ready yet is
// retried after ReconcileInterval (a timer, not a sleep); one that fails
// otherwise (leadership moved) unloads the shard and the host reconciles.
func (s *shard) load(context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	recs, next, end, err := s.h.env.Read(s.p, s.epoch, s.loadFrom)
	switch {
	case errors.Is(err, ErrNotReady):
		s.loadTimer = s.h.env.AfterFunc(s.h.cfg.ReconcileInterval, func() { s.h.env.Go(s.load) })
		return
	case err != nil:
		s.h.log.Info("group coordinator load stopped", "partition", s.p, "leader_epoch", s.epoch, "err", err)
		s.unloadLocked()
		return
	}
	if err := s.c.Replay(s.h.env.NowMs(), recs); err != nil {
		// A record this coordinator cannot read: the partition stays
		// loading (COORDINATOR_LOAD_IN_PROGRESS) until an operator acts, as
		// Kafka's coordinator stays unloaded.
		s.h.log.Error("group coordinator cannot load its partition", "partition", s.p, "leader_epoch", s.epoch, "offset", s.loadFrom, "err", err)
		return
	}
	if !end {
		s.loadFrom = next
		s.h.env.Go(s.load)
		return
	}
	s.c.Loaded(s.h.env.NowMs())
	s.drainLocked()
	s.h.log.Info("group coordinator loaded", "partition", s.p, "leader_epoch", s.epoch, "groups", len(s.c.GroupIDs()))
}
