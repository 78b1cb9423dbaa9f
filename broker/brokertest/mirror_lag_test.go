package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMirrorLagIsWhatAFailoverWouldLose: B's followers are held back, so
// B's leader copies A's records but cannot commit them. The lag is then
// A's HW minus B's HW (7 records, where measuring from B's LEO said 0), and
// its seconds grow with the age of the oldest record B has not committed;
// once the followers catch up both are 0, and stay 0 while idle (issue 18).
func TestMirrorLagIsWhatAFailoverWouldLose(t *testing.T) {
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw})
	// A long lag time: held followers stay in the ISR, so B's HW stays.
	b := NewCluster(t, Options{Cluster: "b", Network: nw, ReplicaLagTimeMax: time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	produceN(ctx, a, "t", 5, "x")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	caughtUp := func() bool {
		st := b.MirrorState("t", 0)
		return st != nil && st.GetHighWatermark() == 5 && st.GetLagRecords() == 0 && st.GetLagSeconds() == 0
	}
	pollFor(t, "B caught up and committed at 5", caughtUp)

	leader, _, _, replicas, _ := b.PartitionInfo("t", 0)
	for _, r := range replicas {
		if id := twinlog.BrokerID(r); id != leader {
			b.FetchesUpTo(id, "t", 0, 5)
		}
	}
	produceN(ctx, a, "t", 7, "y")
	var st *pb.MirrorPartitionStatus
	pollFor(t, "B's leader copies A's 12 records without committing them", func() bool {
		st = b.MirrorState("t", 0)
		return st != nil && st.GetLogEndOffset() == 12 && st.GetSourceHighWatermark() == 12 && st.GetHighWatermark() == 5
	})
	if st.GetLagRecords() != 7 {
		t.Fatalf("lag %d records with A's HW 12 and B's HW 5 (B's LEO 12), want 7", st.GetLagRecords())
	}
	first := st.GetLagSeconds()
	pollFor(t, "lag seconds growing past 0.3 s", func() bool {
		st = b.MirrorState("t", 0)
		return st.GetLagSeconds() >= 0.3 && st.GetLagSeconds() > first
	})
	if st.GetLagRecords() != 7 {
		t.Fatalf("lag %d records while B's followers are held, want 7", st.GetLagRecords())
	}
	for _, r := range replicas {
		if id := twinlog.BrokerID(r); id != leader {
			b.ReleaseFetches(id, "t", 0)
		}
	}
	pollFor(t, "B committed everything: lag 0 records, 0 s", func() bool {
		st = b.MirrorState("t", 0)
		return st != nil && st.GetHighWatermark() == 12 && st.GetLagRecords() == 0 && st.GetLagSeconds() == 0
	})
}

// TestMirrorSourceFetchAge: while B cannot reach A its caught-up mirror
// keeps lag 0 (what it last knew), and the age of its last fetch response
// grows, which is what says the lag is stale; reachable again, it is fresh.
func TestMirrorSourceFetchAge(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	produceN(ctx, a, "t", 3, "x")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	var st *pb.MirrorPartitionStatus
	pollFor(t, "B caught up with a fresh fetch", func() bool {
		st = b.MirrorState("t", 0)
		return st != nil && st.GetLagRecords() == 0 && st.GetHighWatermark() == 3 &&
			st.GetSourceFetchAgeSeconds() >= 0 && st.GetSourceFetchAgeSeconds() < 1 && st.GetReportedAtMs() > 0
	})
	b.Unreachable(a)
	pollFor(t, "the last fetch from A over 1.5 s old", func() bool {
		st = b.MirrorState("t", 0)
		return st.GetSourceFetchAgeSeconds() > 1.5
	})
	if st.GetLagRecords() != 0 || st.GetState() != pb.MirrorState_MIRROR_STATE_MIRRORING {
		t.Fatalf("cut off from A: %v, lag %d; want MIRRORING with lag 0 (what it last knew)", st.GetState(), st.GetLagRecords())
	}
	b.Reachable(a)
	pollFor(t, "a fresh fetch from A again", func() bool {
		st = b.MirrorState("t", 0)
		return st.GetSourceFetchAgeSeconds() >= 0 && st.GetSourceFetchAgeSeconds() < 1
	})
}
