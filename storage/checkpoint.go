package storage

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/vfs"
)

// Per-log-dir file names (SPEC §2.1, §2.5).
const (
	HighWatermarkCheckpointFile  = "replication-offset-checkpoint"
	LogStartCheckpointFile       = "log-start-offset-checkpoint"
	RecoveryPointCheckpointFile  = "recovery-point-offset-checkpoint"
	CleanShutdownFile            = ".twinlog-clean-shutdown"
	PartitionMetadataFile        = "partition.metadata"
	NoAlignedEpoch               = twinlog.NoEpoch
	partitionMetadataVersionLine = "version: 0"
)

// MarshalOffsetCheckpoint renders Kafka's offset checkpoint format: a
// version line "0", a count line, then "topic partition offset" lines,
// sorted by topic and partition so the bytes are deterministic.
func MarshalOffsetCheckpoint(offsets map[twinlog.TopicPartition]twinlog.Offset) []byte {
	tps := slices.SortedFunc(maps.Keys(offsets), func(a, b twinlog.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, offsets[tp])
	}
	return b.Bytes()
}

// ParseOffsetCheckpoint parses the format of MarshalOffsetCheckpoint. An
// empty input is an empty map. Errors wrap ErrBadCheckpoint.
func ParseOffsetCheckpoint(data []byte) (map[twinlog.TopicPartition]twinlog.Offset, error) {
	out := map[twinlog.TopicPartition]twinlog.Offset{}
	if len(bytes.TrimSpace(data)) == 0 {
		return out, nil
	}
	lines := strings.Split(string(data), "\n")
	if n := len(lines); lines[n-1] == "" {
		lines = lines[:n-1]
	}
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrBadCheckpoint, line+1, fmt.Sprintf(format, args...))
	}
	if len(lines) < 2 {
		return nil, bad(len(lines), "missing count line")
	}
	if f := strings.Fields(lines[0]); len(f) != 1 || f[0] != "0" {
		return nil, bad(0, "unsupported version %q", lines[0])
	}
	f := strings.Fields(lines[1])
	count, err := 0, error(nil)
	if len(f) == 1 {
		count, err = strconv.Atoi(f[0])
	}
	if len(f) != 1 || err != nil || count != len(lines)-2 {
		return nil, bad(1, "count %q does not match %d entry lines", lines[1], len(lines)-2)
	}
	for i, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, bad(i+2, "want \"topic partition offset\", got %q", l)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 || o < 0 {
			return nil, bad(i+2, "want \"topic partition offset\", got %q", l)
		}
		tp := twinlog.TopicPartition{Topic: f[0], Partition: int32(p)}
		if _, dup := out[tp]; dup {
			return nil, bad(i+2, "duplicate partition %v", tp)
		}
		out[tp] = twinlog.Offset(o)
	}
	return out, nil
}

// WriteOffsetCheckpoint atomically replaces path (tmp, fsync, rename, fsync
// dir).
func WriteOffsetCheckpoint(fsys FS, path string, offsets map[twinlog.TopicPartition]twinlog.Offset) error {
	return vfs.WriteFileAtomic(fsys, path, MarshalOffsetCheckpoint(offsets))
}

// ReadOffsetCheckpoint reads path; a missing file is an empty map.
func ReadOffsetCheckpoint(fsys FS, path string) (map[twinlog.TopicPartition]twinlog.Offset, error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[twinlog.TopicPartition]twinlog.Offset{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	m, err := ParseOffsetCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// CleanShutdown is the state of one log dir's .twinlog-clean-shutdown file
// as read at start-up.
type CleanShutdown struct {
	Found       bool
	BrokerEpoch twinlog.BrokerEpoch
	// Err is a read or parse error, or the dir being offline.
	Err error
}

type cleanShutdownJSON struct {
	Version     *int   `json:"version"`
	BrokerEpoch *int64 `json:"brokerEpoch"`
}

// MarshalCleanShutdown renders {"version":0,"brokerEpoch":N}.
func MarshalCleanShutdown(e twinlog.BrokerEpoch) []byte {
	return fmt.Appendf(nil, `{"version":0,"brokerEpoch":%d}`, e)
}

// ParseCleanShutdown parses the clean-shutdown file; version must be 0 and
// brokerEpoch present.
func ParseCleanShutdown(data []byte) (twinlog.BrokerEpoch, error) {
	var v cleanShutdownJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return -1, fmt.Errorf("%w: clean shutdown file: %v", ErrBadCheckpoint, err)
	}
	if dec.More() {
		return -1, fmt.Errorf("%w: clean shutdown file: trailing data", ErrBadCheckpoint)
	}
	if v.Version == nil || *v.Version != 0 || v.BrokerEpoch == nil || *v.BrokerEpoch < 0 {
		return -1, fmt.Errorf("%w: clean shutdown file: want version 0 and a broker epoch, got %q", ErrBadCheckpoint, data)
	}
	return twinlog.BrokerEpoch(*v.BrokerEpoch), nil
}

// WriteCleanShutdown writes the clean-shutdown file of a log dir (durably).
// Call it only after every log of the dir is closed.
func WriteCleanShutdown(fsys FS, logDir string, e twinlog.BrokerEpoch) error {
	return vfs.WriteFileAtomic(fsys, filepath.Join(logDir, CleanShutdownFile), MarshalCleanShutdown(e))
}

// TakeCleanShutdown reads and deletes (durably) the clean-shutdown file of
// a log dir. A deletion failure is reported in Err: the next start must not
// believe a shutdown clean that was not.
func TakeCleanShutdown(fsys FS, logDir string) CleanShutdown {
	p := filepath.Join(logDir, CleanShutdownFile)
	data, err := vfs.ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return CleanShutdown{BrokerEpoch: -1}
	}
	if err != nil {
		return CleanShutdown{BrokerEpoch: -1, Err: fmt.Errorf("read %s: %w", p, err)}
	}
	cs := CleanShutdown{Found: true}
	cs.BrokerEpoch, cs.Err = ParseCleanShutdown(data)
	if err := fsys.Remove(p); err != nil {
		return CleanShutdown{Found: true, BrokerEpoch: -1, Err: fmt.Errorf("remove %s: %w", p, err)}
	}
	if err := fsys.SyncDir(logDir); err != nil {
		return CleanShutdown{Found: true, BrokerEpoch: -1, Err: fmt.Errorf("sync dir %s: %w", logDir, err)}
	}
	return cs
}

// PreviousBrokerEpoch is the epoch to send in RegisterBroker (SPEC §2.5):
// the shared epoch if every dir had a readable clean-shutdown file and they
// agree, else -1. No dirs at all also gives -1.
func PreviousBrokerEpoch(dirs []CleanShutdown) twinlog.BrokerEpoch {
	if len(dirs) == 0 {
		return -1
	}
	e := dirs[0].BrokerEpoch
	for _, d := range dirs {
		if !d.Found || d.Err != nil || d.BrokerEpoch != e || d.BrokerEpoch < 0 {
			return -1
		}
	}
	return e
}

// PartitionMetadata is partition.metadata (SPEC §2.1).
type PartitionMetadata struct {
	TopicID string
	// AlignedEpoch is the LE the partition was aligned in (SPEC §6.6), or
	// NoAlignedEpoch.
	AlignedEpoch twinlog.Epoch
}

// MarshalPartitionMetadata renders the three lines of SPEC §2.1.
func MarshalPartitionMetadata(md PartitionMetadata) []byte {
	return fmt.Appendf(nil, "%s\ntopic_id: %s\naligned_epoch: %d\n", partitionMetadataVersionLine, md.TopicID, md.AlignedEpoch)
}

// ParsePartitionMetadata parses partition.metadata.
func ParsePartitionMetadata(data []byte) (PartitionMetadata, error) {
	md := PartitionMetadata{AlignedEpoch: NoAlignedEpoch}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 3 || strings.TrimSpace(lines[0]) != partitionMetadataVersionLine {
		return md, fmt.Errorf("%w: partition.metadata: %q", ErrBadCheckpoint, data)
	}
	id, ok1 := strings.CutPrefix(lines[1], "topic_id: ")
	ae, ok2 := strings.CutPrefix(lines[2], "aligned_epoch: ")
	e, err := strconv.ParseInt(strings.TrimSpace(ae), 10, 32)
	id = strings.TrimSpace(id)
	if !ok1 || !ok2 || err != nil || e < -1 || id == "" {
		return md, fmt.Errorf("%w: partition.metadata: %q", ErrBadCheckpoint, data)
	}
	md.TopicID, md.AlignedEpoch = id, twinlog.Epoch(e)
	return md, nil
}

// ReadPartitionMetadata reads partition.metadata of the log; ok is false if
// there is none.
func (l *Log) ReadPartitionMetadata() (md PartitionMetadata, ok bool, err error) {
	p := filepath.Join(l.dir, PartitionMetadataFile)
	data, err := vfs.ReadFile(l.fs, p)
	if errors.Is(err, fs.ErrNotExist) {
		return PartitionMetadata{AlignedEpoch: NoAlignedEpoch}, false, nil
	}
	if err != nil {
		return md, false, fmt.Errorf("read %s: %w", p, err)
	}
	md, err = ParsePartitionMetadata(data)
	if err != nil {
		return md, false, fmt.Errorf("%s: %w", p, err)
	}
	return md, true, nil
}

// WritePartitionMetadata atomically replaces partition.metadata.
func (l *Log) WritePartitionMetadata(md PartitionMetadata) error {
	return vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, PartitionMetadataFile), MarshalPartitionMetadata(md))
}
