package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
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
	// B is no mirror source while it is read-only (inv. 17).
	fr, err := b.FetchClient(leader).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_MIRROR,
		Partitions: []*pb.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}}})
	if err != nil || fr.GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_INVALID_MIRROR_SOURCE {
		t.Fatalf("MIRROR fetch from a mirror: %v %v", fr, err)
	}
	// The followers of B replicate the mirrored records too.
	waitReplicasIdentical(b, "t", want)

	// Stop with waitForCatchUp once caught up (lag 0 reported): STOPPED.
	pollFor(t, "controller sees lag 0", func() bool {
		d, err := b.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"m"}})
		if err != nil || len(d.GetMirrors()) != 1 || len(d.GetMirrors()[0].GetPartitions()) != 1 {
			return false
		}
		p := d.GetMirrors()[0].GetPartitions()[0]
		return p.GetState() == pb.MirrorState_MIRROR_STATE_MIRRORING && p.GetLagRecords() == 0 && p.GetSourceHighWatermark() == 5
	})
	if err := mirrorResults("stop", b.StopMirror("m", true, 5*time.Second, "t")); err != nil {
		t.Fatal(err)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	if off := b.MustProduce(ctx, "t", 0, -1, []byte("b5")); off != 5 {
		t.Fatalf("first produce after stop at %d, want 5", off)
	}
}

// waitReplicasIdentical waits until every replica of topic-0 holds want.
func waitReplicasIdentical(c *Cluster, topic, want string) {
	c.T.Helper()
	c.WaitForTimeout(c.Name+" replicas identical", 30*time.Second, func() bool {
		_, _, _, rs, ok := c.PartitionInfo(topic, 0)
		if !ok || len(rs) == 0 {
			return false
		}
		for _, id := range rs {
			if c.LogString(twinlog.BrokerID(id), topic, 0) != want {
				return false
			}
		}
		return true
	})
}
