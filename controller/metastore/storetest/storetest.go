// Package storetest is the conformance suite of the controller's metadata
// stores: Run plays the same table of behaviours against any of them
// (boltstore's bbolt file, memstore's memory), so that the controller and
// the simulator see one semantics whatever store they run on.
package storetest

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastore"
)

// Store is what the suite drives: the controller's store and the two
// readers every store has beside it.
type Store interface {
	metastore.Store
	// Info reads the scalars.
	Info() (metastore.Info, error)
	// Snapshot returns the stored snapshot, nil if none was written.
	Snapshot() (*twinlogv1.MetadataSnapshot, error)
}

// Run runs the suite. open returns a new, empty store that the test owns
// (it registers its own cleanup). reopen returns s as a restarted
// controller finds it: boltstore closes and opens the file, memstore
// crashes (CrashClone) without syncing more than its writes already did;
// reopen may close s.
func Run(t *testing.T, open func(t *testing.T) Store, reopen func(t *testing.T, s Store) Store) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) Store, reopen func(t *testing.T, s Store) Store)
	}{
		{"ClusterID", testClusterID},
		{"ControllerEpoch", testControllerEpoch},
		{"Append", testAppend},
		{"LoadAfterReopen", testLoadAfterReopen},
		{"ReadDeltas", testReadDeltas},
		{"Compact", testCompact},
		{"CompactRetain", testCompactRetain},
		{"SnapshotPages", testSnapshotPages},
		{"Closed", testClosed},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open, reopen) })
	}
}

// Delta is a delta at offset off with one partition record, distinct per
// offset.
func Delta(off int64) *twinlogv1.MetadataDelta {
	return &twinlogv1.MetadataDelta{
		Offset: off,
		Partitions: []*twinlogv1.PartitionRecord{{
			Topic: "t", Partition: int32(off % 7), Replicas: []int32{1, 2, 3},
			Isr: []int32{1, 2}, Leader: 1, LeaderEpoch: int32(off), PartitionEpoch: int32(off),
		}},
	}
}

// appendRange appends the deltas [from, to], one change set each.
func appendRange(t *testing.T, s Store, from, to int64) {
	t.Helper()
	for off := from; off <= to; off++ {
		if err := s.Append(Delta(off)); err != nil {
			t.Fatalf("append %d: %v", off, err)
		}
	}
}

// checkDeltas fails unless got are the deltas [from, from+len(got)) and
// there are want of them.
func checkDeltas(t *testing.T, what string, got []*twinlogv1.MetadataDelta, from int64, want int) {
	t.Helper()
	if len(got) != want {
		t.Fatalf("%s: %d deltas, want %d", what, len(got), want)
	}
	for i, d := range got {
		if !proto.Equal(d, Delta(from+int64(i))) {
			t.Fatalf("%s: delta %d is %v", what, from+int64(i), d)
		}
	}
}

func load(t *testing.T, s Store) *metastore.Loaded {
	t.Helper()
	l, err := s.Load()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return l
}

func info(t *testing.T, s Store) metastore.Info {
	t.Helper()
	in, err := s.Info()
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	return in
}

// testClusterID: the first id sticks, across a reopen too; an empty store
// refuses an empty id.
func testClusterID(t *testing.T, open func(*testing.T) Store, reopen func(*testing.T, Store) Store) {
	s := open(t)
	if id, err := s.InitClusterID(""); err == nil {
		t.Fatalf("empty cluster id accepted as %q", id)
	}
	if in := info(t, s); in.ClusterID != "" {
		t.Fatalf("a refused id was stored: %q", in.ClusterID)
	}
	for _, try := range []string{"c1", "c1", "c2", ""} {
		if id, err := s.InitClusterID(try); err != nil || id != "c1" {
			t.Fatalf("InitClusterID(%q) = %q, %v; want c1", try, id, err)
		}
	}
	s = reopen(t, s)
	if id, err := s.InitClusterID("other"); err != nil || id != "c1" {
		t.Fatalf("after reopen InitClusterID = %q, %v; want c1", id, err)
	}
	if l := load(t, s); l.ClusterID != "c1" {
		t.Fatalf("loaded cluster id %q", l.ClusterID)
	}
}

// testControllerEpoch: every bump is one more, and a reopen keeps the
// count.
func testControllerEpoch(t *testing.T, open func(*testing.T) Store, reopen func(*testing.T, Store) Store) {
	s := open(t)
	if l := load(t, s); l.ControllerEpoch != 0 || l.NextOffset != 1 || l.Snapshot != nil || len(l.Deltas) != 0 {
		t.Fatalf("empty store loads %+v", l)
	}
	for want := int64(1); want <= 2; want++ {
		if e, err := s.BumpControllerEpoch(); err != nil || e != want {
			t.Fatalf("BumpControllerEpoch = %d, %v; want %d", e, err, want)
		}
	}
	s = reopen(t, s)
	if e, err := s.BumpControllerEpoch(); err != nil || e != 3 {
		t.Fatalf("after reopen BumpControllerEpoch = %d, %v; want 3", e, err)
	}
	if l, in := load(t, s), info(t, s); l.ControllerEpoch != 3 || in.ControllerEpoch != 3 {
		t.Fatalf("controller epoch loads as %d, info %d; want 3", l.ControllerEpoch, in.ControllerEpoch)
	}
}

// testAppend: offsets must follow on from the next one, within a change set
// too, and a refused change set leaves nothing; what is stored is a copy.
func testAppend(t *testing.T, open func(*testing.T) Store, _ func(*testing.T, Store) Store) {
	s := open(t)
	if err := s.Append(); err != nil {
		t.Fatalf("empty append: %v", err)
	}
	if err := s.Append(Delta(0)); !errors.Is(err, metastore.ErrOffsetMismatch) {
		t.Fatalf("append at offset 0: %v, want ErrOffsetMismatch", err)
	}
	d1 := Delta(1)
	if err := s.Append(d1); err != nil {
		t.Fatal(err)
	}
	d1.Partitions[0].Leader = 99 // the store kept its own copy
	if err := s.Append(Delta(2), Delta(3)); err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string][]*twinlogv1.MetadataDelta{
		"gap":             {Delta(5)},
		"repeat":          {Delta(3)},
		"gap inside":      {Delta(4), Delta(6)},
		"repeat inside":   {Delta(4), Delta(4)},
		"negative offset": {Delta(-1)},
	} {
		if err := s.Append(set...); !errors.Is(err, metastore.ErrOffsetMismatch) {
			t.Fatalf("%s: %v, want ErrOffsetMismatch", name, err)
		}
	}
	if err := s.Append(Delta(4), nil); err == nil {
		t.Fatal("nil delta accepted")
	}
	l := load(t, s)
	if l.NextOffset != 4 {
		t.Fatalf("next offset %d after refused appends, want 4", l.NextOffset)
	}
	checkDeltas(t, "after refused appends", l.Deltas, 1, 3)
	if err := s.Append(Delta(4), Delta(5)); err != nil {
		t.Fatal(err)
	}
	if in := info(t, s); in.FirstOffset != 1 || in.NextOffset != 6 || in.SnapshotOffset != 0 {
		t.Fatalf("info %+v", in)
	}
}

// testLoadAfterReopen: everything that returned survives a reopen, and
// appends go on from there.
func testLoadAfterReopen(t *testing.T, open func(*testing.T) Store, reopen func(*testing.T, Store) Store) {
	s := open(t)
	if _, err := s.InitClusterID("c1"); err != nil {
		t.Fatal(err)
	}
	appendRange(t, s, 1, 5)
	if err := s.Append(Delta(6), Delta(7)); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	l := load(t, s)
	if l.ClusterID != "c1" || l.NextOffset != 8 || l.Snapshot != nil {
		t.Fatalf("reopened: cluster %q, next %d, snapshot %v", l.ClusterID, l.NextOffset, l.Snapshot)
	}
	checkDeltas(t, "reopened", l.Deltas, 1, 7)
	if err := s.Append(Delta(7)); !errors.Is(err, metastore.ErrOffsetMismatch) {
		t.Fatalf("append of a stored offset after reopen: %v", err)
	}
	appendRange(t, s, 8, 8)
	s = reopen(t, s)
	checkDeltas(t, "reopened twice", load(t, s).Deltas, 1, 8)
}

// testReadDeltas: ranges, limits, the empty tail, and ErrCompacted below
// the first retained delta, with a log emptied by compaction too.
func testReadDeltas(t *testing.T, open func(*testing.T) Store, _ func(*testing.T, Store) Store) {
	s := open(t)
	if got, err := s.ReadDeltas(1, 0); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	appendRange(t, s, 1, 10)
	for _, tc := range []struct {
		from      int64
		max       int
		wantFrom  int64
		wantCount int
	}{
		{0, 0, 1, 10}, {-5, 2, 1, 2}, {1, 0, 1, 10}, {3, 2, 3, 2}, {9, 5, 9, 2},
		{10, 0, 10, 1}, {11, 0, 11, 0}, {100, 3, 100, 0},
	} {
		got, err := s.ReadDeltas(tc.from, tc.max)
		if err != nil {
			t.Fatalf("ReadDeltas(%d, %d): %v", tc.from, tc.max, err)
		}
		checkDeltas(t, fmt.Sprintf("ReadDeltas(%d, %d)", tc.from, tc.max), got, tc.wantFrom, tc.wantCount)
	}
	if _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 6}, 2); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{-1, 0, 1, 4} {
		if _, err := s.ReadDeltas(from, 0); !errors.Is(err, metastore.ErrCompacted) {
			t.Fatalf("ReadDeltas(%d) after compaction: %v, want ErrCompacted", from, err)
		}
	}
	got, err := s.ReadDeltas(5, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, "first retained on", got, 5, 6)
	if in := info(t, s); in.FirstOffset != 5 || in.NextOffset != 11 || in.SnapshotOffset != 6 {
		t.Fatalf("info %+v", in)
	}

	// Everything compacted: the log is empty and NextOffset is its tail.
	if _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 10}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadDeltas(10, 0); !errors.Is(err, metastore.ErrCompacted) {
		t.Fatalf("ReadDeltas(10) of an empty log: %v, want ErrCompacted", err)
	}
	if got, err := s.ReadDeltas(11, 0); err != nil || len(got) != 0 {
		t.Fatalf("ReadDeltas(11) of an empty log: %v, %v", got, err)
	}
	if in := info(t, s); in.FirstOffset != 11 || in.NextOffset != 11 {
		t.Fatalf("info of an empty log %+v", in)
	}
	appendRange(t, s, 11, 11)
	got, err = s.ReadDeltas(11, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkDeltas(t, "after the empty log", got, 11, 1)
}

// testCompact: a snapshot replaces the log it covers but the retained
// deltas, survives a reopen, and never moves back or past the head.
func testCompact(t *testing.T, open func(*testing.T) Store, reopen func(*testing.T, Store) Store) {
	s := open(t)
	if _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 1}, 0); err == nil {
		t.Fatal("compact past the head of an empty store accepted")
	}
	appendRange(t, s, 1, 100)
	snap := &twinlogv1.MetadataSnapshot{Offset: 90, ClusterId: "c1",
		Brokers: []*twinlogv1.BrokerRecord{{BrokerId: 1, BrokerEpoch: 7}}}
	if n, err := s.Compact(snap, 10); err != nil || n != 80 {
		t.Fatalf("Compact(90, 10) = %d, %v; want 80", n, err)
	}
	snap.Brokers[0].BrokerEpoch = 8 // the store kept its own copy
	for name, bad := range map[string]*twinlogv1.MetadataSnapshot{
		"nil":             nil,
		"past the head":   {Offset: 101},
		"older":           {Offset: 50},
		"negative offset": {Offset: -1},
	} {
		if _, err := s.Compact(bad, 0); err == nil {
			t.Fatalf("compact %s accepted", name)
		}
	}
	s = reopen(t, s)
	l := load(t, s)
	want := &twinlogv1.MetadataSnapshot{Offset: 90, ClusterId: "c1",
		Brokers: []*twinlogv1.BrokerRecord{{BrokerId: 1, BrokerEpoch: 7}}}
	if !proto.Equal(l.Snapshot, want) || l.NextOffset != 101 {
		t.Fatalf("reopened: snapshot %v, next %d", l.Snapshot, l.NextOffset)
	}
	checkDeltas(t, "deltas after the snapshot", l.Deltas, 91, 10)
	if got, err := s.Snapshot(); err != nil || !proto.Equal(got, want) {
		t.Fatalf("Snapshot = %v, %v", got, err)
	}
	if in := info(t, s); in.FirstOffset != 81 || in.NextOffset != 101 || in.SnapshotOffset != 90 {
		t.Fatalf("info %+v", in)
	}
	// The same offset again, and the default window, delete nothing more.
	if n, err := s.Compact(want, 10); err != nil || n != 0 {
		t.Fatalf("Compact(90, 10) again = %d, %v", n, err)
	}
	if n, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 95}, -1); err != nil || n != 0 {
		t.Fatalf("Compact(95, default) = %d, %v", n, err)
	}
	// Up to the head with nothing retained: the log empties, and appends
	// go on after it.
	if n, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 100}, 0); err != nil || n != 20 {
		t.Fatalf("Compact(100, 0) = %d, %v; want 20", n, err)
	}
	s = reopen(t, s)
	if l := load(t, s); len(l.Deltas) != 0 || l.Snapshot.GetOffset() != 100 || l.NextOffset != 101 {
		t.Fatalf("after full compaction: %d deltas, snapshot %d, next %d", len(l.Deltas), l.Snapshot.GetOffset(), l.NextOffset)
	}
	appendRange(t, s, 101, 101)
	checkDeltas(t, "after full compaction", load(t, s).Deltas, 101, 1)
}

// testCompactRetain: Compact keeps the newest retain deltas the snapshot
// covers, however many that is.
func testCompactRetain(t *testing.T, open func(*testing.T) Store, _ func(*testing.T, Store) Store) {
	for _, tc := range []struct {
		retain      int
		wantDeleted int
		wantFirst   int64
	}{
		{0, 15, 16}, {1, 14, 15}, {5, 10, 11}, {14, 1, 2}, {15, 0, 1}, {50, 0, 1}, {-1, 0, 1},
	} {
		s := open(t)
		appendRange(t, s, 1, 20)
		n, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 15}, tc.retain)
		if err != nil || n != tc.wantDeleted {
			t.Fatalf("retain %d: deleted %d, %v; want %d", tc.retain, n, err, tc.wantDeleted)
		}
		in := info(t, s)
		if in.FirstOffset != tc.wantFirst || in.SnapshotOffset != 15 {
			t.Fatalf("retain %d: info %+v, want first %d", tc.retain, in, tc.wantFirst)
		}
		if _, err := s.ReadDeltas(tc.wantFirst-1, 0); tc.wantFirst > 1 && !errors.Is(err, metastore.ErrCompacted) {
			t.Fatalf("retain %d: ReadDeltas(%d): %v, want ErrCompacted", tc.retain, tc.wantFirst-1, err)
		}
		got, err := s.ReadDeltas(tc.wantFirst, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkDeltas(t, fmt.Sprintf("retain %d", tc.retain), got, tc.wantFirst, int(21-tc.wantFirst))
	}
}

// manyItems is a snapshot of many small items of every kind.
func manyItems(offset int64) *twinlogv1.MetadataSnapshot {
	s := &twinlogv1.MetadataSnapshot{Offset: offset, ClusterId: "c1",
		ClusterConfig: &twinlogv1.ClusterConfigRecord{Configs: map[string]string{"min.insync.replicas": "2"}},
		Mirrors:       []*twinlogv1.MirrorRecord{{Name: "m1"}, {Name: "m2"}},
		ProducerIds:   &twinlogv1.ProducerIdsRecord{BrokerId: 1, BrokerEpoch: 10, NextProducerId: 5<<48 + 3000},
	}
	for b := range int32(5) {
		s.Brokers = append(s.Brokers, &twinlogv1.BrokerRecord{BrokerId: b + 1, BrokerEpoch: int64(b) + 10})
	}
	for i := range 4 {
		topic := fmt.Sprintf("topic-%d", i)
		s.Topics = append(s.Topics, &twinlogv1.TopicRecord{Name: topic, TopicId: topic + "-id", PartitionCount: 50})
		for p := range int32(50) {
			s.Partitions = append(s.Partitions, &twinlogv1.PartitionRecord{Topic: topic, TopicId: topic + "-id", Partition: p,
				Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2}, Leader: 1 + p%3, LeaderEpoch: p})
		}
	}
	return s
}

// Items is the snapshot's item sequence, the order pages carry it in, with
// each item alone in a snapshot of its own: a page with item i added
// encodes to the page's size plus Items(s)[i]'s.
func Items(s *twinlogv1.MetadataSnapshot) []*twinlogv1.MetadataSnapshot {
	var out []*twinlogv1.MetadataSnapshot
	for _, m := range s.GetBrokers() {
		out = append(out, &twinlogv1.MetadataSnapshot{Brokers: []*twinlogv1.BrokerRecord{m}})
	}
	for _, m := range s.GetTopics() {
		out = append(out, &twinlogv1.MetadataSnapshot{Topics: []*twinlogv1.TopicRecord{m}})
	}
	for _, m := range s.GetPartitions() {
		out = append(out, &twinlogv1.MetadataSnapshot{Partitions: []*twinlogv1.PartitionRecord{m}})
	}
	for _, m := range s.GetMirrors() {
		out = append(out, &twinlogv1.MetadataSnapshot{Mirrors: []*twinlogv1.MirrorRecord{m}})
	}
	return out
}

// testSnapshotPages: tiny to huge pages join into the stored snapshot; each
// page is as full as its budget allows (and holds one item at least), the
// header comes only with position 0, and the pages survive a reopen.
func testSnapshotPages(t *testing.T, open func(*testing.T) Store, reopen func(*testing.T, Store) Store) {
	s := open(t)
	if page, err := s.ReadSnapshotPage(func(int64, int64) (int64, error) { return 0, nil }, nil); page != nil || err != nil {
		t.Fatalf("no snapshot stored: %v, %v", page, err)
	}
	appendRange(t, s, 1, 30)
	stored := manyItems(30)
	all := Items(stored)
	if _, err := s.Compact(stored, 0); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		for _, budget := range []int{0, 1, 40, 100, 1000, 1 << 20} {
			joined := &twinlogv1.MetadataSnapshot{}
			pos, pages := int64(0), 0
			for ; ; pages++ {
				page, err := s.ReadSnapshotPage(func(offset, n int64) (int64, error) {
					if offset != 30 || n != int64(len(all)) {
						t.Fatalf("start(%d, %d), want (30, %d)", offset, n, len(all))
					}
					return pos, nil
				}, func(size int) bool { return size <= budget })
				if err != nil {
					t.Fatal(err)
				}
				n := page.Next - page.Position
				if page.Position != pos || n < 1 || page.Items != int64(len(all)) || (n > 1 && proto.Size(page.Snapshot) > budget) {
					t.Fatalf("budget %d, page %d: [%d, %d) of %d, %d bytes", budget, pages, page.Position, page.Next, page.Items, proto.Size(page.Snapshot))
				}
				if page.Next < page.Items && proto.Size(page.Snapshot)+proto.Size(all[page.Next]) <= budget {
					t.Fatalf("budget %d, page %d: [%d, %d) stops before an item that fits", budget, pages, page.Position, page.Next)
				}
				if (pos == 0) != (page.Snapshot.GetClusterConfig() != nil) || (pos == 0) != (page.Snapshot.GetProducerIds() != nil) ||
					page.Snapshot.GetOffset() != 30 {
					t.Fatalf("budget %d, page at %d: header %v", budget, pos, page.Snapshot)
				}
				proto.Merge(joined, page.Snapshot)
				if pos = page.Next; pos == page.Items {
					break
				}
			}
			if !proto.Equal(joined, stored) {
				t.Fatalf("budget %d: joined pages differ from the stored snapshot", budget)
			}
			if budget == 0 && pages+1 != len(all) {
				t.Fatalf("budget 0: %d pages for %d items", pages+1, len(all))
			}
		}
		if round == 0 {
			s = reopen(t, s)
		}
	}

	// start's error is returned as is; a position outside the snapshot is
	// refused.
	stop := errors.New("stop")
	if _, err := s.ReadSnapshotPage(func(int64, int64) (int64, error) { return 0, stop }, nil); err != stop {
		t.Fatalf("start error: %v", err)
	}
	for _, pos := range []int64{-1, int64(len(all)), 1 << 62} {
		if _, err := s.ReadSnapshotPage(func(int64, int64) (int64, error) { return pos, nil }, nil); err == nil {
			t.Fatalf("position %d accepted", pos)
		}
	}

	// A snapshot without items is one page at position 0.
	s2 := open(t)
	appendRange(t, s2, 1, 1)
	if _, err := s2.Compact(&twinlogv1.MetadataSnapshot{Offset: 1, ClusterId: "c1"}, 0); err != nil {
		t.Fatal(err)
	}
	page, err := s2.ReadSnapshotPage(func(int64, int64) (int64, error) { return 0, nil }, func(int) bool { return false })
	if err != nil || page.Items != 0 || page.Next != 0 || page.Snapshot.GetClusterId() != "c1" {
		t.Fatalf("empty snapshot page %+v, %v", page, err)
	}
}

// testClosed: every use of a closed store but Close is ErrClosed; Close
// again is fine.
func testClosed(t *testing.T, open func(*testing.T) Store, _ func(*testing.T, Store) Store) {
	s := open(t)
	appendRange(t, s, 1, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"InitClusterID":       func() error { _, err := s.InitClusterID("c1"); return err },
		"BumpControllerEpoch": func() error { _, err := s.BumpControllerEpoch(); return err },
		"Load":                func() error { _, err := s.Load(); return err },
		"Append":              func() error { return s.Append(Delta(4)) },
		"ReadDeltas":          func() error { _, err := s.ReadDeltas(1, 0); return err },
		"ReadSnapshotPage": func() error {
			_, err := s.ReadSnapshotPage(func(int64, int64) (int64, error) { return 0, nil }, nil)
			return err
		},
		"Compact":  func() error { _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 3}, 0); return err },
		"Info":     func() error { _, err := s.Info(); return err },
		"Snapshot": func() error { _, err := s.Snapshot(); return err },
	} {
		if err := call(); !errors.Is(err, metastore.ErrClosed) {
			t.Errorf("%s on a closed store: %v, want ErrClosed", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
