package metadata

import (
	"testing"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func binding(name, principal string, op twinlogv1.AclOperation) *twinlogv1.AclBinding {
	return &twinlogv1.AclBinding{
		ResourceType: twinlogv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, ResourceName: name,
		PatternType: twinlogv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL, Principal: principal, Host: "*",
		Operation: op, Permission: twinlogv1.AclPermission_ACL_PERMISSION_ALLOW,
	}
}

// TestImageACLs: deltas add and remove bindings by their seven fields (a
// duplicate add is one binding), ACLOffset moves only with them, ACLs are
// sorted, and a snapshot (also one gathered from pages by a Follower)
// carries them.
func TestImageACLs(t *testing.T) {
	read := twinlogv1.AclOperation_ACL_OPERATION_READ
	write := twinlogv1.AclOperation_ACL_OPERATION_WRITE
	img := New("c")
	if err := img.Apply(&twinlogv1.MetadataDelta{Offset: 1, Acls: []*twinlogv1.AclBinding{
		binding("t2", "User:b", read), binding("t1", "User:a", write), binding("t1", "User:a", read), binding("t1", "User:a", read)}}); err != nil {
		t.Fatal(err)
	}
	if img.ACLCount() != 3 || img.ACLOffset() != 1 || !img.HasACL(KeyOf(binding("t1", "User:a", write))) {
		t.Fatalf("after adding: %d bindings at %d: %v", img.ACLCount(), img.ACLOffset(), img.ACLs())
	}
	want := []*twinlogv1.AclBinding{binding("t1", "User:a", read), binding("t1", "User:a", write), binding("t2", "User:b", read)}
	if got := img.ACLs(); len(got) != len(want) || !proto.Equal(got[0], want[0]) || !proto.Equal(got[1], want[1]) || !proto.Equal(got[2], want[2]) {
		t.Fatalf("ACLs %v, want %v", got, want)
	}
	if err := img.Apply(&twinlogv1.MetadataDelta{Offset: 2}); err != nil || img.ACLOffset() != 1 {
		t.Fatalf("an unrelated delta moved ACLOffset to %d (%v)", img.ACLOffset(), err)
	}
	if err := img.Apply(&twinlogv1.MetadataDelta{Offset: 3, RemovedAcls: []*twinlogv1.AclBinding{binding("t1", "User:a", write), binding("nope", "User:a", write)}}); err != nil {
		t.Fatal(err)
	}
	if img.ACLCount() != 2 || img.ACLOffset() != 3 || img.HasACL(KeyOf(binding("t1", "User:a", write))) {
		t.Fatalf("after removing: %v at %d", img.ACLs(), img.ACLOffset())
	}

	snap := img.Snapshot()
	if back := FromSnapshot(snap); back.ACLCount() != 2 || back.ACLOffset() != 3 || !proto.Equal(back.Snapshot(), snap) {
		t.Fatalf("restored: %v", back.ACLs())
	}
	f := NewFollower(10)
	f.Take(&twinlogv1.FetchMetadataResponse{Snapshot: &twinlogv1.MetadataSnapshot{Offset: 3, ClusterId: "c", Acls: snap.Acls[:1]},
		NextSnapshotCursor: &twinlogv1.SnapshotCursor{Offset: 3, Position: 1}})
	got := f.Take(&twinlogv1.FetchMetadataResponse{SnapshotPosition: 1, Snapshot: &twinlogv1.MetadataSnapshot{Offset: 3, Acls: snap.Acls[1:]}})
	if got.Step != Apply || FromSnapshot(got.Apply.GetSnapshot()).ACLCount() != 2 {
		t.Fatalf("gathered snapshot: %+v", got)
	}
}
