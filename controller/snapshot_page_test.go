package controller

import (
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastore/storetest"
)

const ecInvalid = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST

// storedSnapshot is the snapshot in the controller's store, read the way a
// restarting controller reads it: Store has no narrower way to it.
func storedSnapshot(c *Controller) (*twinlogv1.MetadataSnapshot, error) {
	l, err := c.store.Load()
	if err != nil {
		return nil, err
	}
	return l.Snapshot, nil
}

func snapshotItems(s *twinlogv1.MetadataSnapshot) int64 {
	return int64(len(s.GetBrokers()) + len(s.GetTopics()) + len(s.GetPartitions()) + len(s.GetMirrors()))
}

// pageSnapshot walks the stored snapshot from a follower at offset 0 page by
// page (over gRPC, as a broker does) and checks each page against the
// byte bound FetchMetadata guarantees: the whole response is at most budget
// encoded bytes, or it holds exactly one snapshot item and no deltas. It
// returns the pages joined, the number of pages and the last response.
func pageSnapshot(t *testing.T, h *harness, budget int) (joined *twinlogv1.MetadataSnapshot, pages int, last *twinlogv1.FetchMetadataResponse) {
	t.Helper()
	var cursor *twinlogv1.SnapshotCursor
	for {
		resp, err := h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: 1, SnapshotCursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetError() != ecNone {
			t.Fatalf("page %d: %v %s", pages, resp.GetError(), resp.GetErrorMessage())
		}
		page := resp.GetSnapshot()
		if page == nil {
			t.Fatalf("page %d: no snapshot", pages)
		}
		items := snapshotItems(page)
		if size := proto.Size(resp); size > budget && (items != 1 || len(resp.GetDeltas()) > 0) {
			t.Fatalf("page %d: %d bytes with %d items and %d deltas, budget %d", pages, size, items, len(resp.GetDeltas()), budget)
		}
		if pages == 0 {
			if resp.GetSnapshotPosition() != 0 || page.GetClusterConfig() == nil || page.GetClusterId() == "" {
				t.Fatalf("first page: position %d, cluster id %q, cluster config %v", resp.GetSnapshotPosition(), page.GetClusterId(), page.GetClusterConfig())
			}
			joined = &twinlogv1.MetadataSnapshot{Offset: page.GetOffset(), ClusterId: page.GetClusterId(), ClusterConfig: page.GetClusterConfig()}
		} else {
			if page.GetOffset() != joined.GetOffset() || resp.GetSnapshotPosition() != cursor.GetPosition() {
				t.Fatalf("page %d: snapshot %d at %d, asked for %v", pages, page.GetOffset(), resp.GetSnapshotPosition(), cursor)
			}
			if page.GetClusterId() != "" || page.GetClusterConfig() != nil {
				t.Fatalf("page %d repeats the header: %q %v", pages, page.GetClusterId(), page.GetClusterConfig())
			}
		}
		if items == 0 && snapshotItems(joined) > 0 {
			t.Fatalf("page %d: no items", pages)
		}
		joined.Brokers = append(joined.Brokers, page.GetBrokers()...)
		joined.Topics = append(joined.Topics, page.GetTopics()...)
		joined.Partitions = append(joined.Partitions, page.GetPartitions()...)
		joined.Mirrors = append(joined.Mirrors, page.GetMirrors()...)
		pages++
		cursor = resp.GetNextSnapshotCursor()
		if cursor == nil {
			return joined, pages, resp
		}
		if len(resp.GetDeltas()) > 0 {
			t.Fatalf("partial page %d carries %d deltas", pages-1, len(resp.GetDeltas()))
		}
		if cursor.GetOffset() != joined.GetOffset() || cursor.GetPosition() != snapshotItems(joined) {
			t.Fatalf("page %d: next cursor %v after %d items of snapshot %d", pages-1, cursor, snapshotItems(joined), joined.GetOffset())
		}
	}
}

// TestFetchMetadataSnapshotPages (issue 13): a snapshot larger than
// metadata.fetch.max.bytes comes in pages, each response within the budget,
// that join into exactly the stored snapshot; the deltas after it come with
// the last page or after it. Before, the whole snapshot was one response,
// which past the gRPC message limit no broker could ever receive.
func TestFetchMetadataSnapshotPages(t *testing.T) {
	const budget = 4 << 10
	h := startController(t, t.TempDir(), newClock(), newNet(), func(c *Config) {
		c.MaxFetchBytes = budget
		c.RetainDeltas = 1
	})
	h.upBrokers(3)
	for i := range 3 {
		h.createTopic(fmt.Sprintf("topic-%d", i), 100, 3, nil)
	}
	if err := h.c.Compact(); err != nil {
		t.Fatal(err)
	}
	h.createTopic("after", 2, 3, nil)
	stored, err := storedSnapshot(h.c)
	if err != nil {
		t.Fatal(err)
	}
	if size := proto.Size(stored); size < 4*budget {
		t.Fatalf("stored snapshot of %d bytes is too small for the test (budget %d)", size, budget)
	}

	joined, pages, last := pageSnapshot(t, h, budget)
	if !proto.Equal(joined, stored) {
		t.Fatalf("%d pages joined differ from the stored snapshot", pages)
	}
	if n := snapshotItems(stored); int64(pages) >= n || pages < 4 {
		t.Fatalf("%d pages for %d items under a %d-byte budget", pages, n, budget)
	}
	// The follower then continues with the deltas after the snapshot, from
	// the last page or the log.
	applied := joined.GetOffset()
	for _, d := range last.GetDeltas() {
		if d.GetOffset() != applied+1 {
			t.Fatalf("last page: delta %d after %d", d.GetOffset(), applied)
		}
		applied = d.GetOffset()
	}
	for applied < h.c.Offset() {
		resp, err := h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: applied + 1})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetSnapshot() != nil || len(resp.GetDeltas()) == 0 || resp.GetDeltas()[0].GetOffset() != applied+1 {
			t.Fatalf("from %d after the snapshot: snapshot %v, %d deltas", applied+1, resp.GetSnapshot() != nil, len(resp.GetDeltas()))
		}
		applied = resp.GetDeltas()[len(resp.GetDeltas())-1].GetOffset()
	}

	// A stale cursor: a compaction replaced the snapshot it pages, so the
	// answer is the first page of the new one, never a page of another.
	first, err := h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: 1})
	if err != nil {
		t.Fatal(err)
	}
	stale := first.GetNextSnapshotCursor()
	if stale == nil {
		t.Fatal("first page is the last")
	}
	h.createTopic("later", 1, 3, nil)
	if err := h.c.Compact(); err != nil {
		t.Fatal(err)
	}
	current, err := storedSnapshot(h.c)
	if err != nil {
		t.Fatal(err)
	}
	if current.GetOffset() <= stale.GetOffset() {
		t.Fatalf("compaction kept snapshot %d (cursor at %d)", current.GetOffset(), stale.GetOffset())
	}
	resp, err := h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: 1, SnapshotCursor: stale})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetError() != ecNone || resp.GetSnapshotPosition() != 0 || resp.GetSnapshot().GetOffset() != current.GetOffset() ||
		resp.GetSnapshot().GetClusterConfig() == nil || len(resp.GetSnapshot().GetBrokers()) == 0 {
		t.Fatalf("stale cursor %v: %v at position %d of snapshot %d (current %d)", stale, resp.GetError(),
			resp.GetSnapshotPosition(), resp.GetSnapshot().GetOffset(), current.GetOffset())
	}

	// Malformed cursors are refused in-band; the last valid position
	// answers the last item.
	n := snapshotItems(current)
	off := current.GetOffset()
	for _, cur := range []*twinlogv1.SnapshotCursor{
		{Offset: off, Position: -1},
		{Offset: -1, Position: 0},
		{Offset: off, Position: math.MinInt64},
		{Offset: off, Position: n},
		{Offset: off, Position: n + 1000},
		{Offset: off, Position: math.MaxInt64},
		{Offset: off + 1, Position: 1},
		{Offset: math.MaxInt64, Position: 0},
	} {
		resp, err := h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: 1, SnapshotCursor: cur})
		if err != nil {
			t.Fatalf("cursor %v: %v", cur, err)
		}
		if resp.GetError() != ecInvalid || resp.GetErrorMessage() == "" || resp.GetSnapshot() != nil || len(resp.GetDeltas()) > 0 {
			t.Errorf("cursor %v: %v %q, snapshot %v, %d deltas; want INVALID_REQUEST alone", cur, resp.GetError(),
				resp.GetErrorMessage(), resp.GetSnapshot() != nil, len(resp.GetDeltas()))
		}
	}
	resp, err = h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: 1,
		SnapshotCursor: &twinlogv1.SnapshotCursor{Offset: off, Position: n - 1}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetError() != ecNone || snapshotItems(resp.GetSnapshot()) != 1 || resp.GetNextSnapshotCursor() != nil ||
		!proto.Equal(storetest.Items(resp.GetSnapshot())[0], storetest.Items(current)[n-1]) {
		t.Fatalf("last position: %v, %d items, next %v", resp.GetError(), snapshotItems(resp.GetSnapshot()), resp.GetNextSnapshotCursor())
	}
}

// TestFetchMetadataSnapshotPageAtLeastOneItem: a budget smaller than any
// item still progresses, one item per page.
func TestFetchMetadataSnapshotPageAtLeastOneItem(t *testing.T) {
	h := startController(t, t.TempDir(), newClock(), newNet(), func(c *Config) {
		c.MaxFetchBytes = 1
		c.RetainDeltas = 1
	})
	h.upBrokers(3)
	h.createTopic("t", 5, 3, nil)
	if err := h.c.Compact(); err != nil {
		t.Fatal(err)
	}
	stored, err := storedSnapshot(h.c)
	if err != nil {
		t.Fatal(err)
	}
	joined, pages, _ := pageSnapshot(t, h, 1)
	if !proto.Equal(joined, stored) || int64(pages) != snapshotItems(stored) {
		t.Fatalf("%d pages for %d items; joined equal: %v", pages, snapshotItems(stored), proto.Equal(joined, stored))
	}
}

// TestFetchMetadataCursorWithoutSnapshot: a cursor to a controller that
// never compacted names no snapshot it could have sent.
func TestFetchMetadataCursorWithoutSnapshot(t *testing.T) {
	h := startController(t, t.TempDir(), newClock(), newNet())
	h.upBrokers(1)
	resp, err := h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: 1,
		SnapshotCursor: &twinlogv1.SnapshotCursor{Offset: 1, Position: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetError() != ecInvalid || resp.GetErrorMessage() == "" {
		t.Fatalf("cursor without a stored snapshot: %v %q, want INVALID_REQUEST", resp.GetError(), resp.GetErrorMessage())
	}
}
