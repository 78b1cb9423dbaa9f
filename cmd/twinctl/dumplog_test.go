package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/cmd/twinctl/internal/cli"
	"github.com/twinlog/twinlog/storage"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// newPartitionDir writes a partition dir through storage.Open: two segments
// (SegmentMaxBytes forces a roll), epochs 0, 0, 3, 5, then closes it.
func newPartitionDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo-0")
	l, err := storage.Open(storage.OSFS{}, dir, storage.Options{SegmentMaxBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	ts := int64(1_700_000_000_000)
	for i, e := range []int{0, 0, 3, 5} {
		recs := []storage.Record{
			{Timestamp: ts + int64(10*i), Key: []byte("k"), Value: []byte("first")},
			{Timestamp: ts + int64(10*i) + 7, Value: []byte("second")},
		}
		if i == 1 {
			recs = recs[:1]
		}
		b, err := storage.EncodeBatch(recs, storage.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(b, twinlog.Epoch(e)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runDumpLog(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Execute(context.Background(), append([]string{"dump-log"}, args...), cli.Options{
		Stdout: &out, Stderr: &errOut, DumpLog: segmentDumper{}, HomeDir: t.TempDir(),
	})
	return out.String() + errOut.String(), code
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./cmd/twinctl -update` to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// snapshot maps every file of dir to its contents.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

func TestDumpLogGolden(t *testing.T) {
	dir := newPartitionDir(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dump_log", nil},
		{"dump_log_records", []string{"--records"}},
		{"dump_log_json", []string{"--json", "--records"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runDumpLog(t, append(tc.args, dir)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			checkGolden(t, tc.name, strings.ReplaceAll(out, dir, "DIR"))
		})
	}
}

// TestDumpLogCorruptReadOnly flips a payload byte and appends a torn tail:
// dump-log reports both, exits 1, and leaves every file as it was (it never
// runs recovery, which would truncate).
func TestDumpLogCorruptReadOnly(t *testing.T) {
	dir := newPartitionDir(t)
	segs, err := segmentFiles(dir)
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments %v, %v: want at least 2", segs, err)
	}
	first := filepath.Join(dir, segs[0])
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-2] ^= 0xff                               // inside the last batch's last record
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 1, 0) // header of a batch that never got written
	if err := os.WriteFile(first, b, 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	out, code := runDumpLog(t, dir)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	checkGolden(t, "dump_log_corrupt", strings.ReplaceAll(out, dir, "DIR"))
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("dump-log changed the directory (-before +after):\n%s", diff)
	}
}

func TestDumpLogNotADir(t *testing.T) {
	out, code := runDumpLog(t, filepath.Join(t.TempDir(), "missing-0"))
	if code != 1 || !strings.Contains(out, "pass a partition directory") {
		t.Errorf("exit %d, output %q", code, out)
	}
}
