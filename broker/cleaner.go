package broker

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/internal/configdef"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/storage"
)

// The log cleaner (cleanup.policy=compact, storage/doc.go "Compaction"):
// cleanerLoop is one goroutine of the run that, every log.cleaner.backoff.ms
// while nothing is due, picks the compacted logs due for a round (their
// dirty ratio above min.cleanable.dirty.ratio, or dirty data older than
// max.compaction.lag.ms; the most overdue, then the filthiest first) and
// cleans up to log.cleaner.threads of them at once, each with its own
// storage.Cleaner (its share of log.cleaner.dedupe.buffer.size), all under
// one storage.Throttle (log.cleaner.io.max.bytes.per.second). Leaders and
// followers clean their own logs alike; the log's locks keep a round out
// of the way of appends, reads, truncations and Close, and the run's end
// stops a round at its next batch. A log whose round fails is left alone
// until the broker restarts (Kafka's uncleanable partitions).

// CleanerObserver is an optional Observer extension for the log cleaner;
// metrics.Broker implements it (twinlog_log_cleaner_*).
type CleanerObserver interface {
	// ObserveCleanRound reports one round of a log.
	ObserveCleanRound(CleanRound)
	// ObserveCleanerState reports, after each look over the compacted
	// logs, the largest dirty ratio and compaction delay among them and
	// how many are uncleanable.
	ObserveCleanerState(maxDirtyRatio float64, maxCompactionDelay time.Duration, uncleanable int)
}

// CleanRound is one round of the log cleaner as metrics see it
// (storage.CleanStats).
type CleanRound struct {
	// Result is "cleaned" (segments swapped in), "unchanged" (nothing
	// to rewrite), "aborted" (a truncation, retention, Close or the run's
	// end stopped it) or "error".
	Result string
	// BytesRead and BytesWritten are the round's I/O; BytesBefore and
	// BytesAfter the sizes of the segments it swapped out and in.
	BytesRead, BytesWritten, BytesBefore, BytesAfter int64
	RecordsRemoved                                   int64
	Duration                                         time.Duration
}

func cleanRound(st storage.CleanStats, err error) CleanRound {
	r := CleanRound{Result: "unchanged", BytesRead: st.BytesRead, BytesWritten: st.BytesWritten,
		BytesBefore: st.BytesBefore, BytesAfter: st.BytesAfter, RecordsRemoved: st.RecordsRemoved, Duration: st.Duration}
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		r.Result = "error"
	case st.Aborted || err != nil:
		r.Result = "aborted"
	case st.SwappedGroups > 0:
		r.Result = "cleaned"
	}
	return r
}

// cleanerSettings are the broker's log.cleaner.* settings.
type cleanerSettings struct {
	threads     int
	ioRate      float64 // bytes per second
	dedupeBytes int64   // for all threads
	backoff     time.Duration
}

// cleanerSettings reads log.cleaner.*: the cluster-wide broker default an
// operator set (AlterConfigs, dynamic, read before every look over the
// logs), else Kafka's default.
func (b *Broker) cleanerSettings() cleanerSettings {
	b.metaMu.Lock()
	get := b.image.ClusterConfig
	s := cleanerSettings{
		threads:     int(metadata.ConfigInt(get(metadata.KeyLogCleanerThreads), 1)),
		dedupeBytes: metadata.ConfigInt(get(metadata.KeyLogCleanerDedupeBufferSize), storage.DefaultDedupeBufferBytes),
		backoff:     time.Duration(metadata.ConfigInt(get(metadata.KeyLogCleanerBackoffMs), 15000)) * time.Millisecond,
	}
	rate := get(metadata.KeyLogCleanerIOMaxBytesPerSecond)
	b.metaMu.Unlock()
	s.ioRate, _ = configdef.ParseFloat(rate) // 0 if unparsable: unbounded
	return s
}

// compacted reports whether topic's cleanup.policy includes compact.
func (b *Broker) compacted(topic string) bool {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return metadata.IsCompacted(b.image.TopicConfig(topic, metadata.KeyCleanupPolicy))
}

// compactionConfig is topic's compaction settings (topic, then cluster,
// then Kafka's default); false if the topic is not compacted.
func (b *Broker) compactionConfig(topic string) (storage.CompactionConfig, bool) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	get := func(key string) string { return b.image.TopicConfig(topic, key) }
	if !metadata.IsCompacted(get(metadata.KeyCleanupPolicy)) {
		return storage.CompactionConfig{}, false
	}
	def := storage.DefaultCompactionConfig
	ms := func(key string, d time.Duration) time.Duration {
		n := metadata.ConfigInt(get(key), d.Milliseconds())
		if n > configdef.MaxMillis {
			return 0 // Long.MAX: no bound
		}
		return time.Duration(n) * time.Millisecond
	}
	cc := storage.CompactionConfig{
		MinCleanableDirtyRatio: def.MinCleanableDirtyRatio,
		DeleteRetention:        ms(metadata.KeyDeleteRetentionMs, def.DeleteRetention),
		MinCompactionLag:       ms(metadata.KeyMinCompactionLagMs, 0),
		MaxCompactionLag:       ms(metadata.KeyMaxCompactionLagMs, 0),
	}
	if r, err := configdef.ParseFloat(get(metadata.KeyMinCleanableDirtyRatio)); err == nil {
		cc.MinCleanableDirtyRatio = r
	}
	return cc, true
}

// LogCleanerStatus reports the compaction state of hosted partition tp's
// log (for metrics, tools and tests); false if tp is not hosted here or its
// topic is not compacted.
func (b *Broker) LogCleanerStatus(tp twinlog.TopicPartition) (storage.CleanerStatus, bool) {
	p := b.partition(tp)
	if p == nil {
		return storage.CleanerStatus{}, false
	}
	cc, ok := b.compactionConfig(tp.Topic)
	if !ok {
		return storage.CleanerStatus{}, false
	}
	return p.log.CleanerStatus(cc), true
}

// cleanerLoop runs the log cleaner until ctx ends (see above).
func (b *Broker) cleanerLoop(ctx context.Context) {
	obs, _ := b.obs.(CleanerObserver) // nil: none
	c := &cleanerRun{b: b, obs: obs, throttle: storage.NewThrottle(0), uncleanable: map[*storage.Log]error{}}
	for {
		worked := c.look(ctx, b.cleanerSettings())
		if ctx.Err() != nil || !worked && !b.cleanerBackoff(ctx, time.Now()) {
			return
		}
	}
}

// cleanerBackoff waits log.cleaner.backoff.ms from start, reading it again
// every second so that a change applies within a second (Kafka restarts
// its cleaner threads on one); false when ctx ended.
func (b *Broker) cleanerBackoff(ctx context.Context, start time.Time) bool {
	for {
		left := b.cleanerSettings().backoff - time.Since(start)
		if left <= 0 {
			return true
		}
		if !sleep(ctx, min(left, time.Second)) {
			return false
		}
	}
}

// cleanerRun is cleanerLoop's state.
type cleanerRun struct {
	b        *Broker
	obs      CleanerObserver
	throttle *storage.Throttle
	cleaners []*storage.Cleaner
	// dedupeBytes is what the cleaners were made for.
	dedupeBytes int64
	// uncleanable are the logs whose round failed, with the error.
	uncleanable map[*storage.Log]error
}

// look cleans the due logs, the most overdue then the filthiest first, up
// to one per cleaner thread, and reports whether a round made progress
// (then the loop looks again at once, as Kafka's does).
func (c *cleanerRun) look(ctx context.Context, s cleanerSettings) bool {
	c.throttle.SetRate(s.ioRate)
	if s.threads <= 0 {
		return false
	}
	if len(c.cleaners) != s.threads || c.dedupeBytes != s.dedupeBytes {
		c.cleaners, c.dedupeBytes = make([]*storage.Cleaner, s.threads), s.dedupeBytes
		for i := range c.cleaners {
			c.cleaners[i] = storage.NewCleaner(storage.CleanerConfig{
				DedupeBufferBytes: s.dedupeBytes / int64(s.threads),
				Throttle:          c.throttle,
				Logger:            c.b.log.With("cleaner", i),
			})
		}
	}
	type candidate struct {
		p  *partition
		cc storage.CompactionConfig
		st storage.CleanerStatus
	}
	var due []candidate
	var maxRatio float64
	var maxDelay time.Duration
	hosted := map[*storage.Log]bool{}
	for _, p := range c.b.partitions() {
		hosted[p.log] = true
		cc, ok := c.b.compactionConfig(p.tp.Topic)
		if _, bad := c.uncleanable[p.log]; !ok || bad {
			continue
		}
		st := p.log.CleanerStatus(cc)
		maxRatio, maxDelay = max(maxRatio, st.DirtyRatio), max(maxDelay, st.MaxCompactionDelay)
		if st.NeedsCleaning {
			due = append(due, candidate{p, cc, st})
		}
	}
	for l := range c.uncleanable {
		if !hosted[l] {
			delete(c.uncleanable, l) // deleted, or reopened as another Log
		}
	}
	if c.obs != nil {
		c.obs.ObserveCleanerState(maxRatio, maxDelay, len(c.uncleanable))
	}
	slices.SortFunc(due, func(x, y candidate) int {
		return cmp.Or(cmp.Compare(max(y.st.MaxCompactionDelay, 0), max(x.st.MaxCompactionDelay, 0)),
			cmp.Compare(y.st.DirtyRatio, x.st.DirtyRatio))
	})
	due = due[:min(len(due), len(c.cleaners))]
	type result struct {
		st  storage.CleanStats
		err error
	}
	results := make([]result, len(due))
	var wg sync.WaitGroup
	for i, d := range due {
		wg.Go(func() {
			st, err := c.cleaners[i].Clean(ctx, d.p.log, d.cc)
			results[i] = result{st, err}
		})
	}
	wg.Wait()
	worked := false
	for i, r := range results {
		if c.obs != nil {
			c.obs.ObserveCleanRound(cleanRound(r.st, r.err))
		}
		if ctx.Err() != nil {
			return false
		}
		if r.err != nil && !errors.Is(r.err, storage.ErrClosed) {
			p := due[i].p
			c.uncleanable[p.log] = r.err
			p.logger.Error("log cleaner: round failed; the partition is not cleaned until the broker restarts",
				"err", r.err, "dirty_ratio", strconv.FormatFloat(due[i].st.DirtyRatio, 'f', 3, 64))
			continue
		}
		worked = worked || r.st.SwappedGroups > 0 || r.st.EndOffset > r.st.FirstDirtyOffset
	}
	if worked {
		c.b.notifyChange() // a log's bytes changed (Changed)
	}
	return worked
}
