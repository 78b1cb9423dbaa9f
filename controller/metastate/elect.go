package metastate

import (
	"fmt"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// ElectLeadersResult carries the recovery rounds an UNCLEAN election started.
type ElectLeadersResult struct {
	Response *twinlogv1.ElectLeadersResponse
	// StartRounds are aggressive rounds to run (ElectLeaders{UNCLEAN}).
	StartRounds []Round
}

func (t *txn) selectPartitions(sel []*twinlogv1.TopicPartitions) ([]*twinlogv1.PartitionRecord, []*twinlogv1.PartitionResult) {
	if len(sel) == 0 {
		return t.allPartitions(), nil
	}
	var ps []*twinlogv1.PartitionRecord
	var errs []*twinlogv1.PartitionResult
	// A partition named twice is refused once, as Kafka's ElectLeaders
	// does, and not elected: a second election of the same partition in
	// one request would start from the record the first one replaced.
	seen := map[tpKey]int{}
	for _, tp := range sel {
		for _, i := range tp.GetPartitions() {
			seen[tpKey{tp.GetTopic(), i}]++
		}
	}
	for _, tp := range sel {
		for _, i := range tp.GetPartitions() {
			switch n := seen[tpKey{tp.GetTopic(), i}]; {
			case n < 0:
				continue // already answered
			case n > 1:
				seen[tpKey{tp.GetTopic(), i}] = -1
				errs = append(errs, &twinlogv1.PartitionResult{Topic: tp.GetTopic(), Partition: i, Error: ecInvalid, ErrorMessage: "duplicate partition in the request"})
				continue
			}
			if p := t.partition(tp.GetTopic(), i); p != nil {
				ps = append(ps, p)
			} else {
				errs = append(errs, &twinlogv1.PartitionResult{Topic: tp.GetTopic(), Partition: i, Error: ecUnknown, ErrorMessage: "unknown partition"})
			}
		}
	}
	return ps, errs
}

// ElectLeaders is SPEC §3.4: PREFERRED takes R[0] if it is in the ISR and
// acceptable; UNCLEAN on a leaderless partition elects cleanly if it can,
// else starts one aggressive round over the acceptable replicas.
func (s *State) ElectLeaders(req *twinlogv1.ElectLeadersRequest, nowMs int64) (*twinlogv1.MetadataDelta, ElectLeadersResult) {
	t := s.view()
	ps, errs := t.selectPartitions(req.GetPartitions())
	resp := &twinlogv1.ElectLeadersResponse{Results: errs}
	res := ElectLeadersResult{Response: resp}
	for _, p := range ps {
		r := &twinlogv1.PartitionResult{Topic: p.GetTopic(), Partition: p.GetPartition()}
		resp.Results = append(resp.Results, r)
		R := p.GetReplicas()
		switch req.GetType() {
		case twinlogv1.ElectionType_ELECTION_TYPE_PREFERRED:
			switch {
			case len(R) > 0 && p.GetLeader() == R[0]:
				r.Error = twinlogv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED
			case len(R) > 0 && contains(p.GetIsr(), R[0]) && t.acceptable(R[0]):
				o := defaultOpts()
				o.preferred = true
				t.change(p, o)
			default:
				r.Error = twinlogv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE
			}
		case twinlogv1.ElectionType_ELECTION_TYPE_UNCLEAN:
			if p.GetLeader() != noBroker {
				r.Error = twinlogv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED
				continue
			}
			t.change(p, defaultOpts())
			if t.partition(p.GetTopic(), p.GetPartition()).GetLeader() != noBroker {
				continue
			}
			cands := t.roundTrigger(p, metadata.StrategyAggressive)
			if len(cands) == 0 {
				r.Error = twinlogv1.ErrorCode_ERROR_CODE_ELIGIBLE_LEADERS_NOT_AVAILABLE
				continue
			}
			if old := s.rounds[tpKey{p.GetTopic(), p.GetPartition()}]; old != nil && old.Strategy == metadata.StrategyAggressive {
				continue // one is already running
			}
			res.StartRounds = append(res.StartRounds, *s.newRound(t, p, metadata.StrategyAggressive, cands, nowMs))
		default:
			r.Error, r.ErrorMessage = ecInvalid, "unknown election type"
		}
	}
	return t.delta(), res
}

// AlterPartitionReassignments starts, replaces or cancels reassignments
// (SPEC §3.8). Starting to T: R = current ∪ T (current order, then the
// additions), adding = T − original, removing = R − T; it completes (here or
// in a later change) when adding ⊆ ISR and the ISR holds ≥ m members of T.
// Cancelling (empty replicas) reverts to the original R and needs ≥ m ISR
// members in it (else NOT_ENOUGH_REPLICAS).
func (s *State) AlterPartitionReassignments(req *twinlogv1.AlterPartitionReassignmentsRequest) (*twinlogv1.MetadataDelta, *twinlogv1.AlterPartitionReassignmentsResponse) {
	t := s.view()
	resp := &twinlogv1.AlterPartitionReassignmentsResponse{}
	registered := len(t.brokerIDs()) // no change below registers or removes one
	for _, rp := range req.GetPartitions() {
		r := &twinlogv1.PartitionResult{Topic: rp.GetTopic(), Partition: rp.GetPartition()}
		resp.Results = append(resp.Results, r)
		p := t.partition(rp.GetTopic(), rp.GetPartition())
		if p == nil {
			r.Error, r.ErrorMessage = ecUnknown, "unknown partition"
			continue
		}
		ec, err := t.reassign(p, rp.GetReplicas(), registered)
		if err != nil {
			r.Error, r.ErrorMessage = ec, err.Error()
		}
	}
	return t.delta(), resp
}

func (t *txn) reassign(p *twinlogv1.PartitionRecord, target []int32, registered int) (twinlogv1.ErrorCode, error) {
	R := p.GetReplicas()
	orig := minus(R, p.GetAddingReplicas())
	inProgress := len(p.GetAddingReplicas())+len(p.GetRemovingReplicas()) > 0
	o := defaultOpts()
	o.setReplicas = true
	if len(target) == 0 {
		if !inProgress {
			return twinlogv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS, fmt.Errorf("no reassignment in progress")
		}
		isr := intersect(p.GetIsr(), orig)
		if m := t.m(p.GetTopic(), len(orig)); len(isr) < m {
			return twinlogv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, fmt.Errorf("cancel needs %d ISR members in the original replicas, has %d", m, len(isr))
		}
		if len(p.GetAddingReplicas()) > 0 {
			t.bump[tpKey{p.GetTopic(), p.GetPartition()}] = true
		}
		o.replicas = orig
		o.setISR, o.isr = true, isr
		t.change(p, o)
		return ecNone, nil
	}
	// Bounded before anything looks at the list: a target of a million ids
	// must cost no more than a short one (the controller's lock is held).
	// Without duplicates every id must be a registered broker, so a longer
	// list is refused whatever it holds.
	if len(target) > registered {
		return twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, fmt.Errorf("%d target replicas but %d brokers are registered", len(target), registered)
	}
	if hasDuplicates(target) {
		return twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, fmt.Errorf("duplicate replicas")
	}
	for _, b := range target {
		if t.broker(b) == nil {
			return twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, fmt.Errorf("broker %d is not registered", b)
		}
	}
	if sameSet(target, R) && !inProgress {
		o.replicas = slices.Clone(target)
		t.change(p, o)
		return ecNone, nil
	}
	o.replicas = union(R, target)
	o.adding = inROrder(o.replicas, minus(target, orig))
	o.removing = minus(o.replicas, target)
	t.change(p, o)
	return ecNone, nil
}
