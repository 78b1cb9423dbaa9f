package memstore

import (
	"errors"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastore"
	"github.com/twinlog/twinlog/controller/metastore/storetest"
)

// TestConformance runs the stores' shared suite in memory; a reopen is a
// crash (CrashClone), which without NoSync keeps every write that returned.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) storetest.Store {
		return New(Options{})
	}, func(_ *testing.T, s storetest.Store) storetest.Store {
		return s.(*Store).CrashClone()
	})
}

func mustNext(t *testing.T, s *Store) int64 {
	t.Helper()
	in, err := s.Info()
	if err != nil {
		t.Fatal(err)
	}
	return in.NextOffset
}

// TestCrashCloneIsIndependent: the crashed store and its clone go on
// separately, and a closed store can still be crashed.
func TestCrashCloneIsIndependent(t *testing.T) {
	s := New(Options{})
	if err := s.Append(storetest.Delta(1), storetest.Delta(2)); err != nil {
		t.Fatal(err)
	}
	c := s.CrashClone()
	if err := s.Append(storetest.Delta(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(&twinlogv1.MetadataSnapshot{Offset: 2}, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(storetest.Delta(3), storetest.Delta(4)); err != nil {
		t.Fatal(err)
	}
	if got := mustNext(t, s); got != 4 {
		t.Fatalf("original next offset %d, want 4", got)
	}
	if got, err := s.ReadDeltas(1, 0); err != nil || len(got) != 3 {
		t.Fatalf("original lost deltas to its clone's compaction: %d, %v", len(got), err)
	}
	if got := mustNext(t, c); got != 5 {
		t.Fatalf("clone next offset %d, want 5", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mustNext(t, s.CrashClone()); got != 4 {
		t.Fatalf("clone of a closed store: next offset %d, want 4", got)
	}
}

// TestNoSyncCrashLosesUnsynced: with NoSync a crash keeps what the last
// Sync saw and drops the rest, writes of every kind.
func TestNoSyncCrashLosesUnsynced(t *testing.T) {
	s := New(Options{NoSync: true})
	if _, err := s.InitClusterID("c1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CrashClone().Load(); err != nil || got.ClusterID != "" || got.NextOffset != 1 {
		t.Fatalf("crash before any Sync: %+v, %v", got, err)
	}
	if err := s.Append(storetest.Delta(1), storetest.Delta(2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BumpControllerEpoch(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(storetest.Delta(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: 3}, 0); err != nil {
		t.Fatal(err)
	}
	l, err := s.CrashClone().Load()
	if err != nil {
		t.Fatal(err)
	}
	if l.ClusterID != "c1" || l.ControllerEpoch != 0 || l.NextOffset != 3 || l.Snapshot != nil || len(l.Deltas) != 2 {
		t.Fatalf("crash after Sync kept %+v, want cluster c1, epoch 0, deltas 1-2, no snapshot", l)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	l, err = s.CrashClone().Load()
	if err != nil {
		t.Fatal(err)
	}
	if l.ControllerEpoch != 1 || l.NextOffset != 4 || l.Snapshot.GetOffset() != 3 || len(l.Deltas) != 0 {
		t.Fatalf("crash after the second Sync kept %+v", l)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); !errors.Is(err, metastore.ErrClosed) {
		t.Fatalf("Sync of a closed store: %v, want ErrClosed", err)
	}
}
