package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/storage"
)

// A Runner drives one hosted partition's mirror machine (SPEC §6, a
// NATS-style leader-only loop): while the broker leads the partition it
// owns a plan.Machine, feeds it leadership, desired-state, replica-status,
// RPC-result and fetch events, and performs its actions. It is the one
// copy of that loop: the broker hosts it on a goroutine with gRPC behind
// its Env, the simulator on its scheduler with simulated messages.
//
// A Runner does no I/O and starts no goroutine. Its host calls Turn from
// one goroutine at a time: on a Wake, on a timer of about Config.Tick, and
// whenever the partition or the metadata changed. Everything that leaves
// the process goes through the Env, whose methods return at once and
// answer through callbacks; the Runner queues those answers (and Post's
// events) and handles them in its next Turn, so an answer may come from
// any goroutine, at any time, or for a leadership long gone.
type Runner struct {
	cfg  Config
	env  Env
	part Partition
	obs  Observer
	log  *slog.Logger

	mu    sync.Mutex
	queue []func() // answers and events, handled by Turn

	core Core
	// srcLE is the highest source leader epoch a fetch was made in
	// (plan.SourceLeaderEpochUsable), shared by successive sessions.
	srcLE    atomic.Int32
	mirror   string
	nextTick int64
	// leads: the last observation found this broker leading the partition
	// (the machine may not lead yet: its records are loading).
	leads bool

	// lead counts the leaderships this runner began or ended; an answer
	// of an earlier one is ignored.
	lead uint64

	// Loading the __mirror_state records of a new leadership.
	loading     bool
	loadSeq     uint64
	loadRetryAt int64
	loaded      *loadedState

	bumpWaits []bumpWait

	// The ordered __mirror_state writer of the current leadership: one
	// write in flight, the rest queued in the machine's order.
	writes   []queuedWrite
	inflight bool

	// The fetch session, nil when the machine runs none.
	fetch *FetchSession
	// answer is the source's answer being appended, for the host's
	// Partition.AppendMirrored.
	answer *Answer
}

// MaxQueuedWrites bounds a leadership's queued __mirror_state writes; a
// write beyond it fails at once (the machine retries it).
const MaxQueuedWrites = 256

// maxTurnItems bounds the answers one Turn handles; the rest wait for the
// next one (the Runner wakes its host for it).
const maxTurnItems = 1000

type loadedState struct {
	le   twinlog.Epoch
	run  *pb.MirrorRunRecord
	lmle *pb.MirrorLmleRecord
}

type bumpWait struct {
	seq  uint64
	want twinlog.Epoch
}

type queuedWrite struct {
	seq uint64
	w   StateWrite
}

// Config is what a Runner is for and how it paces itself.
type Config struct {
	Self           twinlog.BrokerID
	TopicPartition twinlog.TopicPartition
	TopicID        string
	// Tick is how often the machine gets a plan.Tick (its deadlines and
	// retries); it is also how soon a failed load of the state records is
	// retried.
	Tick time.Duration
	// Pace is FetchConfig.Pace.
	Pace func(empty bool) time.Duration
	// Log is where the runner logs; nil, nowhere.
	Log *slog.Logger
	// Stop, if set, ends the performing of actions early when it reports
	// true (the simulator, once a check failed).
	Stop func() bool
}

// Observation is the host's reading of the partition's metadata.
type Observation struct {
	// View is the topic's mirror metadata (ViewOf); its
	// Desired.SourceClusterID is filled in by the host if the metadata
	// does not name it.
	View TopicView
	// Record is the partition's record as the broker applied it (its
	// replicas, its truncation points); nil if none.
	Record *pb.PartitionRecord
}

// StateWrite is one __mirror_state record of the partition: the run record
// of Mirror, or the LMLE record (exactly one of Run and Lmle is set). Lead
// is the leadership that writes it: writes of one leadership are issued
// in order, one at a time, and a host may cancel those of an earlier one.
type StateWrite struct {
	Lead   uint64
	Mirror string
	Run    *pb.MirrorRunRecord
	Lmle   *pb.MirrorLmleRecord
}

// Env is the runner's world outside the process. Every method returns at
// once; a callback is called exactly once, from any goroutine, within the
// host's timeout for the call (an RPC without an answer is an error then).
type Env interface {
	// NowMs is the host's clock.
	NowMs() int64
	// Observe reads the topic's metadata.
	Observe() Observation
	// MachineConfig is the machine's timing (plan.Config's pending
	// timeout and retry settings); the Runner fills in the rest.
	MachineConfig() plan.Config
	// Rand is the machine's randomness.
	Rand() plan.Rand
	// Wake asks the host for a Turn soon (an answer is queued).
	Wake()
	// After calls f after d.
	After(d time.Duration, f func())

	// LoadState reads the partition's __mirror_state records (the run
	// record of mirror and the LMLE record; nil where none) as committed.
	LoadState(mirror string, done func(run *pb.MirrorRunRecord, lmle *pb.MirrorLmleRecord, err error))
	// WriteState appends one record to __mirror_state with acks=all.
	WriteState(w StateWrite, done func(err error))
	// QueryLMLE asks the source cluster's GetLastMirroredEpochs.
	QueryLMLE(done func(lmle twinlog.Epoch, code pb.ErrorCode))
	// Bump sends BumpLeaderEpoch to the controller; le is the new LE.
	Bump(a plan.BumpLeaderEpoch, done func(le twinlog.Epoch, code pb.ErrorCode))
	// SourceLeader looks the partition's leader up in the source's
	// metadata (refresh: not from a cache).
	SourceLeader(refresh bool, done func(l SourceLeader, code pb.ErrorCode, err error))
	// Fetch sends the session's Fetch{MIRROR} to the source leader.
	Fetch(f SendFetch, done func(a *Answer, err error))
}

// Partition is the hosted partition. Its lock (the broker's partition
// mutex; nothing in the simulator, which runs one thing at a time) guards
// it against every other use; the other methods are called only with it
// held.
type Partition interface {
	sync.Locker
	// Replica is the partition's replica.
	Replica() *replica.Replica
	// Usable reports that the partition is open (not closed or failed).
	Usable() bool
	// ProcessReady performs what the replica decided (its Ready).
	ProcessReady()
	// NoteWritable records the machine's SetWritable where the produce
	// path checks it.
	NoteWritable(writable bool, le twinlog.Epoch)
	// AppendMirrored appends batches of the source's answer a (metas
	// describe them) as the mirror leader, and persists them as the
	// host's policy says; an error (the replica refused them) ends the
	// fetch session.
	AppendMirrored(a *Answer, metas []replica.BatchMeta, batches storage.Validated) error
}

// Truncation is a leader truncation the runner made for the machine.
type Truncation struct {
	Reason        plan.TruncateReason
	Offset        twinlog.Offset
	Full          bool
	Before, After twinlog.Offset // the LEO
	Err           error
}

// Observer hears what the runner does: metrics in the broker, traces and
// checks in the simulator. Its methods are called on the runner's turn;
// those marked so are called with the partition locked.
type Observer interface {
	// BecameLeader: the machine just stepped ev; its actions are not
	// performed yet and the loaded taints not installed.
	BecameLeader(ev plan.BecameLeader, m *plan.Machine)
	// TaintsLoaded: the leadership installed the loaded record's taints
	// (partition locked).
	TaintsLoaded(lmle *pb.MirrorLmleRecord)
	// LeadershipEnded: the machine lost its leadership.
	LeadershipEnded()
	// Transition: the machine changed state.
	Transition(t plan.Transition)
	// Truncating: a leader truncation is about to be made (partition
	// locked); Truncated: it was (or failed, t.Err).
	Truncating()
	Truncated(t Truncation)
	// Taints: taints were installed (refused: a run's taints were not,
	// they name members of the maximal ISR).
	Taints(a plan.AddTaints, refused []twinlog.BrokerID)
	// Writable: the partition became writable or read-only.
	Writable(writable bool, le twinlog.Epoch)
	// FetchEvent: the fetch session reports ev to the machine.
	FetchEvent(ev plan.Event)
	// Status is the machine's status after a turn; nil when this broker
	// runs no mirror of the partition.
	Status(st *pb.MirrorPartitionStatus)
	// Rejected: the machine refused ev.
	Rejected(ev plan.Event, err error)
}

// NoObserver observes nothing; embed it to observe a part.
type NoObserver struct{}

func (NoObserver) BecameLeader(plan.BecameLeader, *plan.Machine) {}
func (NoObserver) TaintsLoaded(*pb.MirrorLmleRecord)             {}
func (NoObserver) LeadershipEnded()                              {}
func (NoObserver) Transition(plan.Transition)                    {}
func (NoObserver) Truncating()                                   {}
func (NoObserver) Truncated(Truncation)                          {}
func (NoObserver) Taints(plan.AddTaints, []twinlog.BrokerID)     {}
func (NoObserver) Writable(bool, twinlog.Epoch)                  {}
func (NoObserver) FetchEvent(plan.Event)                         {}
func (NoObserver) Status(*pb.MirrorPartitionStatus)              {}
func (NoObserver) Rejected(plan.Event, error)                    {}

var errClosed = errors.New("partition closed")

// New returns a runner of cfg's partition; obs may be nil.
func New(cfg Config, env Env, part Partition, obs Observer) *Runner {
	if obs == nil {
		obs = NoObserver{}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{cfg: cfg, env: env, part: part, obs: obs, log: log}
	r.core.Leadership.KnownLE = twinlog.NoEpoch
	r.core.Rejected = func(ev plan.Event, err error) {
		r.log.Warn("mirror request rejected", "event", fmt.Sprintf("%T", ev), "err", err)
		r.obs.Rejected(ev, err)
	}
	return r
}

// Post hands the machine an event from outside the runner (a follower
// repaired by a fetch); any goroutine may call it.
func (r *Runner) Post(ev plan.Event) {
	r.deliver(func() { r.core.Post(ev) })
}

// deliver queues f for the next Turn and wakes the host.
func (r *Runner) deliver(f func()) {
	r.mu.Lock()
	r.queue = append(r.queue, f)
	r.mu.Unlock()
	r.env.Wake()
}

func (r *Runner) pop() func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return nil
	}
	f := r.queue[0]
	r.queue[0] = nil
	r.queue = r.queue[1:]
	return f
}

// Core is the runner's machine and leadership, for the host to read.
func (r *Runner) Core() *Core { return &r.core }

// Mirror is the mirror the partition's topic is in ("" none).
func (r *Runner) Mirror() string { return r.mirror }

// Fetching reports that a fetch session runs.
func (r *Runner) Fetching() bool { return r.fetch != nil }

// Stop ends the runner: its fetch session and queued writes are dropped,
// and later answers are ignored. The host calls no Turn after it.
func (r *Runner) Stop() {
	r.fetch = nil
	r.writes, r.inflight = nil, false
	r.lead++
}

func (r *Runner) stopped() bool { return r.cfg.Stop != nil && r.cfg.Stop() }

// Turn observes the partition, performs what the machine decides, and
// handles the queued answers. What one event makes the machine emit is
// performed before the next event (mirror/plan/doc.go), and an answered
// bump is reported as soon as the replica runs in its LE, before the
// machine hears anything else: an action emitted in the old LE and sent
// after would be fenced.
func (r *Runner) Turn() {
	r.observe()
	r.drain()
	r.progressBumps()
	r.drain()
	r.settleTaintsPending()
	for i := 0; i < maxTurnItems && !r.stopped(); i++ {
		f := r.pop()
		if f == nil {
			break
		}
		f()
		r.drain()
		r.progressBumps()
		r.drain()
	}
	if now := r.env.NowMs(); r.core.M != nil && now >= r.nextTick && !r.stopped() {
		r.nextTick = now + r.cfg.Tick.Milliseconds()
		r.core.Step(plan.Tick{NowMs: now})
		r.drain()
	}
	r.settleTaintsPending()
	r.publishStatus()
	r.mu.Lock()
	more := len(r.queue) > 0
	r.mu.Unlock()
	if more {
		r.env.Wake()
	}
}

// update runs f on the replica if the partition is usable, then processes
// the replica's Ready.
func (r *Runner) update(f func(rep *replica.Replica)) {
	r.locked(func() {
		if !r.part.Usable() {
			return
		}
		f(r.part.Replica())
		r.part.ProcessReady()
	})
}

// observe compares leadership, desired state and replica status with what
// the machine knows and steps it accordingly.
func (r *Runner) observe() {
	var (
		leading bool
		le      twinlog.Epoch
		lead    plan.ReplicaStatus
	)
	obs := r.env.Observe()
	r.locked(func() {
		rep := r.part.Replica()
		le = rep.LeaderEpoch()
		leading = r.part.Usable() && rep.Role() == replica.RoleLeader
		if leading {
			var replicas []twinlog.BrokerID
			for _, pr := range obs.Record.GetReplicas() {
				replicas = append(replicas, twinlog.BrokerID(pr))
			}
			lead = LeaderStatus(rep, replicas, r.cfg.Self)
		}
	})
	st, desired := obs.View.Status(lead), obs.View.Desired
	r.mirror = obs.View.Mirror

	r.leads = leading
	end, begin := r.core.Leadership.Observe(leading, le)
	if !leading {
		if end {
			r.endLeadership()
		}
		r.loaded, r.loading = nil, false
		r.loadSeq++
		return
	}
	if r.core.M == nil {
		mc := r.env.MachineConfig()
		mc.BrokerID, mc.Mirror, mc.TopicPartition, mc.TopicID = r.cfg.Self, r.mirror, r.cfg.TopicPartition, r.cfg.TopicID
		m, err := plan.New(mc, plan.Deps{Log: ReplicaLog{Replica: r.part.Replica(), Lock: r.part}, Rand: r.env.Rand()})
		if err != nil {
			r.log.Error("mirror machine", "err", err)
			return
		}
		r.core.M = m
		// The machine's clock starts at the first Tick: set it before any
		// deadline (PREPARING, PENDING) is computed from it.
		r.nextTick = r.env.NowMs() + r.cfg.Tick.Milliseconds()
		r.core.Step(plan.Tick{NowMs: r.env.NowMs()})
	}
	if end {
		// A leadership this machine did not cause ends before the records
		// load, so none of its late outcomes acts in le
		// (Leadership.Observe).
		r.log.Debug("mirror leadership ends: a later LE is not its own", "known_leader_epoch", r.core.Leadership.KnownLE, "leader_epoch", le)
		r.endLeadership()
	}
	if begin && !r.begin(le, desired, obs.Record) {
		return
	}
	r.core.ApplyDesired(desired)
	r.core.NoteStatus(st)
}

// endLeadership steps LostLeadership and stops what the leadership ran:
// its fetch session, and its writes not yet sent (a late write of an ended
// leadership could only change records a next leader may have loaded).
func (r *Runner) endLeadership() {
	r.core.Ended()
	r.fetch = nil
	r.writes, r.inflight = nil, false
	r.lead++
	r.obs.LeadershipEnded()
}

// begin starts a leadership the machine did not cause, in LE le, from the
// partition's __mirror_state records: loaded first (a round trip to the
// state partition's leader), then stepped in BecameLeader with the LE's
// truncation points (a bump whose answer was lost left its truncation to
// this leadership, SPEC §6.2f). It reports whether the leadership began.
func (r *Runner) begin(le twinlog.Epoch, desired plan.Desired, rec *pb.PartitionRecord) bool {
	if r.loaded == nil || r.loaded.le != le {
		r.loaded = nil
		r.load(le)
		return false
	}
	ld := r.loaded
	r.loaded = nil
	ev := plan.BecameLeader{LeaderEpoch: le, Run: ld.run, Lmle: ld.lmle, Desired: desired, TruncationPoints: TruncationPointsOf(rec)}
	r.core.Began(le, desired)
	r.lead++
	r.writes, r.inflight = nil, false
	r.fetch = nil
	r.log.Info("mirror leadership", "leader_epoch", le, "run_state", ld.run.GetState(), "lmle", ld.lmle.GetLmle(), "desired", desired.State)
	// A record written in a later LE (a zombie leader on stale metadata)
	// is refused by the machine, which then neither writes nor acts
	// (mirror/plan TestBecameLeaderWithNewerRecordIsIgnored); its taints
	// stay pending until newer metadata.
	r.core.Step(ev)
	r.obs.BecameLeader(ev, r.core.M)
	r.loadTaints(ld.lmle)
	return true
}

// load reads the state records of a leadership in le once no read is in
// flight and a failed one is not too recent.
func (r *Runner) load(le twinlog.Epoch) {
	if r.loading || r.env.NowMs() < r.loadRetryAt {
		return
	}
	r.loading = true
	r.loadSeq++
	seq := r.loadSeq
	r.env.LoadState(r.mirror, func(run *pb.MirrorRunRecord, lmle *pb.MirrorLmleRecord, err error) {
		r.deliver(func() {
			if r.loadSeq != seq {
				return
			}
			r.loading = false
			if err != nil {
				r.log.Debug("read __mirror_state", "err", err)
				r.loadRetryAt = r.env.NowMs() + r.cfg.Tick.Milliseconds()
				return
			}
			r.loaded = &loadedState{le: le, run: run, lmle: lmle}
		})
	})
}

// loadTaints installs exactly the loaded record's taints as this
// leadership's (SPEC §6.4: a leader loads the taints before serving
// follower fetches, which taints-pending holds until then). Taints the
// replica kept from an earlier leadership of this broker may have been
// durably cleared by another leader since; kept, they would cut that ISR
// member below the HW (§8.7; simulator seeds 312, 101). A clear the
// replica did in memory is settled by the record too: one it still holds
// taints the follower again (it repairs it again), one it no longer holds
// is durably clear.
func (r *Runner) loadTaints(lmle *pb.MirrorLmleRecord) {
	ts := TaintsOf(lmle)
	r.update(func(rep *replica.Replica) {
		rep.ResetTaints(ts, r.env.NowMs())
		r.obs.TaintsLoaded(lmle)
	})
}

// settleTaintsPending lets the leader serve follower fetches once this
// leadership has loaded the durable taints and owns its state (SPEC §6.4,
// Leadership.TaintsSettled). A __mirror_state that cannot be read keeps
// them pending.
func (r *Runner) settleTaintsPending() {
	r.locked(func() {
		if !r.part.Usable() || !r.core.Leadership.TaintsSettled(r.core.M, r.part.Replica()) {
			return
		}
		r.part.Replica().SetTaintsPending(false)
		r.part.ProcessReady()
	})
}

// publishStatus hands the machine's status to the observer (nil when the
// partition is in no mirror or not led here: a once-mirrored topic keeps a
// runner only for its taints). While a new leadership of this broker loads
// its records the last status stands: the durable state it shows is the
// one the load will find.
func (r *Runner) publishStatus() {
	if r.leads && !r.core.Leadership.Leading && r.core.M != nil && r.mirror != "" {
		return
	}
	if r.core.M == nil || !r.core.Leadership.Leading || r.mirror == "" {
		r.obs.Status(nil)
		return
	}
	st := r.core.M.Status()
	st.DesiredState = r.core.Desired().State
	r.obs.Status(st)
}

// drain performs the machine's actions until it has none.
func (r *Runner) drain() {
	r.core.Drain(r.perform, r.cfg.Stop)
}

func (r *Runner) perform(a plan.Action) {
	switch a := a.(type) {
	case plan.QueryLMLE:
		r.queryLMLE(a.Seq)
	case plan.BumpLeaderEpoch:
		r.core.Leadership.Sent()
		r.bump(a)
	case plan.TruncateTo:
		r.truncate(a.Seq, a.Offset, false, a.Reason)
	case plan.TruncateFully:
		r.truncate(a.Seq, a.RestartAt, true, a.Reason)
	case plan.SetAlignedEpoch:
		r.update(func(rep *replica.Replica) { rep.SetAlignedEpoch(a.Epoch) })
	case plan.WriteRunRecord:
		r.write(a.Seq, StateWrite{Mirror: r.mirror, Run: a.Record})
	case plan.WriteLmleRecord:
		r.write(a.Seq, StateWrite{Mirror: r.mirror, Lmle: a.Record})
	case plan.StartFetcher:
		r.startFetcher(a)
	case plan.StopFetcher:
		r.fetch = nil
	case plan.SetWritable:
		r.update(func(rep *replica.Replica) {
			r.part.NoteWritable(a.Writable, a.LeaderEpoch)
			// A writable partition is a normal one: its leader assigns its
			// own LE from now on (assign(LE, LEO), SPEC §6.7 step 5).
			rep.SetMirrorPartition(!a.Writable)
			rep.SetWritable(a.Writable)
		})
		r.log.Info("mirror partition writable", "writable", a.Writable, "leader_epoch", a.LeaderEpoch)
		r.obs.Writable(a.Writable, a.LeaderEpoch)
	case plan.FailPendingProduces:
		// SetWritable(false) already failed them with READ_ONLY_TOPIC.
	case plan.AddTaints:
		r.addTaints(a)
	case plan.ClearTaint:
		// The cleared taint is durable (acks=all): only now may the
		// follower join the ISR (SPEC §6.6 step 4).
		r.update(func(rep *replica.Replica) { rep.ConfirmTaintCleared(a.Replica, r.env.NowMs()) })
	case plan.StopResult:
		r.log.Warn("mirror stop not done", "error", a.Error)
	case plan.Transition:
		r.log.Info("mirror state", "from", a.From, "to", a.To, "reason", a.Reason)
		r.obs.Transition(a)
	}
}

// addTaints installs taints. A run's taints (Seq > 0, SPEC §6.6 step 4)
// go in only if none names a member of the replica's maximal ISR, checked
// under the partition's lock with the install: the machine's ReplicaStatus
// may predate an ISR expansion a fetch proposed since, and the controller
// may commit it whatever the leader learns later (§8.19). The answer lets
// the machine write them, or keeps the run PENDING.
func (r *Runner) addTaints(a plan.AddTaints) {
	ts := make(map[twinlog.BrokerID]replica.Taint, len(a.Taints))
	var refused []twinlog.BrokerID
	for _, t := range a.Taints {
		ts[t.Replica] = replica.Taint{Epoch: t.Epoch, Offset: t.Offset}
		refused = append(refused, t.Replica)
	}
	if a.Seq == 0 {
		r.locked(func() {
			for id, t := range ts {
				r.part.Replica().SetTaint(id, t)
			}
		})
		r.obs.Taints(a, nil)
		return
	}
	r.update(func(rep *replica.Replica) { refused = rep.AddRunTaints(ts) })
	if len(refused) > 0 {
		r.log.Info("mirror taints refused: replicas joining the ISR", "replicas", refused)
	}
	r.obs.Taints(a, refused)
	r.core.Post(plan.TaintsAdded{Seq: a.Seq, Refused: refused})
}

func (r *Runner) queryLMLE(seq uint64) {
	r.env.QueryLMLE(func(lmle twinlog.Epoch, code pb.ErrorCode) {
		r.deliver(func() { r.core.Post(plan.LMLEAnswer{Seq: seq, LMLE: lmle, Error: code}) })
	})
}

// bump asks the controller for a new leader epoch; the machine hears of it
// once the local replica runs in it (progressBumps), so that the
// truncation that follows is made in that LE.
func (r *Runner) bump(a plan.BumpLeaderEpoch) {
	r.env.Bump(a, func(le twinlog.Epoch, code pb.ErrorCode) {
		r.deliver(func() {
			if code != pb.ErrorCode_ERROR_CODE_NONE {
				r.core.Post(plan.BumpFailed{Seq: a.Seq, Error: code})
				return
			}
			r.bumpWaits = append(r.bumpWaits, bumpWait{seq: a.Seq, want: le})
		})
	})
}

// progressBumps reports each answered bump once the replica runs in its
// LE, or has moved past it (BumpOutcome).
func (r *Runner) progressBumps() {
	if len(r.bumpWaits) == 0 {
		return
	}
	var le twinlog.Epoch
	var leader bool
	r.locked(func() {
		rep := r.part.Replica()
		le, leader = rep.LeaderEpoch(), rep.Role() == replica.RoleLeader
	})
	kept := r.bumpWaits[:0]
	var evs []plan.Event
	for _, bw := range r.bumpWaits {
		if ev, done := BumpOutcome(bw.seq, bw.want, le, leader); done {
			evs = append(evs, ev)
			continue
		}
		kept = append(kept, bw)
	}
	r.bumpWaits = kept
	for _, ev := range evs {
		r.core.Post(ev)
	}
}

func (r *Runner) truncate(seq uint64, o twinlog.Offset, full bool, reason plan.TruncateReason) {
	t := Truncation{Reason: reason, Offset: o, Full: full, Err: errClosed}
	r.locked(func() {
		rep := r.part.Replica()
		t.Before = rep.LogEndOffset()
		if r.part.Usable() {
			r.obs.Truncating()
			if full {
				// Restart empty at the source's log start, never a cut
				// there (SPEC §6.3 OFFSET_OUT_OF_RANGE, §6.6 step 2).
				t.Err = rep.TruncateFullyAsLeader(o, r.env.NowMs())
			} else {
				t.Err = rep.TruncateAsLeader(o, r.env.NowMs())
			}
			r.part.ProcessReady()
		}
		t.After = rep.LogEndOffset()
	})
	r.obs.Truncated(t)
	if t.Err != nil {
		// Leadership loss arrives through observe.
		r.log.Warn("mirror truncation failed", "offset", o, "err", t.Err)
		return
	}
	r.log.Warn("mirror truncation", "reason", reason, "offset", o, "log_end_offset_before", t.Before, "log_end_offset", t.After)
	r.core.Step(plan.TruncationDone{Seq: seq})
}

// write queues a __mirror_state write of this leadership.
func (r *Runner) write(seq uint64, w StateWrite) {
	if len(r.writes) >= MaxQueuedWrites {
		r.core.Post(plan.WriteFailed{Seq: seq, Error: pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
		return
	}
	w.Lead = r.lead
	r.writes = append(r.writes, queuedWrite{seq: seq, w: w})
	r.pumpWrites()
}

// pumpWrites sends the next queued write once none is in flight.
func (r *Runner) pumpWrites() {
	if r.inflight || len(r.writes) == 0 {
		return
	}
	q := r.writes[0]
	r.writes = r.writes[1:]
	r.inflight = true
	r.env.WriteState(q.w, func(err error) {
		r.deliver(func() {
			if q.w.Lead != r.lead {
				return // an earlier leadership's
			}
			r.inflight = false
			if err != nil {
				// The writes queued behind a failed one fail with it, in
				// order: none may land before it (a MIRRORING run record
				// durable without the LMLE record carrying its run's
				// taints lets a re-elected leader resume MIRRORING with
				// the skipped replicas untainted; simulator seed
				// 6109029). The machine writes them again, in order.
				r.log.Debug("write __mirror_state", "err", err, "queued_behind", len(r.writes))
				failed := append([]queuedWrite{q}, r.writes...)
				r.writes = nil
				for _, f := range failed {
					r.core.Post(plan.WriteFailed{Seq: f.seq, Error: pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
				}
				return
			}
			r.core.Post(plan.WriteAcked{Seq: q.seq})
			r.pumpWrites()
		})
	})
}

// startFetcher starts a Fetch{MIRROR} session (SPEC §6.3, FetchSession),
// ending any other: the runner performs its steps through the Env until
// it is done or the machine stops it.
func (r *Runner) startFetcher(a plan.StartFetcher) {
	l := &sessionLog{r: r}
	f := NewFetchSession(FetchConfig{
		Session: a.Session, MinSourceLeaderEpoch: a.MinSourceLeaderEpoch, TopicID: r.cfg.TopicID,
		Seen: &r.srcLE, Log: l, Post: r.postFetch, NowMs: r.env.NowMs, Pace: r.cfg.Pace,
	})
	l.f = f
	r.fetch = f
	r.fetchStep(f, f.Start())
}

// fetchStep performs session f's step st; each answer comes back on a
// later turn and is dropped if f is no longer the runner's session.
func (r *Runner) fetchStep(f *FetchSession, st Step) {
	if r.fetch != f {
		return
	}
	switch step := st.(type) {
	case LookupLeader:
		r.env.SourceLeader(step.Refresh, func(l SourceLeader, code pb.ErrorCode, err error) {
			r.deliver(func() {
				if r.fetch == f {
					r.fetchStep(f, f.Leader(l, code, err))
				}
			})
		})
	case SendFetch:
		r.env.Fetch(step, func(a *Answer, err error) {
			r.deliver(func() {
				if r.fetch != f {
					return
				}
				r.answer = a
				next := f.Answer(a, err)
				r.answer = nil
				r.fetchStep(f, next)
			})
		})
	case Wait:
		r.env.After(step.D, func() {
			r.deliver(func() {
				if r.fetch == f {
					r.fetchStep(f, f.Resume())
				}
			})
		})
	case Done:
		r.fetch = nil
	}
}

// postFetch hands a fetch session's event to the machine, logging the
// answers that prove the log no prefix of the source's.
func (r *Runner) postFetch(ev plan.Event) {
	switch ev := ev.(type) {
	case plan.FetchStraddle:
		r.log.Warn("mirror fetch: source batch straddles the log end: the log is no prefix of the source's", "base", ev.BaseOffset, "last", ev.LastOffset)
	case plan.FetchForeignEpoch:
		r.log.Warn("mirror fetch: source batch epoch below the latest cached epoch", "offset", ev.BaseOffset, "epoch", ev.Epoch)
	}
	r.obs.FetchEvent(ev)
	// A session reports only from the answers its runner hands it, on the
	// runner's turn: the machine hears at once.
	r.core.Post(ev)
}

// sessionLog is the partition as session f uses it (Log): its calls run
// with the partition locked. Once the machine stopped the session the
// partition is no longer the session's to append to, though an answer may
// still be in flight: the machine may be recording the LMLE and bumping
// for a stop, and a batch appended in the LE of that bump would precede
// the writable leadership's own epoch entry.
type sessionLog struct {
	r *Runner
	f *FetchSession
}

func (l *sessionLog) Locked(f func(LockedLog)) { l.r.locked(func() { f(l) }) }

func (l *sessionLog) Leading() bool {
	p := l.r.part
	return l.r.fetch == l.f && p.Usable() && p.Replica().Role() == replica.RoleLeader
}

func (l *sessionLog) Position() plan.LeaderLog {
	rep := l.r.part.Replica()
	return plan.LeaderLog{LogEndOffset: rep.LogEndOffset(), LeaderEpoch: rep.LeaderEpoch(), LatestEpoch: rep.LatestEpoch()}
}

func (l *sessionLog) AppendMirrored(metas []replica.BatchMeta, batches storage.Validated) error {
	if err := l.r.part.AppendMirrored(l.r.answer, metas, batches); err != nil {
		l.r.log.Warn("mirror append rejected", "err", err)
		return err
	}
	return nil
}

// locked runs f with the partition locked.
func (r *Runner) locked(f func()) {
	r.part.Lock()
	defer r.part.Unlock()
	f()
}
