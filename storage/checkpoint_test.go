package storage

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/vfs"
)

func TestOffsetCheckpointFormat(t *testing.T) {
	m := map[twinlog.TopicPartition]twinlog.Offset{
		{Topic: "orders", Partition: 1}: 998,
		{Topic: "orders", Partition: 0}: 1200,
		{Topic: "a-b", Partition: 10}:   0,
	}
	want := "0\n3\na-b 10 0\norders 0 1200\norders 1 998\n"
	if got := string(MarshalOffsetCheckpoint(m)); got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	back, err := ParseOffsetCheckpoint([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, back); diff != "" {
		t.Fatal(diff)
	}
	if got := string(MarshalOffsetCheckpoint(nil)); got != "0\n0\n" {
		t.Fatalf("empty %q", got)
	}
	for _, bad := range []string{"1\n0\n", "0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "0\n1\nt 0 -1\n", "0\n2\nt 0 1\nt 0 2\n", "0\nx\n", "0\n1\nt 0 1 2\n"} {
		if _, err := ParseOffsetCheckpoint([]byte(bad)); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%q: got %v", bad, err)
		}
	}
	if m, err := ParseOffsetCheckpoint(nil); err != nil || len(m) != 0 {
		t.Fatal("empty file", m, err)
	}
}

func TestCleanShutdownRules(t *testing.T) {
	if got := string(MarshalCleanShutdown(42)); got != `{"version":0,"brokerEpoch":42}` {
		t.Fatalf("%q", got)
	}
	for _, bad := range []string{``, `{}`, `{"version":1,"brokerEpoch":3}`, `{"version":0}`, `{"version":0,"brokerEpoch":-3}`, `{"version":0,"brokerEpoch":3,"x":1}`, `{"version":0,"brokerEpoch":3} {}`, `nope`} {
		if _, err := ParseCleanShutdown([]byte(bad)); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	fsys := NewMemFS()
	fsys.MkdirAll("/d1", 0o755)
	if err := WriteCleanShutdown(fsys, "/d1", 7); err != nil {
		t.Fatal(err)
	}
	crashed := fsys.CrashClone() // the write is durable
	cs := TakeCleanShutdown(crashed, "/d1")
	if !cs.Found || cs.Err != nil || cs.BrokerEpoch != 7 {
		t.Fatalf("%+v", cs)
	}
	// Taken means deleted, durably: a crash right after start sees none.
	if cs := TakeCleanShutdown(crashed.CrashClone(), "/d1"); cs.Found {
		t.Fatalf("file survived its read: %+v", cs)
	}
	ok := func(e twinlog.BrokerEpoch) CleanShutdown { return CleanShutdown{Found: true, BrokerEpoch: e} }
	tests := []struct {
		name string
		in   []CleanShutdown
		want twinlog.BrokerEpoch
	}{
		{"one dir", []CleanShutdown{ok(5)}, 5},
		{"agree", []CleanShutdown{ok(5), ok(5)}, 5},
		{"disagree", []CleanShutdown{ok(5), ok(6)}, -1},
		{"one missing", []CleanShutdown{ok(5), {BrokerEpoch: -1}}, -1},
		{"one unreadable", []CleanShutdown{ok(5), {Found: true, BrokerEpoch: 5, Err: errors.New("io")}}, -1},
		{"none", nil, -1},
	}
	for _, tt := range tests {
		if got := PreviousBrokerEpoch(tt.in); got != tt.want {
			t.Errorf("%s: got %d want %d", tt.name, got, tt.want)
		}
	}
}

func TestLogDirLifecycle(t *testing.T) {
	fsys := NewMemFS()
	o := testOpts(t, newClock())
	d, err := OpenLogDir(fsys, "/logs", o)
	if err != nil {
		t.Fatal(err)
	}
	if d.CleanShutdown().Found {
		t.Fatal("fresh dir reported clean")
	}
	tp := twinlog.TopicPartition{Topic: "orders", Partition: 3}
	l, err := d.GetOrCreate(tp)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5, 2, 10, 1, 0)
	l.SetHighWatermark(6)
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	hw, _ := ReadOffsetCheckpoint(fsys, "/logs/"+HighWatermarkCheckpointFile)
	if hw[tp] != 6 {
		t.Fatalf("hw checkpoint %v", hw)
	}
	if err := d.Close(9); err != nil {
		t.Fatal(err)
	}
	data, _ := vfs.ReadFile(fsys, "/logs/"+CleanShutdownFile)
	if string(data) != `{"version":0,"brokerEpoch":9}` {
		t.Fatalf("%q", data)
	}
	rp, _ := ReadOffsetCheckpoint(fsys, "/logs/"+RecoveryPointCheckpointFile)
	if rp[tp] != 10 {
		t.Fatalf("recovery point %v", rp)
	}
	// Clean restart: the file is consumed; the log reopens with its HW.
	d, err = OpenLogDir(fsys.CrashClone(), "/logs", o)
	if err != nil {
		t.Fatal(err)
	}
	if cs := d.CleanShutdown(); !cs.Found || cs.BrokerEpoch != 9 || PreviousBrokerEpoch([]CleanShutdown{cs}) != 9 {
		t.Fatalf("%+v", cs)
	}
	l, ok := d.Get(tp)
	if !ok || l.LogEndOffset() != 10 || l.HighWatermark() != 6 {
		t.Fatalf("reopened: %v", ok)
	}
	if exists, _ := vfs.Exists(fsys, "/logs/"+CleanShutdownFile); !exists {
		t.Fatal("original fs must be untouched by the clone")
	}
	// Delete removes the partition dir.
	if err := d.Delete(tp); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Get(tp); ok {
		t.Fatal("still there")
	}
	if exists, _ := vfs.Exists(fsys, filepath.Join("/logs", tp.String())); exists {
		// fsys is the pre-clone FS; the clone's dir was deleted, not this one.
		t.Log("original partition dir untouched, as expected")
	}
}

func TestParsePartitionDir(t *testing.T) {
	tests := []struct {
		in string
		tp twinlog.TopicPartition
		ok bool
	}{
		{"orders-3", twinlog.TopicPartition{Topic: "orders", Partition: 3}, true},
		{"a-b-c-10", twinlog.TopicPartition{Topic: "a-b-c", Partition: 10}, true},
		{"orders", twinlog.TopicPartition{}, false},
		{"-1", twinlog.TopicPartition{}, false},
		{"x-01", twinlog.TopicPartition{}, false},
		{"x--1", twinlog.TopicPartition{Topic: "x-", Partition: 1}, true},
	}
	for _, tt := range tests {
		tp, ok := ParsePartitionDir(tt.in)
		if ok != tt.ok || tp != tt.tp {
			t.Errorf("%q: %v %v", tt.in, tp, ok)
		}
	}
}

func FuzzOffsetCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\norders 0 1200\norders 1 998\n"))
	f.Add([]byte(""))
	f.Add([]byte("0\n1\nt 0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseOffsetCheckpoint(data)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		back, err := ParseOffsetCheckpoint(MarshalOffsetCheckpoint(m))
		if err != nil || !cmp.Equal(m, back) {
			t.Fatalf("round trip %v -> %v (%v)", m, back, err)
		}
	})
}
