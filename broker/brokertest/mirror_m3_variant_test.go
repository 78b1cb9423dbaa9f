package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMirrorM3LeaderDiesBeforeAlignment is SPEC §10 M3's variant: rows 1–7
// of §6.9, then row 8's LMLE truncation on B's leader b1 (LE_B 5, drops
// 5@4b) while its followers' fetches in LE_B 5 are held, so no follower is
// aligned for the run; b1 dies, b2 leads (LE_B 6) still holding 5@4b, A is
// unreachable. Stop on B must record the old LMLE 1 — b2 is not aligned, so
// its latest epoch (4, B's own) must not be recorded as shared history —
// and bump to LE_B 7; B writes 6@7b. A mirrors B: LMLE 1 truncates A to 2
// and A copies B's log; both clusters end identical, b1 included.
func TestMirrorM3LeaderDiesBeforeAlignment(t *testing.T) {
	a, b, _, _ := twoObservedClusters(t, Options{}, Options{ReplicaLagTimeMax: 30 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 110*time.Second)
	defer cancel()

	// Rows 1–7 (asserted in detail by TestMirrorSeedSequence).
	a.CreateTopic("t", 1, 3, nil)
	mustLE(a, "t", 0)
	writes(ctx, a, "t", "a0")
	leaderChange(a, "t")
	writes(ctx, a, "t", "a1")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(b, "t", "0@0a 1@1a")
	a.Unreachable(b)
	leaderChange(a, "t")
	writes(ctx, a, "t", "a2")
	mustStop(b, "m", "t")
	writes(ctx, b, "t", "b2")
	leaderChange(b, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	writes(ctx, b, "t", "b3")
	a.Reachable(b)
	a.CreateMirror("m", b, "t")
	a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(a, "t", "0@0a 1@1a 2@2b 3@3b")
	a.Unreachable(b)
	writes(ctx, b, "t", "b4")
	leaderChange(b, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	writes(ctx, b, "t", "b5")
	rows6 := "0@0a 1@1a 2@2b 3@3b 4@3b 5@4b"
	waitReplicasIdentical(b, "t", rows6)
	mustStop(a, "m", "t")
	writes(ctx, a, "t", "a4", "a5")
	waitLog(a, "t", "0@0a 1@1a 2@2b 3@3b 4@4a 5@4a")
	mustLE(b, "t", 4)

	// Row 8 on b1 only: b1's followers cannot fetch in LE_B ≥ 5.
	b1, _ := b.Leader("t", 0)
	for _, id := range b.IDs() {
		if id != b1 {
			b.SetFetchRule(id, "t", 0, func(fi FetchInfo) FetchAction {
				if fi.CurrentLeaderEpoch >= 5 {
					return FetchHold
				}
				return FetchPass
			})
		}
	}
	a.Reachable(b)
	b.StartMirror("m", "t")
	b.WaitFor("b1 did row 8's truncation", func() bool {
		st := b.Broker(b1).MirrorStatus(twinlog.TopicPartition{Topic: "t", Partition: 0})
		return st != nil && st.GetState() == pb.MirrorState_MIRROR_STATE_PENDING &&
			b.LogString(b1, "t", 0) == "0@0a 1@1a 2@2b 3@3b 4@3b"
	})
	if st := b.Broker(b1).MirrorStatus(twinlog.TopicPartition{Topic: "t", Partition: 0}); st.GetLmle() != 3 || st.GetLeaderEpoch() != 5 {
		t.Fatalf("row 8: lmle used %d at LE_B %d, want 3, 5", st.GetLmle(), st.GetLeaderEpoch())
	}
	for _, id := range b.IDs() {
		if id != b1 {
			if got := b.LogString(id, "t", 0); got != rows6 {
				t.Fatalf("follower %d changed before alignment: %q", id, got)
			}
		}
	}

	// b1 dies; another replica (unaligned, still holding 5@4b) leads at
	// LE_B 6; A unreachable.
	a.Unreachable(b)
	b.StopBroker(b1)
	b.WaitFor("b2 leads", func() bool {
		l, e, _, _, ok := b.PartitionInfo("t", 0)
		return ok && l >= 0 && l != b1 && e == 6 && b.leaderReady("t", 0)
	})
	for _, id := range b.IDs() {
		if id != b1 {
			b.SetFetchRule(id, "t", 0, nil)
		}
	}
	b2, _ := b.Leader("t", 0)
	if got := b.LogString(b2, "t", 0); got != rows6 {
		t.Fatalf("b2 %q, want %q", got, rows6)
	}

	// Stop on B: the old LMLE 1, LE_B 7; B writes 6@7b.
	if err := mirrorResults("StopMirrorTopics", b.StopMirror("m", false, 0, "t")); err != nil {
		t.Fatal(err)
	}
	st := b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	if st.GetLmle() != 1 {
		t.Fatalf("stop on B recorded LMLE %d, want the old 1 (b2 not aligned)", st.GetLmle())
	}
	mustLE(b, "t", 7)
	writes(ctx, b, "t", "b6")
	final := rows6 + " 6@7b"
	waitLog(b, "t", final)

	// A mirrors B: LMLE 1, truncate to 2, copy; identical, b1 included.
	a.Reachable(b)
	b.RestartBroker(b1)
	a.StartMirror("m", "t")
	st = a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if st.GetLmle() != 1 {
		t.Fatalf("A lmle used %d, want 1", st.GetLmle())
	}
	waitReplicasIdentical(a, "t", final)
	waitReplicasIdentical(b, "t", final)
}
