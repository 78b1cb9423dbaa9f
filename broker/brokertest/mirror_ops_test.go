package brokertest

import (
	"context"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMirrorStopUnreachableAndRestart: B mirrors A; every broker of B is
// restarted mid-mirroring and mirroring resumes with identical data; with
// A unreachable a stop with waitForCatchUp times out changing nothing (still
// read-only), a plain stop completes (M2) and B becomes writable with an
// epoch above every mirrored one.
func TestMirrorStopUnreachableAndRestart(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	produceN(ctx, a, "t", 5, "a")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(b, "t", a.LeaderLog("t", 0))

	// Restart every broker of B (clean stops: the last one cannot hand
	// leadership over), producing on A meanwhile.
	for _, id := range b.IDs() {
		b.StopBroker(id)
	}
	produceN(ctx, a, "t", 3, "a")
	for _, id := range b.IDs() {
		b.RestartBroker(id)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	produceN(ctx, a, "t", 2, "a")
	want := a.LeaderLog("t", 0)
	waitLog(b, "t", want)
	b.WaitFor("B replicas identical", func() bool {
		for _, id := range b.IDs() {
			if b.LogString(id, "t", 0) != want {
				return false
			}
		}
		return true
	})

	// A unreachable: waitForCatchUp cannot know the source HW.
	a.Unreachable(b)
	produceN(ctx, a, "t", 2, "a")
	// Wait until the heartbeats carry the fetcher's error (the stop below
	// does not rely on them: it asks A itself, which is unreachable).
	pollFor(t, "controller sees the fetch error", func() bool {
		d, err := b.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"m"}})
		return err == nil && len(d.GetMirrors()) == 1 && len(d.GetMirrors()[0].GetPartitions()) == 1 &&
			d.GetMirrors()[0].GetPartitions()[0].GetLastError() != ""
	})
	res := b.StopMirror("m", true, 700*time.Millisecond, "t")
	if len(res) != 1 || res[0].GetError() != pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
		t.Fatalf("stop with waitForCatchUp while unreachable: %v", res)
	}
	if st := b.MirrorState("t", 0); st.GetState() != pb.MirrorState_MIRROR_STATE_MIRRORING || st.GetDesiredState() != pb.MirrorState_MIRROR_STATE_MIRRORING {
		t.Fatalf("after timed-out stop: %v", st)
	}
	leader, _ := b.Leader("t", 0)
	if r, err := b.ProduceTo(ctx, leader, "t", 0, -1, time.Second, []byte("bX")); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		t.Fatalf("produce after timed-out stop: %v %v", r, err)
	}

	// A plain stop completes with the source unreachable.
	mustStop(b, "m", "t")
	st := b.MirrorState("t", 0)
	_, le, _, _, _ := b.PartitionInfo("t", 0)
	if st.GetLmle() != 0 || le <= 0 {
		t.Fatalf("stopped: lmle %d (want 0: A wrote everything at LE 0), LE %d", st.GetLmle(), le)
	}
	off := b.MustProduce(ctx, "t", 0, -1, []byte("b-after-stop"))
	if off != 10 {
		t.Fatalf("first produce after stop at %d, want 10", off)
	}
	if got, wantTail := b.LeaderLog("t", 0), want+" 10@"; len(got) <= len(wantTail) || got[:len(wantTail)] != wantTail {
		t.Fatalf("B log %q, want %q…", got, wantTail)
	}
}

// pollFor re-checks cond every 50 ms for up to 30 s: for conditions on the
// controller's heartbeat-fed view, which no broker change notification
// announces.
func pollFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
