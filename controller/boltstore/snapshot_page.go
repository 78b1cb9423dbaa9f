package boltstore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/twinlog/twinlog/controller/metastore"
)

// SnapshotPage is a run of consecutive items of the stored snapshot.
type SnapshotPage = metastore.SnapshotPage

// ReadSnapshotPage reads one page of the stored snapshot in one read
// transaction, so that the page belongs to the snapshot start was shown:
// a compaction that replaces the snapshot meanwhile is not mixed in. The
// page is read from the bbolt value in place by metastore.ReadSnapshotPage,
// which says what start and fits do. It returns nil and no error when no
// snapshot is stored.
func (s *Store) ReadSnapshotPage(start func(offset, items int64) (int64, error), fits func(size int) bool) (*SnapshotPage, error) {
	var page *SnapshotPage
	err := s.view(func(tx *bolt.Tx) error {
		off, ok, err := snapshotOffset(tx)
		if err != nil || !ok {
			return err
		}
		v := tx.Bucket(bucketSnapshot).Get(keySnapshot)
		if v == nil {
			return fmt.Errorf("%w: snapshot offset present but snapshot missing", ErrCorrupt)
		}
		page, err = metastore.ReadSnapshotPage(v, int64(off), start, fits)
		return err
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}
