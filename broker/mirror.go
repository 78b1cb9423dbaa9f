package broker

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/runner"
	"github.com/twinlog/twinlog/mirror/source"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/storage"
)

// The mirror runner (SPEC §6): one goroutine per hosted partition of a
// (once-)mirrored topic turns the partition's runner.Runner, which holds
// the loop's every decision. This file is its host: the goroutine, the
// runner's Env (the controller, the source cluster and __mirror_state
// over gRPC, each call on a goroutine of its own that reports back through
// the runner's queue), the partition under its mutex, and the metrics.

// mirrorRunner hosts one partition's runner.
type mirrorRunner struct {
	b       *Broker
	p       *partition
	tp      twinlog.TopicPartition
	topicID string
	log     *slog.Logger
	rn      *runner.Runner

	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}
	status atomic.Pointer[pb.MirrorPartitionStatus]
	rand   *lockedRand

	// Runner goroutine only.
	src       *source.Client
	writeLead uint64
	writeStop context.CancelFunc
	writeCtx  context.Context
}

type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// syncMirrorRunners starts a runner for every hosted partition of a mirror
// topic, stops the others, and kicks them all (called after reconcile).
func (b *Broker) syncMirrorRunners() {
	want := map[twinlog.TopicPartition]*partition{}
	b.metaMu.Lock()
	for _, p := range b.partitionsUnlockedMeta() {
		// Once-mirrored topics (DeleteMirror done) keep a runner too: its
		// leader loads and answers the partition's taints (SPEC §6.4).
		if t := b.image.Topic(p.tp.Topic); t != nil && (t.GetMirrorName() != "" || t.GetOnceMirrored()) && t.GetTopicId() == p.topicID {
			want[p.tp] = p
		}
	}
	b.metaMu.Unlock()
	b.mirrorMu.Lock()
	defer b.mirrorMu.Unlock()
	for tp, r := range b.runners {
		if want[tp] != r.p {
			r.stop()
			delete(b.runners, tp)
		}
	}
	for tp, p := range want {
		r := b.runners[tp]
		if r == nil {
			r = b.newMirrorRunner(p)
			b.runners[tp] = r
		}
		r.poke()
	}
}

func (b *Broker) partitionsUnlockedMeta() []*partition { return b.partitions() }

func (b *Broker) stopMirrorRunners() {
	b.mirrorMu.Lock()
	rs := b.runners
	b.runners = map[twinlog.TopicPartition]*mirrorRunner{}
	b.mirrorMu.Unlock()
	for _, r := range rs {
		r.stop()
	}
}

// mirrorStatuses reports the partitions this broker leads as a mirror
// destination (heartbeats, SPEC §6.11).
func (b *Broker) mirrorStatuses() []*pb.MirrorPartitionStatus {
	b.mirrorMu.Lock()
	defer b.mirrorMu.Unlock()
	var out []*pb.MirrorPartitionStatus
	for _, r := range b.runners {
		if st := r.status.Load(); st != nil && st.GetLeaderId() == int32(b.cfg.ID) {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(x, y *pb.MirrorPartitionStatus) int {
		if x.GetTopic() != y.GetTopic() {
			if x.GetTopic() < y.GetTopic() {
				return -1
			}
			return 1
		}
		return int(x.GetPartition() - y.GetPartition())
	})
	return out
}

// MirrorStatus is the runner's latest status of tp (nil if none); for tests.
func (b *Broker) MirrorStatus(tp twinlog.TopicPartition) *pb.MirrorPartitionStatus {
	b.mirrorMu.Lock()
	defer b.mirrorMu.Unlock()
	if r := b.runners[tp]; r != nil {
		return r.status.Load()
	}
	return nil
}

// repaired forwards taints the replica cleared (a tainted follower fetched
// without DivergingEpoch) to the partition's runner.
func (b *Broker) repaired(tp twinlog.TopicPartition, ids []twinlog.BrokerID) {
	b.mirrorMu.Lock()
	r := b.runners[tp]
	b.mirrorMu.Unlock()
	if r == nil {
		// A topic never mirrored has no durable taints: nothing to write.
		// Called with p.mu held, so confirm from a goroutine.
		if p := b.partition(tp); p != nil {
			go func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				if p.usableLocked() == nil {
					for _, id := range ids {
						p.r.ConfirmTaintCleared(id, b.nowMs())
					}
					p.processReadyLocked()
				}
			}()
		}
		return
	}
	for _, id := range ids {
		r.post(plan.FollowerRepaired{Replica: id})
	}
}

func (b *Broker) newMirrorRunner(p *partition) *mirrorRunner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &mirrorRunner{
		b: b, p: p, tp: p.tp, topicID: p.topicID,
		log: p.logger.With("component", "mirror"),
		ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), done: make(chan struct{}),
		rand: &lockedRand{r: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(b.cfg.ID)))},
	}
	r.rn = runner.New(runner.Config{
		Self: b.cfg.ID, TopicPartition: p.tp, TopicID: p.topicID, Tick: b.cfg.TickInterval, Log: r.log,
	}, mirrorEnv{r}, mirrorPartition{p}, mirrorObserver{r: r})
	go r.run()
	return r
}

func (r *mirrorRunner) stop() {
	r.cancel()
	<-r.done
}

func (r *mirrorRunner) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// post delivers an event to the runner (dropped once it stopped); it never
// blocks.
func (r *mirrorRunner) post(ev plan.Event) { r.rn.Post(ev) }

// run turns the runner on every kick (metadata applied, an answer queued)
// and tick until the runner is stopped.
func (r *mirrorRunner) run() {
	defer close(r.done)
	defer r.teardown()
	t := time.NewTicker(r.b.cfg.TickInterval)
	defer t.Stop()
	for {
		r.rn.Turn()
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
		case <-t.C:
		}
	}
}

func (r *mirrorRunner) teardown() {
	r.rn.Stop()
	r.b.mobs.ForgetMirrorPartition(r.tp.Topic, r.tp.Partition)
	if r.writeStop != nil {
		r.writeStop()
	}
	r.status.Store(nil)
}

// mirrorConfigMs is a broker-scoped mirror setting: the cluster's value if
// an operator set one (AlterConfigs on the cluster, dynamic), else the
// broker's own (brokerd's file, static; 0 unset), else the cluster
// default; 0 if none parses (the plan's default). Kafka's order.
func (b *Broker) mirrorConfigMs(own int64, key string) int64 {
	b.metaMu.Lock()
	set, isSet := b.image.ClusterConfigSet(key)
	def := b.image.ClusterConfig(key)
	b.metaMu.Unlock()
	v := def
	switch {
	case isSet:
		v = set
	case own > 0:
		return own
	}
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil {
		return 0
	}
	return n
}

func (b *Broker) clusterID() string {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.clusterIDLocked()
}

// clusterIDLocked: the image's cluster id, else the controller's, else the
// configured one. b.metaMu is held.
func (b *Broker) clusterIDLocked() string {
	switch {
	case b.image.ClusterID() != "":
		return b.image.ClusterID()
	case b.metaCluster != "":
		return b.metaCluster
	}
	return b.cfg.ClusterID
}

// mirrorEnv is the runner's world (runner.Env): each call that leaves the
// process runs on a goroutine of its own, bounded by the RPC timeouts,
// and answers through the runner's queue.
type mirrorEnv struct{ r *mirrorRunner }

func (e mirrorEnv) NowMs() int64                    { return e.r.b.nowMs() }
func (e mirrorEnv) Rand() plan.Rand                 { return e.r.rand }
func (e mirrorEnv) Wake()                           { e.r.poke() }
func (e mirrorEnv) After(d time.Duration, f func()) { time.AfterFunc(d, f) }

// Observe reads the topic's mirror metadata and the partition's record,
// and keeps the source client on the mirror's bootstrap servers.
func (e mirrorEnv) Observe() runner.Observation {
	r, b, p := e.r, e.r.b, e.r.p
	p.mu.Lock()
	rec := p.state
	p.mu.Unlock()
	b.metaMu.Lock()
	view := runner.ViewOf(b.image, r.tp.Topic)
	b.metaMu.Unlock()
	if r.src == nil {
		r.src = source.New(source.GRPC(b.conn), view.Bootstrap, b.cfg.RPCTimeout)
	}
	view.Desired.SourceClusterID = r.src.Track(view.Bootstrap, view.Desired.SourceClusterID)
	return runner.Observation{View: view, Record: rec}
}

func (e mirrorEnv) MachineConfig() plan.Config {
	b := e.r.b
	initial := b.mirrorConfigMs(b.cfg.MirrorRetryInitialBackoff.Milliseconds(), metadata.KeyMirrorRetryInitialBackoff)
	maxBackoff := b.mirrorConfigMs(b.cfg.MirrorRetryMaxBackoff.Milliseconds(), metadata.KeyMirrorRetryMaxBackoff)
	if maxBackoff == 0 {
		maxBackoff = max(initial, 300000)
	}
	return plan.Config{
		PendingTimeoutMs:      b.mirrorConfigMs(b.cfg.MirrorPendingTimeout.Milliseconds(), metadata.KeyMirrorPendingTimeoutMs),
		RetryInitialBackoffMs: initial,
		RetryMaxBackoffMs:     max(maxBackoff, initial),
		RetryMaxAttempts:      int32(b.mirrorConfigMs(int64(b.cfg.MirrorRetryMaxAttempts), metadata.KeyMirrorRetryMaxAttempts)),
	}
}

// LoadState reads the partition's records after reading its
// __mirror_state partition up to the HW.
func (e mirrorEnv) LoadState(mirror string, done func(*pb.MirrorRunRecord, *pb.MirrorLmleRecord, error)) {
	r := e.r
	go func() { done(r.b.mirrorRecords(r.ctx, mirror, r.tp, r.topicID)) }()
}

// WriteState appends a record through the state partition's leader; the
// writes of an earlier leadership are cancelled.
func (e mirrorEnv) WriteState(w runner.StateWrite, done func(error)) {
	r := e.r
	if r.writeCtx == nil || w.Lead != r.writeLead {
		if r.writeStop != nil {
			r.writeStop()
		}
		r.writeCtx, r.writeStop = context.WithCancel(r.ctx)
		r.writeLead = w.Lead
	}
	ctx := r.writeCtx
	key, value := state.Entry(w.Mirror, r.topicID, r.tp.Partition, w.Run, w.Lmle)
	go func() { done(r.b.writeMirrorState(ctx, r.tp.Topic, key, value)) }()
}

func (e mirrorEnv) QueryLMLE(done func(twinlog.Epoch, pb.ErrorCode)) {
	r := e.r
	r.src.LastMirroredEpoch(r.ctx, r.b.clusterID(), r.topicID, r.tp, func(lmle twinlog.Epoch, code pb.ErrorCode, err error) {
		if err != nil {
			r.log.Debug("get last mirrored epochs", "err", err)
			lmle, code = twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
		}
		done(lmle, code)
	})
}

// Bump asks the controller for a new leader epoch.
func (e mirrorEnv) Bump(a plan.BumpLeaderEpoch, done func(twinlog.Epoch, pb.ErrorCode)) {
	r, b := e.r, e.r.b
	go func() {
		ctl, err := b.controller()
		if err != nil {
			done(twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT)
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, b.cfg.RPCTimeout)
		defer cancel()
		resp, err := ctl.BumpLeaderEpoch(ctx, &pb.BumpLeaderEpochRequest{
			BrokerId: int32(b.cfg.ID), BrokerEpoch: b.brokerEpoch(), Topic: r.tp.Topic, Partition: r.tp.Partition,
			LeaderEpoch: int32(a.LeaderEpoch), MinLeaderEpoch: int32(a.MinLeaderEpoch), TruncationOffset: int64(a.TruncationOffset),
		})
		if err != nil {
			done(twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT)
			return
		}
		done(twinlog.Epoch(resp.GetLeaderEpoch()), resp.GetError())
	}()
}

// SourceLeader answers from the source client's metadata cache at once
// when it may, else after a Metadata RPC.
func (e mirrorEnv) SourceLeader(refresh bool, done func(runner.SourceLeader, pb.ErrorCode, error)) {
	r := e.r
	r.src.Leader(r.ctx, r.tp, refresh, func(pl source.PartitionLeader, code pb.ErrorCode, err error) {
		done(runner.SourceLeader{TopicID: pl.TopicID, Leader: pl.Leader, LeaderEpoch: pl.LeaderEpoch, Addr: pl.Addr}, code, err)
	})
}

// Fetch sends one Fetch{MIRROR}, which long-polls at the source.
func (e mirrorEnv) Fetch(step runner.SendFetch, done func(*runner.Answer, error)) {
	r, b := e.r, e.r.b
	req := source.FetchRequest{
		RequesterClusterID: b.clusterID(), TopicPartition: r.tp, TopicID: r.topicID,
		FetchOffset: step.Request.FetchOffset, CurrentLeaderEpoch: step.Request.CurrentLeaderEpoch, LastFetchedEpoch: step.Request.LastFetchedEpoch,
		MaxWait: b.cfg.ReplicaFetchMaxWait, MaxBytes: int32(b.cfg.ReplicaFetchMaxBytes),
	}
	r.src.Fetch(r.ctx, step.Leader.Addr, req, func(resp *pb.FetchPartitionResponse, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(runner.AnswerOf(resp), nil)
	})
}

// mirrorPartition is the partition as its runner uses it
// (runner.Partition), under p.mu.
type mirrorPartition struct{ p *partition }

func (m mirrorPartition) Lock()                     { m.p.mu.Lock() }
func (m mirrorPartition) Unlock()                   { m.p.mu.Unlock() }
func (m mirrorPartition) Replica() *replica.Replica { return m.p.r }
func (m mirrorPartition) Usable() bool              { return m.p.usableLocked() == nil }
func (m mirrorPartition) ProcessReady()             { m.p.processReadyLocked() }
func (m mirrorPartition) NoteWritable(w bool, le twinlog.Epoch) {
	m.p.mirrorWritable, m.p.mirrorWritableLE = w, le
}

// AppendMirrored appends the session's validated batches (no copy, no
// second crc pass); with FlushEveryBatch the log is flushed before the
// session goes on.
func (m mirrorPartition) AppendMirrored(_ *runner.Answer, metas []replica.BatchMeta, batches storage.Validated) error {
	p, b := m.p, m.p.b
	if err := p.r.AppendAsMirrorLeader(metas, b.nowMs()); err != nil {
		return err
	}
	p.fetched = batches
	p.processReadyLocked()
	b.mobs.ObserveMirrorBytes(p.tp.Topic, p.tp.Partition, batches.Bytes())
	if b.cfg.FlushPolicy == FlushEveryBatch {
		if err := p.log.Flush(); err != nil {
			p.failLocked(err)
		}
	}
	return nil
}

// mirrorObserver turns what the runner does into metrics and the status
// heartbeats carry.
type mirrorObserver struct {
	runner.NoObserver
	r *mirrorRunner
}

func (o mirrorObserver) LeadershipEnded() {
	o.r.b.mobs.ForgetMirrorPartition(o.r.tp.Topic, o.r.tp.Partition)
}

func (o mirrorObserver) Transition(t plan.Transition) {
	o.r.b.mobs.ObserveMirrorState(o.r.rn.Mirror(), o.r.tp.Topic, o.r.tp.Partition, t.From, t.To)
}

func (o mirrorObserver) Truncated(t runner.Truncation) {
	if t.Err != nil {
		return
	}
	o.r.b.obs.ObserveTruncation(string(t.Reason))
	o.r.b.mobs.ObserveMirrorTruncation(o.r.tp.Topic, o.r.tp.Partition, string(t.Reason), max(0, int64(t.Before-t.After)))
}

func (o mirrorObserver) Taints(a plan.AddTaints, refused []twinlog.BrokerID) {
	if len(refused) == 0 {
		o.r.b.mobs.ObserveMirrorTaints(o.r.tp.Topic, o.r.tp.Partition, len(a.Taints))
	}
}

func (o mirrorObserver) FetchEvent(ev plan.Event) {
	if ev, ok := ev.(plan.FetchError); ok {
		o.r.b.mobs.ObserveMirrorFetchError(o.r.tp.Topic, o.r.tp.Partition, ev.Error.String())
	}
}

// Status publishes the partition's mirror status for heartbeats (SPEC
// §6.11) and metrics.
func (o mirrorObserver) Status(st *pb.MirrorPartitionStatus) {
	r := o.r
	if st == nil {
		// A once-mirrored topic in no mirror keeps a runner only for its
		// taints: no mirror status, heartbeat entry or metrics.
		if r.status.Swap(nil) != nil && r.rn.Mirror() == "" {
			r.b.mobs.ForgetMirrorPartition(r.tp.Topic, r.tp.Partition)
		}
		return
	}
	r.status.Store(st)
	r.b.mobs.ObserveMirrorPartition(st)
}

// LocalBatches lists the batches of tp's local log, log start to LEO
// (offsets and record epochs; for tests and tools).
func (b *Broker) LocalBatches(tp twinlog.TopicPartition) ([]storage.BatchView, error) {
	p := b.partition(tp)
	if p == nil {
		return nil, ErrPartitionClosed
	}
	p.mu.Lock()
	from, leo := p.r.LogStartOffset(), p.r.LogEndOffset()
	p.mu.Unlock()
	var out []storage.BatchView
	for from < leo {
		rr, err := p.log.Read(from, 8<<20, leo)
		if err != nil {
			return nil, err
		}
		bs, err := storage.SplitBatches(rr.Batches)
		if err != nil {
			return nil, err
		}
		if len(bs) == 0 {
			break
		}
		out = append(out, bs...)
		from = bs[len(bs)-1].NextOffset()
	}
	return out, nil
}
