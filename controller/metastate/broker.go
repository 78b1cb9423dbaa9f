package metastate

import (
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

const (
	ecNone    = twinlogv1.ErrorCode_ERROR_CODE_NONE
	ecInvalid = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
	ecStale   = twinlogv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH
	ecUnknown = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
)

// RegisterBroker registers (or re-registers) a broker (SPEC §3.2). The new
// broker epoch is the offset of the registering delta (larger than any
// previous epoch), so "metadata caught up" is simply appliedOffset ≥ epoch.
// The broker starts fenced. A clean re-registration of an unfenced broker
// fences it (removed from every ISR); an unclean one (previousBrokerEpoch ≠
// its previous epoch) gives each partition with it in ISR ∪ ELR the change
// I′ = I − {b}, U = {b}.
func (s *State) RegisterBroker(req *twinlogv1.RegisterBrokerRequest, nowMs int64) (*twinlogv1.MetadataDelta, *twinlogv1.RegisterBrokerResponse) {
	resp := &twinlogv1.RegisterBrokerResponse{ClusterId: s.clusterID}
	id := req.GetBrokerId()
	if id < 0 {
		resp.Error, resp.ErrorMessage = ecInvalid, "broker id must be >= 0"
		return nil, resp
	}
	if req.GetClusterId() != "" && s.clusterID != "" && req.GetClusterId() != s.clusterID {
		resp.Error, resp.ErrorMessage = ecInvalid, "cluster id mismatch: this is "+s.clusterID
		return nil, resp
	}
	old := s.brokers[id]
	epoch := s.offset + 1
	if old != nil && old.GetBrokerEpoch() >= epoch {
		epoch = old.GetBrokerEpoch() + 1
	}
	dirs := slices.Clone(req.GetLogDirs())
	slices.Sort(dirs)
	t := s.view()
	t.putBroker(&twinlogv1.BrokerRecord{
		BrokerId:      id,
		Host:          req.GetHost(),
		Port:          req.GetPort(),
		IncarnationId: req.GetIncarnationId(),
		BrokerEpoch:   epoch,
		Fenced:        true,
		LogDirs:       dirs,
	})
	if old != nil {
		clean := req.GetPreviousBrokerEpoch() >= 0 && req.GetPreviousBrokerEpoch() == old.GetBrokerEpoch()
		switch {
		case !clean:
			t.removeFromISRs(id, true)
		case !old.GetFenced():
			t.removeFromISRs(id, false)
		}
	}
	t.electLeaderless()
	s.heartbeatMs[id] = nowMs
	resp.BrokerEpoch = epoch
	return t.delta(), resp
}

// Heartbeat handles a broker heartbeat (SPEC §3.2): STALE_BROKER_EPOCH for a
// stale epoch; unfences a fenced broker once its applied metadata offset
// reaches its registration (its epoch); wantShutDown starts controlled
// shutdown: the broker leaves every ISR (leadership moves away in the same
// change) and shutdown is granted once it leads nothing.
func (s *State) Heartbeat(req *twinlogv1.BrokerHeartbeatRequest, nowMs int64) (*twinlogv1.MetadataDelta, *twinlogv1.BrokerHeartbeatResponse) {
	id := req.GetBrokerId()
	br := s.brokers[id]
	if br == nil || br.GetBrokerEpoch() != req.GetBrokerEpoch() {
		return nil, &twinlogv1.BrokerHeartbeatResponse{Error: ecStale, IsFenced: true}
	}
	s.heartbeatMs[id] = nowMs
	t := s.view()
	n := cloneB(br)
	dirs := slices.Clone(req.GetOfflineLogDirs())
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	dirsFailed := len(dirs) > 0 && !slices.Equal(dirs, br.GetOfflineLogDirs())
	n.OfflineLogDirs = dirs
	caughtUp := req.GetAppliedOffset() >= br.GetBrokerEpoch()
	resp := &twinlogv1.BrokerHeartbeatResponse{IsCaughtUp: caughtUp}
	if req.GetWantShutDown() {
		if !n.GetFenced() {
			n.InControlledShutdown = true
		}
		t.putBroker(n)
		t.removeFromISRs(id, false)
		resp.ShouldShutDown = n.GetFenced() || !t.leadsAny(id)
	} else {
		unfence := n.GetFenced() && caughtUp && !n.GetInControlledShutdown()
		if unfence {
			n.Fenced = false
		}
		t.putBroker(n)
		if dirsFailed {
			t.removeFromISRs(id, false)
		}
		if unfence || dirsFailed {
			t.electLeaderless()
		}
	}
	resp.IsFenced = t.broker(id).GetFenced()
	return t.delta(), resp
}

func (t *txn) leadsAny(b int32) bool {
	for _, p := range t.partitionsOf(b) {
		if p.GetLeader() == b {
			return true
		}
	}
	return false
}

// TickResult is what Tick asks of the shell besides persisting its delta.
type TickResult struct {
	// StartRounds are unclean recovery rounds to run now (SPEC §3.5): send
	// GetReplicaLogInfo to each candidate and call CompleteRecoveryRound.
	StartRounds []Round
	// EndedRounds were expired (deadline passed) or cancelled (trigger no
	// longer holds); their answers, if any, will be discarded.
	EndedRounds []Round
}

// Tick fences brokers whose last heartbeat is older than
// broker.session.timeout.ms (removed from every ISR, not ELR), re-runs the
// election for leaderless partitions and plans recovery rounds. Heartbeat
// times are soft state: a broker with none (after Restore) gets a full
// session from its first Tick.
func (s *State) Tick(nowMs int64) (*twinlogv1.MetadataDelta, TickResult) {
	t := s.view()
	timeout := atoi(t.clusterConfigValue(KeyBrokerSessionTimeoutMs), 9000)
	for _, id := range t.brokerIDs() {
		br := t.broker(id)
		if br.GetFenced() {
			continue
		}
		last, ok := s.heartbeatMs[id]
		if !ok {
			s.heartbeatMs[id] = nowMs
			continue
		}
		if nowMs-last > timeout {
			n := cloneB(br)
			n.Fenced = true
			t.putBroker(n)
			t.removeFromISRs(id, false)
		}
	}
	t.electLeaderless()
	res := s.planRounds(t, nowMs)
	return t.delta(), res
}

// FenceBroker fences b at once (operator action or a test): the same change
// as a session timeout.
func (s *State) FenceBroker(b int32) *twinlogv1.MetadataDelta {
	br := s.brokers[b]
	if br == nil || br.GetFenced() {
		return nil
	}
	t := s.view()
	n := cloneB(br)
	n.Fenced = true
	t.putBroker(n)
	t.removeFromISRs(b, false)
	t.electLeaderless()
	return t.delta()
}
