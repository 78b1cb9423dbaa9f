package plan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage/epoch"
)

// Short names for the states of SPEC §6.5; NotStarted is UNSPECIFIED (no run yet).
const (
	NotStarted = twinlogv1.MirrorState_MIRROR_STATE_UNSPECIFIED
	Preparing  = twinlogv1.MirrorState_MIRROR_STATE_PREPARING
	Truncating = twinlogv1.MirrorState_MIRROR_STATE_TRUNCATING
	Pending    = twinlogv1.MirrorState_MIRROR_STATE_PENDING
	Mirroring  = twinlogv1.MirrorState_MIRROR_STATE_MIRRORING
	Paused     = twinlogv1.MirrorState_MIRROR_STATE_PAUSED
	Stopping   = twinlogv1.MirrorState_MIRROR_STATE_STOPPING
	Stopped    = twinlogv1.MirrorState_MIRROR_STATE_STOPPED
	Failed     = twinlogv1.MirrorState_MIRROR_STATE_FAILED
)

// ErrInvalidRequest is returned by Step for a desired-state change the
// current state does not allow (SPEC §6.5); callers answer INVALID_REQUEST.
var ErrInvalidRequest = errors.New("plan: invalid mirror state transition")

// Op is an operator request on a mirror partition.
type Op int

// Operator requests.
const (
	OpStart Op = iota
	OpPause
	OpResume
	OpStop
)

func (o Op) String() string { return [...]string{"start", "pause", "resume", "stop"}[o] }

// CheckTransition is the legality table of SPEC §6.5: Start from new,
// STOPPED or FAILED; Pause only from MIRRORING; Resume only from PAUSED;
// Stop from any state except STOPPED; otherwise INVALID_REQUEST.
func CheckTransition(s twinlogv1.MirrorState, op Op) twinlogv1.ErrorCode {
	ok := false
	switch op {
	case OpStart:
		ok = s == NotStarted || s == Stopped || s == Failed
	case OpPause:
		ok = s == Mirroring
	case OpResume:
		ok = s == Paused
	case OpStop:
		ok = s != Stopped
	}
	if ok {
		return twinlogv1.ErrorCode_ERROR_CODE_NONE
	}
	return twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
}

// Accepts reports whether the machine takes op in state s; Step refuses the
// rest with ErrInvalidRequest. Start and Stop follow CheckTransition. For
// Pause and Resume, CheckTransition is the controller's rule on the desired
// state (SPEC §6.5: Pause only from desired MIRRORING, Resume only from
// desired PAUSED), and a partition's run may be anywhere when the new
// desired state reaches its leader. The machine records it as its desired
// state in every state of a run — PREPARING, TRUNCATING, PENDING,
// MIRRORING, PAUSED, and FAILED, whose retry is a run — and acts on it once
// it can: it pauses on reaching MIRRORING (PAUSED does not fetch) and
// resumes a PAUSED run. Refusing it instead would drop it for good: the
// shell steps each desired-state change once. No run is to be paused or
// resumed before a start, while stopping, or when stopped (writable).
//
// A newer generation's Start (the controller takes Start from desired
// MIRRORING: a retried or redundant start) reaches the machine in any state
// too. A going run (PREPARING, TRUNCATING, PENDING, MIRRORING) takes it as
// satisfied and adopts the generation; STOPPING records it and starts the
// run once stopped. Only PAUSED refuses it (the controller refuses a Start
// from desired PAUSED: resume instead).
func Accepts(s twinlogv1.MirrorState, op Op) bool {
	if op == OpStart {
		switch s {
		case Preparing, Truncating, Pending, Mirroring, Stopping:
			return true
		}
	}
	if op != OpPause && op != OpResume {
		return CheckTransition(s, op) == twinlogv1.ErrorCode_ERROR_CODE_NONE
	}
	switch s {
	case Preparing, Truncating, Pending, Mirroring, Paused, Failed:
		return true
	}
	return false
}

// Log is the machine's read-only view of the local partition log. The shell
// owns it and applies the machine's actions to it before reporting them.
type Log interface {
	EpochCache() *epoch.Cache
	LogStartOffset() twinlog.Offset
	LogEndOffset() twinlog.Offset
	HighWatermark() twinlog.Offset
	// AlignedEpoch is aligned_epoch from partition.metadata (−1 none).
	AlignedEpoch() twinlog.Epoch
}

// Rand draws jitter: IntN returns a uniform int in [0, n).
type Rand interface{ IntN(n int) int }

// Config configures one partition's machine.
type Config struct {
	BrokerID       twinlog.BrokerID
	Mirror         string
	TopicPartition twinlog.TopicPartition
	TopicID        string
	// PendingTimeoutMs is mirror.pending.timeout.ms (PREPARING without an
	// answer and PENDING both fail after it).
	PendingTimeoutMs int64
	// RetryInitialBackoffMs, RetryMaxBackoffMs, RetryMaxAttempts are
	// mirror.failed.retry.{initial.backoff.ms,max.backoff.ms,max.attempts}.
	RetryInitialBackoffMs int64
	RetryMaxBackoffMs     int64
	RetryMaxAttempts      int32
	// MaxCorruptFetches consecutive CORRUPT_MESSAGE fetches fail the run.
	MaxCorruptFetches int
}

func (c Config) withDefaults() Config {
	if c.PendingTimeoutMs == 0 {
		c.PendingTimeoutMs = 300000
	}
	if c.RetryInitialBackoffMs == 0 {
		c.RetryInitialBackoffMs = 100
	}
	if c.RetryMaxBackoffMs == 0 {
		c.RetryMaxBackoffMs = 300000
	}
	if c.RetryMaxAttempts == 0 {
		c.RetryMaxAttempts = 20
	}
	if c.MaxCorruptFetches == 0 {
		c.MaxCorruptFetches = 3
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.BrokerID < 0:
		return fmt.Errorf("plan: broker id %d", c.BrokerID)
	case c.PendingTimeoutMs < 0, c.RetryInitialBackoffMs < 0, c.RetryMaxBackoffMs < c.RetryInitialBackoffMs,
		c.RetryMaxAttempts < 0, c.MaxCorruptFetches < 0:
		return errors.New("plan: negative or inconsistent timeouts")
	}
	return nil
}

// Deps are the machine's injected dependencies.
type Deps struct {
	Log  Log
	Rand Rand
}

// Ready is the output of the machine since the last Advance.
type Ready struct{ Actions []Action }

// step is what the machine waits for inside its state.
type step int

const (
	stepIdle          step = iota
	stepQuery              // PREPARING: QueryLMLE outstanding
	stepQueryBackoff       // PREPARING: re-query at nextAtMs
	stepRunBump            // TRUNCATING: bump outstanding
	stepRunTruncate        // TRUNCATING: truncation outstanding
	stepAwaitReplicas      // PENDING (or TRUNCATING before the first status)
	stepAddTaints          // the run's taints being installed (AddTaints{Seq})
	stepMirrorWrites       // MIRRORING record (+ taints) being written
	stepFetching           // fetcher running
	stepFetchBump          // bump for a fetched batch epoch
	stepFixBump            // bump before a divergence / out-of-range truncation
	stepFixTruncate        // that truncation
	stepStopWrites         // LMLE + STOPPING being written
	stepStopBump           // stop bump outstanding
	stepStoppedWrites      // STOPPED (+ LMLE) being written
	stepResumeWrites       // new leader rewriting a resumed state
	stepFailedBackoff      // FAILED: retry at nextAtMs
	stepOwedTruncate       // new leader doing its LE's truncation point first
)

type pendingWrite struct {
	run  bool // else lmle record
	cont bool // counts towards the current step
	// clear is the replica whose taint this write clears (−1 none).
	clear twinlog.BrokerID
	// owns: a new leadership's first write of a record it loaded (the LMLE
	// record's rewrite, or the first run record it decides); see
	// StateOwned.
	owns bool
}

// Machine is the mirror state machine of one partition on D. Not safe for
// concurrent use.
type Machine struct {
	cfg  Config
	log  Log
	rand Rand

	leader   bool
	le       twinlog.Epoch
	desired  Desired
	state    twinlogv1.MirrorState
	run      *twinlogv1.MirrorRunRecord  // in-memory run record (StateEpoch set on write)
	lmle     *twinlogv1.MirrorLmleRecord // nil: none
	aligned  twinlog.Epoch               // own aligned_epoch
	writable bool
	// taintsOwned: this leadership's LMLE record (which holds the taints;
	// the loaded one rewritten, or an empty one) is acknowledged; runOwned:
	// the run record carries its LE, or none was loaded (see StateOwned);
	// runClaimed: the first run write is issued.
	taintsOwned, runOwned, runClaimed bool
	// ownTaint: this broker, if the loaded record tainted it (the rewrite
	// clears it); −1 otherwise.
	ownTaint twinlog.BrokerID

	step     step
	seq      uint64
	await    uint64 // Seq of the outstanding query/bump/truncate
	writes   map[uint64]pendingWrite
	rewrite  []pendingWrite // failed writes, reissued on Tick
	bump     BumpLeaderEpoch
	bumpDue  bool // reissue bump on Tick
	fix      Truncation
	fixWhy   TruncateReason
	runTrunc Truncation
	nowMs    int64
	nextAtMs int64
	timeout  int64 // PREPARING/PENDING deadline
	queries  int
	t        twinlog.Offset // T of the run (§6.6 step 2)
	replicas *ReplicaStatus
	skipping []twinlog.BrokerID // skipped replicas whose AddTaints is awaited
	// taintWrite is, per replica, the sequence of the latest LMLE write
	// issued whose record taints it (writes land in issue order).
	taintWrite map[twinlog.BrokerID]uint64

	session   uint64
	fetching  bool
	corrupt   int
	srcHW     twinlog.Offset
	srcLEO    twinlog.Offset
	lag       LagClock
	fetchedMs int64 // time of the latest Fetched of this leadership; 0: none
	stopWait  bool
	stopUntil int64

	// leadHasRun: the BecameLeader being resumed after its owed truncation
	// (stepOwedTruncate) carried a run record.
	leadHasRun bool

	// kept is the run truncation this leadership did that nothing has
	// undone since (nil: none); an automatic retry reuses it (keptFor).
	kept *keptTruncation

	ready Ready
}

// keptTruncation is a run's LMLE truncation (SPEC §6.6 step 2) as a retry of
// the same generation may reuse it: the LMLE it used, the LE it was done in
// (the run's truncationEpoch, the leader's aligned_epoch) and T.
type keptTruncation struct {
	generation int64
	lmle       twinlog.Epoch
	epoch      twinlog.Epoch
	t          twinlog.Offset
}

// New returns a machine for a partition this broker does not lead yet.
func New(cfg Config, deps Deps) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Log == nil || deps.Rand == nil {
		return nil, errors.New("plan: Log and Rand are required")
	}
	m := &Machine{cfg: cfg.withDefaults(), log: deps.Log, rand: deps.Rand, le: twinlog.NoEpoch, ownTaint: twinlog.NoBroker,
		aligned: twinlog.NoEpoch, srcHW: twinlog.NoOffset, srcLEO: twinlog.NoOffset}
	m.run = m.freshRun(-1)
	return m, nil
}

func (m *Machine) freshRun(gen int64) *twinlogv1.MirrorRunRecord {
	return &twinlogv1.MirrorRunRecord{LmleUsed: -1, TruncationEpoch: -1, LmleRecorded: -1, Generation: gen}
}

// State is the current state (NotStarted before any run).
func (m *Machine) State() twinlogv1.MirrorState { return m.state }

// LeaderEpoch is the LE the machine knows (−1 when not leader yet).
func (m *Machine) LeaderEpoch() twinlog.Epoch { return m.le }

// Writable reports whether Produce is accepted.
func (m *Machine) Writable() bool { return m.writable }

// Leading reports whether the machine acts as the partition's leader: false
// before the first BecameLeader, after LostLeadership, and after a stale
// BecameLeader it refused (a record from a later LE).
func (m *Machine) Leading() bool { return m.leader }

// StateOwned reports whether the state this leadership resumes is durably
// its own (SPEC §6.4: a new leader rewrites the state it resumes with its LE
// before acting on it): the LMLE record it loaded is rewritten with its LE,
// and so is the run record with this leadership's first decision (redo the
// run from PREPARING, the STOPPING record with the LMLE it computed, or the
// resumed state), or it loaded no such record. Until then the shell keeps
// the replica taints-pending, serving no follower fetch:
//
//   - a late write of an earlier leadership (a zombie on old metadata) can
//     still land after the read and change the durable taints, which the
//     next leader would load for a replica this one let into the ISR
//     (simulator seed 1416997);
//   - a follower answered in this LE sets its aligned_epoch to it (§6.6
//     step 3). If this leader is not aligned with the loaded run (elected
//     while the run's truncation had not reached it), the follower copies
//     records the truncation removed and still counts as aligned for the
//     old run; were it to lead before this leadership's run record lands,
//     it would stop with an LMLE claiming them shared (simulator seed
//     1709687, §8.20).
func (m *Machine) StateOwned() bool { return m.leader && m.taintsOwned && m.runOwned }

// HasReady reports whether actions are waiting.
func (m *Machine) HasReady() bool { return len(m.ready.Actions) > 0 }

// Ready returns the actions produced since the last Advance, in order.
func (m *Machine) Ready() Ready { return m.ready }

// Advance acknowledges that the shell took the last Ready.
func (m *Machine) Advance() { m.ready = Ready{} }

func (m *Machine) emit(a Action) { m.ready.Actions = append(m.ready.Actions, a) }

func (m *Machine) next() uint64 { m.seq++; return m.seq }

func (m *Machine) setState(s twinlogv1.MirrorState, why string) {
	if s == m.state {
		return
	}
	m.emit(Transition{From: m.state, To: s, Reason: why})
	m.state = s
	m.run.State = s
}

// Step applies one input. It returns ErrInvalidRequest for an illegal
// operator request (nothing changes).
func (m *Machine) Step(ev Event) error {
	err := m.step1(ev)
	m.assertInvariants()
	return err
}

func (m *Machine) step1(ev Event) error {
	switch ev := ev.(type) {
	case Tick:
		m.nowMs = max(m.nowMs, ev.NowMs)
		if m.leader {
			m.tick()
		}
		return nil
	case BecameLeader:
		m.becomeLeader(ev)
		return nil
	case LostLeadership:
		m.loseLeadership()
		return nil
	case Start:
		return m.opStart(ev)
	case Pause:
		return m.opPause()
	case Resume:
		return m.opResume()
	case Stop:
		return m.opStop(ev)
	case ReplicaStatusChanged:
		st := ev.Status
		m.replicas = &st
		if m.leader && m.step == stepAwaitReplicas {
			m.checkReplicas()
		}
		return nil
	case BumpDone:
		// Any bump of ours raises LE, answered late or not.
		m.le = max(m.le, ev.LeaderEpoch)
	}
	if !m.leader {
		return nil
	}
	switch ev := ev.(type) {
	case LMLEAnswer:
		m.onLMLE(ev)
	case BumpDone:
		if ev.Seq == m.await {
			m.onBumpDone()
		}
	case BumpFailed:
		if ev.Seq == m.await {
			m.run.LastError = "bump leader epoch: " + ev.Error.String()
			m.bumpDue = true
		}
	case TruncationDone:
		if ev.Seq == m.await {
			m.onTruncationDone()
		}
	case WriteAcked:
		m.onWriteAcked(ev.Seq)
	case WriteFailed:
		if w, ok := m.writes[ev.Seq]; ok {
			delete(m.writes, ev.Seq)
			m.rewrite = append(m.rewrite, w)
			m.run.LastError = "write __mirror_state: " + ev.Error.String()
		}
	case TaintsAdded:
		if m.step == stepAddTaints && ev.Seq == m.await {
			m.onTaintsAdded(ev.Refused)
		}
	case FollowerRepaired:
		m.onRepaired(ev.Replica)
	case Fetched, FetchNeedsBump, FetchDiverging, FetchOutOfRange, FetchForeignEpoch, FetchStraddle, FetchError:
		m.onFetch(ev)
	}
	return nil
}

// ---- leadership ----

func (m *Machine) becomeLeader(ev BecameLeader) {
	if m.leader && ev.LeaderEpoch <= m.le {
		return
	}
	if staleLeadership(ev) {
		// Records written in a later LE prove this leadership stale (a
		// zombie on old metadata): do not act on them, and stay neither
		// writable nor fetching until newer leadership arrives.
		wasWritable := m.writable
		m.loseLeadership()
		if wasWritable {
			m.emit(SetWritable{Writable: false, LeaderEpoch: m.le})
		}
		return
	}
	owed, why, isOwed := m.owedTruncation(ev)
	m.resetTransient()
	// A new leadership is a new leader's run: its retries bump (keptFor).
	m.kept = nil
	m.leader = true
	m.le = ev.LeaderEpoch
	m.aligned = m.log.AlignedEpoch()
	m.desired = ev.Desired
	m.lmle = cloneLmle(ev.Lmle)
	m.ownTaint = twinlog.NoBroker
	if m.lmle != nil && slices.ContainsFunc(m.lmle.Taints, func(t *twinlogv1.ReplicaTaint) bool { return t.Replica == int32(m.cfg.BrokerID) }) {
		// A tainted leader was elected uncleanly (a taint keeps a replica
		// out of the ISR and ELR, §8.19): its log is the partition's now,
		// and its followers copy it. Its taint would make the next leader
		// cut it back to T while it sits in the ISR, and electing it then
		// loses acknowledged records (§8.12; simulator seed 1702538). It
		// clears with this leadership's rewrite, as when a leader does
		// §6.6 step 2 itself; §6.8 already gives up repairing its records.
		m.lmle.Taints = taintsToProto(WithoutTaint(taintsFromProto(m.lmle.Taints), m.cfg.BrokerID))
		m.ownTaint = m.cfg.BrokerID
	}
	if m.lmle != nil && len(m.lmle.Taints) > 0 {
		m.emit(AddTaints{Taints: taintsFromProto(m.lmle.Taints)})
	}
	m.writable = false
	// An earlier leadership's rewrite, still unacked, carries its LE.
	m.forgetWrites(func(w pendingWrite) bool { return w.owns })
	// The LMLE record is rewritten (or, none loaded, written empty) with
	// this LE before the leadership owns its taints: until a record of
	// this LE is there, a zombie's late write of an earlier LE (its own
	// taints) lands as the newest, and the next leader loads taints of a
	// replica this one let into the ISR (§8.19; simulator seeds 1416997,
	// and 1901841 with no record loaded).
	m.taintsOwned = false
	m.runOwned, m.runClaimed = ev.Run == nil, false
	if ev.Run == nil {
		m.run = m.freshRun(-1)
		m.state = NotStarted
	} else {
		m.run = cloneRun(ev.Run)
		m.state = m.run.State
	}
	if isOwed {
		// The LE carries a truncation point nobody executed (SPEC §6.2f; see
		// BecameLeader): truncate first, then start from the records.
		// Operator requests meanwhile only update the desired state.
		m.leadHasRun = ev.Run != nil
		m.step = stepOwedTruncate
		m.truncate(owed, why)
		return
	}
	m.ownTaints()
	m.resumeLeadership(ev.Run != nil)
}

// ownTaints rewrites the LMLE record a new leadership loaded with its LE
// (SPEC §6.4), or writes an empty one if it loaded none, first of all it
// writes (after an owed truncation); its ack makes taintsOwned true
// (StateOwned).
func (m *Machine) ownTaints() {
	if !m.taintsOwned {
		m.emitLmle(pendingWrite{clear: m.ownTaint, owns: true})
	}
}

// resumeLeadership starts a new leadership from the loaded records (m.run,
// m.state, m.lmle) and the desired state.
func (m *Machine) resumeLeadership(hasRun bool) {
	if !hasRun {
		switch m.desired.State {
		case NotStarted:
			m.setWritable(true) // a topic in no mirror
		case Stopped:
			m.beginStopping("new leader, desired STOPPED")
		default:
			m.reconcile()
		}
		return
	}
	switch m.state {
	case Preparing, Truncating, Pending:
		// SPEC §6.5: redo the run from PREPARING.
		if m.desired.State == Stopped {
			m.beginStopping("new leader, desired STOPPED")
			return
		}
		m.beginRun("new leader redoes the run")
	case Stopping:
		m.resumeStopping()
	case Mirroring, Paused, Stopped, Failed:
		if m.desired.State == Stopped && m.state != Stopped {
			m.beginStopping("new leader, desired STOPPED")
			return
		}
		if m.state == Failed || m.state == Stopped {
			if m.startWanted() {
				m.beginStart()
				return
			}
		}
		// Rewrite the resumed state with our LE before acting on it.
		m.writeRun(true)
		m.step = stepResumeWrites
	default:
		panic(fmt.Sprintf("plan: run record in state %v", m.state))
	}
}

// owedTruncation is the truncation a BecameLeader must do before anything
// else: the controller's truncation point in its LE, if any. When it is the
// one this machine's outstanding bump asked for (the answer was lost), it
// is exactly that truncation (a full one restarts where it meant to, with its
// reason); otherwise a cut at the point within the log (a full truncation
// at the log start if the point lies below it).
func (m *Machine) owedTruncation(ev BecameLeader) (Truncation, TruncateReason, bool) {
	o := twinlog.NoOffset
	for _, p := range ev.TruncationPoints {
		if p.LeaderEpoch == ev.LeaderEpoch {
			o = p.Offset
		}
	}
	if o < 0 {
		return Truncation{}, "", false
	}
	if m.leader && m.await == m.bump.Seq && m.bump.TruncationOffset == o {
		switch m.step {
		case stepRunBump:
			return m.runTrunc, ReasonLMLE, true
		case stepFixBump:
			return m.fix, m.fixWhy, true
		}
	}
	why := ReasonDivergence
	if st := ev.Run.GetState(); st == Preparing || st == Truncating {
		why = ReasonLMLE
	}
	ls, leo := m.log.LogStartOffset(), m.log.LogEndOffset()
	if o < ls {
		return Truncation{Full: true, Offset: ls, RestartAt: ls}, why, true
	}
	return Truncation{Offset: min(o, leo)}, why, true
}

// staleLeadership reports whether ev carries a record written in (or
// truncated at) an LE above ev.LeaderEpoch.
func staleLeadership(ev BecameLeader) bool {
	le := int32(ev.LeaderEpoch)
	return ev.Run.GetStateEpoch() > le || ev.Run.GetTruncationEpoch() > le || ev.Lmle.GetStateEpoch() > le
}

func (m *Machine) loseLeadership() {
	if !m.leader {
		return
	}
	if m.stopWait {
		m.emit(StopResult{Error: twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER})
	}
	m.resetTransient()
	m.writes, m.rewrite = nil, nil
	m.leader = false
	m.kept = nil
	m.writable = false
	m.taintsOwned, m.runOwned = false, false
}

// dropStepWrites forgets the writes a step was waiting for; taint-clearing
// writes and the leadership's own rewrite stay tracked so that their ack
// still clears the taint or settles StateOwned.
func (m *Machine) dropStepWrites() {
	m.forgetWrites(func(w pendingWrite) bool { return w.clear == twinlog.NoBroker && !w.owns })
}

// forgetWrites stops tracking the pending and failed writes that match:
// their acks are ignored and they are not reissued.
func (m *Machine) forgetWrites(match func(pendingWrite) bool) {
	for seq, w := range m.writes {
		if match(w) {
			delete(m.writes, seq)
		}
	}
	m.rewrite = slices.DeleteFunc(m.rewrite, match)
}

func (m *Machine) resetTransient() {
	m.stopFetcher()
	// The source's HW and LEO are those of this leadership's and run's
	// fetches: one from an earlier run or leadership would call the log
	// caught up (a stop --wait-for-catch-up right after a failback, whose
	// first fetch may still cut the log) and show a lag of the past.
	m.srcHW, m.srcLEO = twinlog.NoOffset, twinlog.NoOffset
	m.fetchedMs = 0
	m.step = stepIdle
	m.await = 0
	m.dropStepWrites()
	m.bumpDue = false
	m.stopWait = false
	m.corrupt = 0
	m.queries = 0
}

// ---- operator requests ----

// deferring: operator requests only update the desired state (not leader,
// or a new leader still doing its owed truncation).
func (m *Machine) deferring() bool { return !m.leader || m.step == stepOwedTruncate }

func (m *Machine) opStart(ev Start) error {
	if m.deferring() {
		m.desired = Desired{State: Mirroring, Generation: ev.Generation, SourceClusterID: ev.SourceClusterID}
		return nil
	}
	if ev.Generation <= m.run.Generation && m.desired.State == Mirroring {
		return nil // re-delivery of the current generation
	}
	switch m.state {
	case Preparing, Truncating, Pending, Mirroring:
		// The run is going: it is the start asked for. It adopts the
		// generation, recorded in the run record, and carries on. A fresh
		// run here would bump and truncate to the LMLE again (with −1, the
		// whole log: every record copied and copied again); left at its
		// old generation, the run would start over as soon as it failed
		// and a new leader found the newer desired generation (startWanted),
		// instead of retrying.
		m.desired = Desired{State: Mirroring, Generation: ev.Generation, SourceClusterID: ev.SourceClusterID}
		if ev.Generation > m.run.Generation {
			if m.kept != nil && m.kept.generation == m.run.Generation {
				m.kept.generation = ev.Generation
			}
			m.run.Generation = ev.Generation
			m.writeRun(false)
		}
		return nil
	case Stopping:
		// Started again while stopping: the stop completes (the operator
		// asked for both, in this order) and reconcile then begins the run.
		m.desired = Desired{State: Mirroring, Generation: ev.Generation, SourceClusterID: ev.SourceClusterID}
		return nil
	}
	if CheckTransition(m.state, OpStart) != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return fmt.Errorf("%w: start from %v", ErrInvalidRequest, m.state)
	}
	m.desired = Desired{State: Mirroring, Generation: ev.Generation, SourceClusterID: ev.SourceClusterID}
	if ev.Generation <= m.run.Generation {
		return nil
	}
	m.beginStart()
	return nil
}

func (m *Machine) opPause() error {
	if m.deferring() || m.nextRunAfterStop() {
		m.desired.State = Paused
		return nil
	}
	if !Accepts(m.state, OpPause) {
		return fmt.Errorf("%w: pause from %v", ErrInvalidRequest, m.state)
	}
	m.desired.State = Paused
	// Otherwise the machine pauses after the bump or truncation in flight
	// (fetchAgain) or on reaching MIRRORING (onWriteAcked; a FAILED run's
	// retry too), or is PAUSED already.
	if m.state == Mirroring && m.step == stepFetching {
		m.pause()
	}
	return nil
}

func (m *Machine) opResume() error {
	if m.deferring() || m.nextRunAfterStop() {
		m.desired.State = Mirroring
		return nil
	}
	if !Accepts(m.state, OpResume) {
		return fmt.Errorf("%w: resume from %v", ErrInvalidRequest, m.state)
	}
	m.desired.State = Mirroring
	// Otherwise the run, or the bump or truncation in flight of a deferred
	// pause, goes on to fetch in MIRRORING.
	if m.state == Paused {
		m.resume()
	}
	return nil
}

// nextRunAfterStop reports a stop in progress with a run wanted after it
// (started again while stopping, or a new leader that loaded a STOPPING
// run under the desired state of a later generation): a Pause or Resume is
// that run's desired state, for reconcile to start it with once the stop
// is done. Refused, a Resume left the next run PAUSED for good under
// desired MIRRORING (simulator seed 2001489).
func (m *Machine) nextRunAfterStop() bool { return m.state == Stopping && m.startWanted() }

func (m *Machine) opStop(ev Stop) error {
	if m.deferring() {
		m.desired.State = Stopped
		return nil
	}
	if m.state == Stopping {
		m.desired.State = Stopped // a Start since (opStart) is undone
		return nil
	}
	if CheckTransition(m.state, OpStop) != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return fmt.Errorf("%w: stop from %v", ErrInvalidRequest, m.state)
	}
	if ev.WaitForCatchUp && !m.caughtUpNow() {
		m.stopWait = true
		m.stopUntil = m.nowMs + ev.TimeoutMs
		return nil
	}
	m.desired.State = Stopped
	m.beginStopping("stop")
	return nil
}

// CaughtUp reports that the log has reached the source HW of this run's
// latest fetch (false before this leadership's and run's first Fetched).
func (m *Machine) CaughtUp() bool { return m.leader && m.state == Mirroring && m.caughtUpNow() }

func (m *Machine) caughtUpNow() bool {
	return m.srcHW >= 0 && m.log.LogEndOffset() >= m.srcHW
}

// startWanted: metadata asks for a run newer than the current one. A
// generation paused before this machine began it is such a run too (the
// controller pauses only a started one): it pauses on reaching MIRRORING.
func (m *Machine) startWanted() bool {
	return (m.desired.State == Mirroring || m.desired.State == Paused) && m.desired.Generation > m.run.Generation
}

// reconcile applies the desired state once the machine is in a stable state.
func (m *Machine) reconcile() {
	switch {
	case m.desired.State == Stopped && m.state != Stopped && m.state != Stopping:
		m.beginStopping("desired STOPPED")
	case m.startWanted() && CheckTransition(m.state, OpStart) == twinlogv1.ErrorCode_ERROR_CODE_NONE:
		m.beginStart()
	case m.desired.State == Paused && m.state == Mirroring && m.step == stepFetching:
		m.pause()
	case m.desired.State == Mirroring && m.state == Paused:
		m.resume()
	}
}

// ---- run: PREPARING → TRUNCATING → PENDING → MIRRORING ----

func (m *Machine) beginStart() {
	// An operator's Start is a fresh run: it bumps and truncates.
	m.kept = nil
	m.run = m.freshRun(m.desired.Generation)
	m.run.State = m.state
	m.beginRun("start")
}

func (m *Machine) beginRun(why string) {
	m.stopFetcher()
	m.resetTransient()
	if m.writable || m.state == NotStarted || m.state == Stopped {
		m.setWritable(false)
		m.emit(FailPendingProduces{Error: twinlogv1.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC})
	}
	m.setState(Preparing, why)
	m.run.LmleUsed = -1
	m.run.TruncationEpoch = -1 // SPEC §6.6 step 1: no run yet
	m.run.SkippedReplicas = nil
	m.writeRun(false)
	m.timeout = m.nowMs + m.cfg.PendingTimeoutMs
	m.query()
}

func (m *Machine) query() {
	m.await = m.next()
	m.step = stepQuery
	m.emit(QueryLMLE{Seq: m.await})
}

func (m *Machine) onLMLE(ev LMLEAnswer) {
	if m.step != stepQuery || ev.Seq != m.await {
		return
	}
	switch {
	case ev.Error == twinlogv1.ErrorCode_ERROR_CODE_NONE:
		m.run.LastError = ""
		if k := m.keptFor(ev.LMLE); k != nil {
			m.reuseTruncation(*k)
			return
		}
		m.beginTruncating(ev.LMLE)
	case Fatal(ev.Error):
		m.fail("get last mirrored epochs: " + ev.Error.String() + ": " + FatalReason(ev.Error))
	default:
		m.run.LastError = "get last mirrored epochs: " + ev.Error.String()
		m.step = stepQueryBackoff
		m.nextAtMs = m.nowMs + Backoff(m.rand, m.queries, m.cfg.RetryInitialBackoffMs, m.cfg.RetryMaxBackoffMs)
		m.queries++
	}
}

// keptFor returns the kept run truncation an automatic retry answered lmle
// reuses instead of bumping and truncating again, or nil. Issue 13: a retry
// must not ratchet the LE (one bump per retry, up to max.attempts) nor, with
// LMLE −1, truncate away every record the run copied and copy it again.
//
// It is reused only when nothing could make the bump and truncation do
// anything new:
//   - the same leadership (kept is dropped on BecameLeader and
//     LostLeadership: a new leader's run bumps, SPEC §6.5) and the same
//     generation (an operator's Start drops it too: a Start is a new run);
//   - no truncation and no truncating bump since (truncate and requestBump
//     drop it): the log is the run's truncated log plus records appended
//     by the fetcher, which are S's own records that passed the fetch
//     protocol's divergence checks (§6.3). A fetch bump (§6.2d: LE ≥ a
//     batch epoch, no truncation point) keeps it: it removes nothing;
//   - the same LMLE answer: the truncation to its point is already done, so
//     redoing it could only cut records copied from S since (epochs > LMLE
//     on D were all fetched from S after it). Another answer truncates anew;
//   - the leader is still aligned in the kept LE (aligned_epoch unchanged).
//
// Followers need no new fence: every follower fetching in an LE ≥ the
// kept truncationEpoch was checked against this leader's log (§4.3 step 4)
// and the leader has removed nothing since, so no follower can hold a record
// the leader no longer has; the replicas skipped are tainted with the run's
// (lmleUsed, T) as before.
func (m *Machine) keptFor(lmle twinlog.Epoch) *keptTruncation {
	k := m.kept
	if k == nil || k.generation != m.run.Generation || k.lmle != lmle || m.aligned != k.epoch {
		return nil
	}
	return k
}

// reuseTruncation goes on from PREPARING with the kept run truncation: the
// run's lmleUsed, truncationEpoch and T are the kept ones, and it awaits the
// replicas (PENDING) as after a truncation, with no bump and no truncation.
func (m *Machine) reuseTruncation(k keptTruncation) {
	m.setState(Truncating, fmt.Sprintf("lmle %d: retry keeps the run's truncation of LE %d (no bump, no truncation)", k.lmle, k.epoch))
	m.run.LmleUsed = int32(k.lmle)
	m.run.TruncationEpoch = int32(k.epoch)
	m.writeRun(false)
	m.awaitReplicas(k.t)
}

func (m *Machine) beginTruncating(lmle twinlog.Epoch) {
	m.setState(Truncating, fmt.Sprintf("lmle %d", lmle))
	m.run.LmleUsed = int32(lmle)
	m.runTrunc = LMLETruncationOffset(m.log.EpochCache(), lmle, m.log.LogStartOffset(), m.log.LogEndOffset())
	m.writeRun(false)
	m.step = stepRunBump
	m.requestBump(m.le+1, m.runTrunc.Offset)
}

func (m *Machine) requestBump(minLE twinlog.Epoch, truncation twinlog.Offset) {
	if truncation >= 0 {
		m.kept = nil // a truncation follows (SPEC §6.2f)
	}
	m.await = m.next()
	m.bump = BumpLeaderEpoch{Seq: m.await, LeaderEpoch: m.le, MinLeaderEpoch: minLE, TruncationOffset: truncation}
	m.bumpDue = false
	m.emit(m.bump)
}

func (m *Machine) onBumpDone() {
	m.run.LastError = ""
	switch m.step {
	case stepRunBump:
		m.run.TruncationEpoch = int32(m.le)
		if m.runTrunc.NoOp {
			m.afterRunTruncation()
			return
		}
		m.step = stepRunTruncate
		m.truncate(m.runTrunc, ReasonLMLE)
	case stepFetchBump:
		m.fetchAgain()
	case stepFixBump:
		m.step = stepFixTruncate
		m.truncate(m.fix, m.fixWhy)
	case stepStopBump:
		m.stopped()
	}
}

func (m *Machine) truncate(t Truncation, why TruncateReason) {
	m.kept = nil
	m.await = m.next()
	if t.Full {
		m.emit(TruncateFully{Seq: m.await, RestartAt: t.RestartAt, Reason: why})
	} else {
		m.emit(TruncateTo{Seq: m.await, Offset: t.Offset, Reason: why})
	}
}

func (m *Machine) onTruncationDone() {
	switch m.step {
	case stepRunTruncate:
		m.afterRunTruncation()
	case stepFixTruncate:
		m.fetchAgain()
	case stepOwedTruncate:
		m.step = stepIdle
		m.ownTaints()
		m.resumeLeadership(m.leadHasRun)
	}
}

func (m *Machine) afterRunTruncation() {
	te := twinlog.Epoch(m.run.TruncationEpoch)
	m.aligned = te
	m.emit(SetAlignedEpoch{Epoch: te})
	t := m.log.LogEndOffset()
	m.kept = &keptTruncation{generation: m.run.Generation, lmle: twinlog.Epoch(m.run.LmleUsed), epoch: te, t: t}
	m.awaitReplicas(t)
}

// awaitReplicas records the run's T (SPEC §6.6 step 2) and waits for the
// replicas to align (step 3).
func (m *Machine) awaitReplicas(t twinlog.Offset) {
	m.t = t
	m.writeRun(false)
	m.step = stepAwaitReplicas
	m.timeout = m.nowMs + m.cfg.PendingTimeoutMs
	m.checkReplicas()
}

func (m *Machine) checkReplicas() {
	if m.replicas != nil && ReadyToMirror(*m.replicas, m.cfg.BrokerID, m.aligned, twinlog.Epoch(m.run.TruncationEpoch)) {
		m.enterMirroring()
		return
	}
	if m.state != Pending {
		m.setState(Pending, "awaiting aligned replicas")
		m.writeRun(false)
	}
}

// enterMirroring taints the skipped replicas (SPEC §6.6 step 4). The
// ReplicaStatus they come from may be stale: the leader may have proposed
// one of them for the ISR since. So the taints are installed first, checked
// against the replica's maximal ISR at that moment (AddTaints{Seq}), and
// only once they hold are they written with the MIRRORING record.
func (m *Machine) enterMirroring() {
	st := *m.replicas
	skipped := SkippedReplicas(st.Replicas, st.ISR)
	if len(skipped) == 0 {
		m.commitMirroring(nil)
		return
	}
	m.skipping = skipped
	m.await = m.next()
	m.step = stepAddTaints
	m.emit(AddTaints{Seq: m.await, Taints: RunTaints(taintsFromProto(m.lmleOrEmpty().Taints), skipped, twinlog.Epoch(m.run.LmleUsed), m.t)})
}

// onTaintsAdded: the replica installed the run's taints, or refused them
// all because it holds a target in its maximal ISR (an expansion proposed
// after the status the machine used). Then the run stays PENDING and checks
// again with the next status (or Tick), which shows the expansion.
func (m *Machine) onTaintsAdded(refused []twinlog.BrokerID) {
	if len(refused) == 0 {
		m.commitMirroring(m.skipping)
		return
	}
	m.run.LastError = fmt.Sprintf("taints refused: replicas %v are joining the ISR", refused)
	m.step = stepAwaitReplicas
	if m.state != Pending {
		m.setState(Pending, "skipped replicas joining the ISR")
		m.writeRun(false)
	}
}

// commitMirroring writes the MIRRORING record and the taints of the
// skipped replicas (installed in the replica already).
func (m *Machine) commitMirroring(skipped []twinlog.BrokerID) {
	added := TaintsFor(skipped, twinlog.Epoch(m.run.LmleUsed), m.t)
	m.run.SkippedReplicas = brokersToInt32(skipped)
	m.run.State = Mirroring
	l := m.lmleOrEmpty()
	existing := taintsFromProto(l.Taints)
	// The leader did step 2 itself: its own taint clears (SPEC §6.6 step 4).
	clear := twinlog.NoBroker
	if slices.ContainsFunc(existing, func(t Taint) bool { return t.Replica == m.cfg.BrokerID }) {
		clear = m.cfg.BrokerID
	}
	l.Taints = taintsToProto(MergeTaints(WithoutTaint(existing, m.cfg.BrokerID), added))
	m.lmle = l
	m.step = stepMirrorWrites
	m.writeLmle(true, clear)
	m.writeRun(true)
}

func (m *Machine) lmleOrEmpty() *twinlogv1.MirrorLmleRecord {
	if m.lmle == nil {
		return &twinlogv1.MirrorLmleRecord{Lmle: -1, LeaderEpochAfterStop: -1, LeoAtStop: -1}
	}
	return cloneLmle(m.lmle)
}

func (m *Machine) mirroring(why string) {
	if m.state != Mirroring {
		m.lag.Reset() // lag counts from the start of mirroring
	}
	m.setState(Mirroring, why)
	// A new leader resumes MIRRORING without the run's LMLE truncation: if
	// it once led writable (a tainted replica elected uncleanly, §6.8), its
	// own (LE, LEO) entry is still cached. Drop it first (bump, cut at the
	// LEO, §6.2f), then fetch (fixLog).
	if t := EmptyEpochTruncation(m.log.EpochCache(), twinlog.Epoch(m.run.LmleUsed), m.log.LogStartOffset(), m.log.LogEndOffset()); !t.NoOp {
		m.fixLog(t, ReasonLMLE)
		return
	}
	m.startFetcher()
}

// ---- fetcher ----

func (m *Machine) startFetcher() {
	m.session = m.next()
	m.fetching = true
	m.step = stepFetching
	m.emit(StartFetcher{Session: m.session, MinSourceLeaderEpoch: MinSourceLeaderEpoch(twinlog.Epoch(m.run.LmleUsed))})
}

func (m *Machine) stopFetcher() {
	if m.fetching {
		m.fetching = false
		m.emit(StopFetcher{Session: m.session})
	}
}

func (m *Machine) onFetch(ev Event) {
	if m.step != stepFetching {
		return
	}
	switch ev := ev.(type) {
	case Fetched:
		if ev.Session != m.session {
			return
		}
		m.nowMs = max(m.nowMs, ev.NowMs)
		m.srcHW, m.srcLEO = ev.SourceHighWatermark, ev.SourceLogEndOffset
		m.fetchedMs = m.nowMs
		m.lag.Observe(m.srcHW, m.log.HighWatermark(), m.nowMs)
		m.corrupt = 0
		m.run.LastError = ""
		if m.log.LogEndOffset() >= m.srcHW {
			if m.stopWait {
				m.stopWait = false
				m.desired.State = Stopped
				m.beginStopping("stop after catch-up")
			}
		}
	case FetchNeedsBump:
		if ev.Session != m.session {
			return
		}
		m.stopFetcher()
		m.step = stepFetchBump
		m.requestBump(ev.Epoch, twinlog.NoOffset) // SPEC §6.2d
	case FetchDiverging:
		if ev.Session != m.session {
			return
		}
		t := DivergenceTruncation(m.log.EpochCache(), m.log.LogStartOffset(), m.log.LogEndOffset(), ev.Epoch, ev.EndOffset)
		m.fixLog(t, ReasonDivergence)
	case FetchOutOfRange:
		if ev.Session != m.session {
			return
		}
		ls := m.log.LogStartOffset()
		m.fixLog(Truncation{Full: true, Offset: ls, RestartAt: ev.SourceLogStartOffset}, ReasonOutOfRange)
	case FetchForeignEpoch:
		if ev.Session != m.session {
			return
		}
		t := ForeignEpochTruncation(m.log.EpochCache(), m.log.LogStartOffset(), m.log.LogEndOffset(), ev.Epoch, ev.BaseOffset, ev.SourceLogStartOffset)
		m.fixLog(t, ReasonDivergence)
	case FetchStraddle:
		if ev.Session != m.session {
			return
		}
		m.fixLog(StraddleTruncation(m.log.LogStartOffset(), ev.BaseOffset, ev.SourceLogStartOffset), ReasonDivergence)
	case FetchError:
		if ev.Session != m.session {
			return
		}
		msg := "fetch: " + ev.Error.String()
		if ev.Message != "" {
			msg += ": " + ev.Message
		}
		switch {
		case Fatal(ev.Error):
			m.fail(msg + ": " + FatalReason(ev.Error))
		case ev.Error == twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE:
			m.corrupt++
			m.run.LastError = msg
			if m.corrupt >= m.cfg.MaxCorruptFetches {
				m.fail(msg)
			}
		default:
			m.run.LastError = msg
		}
	}
}

// fetchAgain restarts the fetcher after a bump or truncation, unless a Pause
// arrived meanwhile.
func (m *Machine) fetchAgain() {
	if m.desired.State == Paused {
		m.pause()
		return
	}
	m.startFetcher()
}

// fixLog bumps then truncates (SPEC §6.2f, §6.3), then fetches again.
func (m *Machine) fixLog(t Truncation, why TruncateReason) {
	m.stopFetcher()
	if t.NoOp {
		m.fetchAgain()
		return
	}
	m.fix, m.fixWhy = t, why
	m.step = stepFixBump
	m.requestBump(m.le+1, t.Offset)
}

// ---- pause / resume ----

func (m *Machine) pause() {
	m.stopFetcher()
	m.setState(Paused, "pause")
	m.step = stepIdle
	m.writeRun(false)
}

func (m *Machine) resume() {
	m.run.State = Mirroring
	m.writeRun(false)
	m.mirroring("resume")
}

// ---- stop (SPEC §6.7) ----

func (m *Machine) beginStopping(why string) {
	m.resetTransient()
	m.kept = nil // the stop bump; a Start after it is a new run
	aligned := Aligned(twinlog.Epoch(m.run.TruncationEpoch), m.aligned)
	existing := twinlog.NoEpoch
	if m.lmle != nil {
		existing = twinlog.Epoch(m.lmle.Lmle)
	}
	lmle := LMLEAtStop(aligned, m.log.EpochCache(), existing)
	l := m.lmleOrEmpty()
	l.Lmle = int32(lmle)
	if aligned {
		l.SourceClusterId = m.desired.SourceClusterID
	}
	m.lmle = l
	m.run.LmleRecorded = int32(lmle)
	m.setState(Stopping, why)
	m.step = stepStopWrites
	m.writeLmle(true, twinlog.NoBroker)
	m.writeRun(true)
}

// resumeStopping: a new leader reuses lmleRecorded (SPEC §6.7 step 5).
func (m *Machine) resumeStopping() {
	l := m.lmleOrEmpty()
	if l.Lmle != m.run.LmleRecorded {
		l.Lmle = m.run.LmleRecorded
		l.SourceClusterId = m.desired.SourceClusterID
	}
	m.lmle = l
	m.step = stepStopWrites
	m.writeLmle(true, twinlog.NoBroker)
	m.writeRun(true)
}

func (m *Machine) stopped() {
	m.lmle.LeaderEpochAfterStop = int32(m.le)
	m.lmle.LeoAtStop = int64(m.log.LogEndOffset())
	m.run.State = Stopped
	m.step = stepStoppedWrites
	m.writeLmle(true, twinlog.NoBroker)
	m.writeRun(true)
}

// ---- FAILED ----

func (m *Machine) fail(msg string) {
	m.resetTransient()
	m.run.LastError = msg
	m.setState(Failed, msg)
	m.scheduleRetry()
	m.writeRun(false)
}

func (m *Machine) scheduleRetry() {
	if m.run.RetryCount < m.cfg.RetryMaxAttempts {
		m.step = stepFailedBackoff
		m.nextAtMs = m.nowMs + Backoff(m.rand, int(m.run.RetryCount), m.cfg.RetryInitialBackoffMs, m.cfg.RetryMaxBackoffMs)
	} else {
		m.step = stepIdle
	}
}

// ---- time ----

func (m *Machine) tick() {
	if m.bumpDue {
		m.bumpDue = false
		// Retry in the current LE: a late BumpDone of an earlier bump may
		// have raised it, and the old LE would be fenced forever.
		m.bump.LeaderEpoch = m.le
		if m.step == stepStopBump {
			m.bump.MinLeaderEpoch = StopBumpEpoch(twinlog.Epoch(m.run.LmleRecorded), m.le)
		}
		m.emit(m.bump)
	}
	if len(m.rewrite) > 0 {
		// LMLE records first: a rewrite carries the current record, so an
		// earlier run write that failed (a PENDING record) would now carry
		// MIRRORING and land before the LMLE record holding the run's
		// taints, which every pair of writes puts first (commitMirroring,
		// the stop writes). A crash in between leaves a MIRRORING run
		// without its taints (simulator seed 6501348).
		ws := m.rewrite
		m.rewrite = nil
		for _, w := range ws {
			if !w.run {
				m.emitLmle(w)
			}
		}
		for _, w := range ws {
			if w.run {
				m.emitRun(w)
			}
		}
	}
	if m.stopWait && m.nowMs >= m.stopUntil {
		m.stopWait = false
		m.emit(StopResult{Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
	}
	switch m.step {
	case stepQuery, stepQueryBackoff:
		if m.nowMs >= m.timeout {
			m.fail("no LMLE answer within mirror.pending.timeout.ms")
			return
		}
		if m.step == stepQueryBackoff && m.nowMs >= m.nextAtMs {
			m.query()
		}
	case stepAwaitReplicas:
		if m.nowMs >= m.timeout {
			m.fail("replicas not aligned within mirror.pending.timeout.ms")
			return
		}
		if m.replicas != nil {
			// After refused taints the status may be unchanged (the
			// expansion rolled back before the shell saw it): look again.
			m.checkReplicas()
		}
	case stepFailedBackoff:
		if m.nowMs >= m.nextAtMs {
			m.run.RetryCount++
			m.beginRun("retry")
		}
	}
}

// ---- writes ----

func (m *Machine) writeRun(cont bool) {
	w := pendingWrite{run: true, cont: cont, clear: twinlog.NoBroker}
	if m.leader && !m.runOwned && !m.runClaimed {
		// The leadership's first run record: its ack makes the run record
		// this leadership's (StateOwned).
		w.owns, m.runClaimed = true, true
	}
	m.emitRun(w)
}

// emitRun writes the current run record with this LE, tracked as w.
func (m *Machine) emitRun(w pendingWrite) {
	rec := cloneRun(m.run)
	rec.StateEpoch = int32(m.le)
	seq := m.next()
	m.track(seq, w)
	m.emit(WriteRunRecord{Seq: seq, Record: rec})
}

func (m *Machine) writeLmle(cont bool, clear twinlog.BrokerID) {
	m.emitLmle(pendingWrite{cont: cont, clear: clear})
}

// emitLmle writes the current LMLE record with this LE, tracked as w.
func (m *Machine) emitLmle(w pendingWrite) {
	rec := m.lmleOrEmpty()
	rec.StateEpoch = int32(m.le)
	seq := m.next()
	for _, t := range rec.Taints {
		if m.taintWrite == nil {
			m.taintWrite = make(map[twinlog.BrokerID]uint64)
		}
		m.taintWrite[twinlog.BrokerID(t.Replica)] = seq
	}
	m.track(seq, w)
	m.emit(WriteLmleRecord{Seq: seq, Record: rec})
}

func (m *Machine) track(seq uint64, w pendingWrite) {
	if m.writes == nil {
		m.writes = make(map[uint64]pendingWrite)
	}
	m.writes[seq] = w
}

func (m *Machine) onWriteAcked(seq uint64) {
	w, ok := m.writes[seq]
	if !ok {
		return
	}
	delete(m.writes, seq)
	if w.owns && w.run {
		m.runOwned = true
	} else if w.owns {
		m.taintsOwned = true
	}
	// The record is durably clear of the replica's taint only if no later
	// write, issued before this ack and landing after it, taints it again:
	// a clear of an earlier leadership's taint acknowledged after the run
	// tainted the replica anew would let the replica into the ISR with the
	// new taint on its way to the record (§8.19; two-cluster sweep seed
	// 2118269). The write that clears the new taint says so when it lands.
	if w.clear != twinlog.NoBroker && m.taintWrite[w.clear] < seq {
		m.emit(ClearTaint{Replica: w.clear})
	}
	if !w.cont {
		return
	}
	for _, o := range m.writes {
		if o.cont {
			return
		}
	}
	for _, o := range m.rewrite {
		if o.cont {
			return
		}
	}
	switch m.step {
	case stepMirrorWrites:
		if m.desired.State == Paused {
			// Paused during the run: MIRRORING is recorded; pause without
			// starting the fetcher (SPEC §6.5: PAUSED does not fetch).
			m.setState(Mirroring, "replicas aligned")
			m.pause()
		} else {
			m.mirroring("replicas aligned")
		}
		m.reconcile()
	case stepStopWrites:
		m.step = stepStopBump
		m.requestBump(StopBumpEpoch(twinlog.Epoch(m.run.LmleRecorded), m.le), twinlog.NoOffset)
	case stepStoppedWrites:
		m.setState(Stopped, "stop done")
		m.step = stepIdle
		m.setWritable(true)
		m.reconcile()
	case stepResumeWrites:
		switch m.state {
		case Mirroring:
			if m.desired.State == Paused {
				m.pause()
			} else {
				m.mirroring("new leader resumes")
			}
		case Paused:
			m.step = stepIdle
			m.reconcile()
		case Stopped:
			m.step = stepIdle
			m.setWritable(true)
		case Failed:
			m.scheduleRetry()
		}
	}
}

func (m *Machine) onRepaired(r twinlog.BrokerID) {
	if !m.leader {
		return // the next leadership resolves it from the loaded record
	}
	if m.lmle == nil || !slices.ContainsFunc(m.lmle.Taints, func(t *twinlogv1.ReplicaTaint) bool { return t.Replica == int32(r) }) {
		seq, tainted := m.taintWrite[r]
		if _, pending := m.writes[seq]; tainted && pending {
			// A write on its way still carries r's taint (the record is
			// clear of it in memory only: a clear for an earlier repair
			// is queued behind it). r is clear once a later write lands
			// (onWriteAcked); clearing now would let r into the ISR
			// before the record tainting it is written, and a new leader
			// would load that taint with r in the ISR (§8.19; two-cluster
			// sweep seed 10733293).
			m.writeLmle(false, r)
			return
		}
		// The durable record holds no taint for r: nothing to write.
		m.emit(ClearTaint{Replica: r})
		return
	}
	m.lmle.Taints = taintsToProto(WithoutTaint(taintsFromProto(m.lmle.Taints), r))
	m.writeLmle(false, r)
}

func (m *Machine) setWritable(w bool) {
	if m.writable == w && w {
		return
	}
	m.writable = w
	m.emit(SetWritable{Writable: w, LeaderEpoch: m.le})
}

func (m *Machine) assertInvariants() {
	if m.fetching && (m.state != Mirroring || !m.leader || m.step != stepFetching) {
		panic(fmt.Sprintf("plan: fetcher running in %v (step %d, leader %v)", m.state, m.step, m.leader))
	}
	if m.fetching && (m.run.TruncationEpoch < 0 || m.run.LmleUsed < -1) {
		panic("plan: fetching without an LMLE truncation")
	}
	if m.writable && !(m.state == Stopped || m.state == NotStarted && m.desired.State == NotStarted) {
		panic(fmt.Sprintf("plan: writable in %v", m.state))
	}
	if m.leader && m.run.TruncationEpoch > int32(m.le) {
		panic(fmt.Sprintf("plan: truncation epoch %d above LE %d", m.run.TruncationEpoch, m.le))
	}
	if _, ok := twinlogv1.MirrorState_name[int32(m.state)]; !ok {
		panic(fmt.Sprintf("plan: state %d", m.state))
	}
}
