package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastore"
)

// The sentinel errors are metastore's, shared with every other store of
// the controller's metadata; the names stay here so that callers of this
// package need not know where they live.
var (
	// ErrCorrupt reports a value or key in the file that cannot be decoded or
	// breaks the layout invariants (see doc.go).
	ErrCorrupt = metastore.ErrCorrupt
	// ErrCompacted reports a read of deltas that compaction already removed;
	// the reader needs the snapshot.
	ErrCompacted = metastore.ErrCompacted
	// ErrOffsetMismatch reports an appended delta whose offset is not the
	// next one.
	ErrOffsetMismatch = metastore.ErrOffsetMismatch
	// ErrClosed reports use of a closed store.
	ErrClosed = metastore.ErrClosed
)

var (
	bucketMeta     = []byte("meta")
	bucketLog      = []byte("log")
	bucketSnapshot = []byte("snapshot")

	keyClusterID       = []byte("cluster_id")
	keyNextOffset      = []byte("next_offset")
	keyControllerEpoch = []byte("controller_epoch")
	keySnapOffset      = []byte("offset")
	keySnapshot        = []byte("snapshot")
)

// DefaultRetainDeltas is how many deltas compaction keeps behind the
// snapshot so brokers that are a little behind catch up without a snapshot.
const DefaultRetainDeltas = metastore.DefaultRetainDeltas

// Options configures Open.
type Options struct {
	// Timeout bounds waiting for the file lock held by another process.
	// Zero means 5s (never wait forever: a second controller on the same
	// file must fail, not hang).
	Timeout time.Duration
	// NoSync disables fsync at commit. Benchmarks only.
	NoSync bool
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	return o
}

// Store is the controller's bbolt file.
type Store struct {
	db *bolt.DB
}

var _ metastore.Store = (*Store)(nil)

// recovered turns a bbolt panic into an error naming the file. bbolt trusts
// its pages: a damaged page (bad flags, counts or overflow) panics inside
// Open or a transaction instead of returning an error, and a controller must
// report a bad file, not die inside a handler. The transaction was rolled
// back by bbolt's own deferred cleanup.
//
// Callers also run with debug.SetPanicOnFault: a damaged page id can point
// outside the memory map, and that fault must be a panic to recover, not a
// crash.
func recovered(path string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s: damaged page: %v", ErrCorrupt, path, r)
	}
}

// view and update are db.View and db.Update with recovered panics; a
// corrupt-file error names the file.
func (s *Store) view(fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recovered(s.db.Path(), &err)
	return nameFile(s.db.Path(), s.db.View(fn))
}

func (s *Store) update(fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recovered(s.db.Path(), &err)
	return nameFile(s.db.Path(), s.db.Update(fn))
}

// nameFile also turns bbolt's error for a closed database into one that
// wraps ErrClosed too, the error every store returns after Close.
func nameFile(path string, err error) error {
	switch {
	case errors.Is(err, ErrCorrupt):
		return fmt.Errorf("%s: %w", path, err)
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return fmt.Errorf("%w: %s: %w", ErrClosed, path, err)
	}
	return err
}

// boltOpen is bolt.Open; a test replaces it to panic after bbolt opened the
// file.
var boltOpen = bolt.Open

func openDB(path string, opts Options) (db *bolt.DB, err error) {
	// bbolt opens, locks and maps the file before it reads a page, and a
	// panic after that loses the *DB that would close them. Keep the file
	// so a failed Open at least unlocks and closes it (a retry, or another
	// controller, can then open the file). The mapping cannot be reached
	// without the *DB and stays; preflight exists so that no file gets this
	// far with a page that makes bbolt panic.
	var file *os.File
	defer func() {
		if err != nil && file != nil && db == nil {
			// If bbolt returned the error itself, it already closed the
			// file, and both calls are no-ops.
			unlock(file)
			_ = file.Close()
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recovered(path, &err)
	return boltOpen(path, 0o600, &bolt.Options{
		Timeout:      opts.Timeout,
		NoSync:       opts.NoSync,
		FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
}

// Open opens or creates the store at path. A damaged file is an error that
// names it (wrapping ErrCorrupt), never a panic.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := preflight(path, opts.Timeout); err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	db, err := openDB(path, opts)
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	st := &Store{db: db}
	err = st.update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketLog, bucketSnapshot} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keyNextOffset) == nil {
			if err := meta.Put(keyNextOffset, u64(1)); err != nil {
				return err
			}
		}
		return checkLayout(tx)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return st, nil
}

// Close closes the file. Committed appends are already durable. Closing a
// closed store does nothing; any other use of it returns ErrClosed.
func (s *Store) Close() error { return s.db.Close() }

// Path returns the file path.
func (s *Store) Path() string { return s.db.Path() }

// FileSize returns the size of the bbolt file in bytes.
func (s *Store) FileSize() (int64, error) {
	var n int64
	err := s.view(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n, err
}

// checkLayout verifies the scalars and the log bounds, so a damaged file is
// reported at Open rather than half-way through a replay.
func checkLayout(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	next, err := readU64(meta, keyNextOffset)
	if err != nil {
		return err
	}
	if v := meta.Get(keyControllerEpoch); v != nil && len(v) != 8 {
		return fmt.Errorf("%w: controller_epoch has %d bytes", ErrCorrupt, len(v))
	}
	first, last, ok, err := logBounds(tx)
	if err != nil {
		return err
	}
	snapOff, hasSnap, err := snapshotOffset(tx)
	if err != nil {
		return err
	}
	if ok {
		if last+1 != next {
			return fmt.Errorf("%w: last logged offset %d but next_offset %d", ErrCorrupt, last, next)
		}
		if first > 1 && (!hasSnap || snapOff+1 < first) {
			return fmt.Errorf("%w: log starts at %d but snapshot covers up to %d", ErrCorrupt, first, snapOff)
		}
	} else if next > 1 && (!hasSnap || snapOff+1 != next) {
		return fmt.Errorf("%w: empty log, next_offset %d, snapshot offset %d", ErrCorrupt, next, snapOff)
	}
	return nil
}

func logBounds(tx *bolt.Tx) (first, last uint64, ok bool, err error) {
	c := tx.Bucket(bucketLog).Cursor()
	fk, _ := c.First()
	if fk == nil {
		return 0, 0, false, nil
	}
	lk, _ := c.Last()
	for _, k := range [][]byte{fk, lk} {
		if len(k) != 8 {
			return 0, 0, false, fmt.Errorf("%w: log key of %d bytes", ErrCorrupt, len(k))
		}
	}
	first, last = binary.BigEndian.Uint64(fk), binary.BigEndian.Uint64(lk)
	if first == 0 || last < first {
		return 0, 0, false, fmt.Errorf("%w: log bounds [%d, %d]", ErrCorrupt, first, last)
	}
	return first, last, true, nil
}

func snapshotOffset(tx *bolt.Tx) (uint64, bool, error) {
	b := tx.Bucket(bucketSnapshot)
	if b.Get(keySnapOffset) == nil {
		return 0, false, nil
	}
	v, err := readU64(b, keySnapOffset)
	return v, err == nil, err
}

// Info summarizes the store.
type Info = metastore.Info

// Info reads the scalars.
func (s *Store) Info() (Info, error) {
	var in Info
	err := s.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		in.ClusterID = string(meta.Get(keyClusterID)) // string() copies
		if v := meta.Get(keyControllerEpoch); v != nil {
			e, err := readU64(meta, keyControllerEpoch)
			if err != nil {
				return err
			}
			in.ControllerEpoch = int64(e)
		}
		next, err := readU64(meta, keyNextOffset)
		if err != nil {
			return err
		}
		in.NextOffset = int64(next)
		first, _, ok, err := logBounds(tx)
		if err != nil {
			return err
		}
		in.FirstOffset = in.NextOffset
		if ok {
			in.FirstOffset = int64(first)
		}
		so, _, err := snapshotOffset(tx)
		in.SnapshotOffset = int64(so)
		return err
	})
	return in, err
}

// InitClusterID stores id as the cluster id unless one is stored already,
// and returns the stored one. A cluster id never changes once written.
func (s *Store) InitClusterID(id string) (string, error) {
	var out string
	err := s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyClusterID); len(v) > 0 {
			out = string(v)
			return nil
		}
		if id == "" {
			return errors.New("boltstore: empty cluster id")
		}
		out = id
		return meta.Put(keyClusterID, []byte(id))
	})
	return out, err
}

// BumpControllerEpoch increments and returns the controller epoch. Each
// controller start calls it once, so a restarted controller is
// distinguishable from its previous incarnation.
func (s *Store) BumpControllerEpoch() (int64, error) {
	var e uint64
	err := s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keyControllerEpoch) != nil {
			v, err := readU64(meta, keyControllerEpoch)
			if err != nil {
				return err
			}
			e = v
		}
		e++
		return meta.Put(keyControllerEpoch, u64(e))
	})
	return int64(e), err
}

// Append durably writes one change set: every delta in one bbolt
// transaction. The deltas must carry consecutive offsets starting at
// NextOffset; otherwise nothing is written and ErrOffsetMismatch returned.
func (s *Store) Append(deltas ...*twinlogv1.MetadataDelta) error {
	if len(deltas) == 0 {
		return nil
	}
	// Encode outside the write transaction: it is the expensive part and
	// needs no lock.
	vals, err := metastore.EncodeDeltas(deltas)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		next, err := readU64(meta, keyNextOffset)
		if err != nil {
			return err
		}
		log := tx.Bucket(bucketLog)
		log.FillPercent = 1.0 // keys only ever grow: pack pages full
		for i, d := range deltas {
			if uint64(d.GetOffset()) != next || d.GetOffset() <= 0 {
				return fmt.Errorf("%w: got %d, want %d", ErrOffsetMismatch, d.GetOffset(), next)
			}
			if err := log.Put(u64(next), vals[i]); err != nil {
				return fmt.Errorf("boltstore: put delta %d: %w", next, err)
			}
			next++
		}
		return meta.Put(keyNextOffset, u64(next))
	})
}

// Loaded is what a controller replays at start.
type Loaded = metastore.Loaded

// Load reads the snapshot and the deltas after it.
func (s *Store) Load() (*Loaded, error) {
	out := &Loaded{}
	err := s.view(func(tx *bolt.Tx) error {
		if err := checkLayout(tx); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		out.ClusterID = string(meta.Get(keyClusterID))
		if meta.Get(keyControllerEpoch) != nil {
			e, err := readU64(meta, keyControllerEpoch)
			if err != nil {
				return err
			}
			out.ControllerEpoch = int64(e)
		}
		next, err := readU64(meta, keyNextOffset)
		if err != nil {
			return err
		}
		out.NextOffset = int64(next)
		snapOff, hasSnap, err := snapshotOffset(tx)
		if err != nil {
			return err
		}
		if hasSnap {
			snap, err := readSnapshot(tx)
			if err != nil {
				return err
			}
			if uint64(snap.GetOffset()) != snapOff {
				return fmt.Errorf("%w: snapshot says offset %d, key says %d", ErrCorrupt, snap.GetOffset(), snapOff)
			}
			out.Snapshot = snap
		}
		out.Deltas, err = readDeltas(tx, snapOff+1, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadDeltas returns up to maxDeltas (0 = no limit) deltas starting at from.
// It returns ErrCompacted if from is older than the oldest retained delta and
// an empty slice if from ≥ NextOffset.
func (s *Store) ReadDeltas(from int64, maxDeltas int) ([]*twinlogv1.MetadataDelta, error) {
	if from < 1 {
		from = 1
	}
	var out []*twinlogv1.MetadataDelta
	err := s.view(func(tx *bolt.Tx) error {
		first, _, ok, err := logBounds(tx)
		if err != nil {
			return err
		}
		if !ok {
			next, err := readU64(tx.Bucket(bucketMeta), keyNextOffset)
			if err != nil {
				return err
			}
			if uint64(from) < next {
				return ErrCompacted
			}
			return nil
		}
		if uint64(from) < first {
			return ErrCompacted
		}
		out, err = readDeltas(tx, uint64(from), maxDeltas)
		return err
	})
	return out, err
}

// Snapshot returns the stored snapshot, nil if none was written.
func (s *Store) Snapshot() (*twinlogv1.MetadataSnapshot, error) {
	var snap *twinlogv1.MetadataSnapshot
	err := s.view(func(tx *bolt.Tx) error {
		if _, ok, err := snapshotOffset(tx); err != nil || !ok {
			return err
		}
		var err error
		snap, err = readSnapshot(tx)
		return err
	})
	return snap, err
}

// Compact stores snap as the latest snapshot and deletes the deltas it
// covers except the newest retain of them, in one transaction. snap.Offset
// must be an already appended offset (≤ NextOffset-1) and not older than the
// stored snapshot. retain < 0 means DefaultRetainDeltas. It returns how many
// deltas were deleted.
func (s *Store) Compact(snap *twinlogv1.MetadataSnapshot, retain int) (int, error) {
	val, err := metastore.EncodeSnapshot(snap)
	if err != nil {
		return 0, err
	}
	if retain < 0 {
		retain = DefaultRetainDeltas
	}
	deleted := 0
	err = s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		next, err := readU64(meta, keyNextOffset)
		if err != nil {
			return err
		}
		off := snap.GetOffset()
		prev, _, err := snapshotOffset(tx)
		if err != nil {
			return err
		}
		if err := metastore.CheckCompact(off, int64(next), int64(prev)); err != nil {
			return err
		}
		sb := tx.Bucket(bucketSnapshot)
		if err := sb.Put(keySnapshot, val); err != nil {
			return err
		}
		if err := sb.Put(keySnapOffset, u64(uint64(off))); err != nil {
			return err
		}
		// Delete deltas with offset ≤ off - retain.
		if int64(off)-int64(retain) < 1 {
			return nil
		}
		cut := uint64(off) - uint64(retain) // inclusive
		c := tx.Bucket(bucketLog).Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= cut; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
			deleted++
		}
		return nil
	})
	return deleted, err
}

// Stats returns bbolt statistics (for metrics and benchmarks).
func (s *Store) Stats() bolt.Stats { return s.db.Stats() }

func readSnapshot(tx *bolt.Tx) (*twinlogv1.MetadataSnapshot, error) {
	v := tx.Bucket(bucketSnapshot).Get(keySnapshot)
	if v == nil {
		return nil, fmt.Errorf("%w: snapshot offset present but snapshot missing", ErrCorrupt)
	}
	snap := &twinlogv1.MetadataSnapshot{}
	// Unmarshal copies bytes and strings out of v, which is only valid
	// inside the transaction.
	if err := proto.Unmarshal(v, snap); err != nil {
		return nil, fmt.Errorf("%w: decode snapshot: %v", ErrCorrupt, err)
	}
	return snap, nil
}

func readDeltas(tx *bolt.Tx, from uint64, maxDeltas int) ([]*twinlogv1.MetadataDelta, error) {
	var out []*twinlogv1.MetadataDelta
	c := tx.Bucket(bucketLog).Cursor()
	want := from
	for k, v := c.Seek(u64(from)); k != nil; k, v = c.Next() {
		if maxDeltas > 0 && len(out) >= maxDeltas {
			break
		}
		if len(k) != 8 {
			return nil, fmt.Errorf("%w: log key of %d bytes", ErrCorrupt, len(k))
		}
		off := binary.BigEndian.Uint64(k)
		if off != want {
			return nil, fmt.Errorf("%w: log gap: want offset %d, found %d", ErrCorrupt, want, off)
		}
		d := &twinlogv1.MetadataDelta{}
		if err := proto.Unmarshal(v, d); err != nil {
			return nil, fmt.Errorf("%w: decode delta at offset %d: %v", ErrCorrupt, off, err)
		}
		if uint64(d.GetOffset()) != off {
			return nil, fmt.Errorf("%w: delta at key %d carries offset %d", ErrCorrupt, off, d.GetOffset())
		}
		out = append(out, d)
		want++
	}
	return out, nil
}

func readU64(b *bolt.Bucket, key []byte) (uint64, error) {
	v := b.Get(key)
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s has %d bytes, want 8", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// rawPut writes a raw value; tests use it to plant corruption.
func (s *Store) rawPut(bucket, key, val []byte) error {
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put(bytes.Clone(key), bytes.Clone(val))
	})
}
