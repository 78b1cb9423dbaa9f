package memstore

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastore"
)

// Options configures New.
type Options struct {
	// NoSync mirrors boltstore.Options.NoSync: writes are not synced as
	// they commit, so a crash (CrashClone) loses every write after the last
	// Sync.
	NoSync bool
}

// Store is the controller's metadata in memory.
type Store struct {
	noSync bool

	mu     sync.RWMutex
	closed bool
	cur    state
	// synced is the state at the last Sync, what a crash keeps with
	// NoSync; without NoSync every commit is synced and cur is kept.
	synced state
}

// state is everything a Store holds. The byte slices are never changed in
// place once stored, so clones share them; only the log's slice of them is
// copied.
type state struct {
	clusterID       string
	controllerEpoch int64
	// next is the offset the next appended delta gets; log holds the
	// encoded deltas [next-len(log), next).
	next int64
	log  [][]byte
	// snapshot is the encoded snapshot of offset snapOffset, if hasSnap.
	hasSnap    bool
	snapOffset int64
	snapshot   []byte
}

var _ metastore.Store = (*Store)(nil)

func (st state) clone() state {
	st.log = slices.Clone(st.log)
	return st
}

func (st *state) first() int64 { return st.next - int64(len(st.log)) }

// New returns an empty store: no cluster id, controller epoch 0, next
// offset 1, no snapshot.
func New(opts Options) *Store {
	empty := state{next: 1}
	return &Store{noSync: opts.NoSync, cur: empty, synced: empty}
}

// Close closes the store. Closing a closed store does nothing; any other
// use of it returns metastore.ErrClosed. A closed store can still be
// CrashCloned: closing loses nothing durable.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Sync makes every write so far durable, as an fsync of boltstore's file
// would. Without NoSync every write already is, and Sync only checks that
// the store is open.
func (s *Store) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return metastore.ErrClosed
	}
	if s.noSync {
		s.synced = s.cur.clone()
	}
	return nil
}

// CrashClone returns a new, open store holding what survives a crash of s
// at this moment: every write that returned, or with NoSync every write
// before the last Sync. s itself is left as it is (open or closed), so a
// test can crash a store under a running controller and start another on
// the clone.
func (s *Store) CrashClone() *Store {
	s.mu.RLock()
	defer s.mu.RUnlock()
	kept := s.cur
	if s.noSync {
		kept = s.synced
	}
	kept = kept.clone()
	return &Store{noSync: s.noSync, cur: kept, synced: kept.clone()}
}

// read runs fn on the current state under the read lock.
func (s *Store) read(fn func(st *state) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return metastore.ErrClosed
	}
	return fn(&s.cur)
}

// write runs fn on a copy of the current state under the write lock and
// installs the copy only if fn succeeds, so that a failed write leaves
// nothing (a bbolt transaction that rolls back). The copy shares the log's
// array with the current state: fn may append to the log once it can no
// longer fail, but never changes an element in place.
func (s *Store) write(fn func(st *state) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return metastore.ErrClosed
	}
	st := s.cur
	if err := fn(&st); err != nil {
		return err
	}
	s.cur = st
	return nil
}

// Info reads the scalars.
func (s *Store) Info() (metastore.Info, error) {
	var in metastore.Info
	err := s.read(func(st *state) error {
		in = metastore.Info{ClusterID: st.clusterID, ControllerEpoch: st.controllerEpoch,
			FirstOffset: st.first(), NextOffset: st.next, SnapshotOffset: st.snapOffset}
		return nil
	})
	return in, err
}

// InitClusterID stores id as the cluster id unless one is stored already,
// and returns the stored one. A cluster id never changes once written.
func (s *Store) InitClusterID(id string) (string, error) {
	var out string
	err := s.write(func(st *state) error {
		if st.clusterID != "" {
			out = st.clusterID
			return nil
		}
		if id == "" {
			return errors.New("memstore: empty cluster id")
		}
		st.clusterID, out = id, id
		return nil
	})
	return out, err
}

// BumpControllerEpoch increments and returns the controller epoch.
func (s *Store) BumpControllerEpoch() (int64, error) {
	var e int64
	err := s.write(func(st *state) error {
		st.controllerEpoch++
		e = st.controllerEpoch
		return nil
	})
	return e, err
}

// Append writes one change set. The deltas must carry consecutive offsets
// starting at NextOffset; otherwise nothing is written and the error wraps
// metastore.ErrOffsetMismatch.
func (s *Store) Append(deltas ...*twinlogv1.MetadataDelta) error {
	if len(deltas) == 0 {
		return nil
	}
	vals, err := metastore.EncodeDeltas(deltas)
	if err != nil {
		return err
	}
	return s.write(func(st *state) error {
		for i, d := range deltas {
			if want := st.next + int64(i); d.GetOffset() != want {
				return fmt.Errorf("%w: got %d, want %d", metastore.ErrOffsetMismatch, d.GetOffset(), want)
			}
		}
		st.log = append(st.log, vals...)
		st.next += int64(len(vals))
		return nil
	})
}

// Load reads the snapshot and the deltas after it.
func (s *Store) Load() (*metastore.Loaded, error) {
	var out *metastore.Loaded
	err := s.read(func(st *state) error {
		l := &metastore.Loaded{ClusterID: st.clusterID, ControllerEpoch: st.controllerEpoch, NextOffset: st.next}
		if st.hasSnap {
			snap, err := decodeSnapshot(st.snapshot)
			if err != nil {
				return err
			}
			l.Snapshot = snap
		}
		var err error
		l.Deltas, err = st.deltas(st.snapOffset+1, 0)
		out = l
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadDeltas returns up to maxDeltas (0 = no limit) deltas starting at from.
// It returns metastore.ErrCompacted if from is older than the oldest
// retained delta and an empty slice if from ≥ NextOffset.
func (s *Store) ReadDeltas(from int64, maxDeltas int) ([]*twinlogv1.MetadataDelta, error) {
	from = max(from, 1)
	var out []*twinlogv1.MetadataDelta
	err := s.read(func(st *state) error {
		// With an empty log first is NextOffset: every older offset is
		// compacted, NextOffset itself is the empty tail.
		if from < st.first() {
			return metastore.ErrCompacted
		}
		var err error
		out, err = st.deltas(from, maxDeltas)
		return err
	})
	return out, err
}

// deltas decodes up to maxDeltas (0 = no limit) deltas from offset from,
// which is not below the first retained one.
func (st *state) deltas(from int64, maxDeltas int) ([]*twinlogv1.MetadataDelta, error) {
	i := from - st.first()
	if i >= int64(len(st.log)) {
		return nil, nil
	}
	vals := st.log[i:]
	if maxDeltas > 0 && len(vals) > maxDeltas {
		vals = vals[:maxDeltas]
	}
	out := make([]*twinlogv1.MetadataDelta, len(vals))
	for j, v := range vals {
		d := &twinlogv1.MetadataDelta{}
		if err := proto.Unmarshal(v, d); err != nil {
			return nil, fmt.Errorf("%w: decode delta at offset %d: %v", metastore.ErrCorrupt, from+int64(j), err)
		}
		out[j] = d
	}
	return out, nil
}

// Snapshot returns the stored snapshot, nil if none was written.
func (s *Store) Snapshot() (*twinlogv1.MetadataSnapshot, error) {
	var snap *twinlogv1.MetadataSnapshot
	err := s.read(func(st *state) error {
		if !st.hasSnap {
			return nil
		}
		var err error
		snap, err = decodeSnapshot(st.snapshot)
		return err
	})
	return snap, err
}

func decodeSnapshot(v []byte) (*twinlogv1.MetadataSnapshot, error) {
	snap := &twinlogv1.MetadataSnapshot{}
	if err := proto.Unmarshal(v, snap); err != nil {
		return nil, fmt.Errorf("%w: decode snapshot: %v", metastore.ErrCorrupt, err)
	}
	return snap, nil
}

// ReadSnapshotPage reads one page of the stored snapshot under the read
// lock, so that a compaction meanwhile is not mixed in; see
// metastore.ReadSnapshotPage for start and fits. It returns nil and no
// error when no snapshot is stored.
func (s *Store) ReadSnapshotPage(start func(offset, items int64) (int64, error), fits func(size int) bool) (*metastore.SnapshotPage, error) {
	var page *metastore.SnapshotPage
	err := s.read(func(st *state) error {
		if !st.hasSnap {
			return nil
		}
		var err error
		page, err = metastore.ReadSnapshotPage(st.snapshot, st.snapOffset, start, fits)
		return err
	})
	return page, err // page is nil with an error
}

// Compact is metastore.Store's Compact, all or nothing, with boltstore's
// checks: the snapshot's offset was appended and is not older than the
// stored snapshot's.
func (s *Store) Compact(snap *twinlogv1.MetadataSnapshot, retain int) (int, error) {
	val, err := metastore.EncodeSnapshot(snap)
	if err != nil {
		return 0, err
	}
	if retain < 0 {
		retain = metastore.DefaultRetainDeltas
	}
	deleted := 0
	err = s.write(func(st *state) error {
		off := snap.GetOffset()
		if err := metastore.CheckCompact(off, st.next, st.snapOffset); err != nil {
			return err
		}
		st.hasSnap, st.snapOffset, st.snapshot = true, off, val
		// Delete deltas with offset ≤ off - retain. The copy releases the
		// deleted deltas' bytes, which a reslice would keep reachable.
		if cut := off - int64(retain); cut >= st.first() {
			deleted = int(cut - st.first() + 1)
			st.log = slices.Clone(st.log[deleted:])
		}
		return nil
	})
	return deleted, err
}
