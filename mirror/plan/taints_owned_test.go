package plan_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

// lmleWrites returns the LMLE record writes in as.
func lmleWrites(as []plan.Action) []plan.WriteLmleRecord {
	var out []plan.WriteLmleRecord
	for _, a := range as {
		if w, ok := a.(plan.WriteLmleRecord); ok {
			out = append(out, w)
		}
	}
	return out
}

// TestTaintsOwnedAfterRewrite: SPEC §6.4, a new leader rewrites the state it
// resumes with its LE before acting on it. The LMLE record holds the taints;
// until the leadership's rewrite of it is acknowledged, a zombie's late write
// (an older stateEpoch, applied because nothing newer was there) could still
// change them, so TaintsOwned keeps the shell from serving follower fetches
// (simulator seed 1416997: the next leader loaded a taint of a replica the
// previous one had let into the ISR).
func TestTaintsOwnedAfterRewrite(t *testing.T) {
	taint := &twinlogv1.ReplicaTaint{Replica: 2, Epoch: 2, Offset: 59}
	loaded := &twinlogv1.MirrorLmleRecord{Lmle: 0, SourceClusterId: "a", LeaderEpochAfterStop: 2, LeoAtStop: 21, StateEpoch: 2,
		Taints: []*twinlogv1.ReplicaTaint{taint}}
	stopped := &twinlogv1.MirrorRunRecord{State: plan.Stopped, Generation: 1, LmleUsed: -1, TruncationEpoch: 1, LmleRecorded: 0, StateEpoch: 2}
	desired := plan.Desired{State: plan.Stopped, Generation: 1}

	t.Run("loaded records are rewritten first", func(t *testing.T) {
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Run: stopped, Lmle: loaded, Desired: desired})
		ws := lmleWrites(as)
		if len(ws) == 0 {
			t.Fatalf("no LMLE rewrite in %v", as)
		}
		want := proto.Clone(loaded).(*twinlogv1.MirrorLmleRecord)
		want.StateEpoch = 4
		if !proto.Equal(ws[0].Record, want) {
			t.Fatalf("rewrite %v, want the loaded record with stateEpoch 4: %v", ws[0].Record, want)
		}
		if m.TaintsOwned() {
			t.Fatal("taints owned before the rewrite is acknowledged")
		}
		// A failed write is reissued on Tick, still as the rewrite.
		stepOK(t, m, plan.WriteFailed{Seq: ws[0].Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
		as = stepOK(t, m, plan.Tick{NowMs: 100})
		ws = lmleWrites(as)
		if len(ws) != 1 || m.TaintsOwned() {
			t.Fatalf("after a failed rewrite and a tick: writes %v, owned %v", as, m.TaintsOwned())
		}
		stepOK(t, m, plan.WriteAcked{Seq: ws[0].Seq})
		if !m.TaintsOwned() {
			t.Fatal("taints not owned after the rewrite was acknowledged")
		}
		stepOK(t, m, plan.LostLeadership{})
		if m.TaintsOwned() {
			t.Fatal("taints owned after the leadership ended")
		}
	})

	t.Run("no records, nothing to own", func(t *testing.T) {
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Desired: plan.Desired{}})
		if len(lmleWrites(as)) != 0 || !m.TaintsOwned() {
			t.Fatalf("writes %v, owned %v", as, m.TaintsOwned())
		}
	})

	t.Run("an earlier leadership's rewrite does not count", func(t *testing.T) {
		m, _ := newMachine(t)
		old := lmleWrites(stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Run: stopped, Lmle: loaded, Desired: desired}))
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 6, Run: stopped, Lmle: loaded, Desired: desired})
		stepOK(t, m, plan.WriteAcked{Seq: old[0].Seq})
		if m.TaintsOwned() {
			t.Fatal("the LE-4 rewrite made LE 6's taints owned")
		}
		ws := lmleWrites(as)
		if len(ws) == 0 || ws[0].Record.GetStateEpoch() != 6 {
			t.Fatalf("LE 6 rewrite: %v", as)
		}
		stepOK(t, m, plan.WriteAcked{Seq: ws[0].Seq})
		if !m.TaintsOwned() {
			t.Fatal("taints not owned after LE 6's rewrite")
		}
	})

	t.Run("a step change keeps the rewrite tracked", func(t *testing.T) {
		m, _ := newMachine(t)
		as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 4, Run: stopped, Lmle: loaded, Desired: desired})
		ws := lmleWrites(as)
		// Start: a new run (beginStart resets the step and its writes).
		if err := m.Step(plan.Start{Generation: 2, SourceClusterID: "a"}); err != nil {
			t.Fatal(err)
		}
		m.Advance()
		stepOK(t, m, plan.WriteAcked{Seq: ws[0].Seq})
		if !m.TaintsOwned() {
			t.Fatal("the rewrite's ack was dropped with the step's writes")
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
		as = stepOK(t, m, plan.WriteAcked{Seq: ws[0].Seq})
		cleared := false
		for _, a := range as {
			if c, ok := a.(plan.ClearTaint); ok && c.Replica == 1 {
				cleared = true
			}
		}
		if !cleared || !m.TaintsOwned() {
			t.Fatalf("after the rewrite's ack: %v, owned %v", as, m.TaintsOwned())
		}
	})
}
