package storage

import (
	"errors"
	"fmt"

	"github.com/twinlog/twinlog"
)

// Sentinel errors. Callers use errors.Is.
var (
	// ErrCorrupt: a batch failed validation (CORRUPT_MESSAGE on produce,
	// SPEC §2.2). Returned wrapped in a *CorruptError naming file and position.
	ErrCorrupt = errors.New("storage: corrupt batch")
	// ErrBatchTooLarge: a batch exceeds Options.MaxBatchBytes.
	ErrBatchTooLarge = errors.New("storage: batch too large")
	// ErrOffsetOutOfRange: a read or truncation offset outside [logStart, LEO].
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrInvalidOffset: a follower batch whose base offset is below LEO or
	// whose offsets do not increase.
	ErrInvalidOffset = errors.New("storage: invalid offset")
	// ErrEmptyAppend: an append with no batches.
	ErrEmptyAppend = errors.New("storage: empty append")
	// ErrClosed: the log was closed or deleted.
	ErrClosed = errors.New("storage: log closed")
	// ErrBadCheckpoint: a malformed per-dir checkpoint or clean-shutdown file.
	ErrBadCheckpoint = errors.New("storage: bad checkpoint")
	// ErrInvalidEpoch: an append whose epoch is below the latest cached one.
	ErrInvalidEpoch = errors.New("storage: invalid leader epoch")
	// ErrLogOffline: the partition's log failed to open (corruption below
	// its recovery point, a bad leader-epoch-checkpoint, an I/O error); it
	// stays offline, untouched, until an operator repairs or removes it and
	// restarts the broker.
	ErrLogOffline = errors.New("storage: partition log offline")
)

// CorruptError locates a corrupt batch. It unwraps to ErrCorrupt.
type CorruptError struct {
	File     string // segment file, or "" for a request buffer
	Position int64  // byte position of the batch in File or the buffer
	Reason   string
}

func (e *CorruptError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("storage: corrupt batch at position %d: %s", e.Position, e.Reason)
	}
	return fmt.Sprintf("storage: corrupt batch in %s at position %d: %s", e.File, e.Position, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corruptf(pos int64, format string, args ...any) *CorruptError {
	return &CorruptError{Position: pos, Reason: fmt.Sprintf(format, args...)}
}

// withFile names the file in a CorruptError (and shifts its position).
func withFile(err error, file string, base int64) error {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return &CorruptError{File: file, Position: base + ce.Position, Reason: ce.Reason}
	}
	return err
}

func outOfRange(o, start, end twinlog.Offset) error {
	return fmt.Errorf("%w: offset %d not in [%d, %d]", ErrOffsetOutOfRange, o, start, end)
}
