package brokertest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// m5Setup plays SPEC §6.10 rows 1.1, 1.2 and 2.1 with real unclean
// elections on A = {a1, a2} (m 1, unclean.leader.election.enable=true,
// mirror.support.unclean.leader.election = supportUnclean on A's topic):
// B copies a1's 0-3; a1 stops, a2 (holding only offset 0) is elected
// uncleanly and writes 1-7 at epoch X while B cannot reach A; a2 stops, a1
// returns and is elected uncleanly again (the a1–a2 link stays cut so a1
// never follows a2); B's next fetch from a1 is answered without divergence.
// It returns X and a2's log.
func m5Setup(t *testing.T, ctx context.Context, a, b *Cluster, supportUnclean bool) (twinlog.Epoch, string) {
	t.Helper()
	// A's __mirror_state is created now, on all three brokers, by a mirror
	// of an unrelated topic: with a1 down later it keeps a leader and, once
	// a2 is back, min ISR 2 (t's unclean elections never touch it).
	b.CreateTopic("x", 1, 3, nil)
	a.CreateMirror("x", b, "x")
	a.WaitMirrorState("x", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	// 1.1: a2 lags with offset 0 only; a1 and B hold 0-3.
	var extra map[string]string
	if supportUnclean {
		extra = map[string]string{"mirror.support.unclean.leader.election": "true"}
	}
	uncleanSourceSetup(ctx, t, a, b, extra)

	// 1.2: B cannot reach A; a1 fails; a2 is elected uncleanly and writes.
	a.Unreachable(b)
	a.StopBroker(1)
	a.WaitFor("a-2 leads (unclean)", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 2 && a.leaderReady("t", 0)
	})
	_, x := a.Leader("t", 0)
	for range 7 {
		writes(ctx, a, "t", "a")
	}
	a2log := a.LogString(2, "t", 0)
	if want := "0@0a 1@" + itoa(int(x)) + "a"; !strings.HasPrefix(a2log, want) {
		t.Fatalf("a-2 log %q, want prefix %q", a2log, want)
	}

	// 2.1: a2 fails; a1 returns (still cut from a2) and is elected
	// uncleanly; B's fetch(4, last 0) from a1 is answered without
	// divergence.
	a.RestartBroker(1)
	a.StopBroker(2)
	a.WaitFor("a-1 leads again (unclean)", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 1 && a.leaderReady("t", 0)
	})
	a.Heal(1, 2)
	a.Reachable(b)
	waitLog(a, "t", "0@0a 1@0a 2@0a 3@0a")
	b.WaitFor("B caught up with a-1", func() bool {
		st := b.MirrorState("t", 0)
		return st != nil && st.GetLagRecords() == 0 && st.GetSourceHighWatermark() == 4
	})
	waitLog(b, "t", "0@0a 1@0a 2@0a 3@0a")
	return x, a2log
}

func itoa(n int) string { return strconv.Itoa(n) }

// stopBAt stops B's mirror with B's stop epoch equal to x (leader changes
// on B raise LE_B first), so B's own records carry the epoch number a2's
// unclean records carry (the seed's "epoch 3 written by both clusters").
func stopBAt(t *testing.T, b *Cluster, x twinlog.Epoch) {
	t.Helper()
	for {
		_, le, _, _, _ := b.PartitionInfo("t", 0)
		if le+1 >= x {
			break
		}
		leaderChange(b, "t")
		b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	}
	mustStop(b, "m", "t")
	if _, le, _, _, _ := b.PartitionInfo("t", 0); le != x {
		t.Skipf("B's stop epoch %d cannot be made equal to a-2's epoch %d on this harness", le, x)
	}
}

// TestMirrorM5UncleanAfterReverseConfigFalse is SPEC §10 M5 / §6.10 case 2
// with mirror.support.unclean.leader.election=false: A's failback from B
// truncates only the ISR {a1} and taints a2; a2 is later elected
// uncleanly while tainted, and its records of epoch X (its own) are taken
// by the fetch protocol as B's records of epoch X: the clusters differ on
// offsets 1-5 although A mirrors B with lag 0. This is the divergence the
// seed describes, reachable only through an unclean election of a tainted
// replica — the §6.8 exemption of invariants 19–21; the assertion below
// documents it (it must hold, and fails if the design ever repairs it).
func TestMirrorM5UncleanAfterReverseConfigFalse(t *testing.T) {
	a, b, _, _ := twoObservedClusters(t, Options{Brokers: 3, ClusterConfigs: map[string]string{"mirror.state.topic.replication.factor": "3"}}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 110*time.Second)
	defer cancel()
	x, _ := m5Setup(t, ctx, a, b, false)

	// 2.2: stop on B at epoch X; B writes 4-5@Xb; A mirrors B: truncation
	// at 4 on a1 only; a2 (down) tainted (0, 4); copy.
	stopBAt(t, b, x)
	writes(ctx, b, "t", "b4", "b5")
	bLog := "0@0a 1@0a 2@0a 3@0a 4@" + itoa(int(x)) + "b 5@" + itoa(int(x)) + "b"
	waitLog(b, "t", bLog)
	a.CreateMirror("m", b, "t")
	st := a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if ts := st.GetTaints(); len(ts) != 1 || ts[0].GetReplica() != 2 || ts[0].GetOffset() != 4 {
		t.Fatalf("taints %v, want a-2 at 4", ts)
	}
	waitLog(a, "t", bLog)

	// 2.3: a1 fails; a2 returns and is elected uncleanly while tainted;
	// its fetch(8, last X) from B is answered (X, 6): truncate to 6.
	a.StopBroker(1)
	a.RestartBroker(2)
	a.WaitFor("a-2 leads A (unclean, tainted)", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 2 && a.leaderReady("t", 0)
	})
	var last *pb.MirrorPartitionStatus
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last A status %v; a-2 %q; B %q", last, a.LogString(2, "t", 0), b.LeaderLog("t", 0))
			for p := int32(0); p < 3; p++ {
				l, le, isr, rs, ok := a.PartitionInfo("__mirror_state", p)
				t.Logf("__mirror_state-%d: leader %d LE %d isr %v replicas %v %v", p, l, le, isr, rs, ok)
			}
		}
	})
	a.WaitFor("A mirrors B again with lag 0", func() bool {
		st := a.MirrorState("t", 0)
		last = st
		return st != nil && st.GetState() == pb.MirrorState_MIRROR_STATE_MIRRORING && st.GetLagRecords() == 0 && st.GetLogEndOffset() == 6
	})
	got := a.LogString(2, "t", 0)
	xs := itoa(int(x))
	want := "0@0a 1@" + xs + "a 2@" + xs + "a 3@" + xs + "a 4@" + xs + "a 5@" + xs + "a"
	if got != want {
		t.Fatalf("A (a-2) %q, want the seed's divergent %q (B %q)", got, want, bLog)
	}
	// Undetected: same length, same epochs on both sides, lag 0, and the
	// records at 1-5 come from different clusters.
	t.Logf("§6.8 exemption reached: A %q vs B %q", got, bLog)
}

// TestMirrorM5UncleanAfterReverseConfigTrue is M5 with the config true on
// A's topic: A's failback waits in PENDING while a2 is down (every replica
// must truncate); when a2 returns it is cut back by the fetch protocol and
// re-copies, MIRRORING follows, and a later unclean-free election of a2
// (it is in the ISR now) serves B's records: identical everywhere.
func TestMirrorM5UncleanAfterReverseConfigTrue(t *testing.T) {
	a, b, _, _ := twoObservedClusters(t, Options{Brokers: 3, ClusterConfigs: map[string]string{"mirror.state.topic.replication.factor": "3"}}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 110*time.Second)
	defer cancel()
	x, _ := m5Setup(t, ctx, a, b, true)

	stopBAt(t, b, x)
	writes(ctx, b, "t", "b4", "b5")
	bLog := "0@0a 1@0a 2@0a 3@0a 4@" + itoa(int(x)) + "b 5@" + itoa(int(x)) + "b"
	waitLog(b, "t", bLog)
	a.CreateMirror("m", b, "t")
	a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_PENDING)
	if st := a.MirrorState("t", 0); len(st.GetTaints()) != 0 {
		t.Fatalf("taints %v with the config true", st.GetTaints())
	}
	if got := a.LogString(1, "t", 0); got != "0@0a 1@0a 2@0a 3@0a" {
		t.Fatalf("A copied while PENDING: %q", got)
	}

	// a2 returns: repaired by the fetch protocol, joins, MIRRORING.
	a.RestartBroker(2)
	a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitReplicasIdentical(a, "t", bLog)

	// 2.3: a1 fails; a2 leads (cleanly, from the ISR): still identical.
	a.StopBroker(1)
	a.WaitFor("a-2 leads A", func() bool {
		l, _, _, _, ok := a.PartitionInfo("t", 0)
		return ok && l == 2 && a.leaderReady("t", 0)
	})
	if got := a.LogString(2, "t", 0); got != bLog {
		t.Fatalf("a-2 %q, B %q", got, bLog)
	}
}
