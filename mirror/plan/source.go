package plan

import (
	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// SourceView is what a source-cluster broker knows when it answers
// GetLastMirroredEpochs for one partition (SPEC §6.4).
type SourceView struct {
	// HasStateTopic is false when the cluster has no __mirror_state: any
	// broker then answers.
	HasStateTopic bool
	// StateLeader: this broker leads the topic's __mirror_state partition.
	StateLeader bool
	// CaughtUp: it has read that partition up to its HW in its current LE.
	CaughtUp bool
	// LocalTopicID is the local topic's id ("" if the topic is unknown).
	LocalTopicID string
	// PartitionCount is the local topic's partition count, Partition the
	// partition asked for.
	PartitionCount, Partition int32
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
// that is not STOPPED (desired and applied). A topic or partition this
// cluster does not have is UNKNOWN_TOPIC_OR_PARTITION, a local topic whose id
// differs from the requester's INCONSISTENT_TOPIC_ID: both are fatal to the
// requester's run (Fatal), which then fails before it bumps or truncates.
// SPEC §6.4 answers −1 for them, and −1 tells the requester to truncate
// everything: a topic deleted (or re-created) on the source would erase its
// mirror, the copy that was to survive it (docs/spec-deviations.md).
// Otherwise the record's lmle, or −1 if there is no record, there is no
// __mirror_state, or the record was mirrored from another cluster than the
// requester.
func AnswerLastMirroredEpoch(requesterClusterID, topicID string, v SourceView) (twinlog.Epoch, twinlogv1.ErrorCode) {
	if v.HasStateTopic {
		switch {
		case !v.StateLeader:
			return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
		case !v.CaughtUp:
			return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS
		}
	}
	if code := SourceTopicCheck(v.LocalTopicID, v.PartitionCount, v.Partition, topicID); code != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return twinlog.NoEpoch, code
	}
	switch {
	case !v.HasStateTopic:
		return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_NONE
	case v.InMirror && (v.DesiredState != twinlogv1.MirrorState_MIRROR_STATE_STOPPED ||
		v.RunState != twinlogv1.MirrorState_MIRROR_STATE_STOPPED):
		return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_SOURCE
	case v.Record == nil, v.Record.GetSourceClusterId() != requesterClusterID:
		return twinlog.NoEpoch, twinlogv1.ErrorCode_ERROR_CODE_NONE
	}
	return twinlog.Epoch(v.Record.GetLmle()), twinlogv1.ErrorCode_ERROR_CODE_NONE
}

// SourceTopicCheck is whether the source still has the partition a mirror
// copies: the source's topic (id sourceTopicID, "" if it has none, with
// partitionCount partitions) must hold the partition and carry the mirror
// topic's id topicID. Else UNKNOWN_TOPIC_OR_PARTITION or
// INCONSISTENT_TOPIC_ID, both Fatal. The source applies it when it answers
// GetLastMirroredEpochs (AnswerLastMirroredEpoch); the destination applies it
// to the source's Metadata before it asks, so that both views must be stale
// for a lost topic to pass.
func SourceTopicCheck(sourceTopicID string, partitionCount, partition int32, topicID string) twinlogv1.ErrorCode {
	switch {
	case sourceTopicID == "", partition < 0, partition >= partitionCount:
		return twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
	case sourceTopicID != topicID:
		return twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID
	}
	return twinlogv1.ErrorCode_ERROR_CODE_NONE
}

// MirrorFetchTopicID is the source's topic-id check of a Fetch{MIRROR}
// partition: a requester naming a topic id (the one its mirror topic took
// from the source) that differs from the local topic's gets
// INCONSISTENT_TOPIC_ID, fatal to its run. Without it a topic deleted and
// re-created between the requester's Metadata and its fetch would answer
// OFFSET_OUT_OF_RANGE or a DivergingEpoch from another topic's log, and the
// requester would truncate its copy to match. An empty requested id is not
// checked (requesters that predate the field), nor are other fetchers'.
func MirrorFetchTopicID(fetcher twinlogv1.FetcherType, requestedID, localID string) twinlogv1.ErrorCode {
	if fetcher == twinlogv1.FetcherType_FETCHER_TYPE_MIRROR && requestedID != "" && requestedID != localID {
		return twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID
	}
	return twinlogv1.ErrorCode_ERROR_CODE_NONE
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
