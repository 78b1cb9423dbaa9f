package metastate

import (
	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

const noBroker = int32(twinlog.NoBroker)

// changeOpts is the input of one partition change (SPEC §3.3).
type changeOpts struct {
	setISR bool
	isr    []int32
	// unclean is U, the set of brokers registering uncleanly in this change.
	unclean map[int32]bool
	// recovered: AlterPartition reported RECOVERED.
	recovered bool
	// uncleanWinner >= 0 installs an unclean winner (SPEC §3.5).
	uncleanWinner int32
	// preferred: ElectLeaders{PREFERRED} (SPEC §3.4).
	preferred bool
	// bump raises LE even if the leader stays (BumpLeaderEpoch).
	bump  bool
	minLE int32
	// replicas, when set, replaces R, adding and removing (reassignment).
	setReplicas bool
	replicas    []int32
	adding      []int32
	removing    []int32
}

func defaultOpts() changeOpts {
	return changeOpts{uncleanWinner: noBroker}
}

// changeOutcome says what a change did, for results.
type changeOutcome struct {
	// completed: a reassignment completed in this change.
	completed bool
	// leaderMoved: the leader changed.
	leaderMoved bool
}

// change applies SPEC §3.3 steps 1–5 and the election of §3.4 to the
// partition's current view and stores the result in the txn. Leader epoch
// and partition epoch are resolved by delta().
func (t *txn) change(cur *twinlogv1.PartitionRecord, o changeOpts) changeOutcome {
	n := metadata.ClonePartition(cur)
	k := tpKey{cur.GetTopic(), cur.GetPartition()}
	if o.setReplicas {
		n.Replicas, n.AddingReplicas, n.RemovingReplicas = o.replicas, o.adding, o.removing
	}
	U := o.unclean
	acceptable := func(b int32) bool { return !U[b] && t.acceptable(b) }
	R := n.GetReplicas()
	I := inROrder(R, cur.GetIsr())
	E := inROrder(R, cur.GetElr())
	K := inROrder(R, cur.GetLastKnownElr())
	I2 := I
	if o.setISR {
		I2 = o.isr
	}
	I2 = minus(inROrder(R, I2), keys(U))

	// Reassignment completion (SPEC §3.8): adding ⊆ ISR and the ISR holds
	// ≥ m members of the target T.
	out := changeOutcome{}
	if len(n.GetAddingReplicas())+len(n.GetRemovingReplicas()) > 0 {
		T := minus(R, n.GetRemovingReplicas())
		if subset(n.GetAddingReplicas(), I2) && len(intersect(I2, T)) >= t.m(cur.GetTopic(), len(T)) {
			if len(n.GetRemovingReplicas()) > 0 {
				t.bump[k] = true
			}
			n.Replicas, n.AddingReplicas, n.RemovingReplicas = T, nil, nil
			R = T
			I, E, K = inROrder(R, I), inROrder(R, E), inROrder(R, K)
			I2 = inROrder(R, I2)
			out.completed = true
		}
	}

	m := t.m(cur.GetTopic(), len(R))
	elr := t.elrEnabled()
	var E2, K2 []int32
	// Step 1 (and step 5 when ELR is disabled).
	if elr {
		if len(I2) < m {
			C := union(E, I)
			E2 = inROrder(R, minus(minus(C, I2), keys(U)))
			K2 = inROrder(R, minus(minus(union(C, K), I2), E2))
		}
	} else if len(I2) == 0 {
		switch {
		case len(I) > 0:
			// The ISR keeps its last member rather than become empty.
			last := I[len(I)-1]
			if contains(I, cur.GetLeader()) {
				last = cur.GetLeader()
			}
			I2 = []int32{last}
		case len(E) > 0:
			I2 = []int32{E[0]}
		case cur.GetLastKnownLeader() != noBroker && contains(R, cur.GetLastKnownLeader()):
			I2 = []int32{cur.GetLastKnownLeader()}
		}
	}

	// Step 2: election (SPEC §3.4).
	L := cur.GetLeader()
	L2 := L
	unclean := false
	switch {
	case o.uncleanWinner != noBroker:
		L2 = o.uncleanWinner
		I2, E2, K2 = []int32{L2}, nil, nil
		unclean = true
	default:
		if o.preferred && len(R) > 0 && contains(I2, R[0]) && acceptable(R[0]) {
			L2 = R[0]
		}
		if L2 == noBroker || !contains(I2, L2) || !acceptable(L2) {
			L2 = noBroker
			for _, b := range I2 {
				if acceptable(b) {
					L2 = b
					break
				}
			}
			if L2 == noBroker && len(I2) == 0 {
				for _, b := range E2 {
					if acceptable(b) {
						L2 = b
						I2, E2, K2 = []int32{b}, minus(E2, []int32{b}), minus(K2, []int32{b})
						break
					}
				}
			}
			if L2 == noBroker && len(I2) == 0 && len(E2) == 0 && len(K2) == 0 &&
				t.strategy(cur.GetTopic()) == metadata.StrategyBalanced {
				lkl := cur.GetLastKnownLeader()
				if L != noBroker {
					lkl = L
				}
				if lkl != noBroker && contains(R, lkl) && acceptable(lkl) {
					L2 = lkl
					I2 = []int32{lkl}
					unclean = true
				}
			}
		}
	}
	// Step 3.
	if len(I2) >= m {
		E2, K2 = nil, nil
	}
	// Step 4, against the image: several changes to one partition in a txn
	// (Tick fencing two brokers) are one written change, so a leader that
	// existed only inside the txn never becomes LKL.
	base := cur
	if orig := t.s.Partition(cur.GetTopic(), cur.GetPartition()); orig != nil && orig.GetTopicId() == cur.GetTopicId() {
		base = orig
	}
	lkl := base.GetLastKnownLeader()
	switch {
	case L2 != noBroker:
		lkl = noBroker
	case base.GetLeader() != noBroker:
		lkl = base.GetLeader()
	}
	rs := cur.GetRecoveryState()
	if rs == twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_UNSPECIFIED || L2 != L || o.recovered {
		rs = twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERED
	}
	if unclean {
		rs = twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING
	}
	if o.bump {
		t.bump[k] = true
	}
	if o.minLE > 0 {
		t.minLE[k] = max(t.minLE[k], o.minLE)
	}
	n.Isr, n.Elr, n.LastKnownElr = I2, E2, K2
	n.Leader, n.LastKnownLeader, n.RecoveryState = L2, lkl, rs
	t.putPartition(n)
	out.leaderMoved = L2 != L
	return out
}

// addTruncationPoint appends (le, o) keeping the last maxTruncationPoints: a
// ninth merges the two oldest into (the later LE, the smaller o) (SPEC §6.2f).
func addTruncationPoint(tps []*twinlogv1.TruncationPoint, le int32, o int64) []*twinlogv1.TruncationPoint {
	out := make([]*twinlogv1.TruncationPoint, 0, len(tps)+1)
	for _, tp := range tps {
		out = append(out, &twinlogv1.TruncationPoint{LeaderEpoch: tp.GetLeaderEpoch(), Offset: tp.GetOffset()})
	}
	out = append(out, &twinlogv1.TruncationPoint{LeaderEpoch: le, Offset: o})
	for len(out) > maxTruncationPoints {
		a, b := out[0], out[1]
		merged := &twinlogv1.TruncationPoint{LeaderEpoch: max(a.GetLeaderEpoch(), b.GetLeaderEpoch()), Offset: min(a.GetOffset(), b.GetOffset())}
		out = append([]*twinlogv1.TruncationPoint{merged}, out[2:]...)
	}
	return out
}

// removeFromISRs removes b from every ISR (fencing, controlled shutdown) or,
// when unclean, from every ISR ∪ ELR with U = {b} (SPEC §3.2). Only the
// partitions whose R holds b are visited (State.byBroker).
func (t *txn) removeFromISRs(b int32, unclean bool) {
	for _, p := range t.partitionsOf(b) {
		in := contains(p.GetIsr(), b)
		if unclean {
			in = in || contains(p.GetElr(), b)
		}
		if !in {
			continue
		}
		o := defaultOpts()
		o.setISR = true
		o.isr = minus(p.GetIsr(), []int32{b})
		if unclean {
			o.unclean = setOf(b)
		}
		t.change(p, o)
	}
}

// electLeaderless re-runs SPEC §3.4 for every partition without a leader
// (State.leaderless plus the txn's own changes).
func (t *txn) electLeaderless() {
	for _, k := range t.leaderlessKeys() {
		t.change(t.partition(k.topic, k.part), defaultOpts())
	}
}
