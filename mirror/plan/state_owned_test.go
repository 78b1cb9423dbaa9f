package plan_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

// actionsOf returns the actions of type A in as.
func actionsOf[A plan.Action](as []plan.Action) []A {
	var out []A
	for _, a := range as {
		if x, ok := a.(A); ok {
			out = append(out, x)
		}
	}
	return out
}

func lmleWrites(as []plan.Action) []plan.WriteLmleRecord { return actionsOf[plan.WriteLmleRecord](as) }
func runWrites(as []plan.Action) []plan.WriteRunRecord   { return actionsOf[plan.WriteRunRecord](as) }

// TestStateOwnedAfterRewrite: SPEC §6.4, a new leader rewrites the state it
// resumes with its LE before acting on it, and StateOwned keeps the shell
// from serving follower fetches until both records are its own. The LMLE
// record holds the taints: a zombie's late write (an older stateEpoch,
// applied because nothing newer was there) could still change them
// (simulator seed 1416997). The run record holds the run's truncation
// epoch: a follower this leader answers counts as aligned with it, so an
// unaligned leader must first record its own decision (seed 1709687).
func TestStateOwnedAfterRewrite(t *testing.T) {
	taint := &twinlogv1.ReplicaTaint{Replica: 2, Epoch: 2, Offset: 59}
	loaded := &twinlogv1.MirrorLmleRecord{Lmle: 0, SourceClusterId: "a", LeaderEpochAfterStop: 2, LeoAtStop: 21, StateEpoch: 2,
		Taints: []*twinlogv1.ReplicaTaint{taint}}
	stopped := &twinlogv1.MirrorRunRecord{State: plan.Stopped, Generation: 1, LmleUsed: -1, TruncationEpoch: 1, LmleRecorded: 0, StateEpoch: 2}
	desired := plan.Desired{State: plan.Stopped, Generation: 1}

	t.Run("loaded records are rewritten first", func(t *testing.T) {
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Run: stopped, Lmle: loaded, Desired: desired})
		ws, rs := lmleWrites(as), runWrites(as)
		if len(ws) == 0 || len(rs) == 0 {
			t.Fatalf("no LMLE rewrite or run write in %v", as)
		}
		want := proto.Clone(loaded).(*twinlogv1.MirrorLmleRecord)
		want.StateEpoch = 4
		if !proto.Equal(ws[0].Record, want) {
			t.Fatalf("rewrite %v, want the loaded record with stateEpoch 4: %v", ws[0].Record, want)
		}
		if rs[0].Record.GetStateEpoch() != 4 || rs[0].Record.GetState() != plan.Stopped {
			t.Fatalf("run write %v, want the resumed STOPPED record in LE 4", rs[0].Record)
		}
		if m.StateOwned() {
			t.Fatal("state owned before any write is acknowledged")
		}
		// A failed write is reissued on Tick, still as the rewrite.
		stepOK(t, m, plan.WriteFailed{Seq: ws[0].Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
		as = stepOK(t, m, plan.Tick{NowMs: 100})
		ws = lmleWrites(as)
		if len(ws) != 1 || m.StateOwned() {
			t.Fatalf("after a failed rewrite and a tick: writes %v, owned %v", as, m.StateOwned())
		}
		stepOK(t, m, plan.WriteAcked{Seq: ws[0].Seq})
		if m.StateOwned() {
			t.Fatal("state owned before the run record is acknowledged")
		}
		stepOK(t, m, plan.WriteAcked{Seq: rs[0].Seq})
		if !m.StateOwned() {
			t.Fatal("state not owned after both writes were acknowledged")
		}
		stepOK(t, m, plan.LostLeadership{})
		if m.StateOwned() {
			t.Fatal("state owned after the leadership ended")
		}
	})

	t.Run("LMLE records are rewritten before run records", func(t *testing.T) {
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Run: stopped, Lmle: loaded, Desired: desired})
		ws, rs := lmleWrites(as), runWrites(as)
		// The run write fails first (it was queued earlier), then the
		// LMLE write behind it.
		stepOK(t, m, plan.WriteFailed{Seq: rs[0].Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
		stepOK(t, m, plan.WriteFailed{Seq: ws[0].Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
		as = stepOK(t, m, plan.Tick{NowMs: 100})
		var kinds []string
		for _, a := range as {
			switch a.(type) {
			case plan.WriteLmleRecord:
				kinds = append(kinds, "lmle")
			case plan.WriteRunRecord:
				kinds = append(kinds, "run")
			}
		}
		if len(kinds) != 2 || kinds[0] != "lmle" {
			t.Fatalf("rewrites %v, want the LMLE record first", kinds)
		}
	})

	// No record loaded: the leadership still writes an empty LMLE record of
	// its LE before it owns the taints, else a zombie's late write of an
	// earlier LE (with its taints) would land as the newest record and the
	// next leader would load taints of a replica this one let into the ISR
	// (simulator seed 1901841, §8.19).
	t.Run("no records: an empty record of its LE first", func(t *testing.T) {
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Desired: plan.Desired{}})
		ws := lmleWrites(as)
		want := &twinlogv1.MirrorLmleRecord{Lmle: -1, LeaderEpochAfterStop: -1, LeoAtStop: -1, StateEpoch: 4}
		if len(ws) != 1 || !proto.Equal(ws[0].Record, want) || len(runWrites(as)) != 0 {
			t.Fatalf("writes %v, want one empty LMLE record in LE 4 and no run record", as)
		}
		if m.StateOwned() {
			t.Fatal("state owned before the empty record was acknowledged")
		}
		stepOK(t, m, plan.WriteAcked{Seq: ws[0].Seq})
		if !m.StateOwned() {
			t.Fatal("state not owned after the empty record was acknowledged")
		}
	})

	t.Run("an earlier leadership's writes do not count", func(t *testing.T) {
		m, _ := newMachine(t)
		old := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Run: stopped, Lmle: loaded, Desired: desired})
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 6, Run: stopped, Lmle: loaded, Desired: desired})
		ackWrites(t, m, old)
		if m.StateOwned() {
			t.Fatal("LE 4's writes made LE 6's state owned")
		}
		if ws := lmleWrites(as); len(ws) == 0 || ws[0].Record.GetStateEpoch() != 6 {
			t.Fatalf("LE 6 rewrite: %v", as)
		}
		ackWrites(t, m, as)
		if !m.StateOwned() {
			t.Fatal("state not owned after LE 6's writes")
		}
	})

	t.Run("a step change keeps the first writes tracked", func(t *testing.T) {
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Run: stopped, Lmle: loaded, Desired: desired})
		// Start: a new run (beginStart resets the step and its writes).
		if err := m.Step(plan.Start{Generation: 2, SourceClusterID: "a"}); err != nil {
			t.Fatal(err)
		}
		m.Advance()
		ackWrites(t, m, as)
		if !m.StateOwned() {
			t.Fatal("the first writes' acks were dropped with the step's writes")
		}
	})

	t.Run("an unaligned leader records its stop before followers fetch", func(t *testing.T) {
		// Seed 1709687: the run truncated in LE 9 (lmleUsed 2); this
		// broker, never aligned with it (aligned_epoch −1), leads in LE 11
		// with desired STOPPED. Its STOPPING record keeps the existing
		// LMLE 3 (§6.7 step 3); until that record is durable, a follower
		// answered now would count as aligned for the LE-9 run while
		// holding this leader's records the truncation removed.
		pending := &twinlogv1.MirrorRunRecord{State: plan.Pending, Generation: 2, LmleUsed: 2, TruncationEpoch: 9, LmleRecorded: -1, StateEpoch: 9}
		lmle3 := &twinlogv1.MirrorLmleRecord{Lmle: 3, SourceClusterId: "b", LeaderEpochAfterStop: 5, LeoAtStop: 53, StateEpoch: 8}
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 11, Run: pending, Lmle: lmle3, Desired: plan.Desired{State: plan.Stopped, Generation: 2}})
		rs := runWrites(as)
		if len(rs) == 0 || rs[0].Record.GetState() != plan.Stopping || rs[0].Record.GetLmleRecorded() != 3 {
			t.Fatalf("first run write %v, want STOPPING with lmleRecorded 3", rs)
		}
		for _, w := range lmleWrites(as) {
			stepOK(t, m, plan.WriteAcked{Seq: w.Seq})
		}
		if m.StateOwned() {
			t.Fatal("state owned before the STOPPING record is acknowledged")
		}
		stepOK(t, m, plan.WriteAcked{Seq: rs[0].Seq})
		if !m.StateOwned() {
			t.Fatal("state not owned after the STOPPING record")
		}
	})

	t.Run("a tainted leader's own taint clears", func(t *testing.T) {
		// Broker 1 (the machine's) was tainted and then elected uncleanly:
		// kept, its taint would make the next leader cut it back to T while
		// it sits in the ISR (simulator seed 1702538: acked records lost
		// when it was elected again).
		own := proto.Clone(loaded).(*twinlogv1.MirrorLmleRecord)
		own.Taints = append(own.Taints, &twinlogv1.ReplicaTaint{Replica: 1, Epoch: -1, Offset: 0})
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Run: stopped, Lmle: own, Desired: desired})
		for _, a := range as {
			if at, ok := a.(plan.AddTaints); ok {
				for _, x := range at.Taints {
					if x.Replica == 1 {
						t.Fatalf("leader installs its own taint: %v", at)
					}
				}
			}
		}
		ws := lmleWrites(as)
		if len(ws) == 0 {
			t.Fatalf("no rewrite in %v", as)
		}
		if ts := ws[0].Record.GetTaints(); len(ts) != 1 || ts[0].GetReplica() != 2 {
			t.Fatalf("rewrite keeps taints %v, want only replica 2's", ts)
		}
		acked := stepOK(t, m, plan.WriteAcked{Seq: ws[0].Seq})
		cleared := false
		for _, a := range acked {
			if c, ok := a.(plan.ClearTaint); ok && c.Replica == 1 {
				cleared = true
			}
		}
		if !cleared {
			t.Fatalf("after the rewrite's ack: %v, want ClearTaint{1}", acked)
		}
	})
}
