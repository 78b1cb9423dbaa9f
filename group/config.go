package group

import (
	"fmt"
	"math"
)

// Kafka's defaults for the classic group protocol (GroupCoordinatorConfig).
const (
	// DefaultInitialRebalanceDelayMs is group.initial.rebalance.delay.ms.
	DefaultInitialRebalanceDelayMs = 3000
	// DefaultMinSessionTimeoutMs is group.min.session.timeout.ms.
	DefaultMinSessionTimeoutMs = 6000
	// DefaultMaxSessionTimeoutMs is group.max.session.timeout.ms.
	DefaultMaxSessionTimeoutMs = 1_800_000
	// DefaultMaxSize is group.max.size (unbounded).
	DefaultMaxSize = math.MaxInt32
	// DefaultNewMemberJoinTimeoutMs bounds how long a new member's
	// JoinGroup may stay parked (Kafka's classicGroupNewMemberJoinTimeoutMs).
	DefaultNewMemberJoinTimeoutMs = 5 * 60 * 1000
	// DefaultOffsetsRetentionMs is offsets.retention.minutes (7 days).
	DefaultOffsetsRetentionMs = 7 * 24 * 60 * 60 * 1000
	// DefaultOffsetsRetentionCheckIntervalMs is
	// offsets.retention.check.interval.ms.
	DefaultOffsetsRetentionCheckIntervalMs = 600_000
	// DefaultOffsetMetadataMaxBytes is offset.metadata.max.bytes.
	DefaultOffsetMetadataMaxBytes = 4096
)

// NoInitialRebalanceDelay sets Config.InitialRebalanceDelayMs to zero
// (a zero field means Kafka's default).
const NoInitialRebalanceDelay = -1

// Config is the coordinator's configuration; a zero field takes Kafka's
// default. Times are milliseconds: the package has no clock.
type Config struct {
	// InitialRebalanceDelayMs is how long a new (Empty) group waits for
	// more members before its first rebalance completes, extended by
	// each new member up to the rebalance timeout. NoInitialRebalanceDelay
	// for none.
	InitialRebalanceDelayMs int64
	// MinSessionTimeoutMs and MaxSessionTimeoutMs bound the session
	// timeout a member asks for (INVALID_SESSION_TIMEOUT outside).
	MinSessionTimeoutMs, MaxSessionTimeoutMs int64
	// MaxSize is group.max.size: at most this many members
	// (GROUP_MAX_SIZE_REACHED beyond).
	MaxSize int
	// NewMemberJoinTimeoutMs expires a new member whose JoinGroup stays
	// parked this long without the rebalance completing.
	NewMemberJoinTimeoutMs int64
	// OffsetsRetentionMs: committed offsets of an Empty group expire this
	// long after the group became Empty (of a group without a protocol
	// type, after their commit).
	OffsetsRetentionMs int64
	// OffsetsRetentionCheckIntervalMs is how often Tick looks for expired
	// offsets and empty groups to delete.
	OffsetsRetentionCheckIntervalMs int64
	// OffsetMetadataMaxBytes bounds a committed offset's metadata
	// (OFFSET_METADATA_TOO_LARGE beyond).
	OffsetMetadataMaxBytes int
}

func (c Config) withDefaults() Config {
	switch {
	case c.InitialRebalanceDelayMs == 0:
		c.InitialRebalanceDelayMs = DefaultInitialRebalanceDelayMs
	case c.InitialRebalanceDelayMs == NoInitialRebalanceDelay:
		c.InitialRebalanceDelayMs = 0
	}
	if c.MinSessionTimeoutMs == 0 {
		c.MinSessionTimeoutMs = DefaultMinSessionTimeoutMs
	}
	if c.MaxSessionTimeoutMs == 0 {
		c.MaxSessionTimeoutMs = DefaultMaxSessionTimeoutMs
	}
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.NewMemberJoinTimeoutMs == 0 {
		c.NewMemberJoinTimeoutMs = DefaultNewMemberJoinTimeoutMs
	}
	if c.OffsetsRetentionMs == 0 {
		c.OffsetsRetentionMs = DefaultOffsetsRetentionMs
	}
	if c.OffsetsRetentionCheckIntervalMs == 0 {
		c.OffsetsRetentionCheckIntervalMs = DefaultOffsetsRetentionCheckIntervalMs
	}
	if c.OffsetMetadataMaxBytes == 0 {
		c.OffsetMetadataMaxBytes = DefaultOffsetMetadataMaxBytes
	}
	return c
}

// Validate reports a malformed configuration (after defaults).
func (c Config) Validate() error {
	d := c.withDefaults()
	switch {
	case c.InitialRebalanceDelayMs < NoInitialRebalanceDelay:
		return fmt.Errorf("%w: initial rebalance delay %d", ErrInvalidConfig, c.InitialRebalanceDelayMs)
	case d.MinSessionTimeoutMs < 1 || d.MaxSessionTimeoutMs < d.MinSessionTimeoutMs:
		return fmt.Errorf("%w: session timeout bounds [%d, %d]", ErrInvalidConfig, d.MinSessionTimeoutMs, d.MaxSessionTimeoutMs)
	case d.MaxSessionTimeoutMs > math.MaxInt32:
		return fmt.Errorf("%w: max session timeout %d", ErrInvalidConfig, d.MaxSessionTimeoutMs)
	case d.MaxSize < 1:
		return fmt.Errorf("%w: max size %d", ErrInvalidConfig, d.MaxSize)
	case d.NewMemberJoinTimeoutMs < 1:
		return fmt.Errorf("%w: new member join timeout %d", ErrInvalidConfig, d.NewMemberJoinTimeoutMs)
	case d.OffsetsRetentionMs < 1:
		return fmt.Errorf("%w: offsets retention %d", ErrInvalidConfig, d.OffsetsRetentionMs)
	case d.OffsetsRetentionCheckIntervalMs < 1:
		return fmt.Errorf("%w: offsets retention check interval %d", ErrInvalidConfig, d.OffsetsRetentionCheckIntervalMs)
	case d.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("%w: offset metadata max bytes %d", ErrInvalidConfig, d.OffsetMetadataMaxBytes)
	}
	return nil
}
