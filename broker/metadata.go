package broker

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/assign"
	"github.com/twinlog/twinlog/broker/metaloop"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/storage"
)

// startMetadata starts the broker's metadata loop (metaloop.Loop): it
// long-polls the controller's FetchMetadata (SPEC §3.1) and, after each
// answer applied, reconciles the hosted partitions (metadataHost.Applied).
func (b *Broker) startMetadata() {
	b.meta = metaloop.New(metaEnv{b}, metadataHost{b}, metaloop.Config{
		BrokerID:         int32(b.cfg.ID),
		MaxWait:          b.cfg.MetadataMaxWait,
		Backoff:          100 * time.Millisecond,
		MaxSnapshotItems: metadata.MaxSnapshotItems,
	})
	b.meta.Start()
}

// metaEnv runs each FetchMetadata on a goroutine of the run (seam.go),
// bounded by the long poll plus the RPC timeout.
type metaEnv struct{ b *Broker }

func (e metaEnv) After(d time.Duration, f func()) { e.b.runAfter(d, f) }

func (e metaEnv) Fetch(req *pb.FetchMetadataRequest, done func(*pb.FetchMetadataResponse, error)) {
	callController(e.b, e.b.cfg.MetadataMaxWait+e.b.cfg.RPCTimeout, func(ctx context.Context, ctl pb.ControllerServiceClient) (*pb.FetchMetadataResponse, error) {
		return ctl.FetchMetadata(ctx, req)
	}, done)
}

// metadataHost is the broker's image as the metadata loop's host.
type metadataHost struct{ b *Broker }

func (h metadataHost) Position() (int64, int64) {
	b := h.b
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.image.Offset(), b.brokerEpoch()
}

func (h metadataHost) Reload() {
	b := h.b
	b.metaMu.Lock()
	b.image = metadata.New("")
	b.metaMu.Unlock()
}

func (h metadataHost) Apply(resp *pb.FetchMetadataResponse) error { return h.b.applyMetadata(resp) }

// Applied reconciles the hosted partitions with the new image, wakes what
// waits on a change and tells the controller the applied offset at once.
func (h metadataHost) Applied(*pb.FetchMetadataResponse, int64) {
	b := h.b
	b.reconcile()
	if b.groups != nil {
		b.groups.Reconcile()
	}
	b.noteStateTombstones(b.runCtx)
	b.notifyChange()
	b.kickHeartbeat()
}

func (h metadataHost) Event(ev metaloop.Event) {
	log := h.b.log
	switch ev.Kind {
	case metaloop.FetchFailed:
		log.Debug("fetch metadata", "err", ev.Err)
	case metaloop.Replaced:
		log.Info("metadata snapshot replaced while paging; restarting")
	case metaloop.Reloaded:
		// The controller does not have what we applied: start over.
		log.Warn("metadata offset ahead of the controller; reloading", "from", ev.From, "high", ev.HighOffset)
	case metaloop.Restarted:
		level := slog.LevelWarn
		if errors.Is(ev.Err, metadata.ErrSnapshotTooLarge) {
			level = slog.LevelError
		}
		log.Log(context.Background(), level, "metadata snapshot refused; restarting the snapshot", "err", ev.Err)
	case metaloop.ApplyFailed:
		log.Warn("apply metadata; reloading", "err", ev.Err)
	}
}

func (b *Broker) applyMetadata(resp *pb.FetchMetadataResponse) error {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	if id := resp.GetClusterId(); id != "" {
		b.metaCluster = id
	}
	if err := metadata.ApplyTo(b.image, resp); err != nil {
		return err
	}
	caughtUp := b.image.Registered(int32(b.cfg.ID), b.brokerEpoch())
	b.authz.Follow(b.image, caughtUp)
	if caughtUp {
		b.caughtUpOnce.Do(func() { close(b.caughtUp) })
	}
	return nil
}

// TopicName is the name of the topic whose id is id in the broker's image
// (kafka.Backend: Fetch v13+ names topics by id).
func (b *Broker) TopicName(id string) (string, bool) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.image.TopicByID(id)
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
	hosted := map[twinlog.TopicPartition]string{}
	for _, p := range b.partitions() {
		hosted[p.tp] = p.topicID
	}
	b.metaMu.Lock()
	plan, ok := assign.Reconcile(b.image, b.cfg.ID, b.brokerEpoch(), hosted)
	registered, brokers := b.image.BrokerEpochs()
	segmentBytes := map[string]int64{} // topics' segment.bytes (0: unset)
	for _, w := range plan.Host {
		if v, set := b.image.Topic(w.TP.Topic).GetConfigs()[metadata.KeySegmentBytes]; set {
			segmentBytes[w.TP.Topic] = metadata.ConfigInt(v, 0)
		}
	}
	b.metaMu.Unlock()
	if !ok {
		return
	}
	for _, tp := range plan.Remove {
		if p := b.partition(tp); p != nil {
			b.removePartition(p)
		}
	}
	// Logs on disk that no assignment wants (SPEC §2.1).
	for _, d := range b.dirs {
		for _, tp := range plan.Orphans(slices.Collect(maps.Keys(d.Logs()))) {
			b.log.Info("deleting unassigned partition dir", "topic", tp.Topic, "partition", tp.Partition)
			if err := d.Delete(tp); err != nil {
				b.log.Error("delete partition dir", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		}
	}
	for _, w := range plan.Host {
		tp := w.TP
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
		p.log.SetSegmentMaxBytes(segmentBytes[tp.Topic]) // 0: log.segment.bytes
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

// openPartition opens (or creates) the log of tp and its replica
// (assign.OpenLog). A dir holding another topic id is deleted first (SPEC
// §2.1).
func (b *Broker) openPartition(tp twinlog.TopicPartition, topicID string) (*partition, error) {
	if err := b.offlineErr(tp); err != nil {
		return nil, err // not an empty log in another dir either
	}
	o, err := assign.OpenLog(b.dirs, tp, topicID)
	if err != nil {
		return nil, err
	}
	if o.Replaced {
		b.log.Info("partition dir held another topic id; deleted it", "topic", tp.Topic, "partition", tp.Partition,
			"found", o.FoundTopicID, "want", topicID)
	}
	l := o.Log
	p, err := newPartition(b, tp, topicID, o.Dir, l, o.AlignedEpoch)
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
