package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twinlog/twinlog"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	indexEntrySize  = 8  // relOffset uint32, position uint32
	timeEntrySize   = 12 // timestamp int64, relOffset uint32
	noTimestamp     = math.MinInt64
)

// segmentName is the 20-digit file stem of a segment (SPEC §2.1).
func segmentName(base twinlog.Offset) string { return fmt.Sprintf("%020d", base) }

// parseSegmentName returns the base offset of "<20 digits>.log".
func parseSegmentName(name string) (twinlog.Offset, bool) { return parseOffsetName(name, logSuffix) }

// parseOffsetName returns the offset of "<20 digits><suffix>", the name of
// every per-offset file of a partition (segments, snapshots).
func parseOffsetName(name, suffix string) (twinlog.Offset, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return twinlog.Offset(n), true
}

type indexEntry struct {
	rel uint32 // base offset of the batch minus the segment base
	pos uint32 // byte position of the batch
}

type timeEntry struct {
	ts  int64  // largest timestamp in the segment up to and including the batch
	rel uint32 // base offset of that batch minus the segment base
}

// segment is one <base>.log file and its indexes. The indexes live in memory
// and are appended to their files on flush; the files are only a cache that
// load validates and rebuilds when damaged.
type segment struct {
	dir  string
	base twinlog.Offset
	f    File

	size  int64          // bytes of whole batches
	next  twinlog.Offset // next offset after the last batch; base if empty
	maxTs int64          // largest batch maxTimestamp; noTimestamp if empty

	index     []indexEntry
	timeIndex []timeEntry
	sinceIdx  int64 // bytes appended since the last index entry

	syncedSize    int64 // data bytes known to be fsynced
	indexWritten  int   // index entries already in the .index file
	timeWritten   int   // entries already in the .timeindex file
	rollBaseMilli int64 // clock time of the first append (for SegmentMaxAge)
	writebackFrom int64 // data bytes below are dirty no longer than writeback takes (Options.WritebackBytes)

	// recent are the batches appended last in this process, contiguous and
	// ending at size (at most 2*recentBatches): followers and consumers
	// fetch at the tail, and finding their batch here saves the header
	// reads of find, one pread each. Memory only; reset by truncation.
	recent []recentBatch
}

// recentBatches is how many of the last appended batches segment.recent
// keeps at least.
const recentBatches = 64

type recentBatch struct {
	last     twinlog.Offset
	pos, end int64
}

func (s *segment) logPath() string  { return filepath.Join(s.dir, segmentName(s.base)+logSuffix) }
func (s *segment) idxPath() string  { return filepath.Join(s.dir, segmentName(s.base)+indexSuffix) }
func (s *segment) timePath() string { return filepath.Join(s.dir, segmentName(s.base)+timeIndexSuffix) }

// canHold reports whether a batch [first, last] fits the uint32 relative
// offsets of the index.
func (s *segment) canHold(last twinlog.Offset) bool { return last-s.base <= math.MaxUint32 }

// noteBatch updates indexes and counters for a batch appended at pos.
func (s *segment) noteBatch(b BatchView, pos int64, interval int64) {
	rel := uint32(b.BaseOffset() - s.base)
	if s.sinceIdx >= interval && pos > 0 {
		s.index = append(s.index, indexEntry{rel: rel, pos: uint32(pos)})
		s.sinceIdx = 0
		if ts := max(s.maxTs, b.MaxTimestamp()); len(s.timeIndex) == 0 || ts > s.timeIndex[len(s.timeIndex)-1].ts {
			s.timeIndex = append(s.timeIndex, timeEntry{ts: ts, rel: rel})
		}
	}
	s.sinceIdx += int64(len(b))
	s.maxTs = max(s.maxTs, b.MaxTimestamp())
	s.size = pos + int64(len(b))
	s.next = b.NextOffset()
	if n := len(s.recent); n > 0 && s.recent[n-1].end != pos {
		s.recent = s.recent[:0] // not contiguous: start over
	}
	if len(s.recent) == 2*recentBatches {
		s.recent = append(s.recent[:0], s.recent[recentBatches:]...)
	}
	s.recent = append(s.recent, recentBatch{last: b.LastOffset(), pos: pos, end: s.size})
}

// findRecent is find answered from recent, without reads: the position of
// the first batch with last offset >= o (s.size if none), with that
// batch's last offset and size. ok is false when recent cannot tell.
func (s *segment) findRecent(o twinlog.Offset) (pos int64, last twinlog.Offset, size int64, ok bool) {
	r := s.recent
	if len(r) == 0 || r[len(r)-1].end != s.size {
		return 0, 0, 0, false
	}
	// Batches before r[0] end below r[0]'s base: the answer is in r unless
	// it may be r[0] and r[0] is not the segment's first batch.
	if o <= r[0].last && r[0].pos != 0 {
		return 0, 0, 0, false
	}
	i, _ := slices.BinarySearchFunc(r, o, func(e recentBatch, t twinlog.Offset) int {
		if e.last < t {
			return -1
		}
		return 1
	})
	if i == len(r) {
		return s.size, 0, 0, true
	}
	return r[i].pos, r[i].last, r[i].end - r[i].pos, true
}

// lookup returns the position of the last indexed batch with base <= o
// and that batch's base offset (0 and the segment base if none).
func (s *segment) lookup(o twinlog.Offset) (int64, twinlog.Offset) {
	if o < s.base {
		return 0, s.base
	}
	rel := o - s.base
	i, _ := slices.BinarySearchFunc(s.index, rel, func(e indexEntry, t twinlog.Offset) int {
		if twinlog.Offset(e.rel) <= t {
			return -1
		}
		return 1
	})
	if i == 0 {
		return 0, s.base
	}
	return int64(s.index[i-1].pos), s.base + twinlog.Offset(s.index[i-1].rel)
}

// readHeader reads the fixed header of the batch at pos. It returns
// io.ErrUnexpectedEOF for a header or batch running past size.
func (s *segment) readHeader(pos, size int64, buf []byte) (BatchView, error) {
	if pos+BatchHeaderSize > size {
		return nil, io.ErrUnexpectedEOF
	}
	buf = buf[:BatchHeaderSize]
	if _, err := s.f.ReadAt(buf, pos); err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", s.logPath(), pos, err)
	}
	n := batchSize(buf)
	if n < BatchHeaderSize || pos+n > size {
		return nil, io.ErrUnexpectedEOF
	}
	return BatchView(buf), nil
}

// find returns the position of the first batch with last offset >= o, or
// s.size if there is none.
func (s *segment) find(o twinlog.Offset) (int64, error) {
	if pos, _, _, ok := s.findRecent(o); ok {
		return pos, nil
	}
	var hdr [BatchHeaderSize]byte
	pos, indexed := s.lookup(o)
	for pos < s.size {
		b, err := s.readHeader(pos, s.size, hdr[:])
		if indexed >= 0 && pos > 0 && (err != nil || b.Magic() != Magic || b.BaseOffset() != indexed) {
			// An index file loaded at start-up is checked only at its last
			// entry (reading every entry would cost a read per 4 KiB of log
			// on a clean start); an entry that does not point at the batch it
			// names is damage, and the walk from the segment start is right.
			pos, indexed = 0, -1
			continue
		}
		indexed = -1
		if err != nil {
			return 0, withFile(corruptf(0, "bad batch header: %v", err), s.logPath(), pos)
		}
		if b.LastOffset() >= o {
			return pos, nil
		}
		pos += batchSize(b)
	}
	return s.size, nil
}

// persistIndexes appends index entries not yet in the files; with sync it
// also fsyncs them. Index files are rebuilt if damaged, so a lost tail costs
// only lookup speed.
func (s *segment) persistIndexes(fsys FS, sync bool) error {
	write := func(path string, from int, n int, entry func(i int, b []byte), esz int) error {
		f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		defer f.Close()
		if n > from {
			buf := make([]byte, (n-from)*esz)
			for i := from; i < n; i++ {
				entry(i, buf[(i-from)*esz:])
			}
			if _, err := f.WriteAt(buf, int64(from*esz)); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
		}
		if err := f.Truncate(int64(n * esz)); err != nil {
			return fmt.Errorf("truncate %s: %w", path, err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("sync %s: %w", path, err)
			}
		}
		return nil
	}
	idx := slices.Clone(s.index)
	err := write(s.idxPath(), s.indexWritten, len(idx), func(i int, b []byte) {
		binary.BigEndian.PutUint32(b, idx[i].rel)
		binary.BigEndian.PutUint32(b[4:], idx[i].pos)
	}, indexEntrySize)
	if err != nil {
		return err
	}
	s.indexWritten = len(idx)
	tidx := slices.Clone(s.timeIndex)
	err = write(s.timePath(), s.timeWritten, len(tidx), func(i int, b []byte) {
		binary.BigEndian.PutUint64(b, uint64(tidx[i].ts))
		binary.BigEndian.PutUint32(b[8:], tidx[i].rel)
	}, timeEntrySize)
	if err != nil {
		return err
	}
	s.timeWritten = len(tidx)
	return nil
}

// loadIndexes reads the index files and checks them against the segment:
// entries strictly increasing, positions inside the data, and the last
// entry pointing at a batch with the indexed base offset. It reports false
// (and leaves the indexes empty) when they must be rebuilt.
func (s *segment) loadIndexes(fsys FS, size int64) bool {
	s.index, s.timeIndex = nil, nil
	data, err := readAll(fsys, s.idxPath())
	if err != nil || len(data)%indexEntrySize != 0 {
		return false
	}
	idx := make([]indexEntry, 0, len(data)/indexEntrySize)
	for i := 0; i < len(data); i += indexEntrySize {
		e := indexEntry{rel: binary.BigEndian.Uint32(data[i:]), pos: binary.BigEndian.Uint32(data[i+4:])}
		if int64(e.pos) >= size || e.pos == 0 {
			return false
		}
		if n := len(idx); n > 0 && (e.rel <= idx[n-1].rel || e.pos <= idx[n-1].pos) {
			return false
		}
		idx = append(idx, e)
	}
	if n := len(idx); n > 0 {
		var hdr [BatchHeaderSize]byte
		b, err := s.readHeader(int64(idx[n-1].pos), size, hdr[:])
		if err != nil || b.BaseOffset() != s.base+twinlog.Offset(idx[n-1].rel) {
			return false
		}
	}
	tdata, err := readAll(fsys, s.timePath())
	if err != nil || len(tdata)%timeEntrySize != 0 {
		return false
	}
	var tidx []timeEntry
	for i := 0; i < len(tdata); i += timeEntrySize {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(tdata[i:])), rel: binary.BigEndian.Uint32(tdata[i+8:])}
		if n := len(tidx); n > 0 && (e.ts <= tidx[n-1].ts || e.rel < tidx[n-1].rel) {
			return false
		}
		if len(idx) > 0 && e.rel > idx[len(idx)-1].rel {
			return false
		}
		tidx = append(tidx, e)
	}
	s.index, s.timeIndex = idx, tidx
	s.indexWritten, s.timeWritten = len(idx), len(tidx)
	return true
}

func readAll(fsys FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// walkTail trusts the indexes and walks batch headers from the last index
// entry to the end of the file to learn next offset, max timestamp and the
// bytes since the last entry. A header running past the end reports false:
// the segment needs a full recovery scan.
func (s *segment) walkTail(size int64) (bool, error) {
	var hdr [BatchHeaderSize]byte
	pos := int64(0)
	s.next, s.maxTs, s.sinceIdx = s.base, noTimestamp, 0
	if n := len(s.index); n > 0 {
		pos = int64(s.index[n-1].pos)
	}
	if n := len(s.timeIndex); n > 0 {
		s.maxTs = s.timeIndex[n-1].ts
	}
	for pos < size {
		b, err := s.readHeader(pos, size, hdr[:])
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if b.Magic() != Magic || b.BaseOffset() < s.next || b.LastOffsetDelta() < 0 || !s.canHold(b.LastOffset()) {
			return false, nil
		}
		s.next = b.NextOffset()
		s.maxTs = max(s.maxTs, b.MaxTimestamp())
		n := batchSize(b)
		s.sinceIdx += n
		pos += n
	}
	s.size = size
	return true, nil
}

// recover validates every batch of the segment from the start, rebuilding
// the indexes. It returns the position of the first bad batch (== size when
// all are good) and its reason. onBatch sees each good batch.
func (s *segment) recover(size int64, interval int64, onBatch func(BatchView)) (int64, string, error) {
	s.index, s.timeIndex, s.recent = nil, nil, nil
	s.indexWritten, s.timeWritten = 0, 0
	s.size, s.next, s.maxTs, s.sinceIdx = 0, s.base, noTimestamp, 0
	buf := make([]byte, 64<<10)
	pos := int64(0)
	for pos < size {
		if size-pos < logOverhead {
			return pos, "torn batch length", nil
		}
		if _, err := s.f.ReadAt(buf[:logOverhead], pos); err != nil {
			return pos, "", fmt.Errorf("read %s at %d: %w", s.logPath(), pos, err)
		}
		n := batchSize(buf)
		if n < BatchHeaderSize {
			return pos, fmt.Sprintf("batch length %d", n-logOverhead), nil
		}
		if pos+n > size {
			return pos, fmt.Sprintf("torn batch: %d bytes past end", pos+n-size), nil
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		bb := buf[:n]
		if _, err := s.f.ReadAt(bb, pos); err != nil {
			return pos, "", fmt.Errorf("read %s at %d: %w", s.logPath(), pos, err)
		}
		b := BatchView(bb)
		if err := b.Validate(); err != nil {
			return pos, err.(*CorruptError).Reason, nil
		}
		if b.BaseOffset() < s.next {
			return pos, fmt.Sprintf("base offset %d below next offset %d", b.BaseOffset(), s.next), nil
		}
		if !s.canHold(b.LastOffset()) {
			return pos, fmt.Sprintf("offset %d too far from segment base", b.LastOffset()), nil
		}
		s.noteBatch(b, pos, interval)
		if onBatch != nil {
			onBatch(b)
		}
		pos += n
	}
	return pos, "", nil
}

// truncateIndexes drops index entries at or after byte position pos.
func (s *segment) truncateIndexes(pos int64) {
	s.recent = nil
	i := len(s.index)
	for i > 0 && int64(s.index[i-1].pos) >= pos {
		i--
	}
	s.index = s.index[:i]
	s.indexWritten = min(s.indexWritten, i)
	j := len(s.timeIndex)
	for j > 0 && (i == 0 || s.timeIndex[j-1].rel > s.index[i-1].rel) {
		j--
	}
	s.timeIndex = s.timeIndex[:j]
	s.timeWritten = min(s.timeWritten, j)
}
