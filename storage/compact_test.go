package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/twinlog/twinlog"
)

// mapWithCapacity is a key map that takes at most c keys.
func mapWithCapacity(c int) *keyMap { return &keyMap{maxSlots: c + 1, limit: c} }

// TestKeyMap: put and get the latest offset per key; a full map refuses
// new keys but still updates known ones; the memory bound holds while it
// grows; reset empties it.
func TestKeyMap(t *testing.T) {
	m := newKeyMap(24 * 100)
	if m.capacity() != 90 {
		t.Fatalf("capacity %d, want 90 (0.9 of 100 slots)", m.capacity())
	}
	for i := range 90 {
		if !m.put(fmt.Appendf(nil, "k%d", i), twinlog.Offset(i)) {
			t.Fatalf("put %d refused below capacity", i)
		}
	}
	if len(m.slots) > 100 {
		t.Fatalf("%d slots, bound 100", len(m.slots))
	}
	if m.put([]byte("new"), 100) {
		t.Fatal("a full map took a new key")
	}
	if !m.put([]byte("k3"), 200) {
		t.Fatal("a full map refused a known key")
	}
	if o, ok := m.get([]byte("k3")); !ok || o != 200 {
		t.Fatalf("get k3 = %d, %v", o, ok)
	}
	if o, ok := m.get([]byte("k89")); !ok || o != 89 {
		t.Fatalf("get k89 = %d, %v", o, ok)
	}
	if _, ok := m.get([]byte("new")); ok {
		t.Fatal("refused key found")
	}
	m.reset()
	if _, ok := m.get([]byte("k3")); ok || m.size() != 0 {
		t.Fatal("reset kept a key")
	}
	// The smallest buffer still takes one key (progress).
	if tiny := newKeyMap(1); tiny.capacity() != 1 || !tiny.put([]byte("a"), 0) || tiny.put([]byte("b"), 1) {
		t.Fatalf("tiny map capacity %d", tiny.capacity())
	}
}

// TestCleanHistory: the first dirty offset, tombstone deadlines, the
// effect of truncation and of the bound on rounds, and the file format.
func TestCleanHistory(t *testing.T) {
	var h cleanHistory
	h = h.add(100, 1000).add(100, 1500).add(250, 2000).add(400, 3000)
	if h.firstDirty() != 400 || len(h) != 3 {
		t.Fatalf("history %v", h)
	}
	for _, c := range []struct {
		now, retention int64
		want           twinlog.Offset
	}{
		{999, 0, 0}, {1000, 0, 100}, {2500, 1000, 100}, {3000, 1000, 250}, {4000, 1000, 400}, {math.MaxInt64 / 2, 1000, 400},
	} {
		if got := h.deletableBelow(c.now, c.retention); got != c.want {
			t.Errorf("deletableBelow(%d, %d) = %d, want %d", c.now, c.retention, got, c.want)
		}
	}
	// Cut at 200: the round that cleaned 100..250 cleaned 100..200 first;
	// the later round's offsets are gone.
	if got := h.truncate(200); !slices.Equal(got, cleanHistory{{100, 1000}, {200, 2000}}) {
		t.Errorf("truncate(200) = %v", got)
	}
	if got := h.truncate(100); !slices.Equal(got, cleanHistory{{100, 1000}}) {
		t.Errorf("truncate(100) = %v", got)
	}
	if got := h.truncate(0); got != nil {
		t.Errorf("truncate(0) = %v", got)
	}
	if got := h.truncate(500); !slices.Equal(got, h) {
		t.Errorf("truncate(500) = %v", got)
	}
	// Bounded: merging only delays (each offset's time never decreases).
	var long cleanHistory
	for i := range 3 * maxCleanPasses {
		long = long.add(twinlog.Offset(10*(i+1)), int64(i*i))
	}
	if len(long) != maxCleanPasses || long.firstDirty() != 30*maxCleanPasses {
		t.Fatalf("long history: %d rounds to %d", len(long), long.firstDirty())
	}
	for o := twinlog.Offset(0); o < 30*maxCleanPasses; o += 7 {
		i := int(o / 10) // the round that really cleaned o
		if at := cleanedAt(long, o); at < int64(i*i) {
			t.Fatalf("offset %d cleaned at %d in the merged history, really at %d", o, at, i*i)
		}
	}
	got, err := parseCleanHistory(h.marshal())
	if err != nil || !slices.Equal(got, h) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n5 1\n", "0\n2\n5 1\n4 2\n", "0\n1\nx y\n"} {
		if _, err := parseCleanHistory([]byte(bad)); err == nil {
			t.Errorf("parse %q accepted", bad)
		}
	}
}

// cleanedAt is when h says offset o was first cleaned.
func cleanedAt(h cleanHistory, o twinlog.Offset) int64 {
	for _, p := range h {
		if p.End > o {
			return p.TimeMs
		}
	}
	return math.MaxInt64
}

// TestPlanning: where a round stops, the dirty ratio's byte counts and
// the groups of segments rewritten together.
func TestPlanning(t *testing.T) {
	segs := []segInfo{
		{base: 0, next: 100, size: 1000, maxTs: 10},
		{base: 100, next: 200, size: 1000, maxTs: 20},
		{base: 200, next: 300, size: 500, maxTs: 30},
		{base: 300, next: 350, size: 200, maxTs: 40}, // active
	}
	for _, c := range []struct {
		name             string
		firstDirty, hw   twinlog.Offset
		nowMs, minLagMs  int64
		want             twinlog.Offset
		clean, dirtyWant int64
	}{
		{"active segment bounds", 0, 350, 100, 0, 300, 0, 2500},
		{"hw bounds", 100, 150, 100, 0, 150, 1000, 1000},
		{"min lag: the segment with a young record", 0, 350, 45, 20, 200, 0, 2000},
		{"min lag: the first dirty segment young", 150, 350, 30, 20, 100, 1000, 0},
	} {
		got := firstUncleanable(segs, c.firstDirty, c.hw, c.nowMs, c.minLagMs)
		clean, dirty := dirtyBytes(segs, c.firstDirty, max(got, c.firstDirty))
		if got != c.want || clean != c.clean || dirty != c.dirtyWant {
			t.Errorf("%s: uncleanable %d clean %d dirty %d, want %d %d %d", c.name, got, clean, dirty, c.want, c.clean, c.dirtyWant)
		}
	}
	groups := groupSegments(segs[:3], 300, 1500)
	if !slices.Equal(groups, [][2]int{{0, 1}, {1, 3}}) {
		t.Errorf("groups %v", groups)
	}
	if groups := groupSegments(segs[:3], 150, 10000); !slices.Equal(groups, [][2]int{{0, 2}}) {
		t.Errorf("groups below 150: %v", groups)
	}
	wide := []segInfo{{base: 0, next: 10, size: 1}, {base: math.MaxUint32, next: math.MaxUint32 + 2, size: 1}}
	if groups := groupSegments(wide, math.MaxUint32+2, 100); len(groups) != 2 {
		t.Errorf("a group past the index's offset range: %v", groups)
	}
}

// TestFilterBatch: an untouched batch is kept byte for byte; a thinned one
// keeps its header's offsets, epoch, producer and codec, and the kept
// records their offsets and bytes; an emptied one is dropped or kept as an
// empty batch that validates.
func TestFilterBatch(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			recs := []Record{
				{Offset: 10, Timestamp: 100, Key: []byte("a"), Value: []byte("a1")},
				{Offset: 12, Timestamp: 105, Key: []byte("b"), Value: []byte("b1")},
				{Offset: 13, Timestamp: 101, Key: []byte("a"), Value: nil},
				{Offset: 17, Timestamp: 99, Key: []byte("c"), Value: bytes.Repeat([]byte("c"), 300)},
			}
			b := encodeWith(t, recs, codec, BatchOptions{BaseOffset: 10, LeaderEpoch: 7, RecordOffsets: true,
				Producer: &Producer{ID: 5, Epoch: 2, BaseSequence: 40}})
			all := func(*Record) bool { return true }
			out, res, err := filterBatch(nil, b, all, false)
			if err != nil || !bytes.Equal(out, b) || res.Rewritten || res.Drop {
				t.Fatalf("keep all: %v %+v", err, res)
			}
			keep := map[twinlog.Offset]bool{12: true, 13: true}
			out, res, err = filterBatch(nil, b, func(r *Record) bool { return keep[r.Offset] }, false)
			if err != nil || !res.Rewritten || res.Kept != 2 || res.Records != 4 {
				t.Fatalf("thin: %v %+v", err, res)
			}
			nb := BatchView(out)
			got, err := nb.Records()
			if err != nil {
				t.Fatal(err)
			}
			if nb.BaseOffset() != 10 || nb.LastOffset() != 17 || nb.LeaderEpoch() != 7 || nb.Codec() != codec ||
				nb.ProducerID() != 5 || nb.ProducerEpoch() != 2 || nb.BaseSequence() != 40 || nb.RecordCount() != 2 ||
				nb.MaxTimestamp() != 105 || nb.FirstTimestamp() != 100 {
				t.Fatalf("thinned header: base %d last %d epoch %d codec %s producer %d/%d/%d count %d ts %d..%d",
					nb.BaseOffset(), nb.LastOffset(), nb.LeaderEpoch(), nb.Codec(), nb.ProducerID(), nb.ProducerEpoch(),
					nb.BaseSequence(), nb.RecordCount(), nb.FirstTimestamp(), nb.MaxTimestamp())
			}
			if len(got) != 2 || got[0].Offset != 12 || string(got[0].Value) != "b1" || got[0].Timestamp != 105 ||
				got[1].Offset != 13 || got[1].Value != nil || got[1].Timestamp != 101 {
				t.Fatalf("kept records %+v", got)
			}
			none := func(*Record) bool { return false }
			out, res, err = filterBatch(nil, b, none, false)
			if err != nil || len(out) != 0 || !res.Drop {
				t.Fatalf("drop: %v %d bytes %+v", err, len(out), res)
			}
			out, res, err = filterBatch(nil, b, none, true)
			if err != nil || !res.Rewritten || len(out) != BatchHeaderSize {
				t.Fatalf("empty: %v %d bytes %+v", err, len(out), res)
			}
			eb := BatchView(out)
			if err := eb.Validate(); err != nil {
				t.Fatal(err)
			}
			if eb.BaseOffset() != 10 || eb.LastOffset() != 17 || eb.RecordCount() != 0 || eb.Codec() != CodecNone ||
				eb.ProducerID() != 5 || eb.BaseSequence() != 40 || eb.MaxTimestamp() != b.MaxTimestamp() {
				t.Fatalf("empty header: base %d last %d count %d", eb.BaseOffset(), eb.LastOffset(), eb.RecordCount())
			}
			// An empty batch stays as it is, or goes.
			if out, _, _ := filterBatch(nil, eb, all, true); !bytes.Equal(out, eb) {
				t.Fatal("empty batch not kept")
			}
			if out, res, _ := filterBatch(nil, eb, all, false); len(out) != 0 || !res.Drop {
				t.Fatal("empty batch not dropped")
			}
		})
	}
}

// encodeWith encodes recs as one batch compressed with codec.
func encodeWith(t interface{ Fatal(...any) }, recs []Record, codec Codec, opt BatchOptions) BatchView {
	b, err := EncodeBatch(recs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if codec == CodecNone {
		return b
	}
	body, err := compress(codec, b[BatchHeaderSize:])
	if err != nil {
		t.Fatal(err)
	}
	out := append(b[:BatchHeaderSize:BatchHeaderSize], body...)
	be.PutUint32(out[offBatchLength:], uint32(len(out)-logOverhead))
	be.PutUint16(out[offAttributes:], uint16(codec))
	be.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	if err := BatchView(out).Validate(); err != nil {
		t.Fatal(err)
	}
	return out
}

// modelRecord is a record of the property test's model log.
type modelRecord struct {
	off        twinlog.Offset
	key, value []byte
}

// TestCompactionRoundsProperty: rounds of mapBatch and filterBatch, with
// any map capacity, end with exactly the latest record per key below the
// uncleanable offset and every record at or after it, each at its offset;
// no batch changes its offsets, epoch or producer, the batches marked to
// keep their header stay; keyless records below the end go; a last round
// past every tombstone's horizon drops the tombstones.
func TestCompactionRoundsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nKeys := rapid.IntRange(1, 8).Draw(t, "keys")
		nBatches := rapid.IntRange(1, 12).Draw(t, "batches")
		var batches []BatchView
		var model []modelRecord
		keepHeader := map[twinlog.Offset]bool{} // by base offset
		next := twinlog.Offset(0)
		for i := range nBatches {
			next += twinlog.Offset(rapid.IntRange(0, 2).Draw(t, "gap"))
			n := rapid.IntRange(1, 5).Draw(t, "records")
			recs := make([]Record, n)
			base := next
			for j := range recs {
				r := Record{Offset: next, Timestamp: int64(next)}
				if k := rapid.IntRange(-1, nKeys-1).Draw(t, "key"); k >= 0 {
					r.Key = fmt.Appendf(nil, "k%d", k)
				}
				if !rapid.Bool().Draw(t, "tombstone") || r.Key == nil {
					r.Value = fmt.Appendf(nil, "v%d", next)
				}
				recs[j] = r
				model = append(model, modelRecord{r.Offset, r.Key, r.Value})
				next += 1 + twinlog.Offset(rapid.IntRange(0, 1).Draw(t, "inner gap"))
			}
			codec := rapid.SampledFrom([]Codec{CodecNone, CodecNone, CodecGzip, CodecZstd, CodecLZ4, CodecSnappy}).Draw(t, "codec")
			batches = append(batches, encodeWith(t, recs, codec, BatchOptions{BaseOffset: base, RecordOffsets: true,
				LeaderEpoch: twinlog.Epoch(i), Producer: &Producer{ID: int64(i % 3), Epoch: 1, BaseSequence: int32(10 * i)}}))
			if i == nBatches-1 || rapid.Bool().Draw(t, "keep header") {
				keepHeader[base] = true
			}
		}
		unc := twinlog.Offset(rapid.IntRange(0, int(next)).Draw(t, "uncleanable"))
		capacity := rapid.IntRange(1, nKeys+1).Draw(t, "capacity")
		m := mapWithCapacity(capacity)

		round := func(firstDirty, end twinlog.Offset, deletableBelow twinlog.Offset) twinlog.Offset {
			m.reset()
			mapped := end
			for _, b := range batches {
				e, _, err := mapBatch(m, b, firstDirty, end)
				if err != nil {
					t.Fatal(err)
				}
				if e != end {
					mapped = e
					break
				}
			}
			if mapped <= firstDirty && firstDirty < end {
				t.Fatalf("no progress from %d (capacity %d)", firstDirty, capacity)
			}
			rule := retainRule{Map: m, End: mapped, DeletableBelow: deletableBelow}
			var out []BatchView
			for _, b := range batches {
				res, _, err := filterBatch(nil, b, func(r *Record) bool { return rule.decide(r) == keepRecord }, keepHeader[b.BaseOffset()])
				if err != nil {
					t.Fatal(err)
				}
				if len(res) > 0 {
					out = append(out, BatchView(res))
				}
			}
			batches = out
			return mapped
		}
		rounds := 0
		for fd := twinlog.Offset(0); fd < unc; rounds++ {
			fd = round(fd, unc, 0)
		}
		if rounds > nKeys*len(model)+1 {
			t.Fatalf("%d rounds", rounds)
		}
		check := func(tombstonesGone bool) {
			latest := map[string]twinlog.Offset{}
			for _, r := range model {
				if r.off < unc && r.key != nil {
					latest[string(r.key)] = r.off
				}
			}
			var want []modelRecord
			for _, r := range model {
				switch {
				case r.off >= unc:
					want = append(want, r)
				case r.key != nil && latest[string(r.key)] == r.off && (r.value != nil || !tombstonesGone):
					want = append(want, r)
				}
			}
			var got []modelRecord
			prevLast := twinlog.Offset(-1)
			for _, b := range batches {
				if err := b.Validate(); err != nil {
					t.Fatal(err)
				}
				if b.BaseOffset() <= prevLast {
					t.Fatalf("batch at %d after %d", b.BaseOffset(), prevLast)
				}
				prevLast = b.LastOffset()
				recs, _ := b.Records()
				for _, r := range recs {
					got = append(got, modelRecord{r.Offset, r.Key, r.Value})
				}
			}
			if !slices.EqualFunc(got, want, func(a, b modelRecord) bool {
				return a.off == b.off && bytes.Equal(a.key, b.key) && bytes.Equal(a.value, b.value) && (a.value == nil) == (b.value == nil)
			}) {
				t.Fatalf("after %d rounds (capacity %d, uncleanable %d):\n got %v\nwant %v", rounds, capacity, unc, got, want)
			}
		}
		check(false)
		// Every batch whose header must stay is there, with its offsets.
		for base := range keepHeader {
			i := slices.IndexFunc(batches, func(b BatchView) bool { return b.BaseOffset() == base })
			if i < 0 {
				t.Fatalf("batch at %d lost its header", base)
			}
		}
		// Every tombstone's horizon passed: a round with an empty map
		// drops them.
		round(unc, unc, unc)
		check(true)
	})
}

// TestValidateCompactedBatches: what the cleaner writes validates as a
// stored or replicated batch (a thinned batch's last record below its
// lastOffsetDelta, an empty batch), never as a producer's; a compacted
// topic's producer batch with a null key is refused.
func TestValidateCompactedBatches(t *testing.T) {
	b := encodeWith(t, []Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}, CodecNone, BatchOptions{})
	thin, _, err := filterBatch(nil, b, func(r *Record) bool { return r.Offset == 0 }, false)
	if err != nil {
		t.Fatal(err)
	}
	empty := appendEmptyBatch(nil, b)
	for name, x := range map[string][]byte{"thinned": thin, "empty": empty} {
		if _, err := ValidateBatches(x); err != nil {
			t.Errorf("%s: ValidateBatches: %v", name, err)
		}
		if _, _, err := ValidateProducerBatches(x); !errors.Is(err, ErrInvalidProducerBatch) {
			t.Errorf("%s: ValidateProducerBatches: %v", name, err)
		}
	}
	bad := slices.Clone(empty)
	be.PutUint16(bad[offAttributes:], uint16(CodecGzip))
	be.PutUint32(bad[offCRC:], crc32.Checksum(bad[offAttributes:], castagnoli))
	if err := BatchView(bad).Validate(); err == nil {
		t.Error("a compressed empty batch validated")
	}
	keyless := encodeWith(t, []Record{{Key: []byte("a"), Value: []byte("1")}, {Value: []byte("2")}}, CodecZstd, BatchOptions{})
	if _, _, err := ValidateProducerBatches(keyless); err != nil {
		t.Errorf("keyless record refused outside a compacted topic: %v", err)
	}
	if _, _, err := ValidateKeyedProducerBatches(keyless); !errors.Is(err, ErrKeylessRecord) || !errors.Is(err, ErrInvalidProducerBatch) {
		t.Errorf("keyless record in a compacted topic: %v", err)
	}
	if _, _, err := ValidateKeyedProducerBatches(b); err != nil {
		t.Errorf("keyed batch refused: %v", err)
	}
}

// TestCleanedBatchesAreKafkaRecordBatches: kmsg (franz-go's parser of
// Kafka's format) reads a thinned batch and an empty one as Kafka's
// cleaner writes them: the offsets of the original, fewer records, each
// with its own offset delta, and a valid CRC.
func TestCleanedBatchesAreKafkaRecordBatches(t *testing.T) {
	recs := []Record{
		{Offset: 100, Timestamp: 5, Key: []byte("a"), Value: []byte("1")},
		{Offset: 101, Timestamp: 6, Key: []byte("b"), Value: []byte("2")},
		{Offset: 102, Timestamp: 7, Key: []byte("a"), Value: nil},
	}
	b := encodeWith(t, recs, CodecNone, BatchOptions{BaseOffset: 100, RecordOffsets: true, LeaderEpoch: 4,
		Producer: &Producer{ID: 9, Epoch: 1, BaseSequence: 30}})
	thin, _, err := filterBatch(nil, b, func(r *Record) bool { return r.Offset == 101 }, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		buf    []byte
		deltas []int32
	}{"thinned": {thin, []int32{1}}, "empty": {appendEmptyBatch(nil, b), nil}} {
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(c.buf); err != nil {
			t.Fatalf("%s: kmsg: %v", name, err)
		}
		if kb.FirstOffset != 100 || kb.LastOffsetDelta != 2 || kb.PartitionLeaderEpoch != 4 || kb.ProducerID != 9 ||
			kb.FirstSequence != 30 || int(kb.NumRecords) != len(c.deltas) || uint32(kb.CRC) != crc32.Checksum(c.buf[21:], castagnoli) {
			t.Fatalf("%s: kmsg header %+v", name, kb)
		}
		rest := kb.Records
		for _, d := range c.deltas {
			var kr kmsg.Record
			if err := kr.ReadFrom(rest); err != nil {
				t.Fatalf("%s: record: %v", name, err)
			}
			if kr.OffsetDelta != d || string(kr.Key) != "b" {
				t.Fatalf("%s: record %+v", name, kr)
			}
			rest = rest[kr.Length+int32(binary.PutVarint(make([]byte, 10), int64(kr.Length))):]
		}
		if len(rest) != 0 {
			t.Fatalf("%s: %d bytes after the records", name, len(rest))
		}
	}
}
