package plan

import (
	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// SourceView is what a source-cluster broker knows when it answers
// GetLastMirroredEpochs for one partition (SPEC §6.4).
type SourceView struct {
	// HasStateTopic is false when the cluster has no __mirror_state: any
	// broker then answers −1.
	HasStateTopic bool
	// StateLeader: this broker leads the topic's __mirror_state partition.
	StateLeader bool
	// CaughtUp: it has read that partition up to its HW in its current LE.
	CaughtUp bool
	// LocalTopicID is the local topic's id ("" if the topic is unknown).
	LocalTopicID string
	// InMirror: the local topic is a member of a mirror on this cluster.
	InMirror bool
	// DesiredState and RunState are, for a mirror member, the controller's
	// desired state and the partition's applied MirrorRunRecord state.
	DesiredState, RunState twinlogv1.MirrorState
	// Record is the applied (topicId, partition) record, nil if none.
	Record *twinlogv1.MirrorLmleRecord
}

// AnswerLastMirroredEpoch is the GetLastMirroredEpochs answer rule (SPEC
// §6.4). It answers a retriable error, never −1, when it cannot know:
// NOT_LEADER_OR_FOLLOWER off the state leader, COORDINATOR_LOAD_IN_PROGRESS
// before it has caught up, INVALID_MIRROR_SOURCE while the topic is a mirror
// that is not STOPPED (desired and applied); otherwise the record's lmle, or
// −1 if there is no record, it was mirrored from another cluster than the
// requester, or the topic id differs.
func AnswerLastMirroredEpoch(requesterClusterID, topicID string, v SourceView) (twinlog.Epoch, twinlogv1.ErrorCode) {
	switch {
	case !v.HasStateTopic:
		return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_NONE
	case !v.StateLeader:
		return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
	case !v.CaughtUp:
		return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS
	case v.InMirror && (v.DesiredState != twinlogv1.MirrorState_MIRROR_STATE_STOPPED ||
		v.RunState != twinlogv1.MirrorState_MIRROR_STATE_STOPPED):
		return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_SOURCE
	case v.Record == nil,
		v.Record.GetSourceClusterId() != requesterClusterID,
		v.LocalTopicID == "" || v.LocalTopicID != topicID:
		return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_NONE
	}
	return twinlog.Epoch(v.Record.GetLmle()), twinlogv1.ErrorCode_ERROR_CODE_NONE
}

// LmleKey keys a MirrorLmleRecord in __mirror_state.
type LmleKey struct {
	TopicID   string
	Partition int32
}

// RunKey keys a MirrorRunRecord in __mirror_state.
type RunKey struct {
	Mirror    string
	TopicID   string
	Partition int32
}

// StateRecord is a __mirror_state value.
type StateRecord interface {
	comparable
	GetStateEpoch() int32
}

// StateTable applies __mirror_state records in log order with the reader
// rule of SPEC §6.4: a record whose stateEpoch is below the last one applied
// for its key is ignored, otherwise the latest wins; a tombstone removes the
// key and resets its stateEpoch.
type StateTable[K comparable, V StateRecord] struct {
	m map[K]V
}

// Apply applies one record (nil V = tombstone) and reports whether it took
// effect.
func (t *StateTable[K, V]) Apply(k K, v V) bool {
	var zero V
	if v == zero {
		_, had := t.m[k]
		delete(t.m, k)
		return had
	}
	if cur, ok := t.m[k]; ok && v.GetStateEpoch() < cur.GetStateEpoch() {
		return false
	}
	if t.m == nil {
		t.m = make(map[K]V)
	}
	t.m[k] = v
	return true
}

// Get returns the applied record for k.
func (t *StateTable[K, V]) Get(k K) (V, bool) {
	v, ok := t.m[k]
	return v, ok
}

// Len is the number of live keys.
func (t *StateTable[K, V]) Len() int { return len(t.m) }
