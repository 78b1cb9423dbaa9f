package metadata

import (
	"errors"
	"fmt"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/internal/configdef"
)

// MaxSnapshotItems bounds each list of a snapshot a Follower gathers from
// pages: the ceiling of cluster.max.partitions, the most partitions any
// controller may be configured to hold (a broker does not know the
// controller's own setting). A topic has at least one partition, so topics
// are bounded by the same number; brokers and mirrors have no cap of their
// own and get the same one, so that no controller, buggy or hostile, can
// make the gathering grow without bound.
var MaxSnapshotItems = configdef.MustLookup(configdef.KeyClusterMaxPartitions).Max

// ErrSnapshotTooLarge reports a snapshot page that would take the gathered
// snapshot past the Follower's cap: retrying cannot help, an operator has
// to look at the controller.
var ErrSnapshotTooLarge = errors.New("metadata: snapshot exceeds the cluster caps")

// Follower is a broker's side of FetchMetadata (SPEC §3.1): the snapshot
// cursor to ask with, and what each answer asks of the image's owner. The
// controller sends a snapshot in pages bounded by metadata.fetch.max.bytes;
// the Follower gathers them and hands the snapshot, then the deltas of its
// last page, over only once it is whole, so the image never holds part of
// one. It does not hold the image. Not safe for concurrent use (one
// metadata loop owns it); the broker and the simulator both follow with it.
type Follower struct {
	snap     *twinlogv1.MetadataSnapshot // nil: no snapshot in progress
	next     int64                       // position of the next item wanted
	maxItems int64                       // cap of each item list
}

// NewFollower returns a Follower whose snapshots may hold up to maxItems
// of each kind (MaxSnapshotItems in production).
func NewFollower(maxItems int64) *Follower { return &Follower{maxItems: maxItems} }

// Cursor is the request's snapshot_cursor: the next page wanted, nil when
// no snapshot is in progress.
func (f *Follower) Cursor() *twinlogv1.SnapshotCursor {
	if f.snap == nil {
		return nil
	}
	return &twinlogv1.SnapshotCursor{Offset: f.snap.GetOffset(), Position: f.next}
}

// Reset drops the partial snapshot.
func (f *Follower) Reset() { f.snap, f.next = nil, 0 }

// Step is what one FetchMetadata answer asks of the image's owner.
type Step int8

const (
	// Wait: nothing to apply (no change, or a snapshot page gathered);
	// ask again.
	Wait Step = iota + 1
	// Apply: apply Taken.Apply to the image (ApplyTo), then act on it.
	Apply
	// Reload: the controller does not have what the image holds
	// (OFFSET_OUT_OF_RANGE); start over from an empty image.
	Reload
	// Restart: the answer refused the snapshot in progress or carried a
	// page that cannot be used (Taken.Err says why); ask again after a
	// pause, from the snapshot's first page.
	Restart
)

// Taken is what Take made of an answer.
type Taken struct {
	Step Step
	// Apply is what to apply for Step Apply: the whole snapshot (if any)
	// and the deltas.
	Apply *twinlogv1.FetchMetadataResponse
	// Err is why a Restart.
	Err error
	// Replaced: the controller started a newer snapshot over while pages
	// of an older one were being gathered (worth a log line).
	Replaced bool
}

// Take reads the controller's answer to a request made with Cursor.
func (f *Follower) Take(resp *twinlogv1.FetchMetadataResponse) Taken {
	switch resp.GetError() {
	case twinlogv1.ErrorCode_ERROR_CODE_NONE:
	case twinlogv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
		f.Reset()
		return Taken{Step: Reload}
	default:
		// INVALID_REQUEST: the controller refused the snapshot cursor.
		cur := f.Cursor()
		f.Reset()
		return Taken{Step: Restart, Err: fmt.Errorf("metadata: fetch refused (%s %q) at snapshot %d position %d",
			resp.GetError(), resp.GetErrorMessage(), cur.GetOffset(), cur.GetPosition())}
	}
	if page := resp.GetSnapshot(); page != nil {
		replaced := f.snap != nil && resp.GetSnapshotPosition() == 0
		snap, err := f.add(resp)
		switch {
		case err != nil:
			return Taken{Step: Restart, Err: err, Replaced: replaced}
		case snap == nil:
			return Taken{Step: Wait, Replaced: replaced}
		}
		return Taken{Step: Apply, Replaced: replaced, Apply: &twinlogv1.FetchMetadataResponse{ClusterId: resp.GetClusterId(),
			HighOffset: resp.GetHighOffset(), Snapshot: snap, Deltas: resp.GetDeltas()}}
	}
	// An answer without a snapshot ends any in progress: a partial one is
	// of no use, the deltas follow from_offset as usual.
	f.Reset()
	if len(resp.GetDeltas()) == 0 {
		return Taken{Step: Wait}
	}
	return Taken{Step: Apply, Apply: resp}
}

// add takes the snapshot page of resp and returns the whole snapshot when
// it was the last page, nil while pages remain. A first page (position 0)
// discards any partial snapshot: the controller restarts a follower whose
// snapshot a newer compaction replaced. A page that does not continue the
// partial snapshot (another offset or position), a partial page without
// items or with deltas, and one that would take a list past maxItems are
// errors, and the gathering is reset: pages of two snapshots are never
// joined.
func (f *Follower) add(resp *twinlogv1.FetchMetadataResponse) (_ *twinlogv1.MetadataSnapshot, err error) {
	defer func() {
		if err != nil {
			f.Reset()
		}
	}()
	page, pos := resp.GetSnapshot(), resp.GetSnapshotPosition()
	switch {
	case pos == 0:
		f.snap = &twinlogv1.MetadataSnapshot{Offset: page.GetOffset(), ClusterId: page.GetClusterId(), ClusterConfig: page.GetClusterConfig(),
			ProducerIds: page.GetProducerIds()}
		f.next = 0
	case f.snap == nil:
		return nil, fmt.Errorf("metadata: snapshot %d: page at position %d but no snapshot in progress", page.GetOffset(), pos)
	case page.GetOffset() != f.snap.GetOffset() || pos != f.next:
		return nil, fmt.Errorf("metadata: snapshot %d: page at position %d does not continue snapshot %d at position %d",
			page.GetOffset(), pos, f.snap.GetOffset(), f.next)
	}
	for _, l := range []struct {
		what      string
		have, add int
	}{
		{"brokers", len(f.snap.GetBrokers()), len(page.GetBrokers())},
		{"topics", len(f.snap.GetTopics()), len(page.GetTopics())},
		{"partitions", len(f.snap.GetPartitions()), len(page.GetPartitions())},
		{"mirrors", len(f.snap.GetMirrors()), len(page.GetMirrors())},
		{"ACL bindings", len(f.snap.GetAcls()), len(page.GetAcls())},
		{"SCRAM credentials", len(f.snap.GetScramCredentials()), len(page.GetScramCredentials())},
	} {
		if int64(l.have)+int64(l.add) > f.maxItems {
			return nil, fmt.Errorf("%w: snapshot %d: %d %s after position %d, more than %d",
				ErrSnapshotTooLarge, page.GetOffset(), l.have+l.add, l.what, pos, f.maxItems)
		}
	}
	items := int64(len(page.GetBrokers()) + len(page.GetTopics()) + len(page.GetPartitions()) + len(page.GetMirrors()) + len(page.GetAcls()) + len(page.GetScramCredentials()))
	f.snap.Brokers = append(f.snap.Brokers, page.GetBrokers()...)
	f.snap.Topics = append(f.snap.Topics, page.GetTopics()...)
	f.snap.Partitions = append(f.snap.Partitions, page.GetPartitions()...)
	f.snap.Mirrors = append(f.snap.Mirrors, page.GetMirrors()...)
	f.snap.Acls = append(f.snap.Acls, page.GetAcls()...)
	f.snap.ScramCredentials = append(f.snap.ScramCredentials, page.GetScramCredentials()...)
	f.next += items
	next := resp.GetNextSnapshotCursor()
	if next == nil {
		snap := f.snap
		f.Reset()
		return snap, nil
	}
	switch {
	case items == 0:
		return nil, fmt.Errorf("metadata: snapshot %d: partial page at position %d without items", page.GetOffset(), pos)
	case len(resp.GetDeltas()) > 0:
		return nil, fmt.Errorf("metadata: snapshot %d: partial page at position %d carries %d deltas", page.GetOffset(), pos, len(resp.GetDeltas()))
	case next.GetOffset() != f.snap.GetOffset() || next.GetPosition() != f.next:
		return nil, fmt.Errorf("metadata: snapshot %d: page at position %d with %d items names the next page (offset %d, position %d)",
			page.GetOffset(), pos, items, next.GetOffset(), next.GetPosition())
	}
	return nil, nil
}

// ApplyTo applies an Apply answer to img: the snapshot (if any), then the
// deltas above the image's offset. An error leaves img part-way: its owner
// starts over from an empty image.
func ApplyTo(img *Image, resp *twinlogv1.FetchMetadataResponse) error {
	if s := resp.GetSnapshot(); s != nil {
		img.Restore(s)
	}
	for _, d := range resp.GetDeltas() {
		if d.GetOffset() <= img.Offset() {
			continue
		}
		if err := img.Apply(d); err != nil {
			return err
		}
	}
	return nil
}
