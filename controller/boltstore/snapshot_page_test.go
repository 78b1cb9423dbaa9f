package boltstore

import (
	"errors"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func pagedSnapshot() *twinlogv1.MetadataSnapshot {
	s := &twinlogv1.MetadataSnapshot{Offset: 20, ClusterId: "c1",
		ClusterConfig: &twinlogv1.ClusterConfigRecord{Configs: map[string]string{"min.insync.replicas": "2"}},
		Brokers:       []*twinlogv1.BrokerRecord{{BrokerId: 1, BrokerEpoch: 3}, {BrokerId: 2, BrokerEpoch: 4}},
		Topics:        []*twinlogv1.TopicRecord{{Name: "t", TopicId: "id", PartitionCount: 5}},
		Mirrors:       []*twinlogv1.MirrorRecord{{Name: "m"}},
		Acls: []*twinlogv1.AclBinding{
			{ResourceType: twinlogv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, ResourceName: "t", PatternType: twinlogv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
				Principal: "User:a", Host: "*", Operation: twinlogv1.AclOperation_ACL_OPERATION_READ, Permission: twinlogv1.AclPermission_ACL_PERMISSION_ALLOW},
			{ResourceType: twinlogv1.AclResourceType_ACL_RESOURCE_TYPE_GROUP, ResourceName: "g", PatternType: twinlogv1.AclPatternType_ACL_PATTERN_TYPE_PREFIXED,
				Principal: "User:a", Host: "*", Operation: twinlogv1.AclOperation_ACL_OPERATION_READ, Permission: twinlogv1.AclPermission_ACL_PERMISSION_ALLOW},
		},
		ScramCredentials: []*twinlogv1.UserScramCredentialRecord{{Name: "alice", Mechanism: twinlogv1.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_512,
			Salt: []byte("salt"), StoredKey: []byte("stored"), ServerKey: []byte("server"), Iterations: 4096}},
	}
	for p := range int32(5) {
		s.Partitions = append(s.Partitions, &twinlogv1.PartitionRecord{Topic: "t", TopicId: "id", Partition: p,
			Replicas: []int32{1, 2}, Isr: []int32{1, 2}, Leader: 1, LeaderEpoch: p})
	}
	return s
}

// TestReadSnapshotPage: pages of every size join into the stored snapshot,
// each within what fits allowed (or one item); the header comes only with
// position 0.
func TestReadSnapshotPage(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "meta.db"))
	if _, err := s.InitClusterID("c1"); err != nil {
		t.Fatal(err)
	}
	if page, err := s.ReadSnapshotPage(func(int64, int64) (int64, error) { return 0, nil }, nil); page != nil || err != nil {
		t.Fatalf("no snapshot stored: %v, %v", page, err)
	}
	for off := int64(1); off <= 20; off++ {
		if err := s.Append(delta(off)); err != nil {
			t.Fatal(err)
		}
	}
	stored := pagedSnapshot()
	if _, err := s.Compact(stored, 0); err != nil {
		t.Fatal(err)
	}
	for _, budget := range []int{0, 30, 60, 100, 1 << 20} {
		joined := &twinlogv1.MetadataSnapshot{}
		pos := int64(0)
		for pages := 0; ; pages++ {
			page, err := s.ReadSnapshotPage(func(offset, items int64) (int64, error) {
				if offset != 20 || items != 12 {
					t.Fatalf("start(%d, %d), want (20, 12)", offset, items)
				}
				return pos, nil
			}, func(size int) bool { return size <= budget })
			if err != nil {
				t.Fatal(err)
			}
			n := page.Next - page.Position
			if page.Position != pos || n < 1 || page.Items != 12 || (n > 1 && proto.Size(page.Snapshot) > budget) {
				t.Fatalf("budget %d, page %d: [%d, %d) of %d, %d bytes", budget, pages, page.Position, page.Next, page.Items, proto.Size(page.Snapshot))
			}
			if (pos == 0) != (page.Snapshot.GetClusterConfig() != nil) || page.Snapshot.GetOffset() != 20 {
				t.Fatalf("budget %d, page at %d: header %v", budget, pos, page.Snapshot)
			}
			proto.Merge(joined, page.Snapshot)
			pos = page.Next
			if pos == page.Items {
				break
			}
		}
		if !proto.Equal(joined, stored) {
			t.Fatalf("budget %d: joined pages %v, stored %v", budget, joined, stored)
		}
	}

	// start's error is returned as is; a position outside the snapshot
	// is refused.
	stop := errors.New("stop")
	if _, err := s.ReadSnapshotPage(func(int64, int64) (int64, error) { return 0, stop }, nil); err != stop {
		t.Fatalf("start error: %v", err)
	}
	for _, pos := range []int64{-1, 12, 1 << 62} {
		if _, err := s.ReadSnapshotPage(func(int64, int64) (int64, error) { return pos, nil }, nil); err == nil {
			t.Fatalf("position %d accepted", pos)
		}
	}

	// A damaged snapshot value is ErrCorrupt, not a panic.
	val, err := proto.MarshalOptions{Deterministic: true}.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"truncated":        val[:len(val)-3],
		"wrong offset":     append([]byte{0x08, 0x07}, val[2:]...),
		"item not bytes":   append(val[:len(val):len(val)], 0x18, 0x01),
		"item undecodable": append(val[:len(val):len(val)], 0x2a, 0x01, 0xff),
	} {
		if err := s.rawPut(bucketSnapshot, keySnapshot, bad); err != nil {
			t.Fatal(err)
		}
		_, err := s.ReadSnapshotPage(func(int64, int64) (int64, error) { return 0, nil }, func(int) bool { return true })
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
