package brokertest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/state"
)

func topicID(t *testing.T, c *Cluster, topic string) string {
	t.Helper()
	id := c.IDs()[0]
	for _, b := range c.IDs() {
		if c.Running(b) {
			id = b
			break
		}
	}
	resp, err := c.FetchClient(id).Metadata(t.Context(), &pb.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(resp.GetTopics()) != 1 {
		t.Fatalf("metadata %s: %v %v", topic, resp, err)
	}
	return resp.GetTopics()[0].GetTopicId()
}

// stateRecords reads topic-0's __mirror_state keys through a running broker.
func stateRecords(t *testing.T, c *Cluster, mirror, topic, id string) (*pb.MirrorRunRecord, *pb.MirrorLmleRecord, bool) {
	t.Helper()
	for _, b := range c.IDs() {
		if !c.Running(b) {
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		run, lmle, err := c.Broker(b).MirrorStateRecords(ctx, mirror, twinlog.TopicPartition{Topic: topic, Partition: 0}, id)
		cancel()
		return run, lmle, err == nil
	}
	return nil, nil, false
}

// m7Setup plays M7 up to A's failback (SPEC §10 M7): A's old leader holds
// 2-3@2a that nobody else has, B failed over and wrote 2-3@2b, A mirrors B
// ("back") with the old leader down, skipped and tainted (1, 2). It
// returns the old leader (stopped), B's log and the old leader's taint.
func m7Setup(t *testing.T, ctx context.Context, a, b *Cluster) (twinlog.BrokerID, string, *pb.ReplicaTaint) {
	t.Helper()
	a.CreateTopic("t", 1, 3, nil)
	writes(ctx, a, "t", "a0")
	leaderChange(a, "t")
	writes(ctx, a, "t", "a1")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(b, "t", "0@0a 1@1a")

	leaderChange(a, "t")
	a.Unreachable(b)
	old, _ := a.Leader("t", 0)
	for _, id := range a.IDs() {
		if id != old {
			a.Cut(old, id)
		}
	}
	for _, v := range []string{"a2", "a3"} {
		if r, err := a.ProduceTo(ctx, old, "t", 0, 1, time.Second, []byte(v)); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("produce on isolated leader: %v %v", r, err)
		}
	}
	mustStop(b, "m", "t")
	writes(ctx, b, "t", "b2", "b3")
	wantB := "0@0a 1@1a 2@2b 3@2b"
	waitLog(b, "t", wantB)

	a.StopBroker(old)
	for _, id := range a.IDs() {
		if id != old {
			a.Heal(old, id)
		}
	}
	a.Reachable(b)
	a.CreateMirror("back", b, "t")
	st := a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if ts := st.GetTaints(); len(ts) != 1 || twinlog.BrokerID(ts[0].GetReplica()) != old {
		t.Fatalf("taints %v, want one for %d", ts, old)
	}
	waitLog(a, "t", wantB)
	return old, wantB, st.GetTaints()[0]
}

// TestMirrorTombstonesAndTaintsAfterDeleteMirror covers SPEC §6.4's
// tombstones and the taints of once-mirrored topics. M7's setup (A's old
// leader holds 2-3@2a, skipped by A's failback from B and tainted (1, 2));
// then A stops and deletes its mirror: the run key is tombstoned, the LMLE
// key (taint included) stays; A's leader moves, and the new leader of the
// once-mirrored topic still loads the taint, so the old leader rejoining as
// a follower is cut back to B's records instead of joining the ISR with its
// own records of the same epoch number. Finally deleting the topic
// tombstones the LMLE key as well.
func TestMirrorTombstonesAndTaintsAfterDeleteMirror(t *testing.T) {
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw, MinISR: 2, ReplicaLagTimeMax: 5 * time.Second})
	b := NewCluster(t, Options{Cluster: "b", Network: nw})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	old, _, taint := m7Setup(t, ctx, a, b)

	// Stop and delete A's mirror: run key tombstoned, LMLE key kept.
	mustStop(a, "back", "t")
	if resp, err := a.MirrorAdmin().DeleteMirror(ctx, &pb.DeleteMirrorRequest{Name: "back"}); err != nil || resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("DeleteMirror: %v %v", resp, err)
	}
	id := topicID(t, a, "t")
	a.WaitFor("run key tombstoned", func() bool {
		run, lmle, ok := stateRecords(t, a, "back", "t", id)
		return ok && run == nil && lmle != nil
	})
	// The taint the failback wrote survives, whatever it is: (1, 2) when B
	// answered A's LMLE query with 1, as it does here alone; CI (under
	// load) once saw A's run get −1 and taint (−1, 0), which this check,
	// hard-coding (1, 2), failed. Why B answered −1 there is not
	// established (a stop by an unaligned B leader records −1, SPEC §6.7
	// step 3); the property tested is that DeleteMirror keeps the taint.
	_, lmle, _ := stateRecords(t, a, "back", "t", id)
	if ts := lmle.GetTaints(); len(ts) != 1 || twinlog.BrokerID(ts[0].GetReplica()) != old ||
		ts[0].GetEpoch() != taint.GetEpoch() || ts[0].GetOffset() != taint.GetOffset() {
		t.Fatalf("LMLE record after DeleteMirror %v: taint %v lost", lmle, taint)
	}
	// The once-mirrored topic is writable.
	writes(ctx, a, "t", "a4")

	// A new leader (not the tainted one) must load the taint.
	cur, le := a.Leader("t", 0)
	a.StopBroker(cur)
	a.WaitFor("a new leader", func() bool {
		l, e, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l >= 0 && l != cur && l != old && e > le && a.leaderReady("t", 0)
	})
	a.RestartBroker(cur)
	a.RestartBroker(old)
	wantA := "0@0a 1@1a 2@2b 3@2b 4@"
	a.WaitFor("all replicas identical, old leader repaired", func() bool {
		_, _, isr, _, ok := a.PartitionInfo("t", 0)
		if !ok || len(isr) != 3 {
			return false
		}
		first := a.LogString(a.IDs()[0], "t", 0)
		for _, r := range a.IDs() {
			if a.LogString(r, "t", 0) != first {
				return false
			}
		}
		return len(first) > len(wantA) && first[:len(wantA)] == wantA
	})
	if got := a.LogString(old, "t", 0); got[:len("0@0a 1@1a 2@2b 3@2b")] != "0@0a 1@1a 2@2b 3@2b" {
		t.Fatalf("old leader kept its own records: %q", got)
	}

	// Deleting the topic tombstones the LMLE key too.
	if resp, err := a.Admin().DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{"t"}}); err != nil {
		t.Fatalf("DeleteTopics: %v %v", resp, err)
	}
	a.WaitFor("LMLE key tombstoned", func() bool {
		_, lmle, ok := stateRecords(t, a, "back", "t", id)
		return ok && lmle == nil
	})
}

// TestMirrorTaintClearDurableBeforeISR is SPEC §6.6 step 4's ordering on
// the real shell: after M7's failback the tainted old leader rejoins as a
// follower and is repaired (cut back, re-copied, fetches answered without
// DivergingEpoch), but while the cleared taint cannot be made durable —
// the followers of its __mirror_state partition are held, so the acks=all
// write cannot commit — it must stay out of A's ISR (maximal ISR included)
// however often it fetches at the leader's LEO. Once the state followers
// are released the write commits and it joins.
func TestMirrorTaintClearDurableBeforeISR(t *testing.T) {
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw, MinISR: 2, ReplicaLagTimeMax: 60 * time.Second})
	b := NewCluster(t, Options{Cluster: "b", Network: nw})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	old, wantB, _ := m7Setup(t, ctx, a, b)

	// Ask a running broker: m7Setup leaves the old leader stopped.
	ask := a.IDs()[0]
	if ask == old {
		ask = a.IDs()[1]
	}
	resp, err := a.FetchClient(ask).Metadata(ctx, &pb.MetadataRequest{Topics: []string{state.Topic}})
	if err != nil || len(resp.GetTopics()) != 1 {
		t.Fatalf("metadata %s: %v %v", state.Topic, resp, err)
	}
	sp := state.PartitionFor("t", int32(len(resp.GetTopics()[0].GetPartitions())))
	stateLeader, _ := a.Leader(state.Topic, sp)
	for _, id := range a.IDs() {
		if id != stateLeader {
			a.HoldFetches(id, state.Topic, sp)
		}
	}
	tLeader, _ := a.Leader("t", 0)
	a.SetFetchRule(old, "t", 0, func(FetchInfo) FetchAction { return FetchPass }) // record its fetches
	a.RestartBroker(old)
	tp := twinlog.TopicPartition{Topic: "t", Partition: 0}
	repairedFetches := func() int {
		leo := a.LogEndOffset(tLeader, "t", 0)
		n := 0
		for _, f := range a.Fetches(old, "t", 0) {
			if f.Err == nil && f.Error == pb.ErrorCode_ERROR_CODE_NONE && f.DivergingEpoch == nil && f.FetchOffset == leo {
				n++
			}
		}
		return n
	}
	a.WaitFor("old leader repaired and fetching at the leader's LEO", func() bool {
		return a.LogString(old, "t", 0) == wantB && repairedFetches() >= 3
	})
	st, _ := a.Broker(tLeader).PartitionStatus(tp)
	if slices.Contains(st.MaximalISR, old) || slices.Contains(st.ISR, old) {
		t.Fatalf("old leader in the ISR %v (maximal %v) before its cleared taint is durable", st.ISR, st.MaximalISR)
	}

	for _, id := range a.IDs() {
		if id != stateLeader {
			a.SetFetchRule(id, state.Topic, sp, nil)
		}
	}
	a.WaitFor("old leader joins once the cleared taint is durable", func() bool {
		_, _, isr, _, ok := a.PartitionInfo("t", 0)
		return ok && slices.Contains(isr, int32(old))
	})
	a.WaitFor("taint cleared in __mirror_state", func() bool {
		st := a.MirrorState("t", 0)
		return st != nil && len(st.GetTaints()) == 0
	})
}
