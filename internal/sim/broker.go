package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/alter"
	"github.com/twinlog/twinlog/broker/assign"
	"github.com/twinlog/twinlog/broker/follow"
	"github.com/twinlog/twinlog/broker/metaloop"
	"github.com/twinlog/twinlog/broker/ready"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/broker/session"
	"github.com/twinlog/twinlog/broker/wire"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/storage"
)

const logDir = "/data"

// simBroker is the broker shell of the simulator: the same Ready handling as
// broker/partition.go, over a storage.LogDir on a crashable MemFS, with the
// network replaced by simulated messages.
type simBroker struct {
	s   *Sim
	id  int32
	fs  *storage.MemFS
	dir *storage.LogDir
	up  bool
	inc int

	prevEpoch  twinlog.BrokerEpoch // from the clean-shutdown file
	keeper     *session.Keeper     // registration and heartbeats (broker/session)
	epoch      int64               // registered broker epoch, 0 before
	registered bool
	image      *metadata.Image
	meta       *metaloop.Loop // the metadata loop (broker/metaloop), from registration
	parts      map[twinlog.TopicPartition]*simPart
	// sorted and followed cache sortedParts and followParts; nil after
	// any change of parts (partsChanged). Never changed in place: a
	// caller may range over them while parts changes.
	sorted   []*simPart
	followed []follow.Partition

	nextTick, nextFlush, nextCheckpoint int64
	// fetchers: one per leader broker this broker follows a partition
	// from (broker/fetcher.go).
	fetchers map[twinlog.BrokerID]*follow.Fetcher
	// mstate: what this incarnation read of __mirror_state (statehost.go).
	mstate *state.Store
	// groups: this incarnation's group coordinators (groups.go), nil
	// without Config.Groups.
	groups *simGroups
	// authz is this incarnation's authorizer (authz.go); caughtUp: its
	// image has held its registration once.
	authz    *authz.Checker
	caughtUp bool
	// lostLEO holds each partition's LEO at the last crash, to detect
	// lossy shutdowns when the log is reopened.
	lostLEO map[string]int64
	// pids is this incarnation's producer id block (idempotent.go).
	pids serve.ProducerIDBlock
}

// simPart is one hosted replica.
type simPart struct {
	b       *simBroker
	tp      twinlog.TopicPartition
	key     string
	topicID string
	log     *storage.Log
	r       *replica.Replica
	shadow  shadowLog

	proposals map[replica.ProposalID]*produceReq
	results   map[replica.ProposalID]*produceReq
	nextID    replica.ProposalID
	fetched   storage.Validated // the batches of the append in progress (simReadyHost.Fetched)

	// validatedLE is the LE of the last fetch answered NONE without
	// divergence (its own LE while leading): SPEC §8.9's suspension ends
	// when it reaches the latest unclean election.
	validatedLE int32
	leaderLE    int32 // LE of the last leader HW observation
	leaderHW    int64

	lastDiverging replica.FetchRequest // request of the last DivergingEpoch answer
	knownBugs     map[string]bool      // known bugs seen on this replica
	stalled       bool                 // a known bug stalled it: liveness skips it
}

func newBroker(s *Sim, id int32) *simBroker {
	return &simBroker{s: s, id: id, fs: storage.NewMemFS()}
}

func (b *simBroker) node() nodeID { return nodeID(b.id) }

func (b *simBroker) logOptions() storage.Options {
	return storage.Options{
		Clock:           b.s.clock,
		SegmentMaxBytes: b.s.cfg.SegmentMaxBytes,
	}
}

// start opens the log dir (taking the clean-shutdown file) and registers.
func (b *simBroker) start() {
	s := b.s
	d, err := storage.OpenLogDir(b.fs, logDir, b.logOptions())
	if err != nil {
		s.fail("storage open", "broker %d: open log dir: %v", b.id, err)
		return
	}
	// The simulated disk only loses unsynced writes: a log that fails to
	// open (the real broker takes it offline and goes on) is a storage bug.
	if off := d.Offline(); len(off) > 0 {
		s.fail("storage open", "broker %d: logs offline: %v", b.id, off)
		return
	}
	b.dir = d
	b.prevEpoch = storage.PreviousBrokerEpoch([]storage.CleanShutdown{d.CleanShutdown()})
	b.up = true
	b.inc++
	b.registered = false
	b.epoch = 0
	b.image = metadata.New("")
	b.authz, b.caughtUp = s.brokerAuthz(), false
	b.pids = serve.ProducerIDBlock{}
	b.meta = metaloop.New(simMeta{b}, simMeta{b}, metaloop.Config{BrokerID: b.id, Idle: time.Duration(s.cfg.MetadataPollMs) * time.Millisecond,
		Backoff: 100 * time.Millisecond, MaxSnapshotItems: metadata.MaxSnapshotItems})
	b.parts = map[twinlog.TopicPartition]*simPart{}
	b.partsChanged()
	b.fetchers = map[twinlog.BrokerID]*follow.Fetcher{}
	b.mstate = state.NewStore(simStateLog{b}, func(sp int32, off twinlog.Offset, err error) {
		s.fail("§6.4 __mirror_state record", "broker %d partition %d offset %d: %v", b.id, sp, off, err)
	})
	s.tracef("broker %d start, previous epoch %d", b.id, b.prevEpoch)
	host := simSession{b, b.inc}
	b.keeper = session.NewKeeper(host, host, session.Config{HeartbeatInterval: time.Duration(s.cfg.HeartbeatMs) * time.Millisecond, PreviousEpoch: b.prevEpoch})
	b.keeper.Start()
	b.startGroups()
}

// simSession is a broker incarnation's session.Keeper host and Env: the
// simulated network to the controller, with the shell's RPC deadline (no
// answer in time counts as none).
type simSession struct {
	b   *simBroker
	inc int
}

func (e simSession) After(d time.Duration, f func()) { e.b.s.after(d.Milliseconds(), f) }

// askController carries one request of b's to the controller node and
// its answer back over the simulated network: answer runs at the
// controller when the request arrives, done gets its result, or
// errNoAnswer once timeoutMs (the shell's deadline) passes first. reqKind
// and respKind name the two messages.
func askController[Resp any](b *simBroker, reqKind, respKind string, timeoutMs int64, answer func(c *controller) Resp, done func(Resp, error)) {
	s := b.s
	reply := s.once(timeoutMs, func() {
		var none Resp
		done(none, errNoAnswer)
	})
	s.net.send(b.node(), controllerNode, reqKind, func() {
		resp := answer(s.ctl)
		s.net.send(controllerNode, b.node(), respKind, func() { reply(func() { done(resp, nil) }) })
	})
}

func (e simSession) Register(req *pb.RegisterBrokerRequest, done func(*pb.RegisterBrokerResponse, error)) {
	b := e.b
	askController(b, "register", "register-resp", b.s.cfg.RPCTimeoutMs, func(c *controller) *pb.RegisterBrokerResponse {
		return rpc(c, fmt.Sprintf("register %d", b.id), false, brokerCaller(b.s, int32(b.id), pb.ControllerService_RegisterBroker_FullMethodName), c.svc.RegisterBroker, req)
	}, done)
}

func (e simSession) Heartbeat(req *pb.BrokerHeartbeatRequest, done func(*pb.BrokerHeartbeatResponse, error)) {
	b := e.b
	askController(b, "heartbeat", "heartbeat-resp", b.s.cfg.RPCTimeoutMs, func(c *controller) *pb.BrokerHeartbeatResponse {
		return rpc(c, fmt.Sprintf("heartbeat %d", b.id), false, brokerCaller(b.s, int32(b.id), pb.ControllerService_BrokerHeartbeat_FullMethodName), c.svc.BrokerHeartbeat, req)
	}, done)
}

func (e simSession) RegisterRequest() *pb.RegisterBrokerRequest {
	b := e.b
	req := &pb.RegisterBrokerRequest{BrokerId: b.id, IncarnationId: fmt.Sprintf("%d.%d", b.id, e.inc),
		Host: b.s.clusterID, Port: 9092 + b.id, LogDirs: []string{logDir}, ClusterId: b.s.clusterID}
	if b.s.cfg.Groups > 0 { // a Kafka listener: FindCoordinator answers only brokers with one
		req.KafkaHost, req.KafkaPort = b.s.clusterID, 19092+b.id
	}
	return req
}

func (e simSession) HeartbeatRequest() *pb.BrokerHeartbeatRequest {
	return &pb.BrokerHeartbeatRequest{BrokerId: e.b.id, AppliedOffset: e.b.image.Offset()}
}

func (e simSession) Registered(epoch int64, again bool) {
	b, s := e.b, e.b.s
	s.tracef("broker %d registered epoch %d (previous %d, again %t)", b.id, epoch, b.epoch, again)
	b.registered = true
	b.epoch = epoch
	b.meta.Start()
}

func (e simSession) RegisterFailed(err error, fatal bool) {
	if fatal {
		e.b.s.fail("register", "broker %d: %v", e.b.id, err)
	}
}

func (e simSession) HeartbeatAnswered(req *pb.BrokerHeartbeatRequest, _ *pb.BrokerHeartbeatResponse, _ error, reregister bool) {
	if reregister {
		e.b.s.tracef("broker %d heartbeat: stale broker epoch %d; re-registering", e.b.id, req.GetBrokerEpoch())
	}
}

// stopLoops stops the broker's session, metadata loop and fetchers: no
// answer of this incarnation reaches them any more.
func (b *simBroker) stopLoops() {
	b.keeper.Stop()
	b.meta.Stop()
	for _, f := range b.fetchers {
		f.Stop()
	}
	b.fetchers = nil
}

// crash stops the broker as kill -9 would: nothing is flushed. The next
// start sees only what was synced (MemFS.CrashClone).
func (b *simBroker) crash() {
	s := b.s
	b.stopGroups(false)
	for _, p := range b.sortedParts() {
		p.failPending()
	}
	lastLEO := map[string]int64{}
	for _, p := range b.sortedParts() {
		lastLEO[p.key] = int64(p.r.LogEndOffset())
	}
	b.stopLoops()
	b.up = false
	b.dir = nil
	b.parts = nil
	b.partsChanged()
	b.fs = b.fs.CrashClone()
	b.lostLEO = lastLEO
	s.tracef("broker %d crash", b.id)
}

// stopClean closes every log, writes the checkpoints and the clean-shutdown
// file (SPEC §2.5).
func (b *simBroker) stopClean() {
	s := b.s
	b.stopGroups(true)
	for _, p := range b.sortedParts() {
		p.failPending()
	}
	if err := b.dir.Close(twinlog.BrokerEpoch(b.epoch)); err != nil {
		s.fail("storage close", "broker %d: %v", b.id, err)
	}
	b.stopLoops()
	b.up = false
	b.dir = nil
	b.parts = nil
	b.partsChanged()
	b.lostLEO = nil
	// Everything was synced: a crash clone must keep it all.
	b.fs = b.fs.CrashClone()
	s.tracef("broker %d clean stop (epoch %d)", b.id, b.epoch)
}

// partsChanged drops the caches of parts.
func (b *simBroker) partsChanged() { b.sorted, b.followed = nil, nil }

func (b *simBroker) sortedParts() []*simPart {
	if b.sorted != nil {
		return b.sorted
	}
	out := make([]*simPart, 0, len(b.parts))
	for _, p := range b.parts {
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y *simPart) int {
		if x.tp.Topic != y.tp.Topic {
			if x.tp.Topic < y.tp.Topic {
				return -1
			}
			return 1
		}
		return int(x.tp.Partition - y.tp.Partition)
	})
	b.sorted = out
	return out
}

// timers runs the broker's periodic work due at now.
func (b *simBroker) timers() {
	s := b.s
	if !b.up {
		return
	}
	if !b.registered {
		return
	}
	if s.now >= b.nextTick {
		b.nextTick = s.now + s.cfg.ReplicaTickMs
		for _, p := range b.sortedParts() {
			p.r.Tick(s.now)
			p.processReady()
		}
	}
	if s.now >= b.nextFlush {
		b.nextFlush = s.now + int64(s.rng.IntN(int(s.cfg.FlushEveryMs))+1)
		for _, p := range b.sortedParts() {
			if s.chance(0.5) {
				if err := p.log.Flush(); err != nil {
					s.fail("storage flush", "%v", err)
				}
			}
		}
	}
	if s.now >= b.nextCheckpoint {
		b.nextCheckpoint = s.now + s.cfg.CheckpointMs
		if err := b.dir.Checkpoint(); err != nil {
			s.fail("storage checkpoint", "%v", err)
		}
	}
}

// simMeta is a broker incarnation's metaloop.Loop host and Env: the
// simulated network to the controller (which does not long-poll: an
// answer with nothing new is followed by a pause of MetadataPollMs) with
// the shell's deadline, and the broker's image.
type simMeta struct{ b *simBroker }

func (m simMeta) After(d time.Duration, f func()) { m.b.s.after(d.Milliseconds(), f) }

func (m simMeta) Fetch(req *pb.FetchMetadataRequest, done func(*pb.FetchMetadataResponse, error)) {
	askController(m.b, "fetch-metadata", "metadata", m.b.s.cfg.FetchTimeoutMs, func(c *controller) *pb.FetchMetadataResponse {
		return c.fetchMetadata(req)
	}, done)
}

func (m simMeta) Position() (int64, int64) { return m.b.image.Offset(), m.b.epoch }

func (m simMeta) Reload() { m.b.image = metadata.New("") }

func (m simMeta) Apply(resp *pb.FetchMetadataResponse) error {
	if err := metadata.ApplyTo(m.b.image, resp); err != nil {
		return err
	}
	caughtUp := m.b.image.Registered(m.b.id, m.b.epoch)
	m.b.caughtUp = m.b.caughtUp || caughtUp
	m.b.authz.Follow(m.b.image, caughtUp)
	return nil
}

// Applied reconciles when the image changed, and kicks a heartbeat, as
// broker/metadata.go does.
func (m simMeta) Applied(resp *pb.FetchMetadataResponse, before int64) {
	b := m.b
	if b.image.Offset() != before || resp.GetSnapshot() != nil {
		b.reconcile()
	}
	if b.groups != nil {
		b.groups.host.Reconcile()
	}
	b.keeper.Kick()
}

func (m simMeta) Event(ev metaloop.Event) {
	b, s := m.b, m.b.s
	switch ev.Kind {
	case metaloop.PageGathered:
		s.report.Checks["metadata snapshot page gathered"]++
	case metaloop.SnapshotApplied:
		s.report.Checks["metadata snapshot applied"]++
	case metaloop.Reloaded:
		s.tracef("broker %d metadata: offset %d ahead of the controller (%d); reloading", b.id, b.image.Offset(), ev.HighOffset)
	case metaloop.Restarted, metaloop.ApplyFailed:
		s.tracef("broker %d metadata (%d): %v", b.id, ev.Kind, ev.Err)
	}
}

// reconcile makes the hosted partitions match the image with the broker's
// plan (assign.Reconcile, as broker/metadata.go): remove what left, delete
// unassigned log dirs, open and apply the assignments.
func (b *simBroker) reconcile() {
	s := b.s
	hosted := make(map[twinlog.TopicPartition]string, len(b.parts))
	for tp, p := range b.parts {
		hosted[tp] = p.topicID
	}
	plan, ok := assign.Reconcile(b.image, twinlog.BrokerID(b.id), b.epoch, hosted)
	if !ok {
		return
	}
	for _, tp := range plan.Remove {
		b.removePart(b.parts[tp])
	}
	for _, tp := range plan.Orphans(slices.Collect(maps.Keys(b.dir.Logs()))) {
		s.tracef("broker %d deletes unassigned dir %v", b.id, tp)
		if err := b.dir.Delete(tp); err != nil {
			s.fail("storage delete", "broker %d %v: %v", b.id, tp, err)
			return
		}
	}
	registered, brokers := b.image.BrokerEpochs()
	for _, a := range plan.Host {
		p := b.parts[a.TP]
		if p == nil {
			if p = b.openPart(a.TP, a.Record.GetTopicId()); p == nil {
				continue
			}
		}
		st := a.State(registered, brokers)
		le, hwBefore := p.r.LeaderEpoch(), p.r.HighWatermark()
		if s.w == nil {
			assign.Apply(p.r, a, st, twinlog.BrokerID(b.id), false, twinlog.NoEpoch, s.now)
		} else {
			s.w.applyAssignment(p, a, st)
		}
		if s.w != nil && p.r.Role() == replica.RoleLeader && p.r.LeaderEpoch() != le && p.r.HighWatermark() < hwBefore {
			// A new leader's HW only drops when broker/replica caps it
			// at a truncation point it has not validated (SPEC §6.2f;
			// see world.staleLeader).
			s.w.rep.HWCaps++
			s.tracef("broker %d %s: leader in LE %d, HW capped %d -> %d (truncation points %v, aligned epoch %d)",
				b.id, p.key, p.r.LeaderEpoch(), hwBefore, p.r.HighWatermark(), st.TruncationPoints, p.r.AlignedEpoch())
		}
		p.processReady()
	}
	b.retargetFetchers()
}

// removePart stops hosting p and deletes its log dir.
func (b *simBroker) removePart(p *simPart) {
	s := b.s
	p.failPending()
	delete(b.parts, p.tp)
	b.partsChanged()
	if err := b.dir.Delete(p.tp); err != nil {
		s.fail("storage delete", "broker %d %s: %v", b.id, p.key, err)
		return
	}
	s.tracef("broker %d removes %s (LEO %d, HW %d)", b.id, p.key, p.r.LogEndOffset(), p.r.HighWatermark())
}

func (b *simBroker) openPart(tp twinlog.TopicPartition, topicID string) *simPart {
	s := b.s
	o, err := assign.OpenLog([]*storage.LogDir{b.dir}, tp, topicID) // the broker's openPartition
	if _, bad := errors.AsType[*assign.MetadataError](err); bad {
		// Nothing in the simulated storage damages partition.metadata.
		s.fail("storage partition metadata", "broker %d %v: %v (want topic id %s)", b.id, tp, err, topicID)
		return nil
	}
	if err != nil {
		s.fail("storage create", "%v", err)
		return nil
	}
	if o.Replaced {
		s.report.Checks["partition dir of another topic id replaced"]++
		s.tracef("broker %d %v: dir held topic id %q, not %s; deleted", b.id, tp, o.FoundTopicID, topicID)
	}
	l := o.Log
	// FetchSeqStart: broker/fetcher.go's fetchSeqStart, the clock in ns.
	r, err := replica.New(replica.Config{ID: twinlog.BrokerID(b.id), Partition: tp, ReplicaLagTimeMaxMs: s.cfg.ReplicaLagMs, FetchSeqStart: s.now * 1_000_000},
		assign.LogState(l, o.AlignedEpoch))
	if err != nil {
		s.fail("replica new", "%v", err)
		return nil
	}
	p := &simPart{b: b, tp: tp, key: tp.String(), topicID: topicID, log: l, r: r,
		proposals: map[replica.ProposalID]*produceReq{}, results: map[replica.ProposalID]*produceReq{},
		validatedLE: -1, leaderLE: -1}
	p.shadow = s.readShadow(l)
	b.parts[tp] = p
	b.partsChanged()
	if lost, ok := b.lostLEO[p.key]; ok {
		delete(b.lostLEO, p.key)
		if leo := int64(l.LogEndOffset()); leo < lost {
			s.hist.RecordLossyShutdown(p.key, b.id, leo)
			s.report.LossyCrashes++
			s.tracef("broker %d %s lost [%d, %d) in the crash", b.id, p.key, leo, lost)
		}
	}
	s.tracef("broker %d opens %s: logStart %d LEO %d HW %d epochs %v", b.id, p.key, l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.Epochs().Entries())
	return p
}

// processReady runs the broker shell's Ready loop (ready.Drain) with the
// simulator as host, then checks the replica's invariants.
func (p *simPart) processReady() {
	if p.b.s.failed {
		return
	}
	ready.Drain(p.r, p.log, p.topicID, simReadyHost{p})
	p.fetched = storage.Validated{}
	p.check()
}

// simReadyHost is a simulated partition as ready.Drain's host: a storage
// failure fails the run, and the shadow log follows every append and cut.
type simReadyHost struct{ p *simPart }

func (h simReadyHost) Err() error {
	if h.p.b.s.failed {
		return errSimFailed
	}
	return nil
}

func (h simReadyHost) Fail(err error) {
	h.p.b.s.fail("log op", "broker %d %s: %v", h.p.b.id, h.p.key, err)
}

func (h simReadyHost) NowMs() int64 { return h.p.b.s.now }

func (h simReadyHost) Proposal(id replica.ProposalID) (storage.Validated, bool) {
	pr := h.p.proposals[id]
	delete(h.p.proposals, id)
	if pr == nil {
		return storage.Validated{}, false
	}
	return pr.batches, true
}

func (h simReadyHost) Fetched() storage.Validated {
	v := h.p.fetched
	h.p.fetched = storage.Validated{}
	return v
}

// Appended records the appended batches in the shadow, batch by batch.
func (h simReadyHost) Appended(_ replica.LogOp, _ storage.AppendInfo, batches storage.Validated) {
	p := h.p
	for _, bv := range batches.Batches() {
		recs, err := bv.Records()
		if err != nil {
			p.b.s.fail("storage batch", "broker %d %s: appended batch: %v", p.b.id, p.key, err)
			return
		}
		p.shadow.startBatch(int64(bv.BaseOffset()))
		for _, r := range recs {
			p.shadow.append(int64(r.Offset), int32(bv.LeaderEpoch()), string(r.Value))
		}
	}
}

func (h simReadyHost) Cut(op replica.LogOp) {
	if op.Kind == replica.OpTruncate {
		h.p.shadow.truncate(int64(op.Offset)) // in whole batches, as storage
	} else {
		h.p.shadow.restart(int64(op.Offset))
	}
}

func (h simReadyHost) Repaired(cleared []twinlog.BrokerID) {
	if s := h.p.b.s; s.w != nil {
		s.w.repaired(h.p, cleared) // broker.repaired (mirror.go)
	}
}

func (h simReadyHost) Deliver(res replica.ProduceResult) { h.p.deliverResult(res) }

func (h simReadyHost) AlterPartition(ap replica.AlterPartitionProposal) { h.p.sendAlterPartition(ap) }

func (h simReadyHost) Event(ev replica.Event) {
	p, s := h.p, h.p.b.s
	if ev.Type == replica.EventTruncation {
		s.report.Truncations++
	}
	if ev.Type != replica.EventHighWatermark && ev.Type != replica.EventIgnored {
		s.tracef("broker %d %s: %v", p.b.id, p.key, ev)
	}
}

func (p *simPart) failPending() {
	for _, id := range sortedIDs(p.results) {
		pr := p.results[id]
		delete(p.results, id)
		pr.reply(pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, -1, -1)
	}
}

func sortedIDs[V any](m map[replica.ProposalID]V) []replica.ProposalID {
	out := make([]replica.ProposalID, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (p *simPart) deliverResult(res replica.ProduceResult) {
	pr := p.results[res.ID]
	if pr == nil {
		return
	}
	delete(p.results, res.ID)
	// The LE in which the record became committed (an acks=all request
	// appended in an earlier LE of this leader completes in the current
	// one): the history's generation of the ack.
	pr.reply(res.Error, int64(res.BaseOffset), int32(p.r.LeaderEpoch()))
}

func (p *simPart) sendAlterPartition(ap replica.AlterPartitionProposal) {
	alter.Send(simAlter{p}, simAlter{p}, simAlter{p}, ap)
}

// simAlter is a partition's AlterPartition sending as alter.Send sees it:
// its Env (the simulated network, the shell's RPC deadline: no answer in
// time counts as none), the partition, and the Observer that traces the
// attempts and checks the answers.
type simAlter struct{ p *simPart }

func (a simAlter) NowMs() int64                    { return a.p.b.s.now }
func (a simAlter) After(d time.Duration, f func()) { a.p.b.s.after(d.Milliseconds(), f) }

// Call: the controller node is always addressable here (sent is always
// true); the network may drop the request or the answer.
func (a simAlter) Call(ap replica.AlterPartitionProposal, answer func(bool, *pb.AlterPartitionResponse)) {
	p, b, s := a.p, a.p.b, a.p.b.s
	askController(b, "alter-partition", "alter-partition-resp", s.cfg.RPCTimeoutMs, func(c *controller) *pb.AlterPartitionResponse {
		resp := rpc(c, fmt.Sprintf("alter-partition %d", b.id), false, brokerCaller(b.s, int32(b.id), pb.ControllerService_AlterPartition_FullMethodName), c.svc.AlterPartition, ap.Request)
		s.tracef("ctl alter-partition from %d seq %d: %v", b.id, ap.Seq, shortCode(resp.GetError()))
		return resp
	}, func(resp *pb.AlterPartitionResponse, err error) {
		if err != nil && a.Usable() {
			s.tracef("broker %d %s: alter-partition seq %d timed out", b.id, p.key, ap.Seq)
		}
		answer(true, resp)
	})
}

func (simAlter) Lock()                       {}
func (simAlter) Unlock()                     {}
func (a simAlter) Usable() bool              { return a.p.b.up && a.p.b.parts[a.p.tp] == a.p }
func (a simAlter) Replica() *replica.Replica { return a.p.r }
func (a simAlter) ProcessReady()             { a.p.processReady() }

func (a simAlter) Attempting(ap replica.AlterPartitionProposal, n int) {
	p, req := a.p, ap.Request
	p.b.s.tracef("broker %d %s: alter-partition seq %d LE %d PE %d m %d isr %v (attempt %d)", p.b.id, p.key, ap.Seq, req.GetLeaderEpoch(), req.GetPartitionEpoch(), req.GetMinInsyncReplicas(), isrString(req.GetNewIsr()), n)
}

func (simAlter) Retrying(replica.AlterPartitionProposal, int, bool, *pb.AlterPartitionResponse, time.Duration) {
}

// Delivered checks what the replica made of an answer: an answer in a new
// LE must not drop the expansion it carries (checkAlterAnswerNewLE), and a
// leader must not roll its maximal ISR back past what the controller
// committed (SPEC §8.7).
func (a simAlter) Delivered(ap replica.AlterPartitionProposal, resp *pb.AlterPartitionResponse, pending bool) {
	p, b, s := a.p, a.p.b, a.p.b.s
	if pending {
		p.checkAlterAnswerNewLE(resp)
	}
	if resp.GetError() == pb.ErrorCode_ERROR_CODE_NONE || p.r.Role() != replica.RoleLeader {
		return
	}
	// The outcome may be unknown or the answer stale
	// (INVALID_UPDATE_VERSION after a retried, applied request): the
	// controller may hold an ISR the leader no longer counts.
	pr := s.ctl.image.Partition(p.tp.Topic, p.tp.Partition)
	if pr.GetLeaderEpoch() != int32(p.r.LeaderEpoch()) || pr.GetLeader() != b.id {
		return
	}
	for _, id := range pr.GetIsr() {
		if !slices.Contains(p.r.MaximalISR(), twinlog.BrokerID(id)) {
			s.knownBug(p, "replica-rollback-after-commit",
				"broker %d %s: alter-partition seq %d answered %v; the leader rolled back to maximal ISR %v but the controller committed ISR %v (LE %d PE %d): HW may now pass controller-ISR member %d (SPEC §8.7)",
				b.id, p.key, ap.Seq, shortCode(resp.GetError()), p.r.MaximalISR(), pr.GetIsr(), pr.GetLeaderEpoch(), pr.GetPartitionEpoch(), id)
			if !s.cfg.Strict87 {
				s.suspend87[p.key] = pr.GetLeaderEpoch()
			}
			return
		}
	}
}

func isrString(m []*pb.IsrMember) string {
	out := "["
	for i, x := range m {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%d:%d", x.GetBrokerId(), x.GetBrokerEpoch())
	}
	return out + "]"
}

func shortCode(c pb.ErrorCode) string {
	const prefix = "ERROR_CODE_"
	str := c.String()
	if len(str) > len(prefix) {
		return str[len(prefix):]
	}
	return str
}

// retargetFetchers runs one follow.Fetcher per leader some hosted
// partition follows (follow.Leaders), as broker/fetcher.go: new leaders get
// one, fetchers of leaders no partition follows stop, the others are
// kicked.
func (b *simBroker) retargetFetchers() {
	parts := b.followParts()
	need := follow.Leaders(parts)
	var ids []twinlog.BrokerID
	for id := range b.fetchers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !slices.Contains(need, id) {
			b.fetchers[id].Stop()
			delete(b.fetchers, id)
			continue
		}
		b.fetchers[id].Kick()
	}
	for _, id := range need {
		if b.fetchers[id] == nil {
			f := follow.NewFetcher(simFetchEnv{b, id}, simFetchEnv{b, id}, follow.Config{Self: twinlog.BrokerID(b.id), Leader: id})
			b.fetchers[id] = f
			f.Start()
		}
	}
}

// followParts is every hosted partition, in order, as a fetcher uses it.
func (b *simBroker) followParts() []follow.Partition {
	if b.followed != nil {
		return b.followed
	}
	ps := b.sortedParts()
	out := make([]follow.Partition, len(ps))
	for i, p := range ps {
		out[i] = simFollowPart{p}
	}
	b.followed = out
	return out
}

// simFetchEnv is a fetcher's Env and Host: the simulated network with the
// shell's deadline (FetchTimeoutMs); the leader answers with serve.Once
// within a random byte budget (at least one batch).
type simFetchEnv struct {
	b      *simBroker
	leader twinlog.BrokerID
}

var errCanceled = errors.New("sim: fetch cancelled")

func (e simFetchEnv) Send(req *pb.FetchRequest, done func(*pb.FetchResponse, error)) func() {
	b, s := e.b, e.b.s
	reply := s.once(s.cfg.FetchTimeoutMs, func() { done(nil, errNoAnswer) })
	if int(e.leader) < 1 || int(e.leader) > len(s.brokers) {
		s.after(0, func() { reply(func() { done(nil, errNoAnswer) }) })
		return func() {}
	}
	leader := s.brokers[e.leader-1]
	maxBytes := 1 + s.rng.IntN(1200)
	principal := s.brokerPrincipal(b.id)
	s.net.send(b.node(), leader.node(), "fetch", func() {
		if err := leader.admit(principal, pb.FetchService_Fetch_FullMethodName, req); err != nil {
			s.net.send(leader.node(), b.node(), "fetch-resp", func() { reply(func() { done(nil, err) }) })
			return
		}
		resp := leader.serveFetch(req, maxBytes)
		s.net.send(leader.node(), b.node(), "fetch-resp", func() { reply(func() { done(resp, nil) }) })
	})
	return func() { s.after(0, func() { reply(func() { done(nil, errCanceled) }) }) }
}

func (e simFetchEnv) After(d time.Duration, f func()) { e.b.s.after(d.Milliseconds(), f) }

func (e simFetchEnv) Partitions() []follow.Partition { return e.b.followParts() }
func (e simFetchEnv) BrokerEpoch() int64             { return e.b.epoch }
func (e simFetchEnv) Applied([]follow.Partition)     {}
func (e simFetchEnv) Corrupt(it follow.Item, err error) {
	p := it.P.(simFollowPart).p
	e.b.s.fail("storage batch", "broker %d %s: %v", e.b.id, p.key, err)
}

// simFollowPart is a hosted partition as a fetcher uses it; one the broker
// no longer hosts takes no answer.
type simFollowPart struct{ p *simPart }

func (simFollowPart) Lock()                                    {}
func (simFollowPart) Unlock()                                  {}
func (f simFollowPart) TopicPartition() twinlog.TopicPartition { return f.p.tp }
func (f simFollowPart) Replica() *replica.Replica              { return f.p.r }
func (f simFollowPart) Usable() bool                           { return f.p.b.up && f.p.b.parts[f.p.tp] == f.p }
func (f simFollowPart) Fetched(r replica.FetchResponse, v storage.Validated) {
	f.p.handleFetchResponse(r, v)
}

// serveFetch answers fetch req as the leader shell does (broker/serve.Once,
// the broker's fetch handler evaluating a request once): each partition's
// replica decides, the logs supply at most maxBytes of batches in all (at
// least one).
func (b *simBroker) serveFetch(req *pb.FetchRequest, maxBytes int) *pb.FetchResponse {
	s := b.s
	targets := make([]serve.Target, len(req.GetPartitions()))
	parts := make([]*simPart, len(targets))
	for i, fp := range req.GetPartitions() {
		targets[i] = b.target(twinlog.TopicPartition{Topic: fp.GetTopic(), Partition: fp.GetPartition()})
		if sp, ok := targets[i].P.(servedPart); ok {
			parts[i] = sp.p
			if code := plan.MirrorFetchTopicID(req.GetFetcherType(), fp.GetTopicId(), sp.p.topicID); code != pb.ErrorCode_ERROR_CODE_NONE {
				targets[i] = serve.Target{Error: code} // broker.fetchTargets
			}
		}
	}
	resp, _, _ := serve.Once(req, targets, maxBytes, s.now, func(i int, d replica.FetchDecision) {
		if d.Error == pb.ErrorCode_ERROR_CODE_INVALID_FETCH_SESSION_EPOCH || d.Error == pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
			fr := wire.FetchRequest(req, req.GetPartitions()[i])
			s.tracef("broker %d %s: refused stale fetch from %d (broker epoch %d seq %d offset %d LE %d last %d): %s",
				b.id, parts[i].key, fr.ReplicaID, fr.BrokerEpoch, fr.Seq, fr.FetchOffset, fr.CurrentLeaderEpoch, fr.LastFetchedEpoch, shortCode(d.Error))
		}
	})
	if req.GetFetcherType() == pb.FetcherType_FETCHER_TYPE_CONSUMER {
		for i, out := range resp.GetPartitions() {
			b.checkConsumerRead(parts[i], out)
		}
	}
	return resp
}

// checkConsumerRead is §8.13: a consumer reads only below the HW.
func (b *simBroker) checkConsumerRead(p *simPart, out *pb.FetchPartitionResponse) {
	s := b.s
	if len(out.GetRecords()) > 0 {
		s.report.Checks["read-below-hw"]++
		for bv, err := range storage.Batches(out.GetRecords()) {
			if err != nil {
				break
			}
			if bv.LastOffset() >= twinlog.Offset(out.GetHighWatermark()) {
				s.fail("§8.13 read at or above HW", "broker %d %s served batch [%d, %d] with HW %d", b.id, p.key, bv.BaseOffset(), bv.LastOffset(), out.GetHighWatermark())
			}
		}
	}
}

// servedPart is a hosted partition as serve.Once reads it; a read error is
// a storage bug here (the simulated disk fails no read).
type servedPart struct{ p *simPart }

func (servedPart) Lock()                        {}
func (servedPart) Unlock()                      {}
func (sp servedPart) Replica() *replica.Replica { return sp.p.r }
func (servedPart) Unusable() pb.ErrorCode       { return pb.ErrorCode_ERROR_CODE_NONE }
func (sp servedPart) ProcessReady()             { sp.p.processReady() }

func (sp servedPart) OffsetForTimestamp(ts int64) (twinlog.Offset, pb.ErrorCode) {
	p := sp.p
	o, err := p.log.OffsetForTimestamp(ts)
	if err != nil {
		p.b.s.fail("storage read", "broker %d %s: offset for timestamp %d: %v", p.b.id, p.key, ts, err)
		return o, pb.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR
	}
	return o, pb.ErrorCode_ERROR_CODE_NONE
}

func (sp servedPart) Read(from twinlog.Offset, maxBytes int, upTo twinlog.Offset) ([]byte, pb.ErrorCode) {
	p := sp.p
	rr, err := p.log.Read(from, maxBytes, upTo)
	if err != nil {
		p.b.s.fail("storage read", "broker %d %s: read [%d, %d): %v (log [%d, %d))", p.b.id, p.key, from, upTo, err, p.log.LogStartOffset(), p.log.LogEndOffset())
		return nil, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE
	}
	return rr.Batches, pb.ErrorCode_ERROR_CODE_NONE
}

func (p *simPart) handleFetchResponse(resp replica.FetchResponse, batches storage.Validated) {
	s := p.b.s
	if s.cfg.mutation == "ignore-divergence" && resp.DivergingEpoch != nil {
		resp.DivergingEpoch = nil
	}
	leBefore := p.r.LeaderEpoch()
	leoBefore, cacheBefore := p.r.LogEndOffset(), p.r.EpochEntries()
	p.fetched = batches
	p.r.HandleFetchResponse(resp, s.now)
	if d := resp.DivergingEpoch; d != nil && resp.Error == pb.ErrorCode_ERROR_CODE_NONE && resp.Request == p.lastDiverging &&
		p.r.LogEndOffset() == leoBefore && slices.Equal(p.r.EpochEntries(), cacheBefore) &&
		len(cacheBefore) > 0 && cacheBefore[len(cacheBefore)-1].StartOffset == leoBefore {
		// The same DivergingEpoch answer twice and nothing changed: the
		// follower's cache ends with an epoch that starts at its LEO (it
		// led that epoch without writing) and truncating to LEO keeps it.
		p.stalled = true
		p.b.s.knownBug(p, "replica-empty-epoch-at-leo",
			"broker %d %s: DivergingEpoch %v at LEO %d leaves cache %v: truncateLog(o == LEO) skips truncateFromEnd (SPEC §4.4; Kafka UnifiedLog.truncateTo trims the cache even then); the follower refetches forever",
			p.b.id, p.key, *d, leoBefore, cacheBefore)
	}
	p.lastDiverging = replica.FetchRequest{}
	if resp.DivergingEpoch != nil {
		p.lastDiverging = resp.Request
	}
	if resp.Error == pb.ErrorCode_ERROR_CODE_NONE && resp.DivergingEpoch == nil && resp.Request.CurrentLeaderEpoch == leBefore && p.r.LeaderEpoch() == leBefore {
		p.validatedLE = max(p.validatedLE, int32(leBefore))
	}
	p.processReady()
}

// replicaLogInfo answers GetReplicaLogInfo for one partition (SPEC §3.5).
func (b *simBroker) replicaLogInfo(topic, topicID string, partition int32) metastate.ReplicaLogAnswer {
	ans := metastate.ReplicaLogAnswer{Broker: b.id, BrokerEpoch: b.epoch, LastWrittenLeaderEpoch: -1, LogEndOffset: -1}
	if !b.up || !b.registered {
		ans.Error = pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
		return ans
	}
	p := b.parts[twinlog.TopicPartition{Topic: topic, Partition: partition}]
	if p == nil || p.topicID != topicID {
		ans.Error = pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		return ans
	}
	if es := p.r.EpochEntries(); len(es) > 0 {
		ans.LastWrittenLeaderEpoch = int32(es[len(es)-1].Epoch)
	}
	ans.LogEndOffset = int64(p.r.LogEndOffset())
	return ans
}
