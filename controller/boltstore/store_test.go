package boltstore

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastore/storetest"
)

var delta = storetest.Delta

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAppendLoadRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s := open(t, path)
	id, err := s.InitClusterID("c1")
	if err != nil || id != "c1" {
		t.Fatalf("InitClusterID = %q, %v", id, err)
	}
	if e, err := s.BumpControllerEpoch(); err != nil || e != 1 {
		t.Fatalf("BumpControllerEpoch = %d, %v", e, err)
	}
	for off := int64(1); off <= 5; off++ {
		if err := s.Append(delta(off)); err != nil {
			t.Fatal(err)
		}
	}
	// One change set of two deltas.
	if err := s.Append(delta(6), delta(7)); err != nil {
		t.Fatal(err)
	}
	// Out of order: nothing written.
	if err := s.Append(delta(8), delta(10)); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("gap append: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	defer s.Close()
	if id, _ := s.InitClusterID("other"); id != "c1" {
		t.Fatalf("cluster id changed to %q", id)
	}
	if e, _ := s.BumpControllerEpoch(); e != 2 {
		t.Fatalf("controller epoch %d, want 2", e)
	}
	l, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if l.Snapshot != nil || len(l.Deltas) != 7 || l.NextOffset != 8 || l.ClusterID != "c1" || l.ControllerEpoch != 2 {
		t.Fatalf("loaded snapshot=%v deltas=%d next=%d", l.Snapshot, len(l.Deltas), l.NextOffset)
	}
	for i, d := range l.Deltas {
		if !proto.Equal(d, delta(int64(i+1))) {
			t.Fatalf("delta %d = %v", i+1, d)
		}
	}
	got, err := s.ReadDeltas(6, 1)
	if err != nil || len(got) != 1 || got[0].GetOffset() != 6 {
		t.Fatalf("ReadDeltas(6,1) = %v, %v", got, err)
	}
	if got, err := s.ReadDeltas(8, 0); err != nil || len(got) != 0 {
		t.Fatalf("ReadDeltas(head) = %v, %v", got, err)
	}
}

func TestCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s := open(t, path)
	for off := int64(1); off <= 100; off++ {
		if err := s.Append(delta(off)); err != nil {
			t.Fatal(err)
		}
	}
	snap := &twinlogv1.MetadataSnapshot{Offset: 90, ClusterId: "c1"}
	n, err := s.Compact(snap, 10)
	if err != nil || n != 80 {
		t.Fatalf("Compact = %d, %v", n, err)
	}
	if _, err := s.ReadDeltas(80, 0); !errors.Is(err, ErrCompacted) {
		t.Fatalf("ReadDeltas(80): %v", err)
	}
	if got, err := s.ReadDeltas(81, 0); err != nil || len(got) != 20 {
		t.Fatalf("ReadDeltas(81) = %d, %v", len(got), err)
	}
	if _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 101}, 0); err == nil {
		t.Fatal("compact past head accepted")
	}
	if _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 50}, 0); err == nil {
		t.Fatal("compact to an older snapshot accepted")
	}
	s.Close()
	s = open(t, path)
	defer s.Close()
	l, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if l.Snapshot.GetOffset() != 90 || len(l.Deltas) != 10 || l.Deltas[0].GetOffset() != 91 {
		t.Fatalf("after compaction: snap %d, %d deltas", l.Snapshot.GetOffset(), len(l.Deltas))
	}
	in, _ := s.Info()
	if in.FirstOffset != 81 || in.NextOffset != 101 || in.SnapshotOffset != 90 {
		t.Fatalf("info %+v", in)
	}
	// Compact everything: the log may be empty with a snapshot at head.
	if _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 100}, 0); err != nil {
		t.Fatal(err)
	}
	if l, err := s.Load(); err != nil || len(l.Deltas) != 0 || l.Snapshot.GetOffset() != 100 {
		t.Fatalf("load after full compaction: %v", err)
	}
	if _, err := s.ReadDeltas(100, 0); !errors.Is(err, ErrCompacted) {
		t.Fatalf("ReadDeltas(100): %v", err)
	}
	if err := s.Append(delta(101)); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptValue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bucket []byte
		key    []byte
		val    []byte
	}{
		{"garbage delta", bucketLog, u64(2), []byte{0xff, 0xff, 0xff, 0xff}},
		{"delta with wrong offset", bucketLog, u64(2), mustMarshal(t, delta(9))},
		{"short log key", bucketLog, []byte{1}, mustMarshal(t, delta(1))},
		{"short next_offset", bucketMeta, keyNextOffset, []byte{1, 2}},
		{"log gap", bucketLog, u64(5), mustMarshal(t, delta(5))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "meta.db")
			s := open(t, path)
			for off := int64(1); off <= 3; off++ {
				if err := s.Append(delta(off)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.name == "log gap" {
				// Make the log [1,2,3,5] with next 6: a hole at 4.
				if err := s.rawPut(bucketMeta, keyNextOffset, u64(6)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.rawPut(tc.bucket, tc.key, tc.val); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, err := Open(path, Options{Timeout: time.Second})
			if err == nil {
				defer s.Close()
				_, err = s.Load()
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenTimeoutWhenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s := open(t, path)
	defer s.Close()
	if _, err := Open(path, Options{Timeout: 50 * time.Millisecond}); err == nil {
		t.Fatal("second Open of a locked file succeeded")
	}
}

// TestKill9 re-executes the test binary as a child that appends in a loop and
// prints every acknowledged offset; the parent SIGKILLs it mid-stream and
// checks that the reopened file holds every acknowledged delta and nothing
// torn.
func TestKill9(t *testing.T) {
	if path := os.Getenv("BOLTSTORE_KILL9_CHILD"); path != "" {
		kill9Child(path)
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	for round := 0; round < 3; round++ {
		path := filepath.Join(t.TempDir(), "meta.db")
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$")
		cmd.Env = append(os.Environ(), "BOLTSTORE_KILL9_CHILD="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Drain stdout until EOF so the child never blocks on the pipe and
		// the kill lands in the middle of appends.
		ackedc := make(chan int64, 1)
		reached := make(chan struct{})
		go func() {
			var acked int64
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "acked ") {
					continue
				}
				acked, _ = strconv.ParseInt(strings.TrimPrefix(line, "acked "), 10, 64)
				if acked == int64(50+round*70) {
					close(reached)
				}
			}
			ackedc <- acked
		}()
		select {
		case <-reached:
		case <-time.After(30 * time.Second):
			t.Fatal("child too slow")
		}
		time.Sleep(time.Duration(round*3) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		acked := <-ackedc
		_ = cmd.Wait()
		if acked == 0 {
			t.Fatal("child acknowledged nothing")
		}

		s := open(t, path)
		l, err := s.Load()
		if err != nil {
			t.Fatalf("load after kill -9: %v", err)
		}
		// Each change set is two deltas; the child acks the second offset.
		last := l.NextOffset - 1
		if last < acked {
			t.Fatalf("acknowledged offset %d lost: log ends at %d", acked, last)
		}
		if last%2 != 0 {
			t.Fatalf("torn change set: log ends at odd offset %d", last)
		}
		for i, d := range l.Deltas {
			if !proto.Equal(d, delta(int64(i+1))) {
				t.Fatalf("delta %d damaged: %v", i+1, d)
			}
		}
		t.Logf("round %d: acked %d, recovered %d", round, acked, last)
		s.Close()
	}
}

func kill9Child(path string) {
	s, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	for off := int64(1); ; off += 2 {
		if err := s.Append(delta(off), delta(off+1)); err != nil {
			fmt.Println("append:", err)
			os.Exit(2)
		}
		fmt.Printf("acked %d\n", off+1)
	}
}
