package replica

import (
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestDivergenceAtLEODropsEmptyEpoch: the simulator's seed 220 livelock. A
// replica that led epoch 3 without writing has cache entry (3, LEO). As a
// follower, the leader answers DivergingEpoch{1, LEO}: §4.4 truncates to
// the LEO, and truncateFromEnd(LEO) drops (3, 5). The machine must emit the
// truncation (so the shell's Log.TruncateTo(LEO) drops it on disk too) and
// fetch next with lastFetchedEpoch 1, not 3 again.
func TestDivergenceAtLEODropsEmptyEpoch(t *testing.T) {
	tp := twinlog.TopicPartition{Topic: "t", Partition: 0}
	r, err := New(Config{ID: 2, Partition: tp, ReplicaLagTimeMaxMs: 1000}, LogState{
		LogEndOffset: 5, HighWatermark: 5, AlignedEpoch: twinlog.NoEpoch,
		Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 5}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(PartitionState{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 1, Replicas: []twinlog.BrokerID{1, 2},
		ISR: []twinlog.BrokerID{1, 2}, MinISR: 1, Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 100, 2: 200}}, 0)
	r.Advance()
	ft, ok := r.NextFetch()
	if !ok || ft.Request.LastFetchedEpoch != 3 || ft.Request.FetchOffset != 5 {
		t.Fatalf("first fetch %+v", ft.Request)
	}
	r.HandleFetchResponse(FetchResponse{Request: ft.Request, LeaderEpoch: 4, HighWatermark: 5, LogEndOffset: 5,
		DivergingEpoch: &EpochEndOffset{Epoch: 1, EndOffset: 5}}, 0)
	rd := r.Ready()
	if want := []LogOp{{Kind: OpTruncate, Offset: 5}}; !slices.EqualFunc(rd.LogOps, want, func(a, b LogOp) bool { return a.String() == b.String() }) {
		t.Fatalf("log ops %v, want %v", rd.LogOps, want)
	}
	if want := []epoch.Entry{{Epoch: 1, StartOffset: 0}}; !rd.EpochsChanged || !slices.Equal(rd.EpochEntries, want) {
		t.Fatalf("epochs changed %v %v, want %v", rd.EpochsChanged, rd.EpochEntries, want)
	}
	r.Advance()
	r.CheckInvariants()
	if r.LogEndOffset() != 5 || r.HighWatermark() != 5 {
		t.Fatalf("LEO %d HW %d, want 5, 5", r.LogEndOffset(), r.HighWatermark())
	}
	ft, _ = r.NextFetch()
	if ft.Request.LastFetchedEpoch != 1 || ft.Request.FetchOffset != 5 {
		t.Fatalf("next fetch %+v, want last epoch 1 at 5", ft.Request)
	}
	// Truncating to the LEO with nothing to trim changes nothing.
	r.HandleFetchResponse(FetchResponse{Request: ft.Request, LeaderEpoch: 4, HighWatermark: 5, LogEndOffset: 5,
		DivergingEpoch: &EpochEndOffset{Epoch: 1, EndOffset: 5}}, 0)
	if rd := r.Ready(); len(rd.LogOps) != 0 || rd.EpochsChanged {
		t.Fatalf("no-op truncation at LEO produced %v (epochs changed %v)", rd.LogOps, rd.EpochsChanged)
	}
}

// TestAbortAlterPartition: a request the shell never sent is rolled back
// (Kafka's OPERATION_NOT_ATTEMPTED); other seqs are ignored.
func TestAbortAlterPartition(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.ctl.m = 2
	e.addNode(1, parseLog(t, ""), 0)
	e.addNode(2, parseLog(t, ""), 0)
	e.addNode(3, parseLog(t, ""), 0)
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2, 3}, []twinlog.BrokerID{1, 2}, 1, 1, 1
	e.push(e.ids())
	e.sendFetch(3, 0)
	e.deliverFetch(e.fetchQ[0])
	e.fetchQ = nil
	l := e.nodes[1].r
	if len(e.alters) != 1 || !l.AlterPartitionPending(e.alters[0].prop.Seq) {
		t.Fatalf("no expansion in flight: %v", e.alters)
	}
	seq := e.alters[0].prop.Seq
	if got := e.alters[0].prop.Request.GetMinInsyncReplicas(); got != 2 {
		t.Fatalf("request m %d, want 2", got)
	}
	l.AbortAlterPartition(seq+1, e.now)
	if !l.AlterPartitionPending(seq) {
		t.Fatal("abort of another seq dropped the in-flight change")
	}
	l.AbortAlterPartition(seq, e.now)
	e.processReady(e.nodes[1])
	if l.AlterPartitionPending(seq) || !slices.Equal(l.MaximalISR(), []twinlog.BrokerID{1, 2}) {
		t.Fatalf("after abort: pending %v maximal %v", l.AlterPartitionPending(seq), l.MaximalISR())
	}
}
