package metastate

import (
	"fmt"
	"math"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
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
	resp := &twinlogv1.RegisterBrokerResponse{ClusterId: s.ClusterID()}
	id := req.GetBrokerId()
	if id < 0 {
		resp.Error, resp.ErrorMessage = ecInvalid, "broker id must be >= 0"
		return nil, resp
	}
	if req.GetClusterId() != "" && s.ClusterID() != "" && req.GetClusterId() != s.ClusterID() {
		resp.Error, resp.ErrorMessage = ecInvalid, "cluster id mismatch: this is "+s.ClusterID()
		return nil, resp
	}
	if err := validateRegistration(req); err != nil {
		resp.Error, resp.ErrorMessage = ecInvalid, err.Error()
		return nil, resp
	}
	old := s.Broker(id)
	if old != nil && old.GetIncarnationId() != req.GetIncarnationId() && s.liveSession(old, nowMs) {
		resp.Error = twinlogv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION
		resp.ErrorMessage = fmt.Sprintf("broker %d is registered by another incarnation whose session is live; retry after broker.session.timeout.ms", id)
		return nil, resp
	}
	epoch := s.Offset() + 1
	if old != nil && old.GetBrokerEpoch() >= epoch {
		if old.GetBrokerEpoch() == math.MaxInt64 {
			resp.Error, resp.ErrorMessage = ecInvalid, fmt.Sprintf("broker %d: broker epoch exhausted (at MaxInt64); unregister it", id)
			return nil, resp
		}
		epoch = old.GetBrokerEpoch() + 1
	}
	dirs := slices.Clone(req.GetLogDirs())
	slices.Sort(dirs)
	t := s.view()
	t.putBroker(&twinlogv1.BrokerRecord{
		BrokerId:      id,
		Host:          req.GetHost(),
		Port:          req.GetPort(),
		KafkaHost:     req.GetKafkaHost(),
		KafkaPort:     req.GetKafkaPort(),
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

// Registration string bounds: generous for every real value (a DNS name is
// at most 253 bytes, a path at most PATH_MAX), small enough that a request
// cannot make every broker record, snapshot and metadata response huge.
const (
	MaxRegistrationHostLength = 255
	MaxIncarnationIDLength    = 128
	MaxClusterIDLength        = 255
	MaxRegistrationLogDirs    = 64
	MaxLogDirLength           = 4096
)

// validateRegistration bounds the strings of a RegisterBroker request.
func validateRegistration(req *twinlogv1.RegisterBrokerRequest) error {
	switch {
	case len(req.GetHost()) > MaxRegistrationHostLength:
		return fmt.Errorf("host is longer than %d bytes", MaxRegistrationHostLength)
	case len(req.GetIncarnationId()) > MaxIncarnationIDLength:
		return fmt.Errorf("incarnation id is longer than %d bytes", MaxIncarnationIDLength)
	case len(req.GetClusterId()) > MaxClusterIDLength:
		return fmt.Errorf("cluster id is longer than %d bytes", MaxClusterIDLength)
	case len(req.GetLogDirs()) > MaxRegistrationLogDirs:
		return fmt.Errorf("%d log dirs, at most %d", len(req.GetLogDirs()), MaxRegistrationLogDirs)
	case req.GetPort() < 0 || req.GetPort() > 65535:
		return fmt.Errorf("port %d out of range", req.GetPort())
	}
	for _, d := range req.GetLogDirs() {
		if len(d) > MaxLogDirLength {
			return fmt.Errorf("a log dir is longer than %d bytes", MaxLogDirLength)
		}
	}
	return nil
}

// liveSession reports whether b's registration still has a session (Kafka's
// hasValidSession): not fenced, not in controlled shutdown (it announced it
// is leaving), and heard from within broker.session.timeout.ms. A broker with
// no heartbeat time (the controller restarted) has a full session from now,
// as Tick gives it.
func (s *State) liveSession(b *twinlogv1.BrokerRecord, nowMs int64) bool {
	if b.GetFenced() || b.GetInControlledShutdown() {
		return false
	}
	last, ok := s.heartbeatMs[b.GetBrokerId()]
	if !ok {
		return true
	}
	return nowMs-last <= s.sessionTimeoutMs()
}

func (s *State) sessionTimeoutMs() int64 {
	return metadata.ConfigInt(s.view().clusterConfigValue(metadata.KeyBrokerSessionTimeoutMs), 9000)
}

// Heartbeat handles a broker heartbeat (SPEC §3.2): STALE_BROKER_EPOCH for a
// stale epoch; unfences a fenced broker once its applied metadata offset
// reaches its registration (its epoch); wantShutDown starts controlled
// shutdown: the broker leaves every ISR (leadership moves away in the same
// change) and shutdown is granted once it leads nothing.
func (s *State) Heartbeat(req *twinlogv1.BrokerHeartbeatRequest, nowMs int64) (*twinlogv1.MetadataDelta, *twinlogv1.BrokerHeartbeatResponse) {
	id := req.GetBrokerId()
	br := s.Broker(id)
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
	timeout := s.sessionTimeoutMs()
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
	br := s.Broker(b)
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

// UnregisterBroker removes a broker that is gone for good (Kafka's
// UnregisterBroker, KIP-500). A broker with a live registration (not fenced)
// is refused: it must be stopped and its session expire first. The broker
// leaves every ISR and ELR as an unclean re-registration would take it out
// (SPEC §3.2, U = {b}), then its record is deleted; it stays in the replica
// sets until a reassignment moves them, and may register again later.
func (s *State) UnregisterBroker(req *twinlogv1.UnregisterBrokerRequest) (*twinlogv1.MetadataDelta, *twinlogv1.UnregisterBrokerResponse) {
	id := req.GetBrokerId()
	br := s.Broker(id)
	switch {
	case br == nil:
		return nil, &twinlogv1.UnregisterBrokerResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_BROKER_ID_NOT_REGISTERED,
			ErrorMessage: fmt.Sprintf("broker %d is not registered", id)}
	case !br.GetFenced():
		return nil, &twinlogv1.UnregisterBrokerResponse{Error: ecInvalid,
			ErrorMessage: fmt.Sprintf("broker %d is not fenced: stop it and wait for its session to expire (broker.session.timeout.ms)", id)}
	}
	t := s.view()
	t.removeFromISRs(id, true)
	t.removeBroker(id)
	t.electLeaderless()
	return t.delta(), &twinlogv1.UnregisterBrokerResponse{}
}
