package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/vfs"
)

// syncerLog is a log on a MemFS whose segment fsyncs call onSync (before
// they take effect) and fail with its error.
func syncerLog(t *testing.T, onSync func() error) (*storage.MemFS, *storage.Log) {
	t.Helper()
	fs := storage.NewMemFS()
	fs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, ".log") {
			return onSync()
		}
		return nil
	})
	l, err := storage.Open(fs, "/t-0", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	batch, err := storage.EncodeBatch([]storage.Record{{Value: []byte("v")}}, storage.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(batch, 1); err != nil {
		t.Fatal(err)
	}
	return fs, l
}

// A leader append starts the group commit before anyone waits (the fsync
// overlaps replication); the acks=all waiter that comes later is covered by
// that fsync and needs no second one, and the batch survives a crash.
func TestSyncerStartFsyncsWithoutWaiter(t *testing.T) {
	synced := make(chan struct{}, 16)
	fs, l := syncerLog(t, func() error { synced <- struct{}{}; return nil })
	s := &syncer{log: l}
	s.start(l.LogEndOffset())
	select {
	case <-synced:
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("start did not fsync the appended batch")
	}
	done := make(chan error, 1)
	s.after(l.LogEndOffset()-1, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(synced); n != 0 {
		t.Errorf("%d more fsyncs for a waiter the first one covered", n)
	}
	crashed, err := storage.Open(fs.CrashClone(), "/t-0", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close()
	if crashed.LogEndOffset() != l.LogEndOffset() {
		t.Fatalf("after a crash the log ends at %d, want %d", crashed.LogEndOffset(), l.LogEndOffset())
	}
}

// A failing fsync, also one start began, answers the waiters with the
// error.
func TestSyncerFsyncError(t *testing.T) {
	_, l := syncerLog(t, func() error { return vfs.ErrInjected })
	s := &syncer{log: l}
	s.start(l.LogEndOffset())
	done := make(chan error, 1)
	s.after(l.LogEndOffset()-1, func(err error) { done <- err })
	if err := <-done; !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("waiter got %v, want the fsync error", err)
	}
}
