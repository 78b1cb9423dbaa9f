package brokertest

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMirrorSourceUncleanElection is M4 / SPEC §6.10 1.1–1.3a: B mirrors A;
// on A a lagging replica (out of the ISR) is elected uncleanly and writes
// its own records over offsets B already copied; B's next fetch gets
// DivergingEpoch, B bumps, truncates to the divergence point and converges
// on A's new log.
func TestMirrorSourceUncleanElection(t *testing.T) {
	a, b, _, ob := twoObservedClusters(t, Options{}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	// 1.1: a2 lags with only offset 0; a1 has 0–3; B copied 0–3.
	before := uncleanSourceSetup(ctx, t, a, b, nil)
	_, leB, _, _, _ := b.PartitionInfo("t", 0)

	// 1.2: a1 fails; the unclean round elects a2, which writes.
	a.KillBroker(1)
	a.WaitFor("a-2 leads", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 2 && a.leaderReady("t", 0)
	})
	writes(ctx, a, "t", "a4", "a5", "a6")
	after := a.LogString(2, "t", 0)
	if after == before || after[:4] != "0@0a" || len(after) < len("0@0a 1@xa 2@xa 3@xa") {
		t.Fatalf("a-2 log %q", after)
	}

	// 1.3a: B's fetch(4, last 0) diverges: bump, truncate to 1, copy.
	waitLog(b, "t", after)
	if got := ob.take(); !slices.Equal(got, []string{"divergence:3"}) {
		t.Fatalf("B truncations %v, want [divergence:3]", got)
	}
	if _, le, _, _, _ := b.PartitionInfo("t", 0); le != leB+2 {
		// One bump for the truncation (§6.2f), one to reach a-2's new epoch
		// (§6.2d).
		t.Logf("B LE %d -> %d", leB, le)
	}
	waitReplicasIdentical(b, "t", after)
}

// uncleanSourceSetup is SPEC §6.10 1.1: topic t on A with replicas {1, 2}
// and unclean elections enabled, mirrored by B as "m"; a-2 lags with offset 0
// only (cut from a-1, out of the ISR) while a-1 writes 0–3, which B copies.
// extra adds topic configs. It returns that log, "0@0a 1@0a 2@0a 3@0a".
func uncleanSourceSetup(ctx context.Context, t *testing.T, a, b *Cluster, extra map[string]string) string {
	t.Helper()
	cfg := map[string]string{"unclean.leader.election.enable": "true"}
	maps.Copy(cfg, extra)
	resp, err := a.Admin().CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{
		Name: "t", NumPartitions: 1, ReplicationFactor: 2, Configs: cfg,
		Assignments: []*pb.ReplicaAssignment{{Replicas: []int32{1, 2}}},
	}}})
	if err != nil || resp.GetTopics()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("CreateTopics: %v %v", resp, err)
	}
	a.WaitFor("t led by a-1 with ISR {1,2}", func() bool {
		l, _, isr, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 1 && len(isr) == 2 && a.leaderReady("t", 0)
	})
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)

	writes(ctx, a, "t", "a0")
	a.WaitFor("a-2 has offset 0", func() bool { return a.LogEndOffset(2, "t", 0) == 1 })
	a.Cut(1, 2)
	a.WaitFor("ISR {1}", func() bool {
		_, _, isr, _, ok := a.PartitionInfo("t", 0)
		return ok && slices.Equal(isr, []int32{1})
	})
	writes(ctx, a, "t", "a1", "a2", "a3")
	before := "0@0a 1@0a 2@0a 3@0a"
	waitLog(a, "t", before)
	waitLog(b, "t", before)
	return before
}
