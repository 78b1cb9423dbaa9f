package storage

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/epoch"
	"github.com/twinlog/twinlog/storage/vfs"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const testDir = "/data/t-0"

func testOpts(t testing.TB, c *fakeClock) Options {
	o := Options{SegmentMaxBytes: 4096, IndexIntervalBytes: 256, Clock: c.Now}
	if tt, ok := t.(*testing.T); ok && testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(tt.Output(), nil))
	}
	return o
}

func openLog(t testing.TB, fsys FS, o Options) *Log {
	t.Helper()
	l, err := Open(fsys, testDir, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// batchOf builds a producer batch of n records of size bytes with timestamp ts.
func batchOf(t testing.TB, n, size int, ts int64) []byte {
	rs := make([]Record, n)
	for i := range rs {
		rs[i] = Record{Timestamp: ts, Value: bytes.Repeat([]byte{byte(i)}, size)}
	}
	return mustBatch(t, rs, BatchOptions{})
}

func appendN(t testing.TB, l *Log, batches, recs, size int, e twinlog.Epoch, ts int64) {
	t.Helper()
	for range batches {
		if _, err := l.AppendAsLeader(batchOf(t, recs, size, ts), e); err != nil {
			t.Fatal(err)
		}
	}
}

// readAllOffsets reads the whole log up to LEO and returns each batch's
// (base, last, epoch).
func readAllOffsets(t testing.TB, l *Log) [][3]int64 {
	t.Helper()
	var out [][3]int64
	from := l.LogStartOffset()
	for {
		r, err := l.Read(from, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Batches) == 0 {
			return out
		}
		bs, err := SplitBatches(r.Batches)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			out = append(out, [3]int64{int64(b.BaseOffset()), int64(b.LastOffset()), int64(b.LeaderEpoch())})
			from = b.NextOffset()
		}
	}
}

// checkEpochs asserts the cache ↔ log invariant and that the checkpoint on
// disk equals the cache.
func checkEpochs(t testing.TB, fsys FS, l *Log) {
	t.Helper()
	es := l.Epochs().Entries()
	for _, e := range es {
		if e.StartOffset < l.LogStartOffset() || e.StartOffset >= l.LogEndOffset() {
			t.Fatalf("epoch entry %v outside [%d, %d)", e, l.LogStartOffset(), l.LogEndOffset())
		}
	}
	// Every batch's epoch is the cache's epoch for its base offset.
	c := l.Epochs()
	for _, b := range readAllOffsets(t, l) {
		if got := c.EpochForOffset(twinlog.Offset(b[0])); int64(got) != b[2] {
			t.Fatalf("batch %v: cache says epoch %d (cache %v)", b, got, es)
		}
	}
	disk, err := epoch.ReadCheckpoint(fsys, filepath.Join(l.Dir(), epoch.CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(disk) != len(es) || (len(es) > 0 && !cmp.Equal(disk, es)) {
		t.Fatalf("checkpoint %v, cache %v", disk, es)
	}
}

func TestAppendReadBasics(t *testing.T) {
	fsys := NewMemFS()
	l := openLog(t, fsys, testOpts(t, newClock()))
	defer l.Close()
	info, err := l.AppendAsLeader(batchOf(t, 5, 10, 100), 3)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 4 || info.NumRecords != 5 || info.MaxTimestamp != 100 {
		t.Fatalf("info %+v", info)
	}
	info, _ = l.AppendAsLeader(append(batchOf(t, 2, 10, 200), batchOf(t, 3, 10, 300)...), 3)
	if info.FirstOffset != 5 || info.LastOffset != 9 || info.NumRecords != 5 {
		t.Fatalf("info %+v", info)
	}
	if l.LogEndOffset() != 10 || l.LogStartOffset() != 0 || l.HighWatermark() != 0 {
		t.Fatal("offsets")
	}
	// Read from the middle of a batch returns that whole batch.
	r, err := l.Read(6, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	bs, _ := SplitBatches(r.Batches)
	if len(bs) != 1 || bs[0].BaseOffset() != 5 || bs[0].LeaderEpoch() != 3 {
		t.Fatalf("read %v", bs)
	}
	// upTo bounds the batches: HW 7 stops before the batch 7..9.
	r, _ = l.Read(0, 1<<20, 7)
	bs, _ = SplitBatches(r.Batches)
	if len(bs) != 2 {
		t.Fatalf("upTo: %d batches", len(bs))
	}
	// Out of range.
	if _, err := l.Read(11, 100, 20); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("got %v", err)
	}
	if r, err := l.Read(10, 100, 20); err != nil || len(r.Batches) != 0 {
		t.Fatalf("read at LEO: %v %d", err, len(r.Batches))
	}
	if got := l.SetHighWatermark(100); got != 10 {
		t.Fatalf("hw clamp %d", got)
	}
	if off, _ := l.OffsetForTimestamp(250); off != 7 {
		t.Fatalf("offset for ts: %d", off)
	}
	if off, _ := l.OffsetForTimestamp(301); off != twinlog.NoOffset {
		t.Fatalf("offset for ts: %d", off)
	}
	// Stale epoch, corrupt batch, too large batch, follower overlap.
	if _, err := l.AppendAsLeader(batchOf(t, 1, 1, 0), 2); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	bad := batchOf(t, 1, 1, 0)
	bad[len(bad)-1] ^= 1
	if _, err := l.AppendAsLeader(bad, 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
	if _, err := l.AppendAsLeader(batchOf(t, 1, 2<<20, 0), 3); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	fb := mustBatch(t, testRecords(1, 0), BatchOptions{BaseOffset: 9, LeaderEpoch: 3})
	if _, err := l.AppendAsFollower(fb); !errors.Is(err, ErrInvalidOffset) {
		t.Fatalf("overlap: %v", err)
	}
	if _, err := l.AppendAsLeader(nil, 3); !errors.Is(err, ErrEmptyAppend) {
		t.Fatalf("empty: %v", err)
	}
	checkEpochs(t, fsys, l)
}

func TestAppendAsFollowerGapsAndEpochs(t *testing.T) {
	fsys := NewMemFS()
	l := openLog(t, fsys, testOpts(t, newClock()))
	defer l.Close()
	var buf []byte
	buf = append(buf, mustBatch(t, testRecords(2, 0), BatchOptions{BaseOffset: 0, LeaderEpoch: 1})...)
	buf = append(buf, mustBatch(t, testRecords(2, 0), BatchOptions{BaseOffset: 10, LeaderEpoch: 1})...)
	buf = append(buf, mustBatch(t, testRecords(1, 0), BatchOptions{BaseOffset: 20, LeaderEpoch: 4})...)
	info, err := l.AppendAsFollower(buf)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 20 || l.LogEndOffset() != 21 {
		t.Fatalf("info %+v leo %d", info, l.LogEndOffset())
	}
	if diff := cmp.Diff([]epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 20}}, l.Epochs().Entries()); diff != "" {
		t.Fatal(diff)
	}
	// Reading in a gap returns the next batch.
	r, _ := l.Read(5, 1, 100)
	bs, _ := SplitBatches(r.Batches)
	if len(bs) != 1 || bs[0].BaseOffset() != 10 {
		t.Fatalf("gap read: %v", bs)
	}
	// Epoch going backwards is refused.
	if _, err := l.AppendAsFollower(mustBatch(t, testRecords(1, 0), BatchOptions{BaseOffset: 21, LeaderEpoch: 3})); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("got %v", err)
	}
	// AssignEpoch (leader entering LE 6 at LEO).
	if err := l.AssignEpoch(6, l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, le := l.EndOffsetForEpoch(4); le != 21 {
		t.Fatalf("end offset for 4: %d", le)
	}
	if e, o := l.EndOffsetForEpoch(6); e != 6 || o != 21 {
		t.Fatalf("end offset for 6: %d %d", e, o)
	}
}

func TestIndexLookup(t *testing.T) {
	fsys := NewMemFS()
	o := testOpts(t, newClock())
	o.SegmentMaxBytes = 1 << 20
	l := openLog(t, fsys, o)
	// 200 batches of ~100 bytes: an index entry every ~3 batches.
	appendN(t, l, 200, 1, 40, 0, 1)
	s := l.segs[0]
	if len(s.index) < 50 {
		t.Fatalf("only %d index entries", len(s.index))
	}
	for i := 1; i < len(s.index); i++ {
		if s.index[i].rel <= s.index[i-1].rel || s.index[i].pos <= s.index[i-1].pos || int64(s.index[i].pos-s.index[i-1].pos) < o.IndexIntervalBytes {
			t.Fatalf("index %d: %v after %v", i, s.index[i], s.index[i-1])
		}
	}
	tests := []struct {
		o    twinlog.Offset
		want int64
	}{
		{0, 0},
		{twinlog.Offset(s.index[0].rel) - 1, 0},
		{twinlog.Offset(s.index[0].rel), int64(s.index[0].pos)},
		{twinlog.Offset(s.index[3].rel) + 1, int64(s.index[3].pos)},
		{199, int64(s.index[len(s.index)-1].pos)},
		{10_000, int64(s.index[len(s.index)-1].pos)},
	}
	for _, tt := range tests {
		if got, _ := s.lookup(tt.o); got != tt.want {
			t.Errorf("lookup(%d) = %d, want %d", tt.o, got, tt.want)
		}
	}
	for o := twinlog.Offset(0); o < 200; o += 7 {
		r, err := l.Read(o, 1, 200)
		if err != nil {
			t.Fatal(err)
		}
		if b := BatchView(r.Batches); b.BaseOffset() != o {
			t.Fatalf("read %d got %d", o, b.BaseOffset())
		}
	}
	// Indexes survive a clean reopen and are rebuilt when damaged.
	want := slices2(s.index)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o.CleanShutdown = true
	l = openLog(t, fsys, o)
	if diff := cmp.Diff(want, slices2(l.segs[0].index), cmp.AllowUnexported(indexEntry{})); diff != "" {
		t.Fatal(diff)
	}
	l.Close()
	for _, damage := range []func(f File){
		func(f File) { f.Truncate(5) },
		func(f File) { f.WriteAt([]byte{0, 0, 0, 9, 0, 0, 0, 1}, 16) },
		func(f File) { f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 0) },
	} {
		f, _ := fsys.OpenFile(filepath.Join(testDir, segmentName(0)+indexSuffix), 2, 0)
		damage(f)
		f.Close()
		l = openLog(t, fsys, o)
		if diff := cmp.Diff(want, slices2(l.segs[0].index), cmp.AllowUnexported(indexEntry{})); diff != "" {
			t.Fatal(diff)
		}
		l.Close()
	}
	// Deleted index: rebuilt.
	fsys.Remove(filepath.Join(testDir, segmentName(0)+indexSuffix))
	l = openLog(t, fsys, o)
	defer l.Close()
	if diff := cmp.Diff(want, slices2(l.segs[0].index), cmp.AllowUnexported(indexEntry{})); diff != "" {
		t.Fatal(diff)
	}
}

func slices2(x []indexEntry) []indexEntry { return append([]indexEntry(nil), x...) }

func TestRollBySizeAndAge(t *testing.T) {
	c := newClock()
	fsys := NewMemFS()
	o := testOpts(t, c)
	o.SegmentMaxBytes = 1100
	o.SegmentMaxAge = time.Hour
	l := openLog(t, fsys, o)
	defer l.Close()
	b := len(batchOf(t, 1, 200, 0))
	appendN(t, l, 4, 1, 200, 0, 0) // 4*b <= 1000
	if l.NumSegments() != 1 || 4*b > 1100 {
		t.Fatalf("segments %d, batch %d", l.NumSegments(), b)
	}
	appendN(t, l, 1, 1, 200, 0, 0)
	if l.NumSegments() != 2 || l.segs[1].base != 4 {
		t.Fatalf("size roll: %d segments", l.NumSegments())
	}
	// Age: the active segment (first append now) rolls once an hour passed.
	c.Advance(59 * time.Minute)
	appendN(t, l, 1, 1, 10, 0, 0)
	if l.NumSegments() != 2 {
		t.Fatal("rolled too early")
	}
	c.Advance(time.Minute)
	if rolled, err := l.MaybeRoll(); err != nil || !rolled {
		t.Fatalf("MaybeRoll: %v %v", rolled, err)
	}
	if l.NumSegments() != 3 || l.segs[2].base != 6 {
		t.Fatalf("age roll: %d", l.NumSegments())
	}
	// An empty active segment never rolls, however old.
	c.Advance(10 * time.Hour)
	if rolled, _ := l.MaybeRoll(); rolled {
		t.Fatal("rolled an empty segment")
	}
	appendN(t, l, 1, 1, 10, 0, 0)
	if l.NumSegments() != 3 {
		t.Fatal("first append into an old empty segment rolled")
	}
	names, _ := fsys.List(testDir)
	for _, want := range []string{"00000000000000000000.log", "00000000000000000004.log", "00000000000000000006.log", "00000000000000000000.index"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Fatalf("missing %s in %v", want, names)
		}
	}
}

func TestRetention(t *testing.T) {
	type step struct {
		advance time.Duration
		hw      twinlog.Offset
		deleted int
		start   twinlog.Offset
	}
	tests := []struct {
		name  string
		bytes int64
		age   time.Duration
		steps []step
	}{
		{"size, HW bounds", 2000, 0, []step{
			{0, 0, 0, 0},   // nothing below HW
			{0, 8, 1, 4},   // segment [0,4) wholly below HW 8
			{0, 100, 0, 4}, // [4,8) + active [8,12) = 2048 bytes: dropping [4,8) would undershoot 2000
		}},
		{"age", 0, time.Hour, []step{
			{30 * time.Minute, 100, 0, 0},
			{31 * time.Minute, 100, 3, 12}, // all three full segments and the rolled active one
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			fsys := NewMemFS()
			o := testOpts(t, c)
			o.SegmentMaxBytes = 1100
			l := openLog(t, fsys, o)
			defer l.Close()
			ts := c.Now().UnixMilli()
			for range 3 {
				appendN(t, l, 4, 1, 200, 1, ts)
			} // segments [0,4) [4,8) [8,12) and active
			if err := l.AssignEpoch(2, 2); err != nil { // epochs {1:0, 2:2}
				t.Fatal(err)
			}
			_ = l.TruncateTo(l.LogEndOffset())
			for i, s := range tt.steps {
				c.Advance(s.advance)
				l.SetHighWatermark(s.hw)
				n, _, err := l.DeleteRetained(Retention{Bytes: tt.bytes, Age: tt.age, Below: l.LogEndOffset()})
				if err != nil {
					t.Fatal(err)
				}
				if n != s.deleted || l.LogStartOffset() != s.start {
					t.Fatalf("step %d: deleted %d start %d, want %d %d", i, n, l.LogStartOffset(), s.deleted, s.start)
				}
				if l.HighWatermark() < l.LogStartOffset() {
					t.Fatal("HW below log start")
				}
				if _, err := l.Read(s.start-1, 10, 100); s.start > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("read below start: %v", err)
				}
			}
		})
	}
}

func TestRetentionMovesEpochStart(t *testing.T) {
	c := newClock()
	fsys := NewMemFS()
	o := testOpts(t, c)
	o.SegmentMaxBytes = 1100
	l := openLog(t, fsys, o)
	defer l.Close()
	appendN(t, l, 3, 1, 200, 1, 0)
	appendN(t, l, 3, 1, 200, 2, 0) // epoch 2 starts at 3; segments [0,4) [4,6)
	l.SetHighWatermark(6)
	if n, _, err := l.DeleteRetained(Retention{Bytes: 1, Below: 6}); err != nil || n != 1 {
		t.Fatalf("%d %v", n, err)
	}
	if diff := cmp.Diff([]epoch.Entry{{Epoch: 2, StartOffset: 4}}, l.Epochs().Entries()); diff != "" {
		t.Fatal(diff)
	}
	checkEpochs(t, fsys, l)
}

func TestTruncation(t *testing.T) {
	// Segments of 4 batches of 1 record; epochs: 1 for offsets 0..5, 2 for 6..11.
	setup := func(t *testing.T) (*MemFS, *Log) {
		fsys := NewMemFS()
		o := testOpts(t, newClock())
		o.SegmentMaxBytes = 1100
		l := openLog(t, fsys, o)
		appendN(t, l, 6, 1, 200, 1, 0)
		appendN(t, l, 3, 2, 100, 2, 0) // 6..11 in 3 batches of 2
		l.SetHighWatermark(10)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		return fsys, l
	}
	tests := []struct {
		name    string
		to      twinlog.Offset
		leo     twinlog.Offset
		start   twinlog.Offset
		hw      twinlog.Offset
		entries []epoch.Entry
	}{
		{"beyond LEO no-op", 50, 12, 0, 10, []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 6}}},
		{"at LEO no-op", 12, 12, 0, 10, []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 6}}},
		{"mid segment", 2, 2, 0, 2, []epoch.Entry{{Epoch: 1, StartOffset: 0}}},
		{"segment boundary", 4, 4, 0, 4, []epoch.Entry{{Epoch: 1, StartOffset: 0}}},
		{"epoch boundary", 6, 6, 0, 6, []epoch.Entry{{Epoch: 1, StartOffset: 0}}},
		{"inside a batch cuts the batch", 9, 8, 0, 8, []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 6}}},
		// The straddling batch opens epoch 2: the cache is trimmed at the
		// LEO the cut reached (6), not at the offset asked (7), so it agrees
		// with the replica once the shell reports that LEO
		// (replica.ConfirmTruncation).
		{"inside an epoch's first batch drops the epoch", 7, 6, 0, 6, []epoch.Entry{{Epoch: 1, StartOffset: 0}}},
		{"to log start", 0, 0, 0, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, l := setup(t)
			defer l.Close()
			if err := l.TruncateTo(tt.to); err != nil {
				t.Fatal(err)
			}
			check := func(l *Log) {
				t.Helper()
				if l.LogEndOffset() != tt.leo || l.LogStartOffset() != tt.start {
					t.Fatalf("leo %d start %d", l.LogEndOffset(), l.LogStartOffset())
				}
				if len(tt.entries) != l.Epochs().Len() || (len(tt.entries) > 0 && !cmp.Equal(tt.entries, l.Epochs().Entries())) {
					t.Fatalf("epochs %v", l.Epochs().Entries())
				}
				checkEpochs(t, fsys, l)
				if got := readAllOffsets(t, l); len(got) > 0 && got[len(got)-1][1] >= int64(tt.leo) {
					t.Fatalf("batch beyond LEO: %v", got)
				}
			}
			check(l)
			if l.HighWatermark() != tt.hw {
				t.Fatalf("hw %d", l.HighWatermark())
			}
			// Durable: a crash right after keeps the truncation.
			l2 := openLog(t, fsys.CrashClone(), testOpts(t, newClock()))
			check(l2)
			l2.Close()
			// Appends continue at the LEO.
			info, err := l.AppendAsLeader(batchOf(t, 1, 10, 0), 3)
			if err != nil || info.FirstOffset != tt.leo {
				t.Fatalf("append after truncation: %+v %v", info, err)
			}
			checkEpochs(t, fsys, l)
		})
	}
	t.Run("below log start is full", func(t *testing.T) {
		fsys, l := setup(t)
		defer l.Close()
		l.SetHighWatermark(12)
		if _, _, err := l.DeleteRetained(Retention{Bytes: 1, Below: 12}); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() <= 3 {
			t.Fatalf("start %d", l.LogStartOffset())
		}
		if err := l.TruncateTo(3); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() != 3 || l.LogEndOffset() != 3 || l.HighWatermark() != 3 || l.Epochs().Len() != 0 || l.NumSegments() != 1 {
			t.Fatalf("start %d leo %d hw %d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark())
		}
		checkEpochs(t, fsys, l)
	})
	t.Run("fully and start at", func(t *testing.T) {
		fsys, l := setup(t)
		defer l.Close()
		if err := l.TruncateFullyAndStartAt(1000); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.HighWatermark() != 1000 {
			t.Fatal("offsets")
		}
		l2 := openLog(t, fsys.CrashClone(), testOpts(t, newClock()))
		defer l2.Close()
		if l2.LogStartOffset() != 1000 || l2.LogEndOffset() != 1000 || l2.Epochs().Len() != 0 {
			t.Fatalf("after crash: %d %d", l2.LogStartOffset(), l2.LogEndOffset())
		}
	})
}

// TestTruncateAtLEODropsEpochWithoutRecords: an epoch assigned at the LEO
// (no records yet) and then cut by a truncation at the LEO must leave the
// cache and its checkpoint, so neither a crash nor a clean restart before
// the next append reloads it (SPEC §2.4 truncateFromEnd, §6.2c).
func TestTruncateAtLEODropsEpochWithoutRecords(t *testing.T) {
	for _, restart := range []string{"crash", "clean"} {
		t.Run(restart, func(t *testing.T) {
			fsys := NewMemFS()
			l := openLog(t, fsys, testOpts(t, newClock()))
			appendN(t, l, 3, 1, 10, 1, 0)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := l.AssignEpoch(4, 3); err != nil {
				t.Fatal(err)
			}
			if err := l.TruncateTo(3); err != nil {
				t.Fatal(err)
			}
			want := []epoch.Entry{{Epoch: 1, StartOffset: 0}}
			if got := l.Epochs().Entries(); !cmp.Equal(got, want) {
				t.Fatalf("epochs %v, want %v", got, want)
			}
			checkEpochs(t, fsys, l)
			var reopened *Log
			if restart == "crash" {
				reopened = openLog(t, fsys.CrashClone(), testOpts(t, newClock()))
			} else {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				reopened = openLog(t, fsys, testOpts(t, newClock()))
			}
			defer reopened.Close()
			if got := reopened.Epochs().Entries(); !cmp.Equal(got, want) {
				t.Fatalf("after %s restart: epochs %v, want %v", restart, got, want)
			}
			// The next append starts a fresh epoch at the LEO.
			if _, err := reopened.AppendAsLeader(batchOf(t, 1, 10, 0), 2); err != nil {
				t.Fatal(err)
			}
			if got, want := reopened.Epochs().Entries(), []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 3}}; !cmp.Equal(got, want) {
				t.Fatalf("after append: epochs %v, want %v", got, want)
			}
		})
	}
}

func TestRecoveryTornTail(t *testing.T) {
	for _, cut := range []int{1, 11, 12, 40, 47, 60} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			fsys := NewMemFS()
			o := testOpts(t, newClock())
			l := openLog(t, fsys, o)
			appendN(t, l, 10, 1, 100, 1, 0)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 1, 1, 100, 2, 0) // epoch 2 at offset 10
			// Tear the last batch: keep only cut bytes of it.
			s := l.active()
			size := s.size
			last := int64(len(batchOf(t, 1, 100, 0)))
			s.f.Truncate(size - last + int64(cut))
			s.f.Sync()
			crashed := fsys.CrashClone()
			l.Close()
			l2 := openLog(t, crashed, o)
			defer l2.Close()
			if l2.LogEndOffset() != 10 || l2.RecoveryPoint() != 10 {
				t.Fatalf("leo %d", l2.LogEndOffset())
			}
			if diff := cmp.Diff([]epoch.Entry{{Epoch: 1, StartOffset: 0}}, l2.Epochs().Entries()); diff != "" {
				t.Fatal(diff)
			}
			checkEpochs(t, crashed, l2)
			if _, err := l2.AppendAsLeader(batchOf(t, 1, 5, 0), 3); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRecoveryCorruptionBelowRecoveryPointIsAnError(t *testing.T) {
	fsys := NewMemFS()
	o := testOpts(t, newClock())
	l := openLog(t, fsys, o)
	appendN(t, l, 10, 1, 100, 1, 0)
	l.Close()
	f, _ := fsys.OpenFile(filepath.Join(testDir, segmentName(0)+logSuffix), 2, 0)
	f.WriteAt([]byte{0xde, 0xad}, 200)
	f.Close()
	o.RecoveryPoint = 10
	_, err := Open(fsys, testDir, o)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File == "" || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want CorruptError naming the file, got %v", err)
	}
	// From recovery point 0 (no durable claim) it is cut instead.
	o.RecoveryPoint = 0
	l = openLog(t, fsys, o)
	defer l.Close()
	if l.LogEndOffset() >= 10 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
}

func TestCleanShutdownSkipsScan(t *testing.T) {
	fsys := NewMemFS()
	o := testOpts(t, newClock())
	l := openLog(t, fsys, o)
	appendN(t, l, 30, 1, 100, 1, 0)
	l.Close()
	// A bad crc in the middle is not noticed when the shutdown was clean.
	f, _ := fsys.OpenFile(filepath.Join(testDir, segmentName(0)+logSuffix), 2, 0)
	f.WriteAt([]byte{0xde, 0xad}, 200)
	f.Close()
	o.CleanShutdown = true
	l = openLog(t, fsys, o)
	if l.LogEndOffset() != 30 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
	l.Close()
	o.CleanShutdown = false
	l = openLog(t, fsys, o)
	defer l.Close()
	if l.LogEndOffset() >= 30 {
		t.Fatal("unclean open did not scan")
	}
}

func TestMemFSErrorInjectionMakesLogFail(t *testing.T) {
	fsys := NewMemFS()
	l := openLog(t, fsys, testOpts(t, newClock()))
	appendN(t, l, 2, 1, 10, 1, 0)
	fsys.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && filepath.Ext(name) == ".log" {
			return vfs.ErrInjected
		}
		return nil
	})
	if _, err := l.AppendAsLeader(batchOf(t, 1, 10, 0), 1); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("got %v", err)
	}
	fsys.SetInjector(nil)
	if _, err := l.AppendAsLeader(batchOf(t, 1, 10, 0), 1); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("a failed log must stay failed, got %v", err)
	}
	l.Close()
	l = openLog(t, fsys, testOpts(t, newClock()))
	defer l.Close()
	if l.LogEndOffset() != 2 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
}

func TestConcurrentAppendReadFlush(t *testing.T) {
	fsys := NewMemFS()
	o := testOpts(t, newClock())
	o.FlushMessages = 7
	l := openLog(t, fsys, o)
	defer l.Close()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				leo := l.LogEndOffset()
				r, err := l.Read(l.LogStartOffset(), 1000, leo)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := SplitBatches(r.Batches); err != nil {
					t.Error("reader saw a partial batch:", err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				if err := l.Flush(); err != nil {
					t.Error(err)
				}
			}
		}
	})
	for i := range 300 {
		if _, err := l.AppendAsLeader(batchOf(t, 2, 50, int64(i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if l.LogEndOffset() != 600 {
		t.Fatal(l.LogEndOffset())
	}
}

func TestPartitionMetadata(t *testing.T) {
	fsys := NewMemFS()
	l := openLog(t, fsys, testOpts(t, newClock()))
	defer l.Close()
	if _, ok, err := l.ReadPartitionMetadata(); ok || err != nil {
		t.Fatal(ok, err)
	}
	md := PartitionMetadata{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", AlignedEpoch: -1}
	if err := l.WritePartitionMetadata(md); err != nil {
		t.Fatal(err)
	}
	data, _ := vfs.ReadFile(fsys.CrashClone(), filepath.Join(testDir, PartitionMetadataFile))
	if string(data) != "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\naligned_epoch: -1\n" {
		t.Fatalf("%q", data)
	}
	got, ok, err := l.ReadPartitionMetadata()
	if !ok || err != nil || got != md {
		t.Fatal(got, ok, err)
	}
	for _, bad := range []string{"", "version: 1\ntopic_id: x\naligned_epoch: 1\n", "version: 0\ntopic_id: \naligned_epoch: 1\n", "version: 0\ntopic_id: x\naligned_epoch: -2\n", "version: 0\ntopic_id: x\n"} {
		if _, err := ParsePartitionMetadata([]byte(bad)); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestAppendManyBatchesOneCall appends several batches in one call, as
// follower fetches and batched produce requests do, and reads them back.
func TestAppendManyBatchesOneCall(t *testing.T) {
	fsys := NewMemFS()
	l := openLog(t, fsys, testOpts(t, newClock()))
	defer l.Close()
	var all []byte
	for range 4 {
		all = append(all, batchOf(t, 3, 10, 100)...)
	}
	info, err := l.AppendAsLeader(all, 2)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 11 || l.LogEndOffset() != 12 {
		t.Fatalf("leader append info %+v, LEO %d", info, l.LogEndOffset())
	}
	r, err := l.Read(0, 1<<20, 12)
	if err != nil {
		t.Fatal(err)
	}
	f := openLog(t, NewMemFS(), testOpts(t, newClock()))
	defer f.Close()
	if _, err := f.AppendAsFollower(r.Batches); err != nil {
		t.Fatal(err)
	}
	fr, err := f.Read(0, 1<<20, 12)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fr.Batches, r.Batches) {
		t.Fatal("follower copy differs from the leader's batches")
	}
}

// TestSyncEpochs: the log's epoch cache follows the replica's view: a
// leader's (LE, LEO) entry is assigned, and an entry the log kept past the
// view's last (an epoch without records cut at the LEO) is dropped by
// re-assigning the view's last entry; a view the log cannot reach by
// assigning its last entry reports false.
func TestSyncEpochs(t *testing.T) {
	fsys := NewMemFS()
	l := openLog(t, fsys, testOpts(t, newClock()))
	if _, err := l.AppendAsFollower(mustBatch(t, testRecords(2, 0), BatchOptions{BaseOffset: 0, LeaderEpoch: 1})); err != nil {
		t.Fatal(err)
	}
	want := []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 2}}
	if ok, err := l.SyncEpochs(want); err != nil || !ok {
		t.Fatalf("SyncEpochs(%v) = %t, %v", want, ok, err)
	}
	if diff := cmp.Diff(want, l.Epochs().Entries()); diff != "" {
		t.Fatal(diff)
	}
	// The view drops the empty epoch 3 (cut at the LEO) and enters 5 there.
	want = []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 5, StartOffset: 2}}
	if ok, err := l.SyncEpochs(want); err != nil || !ok {
		t.Fatalf("SyncEpochs(%v) = %t, %v", want, ok, err)
	}
	if diff := cmp.Diff(want, l.Epochs().Entries()); diff != "" {
		t.Fatal(diff)
	}
	// An entry below the last that the log lacks is not assigned.
	if ok, err := l.SyncEpochs([]epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 1}, {Epoch: 5, StartOffset: 2}}); err != nil || ok {
		t.Fatalf("unreachable view: %t, %v", ok, err)
	}
}

// SetSegmentMaxBytes changes where the active segment rolls from the next
// append on (a topic's segment.bytes), and 0 goes back to Options'.
func TestSetSegmentMaxBytes(t *testing.T) {
	c := newClock()
	o := testOpts(t, c) // 4096-byte segments
	l := openLog(t, NewMemFS(), o)
	defer l.Close()
	appendN(t, l, 4, 1, 200, 1, 0) // ~1 KiB: one segment
	if n := l.NumSegments(); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
	l.SetSegmentMaxBytes(1024)
	appendN(t, l, 12, 1, 200, 1, 0)
	if n := l.NumSegments(); n < 3 {
		t.Fatalf("%d segments after ~3 KiB more with 1 KiB segments, want at least 3", n)
	}
	l.SetSegmentMaxBytes(0)
	before := l.NumSegments()
	appendN(t, l, 12, 1, 200, 1, 0)
	if n := l.NumSegments(); n > before+1 {
		t.Fatalf("%d segments after ~3 KiB more with Options' 4 KiB, had %d: want at most one more", n, before)
	}
}
