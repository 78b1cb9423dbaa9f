package metastore

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// encoding is how every store keeps deltas and snapshots: deterministic, so
// the same image is the same bytes whatever the store.
var encoding = proto.MarshalOptions{Deterministic: true}

// EncodeDeltas encodes a change set for Append, one value per delta. A
// store encodes before it takes its lock: encoding is the expensive part
// and needs none.
func EncodeDeltas(deltas []*twinlogv1.MetadataDelta) ([][]byte, error) {
	vals := make([][]byte, len(deltas))
	for i, d := range deltas {
		if d == nil {
			return nil, fmt.Errorf("metastore: append: nil delta at index %d", i)
		}
		b, err := encoding.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("metastore: marshal delta %d: %w", d.GetOffset(), err)
		}
		vals[i] = b
	}
	return vals, nil
}

// EncodeSnapshot encodes a snapshot for Compact, the bytes
// ReadSnapshotPage reads.
func EncodeSnapshot(snap *twinlogv1.MetadataSnapshot) ([]byte, error) {
	if snap == nil {
		return nil, errors.New("metastore: compact: nil snapshot")
	}
	b, err := encoding.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("metastore: marshal snapshot %d: %w", snap.GetOffset(), err)
	}
	return b, nil
}

// CheckCompact checks a compaction to a snapshot of offset off, next being
// the store's NextOffset and stored its snapshot's offset (0 if none): the
// snapshot must cover only appended offsets, and never go back.
func CheckCompact(off, next, stored int64) error {
	if off < 0 || off >= next {
		return fmt.Errorf("metastore: compact: snapshot offset %d not in [0, %d)", off, next)
	}
	if off < stored {
		return fmt.Errorf("metastore: compact: snapshot offset %d older than stored %d", off, stored)
	}
	return nil
}
