package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/producer"
	"github.com/twinlog/twinlog/storage/vfs"
)

// kv is a record of the cleaner tests: key and value, or a tombstone.
type kv struct {
	key, value string
	tomb       bool
}

func put(k, v string) kv { return kv{key: k, value: v} }
func del(k string) kv    { return kv{key: k, tomb: true} }

// logRec is a record as read back, or as the model expects it.
type logRec struct {
	Off   twinlog.Offset
	Key   string
	Value string
	Tomb  bool
}

// kvBatch encodes recs as one batch at ts, of producer pr (nil: none).
func kvBatch(t testing.TB, ts int64, pr *Producer, codec Codec, recs ...kv) []byte {
	t.Helper()
	rs := make([]Record, len(recs))
	for i, r := range recs {
		rs[i] = Record{Timestamp: ts, Key: []byte(r.key)}
		if !r.tomb {
			rs[i].Value = []byte(r.value)
		}
	}
	return encodeWith(t, rs, codec, BatchOptions{Producer: pr})
}

// appendKV appends recs as one leader batch and the records to model.
func appendKV(t testing.TB, l *Log, model []logRec, ts int64, pr *Producer, codec Codec, recs ...kv) []logRec {
	t.Helper()
	info, err := l.AppendAsLeader(kvBatch(t, ts, pr, codec, recs...), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		model = append(model, logRec{Off: info.FirstOffset + twinlog.Offset(i), Key: r.key, Value: r.value, Tomb: r.tomb})
	}
	return model
}

// readRecords reads the whole log.
func readRecords(t testing.TB, l *Log) []logRec {
	t.Helper()
	var out []logRec
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
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				out = append(out, logRec{Off: rec.Offset, Key: string(rec.Key), Value: string(rec.Value), Tomb: rec.Value == nil})
			}
			from = b.NextOffset()
		}
	}
}

// readRecordsTo reads the log below end, which nothing truncates.
func readRecordsTo(l *Log, end twinlog.Offset) ([]logRec, error) {
	var out []logRec
	for from := l.LogStartOffset(); from < end; {
		r, err := l.Read(from, 1<<20, end)
		if err != nil {
			return nil, err
		}
		bs, err := SplitBatches(r.Batches)
		if err != nil || len(bs) == 0 {
			return out, err
		}
		for _, b := range bs {
			recs, err := b.Records()
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				out = append(out, logRec{Off: rec.Offset, Key: string(rec.Key), Value: string(rec.Value), Tomb: rec.Value == nil})
			}
			from = b.NextOffset()
		}
	}
	return out, nil
}

// compacted is model cleaned below end: per key its latest record below
// end (tombstones too unless tombstonesGone), then every record from end.
func compacted(model []logRec, end twinlog.Offset, tombstonesGone bool) []logRec {
	latest := map[string]twinlog.Offset{}
	for _, r := range model {
		if r.Off < end {
			latest[r.Key] = r.Off
		}
	}
	var out []logRec
	for _, r := range model {
		if r.Off >= end || latest[r.Key] == r.Off && !(r.Tomb && tombstonesGone) {
			out = append(out, r)
		}
	}
	return out
}

// fillKeys appends n batches of 4 records over keys k0..k(keys-1), every
// 17th record a tombstone, one second apart.
func fillKeys(t testing.TB, l *Log, c *fakeClock, model []logRec, n, keys int, codec Codec) []logRec {
	t.Helper()
	for range n {
		var recs []kv
		for j := range 4 {
			x := len(model) + j
			k := fmt.Sprintf("k%d", x%keys)
			if x%17 == 16 {
				recs = append(recs, del(k))
			} else {
				recs = append(recs, put(k, fmt.Sprintf("v%04d-%s", x, strings.Repeat("x", 30))))
			}
		}
		model = appendKV(t, l, model, c.Now().UnixMilli(), nil, codec, recs...)
		c.Advance(time.Second)
	}
	return model
}

// settle rolls the active segment and moves the HW to the LEO, so
// everything is cleanable.
func settle(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
}

func mustClean(t testing.TB, cl *Cleaner, l *Log, cc CompactionConfig) CleanStats {
	t.Helper()
	st, err := cl.Clean(context.Background(), l, cc)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestCleanKeepsLatestPerKey: a round leaves per key only its latest
// record (tombstones within their horizon included), every one at its
// offset, with log start and LEO unchanged and fewer segments; the dirty
// ratio drops to 0; a reopened log (clean or after a crash, full recovery
// scan) reads the same.
func TestCleanKeepsLatestPerKey(t *testing.T) {
	c := newClock()
	fsys := NewMemFS()
	o := testOpts(t, c)
	l := openLog(t, fsys, o)
	model := fillKeys(t, l, c, nil, 60, 11, CodecNone)
	settle(t, l)
	leo, segs := l.LogEndOffset(), l.NumSegments()
	if segs < 5 {
		t.Fatalf("only %d segments", segs)
	}
	before := l.CleanerStatus(DefaultCompactionConfig)
	if before.DirtyRatio != 1 || !before.NeedsCleaning || before.FirstDirtyOffset != 0 || before.FirstUncleanableOffset != leo {
		t.Fatalf("status before: %+v", before)
	}
	st := mustClean(t, NewCleaner(CleanerConfig{}), l, DefaultCompactionConfig)
	if st.EndOffset != leo || st.SwappedGroups == 0 || st.RecordsRemoved == 0 || st.BytesAfter >= st.BytesBefore || st.Aborted {
		t.Fatalf("stats %+v", st)
	}
	want := compacted(model, leo, false)
	if diff := cmp.Diff(want, readRecords(t, l)); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	if l.LogEndOffset() != leo || l.LogStartOffset() != 0 || l.NumSegments() > segs {
		t.Fatalf("LEO %d start %d segments %d (was %d)", l.LogEndOffset(), l.LogStartOffset(), l.NumSegments(), segs)
	}
	after := l.CleanerStatus(DefaultCompactionConfig)
	if after.DirtyRatio != 0 || after.NeedsCleaning || after.FirstDirtyOffset != leo || after.LastClean.IsZero() || after.LastStats.EndOffset != leo {
		t.Fatalf("status after: %+v", after)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*MemFS{"reopened": fsys, "crashed": fsys.CrashClone()} {
		l2 := openLog(t, f, o)
		if diff := cmp.Diff(want, readRecords(t, l2)); diff != "" || l2.LogEndOffset() != leo {
			t.Fatalf("%s: LEO %d, records (-want +got):\n%s", name, l2.LogEndOffset(), diff)
		}
		if st := l2.CleanerStatus(DefaultCompactionConfig); st.FirstDirtyOffset != leo {
			t.Fatalf("%s: first dirty offset %d, want %d (cleaner checkpoint)", name, st.FirstDirtyOffset, leo)
		}
		l2.Close()
	}
}

// TestCleanTombstones: a tombstone outlives the round that compacts the
// key's older records by delete.retention.ms, measured from that round,
// then a round drops it, even with nothing dirty; a tombstone of a round
// not yet that old stays.
func TestCleanTombstones(t *testing.T) {
	c := newClock()
	l := openLog(t, NewMemFS(), testOpts(t, c))
	cc := CompactionConfig{DeleteRetention: time.Hour}
	var model []logRec
	model = appendKV(t, l, model, c.Now().UnixMilli(), nil, CodecNone, put("a", "a1"), put("b", "b1"), put("c", "c1"))
	model = appendKV(t, l, model, c.Now().UnixMilli(), nil, CodecNone, del("a"), put("b", "b2"))
	settle(t, l)
	cl := NewCleaner(CleanerConfig{})
	mustClean(t, cl, l, cc)
	end1 := l.LogEndOffset()
	want := []logRec{{Off: 2, Key: "c", Value: "c1"}, {Off: 3, Key: "a", Tomb: true}, {Off: 4, Key: "b", Value: "b2"}}
	if diff := cmp.Diff(want, readRecords(t, l)); diff != "" {
		t.Fatalf("first round (-want +got):\n%s", diff)
	}
	// A second tombstone, compacted 30 minutes later.
	c.Advance(30 * time.Minute)
	model = appendKV(t, l, model, c.Now().UnixMilli(), nil, CodecNone, del("c"), put("d", "d1"))
	settle(t, l)
	mustClean(t, cl, l, cc)
	want = []logRec{{Off: 3, Key: "a", Tomb: true}, {Off: 4, Key: "b", Value: "b2"}, {Off: 5, Key: "c", Tomb: true}, {Off: 6, Key: "d", Value: "d1"}}
	if diff := cmp.Diff(want, readRecords(t, l)); diff != "" {
		t.Fatalf("second round (-want +got):\n%s", diff)
	}
	c.Advance(29 * time.Minute) // 59 min after the first round
	if st := l.CleanerStatus(cc); st.NeedsCleaning {
		t.Fatalf("due before the horizon: %+v", st)
	}
	if st := mustClean(t, cl, l, cc); st.RecordsRemoved != 0 {
		t.Fatalf("a round before the horizon removed %d", st.RecordsRemoved)
	}
	c.Advance(time.Minute + time.Millisecond)
	if st := l.CleanerStatus(cc); !st.NeedsCleaning {
		t.Fatalf("not due past the first tombstone's horizon: %+v", st)
	}
	if st := mustClean(t, cl, l, cc); st.TombstonesRemoved != 1 {
		t.Fatalf("round at the horizon: %+v", st)
	}
	want = want[1:]
	if diff := cmp.Diff(want, readRecords(t, l)); diff != "" {
		t.Fatalf("past the first horizon (-want +got):\n%s", diff)
	}
	c.Advance(30 * time.Minute)
	mustClean(t, cl, l, cc)
	want = []logRec{{Off: 4, Key: "b", Value: "b2"}, {Off: 6, Key: "d", Value: "d1"}}
	if diff := cmp.Diff(want, readRecords(t, l)); diff != "" {
		t.Fatalf("past both horizons (-want +got):\n%s", diff)
	}
	if l.LogEndOffset() != end1+2 || len(model) != 7 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}

// TestCleanCompressedBatches: batches of every codec are thinned and
// re-compressed with their own codec; the records are the latest per key.
func TestCleanCompressedBatches(t *testing.T) {
	for _, codec := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			c := newClock()
			l := openLog(t, NewMemFS(), testOpts(t, c))
			model := fillKeys(t, l, c, nil, 40, 7, codec)
			settle(t, l)
			mustClean(t, NewCleaner(CleanerConfig{}), l, DefaultCompactionConfig)
			if diff := cmp.Diff(compacted(model, l.LogEndOffset(), false), readRecords(t, l)); diff != "" {
				t.Fatalf("records (-want +got):\n%s", diff)
			}
			r, err := l.Read(0, 1<<30, l.LogEndOffset())
			if err != nil {
				t.Fatal(err)
			}
			bs, _ := SplitBatches(r.Batches)
			for _, b := range bs {
				if b.RecordCount() > 0 && b.Codec() != codec {
					t.Fatalf("batch at %d is %s", b.BaseOffset(), b.Codec())
				}
			}
		})
	}
}

// TestCleanKeepsProducerState: an idempotent producer's batches are
// compacted away but its last batch stays, empty, with its offsets and
// sequences, so its state rebuilt from the log (no snapshot) still knows
// its last batch: a retry is a duplicate, the next sequence appends.
func TestCleanKeepsProducerState(t *testing.T) {
	c := newClock()
	fsys := NewMemFS()
	o := testOpts(t, c)
	l := openLog(t, fsys, o)
	var model []logRec
	for seq := int32(0); seq < 6; seq += 2 {
		pr := &Producer{ID: 77, Epoch: 3, BaseSequence: seq}
		model = appendKV(t, l, model, c.Now().UnixMilli(), pr, CodecNone, put("x", fmt.Sprint("x", seq)), put("y", fmt.Sprint("y", seq)))
	}
	model = appendKV(t, l, model, c.Now().UnixMilli(), nil, CodecNone, put("x", "x9"), put("y", "y9"))
	settle(t, l)
	producersBefore := l.Producers()
	mustClean(t, NewCleaner(CleanerConfig{}), l, DefaultCompactionConfig)
	if diff := cmp.Diff(compacted(model, l.LogEndOffset(), false), readRecords(t, l)); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	// The producer's last batch is there, empty; its earlier ones are gone.
	if got := readAllOffsets(t, l); !slices.Contains(got, [3]int64{4, 5, 0}) || slices.Contains(got, [3]int64{2, 3, 0}) {
		t.Fatalf("batches %v", got)
	}
	if diff := cmp.Diff(producersBefore, l.Producers()); diff != "" {
		t.Fatalf("producers changed by the clean:\n%s", diff)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fsys.List(testDir)
	for _, n := range names {
		if strings.HasSuffix(n, snapshotSuffix) {
			if err := fsys.Remove(testDir + "/" + n); err != nil {
				t.Fatal(err)
			}
		}
	}
	l = openLog(t, fsys, o)
	got := l.Producers()
	if len(got) != 1 || got[0].ID != 77 || got[0].Epoch != 3 {
		t.Fatalf("rebuilt producers %+v", got)
	}
	last := got[0].Batches[len(got[0].Batches)-1]
	wantLast := producersBefore[0].Batches[len(producersBefore[0].Batches)-1]
	if last != wantLast {
		t.Fatalf("rebuilt last batch %+v, want %+v", last, wantLast)
	}
	check := func(seq int32, want producer.Outcome) {
		t.Helper()
		v, err := ValidateBatches(kvBatch(t, c.Now().UnixMilli(), &Producer{ID: 77, Epoch: 3, BaseSequence: seq}, CodecNone, put("x", "r"), put("y", "r")))
		if err != nil {
			t.Fatal(err)
		}
		if verdict, _ := l.CheckProducers(v); verdict.Outcome != want {
			t.Fatalf("sequence %d: %v, want %v", seq, verdict.Outcome, want)
		}
	}
	check(4, producer.Duplicate)
	check(6, producer.Append)
	l.Close()
}

// TestCleanedLogReplicates: a follower copies a compacted leader's
// batches, gaps and empty batches included, byte for byte
// (AppendValidatedAsFollower), ends at the same LEO with the same
// producers, and its own clean removes nothing more.
func TestCleanedLogReplicates(t *testing.T) {
	c := newClock()
	leader := openLog(t, NewMemFS(), testOpts(t, c))
	var model []logRec
	model = appendKV(t, leader, model, c.Now().UnixMilli(), &Producer{ID: 5, Epoch: 0, BaseSequence: 0}, CodecNone, put("p", "1"), put("q", "1"))
	model = fillKeys(t, leader, c, model, 30, 5, CodecZstd)
	model = appendKV(t, leader, model, c.Now().UnixMilli(), nil, CodecNone, put("p", "2"), put("q", "2"))
	settle(t, leader)
	mustClean(t, NewCleaner(CleanerConfig{}), leader, DefaultCompactionConfig)
	follower := openLog(t, NewMemFS(), testOpts(t, c))
	var leaderBytes []byte
	for from := twinlog.Offset(0); from < leader.LogEndOffset(); {
		r, err := leader.Read(from, 512, leader.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		v, err := ValidateBatches(r.Batches)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendValidatedAsFollower(v); err != nil {
			t.Fatalf("append at %d: %v", from, err)
		}
		leaderBytes = append(leaderBytes, r.Batches...)
		bs := v.Batches()
		from = bs[len(bs)-1].NextOffset()
	}
	r, err := follower.Read(0, 1<<30, follower.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Batches, leaderBytes) || follower.LogEndOffset() != leader.LogEndOffset() {
		t.Fatalf("follower: %d bytes to %d, leader %d bytes to %d", len(r.Batches), follower.LogEndOffset(), len(leaderBytes), leader.LogEndOffset())
	}
	if diff := cmp.Diff(leader.Producers(), follower.Producers()); diff != "" {
		t.Fatalf("producers (-leader +follower):\n%s", diff)
	}
	settle(t, follower)
	if st := mustClean(t, NewCleaner(CleanerConfig{}), follower, DefaultCompactionConfig); st.RecordsRemoved != 0 {
		t.Fatalf("the follower's clean removed %d records", st.RecordsRemoved)
	}
	if diff := cmp.Diff(compacted(model, leader.LogEndOffset(), false), readRecords(t, follower)); diff != "" {
		t.Fatalf("follower records (-want +got):\n%s", diff)
	}
}

// TestCleanBoundedMap: with a dedupe buffer for 3 keys, a round cleans the
// prefix its map covers and the next goes on from there; the log ends as
// one unbounded round would leave it.
func TestCleanBoundedMap(t *testing.T) {
	c := newClock()
	l := openLog(t, NewMemFS(), testOpts(t, c))
	model := fillKeys(t, l, c, nil, 40, 10, CodecNone)
	settle(t, l)
	leo := l.LogEndOffset()
	cl := NewCleaner(CleanerConfig{DedupeBufferBytes: 4 * mapSlotBytes})
	rounds := 0
	for first := twinlog.Offset(0); first < leo; rounds++ {
		st := mustClean(t, cl, l, DefaultCompactionConfig)
		if st.MapKeys > 3 || st.EndOffset <= first || st.FirstDirtyOffset != first {
			t.Fatalf("round %d: %+v", rounds, st)
		}
		if diff := cmp.Diff(compacted(model, st.EndOffset, false), readRecords(t, l)); diff != "" {
			t.Fatalf("round %d to %d (-want +got):\n%s", rounds, st.EndOffset, diff)
		}
		first = st.EndOffset
	}
	if rounds < 3 {
		t.Fatalf("%d rounds", rounds)
	}
	// Later rounds merged the segments the earlier ones shrank.
	if n := l.NumSegments(); n > 3 {
		t.Fatalf("%d segments after %d rounds", n, rounds)
	}
}

// TestCleanCrashAtEveryStep crashes a round at each of its file system
// operations (the operation fails, nothing after it happens, unsynced
// state is lost) and, for crashes that leave a swap, also recovery at
// each of its operations. Every reopened log is valid, holds between the
// compacted and the original records (each at its offset, every latest
// per key there), the same LEO and producers, and a clean then ends it
// as an uninterrupted one does.
func TestCleanCrashAtEveryStep(t *testing.T) {
	c := newClock()
	base := NewMemFS()
	o := testOpts(t, c)
	l := openLog(t, base, o)
	model := appendKV(t, l, nil, c.Now().UnixMilli(), &Producer{ID: 9, Epoch: 1, BaseSequence: 0}, CodecNone, put("k1", "p"), put("k2", "p"))
	// Small segments, so groups of several are merged into one.
	for range 7 {
		model = fillKeys(t, l, c, model, 6, 6, CodecNone)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	model = fillKeys(t, l, c, model, 10, 6, CodecGzip)
	settle(t, l)
	leo := l.LogEndOffset()
	o.HighWatermark = leo
	producers := l.Producers()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	pre := readRecords(t, openLog(t, base.CrashClone(), o))
	if diff := cmp.Diff(model, pre); diff != "" {
		t.Fatalf("pre-clean (-want +got):\n%s", diff)
	}
	final := compacted(model, leo, false)

	// The reference round, counting its operations.
	ref := base.CrashClone()
	rl := openLog(t, ref, o)
	ops := 0
	ref.SetInjector(func(vfs.Op, string) error { ops++; return nil })
	mustClean(t, NewCleaner(CleanerConfig{IOBufferBytes: 1024}), rl, DefaultCompactionConfig)
	ref.SetInjector(nil)
	if diff := cmp.Diff(final, readRecords(t, rl)); diff != "" {
		t.Fatalf("reference (-want +got):\n%s", diff)
	}

	verify := func(what string, fs *MemFS) {
		t.Helper()
		l, err := Open(fs, testDir, o)
		if err != nil {
			t.Fatalf("%s: reopen: %v", what, err)
		}
		got := readRecords(t, l)
		byOff := map[twinlog.Offset]logRec{}
		for _, r := range pre {
			byOff[r.Off] = r
		}
		for _, r := range got {
			if byOff[r.Off] != r {
				t.Fatalf("%s: record %+v not in the original log", what, r)
			}
		}
		for _, r := range final {
			if !slices.Contains(got, r) {
				t.Fatalf("%s: latest record %+v lost", what, r)
			}
		}
		if l.LogEndOffset() != leo || l.LogStartOffset() != 0 {
			t.Fatalf("%s: LEO %d, start %d", what, l.LogEndOffset(), l.LogStartOffset())
		}
		if diff := cmp.Diff(producers, l.Producers()); diff != "" {
			t.Fatalf("%s: producers (-want +got):\n%s", what, diff)
		}
		mustClean(t, NewCleaner(CleanerConfig{}), l, DefaultCompactionConfig)
		if diff := cmp.Diff(final, readRecords(t, l)); diff != "" {
			t.Fatalf("%s: after a new clean (-want +got):\n%s", what, diff)
		}
		l.Close()
	}
	// crashAt runs f on fs with the k-th operation and all after it failing.
	crashAt := func(fs *MemFS, k int, f func()) {
		n := 0
		fs.SetInjector(func(vfs.Op, string) error {
			if n++; n > k {
				return vfs.ErrInjected
			}
			return nil
		})
		f()
		fs.SetInjector(nil)
	}
	swaps := 0
	for k := range ops {
		fs := base.CrashClone()
		l := openLog(t, fs, o)
		crashAt(fs, k, func() {
			_, _ = NewCleaner(CleanerConfig{IOBufferBytes: 1024}).Clean(context.Background(), l, DefaultCompactionConfig)
		})
		crashed := fs.CrashClone()
		verify(fmt.Sprintf("crash at operation %d", k), crashed.CrashClone())
		names, _ := crashed.List(testDir)
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, swapSuffix) }) {
			continue
		}
		swaps++
		if swaps%8 != 1 {
			continue // a sample of the crashes after a commit (the race detector is slow)
		}
		// Recovery finishes the swap: crash it at each step too.
		for j := 0; ; j++ {
			fs2 := crashed.CrashClone()
			var err error
			crashAt(fs2, j, func() { _, err = Open(fs2, testDir, o) })
			verify(fmt.Sprintf("crash at operation %d, then at recovery operation %d", k, j), fs2.CrashClone())
			if err == nil {
				break
			}
		}
	}
	if swaps == 0 {
		t.Fatal("no crash left a committed swap")
	}
	if segs := rl.NumSegments(); segs >= 8 {
		t.Fatalf("the reference round merged no segments (%d)", segs)
	}
	t.Logf("%d operations, %d crashes after a commit", ops, swaps)
}

// TestCleanAbortedByTruncationRetentionClose: a truncation, a retention or
// a Close while a round runs stops it before its swap; the log is as that
// operation left it, no cleaned file stays, and the next round cleans.
func TestCleanAbortedByTruncationRetentionClose(t *testing.T) {
	for _, tc := range []string{"truncate", "retain", "close"} {
		t.Run(tc, func(t *testing.T) {
			c := newClock()
			fsys := NewMemFS()
			o := testOpts(t, c)
			l := openLog(t, fsys, o)
			model := fillKeys(t, l, c, nil, 40, 5, CodecNone)
			settle(t, l)
			leo := l.LogEndOffset()
			cl := NewCleaner(CleanerConfig{})
			var opErr error
			cl.beforeSwap = func() {
				cl.beforeSwap = nil
				switch tc {
				case "truncate":
					opErr = l.TruncateTo(leo - 30)
				case "retain":
					l.mu.RLock()
					first := l.segs[0].size
					l.mu.RUnlock()
					var n int
					if n, _, opErr = l.DeleteRetained(Retention{Bytes: l.Size() - first, Below: l.HighWatermark()}); n != 1 {
						t.Errorf("retention deleted %d segments", n)
					}
				case "close":
					opErr = l.Close()
				}
			}
			st, err := cl.Clean(context.Background(), l, DefaultCompactionConfig)
			if err != nil || opErr != nil || !st.Aborted || st.SwappedGroups != 0 {
				t.Fatalf("clean: %+v, %v; %s: %v", st, err, tc, opErr)
			}
			names, _ := fsys.List(testDir)
			for _, n := range names {
				if strings.HasSuffix(n, cleanedSuffix) && tc != "close" || strings.HasSuffix(n, swapSuffix) {
					t.Fatalf("left %s", n)
				}
			}
			if tc == "close" {
				l = openLog(t, fsys, o)
				if diff := cmp.Diff(model, readRecords(t, l)); diff != "" {
					t.Fatalf("reopened (-want +got):\n%s", diff)
				}
				l.SetHighWatermark(leo)
			}
			if tc == "truncate" {
				leo = l.LogEndOffset()
				model = slices.DeleteFunc(model, func(r logRec) bool { return r.Off >= leo })
				settle(t, l)
			}
			if tc == "retain" {
				start := l.LogStartOffset()
				model = slices.DeleteFunc(model, func(r logRec) bool { return r.Off < start })
			}
			mustClean(t, cl, l, DefaultCompactionConfig)
			if diff := cmp.Diff(compacted(model, leo, false), readRecords(t, l)); diff != "" {
				t.Fatalf("next round (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCleanConcurrent runs rounds while a writer appends, truncates its
// uncommitted tail and moves the HW, and readers read: every read record
// is the one written at its offset, and the log ends compacted (run with
// -race).
func TestCleanConcurrent(t *testing.T) {
	c := newClock()
	o := testOpts(t, c)
	l := openLog(t, NewMemFS(), o)
	var mu sync.Mutex // guards model
	var model []logRec
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // writer
		defer wg.Done()
		defer cancel()
		r := rand.New(rand.NewPCG(1, 2))
		for i := range 400 {
			mu.Lock()
			prevLEO := l.LogEndOffset()
			x := len(model)
			recs := []kv{put(fmt.Sprintf("k%d", r.IntN(20)), fmt.Sprintf("v%d-%s", x, strings.Repeat("y", 40)))}
			if i%13 == 0 {
				recs = append(recs, del(fmt.Sprintf("k%d", r.IntN(20))))
			}
			model = appendKV(t, l, model, c.Now().UnixMilli(), nil, CodecNone, recs...)
			if i%7 == 0 {
				hw := l.HighWatermark()
				if err := l.TruncateTo(hw); err != nil {
					t.Error(err)
				}
				model = slices.DeleteFunc(model, func(r logRec) bool { return r.Off >= l.LogEndOffset() })
			}
			// The HW is at a batch boundary, as replicas' LEOs are, and
			// never goes down (nobody truncates below it).
			hw := l.LogEndOffset()
			if r.IntN(3) == 0 {
				hw = min(hw, prevLEO)
			}
			l.SetHighWatermark(max(l.HighWatermark(), hw))
			mu.Unlock()
		}
	}()
	go func() { // cleaner
		defer wg.Done()
		cl := NewCleaner(CleanerConfig{DedupeBufferBytes: 10 * mapSlotBytes})
		swapped, aborted := 0, 0
		for ctx.Err() == nil {
			st, err := cl.Clean(ctx, l, CompactionConfig{DeleteRetention: time.Hour})
			if err != nil && ctx.Err() == nil {
				t.Error(err)
			}
			swapped += st.SwappedGroups
			if st.Aborted {
				aborted++
			}
		}
		t.Logf("%d groups swapped in, %d rounds aborted", swapped, aborted)
	}()
	go func() { // reader
		defer wg.Done()
		for ctx.Err() == nil {
			hw := l.HighWatermark()
			got, err := readRecordsTo(l, hw)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			byOff := map[twinlog.Offset]logRec{}
			for _, r := range model {
				byOff[r.Off] = r
			}
			mu.Unlock()
			for _, r := range got {
				if r.Off < hw && byOff[r.Off] != r {
					t.Errorf("read %+v, wrote %+v", r, byOff[r.Off])
					return
				}
			}
		}
	}()
	wg.Wait()
	settle(t, l)
	mustClean(t, NewCleaner(CleanerConfig{}), l, CompactionConfig{DeleteRetention: time.Hour})
	if diff := cmp.Diff(compacted(model, l.LogEndOffset(), false), readRecords(t, l)); diff != "" {
		t.Fatalf("final (-want +got):\n%s", diff)
	}
}

// TestCleanerStatusDue: a log is due above min.cleanable.dirty.ratio, or
// with dirty data older than max.compaction.lag.ms whatever the ratio
// (Kafka's rule), and a round rolls an active segment older than the lag.
func TestCleanerStatusDue(t *testing.T) {
	c := newClock()
	l := openLog(t, NewMemFS(), testOpts(t, c))
	model := fillKeys(t, l, c, nil, 40, 5, CodecNone)
	settle(t, l)
	mustClean(t, NewCleaner(CleanerConfig{}), l, DefaultCompactionConfig)
	model = fillKeys(t, l, c, model, 10, 5, CodecNone)
	settle(t, l)
	st := l.CleanerStatus(CompactionConfig{MinCleanableDirtyRatio: 0.99})
	if st.DirtyBytes == 0 || st.DirtyRatio <= 0 || st.DirtyRatio >= 0.99 || st.NeedsCleaning {
		t.Fatalf("ratio: %+v", st)
	}
	if st := l.CleanerStatus(CompactionConfig{MinCleanableDirtyRatio: st.DirtyRatio - 0.01}); !st.NeedsCleaning {
		t.Fatalf("above the ratio: %+v", st)
	}
	lag := CompactionConfig{MinCleanableDirtyRatio: 0.99, MaxCompactionLag: time.Hour}
	if st := l.CleanerStatus(lag); st.NeedsCleaning || st.MaxCompactionDelay > 0 {
		t.Fatalf("not overdue yet: %+v", st)
	}
	c.Advance(2 * time.Hour)
	if st := l.CleanerStatus(lag); !st.NeedsCleaning || st.MaxCompactionDelay <= 0 {
		t.Fatalf("overdue: %+v", st)
	}
	mustClean(t, NewCleaner(CleanerConfig{}), l, lag)
	// Only the active segment holds dirty data: overdue, the round rolls it.
	model = appendKV(t, l, model, c.Now().UnixMilli(), nil, CodecNone, put("k1", "late"))
	l.SetHighWatermark(l.LogEndOffset())
	c.Advance(2 * time.Hour)
	if st := l.CleanerStatus(lag); !st.NeedsCleaning {
		t.Fatalf("overdue in the active segment: %+v", st)
	}
	mustClean(t, NewCleaner(CleanerConfig{}), l, lag)
	if st := l.CleanerStatus(lag); st.FirstDirtyOffset != l.LogEndOffset() || st.NeedsCleaning {
		t.Fatalf("the round did not roll and clean the overdue active segment: %+v", st)
	}
	if diff := cmp.Diff(compacted(model, l.LogEndOffset(), false), readRecords(t, l)); diff != "" {
		t.Fatalf("after the lag round (-want +got):\n%s", diff)
	}
}

// TestThrottle: the shared rate holds across callers; a cancelled context
// ends a wait.
func TestThrottle(t *testing.T) {
	th := NewThrottle(100_000) // bytes per second
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 2 {
				if err := th.Wait(context.Background(), 5_000); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("30 kB at 100 kB/s took %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := th.Wait(ctx, 1_000_000); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	var none *Throttle
	if err := none.Wait(context.Background(), 1<<30); err != nil {
		t.Fatal(err)
	}
}

// TestCleanHistoryFollowsTruncation: after a truncation below a round's
// end, records written again at those offsets are dirty: a tombstone
// among them is kept through its own first round, however old the round
// that had cleaned the offsets before.
func TestCleanHistoryFollowsTruncation(t *testing.T) {
	c := newClock()
	fsys := NewMemFS()
	o := testOpts(t, c)
	l := openLog(t, fsys, o)
	cc := CompactionConfig{DeleteRetention: time.Hour}
	model := fillKeys(t, l, c, nil, 20, 3, CodecNone)
	settle(t, l)
	mustClean(t, NewCleaner(CleanerConfig{}), l, cc)
	c.Advance(2 * time.Hour)
	cut := l.LogEndOffset() - 20
	l.SetHighWatermark(cut) // as a replica whose uncommitted tail goes
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	cut = l.LogEndOffset()
	model = slices.DeleteFunc(model, func(r logRec) bool { return r.Off >= cut })
	model = appendKV(t, l, model, c.Now().UnixMilli(), nil, CodecNone, put("k0", "again"), del("k0"))
	settle(t, l)
	if st := l.CleanerStatus(cc); st.FirstDirtyOffset > cut {
		t.Fatalf("first dirty offset %d above the truncation to %d", st.FirstDirtyOffset, cut)
	}
	mustClean(t, NewCleaner(CleanerConfig{}), l, cc)
	if diff := cmp.Diff(compacted(model, l.LogEndOffset(), false), readRecords(t, l)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// The same after a restart (the checkpoint was cut too).
	l.Close()
	l = openLog(t, fsys, o)
	if st := l.CleanerStatus(cc); st.FirstDirtyOffset != l.LogEndOffset() {
		t.Fatalf("first dirty offset %d after a restart", st.FirstDirtyOffset)
	}
}

// TestCleanHistoryCutByRecovery: a crash that loses unsynced segment data
// a round had covered (it had nothing to remove there, so it rewrote
// nothing) leaves no round above the recovered LEO.
func TestCleanHistoryCutByRecovery(t *testing.T) {
	c := newClock()
	fsys := NewMemFS()
	o := testOpts(t, c)
	l := openLog(t, fsys, o)
	for i := range 30 {
		appendKV(t, l, nil, c.Now().UnixMilli(), nil, CodecNone, put(fmt.Sprint("unique", i), strings.Repeat("v", 200)))
	}
	settle(t, l)
	if st := mustClean(t, NewCleaner(CleanerConfig{}), l, DefaultCompactionConfig); st.EndOffset != l.LogEndOffset() || st.SwappedGroups != 0 {
		t.Fatalf("round %+v", st)
	}
	l2 := openLog(t, fsys.CrashClone(), o) // the appends were never flushed
	if st := l2.CleanerStatus(DefaultCompactionConfig); l2.LogEndOffset() >= l.LogEndOffset() || st.FirstDirtyOffset > l2.LogEndOffset() {
		t.Fatalf("recovered LEO %d (was %d), first dirty offset %d", l2.LogEndOffset(), l.LogEndOffset(), st.FirstDirtyOffset)
	}
}

// TestCleanThrottled: a round's reads and writes go through its Throttle.
func TestCleanThrottled(t *testing.T) {
	c := newClock()
	l := openLog(t, NewMemFS(), testOpts(t, c))
	fillKeys(t, l, c, nil, 60, 11, CodecNone)
	settle(t, l)
	const rate = 100_000
	start := time.Now()
	st := mustClean(t, NewCleaner(CleanerConfig{Throttle: NewThrottle(rate), IOBufferBytes: 4096}), l, DefaultCompactionConfig)
	moved := st.BytesRead + st.BytesWritten
	if least := time.Duration(float64(moved-2*4096) / rate * float64(time.Second)); time.Since(start) < least || moved < 20_000 {
		t.Fatalf("%d bytes in %v at %d bytes/s (at least %v)", moved, time.Since(start), rate, least)
	}
}
