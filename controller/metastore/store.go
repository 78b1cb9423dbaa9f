package metastore

import twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"

// Store is what the controller needs of a store of its metadata: exactly
// the calls it makes (the controller names it controller.Store). Two
// implement it, controller/boltstore and controller/memstore, and
// storetest checks that they behave alike.
//
// Every write must be durable when it returns (the controller acknowledges
// a change only after Append returned), and a write that fails must leave
// nothing of itself. Errors the controller tells apart are this package's
// sentinels (ErrCompacted, ErrCorrupt, ErrOffsetMismatch, ErrClosed),
// wrapped or not. A Store must be safe for concurrent use: followers read
// deltas and snapshot pages while commands append and the controller's Run
// loop compacts.
type Store interface {
	// InitClusterID stores id as the cluster id unless one is stored
	// already, and returns the stored one; an empty id is refused when none
	// is stored.
	InitClusterID(id string) (string, error)
	// BumpControllerEpoch increments and returns the controller epoch.
	BumpControllerEpoch() (int64, error)
	// Load returns the snapshot and every delta after it.
	Load() (*Loaded, error)
	// Append writes one change set; the deltas must carry consecutive
	// offsets from NextOffset on, else nothing is written and the error
	// wraps ErrOffsetMismatch.
	Append(deltas ...*twinlogv1.MetadataDelta) error
	// ReadDeltas returns up to maxDeltas (0 = no limit) deltas from offset
	// from on (none from NextOffset on), ErrCompacted if compaction removed
	// from.
	ReadDeltas(from int64, maxDeltas int) ([]*twinlogv1.MetadataDelta, error)
	// ReadSnapshotPage reads one page of the stored snapshot with
	// ReadSnapshotPage (the function), nil if no snapshot is stored.
	ReadSnapshotPage(start func(offset, items int64) (int64, error), fits func(size int) bool) (*SnapshotPage, error)
	// Compact stores snap and deletes the deltas it covers but the newest
	// retain of them (DefaultRetainDeltas if retain < 0); it returns how
	// many it deleted.
	Compact(snap *twinlogv1.MetadataSnapshot, retain int) (int, error)
	// Close releases the store; it is idempotent, and every other call
	// after it returns ErrClosed.
	Close() error
}
