package metadata

import (
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"google.golang.org/protobuf/proto"
)

func rs(b ...int32) []int32 { return b }

// ClonePartition and PartitionEqual are hand-written for speed; they must know every
// PartitionRecord field.
func TestPartitionRecordFieldsCovered(t *testing.T) {
	fields := (&twinlogv1.PartitionRecord{}).ProtoReflect().Descriptor().Fields()
	if fields.Len() != partitionFields {
		t.Fatalf("PartitionRecord has %d fields, ClonePartition/PartitionEqual know %d: update records.go", fields.Len(), partitionFields)
	}
	full := &twinlogv1.PartitionRecord{Topic: "t", TopicId: "i", Partition: 1, Replicas: rs(1, 2), Isr: rs(1), Elr: rs(2),
		LastKnownElr: rs(2), LastKnownLeader: 2, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 4, RecoveryState: twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING,
		AddingReplicas: rs(2), RemovingReplicas: rs(1), TruncationPoints: []*twinlogv1.TruncationPoint{{LeaderEpoch: 1, Offset: 2}}}
	c := ClonePartition(full)
	if !proto.Equal(c, full) || !PartitionEqual(c, full) {
		t.Fatalf("clone %v differs from %v", c, full)
	}
	// Every field set in full must be compared: clearing any one breaks
	// equality.
	for i := range fields.Len() {
		f := fields.Get(i)
		x := ClonePartition(full)
		x.ProtoReflect().Clear(f)
		if PartitionEqual(x, full) {
			t.Errorf("PartitionEqual ignores field %s", f.Name())
		}
		if x.ProtoReflect().Has(f) {
			t.Errorf("field %s not cleared", f.Name())
		}
	}
	c.Isr[0] = 9
	c.TruncationPoints[0].Offset = 9
	if full.Isr[0] != 1 || full.TruncationPoints[0].GetOffset() != 2 {
		t.Fatal("clone shares memory with the original")
	}
}
