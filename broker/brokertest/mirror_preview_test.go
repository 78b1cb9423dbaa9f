package brokertest

import (
	"context"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestFailbackPreview: after a planned failover A → B, A keeps taking
// records (3 in its leader epoch at the stop, 2 more after a leader
// change) that B never copied. PreviewMirrorTruncation on A, before the
// failback, says the failback removes exactly those 5, all committed on
// A, and from which offset; it changes nothing. The failback then removes
// exactly them: A's log becomes B's.
func TestFailbackPreview(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	produceN(ctx, a, "t", 5, "a")
	b.CreateMirror("a-to-b", a, "t")
	waitLog(b, "t", a.LeaderLog("t", 0))
	if err := mirrorResults("stop", b.StopMirror("a-to-b", true, 10*time.Second, "t")); err != nil {
		t.Fatal(err)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	produceN(ctx, a, "t", 3, "a-late") // in the LMLE's epoch: a divergence cut
	leaderChange(a, "t")
	produceN(ctx, a, "t", 2, "a-later") // past the LMLE: the LMLE cut
	produceN(ctx, b, "t", 2, "b")
	aLeader, _ := a.Leader("t", 0)
	before := a.LeaderLog("t", 0)

	resp, err := a.MirrorAdmin().PreviewMirrorTruncation(ctx, &pb.PreviewMirrorTruncationRequest{
		Mirror: "b-to-a", SourceBootstrap: b.BootstrapAddrs(), Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetPartitions()) != 1 {
		t.Fatalf("preview: %v", resp)
	}
	p := resp.GetPartitions()[0]
	if p.GetError() != pb.ErrorCode_ERROR_CODE_NONE || p.GetTruncationOffset() != 5 || p.GetRecordsRemoved() != 5 ||
		p.GetCommittedRecordsRemoved() != 5 || p.GetLogEndOffset() != 10 || p.GetHighWatermark() != 10 || p.GetLeader() != int32(aLeader) {
		t.Fatalf("preview %v, want truncation at 5 removing 5 records, all committed, of leader %d's log ending at 10", p, aLeader)
	}
	if got := a.LeaderLog("t", 0); got != before {
		t.Fatalf("the preview changed A's log:\n%s\nwas\n%s", got, before)
	}

	a.CreateMirror("b-to-a", b, "t")
	a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	want := b.LeaderLog("t", 0)
	waitLog(a, "t", want)
	if n := a.LogEndOffset(aLeader, "t", 0); n != 7 {
		t.Fatalf("A's LEO after the failback %d, want 5 kept + B's 2", n)
	}
	// A mirror that is caught up truncates nothing more.
	resp, err = a.MirrorAdmin().PreviewMirrorTruncation(ctx, &pb.PreviewMirrorTruncationRequest{Mirror: "b-to-a"})
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.GetPartitions()[0]; p.GetError() != pb.ErrorCode_ERROR_CODE_NONE || p.GetTruncationOffset() != -1 || p.GetRecordsRemoved() != 0 {
		t.Fatalf("preview of the running mirror: %v, want nothing truncated", p)
	}
}
