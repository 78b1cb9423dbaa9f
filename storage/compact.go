package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twinlog/twinlog"
)

// The pure core of log compaction (cleanup.policy=compact); cleaner.go
// drives it over a log's files. Nothing here does I/O or reads a clock:
// the key map, the rule that keeps or drops a record, the rewrite of one
// batch, the plan of a round and the pass history that times tombstones.

// keyMap maps the 128-bit hash of a key to the latest offset the round
// saw it at (Kafka's SkimpyOffsetMap): a table of 24-byte slots (two hash
// words, offset + 1; 0 is an empty slot), open addressing with linear
// probing. Its memory is bounded by the dedupe buffer it was made for
// (log.cleaner.dedupe.buffer.size per cleaner): it starts small, doubles
// while it is sparse, and at the bound takes keys up to the load factor,
// after which put reports it full. Two keys with the same 128-bit
// SHA-256 prefix would be taken for one, as in Kafka (MD5 there): at
// 2^-64 for 2^32 keys, never in practice. Not safe for concurrent use.
type keyMap struct {
	slots    []mapSlot
	n        int // keys held
	maxSlots int // the table's bound
	limit    int // keys the full-size table takes (load factor)
}

type mapSlot struct {
	h0, h1 uint64
	off1   int64 // offset + 1; 0: empty
}

const (
	// mapSlotBytes is one slot's memory: what the dedupe buffer pays per key.
	mapSlotBytes = 24
	// mapLoadFactor is the share of a full-size table's slots that hold
	// keys (Kafka's log.cleaner.io.buffer.load.factor).
	mapLoadFactor = 0.9
	// minMapSlots is the smallest table, and the first one made.
	minMapSlots = 1024
)

// newKeyMap returns a map that uses at most bufferBytes (at least two
// slots).
func newKeyMap(bufferBytes int64) *keyMap {
	maxSlots := int(max(bufferBytes/mapSlotBytes, 2))
	limit := min(max(int(float64(maxSlots)*mapLoadFactor), 1), maxSlots-1)
	return &keyMap{maxSlots: maxSlots, limit: limit}
}

// capacity is the number of keys the map takes at most.
func (m *keyMap) capacity() int { return m.limit }

// size is the number of keys held.
func (m *keyMap) size() int { return m.n }

// utilization is size over capacity.
func (m *keyMap) utilization() float64 { return float64(m.n) / float64(m.limit) }

// reset empties the map, keeping its table.
func (m *keyMap) reset() {
	clear(m.slots)
	m.n = 0
}

func keyHash(key []byte) (uint64, uint64) {
	sum := sha256.Sum256(key)
	return binary.BigEndian.Uint64(sum[0:]), binary.BigEndian.Uint64(sum[8:])
}

// slot returns the index of key's slot: the one holding it, or the empty
// one where it would go.
func (m *keyMap) slot(h0, h1 uint64) int {
	n := uint64(len(m.slots))
	i := (h0 ^ h1>>7) % n
	for {
		s := &m.slots[i]
		if s.off1 == 0 || s.h0 == h0 && s.h1 == h1 {
			return int(i)
		}
		if i++; i == n {
			i = 0
		}
	}
}

// put records o as key's latest offset. It reports false, changing
// nothing, when the key is new and the map is at capacity.
func (m *keyMap) put(key []byte, o twinlog.Offset) bool {
	h0, h1 := keyHash(key)
	if len(m.slots) > 0 {
		if i := m.slot(h0, h1); m.slots[i].off1 != 0 {
			m.slots[i].off1 = int64(o) + 1
			return true
		}
	}
	if m.n >= m.limit {
		return false
	}
	if (m.n+1)*4 > len(m.slots)*3 && len(m.slots) < m.maxSlots {
		m.grow()
	}
	i := m.slot(h0, h1)
	m.slots[i] = mapSlot{h0: h0, h1: h1, off1: int64(o) + 1}
	m.n++
	return true
}

// grow doubles the table (at most to maxSlots) and re-inserts the keys.
func (m *keyMap) grow() {
	old := m.slots
	m.slots = make([]mapSlot, min(max(2*len(old), minMapSlots), m.maxSlots))
	for _, s := range old {
		if s.off1 != 0 {
			m.slots[m.slot(s.h0, s.h1)] = s
		}
	}
}

// get returns key's latest offset.
func (m *keyMap) get(key []byte) (twinlog.Offset, bool) {
	if m.n == 0 {
		return 0, false
	}
	h0, h1 := keyHash(key)
	s := m.slots[m.slot(h0, h1)]
	if s.off1 == 0 {
		return 0, false
	}
	return twinlog.Offset(s.off1 - 1), true
}

// mapBatch adds the keyed records of b with offsets in [from, to) to m,
// in offset order. It returns the offset of the first record that did
// not fit (the map is full), or to when every record did: the end of
// what m covers. Keyless records are skipped (the cleaner drops them).
func mapBatch(m *keyMap, b BatchView, from, to twinlog.Offset) (twinlog.Offset, int, error) {
	if b.RecordCount() == 0 || b.LastOffset() < from || b.BaseOffset() >= to {
		return to, 0, nil
	}
	recs, err := b.recordBytes()
	if err != nil {
		return 0, 0, err
	}
	end, read := to, 0
	err = b.eachRecord(recs, func(r *Record, _ int64, _ []byte) error {
		if r.Offset < from || r.Offset >= to || end != to {
			return nil
		}
		read++
		if r.Key != nil && !m.put(r.Key, r.Offset) {
			end = r.Offset
		}
		return nil
	}, false)
	return end, read, err
}

// retainRule decides which records a round keeps (Kafka's
// Cleaner.shouldRetainRecord): every record at or after End (the map did
// not cover it); below it, a record is dropped when its key has a later
// record in the map, when it has no key (a compacted topic refuses those
// at produce; they remain only from before the topic was compacted), and
// when it is a tombstone (null value) below DeletableBelow.
type retainRule struct {
	Map *keyMap
	// End is the end of what Map covers: the first offset not mapped.
	End twinlog.Offset
	// DeletableBelow: tombstones below it may go (cleanHistory).
	DeletableBelow twinlog.Offset
}

// verdict is why the rule keeps or drops a record.
type verdict int8

const (
	keepRecord     verdict = iota
	dropSuperseded         // its key has a later record
	dropKeyless            // no key
	dropTombstone          // an expired tombstone
)

// decide applies the rule to r.
func (rr retainRule) decide(r *Record) verdict {
	switch {
	case r.Offset >= rr.End:
		return keepRecord
	case r.Key == nil:
		return dropKeyless
	}
	if latest, ok := rr.Map.get(r.Key); ok && r.Offset < latest {
		return dropSuperseded
	}
	if r.Value == nil && r.Offset < rr.DeletableBelow {
		return dropTombstone
	}
	return keepRecord
}

// filterResult says what filterBatch did: records read and kept, whether
// it wrote another batch than b (Rewritten) or none (Drop).
type filterResult struct {
	Records, Kept   int
	Rewritten, Drop bool
}

// filterBatch appends to dst what the cleaner keeps of batch b (which
// must be valid):
//   - b unchanged when keep keeps every record;
//   - with some records kept, b's header (base offset, lastOffsetDelta,
//     leader epoch, attributes, firstTimestamp, producer id, epoch and
//     base sequence) over the kept records' own bytes, re-compressed with
//     b's codec; recordCount, maxTimestamp (of the kept records), length
//     and crc recomputed. Each record keeps its offset and timestamp
//     deltas, so its bytes are as they were, and the batch its offsets;
//   - with none kept, retainEmpty keeps b's header alone (recordCount 0,
//     no compression, maxTimestamp as it was: Kafka's empty batch), for an
//     idempotent producer's last batch and the last batch of a cleaned
//     segment; otherwise nothing.
func filterBatch(dst []byte, b BatchView, keep func(*Record) bool, retainEmpty bool) ([]byte, filterResult, error) {
	var res filterResult
	if b.RecordCount() == 0 {
		res.Drop = !retainEmpty
		if retainEmpty {
			dst = append(dst, b...)
		}
		return dst, res, nil
	}
	recs, err := b.recordBytes()
	if err != nil {
		return dst, res, err
	}
	// The kept records go straight after a copy of b's header in dst (no
	// buffer of their own: the cleaner filters every batch of a log).
	start := len(dst)
	dst = append(dst, b[:BatchHeaderSize]...)
	bodyStart := len(dst)
	maxTs := int64(math.MinInt64)
	err = b.eachRecord(recs, func(r *Record, _ int64, raw []byte) error {
		res.Records++
		if keep(r) {
			res.Kept++
			dst = append(dst, raw...)
			maxTs = max(maxTs, r.Timestamp)
		}
		return nil
	}, false)
	if err != nil {
		return dst[:start], res, err
	}
	switch {
	case res.Kept == res.Records:
		return append(dst[:start], b...), res, nil
	case res.Kept == 0 && !retainEmpty:
		res.Drop = true
		return dst[:start], res, nil
	case res.Kept == 0:
		res.Rewritten = true
		return appendEmptyBatch(dst[:start], b), res, nil
	}
	res.Rewritten = true
	if c := b.Codec(); c != CodecNone {
		body, err := compress(c, dst[bodyStart:])
		if err != nil {
			return dst[:start], res, fmt.Errorf("compress %s: %w", c, err)
		}
		dst = append(dst[:bodyStart], body...)
	}
	out := dst[start:]
	be.PutUint32(out[offBatchLength:], uint32(len(out)-logOverhead))
	be.PutUint64(out[offMaxTimestamp:], uint64(maxTs))
	be.PutUint32(out[offRecordCount:], uint32(res.Kept))
	be.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return dst, res, nil
}

// appendEmptyBatch appends b's header without records: recordCount 0 and
// no compression, every other field as in b.
func appendEmptyBatch(dst []byte, b BatchView) []byte {
	start := len(dst)
	dst = append(dst, b[:BatchHeaderSize]...)
	out := dst[start:]
	be.PutUint32(out[offBatchLength:], uint32(BatchHeaderSize-logOverhead))
	be.PutUint16(out[offAttributes:], uint16(b.Attributes()&^attrCodecMask))
	be.PutUint32(out[offRecordCount:], 0)
	be.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return dst
}

// segInfo is what planning needs of a segment.
type segInfo struct {
	base, next twinlog.Offset
	size       int64
	maxTs      int64 // largest batch maxTimestamp
}

// firstUncleanable is where a round stops (Kafka's
// firstUncleanableDirtyOffset): the active segment's base (segs' last),
// the HW (a replica cleans only what the ISR acknowledged, so a truncation
// never cuts below what the cleaner saw as latest), and, with a
// min.compaction.lag, the base of the first segment holding dirty data
// that has a record younger than the lag.
func firstUncleanable(segs []segInfo, firstDirty, hw twinlog.Offset, nowMs, minLagMs int64) twinlog.Offset {
	end := min(segs[len(segs)-1].base, hw)
	if minLagMs > 0 {
		for _, s := range segs[:len(segs)-1] {
			if s.next > firstDirty && s.maxTs > nowMs-minLagMs {
				end = min(end, s.base)
				break
			}
		}
	}
	return end
}

// dirtyBytes sums the non-active segments wholly below firstDirty (clean)
// and those overlapping [firstDirty, uncleanable) (dirty), Kafka's
// cleanable ratio being dirty / (clean + dirty).
func dirtyBytes(segs []segInfo, firstDirty, uncleanable twinlog.Offset) (clean, dirty int64) {
	for _, s := range segs[:len(segs)-1] {
		switch {
		case s.next <= firstDirty:
			clean += s.size
		case s.base < uncleanable && firstDirty < uncleanable:
			dirty += s.size
		}
	}
	return clean, dirty
}

// groupSegments splits the segments with a base below end (all of them
// non-active) into runs [i, j) that the cleaner rewrites as one segment
// each (Kafka's groupSegmentsBySize): at most maxBytes together (what
// they hold now, so the cleaned one is no larger) and an offset range the
// index's uint32 relative offsets hold. A segment above maxBytes is a run
// of its own.
func groupSegments(segs []segInfo, end twinlog.Offset, maxBytes int64) [][2]int {
	var out [][2]int
	for i := 0; i < len(segs) && segs[i].base < end; {
		j, size := i+1, segs[i].size
		for j < len(segs) && segs[j].base < end && size+segs[j].size <= maxBytes &&
			segs[j].next-1-segs[i].base <= math.MaxUint32 {
			size += segs[j].size
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// cleanPass is one completed round: every offset below End had been
// cleaned by TimeMs.
type cleanPass struct {
	End    twinlog.Offset
	TimeMs int64
}

// cleanHistory is a log's completed rounds, Ends strictly increasing (and
// times with them). Its last End is the first dirty offset; it also times
// tombstones. A tombstone may go once every reader that saw the records
// it deletes has had delete.retention.ms to read it: those records are
// removed by the first round whose map holds the tombstone, which is the
// first round whose End is above it, so the tombstone at offset o may be
// dropped from the round at now on where that round's time +
// delete.retention.ms <= now (KIP-534's delete horizon, kept per log
// instead of in the batch: the batch bytes stay Kafka's and replicas'
// alike). Lost or shortened, the history only delays tombstones.
type cleanHistory []cleanPass

// maxCleanPasses bounds the history; older rounds are merged.
const maxCleanPasses = 64

// firstDirty is the end of the last round (0 for none).
func (h cleanHistory) firstDirty() twinlog.Offset {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].End
}

// add records a round that cleaned below end at timeMs. Beyond
// maxCleanPasses it drops the round whose offsets lose the least time by
// taking the next round's (merging two rounds only delays tombstones).
func (h cleanHistory) add(end twinlog.Offset, timeMs int64) cleanHistory {
	if end <= h.firstDirty() {
		return h
	}
	h = append(slices.Clone(h), cleanPass{End: end, TimeMs: timeMs})
	if len(h) > maxCleanPasses {
		best := 0
		for i := 1; i < len(h)-1; i++ {
			if h[i+1].TimeMs-h[i].TimeMs < h[best+1].TimeMs-h[best].TimeMs {
				best = i
			}
		}
		h = slices.Delete(h, best, best+1)
	}
	return h
}

// truncate is the history of a log cut at o: rounds' Ends are clamped to
// o, and of those at o only the first stays (its time is when the
// offsets below o were cleaned first).
func (h cleanHistory) truncate(o twinlog.Offset) cleanHistory {
	for i, p := range h {
		if p.End >= o {
			out := slices.Clone(h[:i+1])
			out[i].End = o
			if o == 0 {
				return nil
			}
			return out
		}
	}
	return h
}

// deletableBelow is the offset below which tombstones may be dropped at
// nowMs: the End of the last round at least retentionMs old.
func (h cleanHistory) deletableBelow(nowMs, retentionMs int64) twinlog.Offset {
	var o twinlog.Offset
	for _, p := range h {
		if p.TimeMs > nowMs-retentionMs {
			break
		}
		o = p.End
	}
	return o
}

// CleanerCheckpointFile is a partition's cleaner state: its completed
// rounds (cleanHistory), "0", count, then "end timeMs" lines. Written tmp
// → fsync → rename → fsync dir.
const CleanerCheckpointFile = "cleaner-offset-checkpoint"

func (h cleanHistory) marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(h))
	for _, p := range h {
		fmt.Fprintf(&b, "%d %d\n", p.End, p.TimeMs)
	}
	return b.Bytes()
}

func parseCleanHistory(data []byte) (cleanHistory, error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "0" {
		return nil, fmt.Errorf("%w: cleaner checkpoint: bad version or count", ErrBadCheckpoint)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: cleaner checkpoint: count %q for %d lines", ErrBadCheckpoint, lines[1], len(lines)-2)
	}
	var h cleanHistory
	for _, l := range lines[2:] {
		var p cleanPass
		if _, err := fmt.Sscanf(l, "%d %d", &p.End, &p.TimeMs); err != nil || p.End <= h.firstDirty() ||
			len(h) > 0 && p.TimeMs < h[len(h)-1].TimeMs {
			return nil, fmt.Errorf("%w: cleaner checkpoint: line %q", ErrBadCheckpoint, l)
		}
		h = append(h, p)
	}
	return h, nil
}
