package metastate

import (
	"fmt"
	"math"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// checkLeaderRequest is SPEC §3.6 checks 1–4 (shared with §3.7). It returns
// the partition or an error code.
func (s *State) checkLeaderRequest(brokerID int32, brokerEpoch int64, topic string, part, leaderEpoch int32,
	partitionEpoch *int32) (*twinlogv1.PartitionRecord, twinlogv1.ErrorCode, string) {
	br := s.Broker(brokerID)
	if br == nil || br.GetBrokerEpoch() != brokerEpoch {
		return nil, ecStale, "stale broker epoch"
	}
	p := s.Partition(topic, part)
	if p == nil || s.Topic(topic) == nil {
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
	// From here on the request names the current partition epoch, so it was
	// never applied (an applied one failed the check above): a refusal
	// carries the current {L, LE, ISR, PE}, by which the leader knows the
	// outcome is definite (replica.HandleAlterPartitionResponse).
	refuse := func(ec twinlogv1.ErrorCode, msg string) (*twinlogv1.MetadataDelta, *twinlogv1.AlterPartitionResponse) {
		return nil, &twinlogv1.AlterPartitionResponse{Error: ec, ErrorMessage: msg, Leader: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(),
			Isr: p.GetIsr(), PartitionEpoch: p.GetPartitionEpoch(), RecoveryState: p.GetRecoveryState()}
	}
	if p.GetPartitionEpoch() == math.MaxInt32 {
		return refuse(ecInvalid, errEpochExhausted.Error())
	}
	// Deviation from SPEC §3.6 (doc.go, "min.insync.replicas in
	// AlterPartition"): the leader's m must be ours, else §3.3 would put
	// members into ELR under an m the leader's HW does not use.
	if m := req.GetMinInsyncReplicas(); m != 0 && int(m) != s.view().m(req.GetTopic(), len(p.GetReplicas())) {
		return refuse(twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION, "stale min.insync.replicas")
	}
	var isr []int32
	for _, m := range req.GetNewIsr() {
		isr = append(isr, m.GetBrokerId())
	}
	if !subset(isr, p.GetReplicas()) || hasDuplicates(isr) || !contains(isr, p.GetLeader()) {
		return refuse(ecInvalid, "new ISR must be a duplicate-free subset of the replicas holding the leader")
	}
	want := req.GetRecoveryState()
	if want == twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_UNSPECIFIED {
		want = twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERED
	}
	recovering := twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING
	if (want == recovering && len(isr) > 1) ||
		(want == recovering && p.GetRecoveryState() != recovering) {
		return refuse(ecInvalid, "invalid leader recovery state transition")
	}
	t := s.view()
	for _, m := range req.GetNewIsr() {
		br := t.broker(m.GetBrokerId())
		if !t.acceptable(m.GetBrokerId()) || (m.GetBrokerEpoch() != -1 && m.GetBrokerEpoch() != br.GetBrokerEpoch()) {
			return refuse(twinlogv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA, "ineligible replica")
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

// Leader-epoch limits (docs/spec-deviations.md, "Rules made precise").
//
// A leader epoch is an int32 that only rises: once at MaxInt32 no election
// can happen without wrapping, which would fence every replica for good (a
// record epoch above LE is UNKNOWN_LEADER_EPOCH forever). Elections raise LE
// by one, so only BumpLeaderEpoch can make a large jump, and it is bounded
// twice:
//
//   - MaxLeaderEpochStep: a bump needs at most the highest epoch the
//     partition's log can be asked to hold. On a mirror partition that is the
//     source leader's epoch (a mirrored batch keeps its epoch, SPEC §6.2d) or
//     LMLE + 1 (§6.6), and the source's LE itself rises by one per election.
//     A destination more than 2^20 (about a million) elections behind its
//     source is not a state a real pair reaches; a larger jump is a forged
//     request or a corrupt batch, and refusing it leaves the partition as it
//     was (the mirror retries and reports the error).
//   - LeaderEpochHeadroom: a bump never takes LE above MaxInt32 − 2^24, so
//     that after any sequence of accepted bumps the partition can still have
//     2^24 (about 16.7 million) ordinary elections before its epoch runs out.
//     Reaching the cap takes more than 2,000 maximal bumps, each from the
//     current leader.
const (
	MaxLeaderEpochStep  int32 = 1 << 20
	LeaderEpochHeadroom int32 = 1 << 24
	maxBumpLeaderEpoch        = math.MaxInt32 - LeaderEpochHeadroom
)

// bumpTarget returns LE′ = max(LE + 1, minLE) of SPEC §3.7, or an error if
// it breaks the limits above.
func bumpTarget(le, minLE int32) (int32, error) {
	if le >= maxBumpLeaderEpoch {
		return 0, fmt.Errorf("leader epoch %d is within the reserved headroom of %d epochs below MaxInt32; only elections may raise it", le, LeaderEpochHeadroom)
	}
	if int64(minLE) > int64(le)+int64(MaxLeaderEpochStep) {
		return 0, fmt.Errorf("min_leader_epoch %d is more than %d above the leader epoch %d", minLE, MaxLeaderEpochStep, le)
	}
	next := max(le+1, minLE)
	if next > maxBumpLeaderEpoch {
		return 0, fmt.Errorf("min_leader_epoch %d is above the bump limit %d (MaxInt32 minus a headroom of %d)", minLE, maxBumpLeaderEpoch, LeaderEpochHeadroom)
	}
	return next, nil
}

// BumpLeaderEpoch is SPEC §3.7: checks 1–4 of §3.6, LE′ = max(LE + 1,
// minLeaderEpoch), L and ISR unchanged, and a truncation point (LE′, o) when
// truncationOffset ≥ 0 (last 8 kept, SPEC §6.2f). Only the mirror machinery
// needs it, so the partition's topic must be, or have been, a mirror topic;
// LE′ is bounded by bumpTarget and truncationOffset must be −1 or ≥ 0.
func (s *State) BumpLeaderEpoch(req *twinlogv1.BumpLeaderEpochRequest) (*twinlogv1.MetadataDelta, *twinlogv1.BumpLeaderEpochResponse) {
	fail := func(ec twinlogv1.ErrorCode, msg string) (*twinlogv1.MetadataDelta, *twinlogv1.BumpLeaderEpochResponse) {
		return nil, &twinlogv1.BumpLeaderEpochResponse{Error: ec, ErrorMessage: msg}
	}
	p, ec, msg := s.checkLeaderRequest(req.GetBrokerId(), req.GetBrokerEpoch(), req.GetTopic(), req.GetPartition(), req.GetLeaderEpoch(), nil)
	if ec != ecNone {
		return fail(ec, msg)
	}
	if tr := s.Topic(req.GetTopic()); tr.GetMirrorName() == "" && !tr.GetOnceMirrored() {
		return fail(ecInvalid, fmt.Sprintf("topic %q is not and never was a mirror topic: only mirror partitions bump their leader epoch", req.GetTopic()))
	}
	o := req.GetTruncationOffset()
	if o < -1 {
		return fail(ecInvalid, fmt.Sprintf("truncation_offset %d: must be -1 (none) or >= 0", o))
	}
	le, err := bumpTarget(p.GetLeaderEpoch(), req.GetMinLeaderEpoch())
	if err != nil {
		return fail(ecInvalid, err.Error())
	}
	if p.GetPartitionEpoch() == math.MaxInt32 {
		return fail(ecInvalid, errEpochExhausted.Error())
	}
	t := s.view()
	n := metadata.ClonePartition(p)
	if o >= 0 {
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
