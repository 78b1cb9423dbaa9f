package runner_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/runner"
	"github.com/twinlog/twinlog/storage"
)

// fakeEnv records the runner's calls; the test answers them.
type fakeEnv struct {
	now    int64
	view   runner.TopicView
	rec    *pb.PartitionRecord
	wakes  int
	loads  []func(*pb.MirrorRunRecord, *pb.MirrorLmleRecord, error)
	writes []pendingWrite
	lmles  []func(twinlog.Epoch, pb.ErrorCode)
	bumps  []pendingBump
	other  []string
}

type pendingWrite struct {
	w    runner.StateWrite
	done func(error)
}

type pendingBump struct {
	a    plan.BumpLeaderEpoch
	done func(twinlog.Epoch, pb.ErrorCode)
}

func (e *fakeEnv) NowMs() int64 { return e.now }
func (e *fakeEnv) Observe() runner.Observation {
	return runner.Observation{View: e.view, Record: e.rec}
}
func (e *fakeEnv) MachineConfig() plan.Config                       { return plan.Config{} }
func (e *fakeEnv) Rand() plan.Rand                                  { return zeroRand{} }
func (e *fakeEnv) Wake()                                            { e.wakes++ }
func (e *fakeEnv) After(time.Duration, func())                      { e.other = append(e.other, "after") }
func (e *fakeEnv) QueryLMLE(done func(twinlog.Epoch, pb.ErrorCode)) { e.lmles = append(e.lmles, done) }
func (e *fakeEnv) LoadState(_ string, done func(*pb.MirrorRunRecord, *pb.MirrorLmleRecord, error)) {
	e.loads = append(e.loads, done)
}
func (e *fakeEnv) WriteState(w runner.StateWrite, done func(error)) {
	e.writes = append(e.writes, pendingWrite{w, done})
}
func (e *fakeEnv) Bump(a plan.BumpLeaderEpoch, done func(twinlog.Epoch, pb.ErrorCode)) {
	e.bumps = append(e.bumps, pendingBump{a, done})
}
func (e *fakeEnv) SourceLeader(bool, func(runner.SourceLeader, pb.ErrorCode, error)) {
	e.other = append(e.other, "leader")
}
func (e *fakeEnv) Fetch(runner.SendFetch, func(*runner.Answer, error)) {
	e.other = append(e.other, "fetch")
}

// fakePart is a partition of a bare replica.
type fakePart struct {
	sync.Mutex
	r        *replica.Replica
	writable []bool
}

func (p *fakePart) Replica() *replica.Replica { return p.r }
func (p *fakePart) Usable() bool              { return true }
func (p *fakePart) ProcessReady()             {}
func (p *fakePart) NoteWritable(w bool, _ twinlog.Epoch) {
	p.writable = append(p.writable, w)
}
func (p *fakePart) AppendMirrored(*runner.Answer, []replica.BatchMeta, storage.Validated) error {
	return errors.New("not in this test")
}

type recObserver struct {
	runner.NoObserver
	began  []twinlog.Epoch
	ended  int
	status []*pb.MirrorPartitionStatus
}

func (o *recObserver) BecameLeader(ev plan.BecameLeader, _ *plan.Machine) {
	o.began = append(o.began, ev.LeaderEpoch)
}
func (o *recObserver) LeadershipEnded()                    { o.ended++ }
func (o *recObserver) Status(st *pb.MirrorPartitionStatus) { o.status = append(o.status, st) }

func lead(t *testing.T, r *replica.Replica, le twinlog.Epoch) {
	t.Helper()
	ids := []twinlog.BrokerID{1, 2, 3}
	r.ApplyPartitionState(replica.PartitionState{Leader: 1, LeaderEpoch: le, PartitionEpoch: twinlog.PartitionEpoch(le), Replicas: ids, ISR: ids,
		MinISR: 1, Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1, 3: 1}}, 0)
}

func newRunner(t *testing.T) (*runner.Runner, *fakeEnv, *fakePart, *recObserver) {
	t.Helper()
	r, err := replica.New(replica.Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}}, replica.LogState{AlignedEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	lead(t, r, 2)
	env := &fakeEnv{now: 1000, rec: &pb.PartitionRecord{Replicas: []int32{1, 2, 3}},
		view: runner.TopicView{Mirror: "m", Desired: plan.Desired{SourceClusterID: "A", State: pb.MirrorState_MIRROR_STATE_MIRRORING, Generation: 1}}}
	part := &fakePart{r: r}
	obs := &recObserver{}
	rn := runner.New(runner.Config{Self: 1, TopicPartition: twinlog.TopicPartition{Topic: "t"}, TopicID: "id", Tick: 100 * time.Millisecond}, env, part, obs)
	return rn, env, part, obs
}

// TestRunnerLoadsBeforeLeading: a leadership starts only from loaded
// records: one read in flight at a time, answers handled on the next turn
// (the host is woken), a failed read retried a tick later, and the machine
// leads once a read succeeds.
func TestRunnerLoadsBeforeLeading(t *testing.T) {
	rn, env, _, obs := newRunner(t)
	rn.Turn()
	rn.Turn()
	if len(env.loads) != 1 || rn.Core().Leadership.Leading {
		t.Fatalf("loads %d, leading %t: want one read in flight, not leading", len(env.loads), rn.Core().Leadership.Leading)
	}
	env.loads[0](nil, nil, errors.New("state partition offline"))
	if env.wakes == 0 {
		t.Fatal("an answer did not wake the host")
	}
	rn.Turn() // handles the failure
	rn.Turn()
	if len(env.loads) != 1 {
		t.Fatalf("a failed read was retried at once (%d reads)", len(env.loads))
	}
	env.now += 100
	rn.Turn()
	if len(env.loads) != 2 {
		t.Fatalf("reads %d after a tick, want the retry", len(env.loads))
	}
	env.loads[1](nil, nil, nil)
	if rn.Core().Leadership.Leading {
		t.Fatal("an answer acted outside a turn")
	}
	rn.Turn() // the answer
	rn.Turn() // the leadership begins
	if !rn.Core().Leadership.Leading || len(obs.began) != 1 || obs.began[0] != 2 {
		t.Fatalf("leading %t, began %v: want a leadership in LE 2", rn.Core().Leadership.Leading, obs.began)
	}
	if st := obs.status[len(obs.status)-1]; st == nil || st.GetLeaderEpoch() != 2 {
		t.Fatalf("status %v", st)
	}
}

// TestRunnerWritesInOrder: a leadership's __mirror_state writes go one at a
// time in the machine's order; a bump is reported once the replica runs in
// its LE, and that LE stays the leadership's own; a write answered after
// its leadership ended releases nothing of the next one, and the last
// status stands while the next leadership loads.
func TestRunnerWritesInOrder(t *testing.T) {
	rn, env, part, obs := newRunner(t)
	rn.Turn()
	env.loads[0](nil, nil, nil)
	rn.Turn()
	rn.Turn()
	if len(env.writes) != 1 || len(env.lmles) != 1 {
		t.Fatalf("writes %d, LMLE queries %d: want the first record sent and the query", len(env.writes), len(env.lmles))
	}
	if w := env.writes[0].w; (w.Run == nil) == (w.Lmle == nil) || w.Mirror != "m" {
		t.Fatalf("first write %+v", w)
	}
	env.lmles[0](-1, pb.ErrorCode_ERROR_CODE_NONE)
	rn.Turn()
	if len(env.writes) != 1 {
		t.Fatalf("%d writes sent while the first is in flight", len(env.writes))
	}
	acked := 0
	ackAll := func() {
		for acked < len(env.writes) {
			env.writes[acked].done(nil)
			acked++
			rn.Turn()
			if len(env.writes) > acked+1 {
				t.Fatalf("%d writes in flight", len(env.writes)-acked)
			}
		}
	}
	ackAll()
	if len(env.bumps) != 1 {
		t.Fatalf("bumps %d: want the LMLE truncation's", len(env.bumps))
	}
	env.bumps[0].done(3, pb.ErrorCode_ERROR_CODE_NONE)
	rn.Turn()
	if l := rn.Core().Leadership; l.Bumps != 1 || l.KnownLE != 2 {
		t.Fatalf("bump reported before the replica runs in LE 3: %+v", l)
	}
	lead(t, part.r, 3)
	rn.Turn()
	if l := rn.Core().Leadership; l.Bumps != 0 || l.KnownLE != 3 || obs.ended != 0 {
		t.Fatalf("after the bump's LE: %+v, ended %d", l, obs.ended)
	}
	// The truncation is done in the same turn; its run record is in
	// flight.
	if len(env.writes) != acked+1 || env.writes[acked].w.Run.GetTruncationEpoch() != 3 {
		t.Fatalf("writes %d (acked %d): want the truncation's run record in flight", len(env.writes), acked)
	}
	pending := env.writes[len(env.writes)-1]
	before := len(env.writes)
	last := obs.status[len(obs.status)-1]

	// A new LE this machine did not cause: the leadership ends, the
	// records load again, and the old write's late answer sends nothing.
	lead(t, part.r, 4)
	rn.Turn()
	if obs.ended != 1 || len(env.loads) != 2 {
		t.Fatalf("ended %d, loads %d, leadership %+v", obs.ended, len(env.loads), rn.Core().Leadership)
	}
	if got := obs.status[len(obs.status)-1]; got != last {
		t.Fatalf("status while loading: %v, want the last one (%v)", got, last)
	}
	pending.done(nil)
	rn.Turn()
	if len(env.writes) != before {
		t.Fatalf("an ended leadership's ack sent write %+v", env.writes[len(env.writes)-1].w)
	}
	env.loads[1](nil, nil, nil)
	rn.Turn()
	rn.Turn()
	if len(obs.began) != 2 || obs.began[1] != 4 {
		t.Fatalf("began %v, want LE 4 next", obs.began)
	}
	if n := len(env.writes); n != before+1 || env.writes[n-1].w.Lead == pending.w.Lead {
		t.Fatalf("writes %d, want one of the new leadership", n)
	}
}

// TestRunnerBumpDoneBeforeNextEvent: a bump answered while the replica was
// still in the old LE is reported as soon as a turn finds the replica in
// the new one, before the turn hands the machine anything else, and what
// an event makes the machine emit is performed before the next event: a
// stop bump requested by the STOPPING writes' ack carries the LE the
// answered bump gave (simulator seed 312: the runner reported BumpDone
// between the ack and sending the stop bump, which went out in the old LE
// and was fenced).
func TestRunnerBumpDoneBeforeNextEvent(t *testing.T) {
	rn, env, part, _ := newRunner(t)
	rn.Turn()
	env.loads[0](nil, nil, nil)
	rn.Turn()
	rn.Turn()
	env.lmles[0](-1, pb.ErrorCode_ERROR_CODE_NONE)
	rn.Turn()
	acked := 0
	ackAll := func() {
		for acked < len(env.writes) {
			env.writes[acked].done(nil)
			acked++
			rn.Turn()
		}
	}
	ackAll()
	if len(env.bumps) != 1 || env.bumps[0].a.LeaderEpoch != 2 {
		t.Fatalf("bumps %+v: want the LMLE truncation's from LE 2", env.bumps)
	}
	env.bumps[0].done(3, pb.ErrorCode_ERROR_CODE_NONE)
	rn.Turn() // the answer waits for the replica to run in LE 3

	// The operator stops the mirror: the machine writes the LMLE and the
	// STOPPING run record, one at a time.
	env.view.Desired.State = pb.MirrorState_MIRROR_STATE_STOPPED
	rn.Turn()
	for len(env.writes) == acked+1 && len(env.bumps) == 1 {
		if acked == len(env.writes)-1 && env.writes[acked].w.Run != nil && env.writes[acked].w.Run.GetState() == pb.MirrorState_MIRROR_STATE_STOPPING {
			// The last STOPPING write: the replica enters LE 3 before
			// its ack is handled.
			lead(t, part.r, 3)
		}
		env.writes[acked].done(nil)
		acked++
		rn.Turn()
	}
	if len(env.bumps) != 2 {
		t.Fatalf("bumps %d after the STOPPING writes, want the stop bump", len(env.bumps))
	}
	if got := env.bumps[1].a.LeaderEpoch; got != 3 {
		t.Fatalf("stop bump from LE %d, want 3 (the answered bump's LE, reported first)", got)
	}
}

// TestRunnerFailedWriteHoldsLaterOnes: the writes queued behind a failed
// __mirror_state write fail with it and are written again in their order
// (simulator seed 6109029: the LMLE record carrying a run's taints was
// lost, the MIRRORING run record queued behind it landed, and a leader
// re-elected after a crash resumed MIRRORING with the skipped replicas
// untainted).
func TestRunnerFailedWriteHoldsLaterOnes(t *testing.T) {
	rn, env, _, _ := newRunner(t)
	rn.Turn()
	env.loads[0](nil, nil, nil)
	rn.Turn()
	rn.Turn()
	env.lmles[0](-1, pb.ErrorCode_ERROR_CODE_NONE)
	rn.Turn() // the first write in flight, the next ones queued behind it
	first := env.writes[0].w
	env.writes[0].done(errors.New("lost"))
	rn.Turn()
	if len(env.writes) != 1 {
		t.Fatalf("write %+v sent behind a failed one", env.writes[1].w)
	}
	env.now += 100
	rn.Turn() // the machine writes them again on its tick
	if len(env.writes) != 2 {
		t.Fatalf("writes %d after the tick, want the failed one again", len(env.writes))
	}
	if again := env.writes[1].w; (again.Run == nil) != (first.Run == nil) {
		t.Fatalf("rewritten first: %+v, want the failed %+v", again, first)
	}
}
