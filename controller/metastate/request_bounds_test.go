package metastate

import (
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestReassignHugeTargetRefused: a target list longer than the registered
// brokers is refused before any check that looks at it. Before, a million
// distinct ids went through the quadratic duplicate check first (10^12
// comparisons under the controller's lock); this test then ran into the
// test timeout instead of getting INVALID_REPLICA_ASSIGNMENT.
func TestReassignHugeTargetRefused(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	distinct := make([]int32, 1_000_000)
	for i := range distinct {
		distinct[i] = int32(i + 1)
	}
	same := make([]int32, 1_000_000) // every id 0, duplicated
	for _, tc := range []struct {
		name   string
		target []int32
	}{
		{"a million distinct ids", distinct},
		{"a million duplicates", same},
		{"one more than registered", ids(1, 2, 3, 4)},
		{"duplicates within the bound", ids(1, 1, 2)},
		{"an unregistered broker", ids(1, 2, 7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, resp := h.s.AlterPartitionReassignments(&twinlogv1.AlterPartitionReassignmentsRequest{
				Partitions: []*twinlogv1.ReassignablePartition{{Topic: "t", Partition: 0, Replicas: tc.target}}})
			r := resp.GetResults()[0]
			refused(t, "reassign", d, r.GetError(), twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, r.GetErrorMessage())
		})
	}
	// A valid target still starts.
	d, resp := h.s.AlterPartitionReassignments(&twinlogv1.AlterPartitionReassignmentsRequest{
		Partitions: []*twinlogv1.ReassignablePartition{{Topic: "t", Partition: 0, Replicas: ids(3, 2, 1)}}})
	if r := resp.GetResults()[0]; r.GetError() != ecNone {
		t.Fatalf("valid target refused: %v", r)
	}
	h.apply(d, false)
}

// TestHasDuplicatesLongList: the map path (lists over 16) agrees with the
// pairwise scan.
func TestHasDuplicatesLongList(t *testing.T) {
	long := make([]int32, 40)
	for i := range long {
		long[i] = int32(i)
	}
	if hasDuplicates(long) {
		t.Fatal("distinct ids reported as duplicates")
	}
	long[39] = 0
	if !hasDuplicates(long) {
		t.Fatal("duplicate at the ends missed")
	}
	if !hasDuplicates(ids(4, 5, 4)) || hasDuplicates(ids(4, 5, 6)) {
		t.Fatal("short lists")
	}
}

// TestElectLeadersDuplicatePartition: a partition named twice in one
// request is refused once with INVALID_REQUEST and not elected, as Kafka
// does. Before, it was elected twice, the second time from the record the
// first election had replaced.
func TestElectLeadersDuplicatePartition(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, nil,
		part(ids(1, 2, 3), 2, ids(1, 2, 3), nil, nil, -1, 3, 3),
		part(ids(1, 2, 3), 2, ids(1, 2, 3), nil, nil, -1, 3, 3))
	d, res := h.s.ElectLeaders(&twinlogv1.ElectLeadersRequest{Type: twinlogv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Partitions: []*twinlogv1.TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}, {Topic: "t", Partitions: []int32{0, 0}}}}, 0)
	var dup, elected int
	for _, r := range res.Response.GetResults() {
		switch {
		case r.GetPartition() == 0 && r.GetError() == ecInvalid:
			dup++
		case r.GetPartition() == 1 && r.GetError() == ecNone:
			elected++
		default:
			t.Errorf("unexpected result %v", r)
		}
	}
	if dup != 1 || elected != 1 {
		t.Fatalf("results %v: want one INVALID_REQUEST for partition 0 and partition 1 elected", res.Response.GetResults())
	}
	h.apply(d, false)
	if p := h.s.Partition("t", 0); p.GetLeader() != 2 || p.GetLeaderEpoch() != 3 {
		t.Errorf("partition 0 changed: %v", p)
	}
	if p := h.s.Partition("t", 1); p.GetLeader() != 1 {
		t.Errorf("partition 1 not elected: %v", p)
	}
}
