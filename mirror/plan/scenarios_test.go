package plan_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

// TestM1InitialMirror: SPEC §10 M1 on stale destination data — LMLE −1
// truncates fully, B is read-only, never passes A's HW, bumps to ≥ a source
// batch epoch before appending it, and ends equal to A with lag 0.
func TestM1InitialMirror(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 1
	a.mustProduce(3) // 0-2@1a
	b.mustProduce(2) // stale 0-1@0b
	a.log.hwLag = 1  // A's ISR slowed: HW 2

	b.mirrorFrom(1, plan.Config{})
	if b.failed != 1 || b.writable {
		t.Fatalf("start did not make B read-only (failed %d, writable %v)", b.failed, b.writable)
	}
	if e := b.produce(); e != twinlogv1.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		t.Fatalf("produce = %v", e)
	}
	b.checkLog("")
	b.checkLE(1)
	if len(b.truncations) != 1 || b.truncations[0] != plan.ReasonLMLE {
		t.Fatalf("truncations %v", b.truncations)
	}
	b.fetchUntilIdle()
	b.checkLog("0@1a 1@1a") // not past A's HW 2
	if st := b.m.Status(); st.LagRecords != 0 || st.SourceHighWatermark != 2 {
		t.Fatalf("status %v", st)
	}

	// A reaches LE 7: B bumps to ≥ 7 before appending 3@7a.
	a.le = 7
	a.mustProduce(1)
	a.log.hwLag = 0
	out := b.fetch()
	if nb, ok := out.ev.(plan.FetchNeedsBump); !ok || nb.Epoch != 7 {
		t.Fatalf("outcome %+v, want FetchNeedsBump{7}", out.ev)
	}
	b.checkLog("0@1a 1@1a 2@1a")
	if b.le < 7 {
		t.Fatalf("LE_B %d < 7", b.le)
	}
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	if a.log.cache.Latest() != b.log.cache.Latest() || len(a.log.cache.Entries()) != len(b.log.cache.Entries()) {
		t.Fatalf("caches %v vs %v", a.log.cache.Entries(), b.log.cache.Entries())
	}
	checkMirrorInvariants(t, b)
	b.tick(5000)
	if st := b.m.Status(); st.LagRecords != 0 || st.State != plan.Mirroring || st.LagSeconds < 0 {
		t.Fatalf("status %v", st)
	}
}

// TestM2LMLECommittedBeforeWritable: the LMLE record is committed before the
// stop bump, and the partition becomes writable only after the STOPPED
// record is committed, with a first new epoch above LMLE and every epoch.
func TestM2LMLECommittedBeforeWritable(t *testing.T) {
	a, b := mirroredPair(t, 1, 2)
	a.up = false

	b.holdWrites = true
	b.desired.State = plan.Stopped
	b.actions = nil
	if err := b.m.Step(plan.Stop{}); err != nil {
		t.Fatal(err)
	}
	b.drive()
	b.checkState(plan.Stopping)
	if len(b.bumps) != 1 || b.writable {
		t.Fatalf("bumped %v / writable %v before the LMLE write was acked", b.bumps, b.writable)
	}
	if got := b.lmleRecord().GetLmle(); got != 1 {
		t.Fatalf("LMLE written %d, want 1", got)
	}
	b.releaseWrites() // LMLE + STOPPING acked → bump → STOPPED write (held)
	if len(b.bumps) != 2 || b.le != 2 {
		t.Fatalf("bumps %v", b.bumps)
	}
	if b.writable || b.m.State() != plan.Stopping {
		t.Fatalf("writable before the STOPPED record was acked")
	}
	if e := b.produce(); e != twinlogv1.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		t.Fatalf("produce during STOPPING = %v", e)
	}
	b.releaseWrites()
	b.checkState(plan.Stopped)
	b.mustProduce(1)
	b.checkLog("0@1a 1@1a 2@2b")
	if r := b.lmleRecord(); r.GetLeaderEpochAfterStop() != 2 || r.GetLeoAtStop() != 2 || r.GetSourceClusterId() != "A" {
		t.Fatalf("lmle record %v", r)
	}
}

// TestM2LeaderDiesAfterLMLEWrite: the next leader (not aligned itself)
// finishes the stop with the recorded LMLE.
func TestM2LeaderDiesAfterLMLEWrite(t *testing.T) {
	a, b := mirroredPair(t, 1, 2)
	a.up = false

	// Hold the bump: perform the stop writes, then kill the leader.
	b.desired.State = plan.Stopped
	if err := b.m.Step(plan.Stop{}); err != nil {
		t.Fatal(err)
	}
	rd := b.m.Ready()
	b.m.Advance()
	var acks []plan.Event
	for _, act := range rd.Actions {
		if ev := b.perform(act); ev != nil {
			acks = append(acks, ev)
		}
	}
	for _, ev := range acks {
		if err := b.m.Step(ev); err != nil {
			t.Fatal(err)
		}
	}
	var sawBump bool
	for _, act := range b.m.Ready().Actions {
		_, sawBump = act.(plan.BumpLeaderEpoch)
	}
	if !sawBump {
		t.Fatalf("no bump after LMLE write: %v", b.m.Ready().Actions)
	}
	b.m.Advance()
	if err := b.m.Step(plan.LostLeadership{}); err != nil {
		t.Fatal(err)
	}

	// b2 leads at LE 2 with its own (unaligned) view of the same records.
	b2 := newCluster(t, 'b')
	b2.self = 2
	b2.peer = a
	b2.log.recs = append(b2.log.recs, b.log.recs...)
	b2.log.cache.Assign(1, 0)
	b2.log.cache.Assign(2, 1) // a different, later epoch: must not be recorded
	b2.runs, b2.lmles, b2.desired = b.runs, b.lmles, b.desired
	b2.le = 2
	b2.writable = false
	b2.ensureMachine(plan.Config{})
	b2.becomeLeader()
	b2.checkState(plan.Stopped)
	if got := b2.lmleRecord().GetLmle(); got != 1 {
		t.Fatalf("LMLE after failover %d, want 1", got)
	}
	if b2.le != 3 || !b2.writable {
		t.Fatalf("LE %d writable %v", b2.le, b2.writable)
	}
}

// TestM2StopWithSourceUnreachable: stop completes from PREPARING (A never
// answers) and from FAILED.
func TestM2StopWithSourceUnreachable(t *testing.T) {
	t.Run("from PREPARING", func(t *testing.T) {
		a, b := newCluster(t, 'a'), newCluster(t, 'b')
		link(a, b)
		a.up = false
		b.le = 4
		b.mustProduce(1) // 0@4b, earlier history
		b.lmles.Apply(b.lmleKey(), &twinlogv1.MirrorLmleRecord{StateEpoch: 3, Lmle: 2, SourceClusterId: "A"})
		b.mirrorFrom(1, plan.Config{})
		b.checkState(plan.Preparing)
		b.tick(50)
		b.stop()
		b.checkState(plan.Stopped)
		if got := b.lmleRecord().GetLmle(); got != 2 {
			t.Fatalf("LMLE %d, want the existing 2 (leader not aligned)", got)
		}
		if b.le != 5 || !b.writable {
			t.Fatalf("LE %d writable %v", b.le, b.writable)
		}
	})
	t.Run("from FAILED", func(t *testing.T) {
		a, b := mirroredPair(t, 3, 2)
		b.step(plan.FetchError{Session: b.session, Error: twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID})
		b.checkState(plan.Failed)
		a.up = false
		b.stop()
		b.checkState(plan.Stopped)
		if got := b.lmleRecord().GetLmle(); got != 3 {
			t.Fatalf("LMLE %d, want 3", got)
		}
		if b.le != 4 {
			t.Fatalf("LE %d", b.le)
		}
	})
	t.Run("no answer within the pending timeout", func(t *testing.T) {
		a, b := newCluster(t, 'a'), newCluster(t, 'b')
		link(a, b)
		a.up = false
		b.mirrorFrom(1, plan.Config{PendingTimeoutMs: 1000})
		for now := int64(100); now < 1000; now += 100 {
			b.tick(now)
			b.checkState(plan.Preparing)
		}
		b.tick(1000)
		b.checkState(plan.Failed)
	})
}

// TestTransitionLegality: SPEC §6.5 table, pure and on the machine.
func TestTransitionLegality(t *testing.T) {
	states := []twinlogv1.MirrorState{plan.NotStarted, plan.Preparing, plan.Truncating, plan.Pending,
		plan.Mirroring, plan.Paused, plan.Stopping, plan.Stopped, plan.Failed}
	legal := map[plan.Op][]twinlogv1.MirrorState{
		plan.OpStart:  {plan.NotStarted, plan.Stopped, plan.Failed},
		plan.OpPause:  {plan.Mirroring},
		plan.OpResume: {plan.Paused},
		plan.OpStop:   {plan.NotStarted, plan.Preparing, plan.Truncating, plan.Pending, plan.Mirroring, plan.Paused, plan.Stopping, plan.Failed},
	}
	for op, ok := range legal {
		for _, s := range states {
			want := twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
			for _, l := range ok {
				if l == s {
					want = twinlogv1.ErrorCode_ERROR_CODE_NONE
				}
			}
			if got := plan.CheckTransition(s, op); got != want {
				t.Errorf("%v from %v = %v, want %v", op, s, got, want)
			}
		}
	}
	// The machine takes Pause and Resume in any state of a run, as its
	// desired state (see plan.Accepts); Start also in a going run (adopting
	// its generation) and while stopping; Stop as the table.
	run := []twinlogv1.MirrorState{plan.Preparing, plan.Truncating, plan.Pending, plan.Mirroring, plan.Paused, plan.Failed}
	going := []twinlogv1.MirrorState{plan.Preparing, plan.Truncating, plan.Pending, plan.Mirroring, plan.Stopping}
	for _, s := range states {
		for _, op := range []plan.Op{plan.OpStart, plan.OpPause, plan.OpResume, plan.OpStop} {
			want := plan.CheckTransition(s, op) == twinlogv1.ErrorCode_ERROR_CODE_NONE
			if op == plan.OpPause || op == plan.OpResume {
				want = slices.Contains(run, s)
			}
			if op == plan.OpStart && slices.Contains(going, s) {
				want = true
			}
			if got := plan.Accepts(s, op); got != want {
				t.Errorf("machine accepts %v from %v = %v, want %v", op, s, got, want)
			}
		}
	}

	// On the machine: drive to a state, try every op.
	reach := map[twinlogv1.MirrorState]func(b *cluster){
		plan.Preparing: func(b *cluster) { b.peer.up = false; b.mirrorFrom(1, plan.Config{}) },
		plan.Pending: func(b *cluster) {
			b.status = plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 2}, ISR: []twinlog.BrokerID{1, 2}, MinInsyncReplicas: 2}
			b.mirrorFrom(1, plan.Config{})
		},
		plan.Mirroring: func(b *cluster) { b.mirrorFrom(1, plan.Config{}) },
		plan.Paused: func(b *cluster) {
			b.mirrorFrom(1, plan.Config{})
			b.step(plan.Pause{})
		},
		plan.Stopped: func(b *cluster) { b.mirrorFrom(1, plan.Config{}); b.stop() },
		plan.Failed: func(b *cluster) {
			b.mirrorFrom(1, plan.Config{})
			b.step(plan.FetchError{Session: b.session, Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION})
		},
	}
	ops := map[plan.Op]plan.Event{plan.OpStart: plan.Start{Generation: 9, SourceClusterID: "A"},
		plan.OpPause: plan.Pause{}, plan.OpResume: plan.Resume{}, plan.OpStop: plan.Stop{}}
	for s, setup := range reach {
		for op, ev := range ops {
			a, b := newCluster(t, 'a'), newCluster(t, 'b')
			link(a, b)
			a.le = 1
			a.mustProduce(1)
			setup(b)
			b.checkState(s)
			err := b.m.Step(ev)
			wantOK := plan.Accepts(s, op)
			if wantOK != (err == nil) {
				t.Errorf("%v from %v: err %v", op, s, err)
			}
			if err != nil {
				if !errors.Is(err, plan.ErrInvalidRequest) {
					t.Errorf("%v from %v: %v is not ErrInvalidRequest", op, s, err)
				}
				if b.m.State() != s || b.m.HasReady() {
					t.Errorf("%v from %v changed the machine", op, s)
				}
			}
		}
	}
}

// TestPendingTimeoutBackoffRetry: a replica that does not align keeps the
// partition PENDING, then FAILED after mirror.pending.timeout.ms; FAILED
// retries to PREPARING with full-jitter exponential backoff up to
// max.attempts, then only on Start (SPEC §6.5, §6.6 step 3, M5).
// pendingWithThree starts b mirroring a's two records with replicas
// [1 2 3], ISR [1 2]: PENDING until replica 2 aligns (3 will be skipped).
func pendingWithThree(t *testing.T, cfg plan.Config) *cluster {
	t.Helper()
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 1
	a.mustProduce(2)
	b.status = plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 2, 3}, ISR: []twinlog.BrokerID{1, 2}, MinInsyncReplicas: 2}
	b.mirrorFrom(1, cfg)
	b.checkState(plan.Pending)
	return b
}

func TestPendingTimeoutBackoffRetry(t *testing.T) {
	cfg := plan.Config{PendingTimeoutMs: 1000, RetryInitialBackoffMs: 100, RetryMaxBackoffMs: 250, RetryMaxAttempts: 2}
	b := pendingWithThree(t, cfg)
	b.tick(999)
	b.checkState(plan.Pending)
	b.tick(1000)
	b.checkState(plan.Failed)
	if st := b.m.Status(); st.LastError == "" || st.RetryCount != 0 {
		t.Fatalf("status %v", st)
	}
	// maxRand: full jitter at its ceiling, 100·2^0 = 100 ms.
	b.tick(1099)
	b.checkState(plan.Failed)
	b.tick(1100)
	b.checkState(plan.Pending) // PREPARING → TRUNCATING → PENDING again
	if got := b.m.Status().RetryCount; got != 1 {
		t.Fatalf("retryCount %d", got)
	}
	b.tick(2100)
	b.checkState(plan.Failed)
	b.tick(2299) // 100·2^1 = 200
	b.checkState(plan.Failed)
	b.tick(2300)
	b.checkState(plan.Pending)
	b.tick(3300)
	b.checkState(plan.Failed) // retryCount 2 = max attempts: no more retries
	b.tick(1 << 40)
	b.checkState(plan.Failed)
	if got := b.m.Status().RetryCount; got != 2 {
		t.Fatalf("retryCount %d", got)
	}
	// The replica comes back aligned; an operator Start recovers.
	b.mirrorFrom(2, cfg)
	b.checkState(plan.Pending)
	te := twinlog.Epoch(b.runRecord().GetTruncationEpoch())
	b.status.FollowerAlignedEpoch = map[twinlog.BrokerID]twinlog.Epoch{2: te}
	b.step(plan.ReplicaStatusChanged{Status: b.status})
	b.checkState(plan.Mirroring)
	if got := b.m.Status().RetryCount; got != 0 {
		t.Fatalf("retryCount after Start %d", got)
	}
	// Replica 3 was skipped: tainted with (lmleUsed −1, T 0).
	if tt, ok := b.taints[3]; !ok || tt.Epoch != -1 || tt.Offset != 0 {
		t.Fatalf("taints %v", b.taints)
	}
	if got := b.runRecord().GetSkippedReplicas(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("skipped %v", got)
	}
	// It fetches cleanly once: the taint is cleared after it is written.
	b.holdWrites = true
	b.step(plan.FollowerRepaired{Replica: 3})
	if _, ok := b.taints[3]; !ok {
		t.Fatal("taint cleared before its write was acked")
	}
	b.releaseWrites()
	if _, ok := b.taints[3]; ok || len(b.lmleRecord().GetTaints()) != 0 {
		t.Fatalf("taint not cleared: %v", b.lmleRecord().GetTaints())
	}
}

// TestUncleanSupportConfigWaitsForAllReplicas: with the config true at check
// time the run waits for ISR = R (SPEC §6.6 step 3, §6.10 case 2 config true).
func TestUncleanSupportConfigWaitsForAllReplicas(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 1
	a.mustProduce(1)
	b.status = plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 2}, ISR: []twinlog.BrokerID{1}, MinInsyncReplicas: 1,
		SupportUncleanLeaderElection: true}
	b.mirrorFrom(1, plan.Config{})
	b.checkState(plan.Pending)
	te := twinlog.Epoch(b.runRecord().GetTruncationEpoch())
	b.status.ISR = []twinlog.BrokerID{1, 2}
	b.status.FollowerAlignedEpoch = map[twinlog.BrokerID]twinlog.Epoch{2: te - 1}
	b.step(plan.ReplicaStatusChanged{Status: b.status})
	b.checkState(plan.Pending) // in the ISR but aligned in an older LE
	b.status.FollowerAlignedEpoch[2] = te
	b.step(plan.ReplicaStatusChanged{Status: b.status})
	b.checkState(plan.Mirroring)
	if len(b.taints) != 0 {
		t.Fatalf("taints %v with the config true", b.taints)
	}
}

// TestNewLeaderResumes: a new leader redoes PREPARING..PENDING from
// PREPARING, resumes MIRRORING after rewriting the record with its LE.
func TestNewLeaderResumes(t *testing.T) {
	a, b := mirroredPair(t, 2, 2)
	b.leaderChange()
	b.checkState(plan.Mirroring)
	if r := b.runRecord(); r.StateEpoch != int32(b.le) || r.State != plan.Mirroring {
		t.Fatalf("run record %v not rewritten in LE %d", r, b.le)
	}
	if !b.fetching {
		t.Fatal("fetcher not restarted")
	}
	a.mustProduce(1)
	b.fetchUntilIdle()
	b.checkLog(a.log.String())

	// Pause survives a leader change; Resume continues from LEO.
	b.step(plan.Pause{})
	b.desired.State = plan.Paused
	b.leaderChange()
	b.checkState(plan.Paused)
	if b.fetching {
		t.Fatal("fetching while PAUSED")
	}
	b.desired.State = plan.Mirroring
	b.step(plan.Resume{})
	b.checkState(plan.Mirroring)
	before := len(b.truncations)
	a.mustProduce(1)
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	if len(b.truncations) != before {
		t.Fatal("resume truncated")
	}

	// Dying in PENDING: the next leader starts over from PREPARING.
	c := newCluster(t, 'c')
	link(a, c)
	c.status = plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 2}, ISR: []twinlog.BrokerID{1, 2}, MinInsyncReplicas: 2}
	c.mirrorFrom(1, plan.Config{})
	c.checkState(plan.Pending)
	c.actions = nil
	c.leaderChange()
	if _, ok := c.actions[0].(plan.StopFetcher); ok {
		c.actions = c.actions[1:]
	}
	var queried bool
	for _, act := range c.actions {
		if _, ok := act.(plan.QueryLMLE); ok {
			queried = true
		}
	}
	if !queried {
		t.Fatalf("new leader did not redo PREPARING: %v", c.actions)
	}
	c.checkState(plan.Pending)
}

// TestStopWaitForCatchUp: REQUEST_TIMED_OUT with nothing changed, or a
// stop once the lag is 0.
func TestStopWaitForCatchUp(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 1
	a.mustProduce(2)
	b.mirrorFrom(1, plan.Config{})
	b.fetch()
	a.mustProduce(1) // lag 1 after the next Fetched
	b.fetch()
	b.fetch() // caught up again
	a.mustProduce(1)
	a.up = false
	b.fetch() // error: lag stays unknown-positive
	b.step(plan.Fetched{Session: b.session, SourceHighWatermark: 4, SourceLogEndOffset: 4})
	b.step(plan.Stop{WaitForCatchUp: true, TimeoutMs: 500})
	b.checkState(plan.Mirroring)
	b.tick(499)
	b.checkState(plan.Mirroring)
	b.tick(500)
	b.checkState(plan.Mirroring)
	if len(b.stopResults) != 1 || b.stopResults[0] != twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
		t.Fatalf("stop results %v", b.stopResults)
	}
	a.up = true
	b.step(plan.Stop{WaitForCatchUp: true, TimeoutMs: 500})
	b.fetch()
	b.checkState(plan.Stopped)
	b.checkLog(a.log.String())
}

// TestOutOfRangeRestartsAtSourceLogStart: OFFSET_OUT_OF_RANGE → bump,
// truncate fully, restart at S's logStartOffset (SPEC §6.3).
func TestOutOfRangeRestartsAtSourceLogStart(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 2
	a.log.start = 5 // retention removed 0–4
	a.log.cache.Assign(2, 5)
	a.mustProduce(2)
	b.mirrorFrom(1, plan.Config{})
	out := b.fetch()
	if oor, ok := out.ev.(plan.FetchOutOfRange); !ok || oor.SourceLogStartOffset != 5 {
		t.Fatalf("outcome %+v", out.ev)
	}
	if b.log.start != 5 || len(b.bumps) != 2 || b.truncations[len(b.truncations)-1] != plan.ReasonOutOfRange {
		t.Fatalf("start %d bumps %v truncations %v", b.log.start, b.bumps, b.truncations)
	}
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	checkMirrorInvariants(t, b)
}

// TestLostBumpAnswerTruncatesFirst (sim seed 1149): a bump with a
// truncation offset is committed — the controller installs the new LE and
// its truncation point (SPEC §6.2f) — but its answer is lost; the retry from
// the old LE is fenced, and the shell, seeing an LE it did not cause, steps
// BecameLeader with the partition's truncation points. The machine must do
// the owed truncation before it acts on the records: until then the replica
// answers every follower fetch in that LE UNKNOWN_LEADER_EPOCH (and consumers
// already treat the records above the point as truncated).
func TestLostBumpAnswerTruncatesFirst(t *testing.T) {
	// owedFirst checks that the first truncation after BecameLeader is want
	// and comes before any write, fetch or bump of the new leadership.
	owedFirst := func(t *testing.T, as []plan.Action, want plan.Action) {
		t.Helper()
		for _, a := range as {
			switch a := a.(type) {
			case plan.TruncateTo:
				if a.Seq = 0; a != want {
					t.Fatalf("first truncation %#v, want %#v", a, want)
				}
				return
			case plan.TruncateFully:
				if a.Seq = 0; a != want {
					t.Fatalf("first truncation %#v, want %#v", a, want)
				}
				return
			case plan.WriteRunRecord, plan.WriteLmleRecord, plan.StartFetcher, plan.BumpLeaderEpoch, plan.QueryLMLE, plan.SetWritable:
				t.Fatalf("%#v before the owed truncation in %v", a, as)
			}
		}
		t.Fatalf("no owed truncation in %v", as)
	}

	t.Run("divergence while MIRRORING", func(t *testing.T) {
		a, b := newCluster(t, 'a'), newCluster(t, 'b')
		link(a, b)
		a.le = 1
		a.mustProduce(3) // 0-2@1a
		b.mirrorFrom(1, plan.Config{})
		b.fetchUntilIdle()
		b.checkLog("0@1a 1@1a 2@1a")
		// A's leader changed uncleanly: 2@1a is gone, A writes in LE 2.
		a.log.truncateTo(2)
		a.le = 2
		a.mustProduce(2)
		le := b.le
		b.loseBumps = 1
		if d, ok := b.fetch().ev.(plan.FetchDiverging); !ok || d.Epoch != 1 || d.EndOffset != 2 {
			t.Fatalf("want DivergingEpoch{1, 2}, got %#v", d)
		}
		if b.le != le+1 || len(b.truncPts) != 1 || b.truncPts[0] != (plan.TruncationPoint{LeaderEpoch: le + 1, Offset: 2}) {
			t.Fatalf("LE %d, truncation points %v", b.le, b.truncPts)
		}
		b.checkLog("0@1a 1@1a 2@1a") // committed, not done
		b.tick(100)                  // the retry from the old LE is fenced
		if b.m.LeaderEpoch() != le {
			t.Fatalf("machine LE %d, want %d (answer lost)", b.m.LeaderEpoch(), le)
		}

		b.actions = nil
		b.becomeLeader()
		owedFirst(t, b.actions, plan.TruncateTo{Offset: 2, Reason: plan.ReasonDivergence})
		b.checkLog("0@1a 1@1a")
		b.checkState(plan.Mirroring)
		if !b.fetching || b.runRecord().GetStateEpoch() != int32(le+1) {
			t.Fatalf("fetching %v, run record %v", b.fetching, b.runRecord())
		}
		b.fetchUntilIdle()
		b.checkLog(a.log.String())
		checkMirrorInvariants(t, b)

		// A later leadership in an LE without a point truncates nothing.
		n := len(b.truncations)
		b.leaderChange()
		if len(b.truncations) != n {
			t.Fatalf("truncated again: %v", b.truncations)
		}
		b.checkLog(a.log.String())
	})

	t.Run("LMLE truncation of the run", func(t *testing.T) {
		a, b := newCluster(t, 'a'), newCluster(t, 'b')
		link(a, b)
		a.le = 1
		a.mustProduce(2)
		b.mustProduce(2) // stale 0-1@0b: LMLE −1 truncates fully
		b.loseBumps = 1
		b.mirrorFrom(1, plan.Config{})
		b.checkState(plan.Truncating)
		b.checkLog("0@0b 1@0b")
		b.tick(100)

		b.actions = nil
		b.becomeLeader()
		owedFirst(t, b.actions, plan.TruncateFully{RestartAt: 0, Reason: plan.ReasonLMLE})
		// The run is redone from PREPARING in the new LE (SPEC §6.5).
		b.checkState(plan.Mirroring)
		if te := b.runRecord().GetTruncationEpoch(); te <= 1 {
			t.Fatalf("run truncation epoch %d", te)
		}
		b.fetchUntilIdle()
		b.checkLog(a.log.String())
		checkMirrorInvariants(t, b)
	})

	t.Run("stop while the owed truncation runs", func(t *testing.T) {
		a, b := mirroredPair(t, 1, 3)
		a.log.truncateTo(2)
		a.le = 2
		a.mustProduce(1)
		b.loseBumps = 1
		b.fetch()
		b.tick(100)

		// BecameLeader emits the truncation; the shell has not done it yet
		// when the operator's Stop arrives.
		if err := b.m.Step(plan.BecameLeader{LeaderEpoch: b.le, Run: b.runRecord(), Lmle: b.lmleRecord(), Desired: b.desired, TruncationPoints: b.truncPts}); err != nil {
			t.Fatal(err)
		}
		rd := b.m.Ready()
		b.m.Advance()
		owedFirst(t, rd.Actions, plan.TruncateTo{Offset: 2, Reason: plan.ReasonDivergence})
		b.desired.State = plan.Stopped
		if err := b.m.Step(plan.Stop{}); err != nil {
			t.Fatal(err)
		}
		if b.m.HasReady() {
			t.Fatalf("acted on Stop before the owed truncation: %v", b.m.Ready().Actions)
		}
		for _, act := range rd.Actions {
			if ev := b.perform(act); ev != nil {
				b.step(ev)
			}
		}
		b.checkLog("0@1a 1@1a")
		b.checkState(plan.Stopped)
		if !b.writable || b.lmleRecord().GetLmle() != 1 {
			t.Fatalf("writable %v, lmle record %v", b.writable, b.lmleRecord())
		}
	})
}

// TestResumeMirroringDropsOwnEmptyEpoch: a new leader that resumes
// MIRRORING without the run's LMLE truncation (SPEC §6.5) may hold an
// entry without records of its own: a tainted replica that led the
// partition writable in epoch E (cache (E, LEO)) and is then elected
// uncleanly (§6.8; simulator seed 177). A mirror cache holds record epochs
// only (§6.2c, inv. 16), and E would be the first fetch's
// lastFetchedEpoch. The machine bumps with a truncation offset at the LEO
// and cuts there (§6.2f), which drops only the entry, before it fetches.
func TestResumeMirroringDropsOwnEmptyEpoch(t *testing.T) {
	a, b := mirroredPair(t, 2, 3)
	b.checkLog("0@2a 1@2a 2@2a")
	lmleUsed := twinlog.Epoch(b.runRecord().GetLmleUsed())

	// The next leader's log: the same records, plus its own (E, LEO) from
	// a writable leadership in E above lmleUsed.
	b.le++
	own := b.le
	b.log.cache.Assign(own, b.log.LogEndOffset())
	leo := b.log.LogEndOffset()
	b.step(plan.LostLeadership{})
	b.actions = nil
	b.le++
	b.becomeLeader()

	var bumped, cut bool
	for _, act := range b.actions {
		switch act := act.(type) {
		case plan.BumpLeaderEpoch:
			if act.TruncationOffset != leo {
				t.Fatalf("bump %#v, want truncation offset %d (the LEO)", act, leo)
			}
			bumped = true
		case plan.TruncateTo:
			if !bumped || act.Offset != leo || act.Reason != plan.ReasonLMLE {
				t.Fatalf("truncation %#v (after a bump: %v), want TruncateTo{%d, lmle} after the bump", act, bumped, leo)
			}
			cut = true
		case plan.StartFetcher:
			if !cut {
				t.Fatalf("fetcher started before the empty epoch %d was dropped: %v", own, b.actions)
			}
		}
	}
	if !cut {
		t.Fatalf("no truncation at the LEO: %v", b.actions)
	}
	if e, _ := b.log.cache.LatestEntry(); e.Epoch == own || e.Epoch > lmleUsed && e.StartOffset >= leo {
		t.Fatalf("cache %v keeps an epoch without records", b.log.cache.Entries())
	}
	b.checkState(plan.Mirroring)
	if !b.fetching {
		t.Fatal("fetcher not restarted")
	}
	a.mustProduce(2)
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	checkMirrorInvariants(t, b)

	// A later leadership with a clean cache cuts nothing.
	n := len(b.truncations)
	b.leaderChange()
	if len(b.truncations) != n {
		t.Fatalf("truncated again: %v", b.truncations[n:])
	}
}

// TestTaintRacesISRExpansion: SPEC §6.6 step 4 taints R − ISR, §4.5 keeps a
// tainted replica out of the ISR, but an expansion the leader proposed
// before the taint may be committed all the same (§8.19; simulator seeds
// 75, 134). The run waits while the status shows an expansion in flight;
// when its status is stale, the replica refuses the taints (AddTaints{Seq})
// and nothing is written until a later check holds.
func TestTaintRacesISRExpansion(t *testing.T) {
	ids := func(b ...twinlog.BrokerID) []twinlog.BrokerID { return b }
	lmleTaints := func(c *cluster) []twinlog.BrokerID {
		var out []twinlog.BrokerID
		for _, tt := range c.lmleRecord().GetTaints() {
			out = append(out, twinlog.BrokerID(tt.GetReplica()))
		}
		return out
	}
	tests := []struct {
		name string
		// status the machine gets once the run truncated, and the replica's
		// maximal ISR at that moment (nil: the status's)
		st      plan.ReplicaStatus
		maximal []twinlog.BrokerID
		// then: the answered expansion's status (ISR {1 2} or back to {1})
		after plan.ReplicaStatus
		// tick: the shell sees no status change (the expansion rolled back
		// unseen); the machine checks again on Tick
		tick       bool
		wantState  []twinlogv1.MirrorState // after the first status, after the answer
		wantTaints [][]twinlog.BrokerID    // durable taints at the same points
	}{
		{
			name:       "expansion in flight waits, committed",
			st:         plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1), MaximalISR: ids(1, 2), MinInsyncReplicas: 1},
			after:      plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1, 2), MinInsyncReplicas: 1},
			wantState:  []twinlogv1.MirrorState{plan.Pending, plan.Mirroring},
			wantTaints: [][]twinlog.BrokerID{nil, ids(3)},
		},
		{
			name:       "expansion in flight waits, rolled back",
			st:         plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1), MaximalISR: ids(1, 2), MinInsyncReplicas: 1},
			after:      plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1), MaximalISR: ids(1), MinInsyncReplicas: 1},
			wantState:  []twinlogv1.MirrorState{plan.Pending, plan.Mirroring},
			wantTaints: [][]twinlog.BrokerID{nil, ids(2, 3)},
		},
		{
			name:       "stale status: taints refused, committed",
			st:         plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1), MinInsyncReplicas: 1},
			maximal:    ids(1, 2),
			after:      plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1, 2), MinInsyncReplicas: 1},
			wantState:  []twinlogv1.MirrorState{plan.Pending, plan.Mirroring},
			wantTaints: [][]twinlog.BrokerID{nil, ids(3)},
		},
		{
			name:       "stale status: taints refused, rolled back unseen",
			st:         plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1), MinInsyncReplicas: 1},
			maximal:    ids(1, 2),
			tick:       true,
			wantState:  []twinlogv1.MirrorState{plan.Pending, plan.Mirroring},
			wantTaints: [][]twinlog.BrokerID{nil, ids(2, 3)},
		},
		{
			name:       "shrink in flight does not wait",
			st:         plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1, 2), MaximalISR: ids(1, 2), MinInsyncReplicas: 1},
			after:      plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1), MinInsyncReplicas: 1},
			wantState:  []twinlogv1.MirrorState{plan.Mirroring, plan.Mirroring},
			wantTaints: [][]twinlog.BrokerID{ids(3), ids(3)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newCluster(t, 'a'), newCluster(t, 'b')
			link(a, b)
			a.le = 1
			a.mustProduce(1)
			// PENDING on an unanswered follower; then the test's status.
			b.status = plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1, 2), MinInsyncReplicas: 1}
			b.mirrorFrom(1, plan.Config{})
			b.checkState(plan.Pending)
			te := twinlog.Epoch(b.runRecord().GetTruncationEpoch())
			align := func(st plan.ReplicaStatus) plan.ReplicaStatus {
				st.FollowerAlignedEpoch = map[twinlog.BrokerID]twinlog.Epoch{2: te}
				return st
			}
			b.maximalISR = tt.maximal
			b.status = align(tt.st)
			b.step(plan.ReplicaStatusChanged{Status: b.status})
			b.checkState(tt.wantState[0])
			if got := lmleTaints(b); !slices.Equal(got, tt.wantTaints[0]) {
				t.Fatalf("durable taints %v, want %v", got, tt.wantTaints[0])
			}
			for _, r := range b.maximalISR {
				if _, ok := b.taints[r]; ok {
					t.Fatalf("replica %d tainted while in the maximal ISR %v", r, b.maximalISR)
				}
			}
			b.maximalISR = nil
			if tt.tick {
				b.tick(b.nowMs + 50)
			} else {
				b.status = align(tt.after)
				b.step(plan.ReplicaStatusChanged{Status: b.status})
			}
			b.checkState(tt.wantState[1])
			if got := lmleTaints(b); !slices.Equal(got, tt.wantTaints[1]) {
				t.Fatalf("durable taints %v, want %v", got, tt.wantTaints[1])
			}
			if got := b.runRecord().GetSkippedReplicas(); len(got) != len(tt.wantTaints[1]) {
				t.Fatalf("skippedReplicas %v, want %v", got, tt.wantTaints[1])
			}
		})
	}
}

// TestForeignEpochRestartsMirror is the simulator's two-cluster seed 432 on
// the mirror leader: after a tainted replica's unclean election (SPEC §6.8)
// A answers B's LMLE query with 5 while holding its own log, whose epoch 2
// (from 20 on) is not B's epoch 2 ([0, 12), B's own records). The LMLE
// truncation is a no-op, fetch(12, last 2) passes A's check, and A answers
// an epoch-0 batch at 12, below B's latest cached epoch. Appended, B's epochs
// would go back (storage refuses it and the broker takes the partition
// offline). B must report FetchForeignEpoch, bump, truncate fully, restart
// at A's log start and end as a copy of A's log (records compared with their
// origin cluster).
func TestForeignEpochRestartsMirror(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.mustProduce(20) // 0–19@0a
	a.le = 2
	a.mustProduce(34) // 20–53@2a
	a.lmles.Apply(a.lmleKey(), &twinlogv1.MirrorLmleRecord{StateEpoch: 1, Lmle: 5, SourceClusterId: b.id})
	a.le = 7 // the stop that wrote LMLE 5 bumped A's LE above it (SPEC inv. 18); the election kept the log
	b.le = 2
	b.mustProduce(12) // 0–11@2b
	b.writable = false
	b.mirrorFrom(1, plan.Config{})
	b.checkState(plan.Mirroring)
	if len(b.log.recs) != 12 { // untouched by the no-op LMLE truncation
		t.Fatalf("B log after the LMLE step: %s", b.log)
	}
	out := b.fetch()
	if out.req.FetchOffset != 12 || out.req.LastFetchedEpoch != 2 {
		t.Fatalf("fetch request %+v", out.req)
	}
	if ev, ok := out.ev.(plan.FetchForeignEpoch); !ok || ev.Epoch != 0 || ev.BaseOffset != 12 {
		t.Fatalf("outcome %#v, want FetchForeignEpoch{epoch 0 at 12}", out.ev)
	}
	if b.log.LogEndOffset() != 0 || b.log.cache.Len() != 0 || b.truncations[len(b.truncations)-1] != plan.ReasonDivergence {
		t.Fatalf("after the foreign epoch: log %q (LEO %d) cache %v truncations %v", b.log, b.log.LogEndOffset(), b.log.cache.Entries(), b.truncations)
	}
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	checkMirrorInvariants(t, b)
}

// TestStraddleRestartsMirror is two-cluster seed 760568 on the mirror
// leader: after a tainted replica's unclean election (SPEC §6.8) the
// source's log is not B's though every epoch check passes, and the source
// answers a batch that holds B's LEO inside it. Batches are copied whole, so
// that proves B's log no prefix of the source's: B reports FetchStraddle,
// truncates fully (a divergence truncation), restarts at the source's log
// start (clamped to the batch's base) and ends as a copy of the source's log.
func TestStraddleRestartsMirror(t *testing.T) {
	if got, want := plan.StraddleTruncation(0, 101, 0), (plan.Truncation{Full: true, Offset: 0, RestartAt: 0}); got != want {
		t.Fatalf("StraddleTruncation: %+v, want %+v", got, want)
	}
	if got, want := plan.StraddleTruncation(4, 101, 200), (plan.Truncation{Full: true, Offset: 4, RestartAt: 101}); got != want {
		t.Fatalf("StraddleTruncation with a source log start above the base: %+v, want %+v", got, want)
	}
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.mustProduce(20) // 0–19@0a
	a.lmles.Apply(a.lmleKey(), &twinlogv1.MirrorLmleRecord{StateEpoch: 1, Lmle: 0, SourceClusterId: b.id})
	// The stop that wrote LMLE 0 left A's LE above it (SPEC inv. 18).
	a.le++
	b.mustProduce(12) // 0–11@0b: the same epoch number, other records
	b.writable = false
	b.mirrorFrom(1, plan.Config{})
	b.checkState(plan.Mirroring)
	if len(b.log.recs) != 12 { // untouched by the no-op LMLE truncation
		t.Fatalf("B log after the LMLE step: %s", b.log)
	}
	b.step(plan.FetchStraddle{Session: b.session, BaseOffset: 10, LastOffset: 13, SourceLogStartOffset: 0})
	if b.log.LogEndOffset() != 0 || b.log.cache.Len() != 0 || b.truncations[len(b.truncations)-1] != plan.ReasonDivergence {
		t.Fatalf("after the straddling batch: log %q (LEO %d) cache %v truncations %v", b.log, b.log.LogEndOffset(), b.log.cache.Entries(), b.truncations)
	}
	b.step(plan.FetchStraddle{Session: b.session + 1, BaseOffset: 0, LastOffset: 3})
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	checkMirrorInvariants(t, b)
}

// TestLaterRunKeepsStricterTaint is sweep seed 729424 on the mirror
// leader: replica 3 carries a durable taint (0, 1) from an earlier run and
// has not fetched since, so its records from offset 1 on were never copied
// from the source. A later run with LMLE 1 (T 4) skips it again; the taint
// it installs must stay (0, 1): per (1, 4) the replica's next fetch would
// keep its own records in [1, 4).
func TestLaterRunKeepsStricterTaint(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 1
	a.mustProduce(4)
	a.lmles.Apply(a.lmleKey(), &twinlogv1.MirrorLmleRecord{StateEpoch: 1, Lmle: 1, SourceClusterId: b.id})
	b.le = 1
	b.mustProduce(4)
	b.lmles.Apply(b.lmleKey(), &twinlogv1.MirrorLmleRecord{StateEpoch: 1, Lmle: -1, SourceClusterId: a.id,
		Taints: []*twinlogv1.ReplicaTaint{{Replica: 3, Epoch: 0, Offset: 1}}})
	b.status = plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 3}, ISR: []twinlog.BrokerID{1}, MinInsyncReplicas: 1}
	b.writable = false
	b.mirrorFrom(1, plan.Config{})
	b.checkState(plan.Mirroring)
	if got := b.runRecord().GetLmleUsed(); got != 1 {
		t.Fatalf("lmleUsed %d, want 1", got)
	}
	if tt, ok := b.taints[3]; !ok || tt.Epoch != 0 || tt.Offset != 1 {
		t.Fatalf("installed taint of replica 3: %+v (%t), want (0, 1)", tt, ok)
	}
	got := b.lmleRecord().GetTaints()
	if len(got) != 1 || got[0].GetEpoch() != 0 || got[0].GetOffset() != 1 {
		t.Fatalf("durable taints %v, want replica 3 (0, 1)", got)
	}
}

// TestForeignEpochTrimsEmptyEpoch: when only an epoch without records
// starts at B's LEO (s = LEO), the foreign batch contradicts no record: B
// cuts at the LEO, which drops just that cache entry, keeps its records and
// refetches with its last record epoch.
func TestForeignEpochTrimsEmptyEpoch(t *testing.T) {
	c := cache(t, en(2, 0), en(7, 12))
	if got, want := plan.ForeignEpochTruncation(c, 0, 12, 5, 12, 0), (plan.Truncation{Offset: 12}); got != want {
		t.Fatalf("empty epoch at the LEO: %+v, want %+v", got, want)
	}
	if got, want := plan.ForeignEpochTruncation(c, 12, 12, 5, 12, 0), (plan.Truncation{Full: true, Offset: 12, RestartAt: 12}); got != want {
		t.Fatalf("empty log: %+v, want %+v", got, want)
	}
	// Records of epoch 7 in [12, 15): restart at the source's log start,
	// clamped to the offset it served from.
	if got, want := plan.ForeignEpochTruncation(c, 0, 15, 5, 15, 40), (plan.Truncation{Full: true, Offset: 0, RestartAt: 15}); got != want {
		t.Fatalf("records of a foreign epoch: %+v, want %+v", got, want)
	}
	if got := plan.ForeignEpochTruncation(c, 0, 15, 7, 15, 0); !got.NoOp {
		t.Fatalf("no epoch above: %+v, want NoOp", got)
	}
}

// TestCaughtUpIsThisRunsFetch: the source HW a log is caught up to comes
// from a fetch of the current run and leadership. Once B stopped and
// started mirroring again (a failback), its earlier run's Fetched must not
// make it caught up: its first fetch may still cut the log (a DivergingEpoch
// for records written after the stop), so stop --wait-for-catch-up waits
// for it, and the status shows no source HW or lag until then (two-cluster
// sweep seed 1950059 counted such a log as caught up and compared it).
func TestCaughtUpIsThisRunsFetch(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 1
	a.mustProduce(3)
	b.mirrorFrom(1, plan.Config{})
	b.fetchUntilIdle()
	if !b.m.CaughtUp() {
		t.Fatal("not caught up after copying the source")
	}
	b.stop()
	b.checkState(plan.Stopped)
	b.mirrorFrom(2, plan.Config{})
	b.checkState(plan.Mirroring)
	if b.m.CaughtUp() || b.m.Status().GetSourceHighWatermark() >= 0 {
		t.Fatalf("a new run is caught up before its first fetch (source HW %d)", b.m.Status().GetSourceHighWatermark())
	}
	b.step(plan.Stop{WaitForCatchUp: true, TimeoutMs: 500})
	b.checkState(plan.Mirroring)
	b.fetch()
	b.checkState(plan.Stopped)
}

// TestRepairedTwiceBeforeTheTaintIsWritten: a follower repaired twice while
// the record that taints it is still on its way (the run's MIRRORING write)
// is cleared only once a later write without its taint has landed: the
// second FollowerRepaired found the in-memory record already without the
// taint and cleared it at once, so the replica let the follower into the
// ISR while the record tainting it was yet to be written, and a new leader
// loading that record found a tainted replica in the ISR (§8.19;
// two-cluster sweep seed 10733293).
func TestRepairedTwiceBeforeTheTaintIsWritten(t *testing.T) {
	b := pendingWithThree(t, plan.Config{})
	te := twinlog.Epoch(b.runRecord().GetTruncationEpoch())
	b.status.FollowerAlignedEpoch = map[twinlog.BrokerID]twinlog.Epoch{2: te}
	b.holdWrites = true
	b.step(plan.ReplicaStatusChanged{Status: b.status}) // skips 3: tainted, its record held
	if _, ok := b.taints[3]; !ok {
		t.Fatalf("replica 3 not tainted: %v", b.taints)
	}
	b.step(plan.FollowerRepaired{Replica: 3})
	b.step(plan.FollowerRepaired{Replica: 3})
	if _, ok := b.taints[3]; !ok {
		t.Fatal("taint cleared while the record that taints the replica was still on its way")
	}
	b.releaseWrites()
	b.checkState(plan.Mirroring)
	if _, ok := b.taints[3]; ok || len(b.lmleRecord().GetTaints()) != 0 {
		t.Fatalf("taint not cleared once written: replica %v, record %v", b.taints, b.lmleRecord().GetTaints())
	}
}
