package epoch

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/vfs"
)

// CheckpointFile is the name of the checkpoint inside a partition dir.
const CheckpointFile = "leader-epoch-checkpoint"

// ErrBadCheckpoint reports a malformed leader-epoch-checkpoint. SPEC §2.3
// makes it a log-dir I/O error.
var ErrBadCheckpoint = errors.New("epoch: bad leader-epoch-checkpoint")

// MarshalCheckpoint renders entries in Kafka's text format (SPEC §2.3):
//
//	0                  version
//	2                  entry count
//	0 0                epoch startOffset
//	1 2
func MarshalCheckpoint(entries []Entry) []byte {
	var b strings.Builder
	b.WriteString("0\n")
	b.WriteString(strconv.Itoa(len(entries)))
	b.WriteByte('\n')
	for _, e := range entries {
		b.WriteString(strconv.FormatInt(int64(e.Epoch), 10))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(int64(e.StartOffset), 10))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// ParseCheckpoint parses the SPEC §2.3 format. An empty input is an empty
// cache. Lines are split on whitespace; a bad version, count or entry line,
// or entries that are not strictly increasing, give ErrBadCheckpoint.
func ParseCheckpoint(data []byte) ([]Entry, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil
	}
	lines := strings.Split(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	bad := func(line int, why string) error {
		return fmt.Errorf("%w: line %d: %s", ErrBadCheckpoint, line+1, why)
	}
	if len(lines) < 2 {
		return nil, bad(len(lines), "missing count line")
	}
	if f := strings.Fields(lines[0]); len(f) != 1 || f[0] != "0" {
		return nil, bad(0, fmt.Sprintf("unsupported version %q", lines[0]))
	}
	f := strings.Fields(lines[1])
	if len(f) != 1 {
		return nil, bad(1, "bad count line")
	}
	count, err := strconv.Atoi(f[0])
	if err != nil || count < 0 {
		return nil, bad(1, fmt.Sprintf("bad count %q", lines[1]))
	}
	if count != len(lines)-2 {
		return nil, bad(1, fmt.Sprintf("count %d but %d entry lines", count, len(lines)-2))
	}
	entries := make([]Entry, 0, count)
	for i, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, bad(i+2, fmt.Sprintf("want two integers, got %q", l))
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		s, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, bad(i+2, fmt.Sprintf("want two integers, got %q", l))
		}
		entries = append(entries, Entry{Epoch: twinlog.Epoch(e), StartOffset: twinlog.Offset(s)})
	}
	if err := validate(entries); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	return entries, nil
}

// WriteCheckpoint atomically replaces path with entries (tmp, fsync, rename,
// fsync dir; SPEC §2.3).
func WriteCheckpoint(fsys vfs.FS, path string, entries []Entry) error {
	return vfs.WriteFileAtomic(fsys, path, MarshalCheckpoint(entries))
}

// ReadCheckpoint reads path. A missing file is an empty cache.
func ReadCheckpoint(fsys vfs.FS, path string) ([]Entry, error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	entries, err := ParseCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}
