package brokertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
)

// recordLog renders broker id's local log of topic-0 record by record as
// "offset@epoch=value" (every record, not only each batch's first).
func recordLog(c *Cluster, id twinlog.BrokerID, topic string) string {
	c.T.Helper()
	b := c.Broker(id)
	if b == nil {
		return "<down>"
	}
	bs, err := b.LocalBatches(twinlog.TopicPartition{Topic: topic, Partition: 0})
	if err != nil {
		return "<" + err.Error() + ">"
	}
	var parts []string
	for _, bv := range bs {
		rs, err := bv.Records()
		if err != nil {
			return fmt.Sprintf("<batch %d: %v>", bv.BaseOffset(), err)
		}
		for _, r := range rs {
			parts = append(parts, fmt.Sprintf("%d@%d=%s", r.Offset, bv.LeaderEpoch(), r.Value))
		}
	}
	return strings.Join(parts, " ")
}

// replicasHold reports whether every replica of topic-0 in c holds want
// (record by record).
func replicasHold(c *Cluster, topic, want string) bool {
	_, _, _, rs, ok := c.PartitionInfo(topic, 0)
	if !ok || len(rs) == 0 {
		return false
	}
	for _, id := range rs {
		if recordLog(c, twinlog.BrokerID(id), topic) != want {
			return false
		}
	}
	return true
}

// TestMirrorM5ReplicaGoneReassign is the end of SPEC §10 M5: "a2 gone →
// FAILED after mirror.pending.timeout.ms, fine after reassigning a2 away and
// restarting". B mirrors A; B fails over and writes; one replica of A's
// partition (a2) is lost for good; with mirror.support.unclean.leader.election
// true on A's topic, A's failback mirror from B needs every replica aligned
// (SPEC §6.6 step 3: ISR = R), so it waits in PENDING, turns FAILED with
// lastError after the timeout, retries up to max.attempts and stays FAILED.
// The operator adds a broker, reassigns the partition from a2 to it with
// AlterPartitionReassignments (the admin API `twinctl reassign` uses) and
// starts the mirror again: MIRRORING, nobody tainted, and every replica on
// both clusters holds the same records (offset, epoch, value).
func TestMirrorM5ReplicaGoneReassign(t *testing.T) {
	const maxAttempts = 2
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw, Configure: func(c *broker.Config) {
		c.MirrorPendingTimeout = 1500 * time.Millisecond
		c.MirrorRetryInitialBackoff = 500 * time.Millisecond
		c.MirrorRetryMaxBackoff = 500 * time.Millisecond
		c.MirrorRetryMaxAttempts = maxAttempts
	}})
	b := NewCluster(t, Options{Cluster: "b", Network: nw})
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()

	// B mirrors A; fail over to B; B writes.
	a.CreateTopic("t", 1, 3, nil)
	writes(ctx, a, "t", "a0", "a1", "a2")
	aLog := recordLog(a, leaderOf(a.Leader("t", 0)), "t")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	b.WaitFor("B holds A's records", func() bool { return replicasHold(b, "t", aLog) })
	if err := mirrorResults("stop", b.StopMirror("m", true, 10*time.Second, "t")); err != nil {
		t.Fatal(err)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	writes(ctx, b, "t", "b3", "b4")

	// A's failback must align every replica; a2 (a follower) is gone.
	a.SetTopicConfig(ctx, "t", "mirror.support.unclean.leader.election", "true")
	leader, _ := a.Leader("t", 0)
	_, _, _, replicas, _ := a.PartitionInfo("t", 0)
	gone := twinlog.NoBroker
	for _, r := range replicas {
		if twinlog.BrokerID(r) != leader {
			gone = twinlog.BrokerID(r)
			break
		}
	}
	a.KillBroker(gone)
	a.WaitFor(fmt.Sprintf("a-%d out of the ISR", gone), func() bool {
		_, _, isr, _, ok := a.PartitionInfo("t", 0)
		return ok && len(isr) == 2 && !slices.Contains(isr, int32(gone))
	})

	a.CreateMirror("r", b, "t")
	a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_PENDING)
	st := a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_FAILED)
	if !strings.Contains(st.GetLastError(), "mirror.pending.timeout.ms") {
		t.Fatalf("FAILED with lastError %q, want the pending timeout", st.GetLastError())
	}
	// Retried with backoff up to max.attempts, FAILED each time.
	a.WaitForTimeout("retries exhausted", 60*time.Second, func() bool {
		st = a.MirrorState("t", 0)
		return st != nil && st.GetState() == pb.MirrorState_MIRROR_STATE_FAILED && st.GetRetryCount() == maxAttempts
	})
	if st.GetLastError() == "" || len(st.GetTaints()) != 0 {
		t.Fatalf("after the retries: %v", st)
	}
	leader, _ = a.Leader("t", 0)
	if got := recordLog(a, leader, "t"); got != aLog {
		t.Fatalf("A copied while FAILED: %q, want %q", got, aLog)
	}
	if r, err := a.ProduceTo(ctx, leader, "t", 0, -1, time.Second, []byte("aX")); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		t.Fatalf("produce while FAILED: %v %v", r, err)
	}

	// Reassign a2 away to a new broker.
	added := a.AddBroker()
	target := make([]int32, 0, len(replicas))
	for _, r := range replicas {
		if twinlog.BrokerID(r) == gone {
			r = int32(added)
		}
		target = append(target, r)
	}
	rr, err := a.Admin().AlterPartitionReassignments(ctx, &pb.AlterPartitionReassignmentsRequest{Partitions: []*pb.ReassignablePartition{
		{Topic: "t", Partition: 0, Replicas: target}}})
	if err != nil || len(rr.GetResults()) != 1 || rr.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("AlterPartitionReassignments: %v %v", rr, err)
	}
	a.WaitFor(fmt.Sprintf("replicas %v, all in the ISR", target), func() bool {
		_, _, isr, rs, ok := a.PartitionInfo("t", 0)
		return ok && slices.Equal(sorted32(rs), sorted32(target)) && slices.Equal(sorted32(isr), sorted32(target))
	})
	a.WaitFor(fmt.Sprintf("a-%d holds the partition", added), func() bool { return recordLog(a, added, "t") == aLog })
	// Retries are exhausted: only an operator Start runs it again.
	if st := a.MirrorState("t", 0); st == nil || st.GetState() != pb.MirrorState_MIRROR_STATE_FAILED {
		t.Fatalf("after the reassignment: %v, want still FAILED", st)
	}

	a.StartMirror("r", "t")
	st = a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if len(st.GetTaints()) != 0 || len(st.GetSkippedReplicas()) != 0 {
		t.Fatalf("MIRRORING with taints %v, skipped %v", st.GetTaints(), st.GetSkippedReplicas())
	}
	writes(ctx, b, "t", "b5")
	bLog := recordLog(b, leaderOf(b.Leader("t", 0)), "t")
	if want := aLog + " "; !strings.HasPrefix(bLog, want) || strings.Count(bLog, "=b") != 3 {
		t.Fatalf("B's log %q: want A's records then b3-b5", bLog)
	}
	a.WaitFor("every replica of A holds B's records", func() bool { return replicasHold(a, "t", bLog) })
	b.WaitFor("every replica of B holds them", func() bool { return replicasHold(b, "t", bLog) })
	if _, _, _, rs, _ := a.PartitionInfo("t", 0); slices.Contains(rs, int32(gone)) {
		t.Fatalf("a-%d still a replica: %v", gone, rs)
	}
}

// leaderOf drops the epoch of Leader's answer.
func leaderOf(id twinlog.BrokerID, _ twinlog.Epoch) twinlog.BrokerID { return id }
