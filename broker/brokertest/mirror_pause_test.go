package brokertest

import (
	"context"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMirrorPauseWhilePending: the controller accepts a Pause against the
// desired state (MIRRORING) while the partition's run is still PENDING. The
// leader keeps it: once the replicas align, the run ends PAUSED without a
// single mirror fetch (SPEC §6.5: PAUSED is read-only, no fetch), and a
// Resume mirrors from the LEO. PENDING is held as in
// TestMirrorPendingFailedRecovers: mirror.support.unclean.leader.election
// true and one of B's replicas down. (The runner used to step the Pause
// only in MIRRORING: the run went on to fetch with metadata saying PAUSED;
// internal/sim TestKnownBugPauseResumeDropped.)
func TestMirrorPauseWhilePending(t *testing.T) {
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw})
	b := NewCluster(t, Options{Cluster: "b", Network: nw})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	down := startPending(ctx, t, a, b)

	// Record every mirror fetch B's brokers make from now on.
	for _, id := range b.IDs() {
		b.ReleaseMirrorFetches(id, "t", 0)
	}
	pr, err := b.MirrorAdmin().PauseMirrorTopics(ctx, &pb.PauseMirrorTopicsRequest{Mirror: "m", Topics: []string{"t"}})
	if err != nil {
		t.Fatalf("PauseMirrorTopics: %v", err)
	}
	if err := mirrorResults("PauseMirrorTopics", pr.GetTopics()); err != nil {
		t.Fatal(err)
	}
	// The leader's runner has seen the pause while the run is PENDING.
	b.WaitFor("desired PAUSED seen in PENDING", func() bool {
		st := b.MirrorState("t", 0)
		return st != nil && st.GetDesiredState() == pb.MirrorState_MIRROR_STATE_PAUSED
	})
	if st := b.MirrorState("t", 0); st.GetState() != pb.MirrorState_MIRROR_STATE_PENDING {
		t.Fatalf("state %v, want PENDING when the pause lands", st.GetState())
	}

	produceN(ctx, a, "t", 2, "p")
	b.RestartBroker(down)
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_PAUSED)
	for _, id := range b.IDs() {
		if fs := b.MirrorFetches(id, "t", 0); len(fs) > 0 {
			t.Fatalf("broker %d fetched from the source with desired PAUSED: %v", id, fs)
		}
	}

	rr, err := b.MirrorAdmin().ResumeMirrorTopics(ctx, &pb.ResumeMirrorTopicsRequest{Mirror: "m", Topics: []string{"t"}})
	if err != nil {
		t.Fatalf("ResumeMirrorTopics: %v", err)
	}
	if err := mirrorResults("ResumeMirrorTopics", rr.GetTopics()); err != nil {
		t.Fatal(err)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(b, "t", a.LeaderLog("t", 0))
}
