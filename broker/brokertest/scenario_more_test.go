package brokertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/broker/replica"
)

// The scenarios below force SPEC §9 interleavings through real brokers and
// the real controller with the harness's gates (gate.go): a follower's
// fetches held, passed only below an offset, or answered to the leader but
// lost on the way back (so the follower's HW lags), and AlterPartition held
// in flight. Nothing sleeps: every wait is WaitFor on observable state.

func pstatus(t *testing.T, c *Cluster, id twinlog.BrokerID, topic string) broker.PartitionStatus {
	t.Helper()
	b := c.Broker(id)
	if b == nil {
		t.Fatalf("broker %d is down", id)
	}
	st, ok := b.PartitionStatus(twinlog.TopicPartition{Topic: topic})
	if !ok {
		t.Fatalf("broker %d does not host %s-0", id, topic)
	}
	return st
}

func pstatusOK(c *Cluster, id twinlog.BrokerID, topic string) (broker.PartitionStatus, bool) {
	b := c.Broker(id)
	if b == nil {
		return broker.PartitionStatus{}, false
	}
	return b.PartitionStatus(twinlog.TopicPartition{Topic: topic})
}

func ids32(ids ...twinlog.BrokerID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	slices.Sort(out)
	return out
}

func sorted32(x []int32) []int32 { x = slices.Clone(x); slices.Sort(x); return x }

func sortedIDs(x []twinlog.BrokerID) []int32 { return ids32(x...) }

// followersInROrder returns the replicas of topic-0 other than leader, in
// replica-set order (the controller elects the first acceptable ISR member
// in that order, SPEC §3.4).
func followersInROrder(t *testing.T, c *Cluster, topic string, leader twinlog.BrokerID) []twinlog.BrokerID {
	t.Helper()
	_, _, _, rs, ok := c.PartitionInfo(topic, 0)
	if !ok {
		t.Fatalf("no metadata for %s", topic)
	}
	var out []twinlog.BrokerID
	for _, r := range rs {
		if twinlog.BrokerID(r) != leader {
			out = append(out, twinlog.BrokerID(r))
		}
	}
	return out
}

func values(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func lastFetch(c *Cluster, id twinlog.BrokerID, topic string, ok func(FetchRecord) bool) (FetchRecord, bool) {
	fs := c.Fetches(id, topic, 0)
	for i := len(fs) - 1; i >= 0; i-- {
		if ok(fs[i]) {
			return fs[i], true
		}
	}
	return FetchRecord{}, false
}

// TestS1LaggingReplicaWaitsForLESO drives SPEC S1 (KAFKA-7128) exactly: R
// [r1,r2,r3,r4], m 1, ISR {r1,r2,r4}, L r1; r1 LEO = HW = 10, r2 and r4
// LEO 10 with HW 5 (their answers carrying HW 10 are lost), r3 at 5 out of
// the ISR. r1 shuts down → L r2, LE + 1, LESO 10, HW 5 (r4 has not
// fetched in the new LE). r3 fetches at 5 (≥ HW, < LESO): NOT added. r4
// fetches → HW 10; r3 fetches at 10 → added.
func TestS1LaggingReplicaWaitsForLESO(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 4, MinISR: 1})
	c.CreateTopic("t", 1, 4, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r1, le1 := c.Leader("t", 0)
	fs := followersInROrder(t, c, "t", r1)
	// r2 precedes r4 in R: the controller elects it when r1 leaves.
	r2, r3, r4 := fs[0], fs[1], fs[2]
	for _, f := range fs {
		c.ReleaseFetches(f, "t", 0) // record their fetches
	}
	if off := c.MustProduce(ctx, "t", 0, -1, values("a", 5)...); off != 0 {
		t.Fatalf("first batch at %d", off)
	}
	c.WaitFor("every replica at LEO 5, HW 5", func() bool {
		for _, id := range c.IDs() {
			st, ok := pstatusOK(c, id, "t")
			if !ok || st.LogEndOffset != 5 || st.HighWatermark != 5 {
				return false
			}
		}
		return true
	})

	// r3 stops fetching and leaves the ISR (replica.lag.time.max.ms).
	c.HoldFetches(r3, "t", 0)
	c.WaitFor("r3 held and out of the ISR", func() bool {
		_, _, isr, _, ok := c.PartitionInfo("t", 0)
		return ok && c.FetchHeld(r3, "t", 0) && slices.Equal(sorted32(isr), ids32(r1, r2, r4))
	})

	// r2 and r4 fetch 5–9; their fetches at 10 move r1's HW to 10 but the
	// answers are lost, so they keep HW 5.
	c.BlindFetchFrom(r2, "t", 0, 10)
	c.BlindFetchFrom(r4, "t", 0, 10)
	if off := c.MustProduce(ctx, "t", 0, -1, values("b", 5)...); off != 5 {
		t.Fatalf("second batch at %d", off)
	}
	c.WaitFor("r2 and r4 held after a lost answer at 10", func() bool {
		return c.FetchHeld(r2, "t", 0) && c.FetchHeld(r4, "t", 0)
	})
	if st := pstatus(t, c, r1, "t"); st.LogEndOffset != 10 || st.HighWatermark != 10 {
		t.Fatalf("r1 LEO %d HW %d, want 10, 10", st.LogEndOffset, st.HighWatermark)
	}
	for _, f := range []twinlog.BrokerID{r2, r4} {
		if st := pstatus(t, c, f, "t"); st.LogEndOffset != 10 || st.HighWatermark != 5 {
			t.Fatalf("follower %d LEO %d HW %d, want 10, 5", f, st.LogEndOffset, st.HighWatermark)
		}
	}
	if st := pstatus(t, c, r3, "t"); st.LogEndOffset != 5 {
		t.Fatalf("r3 LEO %d, want 5", st.LogEndOffset)
	}

	// r1 leaves (controlled shutdown): r2 leads LE+1 from LEO 10, HW 5.
	c.StopBroker(r1)
	le2 := le1 + 1
	c.WaitFor("r2 leads the next LE", func() bool {
		st, ok := pstatusOK(c, r2, "t")
		return ok && st.Role == replica.RoleLeader && st.LeaderEpoch == le2
	})
	if st := pstatus(t, c, r2, "t"); st.LESO != 10 || st.HighWatermark != 5 || !slices.Equal(sortedIDs(st.ISR), ids32(r2, r4)) {
		t.Fatalf("new leader: LESO %d HW %d ISR %v, want 10, 5, {%d,%d}", st.LESO, st.HighWatermark, st.ISR, r2, r4)
	}

	// r3 fetches once at 5 (≥ HW 5, < LESO 10): it must not be added.
	c.FetchesUpTo(r3, "t", 0, 6)
	c.WaitFor("r3 fetched at 5 from r2 and is held at 10", func() bool {
		_, ok := lastFetch(c, r3, "t", func(r FetchRecord) bool {
			return r.Leader == c.nodeName(r2) && r.FetchOffset == 5 && r.CurrentLeaderEpoch == le2 && r.Err == nil && r.Error == pb.ErrorCode_ERROR_CODE_NONE
		})
		return ok && c.FetchHeld(r3, "t", 0)
	})
	st := pstatus(t, c, r2, "t")
	if slices.Contains(st.MaximalISR, r3) || st.HighWatermark != 5 {
		t.Fatalf("after r3's fetch at 5: maximal ISR %v HW %d; r3 must stay out below LESO 10 (KAFKA-7128)", st.MaximalISR, st.HighWatermark)
	}
	if got := pstatus(t, c, r3, "t").LogEndOffset; got != 10 {
		t.Fatalf("r3 LEO %d after its fetch, want 10", got)
	}

	// r4 fetches in LE+1 → HW 10; r3 (still unheard at 10) stays out.
	c.ReleaseFetches(r4, "t", 0)
	c.WaitFor("HW 10 on r2", func() bool { return pstatus(t, c, r2, "t").HighWatermark == 10 })
	if st := pstatus(t, c, r2, "t"); slices.Contains(st.MaximalISR, r3) {
		t.Fatalf("r3 in maximal ISR %v before fetching at 10", st.MaximalISR)
	}
	// r3 fetches at 10 = LESO = HW → added.
	c.ReleaseFetches(r3, "t", 0)
	c.WaitFor("r3 joins the ISR", func() bool {
		_, le, isr, _, ok := c.PartitionInfo("t", 0)
		return ok && le == le2 && slices.Equal(sorted32(isr), ids32(r2, r3, r4))
	})
	recs, hw := c.ConsumeAll(ctx, "t", 0)
	if hw != 10 || len(recs) != 10 {
		t.Fatalf("read %d records below HW %d, want 10", len(recs), hw)
	}
	for i, r := range recs {
		want := fmt.Sprintf("a%d", i)
		if i >= 5 {
			want = fmt.Sprintf("b%d", i-5)
		}
		if r.Offset != twinlog.Offset(i) || string(r.Value) != want || r.Epoch != le1 {
			t.Fatalf("record %d: offset %d epoch %d %q, want %q at epoch %d", i, r.Offset, r.Epoch, r.Value, want, le1)
		}
	}
}

// TestS9MaximalISR drives SPEC S9: L r1, ISR {r1,r2}, empty log; r3 has
// caught up (at 0) and the expansion {r1,r2,r3} is in flight (held before
// the controller). acks=all 0–9 is written, r2 reaches 10, r3 stays at 0 →
// HW 0 (the committed ISR would give 10). The expansion commits, r1 and r2
// die, r3 is elected: nothing acked is lost, because nothing was acked.
func TestS9MaximalISR(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 3, MinISR: 2, ReplicaLagTimeMax: 30 * time.Second,
		// AlterPartition is held in flight longer than the default 2 s.
		Configure: func(cfg *broker.Config) { cfg.RPCTimeout = 20 * time.Second }})
	c.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r1, _ := c.Leader("t", 0)
	fs := followersInROrder(t, c, "t", r1)
	r2, r3 := fs[0], fs[1]
	c.ReleaseFetches(r2, "t", 0)

	// r3 dies and is fenced out of the ISR.
	c.KillBroker(r3)
	c.WaitFor("ISR {r1,r2}", func() bool {
		_, _, isr, _, ok := c.PartitionInfo("t", 0)
		return ok && slices.Equal(sorted32(isr), ids32(r1, r2))
	})
	// r1 applies it too: otherwise its maximal ISR still holds r3 from
	// before the kill and the wait for the proposal below passes at once.
	c.WaitFor("r1 applied ISR {r1,r2}", func() bool {
		st, ok := pstatusOK(c, r1, "t")
		return ok && slices.Equal(sortedIDs(st.ISR), ids32(r1, r2)) && slices.Equal(sortedIDs(st.MaximalISR), ids32(r1, r2))
	})
	// r3 comes back; every fetch of it reaches r1 but no answer reaches r3,
	// so it stays at 0 while r1 proposes it (held before the controller).
	c.HoldAlterPartition(r1, true)
	c.SetFetchRule(r3, "t", 0, func(FetchInfo) FetchAction { return FetchBlind })
	c.RestartBroker(r3)
	c.WaitFor("r1 proposes {r1,r2,r3}", func() bool {
		st, ok := pstatusOK(c, r1, "t")
		return ok && slices.Contains(st.MaximalISR, r3)
	})

	type result struct {
		resp *pb.ProducePartitionResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := c.ProduceTo(ctx, r1, "t", 0, -1, 30*time.Second, values("v", 10)...)
		done <- result{r, err}
	}()
	c.WaitFor("r2 reports LEO 10 to r1", func() bool {
		_, ok := lastFetch(c, r2, "t", func(r FetchRecord) bool { return r.FetchOffset == 10 && r.Err == nil })
		return ok
	})
	st := pstatus(t, c, r1, "t")
	if st.LogEndOffset != 10 || st.HighWatermark != 0 || !slices.Equal(sortedIDs(st.ISR), ids32(r1, r2)) ||
		!slices.Equal(sortedIDs(st.MaximalISR), ids32(r1, r2, r3)) {
		t.Fatalf("r1: LEO %d HW %d ISR %v maximal %v; want 10, 0, {r1,r2}, {r1,r2,r3} (HW over the maximal ISR)",
			st.LogEndOffset, st.HighWatermark, st.ISR, st.MaximalISR)
	}
	select {
	case r := <-done:
		t.Fatalf("acks=all answered while r3 lags: %v %v", r.resp, r.err)
	default:
	}

	// The expansion commits; r3 is still at 0, so the HW stays 0.
	c.HoldAlterPartition(r1, false)
	c.WaitFor("ISR {r1,r2,r3} committed", func() bool {
		_, _, isr, _, ok := c.PartitionInfo("t", 0)
		return ok && slices.Equal(sorted32(isr), ids32(r1, r2, r3))
	})
	if st := pstatus(t, c, r1, "t"); st.HighWatermark != 0 {
		t.Fatalf("HW %d after the commit, want 0 (r3 at 0)", st.HighWatermark)
	}
	// Elect the just-added r3: r1 and r2 die.
	c.KillBroker(r1)
	c.KillBroker(r2)
	r := <-done
	if r.err == nil && r.resp.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("acks=all acknowledged at %d without r3", r.resp.GetBaseOffset())
	}
	c.SetFetchRule(r3, "t", 0, nil)
	c.WaitFor("r3 leads", func() bool {
		st, ok := pstatusOK(c, r3, "t")
		return ok && st.Role == replica.RoleLeader
	})
	if st := pstatus(t, c, r3, "t"); st.LogEndOffset != 0 || st.HighWatermark != 0 {
		t.Fatalf("r3 as leader: LEO %d HW %d, want 0, 0", st.LogEndOffset, st.HighWatermark)
	}
}

// TestS3FastLeaderChanges drives SPEC S3: R [r2,r1], m 1, ISR {r1,r2}, L
// r1, LE e; r1 `0-1@e`, r2 `0@e`, HW 1. PREFERRED → L r2, LE e+1; r2 writes
// `1@e+1`; r2 shuts down (controlled) → L r1, LE e+2, cache {e:0, e+2:2}.
// r2 restarts and fetches (2, last e+1) → DivergingEpoch (e, 2); its
// endOffsetFor(e) = (e, 1) → truncates to 1, copies `1@e`; both logs `0@e
// 1@e` and r2 rejoins (LEO 2 ≥ HW 2, ≥ LESO 2).
func TestS3FastLeaderChanges(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 2, MinISR: 1, ReplicaLagTimeMax: 30 * time.Second})
	c.CreateTopic("t", 1, 2, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, _, _, rs, _ := c.PartitionInfo("t", 0)
	r2, r1 := twinlog.BrokerID(rs[0]), twinlog.BrokerID(rs[1]) // r2 preferred
	// Start with r1 leading: move leadership off r2 and bring it back.
	if l, _ := c.Leader("t", 0); l == r2 {
		c.StopBroker(r2)
		c.WaitFor("r1 leads", func() bool { l, _, _, _, ok := c.PartitionInfo("t", 0); return ok && l == r1 })
		c.RestartBroker(r2)
	}
	c.WaitFor("ISR {r1,r2}, r1 leading", func() bool {
		l, _, isr, _, ok := c.PartitionInfo("t", 0)
		return ok && l == r1 && len(isr) == 2 && c.leaderReady("t", 0)
	})
	_, e := c.Leader("t", 0)
	c.ReleaseFetches(r2, "t", 0)
	if off := c.MustProduce(ctx, "t", 0, -1, []byte("x0")); off != 0 {
		t.Fatalf("offset %d, want 0", off)
	}
	c.WaitFor("r2 at LEO 1, HW 1", func() bool {
		st, ok := pstatusOK(c, r2, "t")
		return ok && st.LogEndOffset == 1 && st.HighWatermark == 1
	})
	c.HoldFetches(r2, "t", 0)
	c.HoldFetches(r1, "t", 0) // as follower of r2, r1 must not fetch (it would truncate)
	c.WaitFor("r2's fetcher held", func() bool { return c.FetchHeld(r2, "t", 0) })
	pr, err := c.ProduceTo(ctx, r1, "t", 0, 1, 5*time.Second, []byte("x1"))
	if err != nil || pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE || pr.GetBaseOffset() != 1 {
		t.Fatalf("acks=1 produce: %v %v", pr, err)
	}
	if st := pstatus(t, c, r1, "t"); st.LogEndOffset != 2 || st.HighWatermark != 1 {
		t.Fatalf("r1 LEO %d HW %d, want 2, 1", st.LogEndOffset, st.HighWatermark)
	}

	// PREFERRED → r2 leads LE e+1 from its log 0@e.
	el, err := c.Admin().ElectLeaders(ctx, &pb.ElectLeadersRequest{Type: pb.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions: []*pb.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}})
	if err != nil || len(el.GetResults()) != 1 || el.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("ElectLeaders PREFERRED: %v %v", el, err)
	}
	c.WaitFor("r2 leads LE e+1", func() bool {
		st, ok := pstatusOK(c, r2, "t")
		return ok && st.Role == replica.RoleLeader && st.LeaderEpoch == e+1
	})
	if st := pstatus(t, c, r2, "t"); st.LESO != 1 || st.LogEndOffset != 1 {
		t.Fatalf("r2 as leader: LESO %d LEO %d, want 1, 1", st.LESO, st.LogEndOffset)
	}
	pr, err = c.ProduceTo(ctx, r2, "t", 0, 1, 5*time.Second, []byte("y1"))
	if err != nil || pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE || pr.GetBaseOffset() != 1 {
		t.Fatalf("acks=1 produce to r2: %v %v", pr, err)
	}
	if got, want := c.LogString(r2, "t", 0), fmt.Sprintf("0@%dx 1@%dy", e, e+1); got != want {
		t.Fatalf("r2 log %q, want %q", got, want)
	}

	// r2 controlled shutdown → r1 leads LE e+2 with LESO 2, HW 2 (m 1).
	c.StopBroker(r2)
	c.WaitFor("r1 leads LE e+2", func() bool {
		st, ok := pstatusOK(c, r1, "t")
		return ok && st.Role == replica.RoleLeader && st.LeaderEpoch == e+2
	})
	c.WaitFor("r1 HW 2", func() bool { return pstatus(t, c, r1, "t").HighWatermark == 2 })
	if st := pstatus(t, c, r1, "t"); st.LESO != 2 || !slices.Equal(sortedIDs(st.ISR), ids32(r1)) {
		t.Fatalf("r1: LESO %d ISR %v, want 2, {r1}", st.LESO, st.ISR)
	}
	want := fmt.Sprintf("0@%dx 1@%dx", e, e)
	if got := c.LogString(r1, "t", 0); got != want {
		t.Fatalf("r1 log %q, want %q", got, want)
	}

	// r2 restarts cleanly and fetches (2, last e+1): DivergingEpoch (e, 2),
	// truncation to 1, `1@e` copied, then it rejoins.
	c.ReleaseFetches(r2, "t", 0)
	c.RestartBroker(r2)
	c.WaitFor("r2 rejoins the ISR with r1's log", func() bool {
		_, le, isr, _, ok := c.PartitionInfo("t", 0)
		return ok && le == e+2 && len(isr) == 2 && c.LogString(r2, "t", 0) == want
	})
	div, ok := lastFetch(c, r2, "t", func(r FetchRecord) bool { return r.DivergingEpoch != nil })
	if !ok {
		t.Fatalf("r2 never got a DivergingEpoch; fetches %v", c.Fetches(r2, "t", 0))
	}
	if div.Leader != c.nodeName(r1) || div.FetchOffset != 2 || div.LastFetchedEpoch != e+1 || div.CurrentLeaderEpoch != e+2 ||
		div.DivergingEpoch.GetEpoch() != int32(e) || div.DivergingEpoch.GetEndOffset() != 2 {
		t.Fatalf("diverging answer %v, want fetch(2, last %d) at LE %d → (%d, 2)", div, e+1, e+2, e)
	}
	// After the divergence r2 fetched from 1 (truncated) with last epoch e.
	if _, ok := lastFetch(c, r2, "t", func(r FetchRecord) bool {
		return r.FetchOffset == 1 && r.LastFetchedEpoch == e && r.Records == 1
	}); !ok {
		t.Fatalf("r2 did not refetch 1@%d after truncating to 1; fetches %v", e, c.Fetches(r2, "t", 0))
	}
	recs, hw := c.ConsumeAll(ctx, "t", 0)
	if hw != 2 || len(recs) != 2 || string(recs[0].Value) != "x0" || string(recs[1].Value) != "x1" {
		t.Fatalf("consumed %v below HW %d, want x0 x1", recs, hw)
	}
}
