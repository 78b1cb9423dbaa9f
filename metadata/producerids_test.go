package metadata

import (
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"google.golang.org/protobuf/proto"
)

// TestProducerIDSpace: the stored producer.id.space wins; unset (or, never
// stored, unparsable) the space is derived from the cluster id: the same
// for the same id, within 1..MaxProducerIDSpace. Ids of a space carry it in
// their top bits.
func TestProducerIDSpace(t *testing.T) {
	for _, tc := range []struct {
		cfg  map[string]string
		id   string
		want int32
	}{
		{map[string]string{KeyProducerIDSpace: "1"}, "cluster-a", 1},
		{map[string]string{KeyProducerIDSpace: "32767"}, "cluster-a", MaxProducerIDSpace},
		{nil, "cluster-a", DerivedProducerIDSpace("cluster-a")},
		{map[string]string{KeyMinInsyncReplicas: "2"}, "cluster-b", DerivedProducerIDSpace("cluster-b")},
		{map[string]string{KeyProducerIDSpace: "0"}, "cluster-b", DerivedProducerIDSpace("cluster-b")},
	} {
		if got := ProducerIDSpace(tc.cfg, tc.id); got != tc.want {
			t.Errorf("ProducerIDSpace(%v, %q) = %d, want %d", tc.cfg, tc.id, got, tc.want)
		}
	}
	seen := map[int32]string{}
	for _, id := range []string{"", "a", "b", "cluster-a", "cluster-b", "twinlog-0123456789abcdef"} {
		s := DerivedProducerIDSpace(id)
		if s < 1 || s > MaxProducerIDSpace || s != DerivedProducerIDSpace(id) {
			t.Errorf("derived space of %q: %d", id, s)
		}
		if other, ok := seen[s]; ok {
			t.Errorf("%q and %q derive space %d", id, other, s)
		}
		seen[s] = id
	}
	for _, s := range []int32{1, 2, MaxProducerIDSpace} {
		first := FirstProducerID(s)
		last := first + ProducerIDCounterLimit - 1
		if first <= 0 || last <= first || ProducerIDSpaceOf(first) != s || ProducerIDSpaceOf(last) != s {
			t.Errorf("space %d: ids [%d, %d] of spaces %d..%d", s, first, last, ProducerIDSpaceOf(first), ProducerIDSpaceOf(last))
		}
	}
}

// TestImageKeepsProducerIDs: the producer id allocation is applied from a
// delta, kept by Snapshot and Restore, and carried by a follower's first
// snapshot page.
func TestImageKeepsProducerIDs(t *testing.T) {
	rec := &twinlogv1.ProducerIdsRecord{BrokerId: 2, BrokerEpoch: 7, NextProducerId: FirstProducerID(3) + 2000}
	img := New("c")
	if err := img.Apply(&twinlogv1.MetadataDelta{Offset: 1, ProducerIds: rec}); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(img.ProducerIDs(), rec) {
		t.Fatalf("applied: %v", img.ProducerIDs())
	}
	snap := img.Snapshot()
	if !proto.Equal(snap.GetProducerIds(), rec) || FromSnapshot(snap).ProducerIDs().GetNextProducerId() != rec.GetNextProducerId() {
		t.Fatalf("snapshot %v", snap)
	}
	// Another delta without the record keeps it.
	if err := img.Apply(&twinlogv1.MetadataDelta{Offset: 2}); err != nil || !proto.Equal(img.ProducerIDs(), rec) {
		t.Fatalf("after an unrelated delta: %v, %v", img.ProducerIDs(), err)
	}
	f := NewFollower(10)
	f.Take(&twinlogv1.FetchMetadataResponse{Snapshot: &twinlogv1.MetadataSnapshot{Offset: 3, ClusterId: "c", ProducerIds: rec,
		Brokers: []*twinlogv1.BrokerRecord{{BrokerId: 1}}}, NextSnapshotCursor: &twinlogv1.SnapshotCursor{Offset: 3, Position: 1}})
	got := f.Take(&twinlogv1.FetchMetadataResponse{SnapshotPosition: 1, Snapshot: &twinlogv1.MetadataSnapshot{Offset: 3,
		Brokers: []*twinlogv1.BrokerRecord{{BrokerId: 2}}}})
	if got.Step != Apply || !proto.Equal(got.Apply.GetSnapshot().GetProducerIds(), rec) {
		t.Fatalf("gathered snapshot: %+v", got)
	}
}
