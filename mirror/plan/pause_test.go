package plan_test

import (
	"testing"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

// A Pause or Resume reaches the partition's leader when the controller has
// accepted it against the desired state (SPEC §6.5), whatever the run's
// state then; the shell steps it once. These tests land it in each state of
// a run and check that the machine acts on it once it can: PAUSED does not
// fetch, a Resume goes on to fetch from the LEO, and Stop still wins.

// startHeld makes b a new leader mirroring its peer without performing
// any action yet.
func (c *cluster) startHeld(cfg plan.Config) {
	c.t.Helper()
	c.desired = plan.Desired{State: plan.Mirroring, Generation: 1, SourceClusterID: c.peer.id}
	c.ensureMachine(cfg)
	for _, ev := range []plan.Event{plan.ReplicaStatusChanged{Status: c.status},
		plan.BecameLeader{LeaderEpoch: c.le, Run: c.runRecord(), Lmle: c.lmleRecord(), Desired: c.desired}} {
		if err := c.m.Step(ev); err != nil {
			c.t.Fatalf("%s: step %T: %v", c.id, ev, err)
		}
	}
}

// driveUntil performs c's actions as drive does, but stops as soon as
// done holds: it returns the answers not stepped yet (an operator request
// lands between two of them).
func (c *cluster) driveUntil(done func() bool) []plan.Event {
	c.t.Helper()
	var q []plan.Event
	for !done() {
		if len(q) == 0 {
			if !c.m.HasReady() {
				c.t.Fatalf("%s: idle in %v", c.id, c.m.State())
			}
			rd := c.m.Ready()
			c.m.Advance()
			for _, a := range rd.Actions {
				c.actions = append(c.actions, a)
				if ev := c.perform(a); ev != nil {
					q = append(q, ev)
				}
			}
			continue
		}
		ev := q[0]
		q = q[1:]
		if err := c.m.Step(ev); err != nil {
			c.t.Fatalf("%s: step %T: %v", c.id, ev, err)
		}
	}
	return q
}

// request steps an operator request accepted by the controller, with the
// desired state it sets, without performing the actions it produces.
func (c *cluster) request(ev plan.Event) {
	c.t.Helper()
	switch ev.(type) {
	case plan.Pause:
		c.desired.State = plan.Paused
	case plan.Resume:
		c.desired.State = plan.Mirroring
	case plan.Stop:
		c.desired.State = plan.Stopped
	}
	if err := c.m.Step(ev); err != nil {
		c.t.Fatalf("%s: %T in %v: %v", c.id, ev, c.m.State(), err)
	}
}

func startedFetcher(acts []plan.Action) bool {
	for _, a := range acts {
		if _, ok := a.(plan.StartFetcher); ok {
			return true
		}
	}
	return false
}

// TestPauseResumeDuringRun: a Pause landing in PREPARING, TRUNCATING,
// PENDING or FAILED ends PAUSED without fetching once the run completes; a
// Resume after it (or before the run completes) ends MIRRORING and fetches
// from the LEO; a Stop after it ends STOPPED and writable.
func TestPauseResumeDuringRun(t *testing.T) {
	pending := plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 2}, ISR: []twinlog.BrokerID{1, 2}, MinInsyncReplicas: 2}
	holds := []struct {
		name  string
		state twinlogv1.MirrorState
		// reach brings b into state and returns the answers not stepped yet.
		reach func(b *cluster) []plan.Event
	}{
		{"PREPARING, query outstanding", plan.Preparing, func(b *cluster) []plan.Event {
			b.startHeld(plan.Config{})
			return b.driveUntil(func() bool { return b.m.State() == plan.Preparing })
		}},
		{"PREPARING, source unreachable", plan.Preparing, func(b *cluster) []plan.Event {
			b.peer.up = false
			b.mirrorFrom(1, plan.Config{})
			b.peer.up = true // the re-query after the backoff is answered
			return nil
		}},
		{"TRUNCATING, truncation outstanding", plan.Truncating, func(b *cluster) []plan.Event {
			b.startHeld(plan.Config{})
			// The run's bump is done (LE 0 → 1), its truncation not yet.
			return b.driveUntil(func() bool { return b.m.State() == plan.Truncating && b.m.LeaderEpoch() == 1 })
		}},
		{"PENDING, follower not aligned", plan.Pending, func(b *cluster) []plan.Event {
			b.status = pending
			b.mirrorFrom(1, plan.Config{})
			return nil
		}},
		// A new leader loaded a run still STOPPING with the desired state
		// of a later generation, or the operator started the mirror again
		// while it stopped: the pause or resume is that next run's (seed
		// 2001489: a Resume refused in STOPPING left the run PAUSED for
		// good under desired MIRRORING).
		{"STOPPING, started again", plan.Stopping, func(b *cluster) []plan.Event {
			b.mirrorFrom(1, plan.Config{})
			b.desired.State = plan.Stopped
			if err := b.m.Step(plan.Stop{}); err != nil {
				b.t.Fatalf("%v", err)
			}
			b.desired = plan.Desired{State: plan.Mirroring, Generation: 2, SourceClusterID: b.peer.id}
			if err := b.m.Step(plan.Start{Generation: 2, SourceClusterID: b.peer.id}); err != nil {
				b.t.Fatalf("%v", err)
			}
			return nil
		}},
		{"FAILED, retry due", plan.Failed, func(b *cluster) []plan.Event {
			b.mirrorFrom(1, plan.Config{})
			b.fetchUntilIdle()
			b.step(plan.FetchError{Session: b.session, Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION})
			return nil
		}},
	}
	// complete lets the run finish: answers, the backoff's re-query or retry,
	// and follower 2's alignment for PENDING.
	complete := func(b *cluster, q []plan.Event) {
		b.t.Helper()
		for _, ev := range q {
			b.step(ev)
		}
		b.drive()
		b.tick(b.nowMs + 1000)
		if b.m.State() == plan.Pending {
			b.status.FollowerAlignedEpoch = map[twinlog.BrokerID]twinlog.Epoch{2: twinlog.Epoch(b.runRecord().GetTruncationEpoch())}
			b.step(plan.ReplicaStatusChanged{Status: b.status})
		}
	}
	cases := []struct {
		name string
		// during the hold, and once the run is complete
		during, after []plan.Event
		want          twinlogv1.MirrorState
	}{
		{"pause", []plan.Event{plan.Pause{}}, nil, plan.Paused},
		{"pause, resume after the run", []plan.Event{plan.Pause{}}, []plan.Event{plan.Resume{}}, plan.Mirroring},
		{"pause then resume", []plan.Event{plan.Pause{}, plan.Resume{}}, nil, plan.Mirroring},
		{"pause then stop", []plan.Event{plan.Pause{}, plan.Stop{}}, nil, plan.Stopped},
		{"pause, stop after the run", []plan.Event{plan.Pause{}}, []plan.Event{plan.Stop{}}, plan.Stopped},
	}
	for _, h := range holds {
		for _, tc := range cases {
			t.Run(h.name+"/"+tc.name, func(t *testing.T) {
				a, b := newCluster(t, 'a'), newCluster(t, 'b')
				link(a, b)
				a.le = 1
				a.mustProduce(2)
				q := h.reach(b)
				b.checkState(h.state)
				from := len(b.actions)
				for _, ev := range tc.during {
					b.request(ev)
				}
				b.drive()
				complete(b, q)
				if b.desired.State == plan.Paused && startedFetcher(b.actions[from:]) {
					t.Fatalf("fetcher started while desired %v", b.desired.State)
				}
				for _, ev := range tc.after {
					b.request(ev)
					b.drive()
				}
				b.checkState(tc.want)
				if r := b.runRecord(); r.GetState() != tc.want {
					t.Fatalf("run record state %v, want %v", r.GetState(), tc.want)
				}
				switch tc.want {
				case plan.Paused:
					if b.fetching || b.writable {
						t.Fatalf("PAUSED: fetching %v, writable %v", b.fetching, b.writable)
					}
					if b.runRecord().GetTruncationEpoch() < 0 {
						t.Fatal("PAUSED before the run's truncation")
					}
				case plan.Mirroring:
					before := len(b.truncations)
					b.fetchUntilIdle()
					b.checkLog(a.log.String())
					if len(b.truncations) != before {
						t.Fatal("resume truncated")
					}
				case plan.Stopped:
					if !b.writable || b.fetching {
						t.Fatalf("STOPPED: writable %v, fetching %v", b.writable, b.fetching)
					}
				}
			})
		}
	}
}

// TestResumeDuringDeferredPause: a Pause while MIRRORING waits for the bump
// or truncation in flight (SPEC §6.2d, §6.2f); a Resume meanwhile cancels
// it: the machine fetches again once the bump is done. Without the Resume
// it pauses then.
func TestResumeDuringDeferredPause(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []plan.Event
		want twinlogv1.MirrorState
	}{
		{"pause", []plan.Event{plan.Pause{}}, plan.Paused},
		{"pause then resume", []plan.Event{plan.Pause{}, plan.Resume{}}, plan.Mirroring},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mirroredPair(t, 1, 2)
			a.le = 7
			a.mustProduce(1)
			// The fetch needs a bump to 7 (SPEC §6.2d): step it, hold the bump.
			ev := b.serve(a, plan.MirrorFetchRequest(a.le, b.log.cache.Latest(), b.log.LogEndOffset()))
			if _, ok := ev.(plan.FetchNeedsBump); !ok {
				t.Fatalf("outcome %T, want FetchNeedsBump", ev)
			}
			if err := b.m.Step(ev); err != nil {
				t.Fatal(err)
			}
			for _, op := range tc.ops {
				b.request(op)
				b.checkState(plan.Mirroring) // the pause is deferred
			}
			b.drive()
			b.checkState(tc.want)
			switch tc.want {
			case plan.Mirroring:
				if !b.fetching {
					t.Fatal("not fetching after the resume")
				}
				b.fetchUntilIdle()
				b.checkLog(a.log.String())
			case plan.Paused:
				if b.fetching {
					t.Fatal("fetching while PAUSED")
				}
			}
		})
	}
}

// TestNewLeaderStartsPausedGeneration: the operator started a new run
// (generation 2) and paused it before any leader began it; a new leader
// finds the STOPPED record of generation 1 and desired PAUSED of
// generation 2 in metadata. The paused run is a run: the leader does not
// resume STOPPED (writable) but starts it, and ends PAUSED without fetching.
func TestNewLeaderStartsPausedGeneration(t *testing.T) {
	a, b := mirroredPair(t, 1, 2)
	b.stop()
	b.checkState(plan.Stopped)

	b.desired = plan.Desired{State: plan.Paused, Generation: 2, SourceClusterID: "A"}
	from := len(b.actions)
	b.leaderChange()
	b.checkState(plan.Paused)
	if b.writable || b.fetching || startedFetcher(b.actions[from:]) {
		t.Fatalf("writable %v, fetching %v (started %v)", b.writable, b.fetching, startedFetcher(b.actions[from:]))
	}
	if r := b.runRecord(); r.GetGeneration() != 2 || r.GetTruncationEpoch() < 0 {
		t.Fatalf("run record %v", r)
	}
	b.request(plan.Resume{})
	b.drive()
	b.checkState(plan.Mirroring)
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
}
