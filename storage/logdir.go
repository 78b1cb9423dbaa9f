package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/twinlog/twinlog"
)

// LogDir manages the partition logs of one log directory and its per-dir
// files: the HW, log-start and recovery-point checkpoints and the
// clean-shutdown file (SPEC §2.1, §2.5). It is safe for concurrent use.
type LogDir struct {
	fs   FS
	path string
	opts Options

	clean CleanShutdown

	mu   sync.Mutex
	logs map[twinlog.TopicPartition]*Log
	// offline are the partition dirs whose log failed to open. They are
	// never opened, created or deleted behind the operator's back, and
	// their checkpoint entries are carried over, so a later start still
	// knows their recovery points (a dropped one would let recovery cut
	// durable data as a torn tail).
	offline map[twinlog.TopicPartition]offlineLog

	// ckMu serialises checkpoint writes (the periodic Checkpoint and the
	// recovery-point rewrite after a truncation), each snapshot taken under
	// it, so a later write never carries older values.
	ckMu sync.Mutex
}

// ParsePartitionDir parses a "<topic>-<partition>" directory name.
func ParsePartitionDir(name string) (twinlog.TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return twinlog.TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return twinlog.TopicPartition{}, false
	}
	return twinlog.TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// OpenLogDir takes the clean-shutdown file (read and delete), reads the
// checkpoints and opens every partition dir: with CleanShutdown set when the
// file was valid, otherwise recovering from each log's recovery point. opts
// is the template for every Log (its CleanShutdown, RecoveryPoint and
// HighWatermark are set per log). A partition whose log fails to open does
// not fail the dir: it is left as it is on disk and listed by Offline.
func OpenLogDir(fsys FS, path string, opts Options) (*LogDir, error) {
	if err := fsys.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", path, err)
	}
	d := &LogDir{fs: fsys, path: path, opts: opts, logs: map[twinlog.TopicPartition]*Log{},
		offline: map[twinlog.TopicPartition]offlineLog{}}
	d.clean = TakeCleanShutdown(fsys, path)
	rps, err := ReadOffsetCheckpoint(fsys, filepath.Join(path, RecoveryPointCheckpointFile))
	if err != nil {
		return nil, err
	}
	hws, err := ReadOffsetCheckpoint(fsys, filepath.Join(path, HighWatermarkCheckpointFile))
	if err != nil {
		return nil, err
	}
	// Read only to carry offline partitions' entries over; nothing else
	// needs it at start, so a bad file costs those entries, not the dir.
	lss, _ := ReadOffsetCheckpoint(fsys, filepath.Join(path, LogStartCheckpointFile))
	names, err := fsys.List(path)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", path, err)
	}
	for _, n := range names {
		tp, ok := ParsePartitionDir(n)
		if !ok {
			continue
		}
		if fi, err := fsys.Stat(filepath.Join(path, n)); err != nil || !fi.IsDir() {
			continue
		}
		o := opts
		o.CleanShutdown = d.clean.Found && d.clean.Err == nil
		o.RecoveryPoint = rps[tp]
		o.HighWatermark = hws[tp]
		l, err := Open(fsys, filepath.Join(path, n), o)
		if err == nil {
			// A damaged partition.metadata must not read as "another topic
			// id", which deletes the dir (SPEC §2.1): the partition is offline.
			if _, _, err = l.ReadPartitionMetadata(); err != nil {
				l.Close()
			}
		}
		if err != nil {
			// One bad partition takes only itself offline (Kafka takes the
			// whole dir; the metadata here does not place replicas in
			// dirs, so a dir offline would stop all of the broker's).
			ls, hasLS := lss[tp]
			d.offline[tp] = offlineLog{err: fmt.Errorf("%w: open log %v: %v", ErrLogOffline, tp, err),
				rp: rps[tp], hw: hws[tp], ls: ls, hasLS: hasLS}
			continue
		}
		l.onRecoveryPointLowered = d.checkpointRecoveryPoints
		d.logs[tp] = l
	}
	return d, nil
}

// offlineLog is a partition whose log failed to open, with the checkpoint
// entries it had.
type offlineLog struct {
	err        error // wraps ErrLogOffline and the cause
	rp, hw, ls twinlog.Offset
	hasLS      bool
}

// Path is the log dir path.
func (d *LogDir) Path() string { return d.path }

// Offline returns the partitions whose log failed to open, each with an
// error that wraps ErrLogOffline and the cause (naming the file).
func (d *LogDir) Offline() map[twinlog.TopicPartition]error {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[twinlog.TopicPartition]error, len(d.offline))
	for tp, o := range d.offline {
		out[tp] = o.err
	}
	return out
}

// CleanShutdown is what OpenLogDir found in the clean-shutdown file; feed
// the values of all dirs to PreviousBrokerEpoch.
func (d *LogDir) CleanShutdown() CleanShutdown { return d.clean }

// Get returns the log of tp, if open.
func (d *LogDir) Get(tp twinlog.TopicPartition) (*Log, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.logs[tp]
	return l, ok
}

// Logs returns a copy of the open logs.
func (d *LogDir) Logs() map[twinlog.TopicPartition]*Log {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[twinlog.TopicPartition]*Log, len(d.logs))
	for tp, l := range d.logs {
		out[tp] = l
	}
	return out
}

// GetOrCreate returns the log of tp, creating an empty one if needed.
func (d *LogDir) GetOrCreate(tp twinlog.TopicPartition) (*Log, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.logs[tp]; ok {
		return l, nil
	}
	if off, ok := d.offline[tp]; ok {
		// An empty log in its place would look like a replica that lost
		// everything and let it catch up over the records still on disk.
		return nil, off.err
	}
	o := d.opts
	o.CleanShutdown, o.RecoveryPoint, o.HighWatermark = false, 0, 0
	l, err := Open(d.fs, filepath.Join(d.path, tp.String()), o)
	if err != nil {
		return nil, err
	}
	l.onRecoveryPointLowered = d.checkpointRecoveryPoints
	d.logs[tp] = l
	return l, nil
}

// Delete closes and deletes the log of tp (a replica leaving R, or a
// directory holding another topic id: SPEC §2.1).
func (d *LogDir) Delete(tp twinlog.TopicPartition) error {
	d.mu.Lock()
	l, ok := d.logs[tp]
	delete(d.logs, tp)
	delete(d.offline, tp) // the replica left: its damaged copy goes too
	d.mu.Unlock()
	if !ok {
		err := d.fs.RemoveAll(filepath.Join(d.path, tp.String()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return d.fs.SyncDir(d.path)
	}
	return l.Delete()
}

// Checkpoint writes the HW, log-start and recovery-point checkpoints of
// every open log (the broker calls it every 5 s and at shutdown, SPEC §2.5).
func (d *LogDir) Checkpoint() error {
	d.ckMu.Lock()
	defer d.ckMu.Unlock()
	logs := d.Logs()
	hw := make(map[twinlog.TopicPartition]twinlog.Offset, len(logs))
	ls := make(map[twinlog.TopicPartition]twinlog.Offset, len(logs))
	rp := make(map[twinlog.TopicPartition]twinlog.Offset, len(logs))
	for tp, l := range logs {
		l.mu.RLock()
		if !l.closed {
			hw[tp], ls[tp], rp[tp] = l.hw, l.logStart(), l.recoveryPoint
		}
		l.mu.RUnlock()
	}
	d.mu.Lock()
	for tp, o := range d.offline {
		hw[tp], rp[tp] = o.hw, o.rp
		if o.hasLS {
			ls[tp] = o.ls
		}
	}
	d.mu.Unlock()
	for _, c := range []struct {
		name string
		m    map[twinlog.TopicPartition]twinlog.Offset
	}{{HighWatermarkCheckpointFile, hw}, {LogStartCheckpointFile, ls}, {RecoveryPointCheckpointFile, rp}} {
		if err := WriteOffsetCheckpoint(d.fs, filepath.Join(d.path, c.name), c.m); err != nil {
			return err
		}
	}
	return nil
}

// checkpointRecoveryPoints rewrites the recovery-point checkpoint of every
// open log. A Log calls it after a truncation lowered its recovery point,
// before the truncation returns (see Log.persistLoweredRecoveryPoint).
func (d *LogDir) checkpointRecoveryPoints() error {
	d.ckMu.Lock()
	defer d.ckMu.Unlock()
	logs := d.Logs()
	rp := make(map[twinlog.TopicPartition]twinlog.Offset, len(logs))
	for tp, l := range logs {
		l.mu.RLock()
		if !l.closed {
			rp[tp] = l.recoveryPoint
		}
		l.mu.RUnlock()
	}
	d.mu.Lock()
	for tp, o := range d.offline {
		rp[tp] = o.rp
	}
	d.mu.Unlock()
	return WriteOffsetCheckpoint(d.fs, filepath.Join(d.path, RecoveryPointCheckpointFile), rp)
}

// Close flushes and closes every log, writes the checkpoints and then, only
// if all of that succeeded, the clean-shutdown file holding brokerEpoch
// (SPEC §2.5).
func (d *LogDir) Close(brokerEpoch twinlog.BrokerEpoch) error {
	var errs []error
	logs := d.Logs()
	for _, l := range logs {
		l.flushMu.Lock()
		err := l.flushLocked(true)
		l.flushMu.Unlock()
		errs = append(errs, err)
	}
	errs = append(errs, d.Checkpoint())
	for _, l := range logs {
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return WriteCleanShutdown(d.fs, d.path, brokerEpoch)
}
