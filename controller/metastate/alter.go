package metastate

import (
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// checkLeaderRequest is SPEC §3.6 checks 1–4 (shared with §3.7). It returns
// the partition or an error code.
func (s *State) checkLeaderRequest(brokerID int32, brokerEpoch int64, topic string, part, leaderEpoch int32,
	partitionEpoch *int32) (*twinlogv1.PartitionRecord, twinlogv1.ErrorCode, string) {
	br := s.brokers[brokerID]
	if br == nil || br.GetBrokerEpoch() != brokerEpoch {
		return nil, ecStale, "stale broker epoch"
	}
	p := s.Partition(topic, part)
	if p == nil || s.topics[topic] == nil {
		return nil, ecUnknown, "unknown partition"
	}
	if leaderEpoch > p.GetLeaderEpoch() || (partitionEpoch != nil && *partitionEpoch > p.GetPartitionEpoch()) {
		return nil, twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER, "epoch newer than the controller's"
	}
	if leaderEpoch < p.GetLeaderEpoch() {
		return nil, twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, "fenced leader epoch"
	}
	if brokerID != p.GetLeader() {
		return nil, ecInvalid, "requester is not the leader"
	}
	return p, ecNone, ""
}

func (s *State) partitionResponse(d *twinlogv1.MetadataDelta, topic string, part int32) *twinlogv1.AlterPartitionResponse {
	p := s.result(d, topic, part)
	return &twinlogv1.AlterPartitionResponse{
		Leader: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetIsr(),
		PartitionEpoch: p.GetPartitionEpoch(), RecoveryState: p.GetRecoveryState(),
	}
}

// AlterPartition validates an ISR change in SPEC §3.6 order and applies
// §3.3. The response carries {L, LE, ISR, PE} of the result (the current
// state when nothing changes), with NEW_LEADER_ELECTED if a completed
// reassignment moved the leader.
func (s *State) AlterPartition(req *twinlogv1.AlterPartitionRequest) (*twinlogv1.MetadataDelta, *twinlogv1.AlterPartitionResponse) {
	fail := func(ec twinlogv1.ErrorCode, msg string) (*twinlogv1.MetadataDelta, *twinlogv1.AlterPartitionResponse) {
		return nil, &twinlogv1.AlterPartitionResponse{Error: ec, ErrorMessage: msg, Leader: noBroker}
	}
	pe := req.GetPartitionEpoch()
	p, ec, msg := s.checkLeaderRequest(req.GetBrokerId(), req.GetBrokerEpoch(), req.GetTopic(), req.GetPartition(), req.GetLeaderEpoch(), &pe)
	if ec != ecNone {
		return fail(ec, msg)
	}
	if pe < p.GetPartitionEpoch() {
		return fail(twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION, "stale partition epoch")
	}
	// Deviation from SPEC §3.6 (doc.go, "min.insync.replicas in
	// AlterPartition"): the leader's m must be ours, else §3.3 would put
	// members into ELR under an m the leader's HW does not use.
	if m := req.GetMinInsyncReplicas(); m != 0 && int(m) != s.view().m(req.GetTopic(), len(p.GetReplicas())) {
		return fail(twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION, "stale min.insync.replicas")
	}
	var isr []int32
	for _, m := range req.GetNewIsr() {
		isr = append(isr, m.GetBrokerId())
	}
	if !subset(isr, p.GetReplicas()) || hasDuplicates(isr) || !contains(isr, p.GetLeader()) {
		return fail(ecInvalid, "new ISR must be a duplicate-free subset of the replicas holding the leader")
	}
	want := req.GetRecoveryState()
	if want == twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_UNSPECIFIED {
		want = twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERED
	}
	recovering := twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING
	if (want == recovering && len(isr) > 1) ||
		(want == recovering && p.GetRecoveryState() != recovering) {
		return fail(ecInvalid, "invalid leader recovery state transition")
	}
	t := s.view()
	for _, m := range req.GetNewIsr() {
		br := t.broker(m.GetBrokerId())
		if !t.acceptable(m.GetBrokerId()) || (m.GetBrokerEpoch() != -1 && m.GetBrokerEpoch() != br.GetBrokerEpoch()) {
			return fail(twinlogv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA, "ineligible replica")
		}
	}
	o := defaultOpts()
	o.setISR, o.isr = true, isr
	o.recovered = want != recovering
	out := t.change(p, o)
	d := t.delta()
	resp := s.partitionResponse(d, req.GetTopic(), req.GetPartition())
	if out.completed && out.leaderMoved {
		resp.Error = twinlogv1.ErrorCode_ERROR_CODE_NEW_LEADER_ELECTED
	}
	return d, resp
}

// BumpLeaderEpoch is SPEC §3.7: checks 1–4 of §3.6, LE′ = max(LE + 1,
// minLeaderEpoch), L and ISR unchanged, and a truncation point (LE′, o) when
// truncationOffset ≥ 0 (last 8 kept, SPEC §6.2f).
func (s *State) BumpLeaderEpoch(req *twinlogv1.BumpLeaderEpochRequest) (*twinlogv1.MetadataDelta, *twinlogv1.BumpLeaderEpochResponse) {
	p, ec, msg := s.checkLeaderRequest(req.GetBrokerId(), req.GetBrokerEpoch(), req.GetTopic(), req.GetPartition(), req.GetLeaderEpoch(), nil)
	if ec != ecNone {
		return nil, &twinlogv1.BumpLeaderEpochResponse{Error: ec, ErrorMessage: msg}
	}
	t := s.view()
	le := max(p.GetLeaderEpoch()+1, req.GetMinLeaderEpoch())
	n := cloneP(p)
	if o := req.GetTruncationOffset(); o >= 0 {
		n.TruncationPoints = addTruncationPoint(n.GetTruncationPoints(), le, o)
	}
	t.putPartition(n)
	k := tpKey{p.GetTopic(), p.GetPartition()}
	t.bump[k] = true
	t.minLE[k] = le
	d := t.delta()
	r := s.result(d, p.GetTopic(), p.GetPartition())
	return d, &twinlogv1.BumpLeaderEpochResponse{LeaderEpoch: r.GetLeaderEpoch(), PartitionEpoch: r.GetPartitionEpoch()}
}
