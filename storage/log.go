package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/epoch"
	"github.com/twinlog/twinlog/storage/producer"
	"github.com/twinlog/twinlog/storage/vfs"
)

// AppendInfo describes an append.
type AppendInfo struct {
	FirstOffset  twinlog.Offset
	LastOffset   twinlog.Offset
	NumRecords   int64
	MaxTimestamp int64
	Bytes        int
}

// ReadResult is the answer to Read: whole batches, concatenated, and the
// log's bounds at the time of the read.
type ReadResult struct {
	// Batches holds zero or more whole batches (a fresh copy).
	Batches        []byte
	LogStartOffset twinlog.Offset
	LogEndOffset   twinlog.Offset
	HighWatermark  twinlog.Offset
}

// Log is one partition directory (SPEC §2.1). See doc.go for the
// concurrency contract.
type Log struct {
	fs   FS
	dir  string
	opts Options
	log  *slog.Logger

	// flushMu serialises Flush with the operations that remove or shrink
	// files (truncation, retention, close, delete), so Flush may fsync
	// without holding mu. Lock order: flushMu, then mu.
	flushMu sync.Mutex

	mu            sync.RWMutex
	segs          []*segment // sorted by base; never empty while open
	cache         *epoch.Cache
	hw            twinlog.Offset
	recoveryPoint twinlog.Offset
	unflushed     int64
	lastFlush     time.Time
	closed        bool
	failed        error // sticky I/O error: the log must be reopened

	// producers is the idempotent producers' state as of the LEO
	// (producers.go).
	producers *producer.State

	// recoveryPointLowered: a truncation lowered recoveryPoint and the
	// checkpoint on disk may hold the old, higher value; cleared by
	// persistLoweredRecoveryPoint, which calls onRecoveryPointLowered (set
	// by the LogDir before the log is shared) to rewrite it.
	recoveryPointLowered   bool
	onRecoveryPointLowered func() error

	// The cleaner's state (cleaner.go). cleanMu is held by a round for
	// its whole length (one round per log at a time; nothing else takes
	// it). segGen counts the operations that remove or shrink segments
	// (truncation, retention, Close, Delete); written under mu, read by a
	// round without it, which stops when it moved. cleanHist (the cleaner
	// checkpoint) and the last round's result are guarded by mu.
	cleanMu sync.Mutex
	segGen  atomic.Uint64
	// segmentMax is the size the active segment rolls at: opts'
	// SegmentMaxBytes until SetSegmentMaxBytes (a topic's segment.bytes).
	// Atomic: appends read it under mu, a cleaning round without.
	segmentMax     atomic.Int64
	cleanHist      cleanHistory
	tombstoneFrom  twinlog.Offset // first tombstone the last round kept below its end; NoOffset: none (or unknown)
	lastClean      time.Time
	lastCleanStats CleanStats
	lastCleanErr   error
}

// Open opens (creating if needed) the partition log in dir.
func Open(fsys FS, dir string, opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &Log{fs: fsys, dir: dir, opts: opts, tombstoneFrom: twinlog.NoOffset,
		log: opts.Logger.With("component", "storage", "dir", dir)}
	l.segmentMax.Store(opts.SegmentMaxBytes)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", dir, err)
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("sync dir %s: %w", filepath.Dir(dir), err)
	}
	if err := l.load(); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.lastFlush = opts.Clock()
	return l, nil
}

func (l *Log) checkpointPath() string { return filepath.Join(l.dir, epoch.CheckpointFile) }

// load lists the dir, opens the segments and recovers what needs it.
func (l *Log) load() error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", l.dir, err)
	}
	// A cleaner swap a crash interrupted is finished (or a clean not yet
	// committed dropped) before the segments are read.
	if swapped, err := l.recoverSwaps(names); err != nil {
		return err
	} else if swapped {
		if names, err = l.fs.List(l.dir); err != nil {
			return fmt.Errorf("list %s: %w", l.dir, err)
		}
	}
	var bases []twinlog.Offset
	have := map[string]bool{}
	for _, n := range names {
		if b, ok := parseSegmentName(n); ok {
			bases = append(bases, b)
			have[segmentName(b)] = true
		}
	}
	removed := false
	for _, n := range names {
		stem := n[:len(n)-len(filepath.Ext(n))]
		orphan := (strings.HasSuffix(n, indexSuffix) || strings.HasSuffix(n, timeIndexSuffix)) && !have[stem]
		if strings.HasSuffix(n, ".tmp") || strings.HasSuffix(n, ".deleted") || orphan {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil {
				return fmt.Errorf("remove %s: %w", n, err)
			}
			removed = true
		}
	}
	entries, err := epoch.ReadCheckpoint(l.fs, l.checkpointPath())
	if err != nil {
		return err
	}
	if l.cache, err = epoch.NewCache(entries); err != nil {
		return fmt.Errorf("%s: %w", l.checkpointPath(), err)
	}
	cacheChanged := false

	if len(bases) == 0 {
		if err := l.addSegment(0); err != nil {
			return err
		}
		removed = true
	}
	// First segment to scan: the one holding the recovery point.
	scanFrom := len(bases)
	if !l.opts.CleanShutdown {
		scanFrom = 0
		for i, b := range bases {
			if b <= l.opts.RecoveryPoint {
				scanFrom = i
			}
		}
	}
	var recovered []*segment
	for i, b := range bases {
		s := &segment{dir: l.dir, base: b}
		if s.f, err = l.fs.OpenFile(s.logPath(), os.O_RDWR, 0o644); err != nil {
			return fmt.Errorf("open segment %s: %w", s.logPath(), err)
		}
		l.segs = append(l.segs, s)
		fi, err := s.f.Stat()
		if err != nil {
			return fmt.Errorf("stat segment %s: %w", s.logPath(), err)
		}
		size := fi.Size()
		if i >= scanFrom && i > 0 && l.segs[i-1].next != b {
			// Segments chain: a roll starts the new one at the LEO. A break
			// means the previous segment lost unsynced data after the new
			// segment's dir entry became durable; what follows is not a
			// prefix of the log.
			prev := l.segs[i-1]
			if prev.next < l.opts.RecoveryPoint {
				return &CorruptError{File: prev.logPath(), Position: prev.size,
					Reason: fmt.Sprintf("segment ends at offset %d but the next starts at %d (below the recovery point)", prev.next, b)}
			}
			l.segs = l.segs[:i]
			s.f.Close()
			l.log.Warn("dropping segments after a lost tail", "segment", prev.logPath(), "offset", prev.next, "dropped_segments", len(bases)-i)
			if err := l.removeSegments(bases[i:]); err != nil {
				return err
			}
			removed = true
			break
		}
		if i < scanFrom {
			if s.loadIndexes(l.fs, size) {
				ok, err := s.walkTail(size)
				if err != nil {
					return err
				}
				if ok {
					s.syncedSize = size
					continue
				}
			}
			l.log.Warn("rebuilding indexes", "segment", s.logPath())
		}
		// Full scan: validate every batch, rebuild the indexes, re-learn
		// epochs the checkpoint may lack (it never should, as it is written
		// before the data).
		pos, reason, err := s.recover(size, l.opts.IndexIntervalBytes, func(b BatchView) {
			if b.LeaderEpoch() > l.cache.Latest() && b.LeaderEpoch() >= 0 {
				cacheChanged = l.cache.Assign(b.LeaderEpoch(), b.BaseOffset()) || cacheChanged
			}
		})
		if err != nil {
			return err
		}
		recovered = append(recovered, s)
		if pos == size {
			continue
		}
		if i < scanFrom || s.next < l.opts.RecoveryPoint {
			// Data below the recovery point was durable: refuse to drop it.
			return &CorruptError{File: s.logPath(), Position: pos, Reason: reason + " (below the recovery point)"}
		}
		l.log.Warn("truncating corrupt log tail", "segment", s.logPath(), "position", pos,
			"offset", s.next, "reason", reason, "dropped_segments", len(bases)-i-1)
		if err := s.f.Truncate(pos); err != nil {
			return fmt.Errorf("truncate %s: %w", s.logPath(), err)
		}
		if err := l.removeSegments(bases[i+1:]); err != nil {
			return err
		}
		removed = true
		break
	}
	// Make what recovery validated durable, so the recovery point can move
	// to the end (Kafka flushes recovered segments too).
	for _, s := range recovered {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", s.logPath(), err)
		}
		s.syncedSize = s.size
		if err := s.persistIndexes(l.fs, true); err != nil {
			return err
		}
	}
	if removed || len(recovered) > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("sync dir %s: %w", l.dir, err)
		}
	}
	l.active().rollBaseMilli = l.opts.Clock().UnixMilli()
	leo := l.leo()
	cacheChanged = l.cache.TruncateFromEnd(leo) || cacheChanged
	cacheChanged = l.cache.TruncateFromStart(l.logStart()) || cacheChanged
	if cacheChanged {
		if err := l.writeCheckpoint(); err != nil {
			return err
		}
	}
	l.recoveryPoint = leo
	l.hw = clamp(l.opts.HighWatermark, l.logStart(), leo)
	// Rounds the cleaner checkpoint records above a LEO recovery cut
	// describe data that is gone.
	l.loadCleanHistory()
	if err := l.truncateCleanHistory(leo); err != nil {
		return err
	}
	removedSnapshots, err := l.loadProducers()
	if err != nil {
		return err
	}
	if removedSnapshots {
		// Durable before the log can grow past them: back after a crash,
		// a snapshot above the LEO of its day would be read as the state
		// of a log that has grown past it since.
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("sync dir %s: %w", l.dir, err)
		}
	}
	return nil
}

func clamp(o, lo, hi twinlog.Offset) twinlog.Offset { return max(lo, min(o, hi)) }

func (l *Log) active() *segment         { return l.segs[len(l.segs)-1] }
func (l *Log) leo() twinlog.Offset      { return l.active().next }
func (l *Log) logStart() twinlog.Offset { return l.segs[0].base }

func (l *Log) writeCheckpoint() error {
	if err := epoch.WriteCheckpoint(l.fs, l.checkpointPath(), l.cache.Entries()); err != nil {
		return l.fail(err)
	}
	return nil
}

// fail records a sticky I/O error. After it the log answers every call with
// the error: its files may no longer match its memory (Kafka takes the log
// dir offline).
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
		l.log.Error("log failed", "err", err)
	}
	return err
}

func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// removeSegments removes the files of unopened segments.
func (l *Log) removeSegments(bases []twinlog.Offset) error {
	for _, b := range bases {
		ls := &segment{dir: l.dir, base: b}
		for _, p := range []string{ls.logPath(), ls.idxPath(), ls.timePath()} {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", p, err)
			}
		}
	}
	return nil
}

// addSegment creates an empty segment file at base (truncating a leftover
// one) and makes it the active segment. The caller syncs the dir.
func (l *Log) addSegment(base twinlog.Offset) error {
	s := &segment{dir: l.dir, base: base, next: base, maxTs: noTimestamp}
	f, err := l.fs.OpenFile(s.logPath(), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create segment %s: %w", s.logPath(), err)
	}
	s.f = f
	s.rollBaseMilli = l.opts.Clock().UnixMilli()
	for _, p := range []string{s.idxPath(), s.timePath()} {
		if err := l.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	l.segs = append(l.segs, s)
	return nil
}

// removeSegmentFiles closes s and removes its files. The caller syncs the dir.
func (l *Log) removeSegmentFiles(s *segment) error {
	s.f.Close()
	for _, p := range []string{s.logPath(), s.idxPath(), s.timePath()} {
		if err := l.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}

// roll starts a new active segment at base. The old segment's indexes are
// written and synced (it will not change again); its data is synced by the
// flush policy like any other.
func (l *Log) roll(base twinlog.Offset) error {
	old := l.active()
	if old.size == 0 {
		// An empty active segment that cannot hold base (offset gap beyond
		// uint32) is replaced.
		if err := l.removeSegmentFiles(old); err != nil {
			return l.fail(err)
		}
		l.segs = l.segs[:len(l.segs)-1]
	} else if err := old.persistIndexes(l.fs, true); err != nil {
		return l.fail(err)
	} else {
		old.recent = nil // reads of a closed segment are not at the tail
	}
	// The state as of base is the new segment's snapshot; the dir sync
	// below makes it durable with the segment.
	if err := l.writeProducerSnapshot(base); err != nil {
		return l.fail(err)
	}
	if err := l.addSegment(base); err != nil {
		return l.fail(err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("sync dir %s: %w", l.dir, err))
	}
	l.log.Debug("rolled segment", "base_offset", base)
	return nil
}

func (l *Log) needsRoll(s *segment, b BatchView, nowMilli int64) bool {
	if !s.canHold(b.LastOffset()) {
		return true
	}
	if s.size == 0 {
		return false
	}
	if s.size+int64(len(b)) > l.segmentMax.Load() {
		return true
	}
	return l.opts.SegmentMaxAge > 0 && nowMilli-s.rollBaseMilli >= l.opts.SegmentMaxAge.Milliseconds()
}

// split validates the batches of an append outside the lock (crc is the
// expensive part).
func (l *Log) split(batches []byte) ([]BatchView, error) {
	if len(batches) == 0 {
		return nil, ErrEmptyAppend
	}
	var out []BatchView
	var pos int64
	orig := batches
	for len(batches) > 0 {
		if len(batches) >= logOverhead {
			if n := batchSize(batches); n > int64(l.opts.MaxBatchBytes) {
				return nil, fmt.Errorf("%w: batch at position %d is %d bytes, max %d", ErrBatchTooLarge, pos, n, l.opts.MaxBatchBytes)
			}
		}
		b, rest, err := DecodeBatch(batches)
		if err != nil {
			return nil, withFile(err, "", pos)
		}
		// Views keep the capacity of the whole buffer so that contiguous
		// can span a run of them.
		out = append(out, BatchView(orig[pos:pos+int64(len(b))]))
		pos += int64(len(b))
		batches = rest
	}
	return out, nil
}

// AppendAsLeader validates batches (concatenated, as produced), stamps them
// in place with consecutive offsets from the LEO and with epoch, appends them
// and records the epoch in the cache. It modifies batches.
func (l *Log) AppendAsLeader(batches []byte, e twinlog.Epoch) (AppendInfo, error) {
	bs, err := l.split(batches)
	if err != nil {
		return AppendInfo{}, err
	}
	return l.appendAsLeader(bs, e)
}

// AppendValidatedAsLeader is AppendAsLeader for batches the caller already
// validated with ValidateBatches: it checks only the append's own rules
// (non-empty, MaxBatchBytes), not crcs and records again.
func (l *Log) AppendValidatedAsLeader(v Validated, e twinlog.Epoch) (AppendInfo, error) {
	bs, err := l.checkValidated(v)
	if err != nil {
		return AppendInfo{}, err
	}
	return l.appendAsLeader(bs, e)
}

// checkValidated applies split's non-crc rules to validated batches.
func (l *Log) checkValidated(v Validated) ([]BatchView, error) {
	bs := v.Batches()
	if len(bs) == 0 {
		return nil, ErrEmptyAppend
	}
	var pos int64
	for _, b := range bs {
		if len(b) > l.opts.MaxBatchBytes {
			return nil, fmt.Errorf("%w: batch at position %d is %d bytes, max %d", ErrBatchTooLarge, pos, len(b), l.opts.MaxBatchBytes)
		}
		pos += int64(len(b))
	}
	return bs, nil
}

func (l *Log) appendAsLeader(bs []BatchView, e twinlog.Epoch) (AppendInfo, error) {
	if e < 0 {
		return AppendInfo{}, fmt.Errorf("%w: leader epoch %d", ErrInvalidEpoch, e)
	}
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	if latest := l.cache.Latest(); e < latest {
		l.mu.Unlock()
		return AppendInfo{}, fmt.Errorf("%w: append in epoch %d after epoch %d", ErrInvalidEpoch, e, latest)
	}
	next := l.leo()
	for _, b := range bs {
		b.SetBaseOffset(next)
		b.SetLeaderEpoch(e)
		next = b.NextOffset()
	}
	return l.appendUnlock(bs)
}

// AppendAsFollower appends batches keeping their offsets and epochs
// (followers and mirrors). Offsets may skip (mirror gaps) but the first base
// offset must be at or above the LEO and batches must not overlap; epochs
// must not go below the latest cached epoch.
func (l *Log) AppendAsFollower(batches []byte) (AppendInfo, error) {
	bs, err := l.split(batches)
	if err != nil {
		return AppendInfo{}, err
	}
	return l.appendAsFollower(bs)
}

// AppendValidatedAsFollower is AppendAsFollower for batches the caller
// already validated with ValidateBatches or ValidateReplicatedBatches (see
// AppendValidatedAsLeader).
func (l *Log) AppendValidatedAsFollower(v Validated) (AppendInfo, error) {
	bs, err := l.checkValidated(v)
	if err != nil {
		return AppendInfo{}, err
	}
	return l.appendAsFollower(bs)
}

func (l *Log) appendAsFollower(bs []BatchView) (AppendInfo, error) {
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	next, latest := l.leo(), l.cache.Latest()
	for _, b := range bs {
		if b.BaseOffset() < next {
			l.mu.Unlock()
			return AppendInfo{}, fmt.Errorf("%w: batch base offset %d below %d", ErrInvalidOffset, b.BaseOffset(), next)
		}
		if b.LeaderEpoch() < latest {
			l.mu.Unlock()
			return AppendInfo{}, fmt.Errorf("%w: batch at %d has epoch %d after epoch %d", ErrInvalidEpoch, b.BaseOffset(), b.LeaderEpoch(), latest)
		}
		next, latest = b.NextOffset(), b.LeaderEpoch()
	}
	return l.appendUnlock(bs)
}

// appendUnlock writes stamped batches, releases mu and applies the flush
// policy.
func (l *Log) appendUnlock(bs []BatchView) (AppendInfo, error) {
	info, wb, err := l.appendLocked(bs)
	flush := false
	if err == nil {
		l.unflushed += info.NumRecords
		now := l.opts.Clock()
		flush = (l.opts.FlushMessages > 0 && l.unflushed >= l.opts.FlushMessages) ||
			(l.opts.FlushInterval > 0 && now.Sub(l.lastFlush) >= l.opts.FlushInterval)
	}
	l.mu.Unlock()
	// Outside mu: starting writeback may wait for room in the device's
	// queue, and readers and the next append need not wait with it.
	for _, w := range wb {
		vfs.StartWriteback(w.f, w.off, w.n)
	}
	if flush {
		if ferr := l.Flush(); ferr != nil {
			return info, ferr
		}
	}
	return info, err
}

// writeback is a range of a segment file whose writeback an append started
// (Options.WritebackBytes).
type writeback struct {
	f      File
	off, n int64
}

func (l *Log) appendLocked(bs []BatchView) (AppendInfo, []writeback, error) {
	info := AppendInfo{FirstOffset: bs[0].BaseOffset(), MaxTimestamp: noTimestamp}
	var wb []writeback
	changed := false
	for _, b := range bs {
		changed = l.cache.Assign(b.LeaderEpoch(), b.BaseOffset()) || changed
	}
	// The checkpoint goes first: recovery trims entries beyond the LEO, but
	// cannot invent epochs for data it finds.
	if changed {
		if err := l.writeCheckpoint(); err != nil {
			return AppendInfo{}, nil, err
		}
	}
	nowMilli := l.opts.Clock().UnixMilli()
	for i := 0; i < len(bs); {
		if l.needsRoll(l.active(), bs[i], nowMilli) {
			// Roll at the LEO so segments chain (base = previous next
			// offset), which recovery checks; only an offset gap beyond the
			// uint32 index range starts the segment at the batch.
			base := l.leo()
			if bs[i].LastOffset()-base > math.MaxUint32 {
				base = bs[i].BaseOffset()
			}
			if err := l.roll(base); err != nil {
				return info, wb, err
			}
		}
		s := l.active()
		// A run of batches for this segment, written with one call; the
		// batches are contiguous in the caller's buffer.
		j, size := i+1, s.size+int64(len(bs[i]))
		for j < len(bs) && !l.needsRollAfter(s, size, bs[j], nowMilli) {
			size += int64(len(bs[j]))
			j++
		}
		run := bs[i:j]
		buf := contiguous(run)
		if s.size == 0 {
			s.rollBaseMilli = nowMilli
		}
		if _, err := s.f.WriteAt(buf, s.size); err != nil {
			// Leave no partial batch for readers or recovery to trip on.
			_ = s.f.Truncate(s.size)
			return info, wb, l.fail(fmt.Errorf("write %s: %w", s.logPath(), err))
		}
		pos := s.size
		if n := l.opts.WritebackBytes; n > 0 {
			// A truncation may have cut the file below the last start.
			s.writebackFrom = min(s.writebackFrom, pos)
			if end := pos + int64(len(buf)); end-s.writebackFrom >= n {
				wb = append(wb, writeback{s.f, s.writebackFrom, end - s.writebackFrom})
				s.writebackFrom = end
			}
		}
		for _, b := range run {
			s.noteBatch(b, pos, l.opts.IndexIntervalBytes)
			l.applyProducer(b)
			pos += int64(len(b))
			info.NumRecords += int64(b.RecordCount())
			info.MaxTimestamp = max(info.MaxTimestamp, b.MaxTimestamp())
			info.Bytes += len(b)
			info.LastOffset = b.LastOffset()
		}
		i = j
	}
	return info, wb, nil
}

// needsRollAfter is needsRoll for a segment that will hold size bytes.
func (l *Log) needsRollAfter(s *segment, size int64, b BatchView, nowMilli int64) bool {
	if !s.canHold(b.LastOffset()) {
		return true
	}
	if size+int64(len(b)) > l.segmentMax.Load() {
		return true
	}
	return l.opts.SegmentMaxAge > 0 && s.size > 0 && nowMilli-s.rollBaseMilli >= l.opts.SegmentMaxAge.Milliseconds()
}

// contiguous returns the bytes spanning run, which are adjacent views of one
// buffer.
func contiguous(run []BatchView) []byte {
	if len(run) == 1 {
		return run[0]
	}
	first := run[0]
	n := 0
	for _, b := range run {
		n += len(b)
	}
	return first[:n]
}

// Read returns whole batches starting with the batch that contains from (or
// the first after it when from falls in an offset gap), none with a record
// at or beyond upTo, up to maxBytes but always at least one batch if any
// qualifies (Kafka semantics). from outside [logStart, LEO] is
// ErrOffsetOutOfRange.
func (l *Log) Read(from twinlog.Offset, maxBytes int, upTo twinlog.Offset) (ReadResult, error) {
	return l.ReadInto(from, maxBytes, upTo, nil)
}

// ReadInto is Read with the buffer from alloc(n), which must return a slice
// of length n the Log may overwrite (nil alloc: a fresh one). Batches is
// then a prefix of that slice with its full capacity, so the caller can
// hand the buffer back to its pool once nothing reads Batches any more.
// Every byte of Batches is read from the log; none is left from before.
func (l *Log) ReadInto(from twinlog.Offset, maxBytes int, upTo twinlog.Offset, alloc func(n int) []byte) (ReadResult, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{LogStartOffset: l.logStart(), LogEndOffset: l.leo(), HighWatermark: l.hw}
	if from < res.LogStartOffset || from > res.LogEndOffset {
		return res, outOfRange(from, res.LogStartOffset, res.LogEndOffset)
	}
	if from >= upTo || from == res.LogEndOffset {
		return res, nil
	}
	i := l.segmentFor(from)
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		// At the tail the first batch's place and size are known without
		// reading: the read below is then the only one.
		pos, last, size, ok := s.findRecent(from)
		if !ok {
			var err error
			if pos, err = s.find(from); err != nil {
				return res, err
			}
			if pos < s.size {
				var hdr [BatchHeaderSize]byte
				b, err := s.readHeader(pos, s.size, hdr[:])
				if err != nil {
					return res, withFile(corruptf(0, "bad batch header: %v", err), s.logPath(), pos)
				}
				last, size = b.LastOffset(), batchSize(b)
			}
		}
		if pos == s.size {
			continue
		}
		if last >= upTo {
			return res, nil
		}
		n := min(max(int64(maxBytes), size), s.size-pos)
		var buf []byte
		if alloc != nil {
			buf = alloc(int(n))[:n]
		} else {
			buf = make([]byte, n)
		}
		if _, err := s.f.ReadAt(buf, pos); err != nil {
			return res, fmt.Errorf("read %s at %d: %w", s.logPath(), pos, err)
		}
		end := int64(0)
		for end+BatchHeaderSize <= n {
			v := BatchView(buf[end:])
			sz := batchSize(v)
			if end+sz > n || v.LastOffset() >= upTo {
				break
			}
			end += sz
		}
		if alloc != nil {
			res.Batches = buf[:end]
		} else {
			res.Batches = buf[:end:end]
		}
		return res, nil
	}
	return res, nil
}

// segmentFor returns the index of the last segment with base <= o (0 if none).
func (l *Log) segmentFor(o twinlog.Offset) int {
	i, _ := slices.BinarySearchFunc(l.segs, o, func(s *segment, t twinlog.Offset) int {
		if s.base <= t {
			return -1
		}
		return 1
	})
	return max(i-1, 0)
}

// OffsetForTimestamp returns the offset of the first record with timestamp
// >= ts, or NoOffset if there is none.
func (l *Log) OffsetForTimestamp(ts int64) (twinlog.Offset, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return twinlog.NoOffset, err
	}
	for _, s := range l.segs {
		if s.size == 0 || s.maxTs < ts {
			continue
		}
		// Every batch up to a time-index entry with a smaller timestamp is
		// too old; start at the last such entry.
		start := s.base
		for _, e := range s.timeIndex {
			if e.ts >= ts {
				break
			}
			start = s.base + twinlog.Offset(e.rel)
		}
		pos, err := s.find(start)
		if err != nil {
			return twinlog.NoOffset, err
		}
		var hdr [BatchHeaderSize]byte
		for pos < s.size {
			b, err := s.readHeader(pos, s.size, hdr[:])
			if err != nil {
				return twinlog.NoOffset, withFile(corruptf(0, "bad batch header: %v", err), s.logPath(), pos)
			}
			n := batchSize(b)
			if b.MaxTimestamp() >= ts {
				full := make([]byte, n)
				if _, err := s.f.ReadAt(full, pos); err != nil {
					return twinlog.NoOffset, fmt.Errorf("read %s at %d: %w", s.logPath(), pos, err)
				}
				recs, err := BatchView(full).Records()
				if err != nil {
					return twinlog.NoOffset, withFile(err, s.logPath(), pos)
				}
				for _, r := range recs {
					if r.Timestamp >= ts {
						return r.Offset, nil
					}
				}
			}
			pos += n
		}
	}
	return twinlog.NoOffset, nil
}

// LogStartOffset is the first offset of the log.
func (l *Log) LogStartOffset() twinlog.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart()
}

// LogEndOffset is the offset the next record will get (LEO).
func (l *Log) LogEndOffset() twinlog.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leo()
}

// HighWatermark is the HW, always within [logStart, LEO].
func (l *Log) HighWatermark() twinlog.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.hw
}

// SetHighWatermark sets the HW clamped to [logStart, LEO] and returns the
// value set.
func (l *Log) SetHighWatermark(o twinlog.Offset) twinlog.Offset {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hw = clamp(o, l.logStart(), l.leo())
	return l.hw
}

// RecoveryPoint is the offset below which all data is fsynced.
func (l *Log) RecoveryPoint() twinlog.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// Epochs returns a snapshot of the leader epoch cache.
func (l *Log) Epochs() *epoch.Cache {
	l.mu.RLock()
	defer l.mu.RUnlock()
	c, _ := epoch.NewCache(l.cache.Entries())
	return c
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch against the current LEO
// (SPEC §2.4).
func (l *Log) EndOffsetForEpoch(e twinlog.Epoch) (twinlog.Epoch, twinlog.Offset) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cache.EndOffsetFor(e, l.leo())
}

// Diverging is epoch.Cache.Diverging against this log: whether a reader
// whose last record is of epoch last and who reads from offset from holds
// records this log does not.
func (l *Log) Diverging(last twinlog.Epoch, from twinlog.Offset) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, _, ok := l.cache.Diverging(last, from, l.leo())
	return ok
}

// AssignEpoch records epoch e starting at offset o (a non-mirror leader
// entering LE does AssignEpoch(LE, LEO), SPEC §2.4) and checkpoints.
func (l *Log) AssignEpoch(e twinlog.Epoch, o twinlog.Offset) error {
	if e < 0 || o < 0 {
		return fmt.Errorf("%w: assign epoch %d at %d", ErrInvalidEpoch, e, o)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if l.cache.Assign(e, o) {
		return l.writeCheckpoint()
	}
	return nil
}

// SyncEpochs makes the epoch cache match want, a replica's view of it
// (broker/replica's Ready.EpochEntries), and reports whether it does. The
// log assigns per appended batch and trims on truncation itself; what
// remains is the (LE, LEO) entry of a leader entering a new epoch (SPEC
// §2.4), so only want's last entry is assigned, which also drops a stale
// tail the log kept (an epoch without records cut at the LEO, §6.2c).
func (l *Log) SyncEpochs(want []epoch.Entry) (bool, error) {
	have := l.Epochs().Entries()
	if slices.Equal(have, want) {
		return true, nil
	}
	if n := len(want); n > 0 {
		last := want[n-1]
		if !slices.Contains(have, last) || have[len(have)-1] != last {
			if err := l.AssignEpoch(last.Epoch, last.StartOffset); err != nil {
				return false, err
			}
		}
	}
	return slices.Equal(l.Epochs().Entries(), want), nil
}

// TruncateTo removes every batch with a record at or after o (a batch
// straddling o goes whole, so the LEO may end below o), then trims the epoch
// cache (truncateFromEnd) and lowers HW and recovery point to the LEO. o at
// or beyond the LEO removes no batch but still drops cache entries starting
// at or after o (an epoch without records, e.g. assigned at the LEO by a
// leader entering a new epoch and cut by an LMLE truncation there, SPEC
// §2.4, §6.2c): kept, a restart before the next append would reload it. o
// below the log start is a full truncation (TruncateFullyAndStartAt(o)).
func (l *Log) TruncateTo(o twinlog.Offset) (err error) {
	defer l.persistLoweredRecoveryPoint(&err) // runs after the unlocks below
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if o < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, o)
	}
	if o >= l.leo() {
		if l.cache.TruncateFromEnd(o) {
			return l.writeCheckpoint()
		}
		return nil
	}
	if o < l.logStart() {
		return l.truncateFullyLocked(o)
	}
	i := l.segmentFor(o)
	s := l.segs[i]
	pos, err := s.find(o)
	if err != nil {
		return err
	}
	l.segGen.Add(1) // a clean in progress stops
	old := l.leo()
	// Shrink s first: a crash before the later segments are removed leaves
	// a log longer than intended, never one with a hole.
	if pos < s.size {
		if err := s.f.Truncate(pos); err != nil {
			return l.fail(fmt.Errorf("truncate %s: %w", s.logPath(), err))
		}
		if err := s.f.Sync(); err != nil {
			return l.fail(fmt.Errorf("sync %s: %w", s.logPath(), err))
		}
		s.truncateIndexes(pos)
		if _, err := s.walkTail(pos); err != nil {
			return l.fail(err)
		}
		s.size, s.syncedSize = pos, min(s.syncedSize, pos)
	}
	for _, later := range l.segs[i+1:] {
		if err := l.removeSegmentFiles(later); err != nil {
			return l.fail(err)
		}
	}
	l.segs = l.segs[:i+1]
	if err := s.persistIndexes(l.fs, true); err != nil {
		return l.fail(err)
	}
	// Snapshots above the new end go with the same dir sync as the
	// segments, and the state is rebuilt to the cut.
	if _, err := l.loadProducers(); err != nil {
		return l.fail(err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("sync dir %s: %w", l.dir, err))
	}
	leo := l.leo()
	if s.size == 0 {
		s.rollBaseMilli = l.opts.Clock().UnixMilli()
	}
	if err := l.truncateCleanHistory(leo); err != nil {
		return err
	}
	l.hw = min(l.hw, leo)
	l.lowerRecoveryPoint(leo)
	l.log.Warn("truncated log", "offset", o, "log_end_offset", leo, "previous_log_end_offset", old)
	if l.cache.TruncateFromEnd(leo) {
		return l.writeCheckpoint()
	}
	return nil
}

// lowerRecoveryPoint sets the recovery point to min(recovery point, o) and
// notes when that lowered it. l.mu is held.
func (l *Log) lowerRecoveryPoint(o twinlog.Offset) {
	if o < l.recoveryPoint {
		l.recoveryPoint = o
		l.recoveryPointLowered = true
	}
}

// persistLoweredRecoveryPoint makes a recovery point that a truncation
// lowered durable before the truncation returns (Kafka's
// LogManager.truncateTo checkpoints the recovery points right after
// truncating). Left only in memory, the checkpointed value stays above the
// truncation offset: appends after it are unsynced, and if one rolls a
// segment (the roll makes the new file durable) and the process crashes
// before the next periodic checkpoint, the reopen finds a segment ending
// below the old recovery point followed by a later one and refuses the log
// (ErrCorrupt). A Log opened by a LogDir calls it back to rewrite the dir's
// recovery-point checkpoint; it runs without l.mu and flushMu (the callback
// reads every log of the dir). Called deferred, it keeps the first error.
func (l *Log) persistLoweredRecoveryPoint(errp *error) {
	l.mu.Lock()
	lowered := l.recoveryPointLowered
	l.recoveryPointLowered = false
	l.mu.Unlock()
	if !lowered || l.onRecoveryPointLowered == nil {
		return
	}
	if err := l.onRecoveryPointLowered(); err != nil {
		l.mu.Lock()
		err = l.fail(fmt.Errorf("checkpoint recovery points after truncation: %w", err))
		l.mu.Unlock()
		if *errp == nil {
			*errp = err
		}
	}
}

// TruncateFullyAndStartAt deletes every segment and restarts the log empty
// at o: log start = LEO = HW = o, empty epoch cache.
func (l *Log) TruncateFullyAndStartAt(o twinlog.Offset) (err error) {
	if o < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, o)
	}
	defer l.persistLoweredRecoveryPoint(&err) // runs after the unlocks below
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.truncateFullyLocked(o)
}

func (l *Log) truncateFullyLocked(o twinlog.Offset) error {
	l.segGen.Add(1)
	if err := l.truncateCleanHistory(0); err != nil {
		return err
	}
	for _, s := range l.segs {
		if err := l.removeSegmentFiles(s); err != nil {
			return l.fail(err)
		}
	}
	l.segs = nil
	if err := l.removeSnapshots(func(twinlog.Offset) bool { return true }); err != nil {
		return l.fail(err)
	}
	l.producers = producer.New()
	if err := l.addSegment(o); err != nil {
		return l.fail(err)
	}
	// One dir sync makes removal and creation durable together (on MemFS
	// atomically; on a journaling file system in order).
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("sync dir %s: %w", l.dir, err))
	}
	l.lowerRecoveryPoint(o)
	l.hw, l.recoveryPoint, l.unflushed = o, o, 0
	l.log.Warn("truncated log fully", "offset", o)
	if l.cache.Clear() {
		return l.writeCheckpoint()
	}
	return nil
}

// Roll starts a new segment if the active one is not empty.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if l.active().size == 0 {
		return nil
	}
	return l.roll(l.leo())
}

// SetSegmentMaxBytes sets the size the active segment rolls at from the
// next append on (a topic's segment.bytes, which may change at run time);
// n <= 0 goes back to Options.SegmentMaxBytes, and more than 2 GiB (index
// positions are uint32) is clamped. Segments already written keep their
// size; a cleaning round groups segments up to the new size.
func (l *Log) SetSegmentMaxBytes(n int64) {
	if n <= 0 {
		n = l.opts.SegmentMaxBytes
	}
	l.segmentMax.Store(min(n, 1<<31))
}

// MaybeRoll rolls the active segment if it is non-empty and has reached
// SegmentMaxBytes or SegmentMaxAge (appends check this themselves; a
// periodic caller uses MaybeRoll for idle partitions).
func (l *Log) MaybeRoll() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return false, err
	}
	s := l.active()
	if s.size == 0 {
		return false, nil
	}
	age := l.opts.SegmentMaxAge > 0 && l.opts.Clock().UnixMilli()-s.rollBaseMilli >= l.opts.SegmentMaxAge.Milliseconds()
	if s.size < l.segmentMax.Load() && !age {
		return false, nil
	}
	return true, l.roll(l.leo())
}

// Retention is what DeleteRetained may delete: whole segments, oldest
// first, entirely below Below (and below the log's HW), while the log is
// larger than Bytes or the segment holds only records older than Age.
type Retention struct {
	// Bytes bounds the log's size (<= 0: unlimited; Kafka's
	// retention.bytes). A segment goes only if the rest still holds Bytes.
	Bytes int64
	// Age: a segment whose newest record is older goes (<= 0: unlimited;
	// Kafka's retention.ms).
	Age time.Duration
	// Below bounds the deletion: no segment holding an offset at or above
	// it goes. The broker passes its replica's HW, so the log start never
	// passes what the replica machine counts as committed.
	Below twinlog.Offset
}

// DeleteRetained applies r: it deletes whole segments, oldest first, that
// lie entirely below the HW and r.Below and are beyond r.Bytes or hold only
// records older than r.Age, moves the log start and trims the epoch cache
// (truncateFromStart). An expired active segment is rolled first (when the
// whole log is below the bound). It returns the number of deleted segments
// and their bytes.
func (l *Log) DeleteRetained(r Retention) (segments int, bytes int64, err error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, 0, err
	}
	nowMilli := l.opts.Clock().UnixMilli()
	expired := func(s *segment) bool {
		return r.Age > 0 && s.size > 0 && s.maxTs < nowMilli-r.Age.Milliseconds()
	}
	below := min(l.hw, r.Below)
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	n := 0
	for n < len(l.segs) {
		s := l.segs[n]
		if s.next > below || s.size == 0 {
			break
		}
		bySize := r.Bytes > 0 && total-s.size >= r.Bytes
		if !bySize && !expired(s) {
			break
		}
		if n == len(l.segs)-1 {
			if !expired(s) {
				break
			}
			if err := l.roll(l.leo()); err != nil {
				return 0, 0, err
			}
		}
		total -= s.size
		bytes += s.size
		n++
	}
	if n == 0 {
		return 0, 0, nil
	}
	l.segGen.Add(1)
	for _, s := range l.segs[:n] {
		if err := l.removeSegmentFiles(s); err != nil {
			return 0, 0, l.fail(err)
		}
	}
	l.segs = slices.Delete(l.segs, 0, n)
	// Snapshots below the new log start describe deleted data; the one at
	// it, if any, stays (truncation may reload from it).
	if err := l.removeSnapshots(func(o twinlog.Offset) bool { return o < l.logStart() }); err != nil {
		return n, bytes, l.fail(err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return n, bytes, l.fail(fmt.Errorf("sync dir %s: %w", l.dir, err))
	}
	start := l.logStart()
	l.hw = max(l.hw, start)
	l.recoveryPoint = max(l.recoveryPoint, start)
	l.log.Info("deleted retained segments", "segments", n, "bytes", bytes, "log_start_offset", start)
	if l.cache.TruncateFromStart(start) {
		return n, bytes, l.writeCheckpoint()
	}
	return n, bytes, nil
}

// Flush fsyncs every segment with unsynced data, writes the index files and
// moves the recovery point to the LEO it saw. It does not hold the lock
// readers and appenders use while it fsyncs.
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushLocked(false)
}

// flushLocked needs flushMu. syncIndexes also fsyncs index files (close).
func (l *Log) flushLocked(syncIndexes bool) error {
	l.mu.RLock()
	if err := l.usable(); err != nil {
		l.mu.RUnlock()
		return err
	}
	leo := l.leo()
	type todo struct {
		s    *segment
		size int64
	}
	var work []todo
	for _, s := range l.segs {
		if s.syncedSize < s.size || syncIndexes || s.indexWritten < len(s.index) {
			work = append(work, todo{s, s.size})
		}
	}
	unflushed := l.unflushed
	l.mu.RUnlock()
	for _, w := range work {
		if w.s.syncedSize < w.size {
			if err := w.s.f.Sync(); err != nil {
				l.mu.Lock()
				defer l.mu.Unlock()
				return l.fail(fmt.Errorf("sync %s: %w", w.s.logPath(), err))
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range work {
		w.s.syncedSize = max(w.s.syncedSize, w.size)
		if err := w.s.persistIndexes(l.fs, syncIndexes); err != nil {
			return l.fail(err)
		}
	}
	l.recoveryPoint = max(l.recoveryPoint, leo)
	l.unflushed -= unflushed
	l.lastFlush = l.opts.Clock()
	return nil
}

// MaybeFlush flushes if FlushInterval has passed since the last flush.
func (l *Log) MaybeFlush() error {
	l.mu.RLock()
	due := l.opts.FlushInterval > 0 && l.opts.Clock().Sub(l.lastFlush) >= l.opts.FlushInterval
	l.mu.RUnlock()
	if !due {
		return nil
	}
	return l.Flush()
}

// Close flushes everything (data and indexes) and closes the files. The log
// dir's clean-shutdown file may be written after every log is closed.
func (l *Log) Close() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	err := l.flushLocked(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.segGen.Add(1)
	if err == nil && l.failed == nil {
		// A clean start then reads no batch to rebuild the state (Kafka
		// writes one at close too).
		if err = l.writeProducerSnapshot(l.leo()); err == nil {
			if err = l.fs.SyncDir(l.dir); err != nil {
				err = fmt.Errorf("sync dir %s: %w", l.dir, err)
			}
		}
	}
	l.closeFiles()
	l.closed = true
	return err
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		if s.f != nil {
			s.f.Close()
		}
	}
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.segGen.Add(1)
	if !l.closed {
		l.closeFiles()
		l.closed = true
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("remove %s: %w", l.dir, err)
	}
	if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
		return fmt.Errorf("sync dir %s: %w", filepath.Dir(l.dir), err)
	}
	return nil
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// Size is the total size of the segments in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// NumSegments is the number of segments.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}
