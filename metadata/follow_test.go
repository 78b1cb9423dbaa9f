package metadata

import (
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestSnapshotPagesRefusesBadPages: the accumulation joins only pages that
// continue it, stays within its cap, and restarts on a first page; any
// refused page resets it, so the next request asks for the first page.
func TestSnapshotPagesRefusesBadPages(t *testing.T) {
	parts := func(n int) []*twinlogv1.PartitionRecord {
		out := make([]*twinlogv1.PartitionRecord, n)
		for i := range out {
			out[i] = &twinlogv1.PartitionRecord{Topic: "t", Partition: int32(i)}
		}
		return out
	}
	first := func(offset int64, n int, next int64) *twinlogv1.FetchMetadataResponse {
		r := &twinlogv1.FetchMetadataResponse{Snapshot: &twinlogv1.MetadataSnapshot{Offset: offset, ClusterId: "c",
			ClusterConfig: &twinlogv1.ClusterConfigRecord{}, Partitions: parts(n)}}
		if next >= 0 {
			r.NextSnapshotCursor = &twinlogv1.SnapshotCursor{Offset: offset, Position: next}
		}
		return r
	}
	page := func(offset, pos int64, n int, next int64) *twinlogv1.FetchMetadataResponse {
		r := &twinlogv1.FetchMetadataResponse{Snapshot: &twinlogv1.MetadataSnapshot{Offset: offset, Partitions: parts(n)}, SnapshotPosition: pos}
		if next >= 0 {
			r.NextSnapshotCursor = &twinlogv1.SnapshotCursor{Offset: offset, Position: next}
		}
		return r
	}
	withDeltas := func(r *twinlogv1.FetchMetadataResponse) *twinlogv1.FetchMetadataResponse {
		r.Deltas = []*twinlogv1.MetadataDelta{{Offset: r.GetSnapshot().GetOffset() + 1}}
		return r
	}
	for _, tc := range []struct {
		name  string
		pages []*twinlogv1.FetchMetadataResponse
		cap   int64
		err   string // of the last page; "" means it completes the snapshot
	}{
		{"three pages", []*twinlogv1.FetchMetadataResponse{first(5, 2, 2), page(5, 2, 2, 4), withDeltas(page(5, 4, 1, -1))}, 10, ""},
		{"one page", []*twinlogv1.FetchMetadataResponse{withDeltas(first(5, 3, -1))}, 10, ""},
		{"restart on a newer snapshot", []*twinlogv1.FetchMetadataResponse{first(5, 2, 2), first(9, 2, 2), page(9, 2, 1, -1)}, 10, ""},
		{"continuation without a first page", []*twinlogv1.FetchMetadataResponse{page(5, 2, 2, -1)}, 10, "no snapshot in progress"},
		{"page of another snapshot", []*twinlogv1.FetchMetadataResponse{first(5, 2, 2), page(9, 2, 1, -1)}, 10, "does not continue"},
		{"page at another position", []*twinlogv1.FetchMetadataResponse{first(5, 2, 2), page(5, 3, 1, -1)}, 10, "does not continue"},
		{"partial page without items", []*twinlogv1.FetchMetadataResponse{first(5, 2, 2), page(5, 2, 0, 2)}, 10, "without items"},
		{"partial page with deltas", []*twinlogv1.FetchMetadataResponse{withDeltas(first(5, 2, 2))}, 10, "carries 1 deltas"},
		{"next cursor skips items", []*twinlogv1.FetchMetadataResponse{first(5, 2, 3)}, 10, "names the next page"},
		{"next cursor of another snapshot", []*twinlogv1.FetchMetadataResponse{func() *twinlogv1.FetchMetadataResponse {
			r := first(5, 2, 2)
			r.NextSnapshotCursor.Offset = 6
			return r
		}()}, 10, "names the next page"},
		{"past the cap", []*twinlogv1.FetchMetadataResponse{first(5, 2, 2), page(5, 2, 2, -1)}, 3, "exceeds the cluster caps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewFollower(tc.cap)
			var snap *twinlogv1.MetadataSnapshot
			var err error
			for i, r := range tc.pages {
				snap, err = a.add(r)
				if i < len(tc.pages)-1 && (err != nil || snap != nil) {
					t.Fatalf("page %d: %v, complete %v", i, err, snap != nil)
				}
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("last page: %v, want an error containing %q", err, tc.err)
				}
				if a.Cursor() != nil {
					t.Fatalf("refused page left cursor %v", a.Cursor())
				}
				return
			}
			if err != nil || snap == nil {
				t.Fatalf("last page: %v, complete %v", err, snap != nil)
			}
			last := tc.pages[len(tc.pages)-1].GetSnapshot()
			var want int64
			for _, r := range tc.pages {
				if r.GetSnapshotPosition() == 0 {
					want = 0
				}
				want += int64(len(r.GetSnapshot().GetPartitions()))
			}
			if snap.GetOffset() != last.GetOffset() || int64(len(snap.GetPartitions())) != want || snap.GetClusterId() != "c" || a.Cursor() != nil {
				t.Fatalf("snapshot %d with %d partitions, cluster %q, cursor %v; want %d with %d", snap.GetOffset(),
					len(snap.GetPartitions()), snap.GetClusterId(), a.Cursor(), last.GetOffset(), want)
			}
		})
	}
}

// TestTake: what each kind of FetchMetadata answer asks of the image's
// owner, and that ApplyTo applies a gathered snapshot and only the deltas
// above the image.
func TestTake(t *testing.T) {
	f := NewFollower(10)
	if got := f.Take(&twinlogv1.FetchMetadataResponse{HighOffset: 4}); got.Step != Wait {
		t.Fatalf("no news: %+v", got)
	}
	// A two-page snapshot: the first page is gathered, the second completes it.
	first := &twinlogv1.FetchMetadataResponse{Snapshot: &twinlogv1.MetadataSnapshot{Offset: 3, ClusterId: "c",
		Topics: []*twinlogv1.TopicRecord{{Name: "t", TopicId: "x", PartitionCount: 1}}},
		NextSnapshotCursor: &twinlogv1.SnapshotCursor{Offset: 3, Position: 1}}
	if got := f.Take(first); got.Step != Wait || f.Cursor().GetPosition() != 1 {
		t.Fatalf("first page: %+v, cursor %v", got, f.Cursor())
	}
	last := &twinlogv1.FetchMetadataResponse{ClusterId: "c", SnapshotPosition: 1,
		Snapshot: &twinlogv1.MetadataSnapshot{Offset: 3, Partitions: []*twinlogv1.PartitionRecord{{Topic: "t", TopicId: "x", Partition: 0, Leader: -1}}},
		Deltas:   []*twinlogv1.MetadataDelta{{Offset: 3}, {Offset: 4, Brokers: []*twinlogv1.BrokerRecord{{BrokerId: 1, BrokerEpoch: 4}}}}}
	got := f.Take(last)
	if got.Step != Apply || got.Apply.GetSnapshot().GetOffset() != 3 || len(got.Apply.GetDeltas()) != 2 || f.Cursor() != nil {
		t.Fatalf("last page: %+v, cursor %v", got, f.Cursor())
	}
	img := New("")
	if err := ApplyTo(img, got.Apply); err != nil {
		t.Fatal(err)
	}
	if img.Offset() != 4 || img.Topic("t") == nil || img.Partition("t", 0) == nil || img.Broker(1) == nil {
		t.Fatalf("image at %d: topic %v partition %v broker %v", img.Offset(), img.Topic("t"), img.Partition("t", 0), img.Broker(1))
	}
	// A refused cursor restarts the snapshot; OFFSET_OUT_OF_RANGE reloads.
	f.Take(first)
	if got := f.Take(&twinlogv1.FetchMetadataResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST}); got.Step != Restart || got.Err == nil || f.Cursor() != nil {
		t.Fatalf("refused cursor: %+v, cursor %v", got, f.Cursor())
	}
	f.Take(first)
	if got := f.Take(&twinlogv1.FetchMetadataResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE}); got.Step != Reload || f.Cursor() != nil {
		t.Fatalf("out of range: %+v, cursor %v", got, f.Cursor())
	}
	// Deltas without a snapshot end a partial one and are applied.
	f.Take(first)
	got = f.Take(&twinlogv1.FetchMetadataResponse{Deltas: []*twinlogv1.MetadataDelta{{Offset: 5}}})
	if got.Step != Apply || f.Cursor() != nil {
		t.Fatalf("deltas: %+v, cursor %v", got, f.Cursor())
	}
	// A new first page while gathering is a replaced snapshot.
	f.Take(first)
	if got := f.Take(first); !got.Replaced {
		t.Fatalf("a first page while gathering: %+v", got)
	}
}
