package brokertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMirrorSkippedReplicaRepaired is M7 (no unclean election): A's leader
// appends records at an epoch above the later LMLE that nobody else has,
// A fails over to B, B writes records of the *same epoch number* at the
// same offsets, A's failback skips the old leader (down) and taints it;
// when it rejoins as a follower the taint cuts it back and it re-copies B's
// records — without the taint it would join the ISR holding its own
// records of that epoch, undetectably different.
func TestMirrorSkippedReplicaRepaired(t *testing.T) {
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw, MinISR: 2, ReplicaLagTimeMax: 5 * time.Second})
	b := NewCluster(t, Options{Cluster: "b", Network: nw})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	writes(ctx, a, "t", "a0")
	leaderChange(a, "t")
	writes(ctx, a, "t", "a1")
	waitLog(a, "t", "0@0a 1@1a")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(b, "t", "0@0a 1@1a")

	// A's leader (LE 2) appends 2-3@2a, replicated nowhere; A unreachable.
	if le := leaderChange(a, "t"); le != 2 {
		t.Fatalf("LE_A %d, want 2", le)
	}
	a.Unreachable(b)
	old, _ := a.Leader("t", 0)
	for _, id := range a.IDs() {
		if id != old {
			a.Cut(old, id)
		}
	}
	for _, v := range []string{"a2", "a3"} {
		if r, err := a.ProduceTo(ctx, old, "t", 0, 1, time.Second, []byte(v)); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("produce on isolated leader: %v %v", r, err)
		}
	}
	if got := a.LogString(old, "t", 0); got != "0@0a 1@1a 2@2a 3@2a" {
		t.Fatalf("old leader %q", got)
	}

	// Stop on B (LMLE 1, LE_B 2); B writes at epoch 2 too.
	mustStop(b, "m", "t")
	if st := b.MirrorState("t", 0); st.GetLmle() != 1 {
		t.Fatalf("LMLE_B %d, want 1", st.GetLmle())
	}
	writes(ctx, b, "t", "b2", "b3")
	wantB := "0@0a 1@1a 2@2b 3@2b"
	waitLog(b, "t", wantB)

	// The old leader goes down cleanly (its records stay on disk); another
	// ISR member leads; A mirrors B: LMLE 1, truncation at 2, old leader
	// skipped and tainted (1, 2).
	a.StopBroker(old)
	for _, id := range a.IDs() {
		if id != old {
			a.Heal(old, id)
		}
	}
	a.Reachable(b)
	a.CreateMirror("m", b, "t")
	st := a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if st.GetLmle() != 1 {
		t.Fatalf("A lmle used %d, want 1", st.GetLmle())
	}
	if len(st.GetSkippedReplicas()) != 1 || twinlog.BrokerID(st.GetSkippedReplicas()[0]) != old {
		t.Fatalf("skipped %v, want [%d]", st.GetSkippedReplicas(), old)
	}
	if ts := st.GetTaints(); len(ts) != 1 || twinlog.BrokerID(ts[0].GetReplica()) != old || ts[0].GetEpoch() != 1 || ts[0].GetOffset() != 2 {
		t.Fatalf("taints %v, want [{%d 1 2}]", ts, old)
	}
	waitLog(a, "t", wantB)

	// The old leader rejoins as a follower: cut back to 2, re-copies B's
	// records, joins the ISR; the taint is cleared.
	a.RestartBroker(old)
	waitReplicasIdentical(a, "t", wantB)
	a.WaitFor("old leader back in the ISR", func() bool {
		_, _, isr, _, ok := a.PartitionInfo("t", 0)
		return ok && len(isr) == 3
	})
	a.WaitFor("taint cleared", func() bool {
		st := a.MirrorState("t", 0)
		return st != nil && len(st.GetTaints()) == 0
	})
	if got := a.LogString(old, "t", 0); strings.Contains(got, "a 3@") && strings.Contains(got, "2@2a") {
		t.Fatalf("old leader kept its own records: %q", got)
	}
}
