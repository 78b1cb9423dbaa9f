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

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/assign"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/runner"
	"github.com/twinlog/twinlog/mirror/source"
	"github.com/twinlog/twinlog/storage"
)

// The mirror runner (SPEC §6, NATS-style leader-only loop): one goroutine
// per hosted partition of a mirror topic. While this broker leads the
// partition it owns a plan.Machine, feeds it leadership, desired-state,
// replica-status, RPC-result and fetch events, and performs its actions.
// Blocking work (controller and source RPCs, __mirror_state writes, the
// Fetch{MIRROR} loop) runs in helper goroutines that report back on evc;
// __mirror_state writes go through one ordered writer per runner so a key's
// records land in the order the machine issued them.

// mirrorRunner drives one partition's mirror machine.
type mirrorRunner struct {
	b       *Broker
	p       *partition
	tp      twinlog.TopicPartition
	topicID string
	log     *slog.Logger

	kick   chan struct{}
	evc    chan plan.Event
	cancel context.CancelFunc
	done   chan struct{}
	status atomic.Pointer[pb.MirrorPartitionStatus]
	// srcLE is the highest source leader epoch a fetch was made in
	// (plan.SourceLeaderEpochUsable); fetch loops of successive sessions
	// may overlap briefly.
	srcLE atomic.Int32

	// Runner goroutine only.
	core       runner.Core
	mirror     string
	src        *source.Client
	bootstrap  []string
	fetchStop  context.CancelFunc
	writes     chan writeJob
	writerStop context.CancelFunc
}

type writeJob struct {
	seq   uint64
	key   []byte
	value proto.Message
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
		log:  p.logger.With("component", "mirror"),
		kick: make(chan struct{}, 1), evc: make(chan plan.Event, 256),
		cancel: cancel, done: make(chan struct{}),
	}
	r.core.Leadership.KnownLE = twinlog.NoEpoch
	r.core.Rejected = func(ev plan.Event, err error) {
		r.log.Warn("mirror request rejected", "event", fmt.Sprintf("%T", ev), "err", err)
	}
	go r.run(ctx)
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

// post delivers an event to the runner (dropped once it stopped). It never
// blocks its caller, who may hold a partition lock the runner is waiting
// for, or be the runner itself: with a full queue it delivers from a
// goroutine (events carry their Seq or Session, so order does not matter
// for correctness).
func (r *mirrorRunner) post(ev plan.Event) {
	select {
	case r.evc <- ev:
	case <-r.done:
	default:
		go func() {
			select {
			case r.evc <- ev:
			case <-r.done:
			}
		}()
	}
}

func (r *mirrorRunner) run(ctx context.Context) {
	defer close(r.done)
	defer r.teardown()
	t := time.NewTicker(r.b.cfg.TickInterval)
	defer t.Stop()
	for {
		r.observe(ctx)
		r.drain(ctx)
		r.settleTaintsPending()
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-t.C:
			if r.core.M != nil {
				r.core.Step(plan.Tick{NowMs: r.b.nowMs()})
			}
		case ev := <-r.evc:
			r.onEvent(ev)
		}
	}
}

func (r *mirrorRunner) teardown() {
	r.stopFetcher()
	r.b.mobs.ForgetMirrorPartition(r.tp.Topic, r.tp.Partition)
	if r.writerStop != nil {
		r.writerStop()
		r.writerStop = nil
	}
	r.status.Store(nil)
}

// onEvent feeds an outcome to the machine; BumpDone also tells the runner
// which LE is its own.
func (r *mirrorRunner) onEvent(ev plan.Event) { r.core.Post(ev) }

// observe compares leadership, desired state and replica status with what
// the machine knows and steps it accordingly.
func (r *mirrorRunner) observe(ctx context.Context) {
	b := r.b
	p := r.p
	p.mu.Lock()
	usable := p.usableLocked() == nil
	role, le := p.r.Role(), p.r.LeaderEpoch()
	// The truncation points applied with le: BecameLeader in an LE created
	// by a bump whose answer was lost must do its truncation first (§6.2f).
	truncPts := runner.TruncationPointsOf(p.state)
	var replicas []twinlog.BrokerID
	if p.state != nil {
		replicas = assign.IDs(p.state.GetReplicas())
	}
	var lead plan.ReplicaStatus
	if usable && role == replica.RoleLeader {
		lead = runner.LeaderStatus(p.r, replicas, b.cfg.ID)
	}
	p.mu.Unlock()

	b.metaMu.Lock()
	view := runner.ViewOf(b.image, r.tp.Topic)
	b.metaMu.Unlock()
	st := view.Status(lead)
	desired, bootstrap, mirror := view.Desired, view.Bootstrap, view.Mirror

	if r.src == nil {
		r.src = source.New(source.Dialer(b.conn), bootstrap, b.cfg.RPCTimeout)
	} else if !slices.Equal(bootstrap, r.bootstrap) {
		r.src.SetBootstrap(bootstrap)
	}
	r.bootstrap = slices.Clone(bootstrap)
	if desired.SourceClusterID == "" {
		desired.SourceClusterID = r.src.ClusterID()
	}
	r.mirror = mirror

	leading := usable && role == replica.RoleLeader
	end, begin := r.core.Leadership.Observe(leading, le)
	if !leading {
		if end {
			r.core.Ended()
			b.mobs.ForgetMirrorPartition(r.tp.Topic, r.tp.Partition)
			r.stopFetcher()
		}
		r.publishStatus()
		return
	}
	if r.core.M == nil {
		initial := b.mirrorConfigMs(b.cfg.MirrorRetryInitialBackoff.Milliseconds(), metadata.KeyMirrorRetryInitialBackoff)
		maxBackoff := b.mirrorConfigMs(b.cfg.MirrorRetryMaxBackoff.Milliseconds(), metadata.KeyMirrorRetryMaxBackoff)
		if maxBackoff == 0 {
			maxBackoff = max(initial, 300000)
		}
		m, err := plan.New(plan.Config{
			BrokerID: b.cfg.ID, Mirror: mirror, TopicPartition: r.tp, TopicID: r.topicID,
			PendingTimeoutMs:      b.mirrorConfigMs(b.cfg.MirrorPendingTimeout.Milliseconds(), metadata.KeyMirrorPendingTimeoutMs),
			RetryInitialBackoffMs: initial,
			RetryMaxBackoffMs:     max(maxBackoff, initial),
			RetryMaxAttempts:      int32(b.mirrorConfigMs(int64(b.cfg.MirrorRetryMaxAttempts), metadata.KeyMirrorRetryMaxAttempts)),
		}, plan.Deps{Log: runner.ReplicaLog{Replica: p.r, Lock: &p.mu}, Rand: &lockedRand{r: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(b.cfg.ID)))}})
		if err != nil {
			r.log.Error("mirror machine", "err", err)
			return
		}
		r.core.M = m
		// The machine's clock starts at the first Tick: set it before any
		// deadline (PREPARING, PENDING) is computed from it.
		r.core.Step(plan.Tick{NowMs: b.nowMs()})
	}
	if end {
		// A leadership this machine did not cause ends before the records
		// load (runner.Leadership.Observe).
		r.core.Ended()
		r.stopFetcher()
	}
	if begin {
		// A leadership this machine did not cause: load the state records
		// (read up to the HW) and start from them.
		run, lmle, err := b.mirrorRecords(ctx, mirror, r.tp, r.topicID)
		if err != nil {
			r.log.Debug("read __mirror_state", "err", err)
			return // retried on the next tick
		}
		r.core.Began(le, desired)
		r.ensureWriter()
		r.core.Step(plan.BecameLeader{LeaderEpoch: le, Run: run, Lmle: lmle, Desired: desired, TruncationPoints: truncPts})
		r.loadTaints(lmle)
	}
	r.core.ApplyDesired(desired)
	r.core.NoteStatus(st)
	r.publishStatus()
}

// settleTaintsPending lets the leader serve follower fetches once this
// leadership has loaded the durable taints and owns its state (SPEC §6.4,
// runner.Leadership.TaintsSettled). A __mirror_state that cannot be read
// keeps them pending (observe returns before loading).
func (r *mirrorRunner) settleTaintsPending() {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.usableLocked() != nil || !r.core.Leadership.TaintsSettled(r.core.M, p.r) {
		return
	}
	p.r.SetTaintsPending(false)
	p.processReadyLocked()
}

// loadTaints installs exactly the loaded record's taints as this
// leadership's (SPEC §6.4: a leader loads the taints before serving follower
// fetches, which taints-pending holds until then). Taints the replica kept
// from an earlier leadership of this broker may have been durably cleared by
// another leader since; kept, they would cut that ISR member below the HW
// (§8.7; simulator seeds 312, 101). A clear the replica did in memory is
// settled by the record too: one it still holds taints the follower again
// (it repairs it again), one it no longer holds is durably clear.
func (r *mirrorRunner) loadTaints(lmle *pb.MirrorLmleRecord) {
	ts := runner.TaintsOf(lmle)
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.usableLocked() != nil {
		return
	}
	p.r.ResetTaints(ts, r.b.nowMs())
	p.processReadyLocked()
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

// applyDesired turns metadata desired-state changes into operator events.
func (r *mirrorRunner) publishStatus() {
	if r.core.M == nil || !r.core.Leadership.Leading || r.mirror == "" {
		// A once-mirrored topic in no mirror keeps a runner only for its
		// taints: no mirror status, heartbeat entry or metrics.
		if r.status.Swap(nil) != nil && r.mirror == "" {
			r.b.mobs.ForgetMirrorPartition(r.tp.Topic, r.tp.Partition)
		}
		return
	}
	st := r.core.M.Status()
	st.DesiredState = r.core.Desired().State
	r.status.Store(st)
	r.b.mobs.ObserveMirrorPartition(st)
}

// drain performs the machine's actions until it has none.
func (r *mirrorRunner) drain(ctx context.Context) {
	r.core.Drain(func(a plan.Action) { r.perform(ctx, a) }, nil)
	r.publishStatus()
}

func (r *mirrorRunner) perform(ctx context.Context, a plan.Action) {
	b, p := r.b, r.p
	switch a := a.(type) {
	case plan.QueryLMLE:
		go r.queryLMLE(ctx, a.Seq)
	case plan.BumpLeaderEpoch:
		r.core.Leadership.Sent()
		go r.bump(ctx, a)
	case plan.TruncateTo:
		r.truncate(a.Seq, a.Offset, false, a.Reason)
	case plan.TruncateFully:
		r.truncate(a.Seq, a.RestartAt, true, a.Reason)
	case plan.SetAlignedEpoch:
		p.mu.Lock()
		if p.usableLocked() == nil {
			p.r.SetAlignedEpoch(a.Epoch)
			p.processReadyLocked()
		}
		p.mu.Unlock()
	case plan.WriteRunRecord:
		r.enqueueWrite(a.Seq, runStateKey(plan.RunKey{Mirror: r.mirror, TopicID: r.topicID, Partition: r.tp.Partition}), a.Record)
	case plan.WriteLmleRecord:
		r.enqueueWrite(a.Seq, lmleStateKey(plan.LmleKey{TopicID: r.topicID, Partition: r.tp.Partition}), a.Record)
	case plan.StartFetcher:
		r.startFetcher(ctx, a)
	case plan.StopFetcher:
		r.stopFetcher()
	case plan.SetWritable:
		p.mu.Lock()
		if p.usableLocked() == nil {
			p.mirrorWritable, p.mirrorWritableLE = a.Writable, a.LeaderEpoch
			// A writable partition is a normal one: its leader assigns its
			// own LE from now on (assign(LE, LEO), SPEC §6.7 step 5).
			p.r.SetMirrorPartition(!a.Writable)
			p.r.SetWritable(a.Writable)
			p.processReadyLocked()
		}
		p.mu.Unlock()
		r.log.Info("mirror partition writable", "writable", a.Writable, "leader_epoch", a.LeaderEpoch)
	case plan.FailPendingProduces:
		// SetWritable(false) already failed them with READ_ONLY_TOPIC.
	case plan.AddTaints:
		if a.Seq > 0 {
			r.addRunTaints(a)
			return
		}
		p.mu.Lock()
		for _, t := range a.Taints {
			p.r.SetTaint(t.Replica, replica.Taint{Epoch: t.Epoch, Offset: t.Offset})
		}
		p.mu.Unlock()
		b.mobs.ObserveMirrorTaints(r.tp.Topic, r.tp.Partition, len(a.Taints))
	case plan.ClearTaint:
		// The cleared taint is durable (acks=all): only now may the
		// follower join the ISR (SPEC §6.6 step 4).
		p.mu.Lock()
		if p.usableLocked() == nil {
			p.r.ConfirmTaintCleared(a.Replica, b.nowMs())
			p.processReadyLocked()
		}
		p.mu.Unlock()
	case plan.StopResult:
		r.log.Warn("mirror stop not done", "error", a.Error)
	case plan.Transition:
		r.log.Info("mirror state", "from", a.From, "to", a.To, "reason", a.Reason)
		b.mobs.ObserveMirrorState(r.mirror, r.tp.Topic, r.tp.Partition, a.From, a.To)
	}
}

// addRunTaints installs a run's taints (SPEC §6.6 step 4) only if none names
// a member of the replica's maximal ISR, checked under p.mu with the
// install: the machine's ReplicaStatus may predate an ISR expansion that a
// fetch proposed since, and the controller may commit it whatever the
// leader learns later (§8.19). The answer lets the machine write them, or
// keeps the run PENDING.
func (r *mirrorRunner) addRunTaints(a plan.AddTaints) {
	ts := make(map[twinlog.BrokerID]replica.Taint, len(a.Taints))
	var refused []twinlog.BrokerID
	for _, t := range a.Taints {
		ts[t.Replica] = replica.Taint{Epoch: t.Epoch, Offset: t.Offset}
		refused = append(refused, t.Replica)
	}
	p := r.p
	p.mu.Lock()
	if p.usableLocked() == nil {
		refused = p.r.AddRunTaints(ts)
		p.processReadyLocked()
	}
	p.mu.Unlock()
	if len(refused) == 0 {
		r.b.mobs.ObserveMirrorTaints(r.tp.Topic, r.tp.Partition, len(a.Taints))
	} else {
		r.log.Info("mirror taints refused: replicas joining the ISR", "replicas", refused)
	}
	r.post(plan.TaintsAdded{Seq: a.Seq, Refused: refused})
}

func (r *mirrorRunner) queryLMLE(ctx context.Context, seq uint64) {
	b := r.b
	lmle, code, err := r.src.LastMirroredEpoch(ctx, b.clusterID(), r.topicID, r.tp)
	if err != nil {
		code = pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
		r.log.Debug("get last mirrored epochs", "err", err)
	}
	r.post(plan.LMLEAnswer{Seq: seq, LMLE: lmle, Error: code})
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

// bump asks the controller for a new leader epoch and reports it once the
// local replica runs in it (so the truncation that follows is in that LE).
func (r *mirrorRunner) bump(ctx context.Context, a plan.BumpLeaderEpoch) {
	b := r.b
	fail := func(code pb.ErrorCode) { r.post(plan.BumpFailed{Seq: a.Seq, Error: code}) }
	ctl, err := b.controller()
	if err != nil {
		fail(pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RPCTimeout)
	resp, err := ctl.BumpLeaderEpoch(rctx, &pb.BumpLeaderEpochRequest{
		BrokerId: int32(b.cfg.ID), BrokerEpoch: b.epoch.Load(), Topic: r.tp.Topic, Partition: r.tp.Partition,
		LeaderEpoch: int32(a.LeaderEpoch), MinLeaderEpoch: int32(a.MinLeaderEpoch), TruncationOffset: int64(a.TruncationOffset),
	})
	cancel()
	if err != nil {
		fail(pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT)
		return
	}
	if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		fail(resp.GetError())
		return
	}
	want := twinlog.Epoch(resp.GetLeaderEpoch())
	for {
		ch := b.Changed()
		r.p.mu.Lock()
		le, role := r.p.r.LeaderEpoch(), r.p.r.Role()
		r.p.mu.Unlock()
		if ev, done := runner.BumpOutcome(a.Seq, want, le, role == replica.RoleLeader); done {
			r.post(ev)
			return
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

func (r *mirrorRunner) truncate(seq uint64, o twinlog.Offset, full bool, reason plan.TruncateReason) {
	p := r.p
	p.mu.Lock()
	before := p.r.LogEndOffset()
	err := p.usableLocked()
	if err == nil {
		if full {
			// Restart empty at the source's log start, never a cut there
			// (SPEC §6.3 OFFSET_OUT_OF_RANGE, §6.6 step 2).
			err = p.r.TruncateFullyAsLeader(o, r.b.nowMs())
		} else {
			err = p.r.TruncateAsLeader(o, r.b.nowMs())
		}
		p.processReadyLocked()
	}
	after := p.r.LogEndOffset()
	p.mu.Unlock()
	if err != nil {
		r.log.Warn("mirror truncation failed", "offset", o, "err", err)
		return // leadership loss arrives through observe
	}
	r.log.Warn("mirror truncation", "reason", reason, "offset", o, "log_end_offset_before", before, "log_end_offset", after)
	r.b.obs.ObserveTruncation(string(reason))
	r.b.mobs.ObserveMirrorTruncation(r.tp.Topic, r.tp.Partition, string(reason), max(0, int64(before-after)))
	r.core.Step(plan.TruncationDone{Seq: seq})
}

// ensureWriter starts the ordered __mirror_state writer of this leadership.
func (r *mirrorRunner) ensureWriter() {
	if r.writerStop != nil {
		r.writerStop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.writerStop = cancel
	ch := make(chan writeJob, 256)
	r.writes = ch
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case j := <-ch:
				err := r.b.writeMirrorState(ctx, r.tp.Topic, j.key, j.value)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					r.log.Debug("write __mirror_state", "err", err)
					r.post(plan.WriteFailed{Seq: j.seq, Error: pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
					continue
				}
				r.post(plan.WriteAcked{Seq: j.seq})
			}
		}
	}()
}

func (r *mirrorRunner) enqueueWrite(seq uint64, key []byte, v proto.Message) {
	select {
	case r.writes <- writeJob{seq: seq, key: key, value: v}:
	default:
		r.post(plan.WriteFailed{Seq: seq, Error: pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
	}
}

func (r *mirrorRunner) stopFetcher() {
	if r.fetchStop != nil {
		r.fetchStop()
		r.fetchStop = nil
	}
}

func (r *mirrorRunner) startFetcher(ctx context.Context, a plan.StartFetcher) {
	r.stopFetcher()
	fctx, cancel := context.WithCancel(ctx)
	r.fetchStop = cancel
	s := runner.NewFetchSession(runner.FetchConfig{
		Session: a.Session, MinSourceLeaderEpoch: a.MinSourceLeaderEpoch, TopicID: r.topicID,
		Seen: &r.srcLE, Log: mirrorLog{r: r, session: fctx}, Post: r.postFetch, NowMs: r.b.nowMs,
	})
	go r.fetchLoop(fctx, s)
}

// fetchLoop performs the steps of one Fetch{MIRROR} session (SPEC §6.3,
// runner.FetchSession) with blocking RPCs to the source until the session
// is done or ctx ends. The session decides everything; the source's
// long-poll paces the fetches.
func (r *mirrorRunner) fetchLoop(ctx context.Context, s *runner.FetchSession) {
	b := r.b
	for st := s.Start(); ctx.Err() == nil; {
		switch step := st.(type) {
		case runner.LookupLeader:
			pl, code, err := r.src.Leader(ctx, r.tp, step.Refresh)
			st = s.Leader(runner.SourceLeader{TopicID: pl.TopicID, Leader: pl.Leader, LeaderEpoch: pl.LeaderEpoch, Addr: pl.Addr}, code, err)
		case runner.SendFetch:
			resp, err := r.src.Fetch(ctx, step.Leader.Addr, source.FetchRequest{
				RequesterClusterID: b.clusterID(), TopicPartition: r.tp, TopicID: r.topicID,
				FetchOffset: step.Request.FetchOffset, CurrentLeaderEpoch: step.Request.CurrentLeaderEpoch, LastFetchedEpoch: step.Request.LastFetchedEpoch,
				MaxWait: b.cfg.ReplicaFetchMaxWait, MaxBytes: int32(b.cfg.ReplicaFetchMaxBytes),
			})
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				st = s.Answer(nil, err)
				continue
			}
			a := &runner.Answer{
				FetchAnswer:  plan.FetchAnswer{Error: resp.GetError(), LogStartOffset: twinlog.Offset(resp.GetLogStartOffset())},
				ErrorMessage: resp.GetErrorMessage(), HighWatermark: twinlog.Offset(resp.GetHighWatermark()),
				LogEndOffset: twinlog.Offset(resp.GetLogEndOffset()), Records: resp.GetRecords(),
			}
			if d := resp.GetDivergingEpoch(); d != nil {
				a.Diverging = &plan.Diverging{Epoch: twinlog.Epoch(d.GetEpoch()), EndOffset: twinlog.Offset(d.GetEndOffset())}
			}
			st = s.Answer(a, nil)
		case runner.Wait:
			if !sleep(ctx, step.D) {
				return
			}
			st = s.Resume()
		case runner.Done:
			return
		}
	}
}

// postFetch hands a fetch session's event to the machine, counting source
// errors and logging the answers that prove the log no prefix of the
// source's.
func (r *mirrorRunner) postFetch(ev plan.Event) {
	switch ev := ev.(type) {
	case plan.FetchError:
		r.b.mobs.ObserveMirrorFetchError(r.tp.Topic, r.tp.Partition, ev.Error.String())
	case plan.FetchStraddle:
		r.log.Warn("mirror fetch: source batch straddles the log end: the log is no prefix of the source's", "base", ev.BaseOffset, "last", ev.LastOffset)
	case plan.FetchForeignEpoch:
		r.log.Warn("mirror fetch: source batch epoch below the latest cached epoch", "offset", ev.BaseOffset, "epoch", ev.Epoch)
	}
	r.post(ev)
}

// mirrorLog is the partition as a fetch session uses it
// (runner.Log): its calls run under the partition's mutex. session ends
// when the machine stops the session (stopFetcher): from then on the
// partition is no longer the session's to append to, though an answer may
// still be in flight — the machine may be recording the LMLE and bumping
// for a stop, and a batch appended in the LE of that bump would precede
// the writable leadership's own epoch entry.
type mirrorLog struct {
	r       *mirrorRunner
	session context.Context
}

func (l mirrorLog) Locked(f func(runner.LockedLog)) {
	p := l.r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	f(l)
}

func (l mirrorLog) Leading() bool {
	p := l.r.p
	return l.session.Err() == nil && p.usableLocked() == nil && p.r.Role() == replica.RoleLeader
}

func (l mirrorLog) Position() plan.LeaderLog {
	p := l.r.p
	return plan.LeaderLog{LogEndOffset: p.r.LogEndOffset(), LeaderEpoch: p.r.LeaderEpoch(), LatestEpoch: p.r.LatestEpoch()}
}

// AppendMirrored appends the session's validated batches (no copy, no
// second crc pass); with FlushEveryBatch the log is flushed before the
// session goes on.
func (l mirrorLog) AppendMirrored(metas []replica.BatchMeta, batches storage.Validated) error {
	r, p, b := l.r, l.r.p, l.r.b
	if err := p.r.AppendAsMirrorLeader(metas, b.nowMs()); err != nil {
		r.log.Warn("mirror append rejected", "err", err)
		return err
	}
	p.fetched = batches
	p.processReadyLocked()
	b.mobs.ObserveMirrorBytes(r.tp.Topic, r.tp.Partition, batches.Bytes())
	if b.cfg.FlushPolicy == FlushEveryBatch {
		if err := p.log.Flush(); err != nil {
			p.failLocked(err)
		}
	}
	return nil
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
