package replica

import (
	"fmt"
	"slices"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage/epoch"
)

// follower is the leader's knowledge of one other replica (SPEC §4.3 step 7).
type follower struct {
	leo                twinlog.Offset // −1 unknown
	brokerEpoch        twinlog.BrokerEpoch
	fetchedInLE        bool
	lastCaughtUpMs     int64
	lastFetchMs        int64
	lastFetchLeaderLEO twinlog.Offset
	// alignedEpoch is the LE in which this leader last answered the follower
	// NONE without DivergingEpoch (SPEC §6.6 step 3), −1 none.
	alignedEpoch twinlog.Epoch
	// lastFetch is the newest fetch of this LE that passed the fence
	// (fenceFollowerFetch), Seq 0 none; lastFetchServed: it was answered
	// NONE without DivergingEpoch (step 7), so an identical re-evaluation
	// (the shell's long poll) may pass again.
	lastFetch       FetchRequest
	lastFetchServed bool
}

type pendingProduce struct {
	id       ProposalID
	base     twinlog.Offset
	last     twinlog.Offset
	deadline int64
}

type inflightAlter struct {
	seq      uint64
	isr      []twinlog.BrokerID // proposed
	recovery pb.LeaderRecoveryState
	minISR   int // the m sent with it
}

// Replica is one partition replica's replication state machine. It is not
// safe for concurrent use.
type Replica struct {
	cfg Config

	// Local log view, kept in lockstep with the log through Ready.LogOps.
	logStart, leo, hw twinlog.Offset
	cache             *epoch.Cache
	alignedEpoch      twinlog.Epoch

	// Applied metadata.
	role     Role
	leader   twinlog.BrokerID
	le       twinlog.Epoch
	pe       twinlog.PartitionEpoch
	replicas []twinlog.BrokerID
	isr      []twinlog.BrokerID // committed
	recovery pb.LeaderRecoveryState
	minISR   int
	brokers  map[twinlog.BrokerID]twinlog.BrokerEpoch
	// registered: PartitionState.Registered (see registeredEpochOf).
	registered map[twinlog.BrokerID]twinlog.BrokerEpoch
	truncPts   []TruncationPoint
	haveState  bool
	// adding: this replica was in AddingReplicas in the last applied state
	// (false after New); see discardLogIfAddedBack.
	adding bool
	// hwCheckedLE: the HW respects every truncation point with an LE ≤
	// hwCheckedLE (in memory, −1 after New): this replica led that LE with
	// its HW capped (capHWAtTruncationPoints) and its owed truncation done.
	hwCheckedLE twinlog.Epoch

	// Mirror hooks (SPEC §6).
	writable bool
	mirror   bool
	taints   map[twinlog.BrokerID]Taint
	// clearing: replicas whose taint a fetch cleared but whose cleared
	// record is not yet durable in __mirror_state (§6.6 step 4); they stay
	// out of the ISR until ConfirmTaintCleared.
	clearing map[twinlog.BrokerID]bool
	// taintsPending: this leader has not loaded the partition's durable
	// taints yet (SPEC §6.4); follower fetches get UNKNOWN_LEADER_EPOCH.
	taintsPending bool

	// truncationUnconfirmed: an OpTruncate that cut records was emitted and
	// the shell has not yet reported where the log ended
	// (ConfirmTruncation). A batch straddling the offset goes whole, so the
	// log may end below leo; until the report no append may be decided at
	// leo (it would leave a hole).
	truncationUnconfirmed bool

	// Leader state, valid while role == RoleLeader.
	leso          twinlog.Offset
	hwFloor       twinlog.Offset // leader HW never decreases below this in an LE
	followers     map[twinlog.BrokerID]*follower
	inflight      *inflightAlter
	alterSeq      uint64
	pending       []pendingProduce
	truncatedInLE bool // TruncateAsLeader done in this LE

	// Follower state.
	followerHWLE twinlog.Epoch // LE of the last leader HW taken
	fetchSeq     int64         // Seq of the last NextFetch (Config.FetchSeqStart before the first)

	rd Ready
}

// New returns a replica over a local log in state st, with no role until the
// first ApplyPartitionState.
func New(cfg Config, st LogState) (*Replica, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cache, err := epoch.NewCache(st.Epochs)
	if err != nil {
		return nil, fmt.Errorf("replica: epoch cache: %w", err)
	}
	if st.LogStartOffset < 0 || st.LogEndOffset < st.LogStartOffset {
		return nil, fmt.Errorf("%w: log start %d, end %d", ErrInvalidConfig, st.LogStartOffset, st.LogEndOffset)
	}
	r := &Replica{
		cfg:          cfg.withDefaults(),
		logStart:     st.LogStartOffset,
		leo:          st.LogEndOffset,
		hw:           min(max(st.HighWatermark, st.LogStartOffset), st.LogEndOffset),
		cache:        cache,
		alignedEpoch: st.AlignedEpoch,
		leader:       twinlog.NoBroker,
		le:           twinlog.NoEpoch,
		pe:           -1,
		minISR:       1,
		writable:     true,
		taints:       map[twinlog.BrokerID]Taint{},
		clearing:     map[twinlog.BrokerID]bool{},
		leso:         twinlog.NoOffset,
		followerHWLE: twinlog.NoEpoch,
		hwCheckedLE:  twinlog.NoEpoch,
		fetchSeq:     cfg.FetchSeqStart,
	}
	return r, nil
}

// Accessors (read-only views for the shell, tests and the simulator).

func (r *Replica) Role() Role                             { return r.role }
func (r *Replica) Leader() twinlog.BrokerID               { return r.leader }
func (r *Replica) LeaderEpoch() twinlog.Epoch             { return r.le }
func (r *Replica) PartitionEpoch() twinlog.PartitionEpoch { return r.pe }
func (r *Replica) HighWatermark() twinlog.Offset          { return r.hw }
func (r *Replica) LogEndOffset() twinlog.Offset           { return r.leo }
func (r *Replica) LogStartOffset() twinlog.Offset         { return r.logStart }
func (r *Replica) EpochEntries() []epoch.Entry            { return r.cache.Entries() }
func (r *Replica) AlignedEpoch() twinlog.Epoch            { return r.alignedEpoch }

// LeaderEpochStartOffset is LESO (SPEC §1.2), −1 unless leader.
func (r *Replica) LeaderEpochStartOffset() twinlog.Offset { return r.leso }

// ISR is the committed ISR as this replica knows it.
func (r *Replica) ISR() []twinlog.BrokerID { return slices.Clone(r.isr) }

// MaximalISR is the committed ISR plus in-flight additions (SPEC §1.2).
func (r *Replica) MaximalISR() []twinlog.BrokerID { return r.maximalISR() }

// AlterPartitionInFlight reports whether an ISR change awaits the controller.
func (r *Replica) AlterPartitionInFlight() bool { return r.inflight != nil }

// EndOffsetFor answers OffsetForLeaderEpoch from the local cache (SPEC §2.4).
func (r *Replica) EndOffsetFor(e twinlog.Epoch) EpochEndOffset {
	ee, o := r.cache.EndOffsetFor(e, r.leo)
	return EpochEndOffset{Epoch: ee, EndOffset: o}
}

// ConsumerEndOffsetFor answers a Kafka consumer's OffsetForLeaderEpoch,
// with which it checks its position after being fenced (KIP-320): the
// cache's answer, but no further than a truncation point (§6.2f) of a
// later LE than e. Both clusters of a mirror number their epochs alike,
// so after a failback's LMLE truncation the records of epoch e may be the
// other cluster's, and the cache alone would let a consumer that read the
// replaced records keep them; the fetch tells twinlog's own consumers the
// offset (LOG_TRUNCATED), a Kafka consumer only learns it here. A consumer
// that read e's records after the truncation re-reads from the point: a
// duplicate delivery, never a skipped record. A point below which the log
// holds no epoch (a truncation to the log start) is answered with e, as
// the cache answers an epoch below all it holds (SPEC §2.4): a Kafka
// client takes an answer without an epoch for an unknown one and resets
// by its policy, which may skip, instead of moving back to the point.
func (r *Replica) ConsumerEndOffsetFor(e twinlog.Epoch) EpochEndOffset {
	eo := r.EndOffsetFor(e)
	for _, tp := range r.truncPts {
		if tp.LeaderEpoch > e && tp.Offset < eo.EndOffset {
			eo.EndOffset = tp.Offset
			eo.Epoch = r.cache.EpochForOffset(tp.Offset - 1)
			if eo.Epoch == twinlog.NoEpoch {
				eo.Epoch = e
			}
		}
	}
	return eo
}

// Ready returns the work accumulated since the last Advance (see Ready).
func (r *Replica) Ready() Ready {
	rd := r.rd
	if rd.EpochsChanged {
		rd.EpochEntries = r.cache.Entries()
	}
	return rd
}

// HasReady reports whether Ready would return work.
func (r *Replica) HasReady() bool { return !r.rd.IsEmpty() }

// Advance acknowledges that the last Ready was fully handled.
func (r *Replica) Advance() { r.rd = Ready{} }

// AdvanceLogStart reports that this replica's own log now starts at o:
// retention deleted the segments below it (storage.Log.DeleteRetained,
// bounded by this replica's HW when it ran). The log start only moves up
// and never passes the HW (the invariant logStart ≤ HW ≤ LEO; a larger o
// is clamped, which cannot happen when the caller bounded the deletion by
// HighWatermark under the same lock). The epoch cache drops what lies
// below, as the log's own did (truncateFromStart). It needs no role: a
// leader then answers fetches below o with OFFSET_OUT_OF_RANGE and its log
// start, so followers and mirrors behind it restart there (SPEC §4.4,
// §6.3); a follower keeps fetching at its LEO, which is above o.
func (r *Replica) AdvanceLogStart(o twinlog.Offset) {
	o = min(o, r.hw)
	if o <= r.logStart {
		return
	}
	r.logStart = o
	if r.cache.TruncateFromStart(o) {
		r.rd.EpochsChanged = true
	}
	// The cache's entry for LE now starts at o at the earliest: so does
	// LESO (SPEC §8.10 "(LE, LESO)"). Both uses stay as they were: the HW
	// is at least o, and a follower whose LEO is below o restarts its log
	// at the log start anyway.
	if r.leso != twinlog.NoOffset && r.leso < o {
		r.leso = o
	}
}

func (r *Replica) event(t EventType, format string, args ...any) {
	r.rd.Events = append(r.rd.Events, Event{Type: t, Detail: fmt.Sprintf(format, args...)})
}

func (r *Replica) truncationEvent(c TruncationCause, format string, args ...any) {
	r.rd.Events = append(r.rd.Events, Event{Type: EventTruncation, Cause: c, Detail: fmt.Sprintf(format, args...)})
}

func (r *Replica) effectiveMinISR() int {
	m := r.minISR
	if m < 1 {
		m = 1
	}
	if len(r.replicas) > 0 && len(r.replicas) < m {
		m = len(r.replicas)
	}
	return m
}

func (r *Replica) maximalISR() []twinlog.BrokerID {
	out := slices.Clone(r.isr)
	if r.inflight != nil {
		for _, b := range r.inflight.isr {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// ApplyPartitionState applies controller metadata (SPEC §3, §4.5). It takes
// the versioned fields only from a newer leader epoch, or the same leader
// epoch with a newer partition epoch.
func (r *Replica) ApplyPartitionState(st PartitionState, nowMs int64) {
	r.minISR = st.MinISR
	r.brokers = st.Brokers
	r.registered = st.Registered
	r.truncPts = slices.Clone(st.TruncationPoints)

	newer := !r.haveState || st.LeaderEpoch > r.le || (st.LeaderEpoch == r.le && st.PartitionEpoch > r.pe)
	if !newer {
		r.maybeResendAlter()
		r.reevaluate(nowMs)
		return
	}
	newLE := !r.haveState || st.LeaderEpoch != r.le
	r.haveState = true
	r.le, r.pe = st.LeaderEpoch, st.PartitionEpoch
	r.leader = st.Leader
	r.replicas = slices.Clone(st.Replicas)
	oldISR := r.isr
	r.isr = slices.Clone(st.ISR)
	r.recovery = st.RecoveryState

	prevRole := r.role
	switch {
	case st.Leader == r.cfg.ID && slices.Contains(st.Replicas, r.cfg.ID):
		r.role = RoleLeader
	case st.Leader != twinlog.NoBroker && slices.Contains(st.Replicas, r.cfg.ID):
		r.role = RoleFollower
	default:
		r.role = RoleNone
	}
	if prevRole == RoleLeader && (r.role != RoleLeader || newLE) {
		// The in-flight change belongs to the old LE (SPEC §3.6 one per LE).
		r.inflight = nil
	}
	if prevRole == RoleLeader && r.role != RoleLeader {
		r.failPending(errNotLeader)
		r.followers = nil
		r.leso = twinlog.NoOffset
		r.taintsPending = false
		// Taints are leader state (SPEC §6.6 step 4: "every leader ...
		// answers a tainted replica"), a copy of the durable ones: once
		// another leader may clear them, the copy goes stale. The next
		// leadership loads them again (ResetTaints).
		clear(r.taints)
		clear(r.clearing)
	}
	if r.role != prevRole || newLE {
		r.event(EventRoleChange, "%v at LE %d (leader %d, PE %d)", r.role, r.le, r.leader, r.pe)
	}
	r.discardLogIfAddedBack(st)
	if r.role == RoleLeader {
		if newLE {
			r.becomeLeader(nowMs)
		} else {
			// Same LE, newer PE: the metadata replaces any in-flight change
			// (Kafka drops a pending state the controller overtook).
			r.inflight = nil
			r.syncFollowers(nowMs)
		}
		if !slices.Equal(oldISR, r.isr) {
			r.event(EventISRChange, "committed %v (PE %d)", r.isr, r.pe)
		}
	}
	r.reevaluate(nowMs)
}

// discardLogIfAddedBack makes a replica added (back) to R start empty (SPEC
// §2.1, §3.8) when the shell missed its removal: the broker was down while a
// reassignment moved the partition away and another moved it back, or it
// applied both in one metadata batch, so it never deleted the dir. Being in
// AddingReplicas means it was not in R when this reassignment began, so a
// log it holds is either from before it left R or from an earlier attempt
// of this addition (a restart, a rebuild: re-copied at some cost). Kept,
// the old log is validated only by epochs, and on a (once-)mirrored
// partition the same epoch number may denote the other cluster's records
// (§6.4): a truncation the replica missed while out of R — and so was never
// tainted for (§6.6 step 4) — would go unrepaired (§8.9). Judged on the
// first state after New (the log came from disk) and when the replica
// enters AddingReplicas while already open. A member of the ISR, ELR or
// last known ELR keeps its log: leaving R took it out of all three (§3.8),
// so it joined the ISR after this addition and its log is the addition's;
// and such a log may hold committed records, or be the best an unclean
// recovery can elect.
func (r *Replica) discardLogIfAddedBack(st PartitionState) {
	was := r.adding
	r.adding = slices.Contains(st.AddingReplicas, r.cfg.ID)
	if !r.adding || was || slices.Contains(st.ISR, r.cfg.ID) || slices.Contains(st.ELR, r.cfg.ID) ||
		slices.Contains(st.LastKnownELR, r.cfg.ID) {
		return
	}
	if r.leo > r.logStart || r.cache.Len() > 0 {
		r.restartLog(0, CauseAddedBack, fmt.Sprintf("added to the replicas at LE %d with a log from before", r.le))
	}
	if r.alignedEpoch != twinlog.NoEpoch {
		// A fresh dir has no aligned_epoch (§2.1, §6.6 step 3).
		r.alignedEpoch = twinlog.NoEpoch
		v := r.alignedEpoch
		r.rd.AlignedEpoch = &v
	}
}

// maybeResendAlter re-proposes the in-flight ISR change under a new seq when
// m changed under it at the same partition epoch (a min.insync.replicas
// change writes nothing for a partition below the new m, SPEC §3.8/S14): the
// old request carries the old m, which the controller refuses with
// INVALID_UPDATE_VERSION, and no newer partition epoch would ever resolve it.
// The proposed ISR is unchanged, so the maximal ISR is too: if the old
// request is still applied (m changed back before it arrived), the new one
// fails INVALID_UPDATE_VERSION and metadata resolves it.
func (r *Replica) maybeResendAlter() {
	if r.role != RoleLeader || r.inflight == nil || r.inflight.minISR == r.effectiveMinISR() {
		return
	}
	r.event(EventISRChange, "m %d -> %d under seq %d: re-propose", r.inflight.minISR, r.effectiveMinISR(), r.inflight.seq)
	r.proposeISR(r.inflight.isr, r.inflight.recovery, "m changed")
}

// becomeLeader starts a new leader epoch (SPEC §4.5): HW capped at the
// truncation points this replica has not validated, LESO = LEO, the
// epoch's cache entry (not on mirror partitions, §6.2c), followers reset.
func (r *Replica) becomeLeader(nowMs int64) {
	r.truncatedInLE = false
	r.capHWAtTruncationPoints()
	r.leso = r.leo
	r.hwFloor = r.hw
	if !r.mirror {
		r.assign(r.le, r.leo)
	}
	r.followers = map[twinlog.BrokerID]*follower{}
	r.syncFollowers(nowMs)
	for id, f := range r.followers {
		r.resetFollower(id, f, nowMs)
	}
}

// capHWAtTruncationPoints: a new leader starts from its local HW (SPEC
// §4.2), but not above a truncation point (e, o) (§6.2f) recorded after the
// last LE in which this replica's log was validated: HW = min(HW, o) for
// every point with validated < e < LE. validated is the persisted
// aligned_epoch (a follower raises it on every fetch answered NONE without
// DivergingEpoch: its log is then a prefix of that LE's leader's, which did
// its own truncation first, and it took that leader's HW) or hwCheckedLE.
// Such a replica (an ISR or ELR member that did not fetch after the
// truncation) still holds the records the truncation cut, with the HW it
// learned before: serving them would expose records the recorded
// truncation removed, and a later leader that did fetch after it serves
// other records at the same offsets with no newer truncation point (§8.7,
// §8.13). Only the HW moves: the records stay, and §4.2 lets the HW pass o
// again once every maximal-ISR member has fetched in this LE without
// DivergingEpoch, i.e. agrees with this log (KAFKA-7128); consumers wait
// until then. The point in LE itself is the leader's own owed truncation
// (answered UNKNOWN_LEADER_EPOCH until TruncateAsLeader).
func (r *Replica) capHWAtTruncationPoints() {
	validated := max(r.alignedEpoch, r.hwCheckedLE)
	hw, missed := r.hw, TruncationPoint{LeaderEpoch: twinlog.NoEpoch, Offset: twinlog.NoOffset}
	for _, tp := range r.truncPts {
		if tp.LeaderEpoch > validated && tp.LeaderEpoch < r.le && tp.Offset < hw {
			hw, missed = max(tp.Offset, r.logStart), tp
		}
	}
	if hw < r.hw {
		r.setHW(hw, fmt.Sprintf("truncation point (%d, %d) after validated LE %d", missed.LeaderEpoch, missed.Offset, validated))
	}
	r.hwCheckedLE = max(r.hwCheckedLE, r.le-1)
	if !r.truncationPending() {
		r.hwCheckedLE = r.le
	}
}

func (r *Replica) resetFollower(id twinlog.BrokerID, f *follower, nowMs int64) {
	*f = follower{leo: twinlog.NoOffset, brokerEpoch: -1, lastFetchLeaderLEO: twinlog.NoOffset, alignedEpoch: twinlog.NoEpoch}
	if slices.Contains(r.isr, id) {
		f.lastCaughtUpMs = nowMs
	}
}

// syncFollowers adds state for new replicas and drops removed ones.
func (r *Replica) syncFollowers(nowMs int64) {
	for _, id := range r.replicas {
		if id == r.cfg.ID {
			continue
		}
		if _, ok := r.followers[id]; !ok {
			f := &follower{}
			r.resetFollower(id, f, nowMs)
			r.followers[id] = f
		}
	}
	for id := range r.followers {
		if !slices.Contains(r.replicas, id) {
			delete(r.followers, id)
		}
	}
}

// reevaluate recomputes what may have changed with the HW or ISR.
func (r *Replica) reevaluate(nowMs int64) {
	if r.role != RoleLeader {
		return
	}
	r.maybeAdvanceHW()
	r.evaluatePending()
	r.maybeProposeRecovered()
}

func (r *Replica) assign(e twinlog.Epoch, s twinlog.Offset) {
	if r.cache.Assign(e, s) {
		r.rd.EpochsChanged = true
	}
}

func (r *Replica) setHW(hw twinlog.Offset, why string) {
	if hw == r.hw {
		return
	}
	old := r.hw
	r.hw = hw
	v := hw
	r.rd.HighWatermark = &v
	r.event(EventHighWatermark, "%d -> %d (%s)", old, hw, why)
}

// truncateLog cuts the local log to o (SPEC §4.4 "truncate to o"): o below
// the log start (or above LEO) deletes everything and restarts the log at o.
func (r *Replica) truncateLog(o twinlog.Offset, c TruncationCause, reason string) {
	if o < r.logStart || o > r.leo {
		r.restartLog(o, c, reason)
		return
	}
	if o == r.leo {
		// No batch goes, but truncateFromEnd(o) still applies (§4.4): an
		// epoch this replica led without writing starts at the LEO and must
		// go, or the next fetch carries it as lastFetchedEpoch again and the
		// leader answers the same DivergingEpoch forever (Kafka's
		// UnifiedLog.truncateTo trims the cache at the LEO too). The op lets
		// the shell's Log.TruncateTo(LEO) drop it from the log's cache.
		if r.cache.TruncateFromEnd(o) {
			r.rd.EpochsChanged = true
			r.rd.LogOps = append(r.rd.LogOps, LogOp{Kind: OpTruncate, Offset: o})
			r.truncationEvent(c, "epoch cache at LEO %d (%s)", o, reason)
		}
		return
	}
	r.rd.LogOps = append(r.rd.LogOps, LogOp{Kind: OpTruncate, Offset: o})
	if r.cache.TruncateFromEnd(o) {
		r.rd.EpochsChanged = true
	}
	r.truncationEvent(c, "%d -> %d (%s)", r.leo, o, reason)
	r.leo = o
	r.truncationUnconfirmed = true
	if r.hw > o {
		r.setHW(o, reason)
	}
}

// ConfirmTruncation reports the log end offset leo after the shell applied
// the last Ready's LogOps, when they held an OpTruncate (see Ready). The
// log removes whole batches (storage.Log.TruncateTo, Kafka's truncateTo):
// when a batch straddles the truncation offset, which a DivergingEpoch or
// a taint's offset T need not avoid (SPEC §4.3 step 4, §4.4), the log ends
// at that batch's base, below the machine's LEO. The machine then takes
// the log's LEO as its own (truncateFromEnd(leo), HW = min(HW, leo); a
// leader also LESO = min(LESO, leo) and fails pending acks=all requests
// at or above it), and a follower fetches from there again: the leader
// resends the whole batch. Until the report the machine decides no append
// (a follower has no NextFetch, AppendAsMirrorLeader and Propose are
// refused). Any other leo (outside [log start, LEO], or below LEO with no
// cut owed) is ErrLogMismatch: the log disagrees with the machine, and the
// replica must be rebuilt from disk.
func (r *Replica) ConfirmTruncation(leo twinlog.Offset, nowMs int64) error {
	if leo == r.leo {
		r.truncationUnconfirmed = false
		return nil
	}
	if !r.truncationUnconfirmed || leo < r.logStart || leo > r.leo {
		return fmt.Errorf("%w: log ends at %d after truncation, replica log [%d, %d] (truncation owed %t)",
			ErrLogMismatch, leo, r.logStart, r.leo, r.truncationUnconfirmed)
	}
	r.truncationUnconfirmed = false
	r.leo = leo
	if r.cache.TruncateFromEnd(leo) {
		r.rd.EpochsChanged = true
	}
	if r.hw > leo {
		r.setHW(leo, "batch straddled the truncation offset")
	}
	if r.role == RoleLeader {
		r.hwFloor = min(r.hwFloor, r.hw)
		r.leso = min(r.leso, leo)
		r.failPendingFrom(leo)
		r.reevaluate(nowMs)
	}
	return nil
}

// failPendingFrom answers NOT_LEADER to the waiting produces whose batch
// reaches o or beyond: a truncation to o removed (part of) their records.
func (r *Replica) failPendingFrom(o twinlog.Offset) {
	kept := r.pending[:0]
	for _, p := range r.pending {
		if p.last >= o {
			r.rd.ProduceResults = append(r.rd.ProduceResults, ProduceResult{ID: p.id, Error: errNotLeader, BaseOffset: p.base})
			continue
		}
		kept = append(kept, p)
	}
	r.pending = kept
}

// restartLog deletes the whole local log; it restarts empty at o.
func (r *Replica) restartLog(o twinlog.Offset, c TruncationCause, reason string) {
	r.rd.LogOps = append(r.rd.LogOps, LogOp{Kind: OpRestart, Offset: o})
	r.truncationUnconfirmed = false // the log restarts exactly at o
	if r.cache.Clear() {
		r.rd.EpochsChanged = true
	}
	r.logStart, r.leo = o, o
	r.setHW(o, reason)
	r.truncationEvent(c, "restart log at %d (%s)", o, reason)
}

func (r *Replica) setAlignedEpoch(e twinlog.Epoch) {
	if e <= r.alignedEpoch {
		return
	}
	r.alignedEpoch = e
	v := e
	r.rd.AlignedEpoch = &v
}
