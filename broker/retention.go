package broker

import (
	"context"
	"time"

	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/storage"
)

// Log retention (Kafka's cleanup.policy=delete): retentionLoop is one
// goroutine of the run that, every log.retention.check.interval.ms, deletes
// from each hosted log the whole segments that retention.ms (age of a
// segment's newest record) or retention.bytes (the log's size) no longer
// keep. Leaders and followers trim their own logs alike, as in Kafka, each
// bounded by its own HW: nothing uncommitted goes, and a replica that is
// behind deletes less. The replica machine then takes the new log start
// (Replica.AdvanceLogStart): a leader answers fetches below it with
// OFFSET_OUT_OF_RANGE and its log start, so a lagging follower restarts
// its log there (SPEC §4.4), a mirror destination likewise (§6.3), and a
// Kafka consumer resets by its auto.offset.reset.
//
// Internal topics are never trimmed by age or size: __consumer_offsets is
// compacted, and __mirror_state is read from its start to rebuild every
// mirror's state, so deleting its old records would lose LMLEs. Topics
// whose cleanup.policy is only compact are left to the cleaner.

// RetentionObserver is an optional Observer extension for log retention;
// metrics.Broker implements it (twinlog_log_retention_*).
type RetentionObserver interface {
	// ObserveRetention reports segments and bytes deleted from one log.
	ObserveRetention(segments int, bytes int64)
}

// retentionOf returns topic's retention: its retention.ms and
// retention.bytes when set on the topic, else this broker's log.retention.ms
// and log.retention.bytes; false when nothing of it is deleted by age or
// size.
func (b *Broker) retentionOf(topic string) (storage.Retention, bool) {
	if metadata.IsReservedTopicName(topic) {
		return storage.Retention{}, false
	}
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	if !metadata.HasDeletePolicy(b.image.TopicConfig(topic, metadata.KeyCleanupPolicy)) {
		return storage.Retention{}, false
	}
	r := storage.Retention{Bytes: b.cfg.LogRetentionBytes, Age: b.cfg.LogRetention}
	configs := b.image.Topic(topic).GetConfigs()
	// Kafka's 0 keeps nothing (every closed segment goes); storage's zero
	// is no bound, so 0 becomes the smallest bound.
	if v, ok := configs[metadata.KeyRetentionMs]; ok {
		r.Age = time.Duration(metadata.ConfigInt(v, -1)) * time.Millisecond
		if r.Age == 0 {
			r.Age = time.Millisecond
		}
	}
	if v, ok := configs[metadata.KeyRetentionBytes]; ok {
		r.Bytes = metadata.ConfigInt(v, -1)
		if r.Bytes == 0 {
			r.Bytes = 1
		}
	}
	return r, r.Age > 0 || r.Bytes > 0
}

// retentionLoop applies retention until ctx ends (see above).
func (b *Broker) retentionLoop(ctx context.Context) {
	obs, _ := b.obs.(RetentionObserver) // nil: none
	for sleep(ctx, b.cfg.LogRetentionCheckInterval) {
		for _, p := range b.partitions() {
			if ctx.Err() != nil {
				return
			}
			r, ok := b.retentionOf(p.tp.Topic)
			if !ok {
				continue
			}
			if n, bytes := p.applyRetention(r); n > 0 && obs != nil {
				obs.ObserveRetention(n, bytes)
			}
		}
	}
}

// applyRetention deletes what r no longer keeps of p's log, below the
// machine's HW, and moves the machine's log start with it. It holds p.mu
// throughout, so the HW it bounds by is the machine's when the log start
// moves. A storage failure takes the partition offline like any other.
func (p *partition) applyRetention(r storage.Retention) (segments int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.usableLocked() != nil {
		return 0, 0
	}
	r.Below = p.r.HighWatermark()
	n, bytes, err := p.log.DeleteRetained(r)
	if err != nil {
		p.failLocked(err)
		return 0, 0
	}
	if n > 0 {
		p.r.AdvanceLogStart(p.log.LogStartOffset())
		p.processReadyLocked()
		p.b.notifyChange() // the log start moved (PartitionStatus, ListOffsets)
	}
	return n, bytes
}
