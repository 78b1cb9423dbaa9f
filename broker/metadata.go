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
	follow := metadata.NewFollower(metadata.MaxSnapshotItems)
	for ctx.Err() == nil {
		ctl, err := b.controller()
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		b.metaMu.Lock()
		from := b.image.Offset() + 1
		b.metaMu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, b.cfg.MetadataMaxWait+b.cfg.RPCTimeout)
		resp, err := ctl.FetchMetadata(rctx, &pb.FetchMetadataRequest{
			BrokerId: int32(b.cfg.ID), BrokerEpoch: b.epoch.Load(), FromOffset: from,
			MaxWaitMs:      int32(b.cfg.MetadataMaxWait.Milliseconds()),
			SnapshotCursor: follow.Cursor(),
		})
		cancel()
		if err != nil {
			// The cursor stays: the next page is asked for again (the
			// controller restarts it if its snapshot was replaced).
			b.log.Debug("fetch metadata", "err", err)
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		taken := follow.Take(resp)
		if taken.Replaced {
			b.log.Info("metadata snapshot replaced while paging; restarting", "new_snapshot_offset", resp.GetSnapshot().GetOffset())
		}
		switch taken.Step {
		case metadata.Wait:
			continue
		case metadata.Reload:
			// The controller does not have what we applied: start over.
			b.log.Warn("metadata offset ahead of the controller; reloading", "from", from, "high", resp.GetHighOffset())
			b.metaMu.Lock()
			b.image = metadata.New("")
			b.metaMu.Unlock()
			continue
		case metadata.Restart:
			level := slog.LevelWarn
			if errors.Is(taken.Err, metadata.ErrSnapshotTooLarge) {
				level = slog.LevelError
			}
			b.log.Log(ctx, level, "metadata snapshot refused; restarting the snapshot", "err", taken.Err)
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		if err := b.applyMetadata(taken.Apply); err != nil {
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

func (b *Broker) applyMetadata(resp *pb.FetchMetadataResponse) error {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	if id := resp.GetClusterId(); id != "" {
		b.metaCluster = id
	}
	return metadata.ApplyTo(b.image, resp)
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
