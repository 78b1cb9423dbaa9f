package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/assign"
	"github.com/twinlog/twinlog/internal/configdef"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/storage"
)

// metadataLoop follows the controller's change log (SPEC §3.1): long-poll
// FetchMetadata from the next offset, apply deltas in order (a snapshot when
// far behind), then reconcile the hosted partitions. The controller sends a
// snapshot in pages bounded by metadata.fetch.max.bytes: the loop gathers
// them in a snapshotPages and applies the snapshot, then the deltas of its
// last page, only once it is whole, so the image never holds part of one.
func (b *Broker) metadataLoop(ctx context.Context) {
	pages := snapshotPages{maxItems: maxSnapshotItems}
	for ctx.Err() == nil {
		ctl, err := b.controller()
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		b.metaMu.Lock()
		from := b.image.Offset() + 1
		b.metaMu.Unlock()
		cursor := pages.cursor()
		rctx, cancel := context.WithTimeout(ctx, b.cfg.MetadataMaxWait+b.cfg.RPCTimeout)
		resp, err := ctl.FetchMetadata(rctx, &pb.FetchMetadataRequest{
			BrokerId: int32(b.cfg.ID), BrokerEpoch: b.epoch.Load(), FromOffset: from,
			MaxWaitMs:      int32(b.cfg.MetadataMaxWait.Milliseconds()),
			SnapshotCursor: cursor,
		})
		cancel()
		if err != nil {
			// The cursor stays: the next page is asked for again (the
			// controller restarts it if its snapshot was replaced).
			b.log.Debug("fetch metadata", "err", err)
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		switch resp.GetError() {
		case pb.ErrorCode_ERROR_CODE_NONE:
		case pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
			// The controller does not have what we applied: start over.
			b.log.Warn("metadata offset ahead of the controller; reloading", "from", from, "high", resp.GetHighOffset())
			pages.reset()
			b.metaMu.Lock()
			b.image = metadata.New("")
			b.metaMu.Unlock()
			continue
		default:
			// INVALID_REQUEST: the controller refused the snapshot cursor;
			// ask again without one, from the first page.
			b.log.Warn("fetch metadata refused; restarting the snapshot", "error", resp.GetError(),
				"message", resp.GetErrorMessage(), "snapshot_offset", cursor.GetOffset(), "snapshot_position", cursor.GetPosition())
			pages.reset()
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		if page := resp.GetSnapshot(); page != nil {
			if cursor != nil && resp.GetSnapshotPosition() == 0 {
				b.log.Info("metadata snapshot replaced while paging; restarting", "snapshot_offset", cursor.GetOffset(),
					"new_snapshot_offset", page.GetOffset())
			}
			snap, err := pages.add(resp)
			if err != nil {
				level := slog.LevelWarn
				if errors.Is(err, errSnapshotTooLarge) {
					level = slog.LevelError
				}
				b.log.Log(ctx, level, "metadata snapshot page refused; restarting the snapshot", "err", err)
				sleep(ctx, 100*time.Millisecond)
				continue
			}
			if snap == nil {
				continue
			}
			resp = &pb.FetchMetadataResponse{ClusterId: resp.GetClusterId(), HighOffset: resp.GetHighOffset(),
				Snapshot: snap, Deltas: resp.GetDeltas()}
		} else if cursor != nil {
			// A cursor answered without a snapshot: the partial one is of
			// no use; the deltas follow from_offset as usual.
			pages.reset()
		}
		if resp.GetSnapshot() == nil && len(resp.GetDeltas()) == 0 {
			continue
		}
		if err := b.applyMetadata(resp); err != nil {
			b.log.Warn("apply metadata; reloading", "err", err)
			b.metaMu.Lock()
			b.image = metadata.New("")
			b.metaMu.Unlock()
			continue
		}
		b.reconcile()
		b.noteStateTombstones(ctx)
		b.notifyChange()
		b.kickHeartbeat()
	}
}

// maxSnapshotItems bounds each list of a snapshot accumulated from pages:
// the ceiling of cluster.max.partitions, the most partitions any controller
// may be configured to hold (the broker does not know the controller's own
// setting). A topic has at least one partition, so topics are bounded by
// the same number; brokers and mirrors have no cap of their own and get
// the same one, so that no controller, buggy or hostile, can make the
// accumulation grow without bound.
var maxSnapshotItems = configdef.MustLookup(configdef.KeyClusterMaxPartitions).Max

// errSnapshotTooLarge reports a snapshot page that would take the
// accumulated snapshot past maxSnapshotItems: retrying cannot help, an
// operator has to look at the controller.
var errSnapshotTooLarge = errors.New("broker: metadata snapshot exceeds the cluster caps")

// snapshotPages accumulates the pages of one metadata snapshot. The zero
// value with maxItems set holds none. Not safe for concurrent use (the
// metadata loop owns it).
type snapshotPages struct {
	snap     *pb.MetadataSnapshot // nil: no snapshot in progress
	next     int64                // position of the next item wanted
	maxItems int64                // cap of each item list
}

// cursor names the next page wanted, nil when no snapshot is in progress.
func (a *snapshotPages) cursor() *pb.SnapshotCursor {
	if a.snap == nil {
		return nil
	}
	return &pb.SnapshotCursor{Offset: a.snap.GetOffset(), Position: a.next}
}

// reset drops the partial snapshot.
func (a *snapshotPages) reset() { a.snap, a.next = nil, 0 }

// add takes the snapshot page of resp and returns the whole snapshot when
// it was the last page, nil while pages remain. A first page (position 0)
// discards any partial snapshot: the controller restarts a follower whose
// snapshot a newer compaction replaced. A page that does not continue the
// partial snapshot (another offset or position), a partial page without
// items or with deltas, and one that would take a list past maxItems are
// errors, and the accumulation is reset: pages of two snapshots are never
// joined.
func (a *snapshotPages) add(resp *pb.FetchMetadataResponse) (_ *pb.MetadataSnapshot, err error) {
	defer func() {
		if err != nil {
			a.reset()
		}
	}()
	page, pos := resp.GetSnapshot(), resp.GetSnapshotPosition()
	switch {
	case pos == 0:
		a.snap = &pb.MetadataSnapshot{Offset: page.GetOffset(), ClusterId: page.GetClusterId(), ClusterConfig: page.GetClusterConfig()}
		a.next = 0
	case a.snap == nil:
		return nil, fmt.Errorf("broker: metadata snapshot %d: page at position %d but no snapshot in progress", page.GetOffset(), pos)
	case page.GetOffset() != a.snap.GetOffset() || pos != a.next:
		return nil, fmt.Errorf("broker: metadata snapshot %d: page at position %d does not continue snapshot %d at position %d",
			page.GetOffset(), pos, a.snap.GetOffset(), a.next)
	}
	for _, l := range []struct {
		what      string
		have, add int
	}{
		{"brokers", len(a.snap.GetBrokers()), len(page.GetBrokers())},
		{"topics", len(a.snap.GetTopics()), len(page.GetTopics())},
		{"partitions", len(a.snap.GetPartitions()), len(page.GetPartitions())},
		{"mirrors", len(a.snap.GetMirrors()), len(page.GetMirrors())},
	} {
		if int64(l.have)+int64(l.add) > a.maxItems {
			return nil, fmt.Errorf("%w: snapshot %d: %d %s after position %d, more than %d",
				errSnapshotTooLarge, page.GetOffset(), l.have+l.add, l.what, pos, a.maxItems)
		}
	}
	items := int64(len(page.GetBrokers()) + len(page.GetTopics()) + len(page.GetPartitions()) + len(page.GetMirrors()))
	a.snap.Brokers = append(a.snap.Brokers, page.GetBrokers()...)
	a.snap.Topics = append(a.snap.Topics, page.GetTopics()...)
	a.snap.Partitions = append(a.snap.Partitions, page.GetPartitions()...)
	a.snap.Mirrors = append(a.snap.Mirrors, page.GetMirrors()...)
	a.next += items
	next := resp.GetNextSnapshotCursor()
	if next == nil {
		snap := a.snap
		a.reset()
		return snap, nil
	}
	switch {
	case items == 0:
		return nil, fmt.Errorf("broker: metadata snapshot %d: partial page at position %d without items", page.GetOffset(), pos)
	case len(resp.GetDeltas()) > 0:
		return nil, fmt.Errorf("broker: metadata snapshot %d: partial page at position %d carries %d deltas", page.GetOffset(), pos, len(resp.GetDeltas()))
	case next.GetOffset() != a.snap.GetOffset() || next.GetPosition() != a.next:
		return nil, fmt.Errorf("broker: metadata snapshot %d: page at position %d with %d items names the next page (offset %d, position %d)",
			page.GetOffset(), pos, items, next.GetOffset(), next.GetPosition())
	}
	return nil, nil
}

func (b *Broker) applyMetadata(resp *pb.FetchMetadataResponse) error {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	if id := resp.GetClusterId(); id != "" {
		b.metaCluster = id
	}
	if s := resp.GetSnapshot(); s != nil {
		b.image.Restore(s)
	}
	for _, d := range resp.GetDeltas() {
		if d.GetOffset() <= b.image.Offset() {
			continue
		}
		if err := b.image.Apply(d); err != nil {
			return err
		}
	}
	return nil
}

// MetadataOffset is the offset of the last applied metadata change.
func (b *Broker) MetadataOffset() int64 {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.image.Offset()
}

// reconcile makes the hosted partitions match the image: open logs for new
// assignments, apply partition state, delete partitions this broker left or
// whose topic id changed (SPEC §2.1), and retarget follower fetchers. It waits
// until the image has caught up with this broker's own registration, so a
// restarted broker never acts on leadership it held before.
func (b *Broker) reconcile() {
	now := b.nowMs()
	b.metaMu.Lock()
	if b.image.Offset() < b.epoch.Load() {
		b.metaMu.Unlock()
		return
	}
	wanted := map[twinlog.TopicPartition]assign.Assignment{}
	for _, a := range assign.Of(b.image, b.cfg.ID) {
		wanted[a.TP] = a
	}
	registered, brokers := b.image.BrokerEpochs()
	b.metaMu.Unlock()

	// Remove partitions that left (or whose topic id changed).
	for _, p := range b.partitions() {
		w, ok := wanted[p.tp]
		if ok && w.Record.GetTopicId() == p.topicID {
			continue
		}
		b.removePartition(p)
	}
	// Logs on disk that no assignment wants (SPEC §2.1).
	for _, d := range b.dirs {
		for tp := range d.Logs() {
			if _, ok := wanted[tp]; !ok && b.partition(tp) == nil {
				b.log.Info("deleting unassigned partition dir", "topic", tp.Topic, "partition", tp.Partition)
				if err := d.Delete(tp); err != nil {
					b.log.Error("delete partition dir", "topic", tp.Topic, "partition", tp.Partition, "err", err)
				}
			}
		}
	}
	for tp, w := range wanted {
		p := b.partition(tp)
		if p == nil {
			var err error
			if p, err = b.openPartition(tp, w.Record.GetTopicId()); err != nil {
				if b.offlineErr(tp) == nil {
					// An offline log was logged with its file at start and
					// stays offline until a restart: not again at every
					// metadata change.
					b.log.Error("open partition", "topic", tp.Topic, "partition", tp.Partition, "err", err)
				}
				continue
			}
		}
		st := w.State(registered, brokers)
		p.mu.Lock()
		if p.usableLocked() == nil {
			p.state = w.Record
			p.mirrorWritable = assign.Apply(p.r, w, st, b.cfg.ID, p.mirrorWritable, p.mirrorWritableLE, now)
			p.processReadyLocked()
		}
		p.mu.Unlock()
	}
	b.retargetFetchers()
	b.syncMirrorRunners()
}

// openPartition opens (or creates) the log of tp and its replica. A dir
// holding another topic id is deleted first (SPEC §2.1).
func (b *Broker) openPartition(tp twinlog.TopicPartition, topicID string) (*partition, error) {
	if err := b.offlineErr(tp); err != nil {
		return nil, err // not an empty log in another dir either
	}
	var dir *storage.LogDir
	var l *storage.Log
	for _, d := range b.dirs {
		if got, ok := d.Get(tp); ok {
			dir, l = d, got
			break
		}
	}
	aligned := storage.NoAlignedEpoch
	if l != nil {
		md, ok, err := l.ReadPartitionMetadata()
		if err != nil {
			// An unreadable partition.metadata says nothing about whose
			// records these are: keep them (SPEC §2.1 deletes a dir only
			// for another topic id) and leave the partition unopened.
			return nil, fmt.Errorf("read partition.metadata of %s-%d: %w", tp.Topic, tp.Partition, err)
		}
		if !ok || md.TopicID != topicID {
			b.log.Info("partition dir holds another topic id; deleting", "topic", tp.Topic, "partition", tp.Partition,
				"found", md.TopicID, "want", topicID)
			if err := dir.Delete(tp); err != nil {
				return nil, err
			}
			l = nil
		} else {
			aligned = md.AlignedEpoch
		}
	}
	if l == nil {
		dir = b.dirs[0]
		for _, d := range b.dirs[1:] {
			if len(d.Logs()) < len(dir.Logs()) {
				dir = d
			}
		}
		var err error
		if l, err = dir.GetOrCreate(tp); err != nil {
			return nil, err
		}
		if err := l.WritePartitionMetadata(storage.PartitionMetadata{TopicID: topicID, AlignedEpoch: storage.NoAlignedEpoch}); err != nil {
			return nil, err
		}
	}
	p, err := newPartition(b, tp, topicID, dir, l, aligned)
	if err != nil {
		return nil, err
	}
	b.partsMu.Lock()
	b.parts[tp] = p
	b.partsMu.Unlock()
	b.log.Info("hosting partition", "topic", tp.Topic, "partition", tp.Partition,
		"log_end_offset", l.LogEndOffset(), "hw", l.HighWatermark())
	return p, nil
}

func (b *Broker) removePartition(p *partition) {
	b.partsMu.Lock()
	if b.parts[p.tp] == p {
		delete(b.parts, p.tp)
	}
	b.partsMu.Unlock()
	p.close()
	b.obs.ForgetPartition(p.tp.Topic, p.tp.Partition)
	if err := p.dir.Delete(p.tp); err != nil && !errors.Is(err, storage.ErrClosed) {
		b.log.Error("delete partition dir", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
	}
	b.log.Info("partition removed", "topic", p.tp.Topic, "partition", p.tp.Partition)
}
