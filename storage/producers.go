package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/producer"
	"github.com/twinlog/twinlog/storage/vfs"
)

// A log keeps its idempotent producers' state (storage/producer) as Kafka's
// UnifiedLog keeps its ProducerStateManager: every appended batch is
// applied to it, whoever appends (leader, follower, mirror), so any replica
// that becomes leader answers a producer's retries as the old leader would.
// It is a function of the log's batches, plus expiry: a truncation rebuilds
// it from the latest snapshot at or below the new end and the batches
// after it, and Open does the same after recovery.
//
// Snapshots are <offset>.snapshot files holding the state as of offset
// (producer.MarshalSnapshot): one at every roll (the new segment's base)
// and one at Close. A snapshot above the LEO describes batches the log no
// longer has and is deleted before the truncation that cut them becomes
// durable (the same directory fsync), so no crash can pair a snapshot with
// a log it was not taken from. A damaged snapshot is deleted and the state
// rebuilt from an older one or from the log start.

const snapshotSuffix = ".snapshot"

func snapshotPath(dir string, o twinlog.Offset) string {
	return filepath.Join(dir, segmentName(o)+snapshotSuffix)
}

// parseSnapshotName returns the offset of "<20 digits>.snapshot".
func parseSnapshotName(name string) (twinlog.Offset, bool) {
	return parseOffsetName(name, snapshotSuffix)
}

// snapshotOffsets lists the snapshot files, ascending.
func (l *Log) snapshotOffsets() ([]twinlog.Offset, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.dir, err)
	}
	var out []twinlog.Offset
	for _, n := range names {
		if o, ok := parseSnapshotName(n); ok {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out, nil
}

// removeSnapshots removes the snapshot files whose offset drop says; the
// caller syncs the dir.
func (l *Log) removeSnapshots(drop func(twinlog.Offset) bool) error {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	for _, o := range offs {
		if drop(o) {
			if err := l.fs.Remove(snapshotPath(l.dir, o)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", snapshotPath(l.dir, o), err)
			}
		}
	}
	return nil
}

// loadProducers rebuilds the producer state for the log as it is: the
// latest readable snapshot at or below the LEO, then every batch from
// there (or from the log start) to the LEO. Snapshots above the LEO and
// damaged ones are removed (removed says so); the caller syncs the dir
// before the log can grow past them again. l.mu is held (or the log is not
// shared yet).
func (l *Log) loadProducers() (removed bool, err error) {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return false, err
	}
	leo := l.leo()
	state, from := producer.New(), l.logStart()
	for i := len(offs) - 1; i >= 0; i-- {
		o, path := offs[i], snapshotPath(l.dir, offs[i])
		if o > leo {
			if err := l.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, fmt.Errorf("remove %s: %w", path, err)
			}
			removed = true
			continue
		}
		data, err := vfs.ReadFile(l.fs, path)
		if err != nil {
			return removed, fmt.Errorf("read %s: %w", path, err)
		}
		s, err := producer.UnmarshalSnapshot(data)
		if err == nil && s.LastOffset() >= o {
			err = fmt.Errorf("%w: a batch at offset %d", producer.ErrCorruptSnapshot, s.LastOffset())
		}
		if err != nil {
			l.log.Warn("removing a damaged producer snapshot", "file", path, "err", err)
			if err := l.fs.Remove(path); err != nil {
				return removed, fmt.Errorf("remove %s: %w", path, err)
			}
			removed = true
			continue
		}
		state, from = s, max(o, l.logStart())
		break
	}
	l.producers = state
	return removed, l.replayProducers(from)
}

// replayProducers applies the batches from offset from to the LEO, reading
// only their headers.
func (l *Log) replayProducers(from twinlog.Offset) error {
	if from >= l.leo() {
		return nil
	}
	var hdr [BatchHeaderSize]byte
	for i := l.segmentFor(from); i < len(l.segs); i++ {
		s := l.segs[i]
		var pos int64
		if s.base < from {
			var err error
			if pos, err = s.find(from); err != nil {
				return err
			}
		}
		for pos < s.size {
			b, err := s.readHeader(pos, s.size, hdr[:])
			if err != nil {
				return withFile(corruptf(0, "bad batch header: %v", err), s.logPath(), pos)
			}
			l.applyProducer(b)
			pos += batchSize(b)
		}
	}
	return nil
}

// applyProducer applies one appended batch to the producer state. The
// sequences span the batch's offsets (BatchView.LastSequence), so a batch
// the cleaner emptied or thinned rebuilds the state it had.
func (l *Log) applyProducer(b BatchView) {
	if b.ProducerID() == NoProducerID {
		return
	}
	l.producers.Apply(producer.Batch{
		ProducerID: b.ProducerID(), Epoch: b.ProducerEpoch(),
		FirstSeq: b.BaseSequence(), LastSeq: b.LastSequence(),
		FirstOffset: b.BaseOffset(), LastOffset: b.LastOffset(), MaxTimestamp: b.MaxTimestamp(),
	})
}

// writeProducerSnapshot writes the state as of offset at (no batch at or
// above it is applied), after expiring silent producers. The file is
// fsynced; the caller syncs the dir.
func (l *Log) writeProducerSnapshot(at twinlog.Offset) error {
	l.producers.Expire(l.opts.Clock().UnixMilli(), l.opts.ProducerIDExpiration.Milliseconds())
	return vfs.WriteFileRenamed(l.fs, snapshotPath(l.dir, at), l.producers.MarshalSnapshot())
}

// CheckProducers decides a leader's append of v for its idempotent
// producers (producer.State.CheckBatches): Append, or why not and at
// which batch. The caller serialises it with its appends, so the answer
// holds for the append that follows.
func (l *Log) CheckProducers(v Validated) (producer.Verdict, int) {
	bs := v.Batches()
	seqs := make([]producer.Seqs, len(bs))
	for i, b := range bs {
		seqs[i] = producer.Seqs{ProducerID: b.ProducerID(), Epoch: b.ProducerEpoch(),
			FirstSeq: b.BaseSequence(), LastSeq: b.LastSequence()}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.CheckBatches(seqs)
}

// Producers lists the log's idempotent producers.
func (l *Log) Producers() []producer.Producer {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.Producers()
}
