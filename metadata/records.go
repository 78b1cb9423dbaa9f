package metadata

import (
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Hand-written copy and comparison of PartitionRecord: the controller's
// fence path clones and compares tens of thousands of them, and proto.Clone /
// proto.Equal go through reflection. TestPartitionRecordFieldsCovered fails
// when the message gains a field these functions do not know.

// partitionFields is the number of PartitionRecord fields handled below.
const partitionFields = 15

// ClonePartition is proto.Clone for PartitionRecord.
func ClonePartition(p *twinlogv1.PartitionRecord) *twinlogv1.PartitionRecord {
	if p == nil {
		return nil
	}
	n := &twinlogv1.PartitionRecord{
		Topic:            p.GetTopic(),
		TopicId:          p.GetTopicId(),
		Partition:        p.GetPartition(),
		Replicas:         slices.Clone(p.GetReplicas()),
		Isr:              slices.Clone(p.GetIsr()),
		Elr:              slices.Clone(p.GetElr()),
		LastKnownElr:     slices.Clone(p.GetLastKnownElr()),
		LastKnownLeader:  p.GetLastKnownLeader(),
		Leader:           p.GetLeader(),
		LeaderEpoch:      p.GetLeaderEpoch(),
		PartitionEpoch:   p.GetPartitionEpoch(),
		RecoveryState:    p.GetRecoveryState(),
		AddingReplicas:   slices.Clone(p.GetAddingReplicas()),
		RemovingReplicas: slices.Clone(p.GetRemovingReplicas()),
	}
	if tps := p.GetTruncationPoints(); len(tps) > 0 {
		n.TruncationPoints = make([]*twinlogv1.TruncationPoint, len(tps))
		for i, tp := range tps {
			n.TruncationPoints[i] = &twinlogv1.TruncationPoint{LeaderEpoch: tp.GetLeaderEpoch(), Offset: tp.GetOffset()}
		}
	}
	return n
}

// PartitionEqual is proto.Equal for PartitionRecord (nil and empty repeated
// fields are equal, as in proto).
func PartitionEqual(a, b *twinlogv1.PartitionRecord) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.GetTopic() != b.GetTopic() || a.GetTopicId() != b.GetTopicId() || a.GetPartition() != b.GetPartition() ||
		a.GetLastKnownLeader() != b.GetLastKnownLeader() || a.GetLeader() != b.GetLeader() ||
		a.GetLeaderEpoch() != b.GetLeaderEpoch() || a.GetPartitionEpoch() != b.GetPartitionEpoch() ||
		a.GetRecoveryState() != b.GetRecoveryState() ||
		!slices.Equal(a.GetReplicas(), b.GetReplicas()) || !slices.Equal(a.GetIsr(), b.GetIsr()) ||
		!slices.Equal(a.GetElr(), b.GetElr()) || !slices.Equal(a.GetLastKnownElr(), b.GetLastKnownElr()) ||
		!slices.Equal(a.GetAddingReplicas(), b.GetAddingReplicas()) || !slices.Equal(a.GetRemovingReplicas(), b.GetRemovingReplicas()) {
		return false
	}
	return slices.EqualFunc(a.GetTruncationPoints(), b.GetTruncationPoints(), func(x, y *twinlogv1.TruncationPoint) bool {
		return x.GetLeaderEpoch() == y.GetLeaderEpoch() && x.GetOffset() == y.GetOffset()
	})
}
