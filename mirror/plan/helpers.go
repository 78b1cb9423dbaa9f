package plan

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/storage/epoch"
)

// Truncation is where a leader truncation cuts a log.
type Truncation struct {
	// NoOp is true when nothing needs to be cut.
	NoOp bool
	// Full means truncate fully: LEO = log start = RestartAt.
	Full bool
	// Offset is the first offset removed (the truncation point of §6.2f).
	Offset twinlog.Offset
	// RestartAt is where the log restarts after a full truncation.
	RestartAt twinlog.Offset
}

// LMLETruncationOffset answers SPEC §6.6 step 2 for a log with the given
// cache, log start and log end offset: LMLE −1 truncates fully (LEO =
// logStart), even an empty log whose cache still holds an entry (a mirror
// cache has no epoch without records, §8.16); otherwise the log is cut at
// the start of the first cached epoch greater than lmle; if there is none, or nothing would be removed, it is a
// no-op.
func LMLETruncationOffset(cache *epoch.Cache, lmle twinlog.Epoch, logStart, leo twinlog.Offset) Truncation {
	if lmle == twinlog.NoEpoch {
		if leo <= logStart && cache.Len() == 0 {
			return Truncation{NoOp: true, Offset: twinlog.NoOffset}
		}
		return Truncation{Full: true, Offset: logStart, RestartAt: logStart}
	}
	o, ok := cache.StartOffsetOfFirstEpochAfter(lmle)
	if !ok || o > leo {
		return Truncation{NoOp: true, Offset: twinlog.NoOffset}
	}
	// o == leo: a foreign epoch with no records (a leader's own (LE, LEO)
	// entry from before the start). Truncating at the LEO removes only the
	// cache entry, which must go: the cache of a mirror partition holds
	// record epochs only (§6.2c, inv. 16), and a stale higher entry would
	// make every later fetch's lastFetchedEpoch diverge.
	if o < logStart {
		// The first foreign epoch starts before the retained log: every
		// retained record is foreign.
		return Truncation{Full: true, Offset: logStart, RestartAt: logStart}
	}
	return Truncation{Offset: o}
}

// EmptyEpochTruncation is the cut a leader owes before it fetches in
// MIRRORING when its latest cached epoch has no records (starts at the LEO)
// and lies above lmleUsed: an entry of its own from a writable leadership
// that the run's LMLE truncation never saw (a tainted replica elected
// uncleanly, SPEC §6.8). A mirror cache holds record epochs only (§6.2c,
// inv. 16), and the entry would be the fetch's lastFetchedEpoch. Cutting at
// the LEO removes only the entry (at the log start: fully, as the LMLE −1
// rule does). Epochs ≤ lmleUsed are left alone (shared history, or the
// truncateFromStart re-insert inv. 16 allows).
func EmptyEpochTruncation(cache *epoch.Cache, lmleUsed twinlog.Epoch, logStart, leo twinlog.Offset) Truncation {
	e, ok := cache.LatestEntry()
	if !ok || e.StartOffset < leo || e.Epoch <= lmleUsed {
		return Truncation{NoOp: true, Offset: twinlog.NoOffset}
	}
	if leo <= logStart {
		return Truncation{Full: true, Offset: logStart, RestartAt: logStart}
	}
	return Truncation{Offset: leo}
}

// DivergenceTruncation is the follower rule of SPEC §4.4 applied by a mirror
// leader to DivergingEpoch{el, ol} from the source: E_L = −1 or an empty
// cache → min(O_L, LEO); else (E_F, O_F) = endOffsetFor(E_L): E_F = E_L →
// min(O_F, O_L, LEO), else min(O_F, LEO). An offset below logStart is a full
// truncation restarting there.
//
// A cut at the LEO is no cut of records, but if the latest cached epoch is
// above E_L and has none (it starts at the LEO) it still drops that entry,
// as Kafka's truncateTo trims the cache whatever the offset; a no-op would
// leave it the next fetch's lastFetchedEpoch, and the source would answer
// the same DivergingEpoch forever (sweep seed 1117508: an empty epoch 9 at
// the LEO, ≤ lmleUsed 10 so EmptyEpochTruncation kept it, and the source's
// epoch 5 ending there).
func DivergenceTruncation(cache *epoch.Cache, logStart, leo twinlog.Offset, el twinlog.Epoch, ol twinlog.Offset) Truncation {
	var o twinlog.Offset
	if el == twinlog.NoEpoch || cache.Len() == 0 {
		o = min(ol, leo)
	} else {
		ef, of := cache.EndOffsetFor(el, leo)
		if ef == el {
			o = min(of, ol, leo)
		} else {
			o = min(of, leo)
		}
	}
	switch {
	case o >= leo:
		if e, ok := cache.LatestEntry(); ok && e.StartOffset >= leo && e.Epoch > el {
			if leo <= logStart {
				return Truncation{Full: true, Offset: logStart, RestartAt: logStart}
			}
			return Truncation{Offset: leo}
		}
		return Truncation{NoOp: true, Offset: twinlog.NoOffset}
	case o < logStart:
		return Truncation{Full: true, Offset: logStart, RestartAt: o}
	default:
		return Truncation{Offset: o}
	}
}

// Aligned is the predicate of SPEC §6.6 step 3: a replica is aligned for a
// run iff the run has truncated (truncationEpoch ≥ 0) and the replica's
// aligned_epoch ≥ truncationEpoch.
func Aligned(truncationEpoch, alignedEpoch twinlog.Epoch) bool {
	return truncationEpoch >= 0 && alignedEpoch >= truncationEpoch
}

// LMLEAtStop is SPEC §6.7 step 3: an aligned leader records its latest cached
// epoch; any other records the existing LMLE (−1 if there is none). An
// aligned leader with an empty log records −1.
func LMLEAtStop(aligned bool, cache *epoch.Cache, existing twinlog.Epoch) twinlog.Epoch {
	if aligned {
		return cache.Latest()
	}
	return existing
}

// StopBumpEpoch is the minLeaderEpoch of the stop bump (SPEC §6.7 step 4),
// max(LMLE, LE) + 1, so that new records carry an epoch above the LMLE and
// above every epoch in the log (inv. 18).
func StopBumpEpoch(lmle, le twinlog.Epoch) twinlog.Epoch { return max(lmle, le) + 1 }

// ReplicaStatus is the leader's view of the partition's replicas at one
// check (SPEC §6.6 step 3).
type ReplicaStatus struct {
	// Replicas is R, ISR the committed ISR (both include the leader).
	Replicas, ISR []twinlog.BrokerID
	// MaximalISR is the leader's maximal ISR (SPEC §1.2: ISR ∪ the
	// additions of its AlterPartition in flight); nil means ISR.
	MaximalISR []twinlog.BrokerID
	// FollowerAlignedEpoch is, per follower, the highest LE in which this
	// leader answered one of its fetches with NONE and no DivergingEpoch
	// (absent: none in this leadership). The leader's own aligned epoch is
	// not taken from here.
	FollowerAlignedEpoch map[twinlog.BrokerID]twinlog.Epoch
	// MinInsyncReplicas is the topic's min.insync.replicas.
	MinInsyncReplicas int
	// SupportUncleanLeaderElection is mirror.support.unclean.leader.election
	// as configured now.
	SupportUncleanLeaderElection bool
}

// Equal reports whether two views hold the same facts: the shells send
// ReplicaStatusChanged only when the view changed.
func (s ReplicaStatus) Equal(o ReplicaStatus) bool {
	return slices.Equal(s.Replicas, o.Replicas) && slices.Equal(s.ISR, o.ISR) && slices.Equal(s.MaximalISR, o.MaximalISR) &&
		s.MinInsyncReplicas == o.MinInsyncReplicas && s.SupportUncleanLeaderElection == o.SupportUncleanLeaderElection &&
		maps.Equal(s.FollowerAlignedEpoch, o.FollowerAlignedEpoch)
}

// ReadyToMirror is the PENDING → MIRRORING check of SPEC §6.6 step 3: every
// ISR member is aligned for the run (the leader by its own aligned epoch),
// |ISR| ≥ m = min(min.insync.replicas, |R|), and, when the unclean-support
// config is true at check time, ISR = R.
//
// It also waits while the leader has an ISR expansion in flight (a
// MaximalISR member outside ISR), which SPEC §6.6 leaves open: step 4 taints
// R − ISR, and the controller may already have committed the expansion
// (§3.6), so tainting its new member would put a tainted replica in the ISR
// (§8.19; simulator seeds 75, 134). Once it is answered the committed ISR
// is definitive again: the member is in it (and must be aligned) or is
// skipped.
func ReadyToMirror(st ReplicaStatus, self twinlog.BrokerID, selfAligned, truncationEpoch twinlog.Epoch) bool {
	if truncationEpoch < 0 || ExpansionInFlight(st) {
		return false
	}
	m := min(st.MinInsyncReplicas, len(st.Replicas))
	if len(st.ISR) < m || len(st.ISR) == 0 {
		return false
	}
	for _, r := range st.ISR {
		ae, ok := selfAligned, true
		if r != self {
			ae, ok = st.FollowerAlignedEpoch[r]
		}
		if !ok || !Aligned(truncationEpoch, ae) {
			return false
		}
	}
	if st.SupportUncleanLeaderElection {
		for _, r := range st.Replicas {
			if !slices.Contains(st.ISR, r) {
				return false
			}
		}
	}
	return true
}

// ExpansionInFlight reports whether st's maximal ISR holds a replica its
// committed ISR lacks (an AlterPartition adding it is in flight).
func ExpansionInFlight(st ReplicaStatus) bool {
	for _, r := range st.MaximalISR {
		if !slices.Contains(st.ISR, r) {
			return true
		}
	}
	return false
}

// Taint marks a replica skipped by an LMLE truncation (SPEC §6.6 step 4):
// its leader answers it per §4.3 step 4 with (Epoch, Offset) until it has
// truncated.
type Taint struct {
	Replica twinlog.BrokerID
	Epoch   twinlog.Epoch
	Offset  twinlog.Offset
}

// SkippedReplicas is R − ISR, in R order.
func SkippedReplicas(replicas, isr []twinlog.BrokerID) []twinlog.BrokerID {
	var out []twinlog.BrokerID
	for _, r := range replicas {
		if !slices.Contains(isr, r) {
			out = append(out, r)
		}
	}
	return out
}

// TaintsFor taints every skipped replica with (lmleUsed, t).
func TaintsFor(skipped []twinlog.BrokerID, lmleUsed twinlog.Epoch, t twinlog.Offset) []Taint {
	out := make([]Taint, 0, len(skipped))
	for _, r := range skipped {
		out = append(out, Taint{Replica: r, Epoch: lmleUsed, Offset: t})
	}
	return out
}

// MergeTaints merges taints across runs (SPEC §6.6 step 4): a replica
// tainted in both keeps the smaller epoch and the smaller offset; others
// keep theirs. The result is sorted by replica.
func MergeTaints(existing, added []Taint) []Taint {
	out := slices.Clone(existing)
	for _, a := range added {
		i := slices.IndexFunc(out, func(t Taint) bool { return t.Replica == a.Replica })
		if i < 0 {
			out = append(out, a)
			continue
		}
		out[i].Epoch = min(out[i].Epoch, a.Epoch)
		out[i].Offset = min(out[i].Offset, a.Offset)
	}
	slices.SortFunc(out, func(a, b Taint) int { return int(a.Replica) - int(b.Replica) })
	return out
}

// RunTaints is what a run entering MIRRORING installs on the replicas it
// skipped (SPEC §6.6 step 4): (lmleUsed, t), merged with the taint each
// already carries (existing: the partition's durable taints), as
// MergeTaints merges the record. A replica an earlier run tainted and that
// has not fetched since still holds records from that taint's point on that
// were never copied from S; the later run's looser taint would let its
// next fetch keep them (sweep seed 729424: replica 3, tainted (7, 35), was
// answered per a later run's (10, 60) and kept its own epoch-10 records at
// [35, 60), where the leader had the source's).
func RunTaints(existing []Taint, skipped []twinlog.BrokerID, lmleUsed twinlog.Epoch, t twinlog.Offset) []Taint {
	merged := MergeTaints(existing, TaintsFor(skipped, lmleUsed, t))
	return slices.DeleteFunc(merged, func(t Taint) bool { return !slices.Contains(skipped, t.Replica) })
}

// WithoutTaint returns taints minus the replica's.
func WithoutTaint(taints []Taint, r twinlog.BrokerID) []Taint {
	return slices.DeleteFunc(slices.Clone(taints), func(t Taint) bool { return t.Replica == r })
}

// FetchRequest is one partition of a Fetch{MIRROR} request (SPEC §6.3).
type FetchRequest struct {
	FetchOffset        twinlog.Offset
	CurrentLeaderEpoch twinlog.Epoch
	LastFetchedEpoch   twinlog.Epoch
}

// SourceLeaderEpochUsable reports whether a source partition's leader and
// leader epoch from metadata (answered) may be fetched from, given the
// highest source leader epoch this destination partition has fetched in
// (seen) and the run's floor (min, MinSourceLeaderEpoch). Any source broker
// may answer metadata, and one whose own view lags — a leader cut off from
// its controller still names itself leader in its old LE — would be
// fetched from in that LE and would serve records its cluster has since
// cut. Two rules keep such a zombie out:
//   - Not an older LE than one already fetched in, as Kafka clients ignore
//     metadata with an older leader epoch (KIP-320). Two-cluster sweep seed
//     1318604: B's zombie leader of LE 8 served its own epoch-8 records to
//     A's mirror, which had copied B's epoch 11 before, and A's epoch 8
//     then held records of both clusters (§8.20).
//   - Not an LE at or below the run's LMLE. The source answered the LMLE
//     from a record it wrote when it stopped, and the stop bumped its LE
//     above it (§6.7 step 4, inv. 18), so every leader that may serve the
//     run is in a later epoch; one in an epoch ≤ LMLE is a zombie of the
//     source's history before that stop. Seed 1737467: on a failback with
//     LMLE 3, a run's first fetch (nothing seen yet) took A's leader from a
//     broker still leading A's cut epoch 3, and B's epoch 3 got A's
//     records after its own.
func SourceLeaderEpochUsable(seen, min, answered twinlog.Epoch) bool {
	return answered >= seen && answered >= min
}

// MinSourceLeaderEpoch is the lowest source leader epoch a run with
// lmleUsed may fetch in (SourceLeaderEpochUsable): lmleUsed + 1, and 0
// when the source answered no LMLE (−1).
func MinSourceLeaderEpoch(lmleUsed twinlog.Epoch) twinlog.Epoch { return max(lmleUsed+1, 0) }

// MirrorFetchRequest builds the mirror fetch fields: currentLeaderEpoch =
// the source leader epoch as known (−1 allowed), lastFetchedEpoch = the
// latest cached epoch (−1 none), fetchOffset = D's LEO.
func MirrorFetchRequest(sourceLeaderEpoch twinlog.Epoch, latest twinlog.Epoch, leo twinlog.Offset) FetchRequest {
	return FetchRequest{FetchOffset: leo, CurrentLeaderEpoch: sourceLeaderEpoch, LastFetchedEpoch: latest}
}

// AppendablePrefix returns how many of the fetched batches (given by their
// record epochs, in order) may be appended at leader epoch le before a
// BumpLeaderEpoch(minLeaderEpoch = the returned epoch) is needed (SPEC
// §6.2d). needBump is NoEpoch when all may be appended.
func AppendablePrefix(batchEpochs []twinlog.Epoch, le twinlog.Epoch) (n int, needBump twinlog.Epoch) {
	for i, e := range batchEpochs {
		if e > le {
			return i, e
		}
	}
	return len(batchEpochs), twinlog.NoEpoch
}

// FetchedBatches is AppendablePrefix for a leader whose latest cached
// epoch is latest, for a response to a fetch made with currentLeaderEpoch
// sourceLE (the source leader's LE as known from Metadata, −1 unknown).
//
// A batch whose epoch exceeds sourceLE cannot come from the source leader
// that answered: it checked that LE, and a leader's LE is at least every
// epoch in its log (§6.2d). Nor may an epoch be MaxEpoch, which leaves no
// room for the bump after it. Such an answer is refused whole (err,
// CORRUPT_MESSAGE for the run: repeated, the run FAILS), so a source cannot
// push this partition's LE wherever a batch header says, which the forged
// BumpLeaderEpoch it would cause must not do either.
//
// The source's log is epoch-monotone, so a batch whose epoch is below
// latest, or below an earlier batch's of the answer, is not appendable
// (storage refuses an append whose epochs go back, and the broker then
// takes the partition offline). If the FIRST batch is such a batch,
// foreign is true and nothing may be appended: the source's DivergingEpoch
// check passed on an epoch number it does not share with this log, which
// happens when a tainted replica was elected uncleanly (SPEC §6.8) and the
// same epoch denotes different records in the two clusters (simulator seed
// 432: B's epoch 2 at [0, 12), A's epoch 2 from 20 on, so fetch(12, last 2)
// passed and A answered an epoch-0 batch at 12). The shell then posts
// FetchForeignEpoch. A later batch going back only ends the prefix: the
// next fetch starts at it and is foreign.
func FetchedBatches(batchEpochs []twinlog.Epoch, le, latest, sourceLE twinlog.Epoch) (n int, needBump twinlog.Epoch, foreign bool, err error) {
	for _, e := range batchEpochs {
		if e >= MaxEpoch || (sourceLE >= 0 && e > sourceLE) {
			return 0, twinlog.NoEpoch, false, fmt.Errorf("mirror: source batch epoch %d above the source leader epoch %d", e, sourceLE)
		}
	}
	floor := max(latest, 0)
	for i, e := range batchEpochs {
		switch {
		case e < floor:
			return i, twinlog.NoEpoch, i == 0, nil
		case e > le:
			return i, e, false, nil
		}
		floor = e
	}
	return len(batchEpochs), twinlog.NoEpoch, false, nil
}

// MaxEpoch is the largest leader epoch; nothing may reach it through a
// mirror, since every mirror bump asks for one more.
const MaxEpoch twinlog.Epoch = math.MaxInt32

// ForeignEpochTruncation is the truncation after FetchForeignEpoch: the
// source's batch at base has epoch e below the latest epoch of this log
// (cache, log start, LEO). The source's records below base have epochs ≤
// e, so this log's records of epochs > e (from s, the start of its first
// such epoch) are not the source's. If there are such records (s < LEO),
// the source's epoch check is shown to accept records that are not its own
// for this log, so no epoch proves the rest of the log either: it
// truncates fully and restarts at the source's log start, as on
// OFFSET_OUT_OF_RANGE (§6.3), the one offset where both logs provably
// agree. The source's log start is remote input; a valid one is ≤ base. If
// only an epoch without records starts at the LEO (s = LEO), no record is
// contradicted and cutting at the LEO drops just that cache entry (at the
// log start: fully, as EmptyEpochTruncation does). Either way the cache
// loses an entry, so a source repeating the answer cannot livelock the
// mirror. No epoch above e: NoOp (nothing is foreign).
func ForeignEpochTruncation(cache *epoch.Cache, logStart, leo twinlog.Offset, e twinlog.Epoch, base, srcLogStart twinlog.Offset) Truncation {
	s, ok := cache.StartOffsetOfFirstEpochAfter(e)
	switch {
	case !ok:
		return Truncation{NoOp: true, Offset: twinlog.NoOffset}
	case s >= leo && leo > logStart:
		return Truncation{Offset: leo}
	case s >= leo:
		return Truncation{Full: true, Offset: logStart, RestartAt: logStart}
	}
	return Truncation{Full: true, Offset: logStart, RestartAt: min(max(srcLogStart, 0), max(base, 0))}
}

// StraddleTruncation is the truncation after FetchStraddle: the source's
// batch at base holds this log's LEO inside it. Batches are copied whole and
// byte for byte, and every truncation ends a log at a batch boundary, so a
// log that is a prefix of the source's ends where one of its batches ends:
// this one is not, though the source's epoch check passed (the same epoch
// number denoting each cluster's own records after a tainted replica's
// unclean election, SPEC §6.8; simulator seed 760568). As after
// FetchForeignEpoch no epoch proves any part of the log: it truncates fully
// and restarts at the source's log start, the one offset where both logs
// provably agree (remote input; a valid one is ≤ base). The full truncation
// empties the cache, so a source repeating the answer cannot livelock the
// mirror.
func StraddleTruncation(logStart, base, srcLogStart twinlog.Offset) Truncation {
	return Truncation{Full: true, Offset: logStart, RestartAt: min(max(srcLogStart, 0), max(base, 0))}
}

// LagClock tells the mirror lag as what a failover would lose now (issue
// 18; SPEC §6.3 measured from the destination's LEO and the last fetch
// that found it caught up, which read 0 while the destination's committed
// offsets trailed by thousands and 0.4 s when idle and caught up):
//
//   - records: source HW − destination HW, the source's committed records
//     the destination has not committed;
//   - seconds: the age of the oldest of them, counted from the first fetch
//     response that showed the source had committed it; 0 when caught up.
//
// It remembers, oldest first, each source HW a fetch response showed that
// the destination had not committed, with when it was first shown. The
// zero value is ready; it holds at most lagClockMax entries (when full the
// newest absorbs the next, keeping its older time: the age is never
// under-reported).
type LagClock struct {
	seen []hwSeen
}

type hwSeen struct {
	hw   twinlog.Offset
	atMs int64
}

const lagClockMax = 32

// Observe notes a fetch response's source HW at nowMs, the destination's
// HW being destHW.
func (c *LagClock) Observe(srcHW, destHW twinlog.Offset, nowMs int64) {
	i := 0
	for i < len(c.seen) && c.seen[i].hw <= destHW {
		i++
	}
	c.seen = append(c.seen[:0], c.seen[i:]...)
	if srcHW <= destHW {
		return
	}
	switch n := len(c.seen); {
	case n > 0 && c.seen[n-1].hw >= srcHW:
	case n == lagClockMax:
		c.seen[n-1].hw = srcHW
	default:
		c.seen = append(c.seen, hwSeen{hw: srcHW, atMs: nowMs})
	}
}

// Reset forgets every entry (a new run or leadership starts counting).
func (c *LagClock) Reset() { c.seen = c.seen[:0] }

// Lag is the lag at nowMs for the source HW srcHW and the destination HW
// destHW.
func (c *LagClock) Lag(srcHW, destHW twinlog.Offset, nowMs int64) (records int64, seconds float64) {
	if srcHW <= destHW {
		return 0, 0
	}
	for _, s := range c.seen {
		if s.hw > destHW {
			return int64(srcHW - destHW), float64(max(0, nowMs-s.atMs)) / 1000
		}
	}
	return int64(srcHW - destHW), 0
}

// Backoff is full-jitter exponential backoff: a uniform delay in
// [0, min(maxMs, initialMs·2^attempt)].
func Backoff(rng Rand, attempt int, initialMs, maxMs int64) int64 {
	ceil := initialMs
	for i := 0; i < attempt && ceil < maxMs; i++ {
		ceil *= 2
	}
	ceil = min(ceil, maxMs)
	if ceil <= 0 {
		return 0
	}
	return int64(rng.IntN(int(ceil) + 1))
}

// Fatal reports whether a source error ends the run in FAILED rather than
// being retried (SPEC §6.3, §6.6 step 1): errcode's MirrorFatal.
func Fatal(code twinlogv1.ErrorCode) bool { return errcode.Of(code).MirrorFatal }

// FatalReason explains a Fatal source error for the run's lastError
// (`mirrors describe`): what happened at the source, that the partition's
// records are kept, and what the operator may do. "" for other codes.
func FatalReason(code twinlogv1.ErrorCode) string { return errcode.Of(code).MirrorFatalReason }
