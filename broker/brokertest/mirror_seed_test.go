package brokertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
)

// mirrorObs records the mirror truncations of one cluster.
type mirrorObs struct {
	broker.Observer
	mu     sync.Mutex
	truncs []string // "reason:records"
}

func (o *mirrorObs) ObserveMirrorPartition(*pb.MirrorPartitionStatus)                         {}
func (o *mirrorObs) ForgetMirrorPartition(string, int32)                                      {}
func (o *mirrorObs) ObserveMirrorState(string, string, int32, pb.MirrorState, pb.MirrorState) {}
func (o *mirrorObs) ObserveMirrorBytes(string, int32, int)                                    {}
func (o *mirrorObs) ObserveMirrorFetchError(string, int32, string)                            {}
func (o *mirrorObs) ObserveMirrorTaints(string, int32, int)                                   {}
func (o *mirrorObs) ObserveMirrorTruncation(topic string, p int32, reason string, records int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.truncs = append(o.truncs, fmt.Sprintf("%s:%d", reason, records))
}

func (o *mirrorObs) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.truncs
	o.truncs = nil
	return out
}

func twoObservedClusters(t *testing.T, optA, optB Options) (a, b *Cluster, oa, ob *mirrorObs) {
	nw := NewNetwork()
	oa, ob = &mirrorObs{Observer: nopObs{}}, &mirrorObs{Observer: nopObs{}}
	optA.Cluster, optA.Network = "a", nw
	optA.Observer = func(twinlog.BrokerID) broker.Observer { return oa }
	optB.Cluster, optB.Network = "b", nw
	optB.Observer = func(twinlog.BrokerID) broker.Observer { return ob }
	return NewCluster(t, optA), NewCluster(t, optB), oa, ob
}

// leaderChange moves tp's leadership to another broker by stopping the
// leader cleanly (controlled shutdown: LE + 1), restarting it and waiting
// for the full ISR, and returns the new LE.
func leaderChange(c *Cluster, topic string) twinlog.Epoch {
	c.T.Helper()
	old, le := c.Leader(topic, 0)
	c.StopBroker(old)
	c.WaitFor(c.Name+" new leader", func() bool {
		l, e, _, _, ok := c.PartitionInfo(topic, 0)
		return ok && l >= 0 && l != old && e > le && c.leaderReady(topic, 0)
	})
	c.RestartBroker(old)
	c.WaitFor(c.Name+" full ISR", func() bool {
		_, _, isr, rs, ok := c.PartitionInfo(topic, 0)
		return ok && len(isr) == len(rs)
	})
	_, le = c.Leader(topic, 0)
	return le
}

func mustLE(c *Cluster, topic string, want twinlog.Epoch) {
	c.T.Helper()
	c.WaitFor(fmt.Sprintf("%s LE %d", c.Name, want), func() bool {
		_, le, _, _, ok := c.PartitionInfo(topic, 0)
		return ok && le == want
	})
	if _, le, _, _, _ := c.PartitionInfo(topic, 0); le != want {
		c.T.Fatalf("%s LE %d, want %d", c.Name, le, want)
	}
}

func mustStop(c *Cluster, mirror, topic string) {
	c.T.Helper()
	if err := mirrorResults("StopMirrorTopics", c.StopMirror(mirror, false, 0, topic)); err != nil {
		c.T.Fatal(err)
	}
	c.WaitMirrorState(topic, 0, pb.MirrorState_MIRROR_STATE_STOPPED)
}

func writes(ctx context.Context, c *Cluster, topic string, values ...string) {
	c.T.Helper()
	for _, v := range values {
		c.MustProduce(ctx, topic, 0, -1, []byte(v))
	}
}

// TestMirrorSeedSequence runs the seed's steps 1–3 (SPEC §6.9 rows 1–10)
// on two real clusters and asserts both leaders' exact logs (offset, record
// epoch, origin cluster) after every row, the LMLE values −1, 1, 3, the
// leader epochs of the table, B's one lmle and one divergence truncation
// (rows 8–9) and identical logs at the end.
//
// Leader changes are real: a clean stop of the leader (controlled shutdown)
// elects another ISR member at LE + 1, which is exactly the table's "leader
// change". With that the numbers match the table; if the election machinery
// ever changes LE differently, the structure asserted (which epochs, origin
// per offset, the LMLE values) is what matters.
func TestMirrorSeedSequence(t *testing.T) {
	a, b, oa, ob := twoObservedClusters(t, Options{}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 110*time.Second)
	defer cancel()

	// 1. A writable, LE_A 1; B creates the mirror.
	a.CreateTopic("t", 1, 3, nil)
	mustLE(a, "t", 0)
	writes(ctx, a, "t", "a0")
	if le := leaderChange(a, "t"); le != 1 {
		t.Fatalf("row 1: LE_A %d, want 1", le)
	}
	writes(ctx, a, "t", "a1")
	waitLog(a, "t", "0@0a 1@1a")

	// 2. B: LMLE(A) −1, bump LE_B 1, truncate all; copy.
	b.CreateMirror("m", a, "t")
	st := b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if st.GetLmle() != -1 {
		t.Fatalf("row 2: lmle used %d, want -1", st.GetLmle())
	}
	waitLog(b, "t", "0@0a 1@1a")
	mustLE(b, "t", 1)
	if got := ob.take(); len(got) != 0 { // empty log: the LMLE truncation is a no-op
		t.Fatalf("row 2: truncations %v", got)
	}

	// 3. A leader change (LE_A 2), writes; A fails before B copies.
	a.Unreachable(b)
	if le := leaderChange(a, "t"); le != 2 {
		t.Fatalf("row 3: LE_A %d, want 2", le)
	}
	writes(ctx, a, "t", "a2")
	waitLog(a, "t", "0@0a 1@1a 2@2a")

	// 4. stop on B: LMLE_B 1, LE_B 2, writes; leader change LE_B 3, writes.
	mustStop(b, "m", "t")
	if st := b.MirrorState("t", 0); st.GetLmle() != 1 {
		t.Fatalf("row 4: LMLE_B %d, want 1", st.GetLmle())
	}
	mustLE(b, "t", 2)
	writes(ctx, b, "t", "b2")
	if le := leaderChange(b, "t"); le != 3 {
		t.Fatalf("row 4: LE_B %d, want 3", le)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	writes(ctx, b, "t", "b3")
	waitLog(b, "t", "0@0a 1@1a 2@2b 3@3b")

	// 5. A mirrors B: LMLE 1, bump LE_A 3, drop 2@2a; fetch(2, last 1) ok; copy.
	a.Reachable(b)
	a.CreateMirror("m", b, "t")
	st = a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if st.GetLmle() != 1 {
		t.Fatalf("row 5: lmle used %d, want 1", st.GetLmle())
	}
	waitLog(a, "t", "0@0a 1@1a 2@2b 3@3b")
	mustLE(a, "t", 3)
	if got := oa.take(); !slices.Equal(got, []string{"lmle:1"}) {
		t.Fatalf("row 5: A truncations %v, want [lmle:1]", got)
	}

	// 6. B writes; leader change LE_B 4, writes; B fails before A copies.
	a.Unreachable(b)
	writes(ctx, b, "t", "b4")
	if le := leaderChange(b, "t"); le != 4 {
		t.Fatalf("row 6: LE_B %d, want 4", le)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	writes(ctx, b, "t", "b5")
	waitLog(b, "t", "0@0a 1@1a 2@2b 3@3b 4@3b 5@4b")
	waitLog(a, "t", "0@0a 1@1a 2@2b 3@3b")

	// 7. stop on A: LMLE_A 3, LE_A 4; A writes.
	mustStop(a, "m", "t")
	if st := a.MirrorState("t", 0); st.GetLmle() != 3 {
		t.Fatalf("row 7: LMLE_A %d, want 3", st.GetLmle())
	}
	mustLE(a, "t", 4)
	writes(ctx, a, "t", "a4", "a5")
	waitLog(a, "t", "0@0a 1@1a 2@2b 3@3b 4@4a 5@4a")

	// 8–10. B mirrors A: LMLE 3, bump LE_B 5, drop 5@4b; fetch(5, last 3)
	// → DivergingEpoch (3, 4) → bump LE_B 6, truncate to 4; copy.
	a.Reachable(b)
	b.StartMirror("m", "t")
	st = b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	if st.GetLmle() != 3 {
		t.Fatalf("row 8: lmle used %d, want 3", st.GetLmle())
	}
	final := "0@0a 1@1a 2@2b 3@3b 4@4a 5@4a"
	waitLog(b, "t", final)
	mustLE(b, "t", 6)
	if got := ob.take(); !slices.Equal(got, []string{"lmle:1", "divergence:1"}) {
		t.Fatalf("rows 8-9: B truncations %v, want [lmle:1 divergence:1]", got)
	}
	// Identical everywhere, followers included.
	for _, c := range []*Cluster{a, b} {
		c.WaitFor(c.Name+" replicas identical", func() bool {
			for _, id := range c.IDs() {
				if c.LogString(id, "t", 0) != final {
					return false
				}
			}
			return true
		})
	}
}
