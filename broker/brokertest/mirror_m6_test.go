package brokertest

import (
	"context"
	"slices"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMirrorM6ConfigOnMidway is SPEC §10 M6 with real unclean elections on
// A = {a1, a2} (a third broker only hosts __mirror_state): the config is
// false at A's first failback (row 4: a2 down is tainted), turned on before
// A's stop (row 5); a2 is then elected uncleanly while tainted (row 6) and
// B mirrors A from it (row 7), B fails over (row 8), and A's next failback
// (row 9) runs with the config true and waits for a1 too. The seed's
// guarantee — records from row 9's truncation point on are identical
// everywhere — holds, while a2's 2-3 (epoch X made on both sides) differ
// from B's and a1's, undetected: the §6.8 lower bound, not more.
func TestMirrorM6ConfigOnMidway(t *testing.T) {
	a, b, _, _ := twoObservedClusters(t, Options{Brokers: 3, ClusterConfigs: map[string]string{"mirror.state.topic.replication.factor": "3"}}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 110*time.Second)
	defer cancel()
	b.CreateTopic("x", 1, 3, nil)
	a.CreateMirror("x", b, "x")
	a.WaitMirrorState("x", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	resp, err := a.Admin().CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{
		Name: "t", NumPartitions: 1, ReplicationFactor: 2,
		Configs:     map[string]string{"unclean.leader.election.enable": "true"},
		Assignments: []*pb.ReplicaAssignment{{Replicas: []int32{1, 2}}},
	}}})
	if err != nil || resp.GetTopics()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("CreateTopics: %v %v", resp, err)
	}
	a.WaitFor("t led by a-1 with ISR {1,2}", func() bool {
		l, _, isr, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 1 && len(isr) == 2 && a.leaderReady("t", 0)
	})

	// Two leader changes (back to a1) raise LE_A so a2's epoch at row 2
	// can be matched by B's stop epoch at row 3.
	leaderChange(a, "t")
	leaderChange(a, "t")

	// 1. ISR {a1, a2}, 0-1; B mirrors.
	writes(ctx, a, "t", "a0", "a1")
	_, le := a.Leader("t", 0)
	base := "0@" + itoa(int(le)) + "a 1@" + itoa(int(le)) + "a"
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitReplicasIdentical(a, "t", base)
	waitLog(b, "t", base)

	// 2. a2 leads (a1 stops cleanly), ISR {a2}; A unreachable; a2 writes 2-5@X.
	a.StopBroker(1)
	a.WaitFor("a-2 leads", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 2 && a.leaderReady("t", 0)
	})
	a.Unreachable(b)
	_, x := a.Leader("t", 0)
	writes(ctx, a, "t", "a", "a", "a", "a")
	xs := itoa(int(x))
	waitLog(a, "t", base+" 2@"+xs+"a 3@"+xs+"a 4@"+xs+"a 5@"+xs+"a")

	// 3. stop on B at epoch X; B writes 2-3@Xb.
	stopBAt(t, b, x)
	writes(ctx, b, "t", "b", "b")
	waitLog(b, "t", base+" 2@"+xs+"b 3@"+xs+"b")

	// 4. a2 fails; a1 (cut from a2) is elected uncleanly; A mirrors B with
	// the config false: truncate to 2 on a1 only, a2 tainted (0, 2); copy.
	a.Cut(1, 2)
	a.RestartBroker(1)
	a.StopBroker(2)
	a.WaitFor("a-1 leads (unclean)", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 1 && a.leaderReady("t", 0)
	})
	a.Heal(1, 2)
	a.Reachable(b)
	a.CreateMirror("m", b, "t")
	st := a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if ts := st.GetTaints(); len(ts) != 1 || ts[0].GetReplica() != 2 || ts[0].GetOffset() != 2 {
		t.Fatalf("row 4 taints %v, want a-2 at 2", ts)
	}
	row4 := base + " 2@" + xs + "b 3@" + xs + "b"
	waitLog(a, "t", row4)

	// 5. config true on A; stop on A (LMLE X).
	a.SetTopicConfig(ctx, "t", "mirror.support.unclean.leader.election", "true")
	mustStop(a, "m", "t")
	if st := a.MirrorState("t", 0); st.GetLmle() != int32(x) {
		t.Fatalf("row 5: LMLE_A %d, want %d", st.GetLmle(), x)
	}

	// 6. a1 fails; a2 back (cut from a1) and elected uncleanly while tainted.
	a.StopBroker(1)
	a.Cut(1, 2)
	a.RestartBroker(2)
	a.WaitFor("a-2 leads (unclean, tainted)", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 2 && a.leaderReady("t", 0)
	})
	a2 := base + " 2@" + xs + "a 3@" + xs + "a 4@" + xs + "a 5@" + xs + "a"
	if got := a.LogString(2, "t", 0); got != a2 {
		t.Fatalf("row 6: a-2 %q, want %q", got, a2)
	}

	// 7. B mirrors A: LMLE X, no-op truncation; fetch(4, last X) → (X, 6)
	// ok; B copies a2's 4-5@Xa.
	b.StartMirror("m", "t")
	st = b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if st.GetLmle() != int32(x) {
		t.Fatalf("row 7: lmle used %d, want %d", st.GetLmle(), x)
	}
	row7 := row4 + " 4@" + xs + "a 5@" + xs + "a"
	waitLog(b, "t", row7)

	// 8. stop on B (LMLE X, LE_B Y); B writes 6-7@Yb.
	mustStop(b, "m", "t")
	_, y := b.Leader("t", 0)
	ys := itoa(int(y))
	writes(ctx, b, "t", "b", "b")
	final := row7 + " 6@" + ys + "b 7@" + ys + "b"
	waitLog(b, "t", final)

	// 9. a1 back; A mirrors B with the config true: truncation to 6 on
	// a2, and MIRRORING only once a1 is aligned too; copy.
	a.Heal(1, 2)
	a.RestartBroker(1)
	a.StartMirror("m", "t")
	st = a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if st.GetLmle() != int32(x) || len(st.GetSkippedReplicas()) != 0 {
		t.Fatalf("row 9: lmle used %d skipped %v, want %d, none", st.GetLmle(), st.GetSkippedReplicas(), x)
	}
	a.WaitFor("row 9 copied everywhere", func() bool {
		_, _, isr, _, ok := a.PartitionInfo("t", 0)
		return ok && len(isr) == 2 && a.LogString(1, "t", 0) == final &&
			a.LogString(2, "t", 0) == a2+" 6@"+ys+"b 7@"+ys+"b"
	})
	// From row 9's truncation point (6) on, identical everywhere; below
	// it a2's 2-3 are A's records of epoch X where B and a1 hold B's.
	tail := func(s string) []string { f := splitFields(s); return f[len(f)-2:] }
	for _, got := range []string{a.LogString(1, "t", 0), a.LogString(2, "t", 0)} {
		if !slices.Equal(tail(got), tail(final)) {
			t.Fatalf("offsets 6-7 differ: %q vs B %q", got, final)
		}
	}
	t.Logf("M6: a1 %q, a2 %q, B %q", a.LogString(1, "t", 0), a.LogString(2, "t", 0), final)
}

func splitFields(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ' ' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
