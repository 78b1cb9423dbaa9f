package brokertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMirrorStopCatchUpDivergedLog is issue 13's catch-up debt: B mirrors A
// and holds A's offsets 0–3; B's mirror fetches are then held. On A the only
// in-sync replica dies and a lagging one (offset 0 only) is elected
// uncleanly and writes three records: A's HW is 4 again, reached in a new
// epoch, and offsets 1–3 differ from B's copy. B's HW (4) is not below A's,
// so a check of high watermarks alone calls B caught up, and a planned
// failover would make records A no longer has B's history. The stop must
// time out naming the divergence, with nothing changed; once B's fetcher
// runs again it truncates and copies, and the same stop goes through with
// B identical to A.
func TestMirrorStopCatchUpDivergedLog(t *testing.T) {
	a, b, _, _ := twoObservedClusters(t, Options{}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	// a-2 lags with offset 0 only; a-1 has 0–3; B copies 0–3.
	before := uncleanSourceSetup(ctx, t, a, b, nil)
	b.WaitFor("B committed 0–3", func() bool { return highWatermark(ctx, t, b, "t") == 4 })

	bl, _ := b.Leader("t", 0)
	b.HoldMirrorFetches(bl, "t", 0)
	t.Cleanup(func() { b.ReleaseMirrorFetches(bl, "t", 0) })
	b.WaitFor("B's mirror fetch held", func() bool { return b.MirrorFetchHeld(bl, "t", 0) })

	// a-1 fails; the unclean round elects a-2, which writes 1–3 anew.
	a.KillBroker(1)
	a.WaitFor("a-2 leads", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 2 && a.leaderReady("t", 0)
	})
	writes(ctx, a, "t", "a4", "a5", "a6")
	after := a.LogString(2, "t", 0)
	if after == before || !strings.HasPrefix(after, "0@0a ") || strings.Count(after, "@") != 4 {
		t.Fatalf("a-2 log %q, want offset 0 of epoch 0 and 1–3 in a later epoch", after)
	}
	if hw := highWatermark(ctx, t, a, "t"); hw != 4 {
		t.Fatalf("A's HW %d, want 4 (the divergence must hide behind equal HWs)", hw)
	}

	// Every stop times out with nothing changed. Its answer names the last
	// catch-up round that was not cut short; on a loaded machine (-race,
	// other packages' tests) a round's own RPC may miss its deadline, and
	// the answer then says so instead, so the stop is asked again a few
	// times until one answer names the divergence.
	var msgs []string
	for range 5 {
		res := b.StopMirror("m", true, 5*time.Second, "t")
		if len(res) != 1 || res[0].GetError() != pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
			t.Fatalf("stop with waitForCatchUp while B's log diverges from A's: %v (B's log %q, A's %q)", res, b.LeaderLog("t", 0), after)
		}
		if st := b.MirrorState("t", 0); st.GetState() != pb.MirrorState_MIRROR_STATE_MIRRORING ||
			st.GetDesiredState() != pb.MirrorState_MIRROR_STATE_MIRRORING {
			t.Fatalf("after the timed-out stop (nothing may change): %v", st)
		}
		msgs = append(msgs, res[0].GetErrorMessage())
		if strings.Contains(msgs[len(msgs)-1], "destination log diverges from the source's") {
			break
		}
	}
	if !strings.Contains(msgs[len(msgs)-1], "destination log diverges from the source's") {
		t.Fatalf("timed-out stops say %q, want the divergence named", msgs)
	}

	// B's fetcher finds the divergence, truncates and copies; then the stop
	// is caught up and B holds A's log.
	b.ReleaseMirrorFetches(bl, "t", 0)
	waitLog(b, "t", after)
	if err := mirrorResults("stop", b.StopMirror("m", true, 30*time.Second, "t")); err != nil {
		t.Fatal(err)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	aRecs, aEnd := a.ConsumeAll(ctx, "t", 0)
	bRecs, bEnd := b.ConsumeAll(ctx, "t", 0)
	if aEnd != bEnd || !slices.EqualFunc(aRecs, bRecs, func(x, y Record) bool { return fmt.Sprint(x) == fmt.Sprint(y) }) {
		t.Fatalf("after the stop: A %v (end %d), B %v (end %d)", aRecs, aEnd, bRecs, bEnd)
	}
}
