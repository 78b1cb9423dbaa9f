package metadata

import (
	"testing"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestImageScram: deltas set and remove credentials by user and mechanism,
// a snapshot (also gathered from pages) carries them.
func TestImageScram(t *testing.T) {
	s256, s512 := twinlogv1.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_256, twinlogv1.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_512
	cred := func(user string, m twinlogv1.ScramMechanism, it int32) *twinlogv1.UserScramCredentialRecord {
		return &twinlogv1.UserScramCredentialRecord{Name: user, Mechanism: m, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("v"), Iterations: it}
	}
	img := New("c")
	if err := img.Apply(&twinlogv1.MetadataDelta{Offset: 1, ScramCredentials: []*twinlogv1.UserScramCredentialRecord{
		cred("bob", s512, 4096), cred("alice", s512, 4096), cred("alice", s256, 4096)}}); err != nil {
		t.Fatal(err)
	}
	if err := img.Apply(&twinlogv1.MetadataDelta{Offset: 2, ScramCredentials: []*twinlogv1.UserScramCredentialRecord{cred("alice", s512, 8192)},
		RemovedScramCredentials: []*twinlogv1.UserScramCredentialRecord{{Name: "bob", Mechanism: s512}}}); err != nil {
		t.Fatal(err)
	}
	all := img.ScramCredentials()
	if img.ScramCount() != 2 || len(all) != 2 || all[0].GetMechanism() != s256 || img.ScramCredential("alice", s512).GetIterations() != 8192 ||
		img.ScramCredential("bob", s512) != nil {
		t.Fatalf("credentials %v", all)
	}
	snap := img.Snapshot()
	if back := FromSnapshot(snap); back.ScramCount() != 2 || !proto.Equal(back.Snapshot(), snap) {
		t.Fatalf("restored %v", back.ScramCredentials())
	}
	f := NewFollower(10)
	f.Take(&twinlogv1.FetchMetadataResponse{Snapshot: &twinlogv1.MetadataSnapshot{Offset: 2, ClusterId: "c", ScramCredentials: snap.ScramCredentials[:1]},
		NextSnapshotCursor: &twinlogv1.SnapshotCursor{Offset: 2, Position: 1}})
	got := f.Take(&twinlogv1.FetchMetadataResponse{SnapshotPosition: 1, Snapshot: &twinlogv1.MetadataSnapshot{Offset: 2, ScramCredentials: snap.ScramCredentials[1:]}})
	if got.Step != Apply || FromSnapshot(got.Apply.GetSnapshot()).ScramCount() != 2 {
		t.Fatalf("gathered snapshot: %+v", got)
	}
}
