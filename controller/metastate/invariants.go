package metastate

import (
	"errors"
	"fmt"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// CheckInvariants checks the state-only parts of SPEC §8 controller
// invariants 1, 2 and 4 on every partition (3, 5 and 6 concern transitions;
// see CheckTransition). It returns all violations joined.
func (s *State) CheckInvariants() error {
	var errs []error
	t := s.view()
	elr := t.elrEnabled()
	for _, p := range s.SortedPartitions() {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s-%d: %s", p.GetTopic(), p.GetPartition(), fmt.Sprintf(format, args...)))
		}
		R := p.GetReplicas()
		I, E, K := p.GetIsr(), p.GetElr(), p.GetLastKnownElr()
		if tr := s.Topic(p.GetTopic()); tr == nil || tr.GetTopicId() != p.GetTopicId() {
			bad("partition of an unknown topic")
		}
		if len(R) == 0 || hasDuplicates(R) {
			bad("replicas %v empty or duplicated", R)
		}
		// Invariant 1.
		for _, set := range []struct {
			n string
			v []int32
		}{{"isr", I}, {"elr", E}, {"lke", K}} {
			if !subset(set.v, R) || hasDuplicates(set.v) {
				bad("%s %v not a duplicate-free subset of R %v", set.n, set.v, R)
			}
		}
		if len(intersect(I, E)) > 0 {
			bad("isr %v and elr %v intersect", I, E)
		}
		m := t.m(p.GetTopic(), len(R))
		if len(I) >= m && (len(E) > 0 || len(K) > 0) {
			bad("|isr| %d >= m %d but elr %v lke %v", len(I), m, E, K)
		}
		if !elr && (len(E) > 0 || len(K) > 0) {
			bad("elr disabled but elr %v lke %v", E, K)
		}
		// Invariant 2.
		L := p.GetLeader()
		if L != noBroker && !contains(I, L) {
			bad("leader %d not in isr %v", L, I)
		}
		if len(I) == 0 && L != noBroker {
			bad("empty isr with leader %d", L)
		}
		if p.GetRecoveryState() == twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING && len(I) != 1 {
			bad("recovering with isr %v", I)
		}
		if p.GetRecoveryState() == twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_UNSPECIFIED {
			bad("recovery state unspecified")
		}
		// Invariant 4: LKL is cleared by every election.
		if L != noBroker && p.GetLastKnownLeader() != noBroker {
			bad("leader %d with last known leader %d", L, p.GetLastKnownLeader())
		}
		if L != noBroker && !contains(R, L) {
			bad("leader %d not a replica", L)
		}
		if !subset(p.GetAddingReplicas(), R) || !subset(p.GetRemovingReplicas(), R) || len(intersect(p.GetAddingReplicas(), p.GetRemovingReplicas())) > 0 {
			bad("adding %v / removing %v inconsistent with R %v", p.GetAddingReplicas(), p.GetRemovingReplicas(), R)
		}
		if len(p.GetTruncationPoints()) > maxTruncationPoints {
			bad("%d truncation points", len(p.GetTruncationPoints()))
		}
	}
	// The image's own structure: partition slots, broker keys, indexes.
	errs = append(errs, s.CheckConsistency())
	return errors.Join(errs...)
}

// CheckTransition checks SPEC §8 invariants 3, 4 and 6, and that producer
// id blocks never go back, for one applied delta: before is the image the delta was computed on (a Snapshot), d the
// delta. bumped reports a BumpLeaderEpoch (LE may rise by more than one
// without a leader change); leader changes and replica-dropping reassignment
// completions or cancels are recognised from the records themselves.
func CheckTransition(before *twinlogv1.MetadataSnapshot, d *twinlogv1.MetadataDelta, bumped bool) error {
	if d == nil {
		return nil
	}
	var errs []error
	old := map[tpKey]*twinlogv1.PartitionRecord{}
	for _, p := range before.GetPartitions() {
		old[tpKey{p.GetTopic(), p.GetPartition()}] = p
	}
	next := FromSnapshot(before, Config{})
	if _, err := next.Apply(d); err != nil {
		return err
	}
	if r := d.GetProducerIds(); r != nil {
		// Producer id blocks are handed out once: the next id only rises,
		// within the cluster's space.
		space := next.ProducerIDSpace()
		prev := metadata.FirstProducerID(space)
		if b := before.GetProducerIds(); b != nil {
			prev = b.GetNextProducerId()
		}
		if n := r.GetNextProducerId(); n <= prev || metadata.ProducerIDSpaceOf(n-1) != space {
			errs = append(errs, fmt.Errorf("producer ids: next id %d -> %d (space %d)", prev, n, space))
		}
	}
	for _, n := range d.GetPartitions() {
		o := old[tpKey{n.GetTopic(), n.GetPartition()}]
		if o == nil || o.GetTopicId() != n.GetTopicId() {
			continue
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s-%d: %s", n.GetTopic(), n.GetPartition(), fmt.Sprintf(format, args...)))
		}
		if n.GetPartitionEpoch() != o.GetPartitionEpoch()+1 {
			bad("partition epoch %d -> %d", o.GetPartitionEpoch(), n.GetPartitionEpoch())
		}
		if n.GetLeaderEpoch() < o.GetLeaderEpoch() {
			bad("leader epoch decreased %d -> %d", o.GetLeaderEpoch(), n.GetLeaderEpoch())
		}
		// SPEC §3.3: LE rises iff L changes, on BumpLeaderEpoch, or when a
		// replica leaves R (a reassignment completion that drops a replica,
		// or a cancel that drops the added ones). Any written change of the
		// partition may complete a pending reassignment (an ELR toggle or a
		// round, too), so the drop is read from the records, not the command.
		leaderMoved := n.GetLeader() != o.GetLeader()
		dropped := minus(o.GetReplicas(), n.GetReplicas())
		switch {
		case bumped:
			if n.GetLeaderEpoch() <= o.GetLeaderEpoch() {
				bad("bump left leader epoch %d -> %d", o.GetLeaderEpoch(), n.GetLeaderEpoch())
			}
		case leaderMoved || len(dropped) > 0:
			if n.GetLeaderEpoch() != o.GetLeaderEpoch()+1 {
				bad("leader %d -> %d, replicas dropped %v, with leader epoch %d -> %d", o.GetLeader(), n.GetLeader(), dropped, o.GetLeaderEpoch(), n.GetLeaderEpoch())
			}
		default:
			if n.GetLeaderEpoch() != o.GetLeaderEpoch() {
				bad("leader epoch %d -> %d without a leader change or dropped replica", o.GetLeaderEpoch(), n.GetLeaderEpoch())
			}
		}
		if L := n.GetLeader(); L != noBroker && L != o.GetLeader() && !next.Acceptable(L) {
			bad("elected unacceptable broker %d", L)
		}
		// Invariant 6: nobody joins an ISR unacceptable.
		for _, b := range minus(n.GetIsr(), o.GetIsr()) {
			// (Step 5 may refill an empty ISR with an unacceptable member
			// that cannot lead until it is acceptable.)
			if !next.Acceptable(b) && len(o.GetIsr()) > 0 {
				bad("unacceptable broker %d joined the ISR", b)
			}
		}
		if o.GetLeader() != noBroker && n.GetLeader() == noBroker && n.GetLastKnownLeader() != o.GetLeader() {
			bad("leader %d lost but last known leader %d", o.GetLeader(), n.GetLastKnownLeader())
		}
		if equalIgnoringEpochs(o, n) {
			bad("no-op change written")
		}
	}
	return errors.Join(errs...)
}

func equalIgnoringEpochs(a, b *twinlogv1.PartitionRecord) bool {
	x, y := metadata.ClonePartition(a), metadata.ClonePartition(b)
	x.PartitionEpoch, y.PartitionEpoch = 0, 0
	x.LeaderEpoch, y.LeaderEpoch = 0, 0
	return protoEqual(x, y) && a.GetLeaderEpoch() == b.GetLeaderEpoch()
}
