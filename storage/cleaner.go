package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/vfs"
)

// The log cleaner (cleanup.policy=compact, Kafka's LogCleaner): see
// doc.go "Compaction" for what a round does and why it is safe; the pure
// rules are compact.go's.

// CompactionConfig is a compacted log's topic settings (Kafka's names).
type CompactionConfig struct {
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: a log is due
	// once its dirty bytes are more than this share of its non-active
	// bytes (CleanerStatus.NeedsCleaning).
	MinCleanableDirtyRatio float64
	// DeleteRetention is delete.retention.ms: how long a tombstone stays
	// after the round that first compacted it.
	DeleteRetention time.Duration
	// MinCompactionLag is min.compaction.lag.ms: a segment with a record
	// younger than this is not cleaned yet.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms (<= 0: unbounded): dirty
	// data older than this makes the log due whatever its ratio, and a
	// round rolls an active segment whose first append is older.
	MaxCompactionLag time.Duration
}

// DefaultCompactionConfig is Kafka's defaults.
var DefaultCompactionConfig = CompactionConfig{
	MinCleanableDirtyRatio: 0.5,
	DeleteRetention:        24 * time.Hour,
}

// CleanerConfig configures one Cleaner.
type CleanerConfig struct {
	// DedupeBufferBytes bounds the key map: this cleaner's share of
	// log.cleaner.dedupe.buffer.size (default 128 MiB, Kafka's total).
	// A round maps as many keys of the dirty range as fit and cleans
	// that prefix; the next round goes on from there.
	DedupeBufferBytes int64
	// IOBufferBytes is the read chunk and the write buffer (default 512
	// KiB, log.cleaner.io.buffer.size); a larger batch grows it.
	IOBufferBytes int
	// Throttle bounds the bytes read and written per second, shared by
	// the broker's cleaners (log.cleaner.io.max.bytes.per.second); nil:
	// unbounded.
	Throttle *Throttle
	// Logger receives one Info line per round that rewrote segments.
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultDedupeBufferBytes = 128 << 20
	DefaultCleanerIOBuffer   = 512 << 10
	// maxDedupeBufferBytes caps one cleaner's key map (Kafka's 2 GiB per
	// thread).
	maxDedupeBufferBytes = math.MaxInt32
)

// Cleaner compacts logs, one round at a time (Clean). It owns a key map
// and I/O buffers, so it is not safe for concurrent use: run one per
// cleaner thread. Different Cleaners may clean different logs at once;
// a log is cleaned by one at a time.
type Cleaner struct {
	cfg CleanerConfig
	log *slog.Logger
	m   *keyMap
	buf []byte
	// beforeSwap, if set (tests), runs before each swap.
	beforeSwap func()
}

// NewCleaner returns a Cleaner. Its key map grows on demand up to
// DedupeBufferBytes.
func NewCleaner(cfg CleanerConfig) *Cleaner {
	if cfg.DedupeBufferBytes <= 0 {
		cfg.DedupeBufferBytes = DefaultDedupeBufferBytes
	}
	cfg.DedupeBufferBytes = min(cfg.DedupeBufferBytes, maxDedupeBufferBytes)
	if cfg.IOBufferBytes <= 0 {
		cfg.IOBufferBytes = DefaultCleanerIOBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Cleaner{cfg: cfg, log: cfg.Logger.With("component", "cleaner"), m: newKeyMap(cfg.DedupeBufferBytes)}
}

// CleanStats describes one round.
type CleanStats struct {
	// FirstDirtyOffset and EndOffset bound the dirty range the round
	// mapped; everything below EndOffset was compacted. EndOffset is below
	// the first uncleanable offset when the key map filled up.
	FirstDirtyOffset, EndOffset twinlog.Offset
	// Segments were read and rewritten as Groups new segments (only groups
	// that changed are swapped in: SwappedGroups).
	Segments, Groups, SwappedGroups int
	// BytesBefore and BytesAfter are the sizes of the segments swapped
	// out and of those swapped in.
	BytesBefore, BytesAfter int64
	// BytesRead counts the bytes read (map and rewrite), BytesWritten the
	// cleaned files' bytes.
	BytesRead, BytesWritten int64
	// RecordsRead counts records read while rewriting; RecordsRemoved
	// those dropped, TombstonesRemoved the expired tombstones among them.
	RecordsRead, RecordsRemoved, TombstonesRemoved int64
	// MapKeys is the number of keys mapped, MapUtilization their share of
	// the map's capacity.
	MapKeys        int
	MapUtilization float64
	Duration       time.Duration
	// Aborted: a truncation, retention, Close or Delete of the log, or the
	// context, stopped the round. Groups already swapped in stay.
	Aborted bool
}

// errCleanAborted: the log changed under a round (segGen moved) or was
// closed; the round stops without error.
var errCleanAborted = errors.New("storage: clean aborted")

// segRef is a segment of a round's plan: the segment, and what planning
// saw of it under the lock.
type segRef struct {
	s    *segment
	info segInfo
}

// cleanPlan is a round, fixed under the log's lock.
type cleanPlan struct {
	gen         uint64
	segs        []segRef // the non-active segments
	firstDirty  twinlog.Offset
	uncleanable twinlog.Offset
	// dirtyPos is the index's position for firstDirty in the segment
	// holding it.
	dirtyPos int64
	// lastOfProducer is each idempotent producer's last batch's last
	// offset: that batch keeps its header (Kafka keeps it so the
	// producer's sequence and epoch survive a rebuild of its state).
	lastOfProducer map[int64]twinlog.Offset
	hist           cleanHistory
	nowMs          int64
	// tombstoneFrom is the first tombstone the round keeps below its end
	// (NoOffset: none yet).
	tombstoneFrom twinlog.Offset
}

// Clean runs one round on l with its topic's settings cc: it maps the
// keys of the dirty range [first dirty offset, first uncleanable offset)
// (as many as the dedupe buffer holds), rewrites every non-active segment
// below the mapped end group by group, keeping per key only its latest
// record, and swaps each changed group in atomically. It returns at once
// when another round of l is running or there is nothing dirty to clean.
// A round stops early, without error, when l is truncated, retained,
// closed or deleted meanwhile; with ctx's error when ctx ends. Clean does
// not check the dirty ratio: CleanerStatus says when a log is due.
func (c *Cleaner) Clean(ctx context.Context, l *Log, cc CompactionConfig) (CleanStats, error) {
	if !l.cleanMu.TryLock() {
		return CleanStats{}, nil
	}
	defer l.cleanMu.Unlock()
	start := time.Now()
	p, err := l.planClean(cc)
	if err != nil || p == nil {
		return CleanStats{}, err
	}
	st := CleanStats{FirstDirtyOffset: p.firstDirty}
	err = c.round(ctx, l, p, cc, &st)
	st.Duration = time.Since(start)
	st.MapKeys, st.MapUtilization = c.m.size(), c.m.utilization()
	switch {
	case errors.Is(err, errCleanAborted):
		st.Aborted = true
		err = nil
	case err != nil && ctx.Err() != nil:
		st.Aborted = true
		err = ctx.Err()
	}
	l.noteClean(st, err)
	if err == nil && !st.Aborted && st.SwappedGroups > 0 {
		c.log.Info("cleaned log", "dir", l.dir, "first_dirty_offset", st.FirstDirtyOffset, "end_offset", st.EndOffset,
			"segments", st.Segments, "groups", st.SwappedGroups, "bytes_before", st.BytesBefore, "bytes_after", st.BytesAfter,
			"records_removed", st.RecordsRemoved, "tombstones_removed", st.TombstonesRemoved,
			"map_utilization", st.MapUtilization, "duration", st.Duration)
	} else if st.Aborted {
		c.log.Debug("log cleaning aborted", "dir", l.dir, "end_offset", st.EndOffset)
	}
	return st, err
}

func (c *Cleaner) round(ctx context.Context, l *Log, p *cleanPlan, cc CompactionConfig, st *CleanStats) error {
	c.m.reset()
	end, err := c.buildMap(ctx, l, p, st)
	if err != nil {
		return err
	}
	st.EndOffset = end
	infos := make([]segInfo, len(p.segs))
	for i, r := range p.segs {
		infos[i] = r.info
	}
	rule := retainRule{Map: c.m, End: end, DeletableBelow: p.hist.deletableBelow(p.nowMs, cc.DeleteRetention.Milliseconds())}
	for _, g := range groupSegments(infos, end, l.segmentMax.Load()) {
		st.Groups++
		if err := c.cleanGroup(ctx, l, p, p.segs[g[0]:g[1]], rule, st); err != nil {
			return err
		}
	}
	return l.finishRound(p, end)
}

// check stops a round whose context ended or whose log changed.
func (p *cleanPlan) check(ctx context.Context, l *Log) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.segGen.Load() != p.gen {
		return errCleanAborted
	}
	return nil
}

// ioErr is err, or errCleanAborted when the log changed meanwhile (a
// truncation or close may have closed or cut the file being read).
func (p *cleanPlan) ioErr(l *Log, err error) error {
	if l.segGen.Load() != p.gen {
		return errCleanAborted
	}
	return err
}

// buildMap maps the keys of [firstDirty, uncleanable) and returns the end
// of what it mapped.
func (c *Cleaner) buildMap(ctx context.Context, l *Log, p *cleanPlan, st *CleanStats) (twinlog.Offset, error) {
	for _, r := range p.segs {
		if r.info.next <= p.firstDirty {
			continue
		}
		if r.info.base >= p.uncleanable {
			break
		}
		from := int64(0)
		if r.info.base <= p.firstDirty {
			from = p.dirtyPos
		}
		br := c.reader(r.s, from, r.info.size)
		for {
			if err := p.check(ctx, l); err != nil {
				return 0, err
			}
			b, _, err := br.next(ctx, c.cfg.Throttle)
			st.BytesRead += br.read
			br.read = 0
			if err != nil {
				return 0, p.ioErr(l, err)
			}
			if b == nil || b.BaseOffset() >= p.uncleanable {
				break
			}
			end, _, err := mapBatch(c.m, b, p.firstDirty, p.uncleanable)
			if err != nil {
				return 0, p.ioErr(l, withFile(err, r.s.logPath(), br.at))
			}
			if end != p.uncleanable {
				return end, nil
			}
		}
	}
	return p.uncleanable, nil
}

// cleanGroup rewrites the segments g into <base>.log.cleaned and swaps it
// in when anything changed.
func (c *Cleaner) cleanGroup(ctx context.Context, l *Log, p *cleanPlan, g []segRef, rule retainRule, st *CleanStats) error {
	base := g[0].info.base
	path := cleanedPath(l.dir, base)
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return p.ioErr(l, fmt.Errorf("create %s: %w", path, err))
	}
	ns := &segment{dir: l.dir, base: base, next: base, maxTs: noTimestamp, f: f}
	swapped := false
	defer func() {
		if !swapped {
			f.Close()
			l.removeCleaned(path)
		}
	}()
	var (
		out     []byte
		written int64 // bytes of ns written
		changed = len(g) > 1
		before  int64
	)
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		if _, err := f.WriteAt(out, written); err != nil {
			return p.ioErr(l, fmt.Errorf("write %s: %w", path, err))
		}
		written += int64(len(out))
		st.BytesWritten += int64(len(out))
		n := len(out)
		out = out[:0]
		return c.cfg.Throttle.Wait(ctx, n)
	}
	var removed, tombstones int64
	keep := func(r *Record) bool {
		switch rule.decide(r) {
		case keepRecord:
			if r.Value == nil && r.Key != nil && r.Offset < rule.End && p.tombstoneFrom == twinlog.NoOffset {
				p.tombstoneFrom = r.Offset
			}
			return true
		case dropTombstone:
			tombstones++
		}
		removed++
		return false
	}
	for gi, r := range g {
		before += r.info.size
		br := c.reader(r.s, 0, r.info.size)
		for {
			if err := p.check(ctx, l); err != nil {
				return err
			}
			b, at, err := br.next(ctx, c.cfg.Throttle)
			st.BytesRead += br.read
			br.read = 0
			if err != nil {
				return p.ioErr(l, err)
			}
			if b == nil {
				break
			}
			last := gi == len(g)-1 && at+int64(len(b)) == r.info.size
			pid := b.ProducerID()
			retainEmpty := last || pid != NoProducerID && p.lastOfProducer[pid] == b.LastOffset()
			n := len(out)
			var res filterResult
			if out, res, err = filterBatch(out, b, keep, retainEmpty); err != nil {
				return p.ioErr(l, withFile(err, r.s.logPath(), at))
			}
			st.RecordsRead += int64(res.Records)
			changed = changed || res.Rewritten || res.Drop
			if len(out) > n {
				ns.noteBatch(BatchView(out[n:]), written+int64(n), l.opts.IndexIntervalBytes)
			}
			if len(out) >= c.cfg.IOBufferBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	st.Segments += len(g)
	st.RecordsRemoved += removed
	st.TombstonesRemoved += tombstones
	if !changed {
		return nil
	}
	if err := f.Sync(); err != nil {
		return p.ioErr(l, fmt.Errorf("sync %s: %w", path, err))
	}
	ns.recent = nil
	ns.syncedSize, ns.writebackFrom = ns.size, ns.size
	ns.rollBaseMilli = l.opts.Clock().UnixMilli() // if a truncation makes it active
	old := make([]*segment, len(g))
	for i, r := range g {
		old[i] = r.s
	}
	if c.beforeSwap != nil {
		c.beforeSwap()
	}
	if err := l.swapCleaned(old, ns, p.gen); err != nil {
		return err
	}
	swapped = true
	st.SwappedGroups++
	st.BytesBefore += before
	st.BytesAfter += ns.size
	return nil
}

func (c *Cleaner) reader(s *segment, from, end int64) *batchReader {
	if cap(c.buf) < c.cfg.IOBufferBytes {
		c.buf = make([]byte, c.cfg.IOBufferBytes)
	}
	return &batchReader{f: s.f, path: s.logPath(), pos: from, end: end, buf: c.buf[:0]}
}

// batchReader reads and validates the batches of a segment file between
// two positions, a chunk at a time.
type batchReader struct {
	f        File
	path     string
	pos, end int64  // next unread file position, end of the batches
	buf      []byte // read-ahead: bytes from position pos - len(buf)
	off      int    // start of the next batch in buf
	at       int64  // position of the batch last returned
	read     int64  // bytes read since the caller last reset it
}

// next returns the next batch (nil at the end) and its position. The view
// is valid until the next call.
func (r *batchReader) next(ctx context.Context, t *Throttle) (BatchView, int64, error) {
	avail := r.buf[r.off:]
	filePos := r.pos - int64(len(avail)) // position of avail[0]
	if filePos >= r.end {
		return nil, 0, nil
	}
	need := int64(logOverhead)
	if filePos+need > r.end {
		return nil, 0, withFile(corruptf(0, "%d bytes cannot hold a batch length", r.end-filePos), r.path, filePos)
	}
	if len(avail) >= logOverhead {
		need = batchSize(avail)
		if need < BatchHeaderSize || filePos+need > r.end {
			return nil, 0, withFile(corruptf(0, "batch length %d with %d bytes left", need, r.end-filePos), r.path, filePos)
		}
	}
	if int64(len(avail)) < need {
		// Refill: keep the partial batch at the front, read what fits.
		size := max(int64(cap(r.buf)), need)
		buf := r.buf[:0]
		if int64(cap(buf)) < size {
			buf = make([]byte, 0, size)
		}
		n := copy(buf[:len(avail)], avail)
		buf = buf[:n]
		want := min(size-int64(n), r.end-r.pos)
		chunk := buf[n : n+int(want)]
		if _, err := r.f.ReadAt(chunk, r.pos); err != nil {
			return nil, 0, fmt.Errorf("read %s at %d: %w", r.path, r.pos, err)
		}
		r.pos += want
		r.read += want
		r.buf, r.off = buf[:n+int(want)], 0
		if err := t.Wait(ctx, int(want)); err != nil {
			return nil, 0, err
		}
		return r.next(ctx, t)
	}
	b := BatchView(avail[:need:need])
	if err := b.Validate(); err != nil {
		return nil, 0, withFile(err, r.path, filePos)
	}
	r.off += int(need)
	r.at = filePos
	// The cleaner is CPU-bound (validation, the offset map, rewriting) and
	// runs beside the partitions' appends and fetches: it yields its
	// processor at every batch, so a produce waiting to run is not held up
	// by a cleaner's time slice (BenchmarkCleanerUnderProduce: produce p99
	// 97 ms → 6.3 ms while three replicas clean on two cores, cleaning at
	// 281 MB/s instead of 290).
	runtime.Gosched()
	return b, filePos, nil
}

// planClean fixes a round under the lock; nil when nothing is dirty. A
// bounded max.compaction.lag rolls an active segment older than it first.
func (l *Log) planClean(cc CompactionConfig) (*cleanPlan, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return nil, err
	}
	nowMs := l.opts.Clock().UnixMilli()
	if lag := cc.MaxCompactionLag; lag > 0 && l.active().size > 0 && l.active().rollBaseMilli <= nowMs-lag.Milliseconds() {
		if err := l.roll(l.leo()); err != nil {
			return nil, err
		}
	}
	infos := l.segInfos()
	firstDirty := max(l.cleanHist.firstDirty(), l.logStart())
	unc := firstUncleanable(infos, firstDirty, l.hw, nowMs, cc.MinCompactionLag.Milliseconds())
	if firstDirty >= unc {
		if !l.tombstonesExpired(cc, nowMs) {
			return nil, nil
		}
		// Nothing dirty, but tombstones the last round kept have expired
		// since: a round with an empty map drops them.
		unc = firstDirty
	}
	p := &cleanPlan{gen: l.segGen.Load(), firstDirty: firstDirty, uncleanable: unc,
		hist: l.cleanHist, nowMs: nowMs, lastOfProducer: map[int64]twinlog.Offset{}, tombstoneFrom: twinlog.NoOffset}
	for i, s := range l.segs[:len(l.segs)-1] {
		p.segs = append(p.segs, segRef{s: s, info: infos[i]})
	}
	p.dirtyPos, _ = l.segs[l.segmentFor(firstDirty)].lookup(firstDirty)
	for _, pr := range l.producers.Producers() {
		if n := len(pr.Batches); n > 0 {
			p.lastOfProducer[pr.ID] = pr.Batches[n-1].LastOffset
		}
	}
	return p, nil
}

// segInfos describes every segment. l.mu is held.
func (l *Log) segInfos() []segInfo {
	out := make([]segInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = segInfo{base: s.base, next: s.next, size: s.size, maxTs: s.maxTs}
	}
	return out
}

// Paths of a group being swapped in (doc.go "Compaction").
const (
	cleanedSuffix = ".log.cleaned"
	swapSuffix    = ".log.swap"
)

func cleanedPath(dir string, base twinlog.Offset) string {
	return filepath.Join(dir, segmentName(base)+cleanedSuffix)
}

func swapPath(dir string, base twinlog.Offset) string {
	return filepath.Join(dir, segmentName(base)+swapSuffix)
}

// removeCleaned removes an abandoned .cleaned file, unless the log is
// closed (its dir may be another log's by now); load removes leftovers.
func (l *Log) removeCleaned(path string) {
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if !closed {
		_ = l.fs.Remove(path)
	}
}

// swapCleaned replaces the segments old, consecutive in l.segs, by ns,
// whose file is the fsynced <base>.log.cleaned (doc.go "Compaction"):
//
//  1. rename .cleaned → .swap, fsync dir: the commit point; a crash
//     before it leaves the old segments (load removes .cleaned), after it
//     load finishes the swap;
//  2. remove the old segments' files, fsync dir;
//  3. rename .swap → <base>.log, write its indexes, fsync dir.
//
// An error before the commit leaves the log as it was; after it the log
// fails (its files are between two states only load resolves).
func (l *Log) swapCleaned(old []*segment, ns *segment, gen uint64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil || l.segGen.Load() != gen {
		return errCleanAborted
	}
	i := slices.Index(l.segs, old[0])
	if i < 0 || i+len(old) >= len(l.segs) || !slices.Equal(l.segs[i:i+len(old)], old) {
		panic(fmt.Sprintf("storage: cleaned segments of %s at %d are not the log's (generation unchanged)", l.dir, ns.base))
	}
	cleaned, swap := cleanedPath(l.dir, ns.base), swapPath(l.dir, ns.base)
	if err := l.fs.Rename(cleaned, swap); err != nil {
		return fmt.Errorf("rename %s: %w", cleaned, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("sync dir %s: %w", l.dir, err))
	}
	for _, s := range old {
		if err := l.removeSegmentFiles(s); err != nil {
			return l.fail(err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("sync dir %s: %w", l.dir, err))
	}
	if err := l.fs.Rename(swap, ns.logPath()); err != nil {
		return l.fail(fmt.Errorf("rename %s: %w", swap, err))
	}
	if err := ns.persistIndexes(l.fs, true); err != nil {
		return l.fail(err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("sync dir %s: %w", l.dir, err))
	}
	l.segs = slices.Replace(l.segs, i, i+len(old), ns)
	return nil
}

// finishRound records a completed round: its end and time go into the
// cleaner checkpoint.
func (l *Log) finishRound(p *cleanPlan, end twinlog.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil || l.segGen.Load() != p.gen {
		return errCleanAborted
	}
	l.tombstoneFrom = p.tombstoneFrom
	h := l.cleanHist.add(end, l.opts.Clock().UnixMilli())
	if len(h) == len(l.cleanHist) && h.firstDirty() == l.cleanHist.firstDirty() {
		return nil
	}
	l.cleanHist = h
	// Not durable is only late: a start from the older file delays
	// tombstones; the log stays usable.
	return l.writeCleanerCheckpoint()
}

// tombstonesExpired reports whether a tombstone the last round kept may
// go now. l.mu is held.
func (l *Log) tombstonesExpired(cc CompactionConfig, nowMs int64) bool {
	return l.tombstoneFrom != twinlog.NoOffset &&
		l.cleanHist.deletableBelow(nowMs, cc.DeleteRetention.Milliseconds()) > l.tombstoneFrom
}

func (l *Log) cleanerCheckpointPath() string { return filepath.Join(l.dir, CleanerCheckpointFile) }

// writeCleanerCheckpoint writes l.cleanHist. l.mu is held.
func (l *Log) writeCleanerCheckpoint() error {
	if err := vfs.WriteFileAtomic(l.fs, l.cleanerCheckpointPath(), l.cleanHist.marshal()); err != nil {
		return fmt.Errorf("write cleaner checkpoint: %w", err)
	}
	return nil
}

// truncateCleanHistory makes the cleaner checkpoint forget rounds above o,
// the LEO a truncation left: records written there again were never
// compacted, and a tombstone among them must not be timed by an old
// round. A crash between the truncation and this write leaves rounds
// above the LEO in the file, which load cuts the same way. l.mu is held.
func (l *Log) truncateCleanHistory(o twinlog.Offset) error {
	h := l.cleanHist.truncate(o)
	if len(h) == len(l.cleanHist) && h.firstDirty() == l.cleanHist.firstDirty() {
		return nil
	}
	l.cleanHist = h
	if err := l.writeCleanerCheckpoint(); err != nil {
		return l.fail(err)
	}
	return nil
}

// loadCleanHistory reads the cleaner checkpoint; a missing or damaged
// one is an empty history (everything dirty, tombstones kept longer).
func (l *Log) loadCleanHistory() {
	data, err := vfs.ReadFile(l.fs, l.cleanerCheckpointPath())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("reading the cleaner checkpoint; cleaning from the log start", "err", err)
		}
		return
	}
	h, err := parseCleanHistory(data)
	if err != nil {
		l.log.Warn("damaged cleaner checkpoint; cleaning from the log start", "err", err)
		return
	}
	l.cleanHist = h
}

// recoverSwaps resolves what a crash left of swaps (load, before the
// segments are listed): a .cleaned file was never committed and goes; a
// .swap file was, and replaces the segments its offsets cover (doc.go
// "Compaction"). It reports whether it changed the dir.
func (l *Log) recoverSwaps(names []string) (bool, error) {
	changed := false
	for _, n := range names {
		if strings.HasSuffix(n, cleanedSuffix) {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil {
				return changed, fmt.Errorf("remove %s: %w", n, err)
			}
			changed = true
		}
	}
	for _, n := range names {
		stem, ok := strings.CutSuffix(n, swapSuffix)
		if !ok {
			continue
		}
		base, ok := parseSegmentName(stem + logSuffix)
		if !ok {
			continue
		}
		if err := l.finishSwap(base, names); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// finishSwap completes the swap of <base>.log.swap: it validates it (it
// was fsynced before its rename, so a bad one is corruption), removes the
// segments whose base lies in [base, the swap's next offset) and renames
// it to <base>.log.
func (l *Log) finishSwap(base twinlog.Offset, names []string) error {
	path := swapPath(l.dir, base)
	f, err := l.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat %s: %w", path, err)
	}
	s := &segment{dir: l.dir, base: base, f: f}
	pos, reason, err := s.recover(fi.Size(), l.opts.IndexIntervalBytes, nil)
	f.Close()
	if err != nil {
		return err
	}
	if pos != fi.Size() || s.size == 0 {
		return &CorruptError{File: path, Position: pos, Reason: "cleaned segment: " + reason}
	}
	var covered []twinlog.Offset
	for _, n := range names {
		if b, ok := parseSegmentName(n); ok && b >= base && b < s.next {
			covered = append(covered, b)
		}
	}
	l.log.Warn("finishing an interrupted cleaner swap", "segment", path, "replaced_segments", len(covered), "next_offset", s.next)
	if err := l.removeSegments(covered); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", l.dir, err)
	}
	if err := l.fs.Rename(path, s.logPath()); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", l.dir, err)
	}
	return nil
}

// CleanerStatus is a log's compaction state, for choosing the log to
// clean next and for metrics.
type CleanerStatus struct {
	// FirstDirtyOffset is where the next round starts mapping;
	// FirstUncleanableOffset where it would stop.
	FirstDirtyOffset, FirstUncleanableOffset twinlog.Offset
	// CleanBytes are the non-active segments wholly below the first dirty
	// offset; DirtyBytes those overlapping the dirty range.
	CleanBytes, DirtyBytes int64
	// DirtyRatio is DirtyBytes / (CleanBytes + DirtyBytes), 0 when both
	// are 0 (Kafka's cleanable ratio).
	DirtyRatio float64
	// MaxCompactionDelay is how long past max.compaction.lag.ms the oldest
	// dirty data is (<= 0: not overdue).
	MaxCompactionDelay time.Duration
	// NeedsCleaning: DirtyRatio above min.cleanable.dirty.ratio, or dirty
	// data overdue by max.compaction.lag.ms (Kafka's rule).
	NeedsCleaning bool
	// LastClean is when the last round of this process ended (zero:
	// none), LastStats and LastErr its result.
	LastClean time.Time
	LastStats CleanStats
	LastErr   error
}

// CleanerStatus reports the log's compaction state for cc.
func (l *Log) CleanerStatus(cc CompactionConfig) CleanerStatus {
	l.mu.RLock()
	defer l.mu.RUnlock()
	st := CleanerStatus{LastClean: l.lastClean, LastStats: l.lastCleanStats, LastErr: l.lastCleanErr}
	if l.closed {
		return st
	}
	now := l.opts.Clock()
	nowMs := now.UnixMilli()
	infos := l.segInfos()
	st.FirstDirtyOffset = max(l.cleanHist.firstDirty(), l.logStart())
	st.FirstUncleanableOffset = max(firstUncleanable(infos, st.FirstDirtyOffset, l.hw, nowMs, cc.MinCompactionLag.Milliseconds()), st.FirstDirtyOffset)
	st.CleanBytes, st.DirtyBytes = dirtyBytes(infos, st.FirstDirtyOffset, st.FirstUncleanableOffset)
	if total := st.CleanBytes + st.DirtyBytes; total > 0 {
		st.DirtyRatio = float64(st.DirtyBytes) / float64(total)
	}
	if lag := cc.MaxCompactionLag; lag > 0 {
		// The oldest dirty data: the first dirty batch's first timestamp,
		// or the active segment's first append when all of it is there.
		oldest := int64(math.MaxInt64)
		if st.DirtyBytes > 0 {
			if ts, ok := l.firstTimestampAt(st.FirstDirtyOffset); ok {
				oldest = ts
			}
		} else if a := l.active(); a.size > 0 {
			oldest = a.rollBaseMilli
		}
		if oldest != math.MaxInt64 {
			st.MaxCompactionDelay = time.Duration(nowMs-oldest-lag.Milliseconds()) * time.Millisecond
		}
	}
	overdue := st.MaxCompactionDelay > 0
	st.NeedsCleaning = st.DirtyBytes > 0 && (st.DirtyRatio > cc.MinCleanableDirtyRatio || overdue) ||
		overdue && st.DirtyBytes == 0 && l.active().size > 0 ||
		l.tombstonesExpired(cc, nowMs)
	return st
}

// firstTimestampAt reads the first timestamp of the batch holding o (or
// the first after it). l.mu is held.
func (l *Log) firstTimestampAt(o twinlog.Offset) (int64, bool) {
	s := l.segs[l.segmentFor(o)]
	pos, err := s.find(o)
	if err != nil || pos >= s.size {
		return 0, false
	}
	var hdr [BatchHeaderSize]byte
	b, err := s.readHeader(pos, s.size, hdr[:])
	if err != nil {
		return 0, false
	}
	return b.FirstTimestamp(), true
}

// noteClean keeps a round's result for CleanerStatus.
func (l *Log) noteClean(st CleanStats, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastClean, l.lastCleanStats, l.lastCleanErr = l.opts.Clock(), st, err
}

// Throttle bounds the bytes per second of the cleaners sharing it
// (Kafka's Throttler for log.cleaner.io.max.bytes.per.second): every
// read or write of a cleaner waits until the bytes it has moved fit the
// rate. Safe for concurrent use; a nil *Throttle never waits.
type Throttle struct {
	mu   sync.Mutex
	rate float64   // bytes per second; <= 0 or +Inf: unbounded
	next time.Time // when the bytes admitted so far will have fit the rate
}

// NewThrottle returns a Throttle at bytesPerSecond (<= 0 or +Inf:
// unbounded).
func NewThrottle(bytesPerSecond float64) *Throttle { return &Throttle{rate: bytesPerSecond} }

// SetRate changes the rate.
func (t *Throttle) SetRate(bytesPerSecond float64) {
	t.mu.Lock()
	t.rate = bytesPerSecond
	t.mu.Unlock()
}

// Wait admits n bytes, sleeping as long as the rate asks (or until ctx
// ends).
func (t *Throttle) Wait(ctx context.Context, n int) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	if t.rate <= 0 || math.IsInf(t.rate, 1) || n <= 0 {
		t.mu.Unlock()
		return nil
	}
	now := time.Now()
	if t.next.Before(now) {
		t.next = now
	}
	t.next = t.next.Add(time.Duration(float64(n) / t.rate * float64(time.Second)))
	d := t.next.Sub(now)
	t.mu.Unlock()
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
