package coord

import (
	"context"
	"errors"
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
	// waiters are the requests waiting for their answer, by Ref.
	waiters map[group.Ref]chan group.ResponseBody
	// tickAt is the armed timer's deadline (group.NoTick: none).
	tickAt    int64
	stopTimer func()
	// reported is closed once the outcome of the newest append so far has
	// been reported: each append's reporter waits for its predecessor's.
	reported chan struct{}
}

func (s *shard) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// call runs fn (one coordinator call with a fresh Ref) and waits for the
// answer to that Ref. A nil body with a nil error: the request was
// superseded (no answer is sent).
func (s *shard) call(ctx context.Context, fn func(nowMs int64, ref group.Ref)) (group.ResponseBody, error) {
	ch := make(chan group.ResponseBody, 1)
	s.mu.Lock()
	s.nextRef++
	ref := s.nextRef
	s.waiters[ref] = ch
	fn(s.h.env.NowMs(), ref)
	s.drainLocked()
	s.mu.Unlock()
	select {
	case body := <-ch:
		if body == nil {
			return nil, errUnloaded
		}
		if _, ok := body.(*group.Superseded); ok {
			return nil, nil
		}
		return body, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.waiters, ref)
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

// read runs fn, a coordinator read answered directly.
func (s *shard) read(fn func(c *group.Coordinator)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.c)
}

// drainLocked carries out the coordinator's Ready: answers, appends in
// order, the timer.
func (s *shard) drainLocked() {
	rd := s.c.Ready()
	for _, a := range rd.Appends {
		s.appendLocked(a)
	}
	for _, r := range rd.Responses {
		if ch, ok := s.waiters[r.Ref]; ok {
			delete(s.waiters, r.Ref)
			ch <- r.Body
		}
	}
	s.armLocked(rd.TickAtMs)
}

// appendLocked appends a to the partition now and has its outcome
// reported after the outcome of every earlier append.
func (s *shard) appendLocked(a group.Append) {
	wait, code := s.h.env.Append(s.p, s.epoch, a.Records)
	prev, done := s.reported, make(chan struct{})
	s.reported = done
	s.h.env.Go(func(ctx context.Context) {
		defer close(done)
		outcome, refused := code, code != group.None
		if !refused {
			outcome = wait(ctx)
		}
		select {
		case <-prev:
		case <-ctx.Done():
			// The run ends before the earlier outcomes are in: this one
			// can no longer be reported in order. Unload, as for an
			// unknown outcome, so that no later reporter reports past
			// it (the coordinator panics on an outcome out of order):
			// closing done lets the next one through, and its select
			// may pick prev although ctx is done.
			s.unload()
			return
		}
		s.report(a.ID, outcome, refused)
	})
}

// report hands an append's outcome to the coordinator: durable, refused
// before it was written, or unknown (the shard unloads: the next one
// loads what the log holds).
func (s *shard) report(id group.AppendID, code group.ErrorCode, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	now := s.h.env.NowMs()
	switch {
	case code == group.None:
		s.c.Appended(now, id)
	case refused:
		s.c.AppendFailed(now, id, code)
	default:
		s.h.log.Warn("group coordinator append outcome unknown; unloading", "partition", s.p, "leader_epoch", s.epoch, "code", code)
		s.unloadLocked()
		return
	}
	s.drainLocked()
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
	s.c.Unload()
	s.drainLocked()
	s.dead = true
	if s.stopTimer != nil {
		s.stopTimer()
		s.stopTimer = nil
	}
	// Requests still waiting were never answered by the coordinator (it
	// answers what it parked or held at Unload): a nil body, which call
	// turns into errUnloaded.
	for ref, ch := range s.waiters {
		delete(s.waiters, ref)
		ch <- nil
	}
}

// load reads the partition from its start once its high watermark covers
// its log end, replays it, and starts the coordinator. A read that is not
// ready yet is retried every ReconcileInterval; one that fails otherwise
// (leadership moved) ends the load and the host reconciles.
func (s *shard) load(ctx context.Context) {
	var from int64
	for {
		if s.isDead() || ctx.Err() != nil {
			return
		}
		recs, next, end, err := s.h.env.Read(s.p, s.epoch, from)
		switch {
		case errors.Is(err, ErrNotReady):
			if !sleep(ctx, s.h.cfg.ReconcileInterval) {
				return
			}
			continue
		case err != nil:
			s.h.log.Info("group coordinator load stopped", "partition", s.p, "leader_epoch", s.epoch, "err", err)
			s.unload()
			return
		}
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			return
		}
		if err := s.c.Replay(s.h.env.NowMs(), recs); err != nil {
			// A record this coordinator cannot read: the partition stays
			// loading (COORDINATOR_LOAD_IN_PROGRESS) until an operator acts,
			// as Kafka's coordinator stays unloaded.
			s.mu.Unlock()
			s.h.log.Error("group coordinator cannot load its partition", "partition", s.p, "leader_epoch", s.epoch, "offset", from, "err", err)
			return
		}
		if end {
			s.c.Loaded(s.h.env.NowMs())
			s.drainLocked()
			groups := len(s.c.GroupIDs())
			s.mu.Unlock()
			s.h.log.Info("group coordinator loaded", "partition", s.p, "leader_epoch", s.epoch, "groups", groups)
			return
		}
		s.mu.Unlock()
		from = next
	}
}

// sleep waits d, false if ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
