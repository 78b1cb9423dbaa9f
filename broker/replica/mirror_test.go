package replica

import (
	"errors"
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestTaintClearWaitsForDurableWrite asserts SPEC §6.6 step 4's ordering:
// a fetch answered without DivergingEpoch repairs the follower's taint
// (Ready.TaintsCleared asks the shell to write it to __mirror_state), but
// the follower may join the ISR only once the shell confirms that write is
// durable (ConfirmTaintCleared). A re-taint before the confirmation wins.
func TestTaintClearWaitsForDurableWrite(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.addNode(1, parseLog(t, "0-3@1"), 4)
	e.addNode(2, parseLog(t, "0-1@1"), 2)
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2}, []twinlog.BrokerID{1}, 1, 2, 1
	e.ctl.m = 1
	e.push(e.ids())
	leader := e.nodes[1].r
	leader.SetTaint(2, Taint{Epoch: 1, Offset: 2})

	proposedWith2 := func() bool {
		for _, a := range e.alters {
			for _, m := range a.prop.Request.GetNewIsr() {
				if m.GetBrokerId() == 2 {
					return true
				}
			}
		}
		return false
	}
	// fetch(2, last 1): within the taint, answered with records; the
	// taint is repaired; then fetch(4): caught up, but not eligible yet.
	var cleared []twinlog.BrokerID
	for range 3 {
		ft, ok := e.nodes[2].r.NextFetch()
		if !ok {
			t.Fatal("follower has no fetch")
		}
		d := leader.HandleFollowerFetch(ft.Request, e.now)
		if d.DivergingEpoch != nil {
			t.Fatalf("diverging %v", d.DivergingEpoch)
		}
		if rd := leader.Ready(); len(rd.TaintsCleared) > 0 {
			cleared = append(cleared, rd.TaintsCleared...)
		}
		e.processReady(e.nodes[1])
		f := e.nodes[2]
		f.incoming = &memLog{start: e.nodes[1].log.start, recs: slices.Clone(e.nodes[1].log.recs)}
		var batches []BatchMeta
		if d.ReadUpTo > d.ReadFrom {
			batches = e.nodes[1].log.batches(d.ReadFrom, d.ReadUpTo)
		}
		f.r.HandleFetchResponse(FetchResponse{Request: ft.Request, Error: d.Error, LeaderEpoch: d.LeaderEpoch,
			HighWatermark: d.HighWatermark, LogStartOffset: d.LogStartOffset, LogEndOffset: d.LogEndOffset, Batches: batches}, e.now)
		e.processReady(f)
		f.incoming = nil
	}
	if !slices.Equal(cleared, []twinlog.BrokerID{2}) {
		t.Fatalf("TaintsCleared %v, want [2] once", cleared)
	}
	if got := e.nodes[2].r.LogEndOffset(); got != 4 {
		t.Fatalf("follower LEO %d, want 4", got)
	}
	if _, tainted := leader.Taints()[2]; tainted {
		t.Fatal("taint still shapes fetch answers after the repair")
	}
	if proposedWith2() || slices.Contains(leader.MaximalISR(), 2) {
		t.Fatalf("follower proposed for the ISR before its cleared taint is durable: %v", leader.MaximalISR())
	}
	if got := leader.TaintsClearing(); !slices.Equal(got, []twinlog.BrokerID{2}) {
		t.Fatalf("clearing %v, want [2]", got)
	}

	// Re-tainted before the confirmation (a new run): the confirmation of
	// the old clear no longer admits it.
	leader.SetTaint(2, Taint{Epoch: 1, Offset: 4})
	leader.ConfirmTaintCleared(2, e.now)
	e.processReady(e.nodes[1])
	if proposedWith2() {
		t.Fatal("re-tainted follower proposed for the ISR")
	}

	// Repaired again, then confirmed: now it joins.
	ft, _ := e.nodes[2].r.NextFetch()
	e.deliverFetch(queuedFetch{from: 2, target: ft})
	if proposedWith2() {
		t.Fatal("proposed before the second confirmation")
	}
	leader.ConfirmTaintCleared(2, e.now)
	e.processReady(e.nodes[1])
	if !proposedWith2() || !slices.Contains(leader.MaximalISR(), 2) {
		t.Fatalf("not proposed after the confirmation: maximal ISR %v", leader.MaximalISR())
	}
	if len(leader.TaintsClearing()) != 0 {
		t.Fatalf("clearing %v after confirmation", leader.TaintsClearing())
	}
}

// TestTruncateFullyAsLeaderRestartsInsideLog: an OFFSET_OUT_OF_RANGE full
// truncation restarts the leader's log empty at the source's log start even
// when that offset lies inside the local log (SPEC §6.3): a cut there would
// keep the local records below it, which the source no longer vouches for.
func TestTruncateFullyAsLeaderRestartsInsideLog(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.addNode(1, parseLog(t, "0-5@1"), 6)
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1}, []twinlog.BrokerID{1}, 1, 2, 1
	e.ctl.m = 1
	e.push(e.ids())
	l := e.nodes[1].r
	l.SetMirrorPartition(true)
	l.SetWritable(false)
	e.processReady(e.nodes[1])
	if err := l.TruncateFullyAsLeader(3, e.now); err != nil {
		t.Fatal(err)
	}
	rd := l.Ready()
	if len(rd.LogOps) != 1 || rd.LogOps[0].Kind != OpRestart || rd.LogOps[0].Offset != 3 {
		t.Fatalf("log ops %v, want [restart at 3]", rd.LogOps)
	}
	e.processReady(e.nodes[1])
	if l.LogStartOffset() != 3 || l.LogEndOffset() != 3 || l.HighWatermark() != 3 || len(l.EpochEntries()) != 0 {
		t.Fatalf("logStart %d LEO %d HW %d epochs %v, want 3 3 3 []", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.EpochEntries())
	}
	if n := len(e.nodes[1].log.recs); n != 0 || e.nodes[1].log.start != 3 {
		t.Fatalf("local log start %d with %d records, want empty at 3", e.nodes[1].log.start, n)
	}
	// Copying resumes at the source's log start.
	if err := l.AppendAsMirrorLeader([]BatchMeta{{BaseOffset: 3, LastOffset: 4, Epoch: 2}}, e.now); err != nil {
		t.Fatal(err)
	}
	// The plain TruncateAsLeader at the same offset only cuts.
	e2 := newEnv(1000)
	e2.quiet = true
	e2.addNode(1, parseLog(t, "0-5@1"), 6)
	e2.ctl.replicas, e2.ctl.isr, e2.ctl.leader, e2.ctl.le, e2.ctl.pe = []twinlog.BrokerID{1}, []twinlog.BrokerID{1}, 1, 2, 1
	e2.ctl.m = 1
	e2.push(e2.ids())
	if err := e2.nodes[1].r.TruncateAsLeader(3, e2.now); err != nil {
		t.Fatal(err)
	}
	e2.processReady(e2.nodes[1])
	if r := e2.nodes[1].r; r.LogStartOffset() != 0 || r.LogEndOffset() != 3 {
		t.Fatalf("cut: logStart %d LEO %d, want 0 3", r.LogStartOffset(), r.LogEndOffset())
	}
}

// TestTaintsPendingHoldsFollowerFetches asserts SPEC §6.4 "Leaders of
// once-mirrored topics load the taints before serving follower fetches": a
// new leader whose taints are not loaded answers FOLLOWER fetches
// UNKNOWN_LEADER_EPOCH and notes nothing (no follower LEO, alignment, taint
// repair, HW or ISR change), and the follower backs off without truncating.
// CONSUMER fetches are served. Once loaded, a taint gives §4.3 step 4's
// DivergingEpoch; no taint, a normal answer.
func TestTaintsPendingHoldsFollowerFetches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taint *Taint
	}{
		{name: "loaded-none"},
		{name: "loaded-taint", taint: &Taint{Epoch: 1, Offset: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(1000)
			e.quiet = true
			e.addNode(1, parseLog(t, "0-3@1"), 4)
			e.addNode(2, parseLog(t, "0-3@1"), 4)
			e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2}, []twinlog.BrokerID{1}, 1, 2, 1
			e.ctl.m = 1
			e.push(e.ids())
			leader, follower := e.nodes[1].r, e.nodes[2].r
			follower.SetTaintsPending(true)
			if follower.TaintsPending() {
				t.Fatal("a follower took taints-pending")
			}
			leader.SetTaintsPending(true)
			e.processReady(e.nodes[1])
			hw := leader.HighWatermark()

			ft, ok := follower.NextFetch()
			if !ok {
				t.Fatal("follower has no fetch")
			}
			d := leader.HandleFollowerFetch(ft.Request, e.now)
			if d.Error != pb.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH || d.DivergingEpoch != nil || d.ReadUpTo != d.ReadFrom {
				t.Fatalf("pending: error %v diverging %v read [%d,%d), want UNKNOWN_LEADER_EPOCH, no records",
					d.Error, d.DivergingEpoch, d.ReadFrom, d.ReadUpTo)
			}
			if rd := leader.Ready(); rd.AlterPartition != nil || len(rd.TaintsCleared) > 0 || rd.HighWatermark != nil {
				t.Fatalf("pending fetch changed leader state: %+v", rd)
			}
			if got := leader.FollowerAlignedEpoch(2); got != twinlog.NoEpoch {
				t.Fatalf("follower aligned in LE %d while pending", got)
			}
			if !slices.Equal(leader.MaximalISR(), []twinlog.BrokerID{1}) || leader.HighWatermark() != hw {
				t.Fatalf("pending: maximal ISR %v HW %d", leader.MaximalISR(), leader.HighWatermark())
			}
			follower.HandleFetchResponse(FetchResponse{Request: ft.Request, Error: d.Error, LeaderEpoch: d.LeaderEpoch,
				HighWatermark: d.HighWatermark, LogStartOffset: d.LogStartOffset, LogEndOffset: d.LogEndOffset}, e.now)
			if rd := follower.Ready(); len(rd.LogOps) > 0 || follower.LogEndOffset() != 4 {
				t.Fatalf("follower acted on UNKNOWN_LEADER_EPOCH: ops %v LEO %d", rd.LogOps, follower.LogEndOffset())
			}
			e.processReady(e.nodes[2])
			next, _ := follower.NextFetch()
			if next.Request.Seq != ft.Request.Seq+1 {
				t.Fatalf("refetch seq %d, want %d", next.Request.Seq, ft.Request.Seq+1)
			}
			if next.Request.Seq = ft.Request.Seq; next.Request != ft.Request {
				t.Fatalf("refetch %+v, want the same %+v but for Seq", next.Request, ft.Request)
			}
			c := leader.HandleFollowerFetch(FetchRequest{ReplicaID: twinlog.NoBroker, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
				FetchOffset: 0, CurrentLeaderEpoch: 2, LastFetchedEpoch: twinlog.NoEpoch}, e.now)
			if c.Error != errNone || c.ReadUpTo != hw {
				t.Fatalf("consumer while pending: %v up to %d, want NONE up to %d", c.Error, c.ReadUpTo, hw)
			}

			// The shell loads the taints, then clears pending.
			if tc.taint != nil {
				leader.SetTaint(2, *tc.taint)
			}
			leader.SetTaintsPending(false)
			e.processReady(e.nodes[1])
			ft, _ = follower.NextFetch()
			d = leader.HandleFollowerFetch(ft.Request, e.now)
			if tc.taint != nil {
				want := EpochEndOffset{Epoch: tc.taint.Epoch, EndOffset: tc.taint.Offset}
				if d.Error != errNone || d.DivergingEpoch == nil || *d.DivergingEpoch != want {
					t.Fatalf("tainted: error %v diverging %v, want DivergingEpoch %v", d.Error, d.DivergingEpoch, want)
				}
				if leader.HasReady() && len(leader.Ready().TaintsCleared) > 0 {
					t.Fatal("taint cleared by a diverging answer")
				}
				e.processReady(e.nodes[1])
				// Resent: the leader refuses a Seq it has evaluated.
				ft, _ = follower.NextFetch()
				e.deliverFetch(queuedFetch{from: 2, target: ft}) // truncates to T
				if got := follower.LogEndOffset(); got != tc.taint.Offset {
					t.Fatalf("follower LEO %d after DivergingEpoch, want %d", got, tc.taint.Offset)
				}
				if slices.Contains(leader.MaximalISR(), 2) {
					t.Fatalf("tainted follower in maximal ISR %v", leader.MaximalISR())
				}
				return
			}
			if d.Error != errNone || d.DivergingEpoch != nil || d.ReadUpTo != leader.LogEndOffset() {
				t.Fatalf("untainted: error %v diverging %v up to %d", d.Error, d.DivergingEpoch, d.ReadUpTo)
			}
			e.processReady(e.nodes[1])
			if !slices.Contains(leader.MaximalISR(), 2) || leader.FollowerAlignedEpoch(2) != 2 {
				t.Fatalf("caught-up follower: maximal ISR %v aligned %d, want joined in LE 2", leader.MaximalISR(), leader.FollowerAlignedEpoch(2))
			}
		})
	}
}

// TestTaintsPendingClearsOnLeadershipLoss: the state is leader-only.
func TestTaintsPendingClearsOnLeadershipLoss(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.addNode(1, parseLog(t, "0-3@1"), 4)
	e.addNode(2, parseLog(t, "0-3@1"), 4)
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2}, []twinlog.BrokerID{1, 2}, 1, 2, 1
	e.push(e.ids())
	e.nodes[1].r.SetTaintsPending(true)
	e.processReady(e.nodes[1])
	e.ctl.leader, e.ctl.le, e.ctl.pe = 2, 3, 2
	e.push(e.ids())
	if e.nodes[1].r.TaintsPending() {
		t.Fatal("taints still pending after losing leadership")
	}
}

// TestResetTaintsReplacesStaleTaints: the simulator's seeds 312 and 101
// (SPEC §6.4, §6.6 step 4, §8.7). Broker 1 led with a taint of replica 2
// that another leader durably cleared since; the metadata it applies jumps
// straight to its next leadership (LE 2 → 4), so it never saw itself lose
// leadership and still holds the taint. Leading again it would answer ISR
// member 2 OFFSET_OUT_OF_RANGE (taint epoch −1) and cut it below the HW.
// The runner installs the loaded record's taints (none): the fetch is
// answered normally. ResetTaints also settles in-memory clears: durably
// clear (not in the record) joins the ISR, re-tainted does not.
func TestResetTaintsReplacesStaleTaints(t *testing.T) {
	e := taintedLeaderEnv(t)
	leader := e.nodes[1].r
	e.ctl.le, e.ctl.pe = 4, 2
	e.push(e.ids())
	if _, ok := leader.Taints()[2]; !ok || leader.Role() != RoleLeader || leader.LeaderEpoch() != 4 {
		t.Fatalf("setup: role %v LE %d taints %v", leader.Role(), leader.LeaderEpoch(), leader.Taints())
	}
	ft2, _ := e.nodes[2].r.NextFetch()
	if d := leader.HandleFollowerFetch(ft2.Request, e.now); d.Error != errOutOfRange {
		t.Fatalf("stale taint: fetch answered %v, want OFFSET_OUT_OF_RANGE (the bug's cut)", d.Error)
	}
	// Replica 3 repairs its taint in memory (fetch within (1, 4)): clearing.
	e.sendFetch(3, 0)
	e.deliverFetch(e.fetchQ[0])
	e.fetchQ = nil
	if got := leader.TaintsClearing(); !slices.Equal(got, []twinlog.BrokerID{3}) {
		t.Fatalf("clearing %v, want [3]", got)
	}

	// The loaded record holds no taint: 2 is answered normally, 3 is
	// durably clear and joins the ISR.
	leader.ResetTaints(nil, e.now)
	e.processReady(e.nodes[1])
	if len(leader.Taints()) != 0 || len(leader.TaintsClearing()) != 0 {
		t.Fatalf("after reset: taints %v clearing %v", leader.Taints(), leader.TaintsClearing())
	}
	if !slices.Contains(leader.MaximalISR(), 3) {
		t.Fatalf("durably cleared replica 3 not proposed: maximal ISR %v", leader.MaximalISR())
	}
	e.deliverFetch(queuedFetch{from: 2, target: ft2})
	if got := e.nodes[2].r.LogEndOffset(); got != 4 {
		t.Fatalf("ISR member 2 cut to %d, want 4 kept", got)
	}

	// A record that still holds a cleared taint taints the replica again.
	e.answerAlter(errNone, false, false)
	e.ctl.isr = []twinlog.BrokerID{1, 2}
	e.ctl.pe++
	e.push(e.ids())
	leader.SetTaint(3, Taint{Epoch: 1, Offset: 4})
	e.sendFetch(3, 0)
	e.deliverFetch(e.fetchQ[0])
	e.fetchQ = nil
	leader.ResetTaints(map[twinlog.BrokerID]Taint{3: {Epoch: 1, Offset: 4}}, e.now)
	e.processReady(e.nodes[1])
	if _, ok := leader.Taints()[3]; !ok || len(leader.TaintsClearing()) != 0 || slices.Contains(leader.MaximalISR(), 3) {
		t.Fatalf("re-tainted: taints %v clearing %v maximal ISR %v", leader.Taints(), leader.TaintsClearing(), leader.MaximalISR())
	}
}

// TestTaintsDroppedOnLeadershipLoss: taints are leader state (a copy of the
// durable ones, which another leader may clear); a replica that stops
// leading drops them and any clear awaiting its write.
func TestTaintsDroppedOnLeadershipLoss(t *testing.T) {
	e := taintedLeaderEnv(t)
	l := e.nodes[1].r
	e.sendFetch(3, 0) // repairs 3 in memory
	e.deliverFetch(e.fetchQ[0])
	e.fetchQ = nil
	if len(l.Taints()) != 1 || len(l.TaintsClearing()) != 1 {
		t.Fatalf("setup: taints %v clearing %v", l.Taints(), l.TaintsClearing())
	}
	e.ctl.leader, e.ctl.le, e.ctl.pe = 2, 3, 2
	e.push(e.ids())
	if len(l.Taints()) != 0 || len(l.TaintsClearing()) != 0 {
		t.Fatalf("after losing leadership: taints %v clearing %v", l.Taints(), l.TaintsClearing())
	}
}

// TestAddRunTaintsRefusesMaximalISR: a run's taints (SPEC §6.6 step 4) are
// installed only if none names a member of the maximal ISR. A follower whose
// expansion is in flight may be committed by the controller whatever the
// leader learns later (§3.6), and a tainted ISR member breaks §8.19 (and a
// later leader loading the taint would cut it below the HW, §8.7).
func TestAddRunTaintsRefusesMaximalISR(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.addNode(1, parseLog(t, "0-3@1"), 4)
	e.addNode(2, parseLog(t, "0-1@1"), 2)
	e.addNode(3, parseLog(t, "0@1"), 1)
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2, 3}, []twinlog.BrokerID{1}, 1, 2, 1
	e.ctl.m = 1
	e.push(e.ids())
	leader := e.nodes[1].r
	for range 3 {
		if slices.Contains(leader.MaximalISR(), 2) {
			break
		}
		ft, ok := e.nodes[2].r.NextFetch()
		if !ok {
			t.Fatal("follower 2 has no fetch")
		}
		e.deliverFetch(queuedFetch{from: 2, target: ft})
	}
	if !leader.AlterPartitionInFlight() || !slices.Equal(leader.MaximalISR(), []twinlog.BrokerID{1, 2}) || !slices.Equal(leader.ISR(), []twinlog.BrokerID{1}) {
		t.Fatalf("want expansion [1 2] in flight; committed %v, maximal %v", leader.ISR(), leader.MaximalISR())
	}

	tests := []struct {
		name        string
		taints      []twinlog.BrokerID
		wantRefused []twinlog.BrokerID
		wantTaints  []twinlog.BrokerID // installed after the call
	}{
		{"member of the expansion in flight", []twinlog.BrokerID{2, 3}, []twinlog.BrokerID{2}, nil},
		{"committed member", []twinlog.BrokerID{1}, []twinlog.BrokerID{1}, nil},
		{"outside the maximal ISR", []twinlog.BrokerID{3}, nil, []twinlog.BrokerID{3}},
	}
	for _, tt := range tests {
		ts := map[twinlog.BrokerID]Taint{}
		for _, id := range tt.taints {
			ts[id] = Taint{Epoch: 1, Offset: 4}
		}
		refused := leader.AddRunTaints(ts)
		var got []twinlog.BrokerID
		for id := range leader.Taints() {
			got = append(got, id)
		}
		slices.Sort(got)
		if !slices.Equal(refused, tt.wantRefused) || !slices.Equal(got, tt.wantTaints) {
			t.Errorf("%s: refused %v, taints %v; want %v, %v", tt.name, refused, got, tt.wantRefused, tt.wantTaints)
		}
	}
}

// TestMirrorAppendEpochBelowCacheRefused: the mirror leader's guard behind
// plan.FetchedBatches (simulator two-cluster seed 432, SPEC §6.8). A batch
// whose epoch is below the latest cached epoch, or below an earlier batch's
// of the same append, would make the log's epochs go back, which storage
// refuses ("batch at 12 has epoch 0 after epoch 2") and the broker answers
// by taking the partition offline; AppendAsMirrorLeader rejects it with
// ErrInvalidBatch and changes nothing. Epochs at or above the latest append.
func TestMirrorAppendEpochBelowCacheRefused(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.addNode(1, parseLog(t, "0-11@2"), 12)
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1}, []twinlog.BrokerID{1}, 1, 7, 1
	e.ctl.m = 1
	l := e.nodes[1].r
	l.SetMirrorPartition(true) // before leadership: no (7, 12) entry of its own
	l.SetWritable(false)
	e.push(e.ids())
	e.processReady(e.nodes[1])
	for _, bad := range [][]BatchMeta{
		{{BaseOffset: 12, LastOffset: 14, Epoch: 0}},
		{{BaseOffset: 12, LastOffset: 13, Epoch: 3}, {BaseOffset: 14, LastOffset: 14, Epoch: 2}},
	} {
		if err := l.AppendAsMirrorLeader(bad, e.now); !errors.Is(err, ErrInvalidBatch) {
			t.Fatalf("append %v: err %v, want ErrInvalidBatch", bad, err)
		}
		if rd := l.Ready(); len(rd.LogOps) != 0 || l.LogEndOffset() != 12 || !slices.Equal(l.EpochEntries(), []epoch.Entry{{Epoch: 2, StartOffset: 0}}) {
			t.Fatalf("append %v changed the log: ops %v LEO %d epochs %v", bad, rd.LogOps, l.LogEndOffset(), l.EpochEntries())
		}
		l.Advance()
	}
	if err := l.AppendAsMirrorLeader([]BatchMeta{{BaseOffset: 12, LastOffset: 14, Epoch: 2}, {BaseOffset: 15, LastOffset: 15, Epoch: 4}}, e.now); err != nil {
		t.Fatal(err)
	}
	if want := []epoch.Entry{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 15}}; !slices.Equal(l.EpochEntries(), want) || l.LatestEpoch() != 4 {
		t.Fatalf("epochs %v latest %d, want %v", l.EpochEntries(), l.LatestEpoch(), want)
	}
}

// taintedLeaderEnv: replicas {1, 2, 3} with log [0-3@1], leader 1 in LE 2,
// ISR {1, 2}; the leader taints ISR member 2 fully (epoch −1) and 3 at
// (1, 4).
func taintedLeaderEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(1000)
	e.quiet = true
	for _, id := range []twinlog.BrokerID{1, 2, 3} {
		e.addNode(id, parseLog(t, "0-3@1"), 4)
	}
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2, 3}, []twinlog.BrokerID{1, 2}, 1, 2, 1
	e.push(e.ids())
	e.nodes[1].r.SetTaint(2, Taint{Epoch: twinlog.NoEpoch, Offset: 0})
	e.nodes[1].r.SetTaint(3, Taint{Epoch: 1, Offset: 4})
	return e
}
