package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// produceN writes n single-record batches "<prefix><i>" with acks=all.
func produceN(ctx context.Context, c *Cluster, topic string, n int, prefix string) {
	c.T.Helper()
	for i := range n {
		c.MustProduce(ctx, topic, 0, -1, []byte(fmt.Sprintf("%s%d", prefix, i)))
	}
}

func waitLog(c *Cluster, topic, want string) {
	c.T.Helper()
	c.WaitForTimeout(fmt.Sprintf("%s leader log %q", c.Name, want), 60*time.Second, func() bool {
		l, _, _, _, ok := c.PartitionInfo(topic, 0)
		return ok && l >= 0 && c.Running(l) && c.LogString(l, topic, 0) == want
	})
}

// TestMirrorInitialReadOnly is M1: B mirrors A from scratch (LMLE −1), B's
// log equals A's byte for byte with the same offsets and epochs, and a
// produce on B fails with READ_ONLY_TOPIC leaving the LEO unchanged.
func TestMirrorInitialReadOnly(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	produceN(ctx, a, "t", 3, "a")
	want := a.LeaderLog("t", 0)
	b.CreateMirror("m", a, "t")
	st := b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if st.GetLmle() != -1 {
		t.Fatalf("lmle used %d, want -1", st.GetLmle())
	}
	waitLog(b, "t", want)
	produceN(ctx, a, "t", 2, "a")
	want = a.LeaderLog("t", 0)
	waitLog(b, "t", want)

	leader, _ := b.Leader("t", 0)
	leo := b.LogEndOffset(leader, "t", 0)
	r, err := b.ProduceTo(ctx, leader, "t", 0, -1, time.Second, []byte("bX"))
	if err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		t.Fatalf("produce on mirror: %v %v", r, err)
	}
	if got := b.LogEndOffset(leader, "t", 0); got != leo {
		t.Fatalf("LEO moved %d -> %d", leo, got)
	}
	// The followers of B replicate the mirrored records too.
	b.WaitFor("B followers caught up", func() bool {
		for _, id := range b.IDs() {
			if b.LogString(id, "t", 0) != want {
				return false
			}
		}
		return true
	})
}
