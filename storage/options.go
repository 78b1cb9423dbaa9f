package storage

import (
	"errors"
	"log/slog"
	"time"

	"github.com/twinlog/twinlog"
)

// Options configure a Log. Zero values take the defaults of withDefaults.
type Options struct {
	// SegmentMaxBytes rolls the active segment before a batch that would
	// take it past this size (default 1 GiB).
	SegmentMaxBytes int64
	// SegmentMaxAge rolls a non-empty active segment this long after its
	// first append (0: never).
	SegmentMaxAge time.Duration
	// IndexIntervalBytes is the minimum spacing of offset index entries
	// (default 4 KiB, SPEC §2.1).
	IndexIntervalBytes int64
	// MaxBatchBytes rejects larger batches with ErrBatchTooLarge
	// (default 1 MiB + header).
	MaxBatchBytes int
	// FlushMessages fsyncs after this many appended records (0: never).
	FlushMessages int64
	// FlushInterval fsyncs on the first append this long after the last
	// flush (0: never). A periodic caller may also use MaybeFlush.
	FlushInterval time.Duration
	// WritebackBytes starts the device write (not an fsync) of each
	// segment's appended data every this many bytes, so the page cache
	// never holds enough dirty log data for the kernel to block writers
	// (vfs.StartWriteback). Default 1 MiB; negative: never.
	WritebackBytes int64

	// ProducerIDExpiration forgets an idempotent producer this long after
	// its latest batch's max timestamp, when the next producer snapshot is
	// written (Kafka's producer.id.expiration.ms; default 1 day).
	ProducerIDExpiration time.Duration

	// Clock is the time source (default time.Now).
	Clock func() time.Time
	// Logger receives warnings about recovery and truncation.
	Logger *slog.Logger

	// CleanShutdown skips the recovery scan (the log dir had a valid
	// .twinlog-clean-shutdown file, SPEC §2.5).
	CleanShutdown bool
	// RecoveryPoint is the offset below which data is known durable (from
	// recovery-point-offset-checkpoint); recovery scans from its segment.
	RecoveryPoint twinlog.Offset
	// HighWatermark is the checkpointed HW, clamped to [logStart, LEO].
	HighWatermark twinlog.Offset
}

// Defaults.
const (
	DefaultSegmentMaxBytes      = 1 << 30
	DefaultIndexIntervalBytes   = 4 << 10
	DefaultMaxBatchBytes        = 1<<20 + BatchHeaderSize
	DefaultWritebackBytes       = 1 << 20
	DefaultProducerIDExpiration = 24 * time.Hour
)

func (o Options) withDefaults() Options {
	if o.SegmentMaxBytes <= 0 {
		o.SegmentMaxBytes = DefaultSegmentMaxBytes
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.WritebackBytes == 0 {
		o.WritebackBytes = DefaultWritebackBytes
	}
	if o.ProducerIDExpiration <= 0 {
		o.ProducerIDExpiration = DefaultProducerIDExpiration
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate rejects nonsensical options.
func (o Options) Validate() error {
	switch {
	case o.SegmentMaxBytes < 0 || o.IndexIntervalBytes < 0 || o.MaxBatchBytes < 0:
		return errors.New("storage: negative size option")
	case o.SegmentMaxBytes > 0 && o.SegmentMaxBytes > 1<<31:
		return errors.New("storage: SegmentMaxBytes above 2 GiB (index positions are uint32)")
	case o.SegmentMaxAge < 0 || o.FlushInterval < 0 || o.FlushMessages < 0:
		return errors.New("storage: negative duration or count option")
	case o.RecoveryPoint < 0 || o.HighWatermark < 0:
		return errors.New("storage: negative offset option")
	}
	return nil
}
