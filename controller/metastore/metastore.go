package metastore

import (
	"errors"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// The errors below are the ones the controller tells apart; every store
// returns them (wrapped or not), so callers test them with errors.Is
// whatever the store.
var (
	// ErrCorrupt reports a stored value that cannot be decoded or breaks the
	// layout invariants (see doc.go).
	ErrCorrupt = errors.New("metastore: corrupt metadata store")
	// ErrCompacted reports a read of deltas that compaction already removed;
	// the reader needs the snapshot.
	ErrCompacted = errors.New("metastore: offset compacted away")
	// ErrOffsetMismatch reports an appended delta whose offset is not the
	// next one.
	ErrOffsetMismatch = errors.New("metastore: delta offset is not the next offset")
	// ErrClosed reports use of a closed store.
	ErrClosed = errors.New("metastore: store closed")
)

// DefaultRetainDeltas is how many deltas compaction keeps behind the
// snapshot so brokers that are a little behind catch up without a snapshot.
const DefaultRetainDeltas = 10000

// Loaded is what a controller replays at start: the snapshot (nil if none
// was ever written) and every delta after it, in offset order.
type Loaded struct {
	ClusterID       string
	ControllerEpoch int64
	Snapshot        *twinlogv1.MetadataSnapshot
	Deltas          []*twinlogv1.MetadataDelta
	// NextOffset is the offset the next appended delta must carry.
	NextOffset int64
}

// Info summarizes a store.
type Info struct {
	ClusterID       string
	ControllerEpoch int64
	// FirstOffset is the oldest delta still in the log (NextOffset if none).
	FirstOffset int64
	// NextOffset is the offset the next appended delta must carry.
	NextOffset int64
	// SnapshotOffset is the offset the stored snapshot covers, 0 if none.
	SnapshotOffset int64
}
