package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
)

// TestMirrorPendingFailedRecovers: with mirror.support.unclean.leader.election
// true on B's topic and one of B's replicas down, a Start waits in PENDING
// (ISR ≠ R), fails after mirror.pending.timeout.ms, keeps retrying, and
// mirrors once the replica is back and aligned (SPEC §6.6 step 3, seed).
func TestMirrorPendingFailedRecovers(t *testing.T) {
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw})
	b := NewCluster(t, Options{Cluster: "b", Network: nw, Configure: func(c *broker.Config) {
		c.MirrorPendingTimeout = 1500 * time.Millisecond
		c.MirrorRetryInitialBackoff = 1500 * time.Millisecond
		c.MirrorRetryMaxBackoff = 1500 * time.Millisecond
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	down := startPending(ctx, t, a, b)
	st := b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_FAILED)
	if st.GetLastError() == "" {
		t.Fatalf("FAILED without lastError: %v", st)
	}
	// Retried with backoff: PENDING again, then FAILED with retryCount > 0.
	b.WaitForTimeout("FAILED after a retry", 60*time.Second, func() bool {
		st := b.MirrorState("t", 0)
		return st != nil && st.GetState() == pb.MirrorState_MIRROR_STATE_FAILED && st.GetRetryCount() >= 1
	})
	leader, _ := b.Leader("t", 0)
	if r, err := b.ProduceTo(ctx, leader, "t", 0, -1, time.Second, []byte("bX")); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		t.Fatalf("produce while FAILED: %v %v", r, err)
	}

	// The replica returns: the next retry mirrors, every replica identical.
	b.RestartBroker(down)
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	produceN(ctx, a, "t", 2, "a")
	want := a.LeaderLog("t", 0)
	b.WaitFor("B replicas identical", func() bool {
		for _, id := range b.IDs() {
			if b.LogString(id, "t", 0) != want {
				return false
			}
		}
		return true
	})
}

// startPending mirrors t (one partition, RF 3) from a to b, stops the mirror,
// sets mirror.support.unclean.leader.election on b's topic, stops one of b's
// followers and starts the mirror again: the run waits in PENDING, since a
// replica cannot align (SPEC §6.6 step 3). It returns the stopped broker.
func startPending(ctx context.Context, t *testing.T, a, b *Cluster) twinlog.BrokerID {
	t.Helper()
	mirrorCaughtUp(ctx, a, b, 3)
	mustStop(b, "m", "t")

	b.SetTopicConfig(ctx, "t", "mirror.support.unclean.leader.election", "true")
	leader, _ := b.Leader("t", 0)
	down := b.IDs()[0]
	if down == leader {
		down = b.IDs()[1]
	}
	b.StopBroker(down)
	b.WaitFor("ISR shrunk", func() bool {
		_, _, isr, _, ok := b.PartitionInfo("t", 0)
		return ok && len(isr) == 2
	})
	b.StartMirror("m", "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_PENDING)
	return down
}
