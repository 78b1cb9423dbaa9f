package replica

import (
	"fmt"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// NextFetch returns the fetch a follower sends to its leader (SPEC §4.4):
// currentLeaderEpoch = LE, lastFetchedEpoch = latest cached epoch,
// fetchOffset = LEO. It reports false unless the replica is a follower, and
// while a truncation awaits ConfirmTruncation (the log may end below LEO).
// Each call numbers the fetch with the next Seq and makes it the one whose
// answer the machine takes: the shell calls it for every fetch it sends (a
// resend after a drop included) and never sends one request twice, since
// the leader refuses a Seq it has already evaluated.
func (r *Replica) NextFetch() (FetchTarget, bool) {
	t, ok := r.fetchTarget(r.fetchSeq + 1)
	if ok {
		r.fetchSeq++
	}
	return t, ok
}

// fetchTarget is the fetch numbered seq for the current log and LE.
func (r *Replica) fetchTarget(seq int64) (FetchTarget, bool) {
	if r.role != RoleFollower || r.truncationUnconfirmed {
		return FetchTarget{}, false
	}
	return FetchTarget{Leader: r.leader, Request: FetchRequest{
		ReplicaID:          r.cfg.ID,
		BrokerEpoch:        r.ownBrokerEpoch(),
		FetcherType:        pb.FetcherType_FETCHER_TYPE_FOLLOWER,
		FetchOffset:        r.leo,
		CurrentLeaderEpoch: r.le,
		LastFetchedEpoch:   r.cache.Latest(),
		Seq:                seq,
	}}, true
}

// HandleFetchResponse applies the leader's answer to a follower fetch (SPEC
// §4.4): truncation on DivergingEpoch or OFFSET_OUT_OF_RANGE, else append,
// log start and HW from the leader, aligned epoch (§6.6 step 3). Answers to
// any request but the last NextFetch, or to it once the log or LE moved, are
// dropped, so duplicated, delayed and reordered responses are harmless.
func (r *Replica) HandleFetchResponse(resp FetchResponse, nowMs int64) {
	cur, ok := r.fetchTarget(r.fetchSeq)
	if !ok || r.fetchSeq == r.cfg.FetchSeqStart || cur.Request != resp.Request {
		r.event(EventIgnored, "stale fetch response (offset %d, LE %d)", resp.Request.FetchOffset, resp.Request.CurrentLeaderEpoch)
		return
	}
	switch resp.Error {
	case errNone:
	case errOutOfRange:
		r.truncateLog(resp.LogStartOffset, CauseOutOfRange, "out of range")
		if r.hw > r.leo {
			r.setHW(r.leo, "out of range")
		}
		return
	case errFenced, errUnknownEpoch, errNotLeader:
		r.event(EventFenced, "fetch at LE %d: %v", r.le, resp.Error)
		return
	default:
		r.event(EventIgnored, "fetch error %v", resp.Error)
		return
	}
	if d := resp.DivergingEpoch; d != nil {
		r.truncateLog(r.divergenceTruncationOffset(*d), CauseDivergence, "divergence")
		return
	}
	// Validate before changing anything: a malformed answer is dropped, never
	// a panic (the leader is remote input). Epochs never go back in the
	// leader's log, so neither within one answer (storage would refuse it).
	// The first batch may hold the LEO inside it (cutStraddled).
	next, prevEpoch := r.leo, twinlog.NoEpoch
	straddle := len(resp.Batches) > 0 && resp.Batches[0].BaseOffset < r.leo && resp.Batches[0].LastOffset >= r.leo
	if straddle {
		next = resp.Batches[0].BaseOffset
	}
	for _, b := range resp.Batches {
		if b.BaseOffset < next || b.LastOffset < b.BaseOffset || b.Epoch > resp.LeaderEpoch || b.Epoch < max(prevEpoch, 0) {
			r.event(EventIgnored, "fetch response with bad batch %v at %d", b, next)
			return
		}
		next, prevEpoch = b.LastOffset+1, b.Epoch
	}
	if straddle {
		r.cutStraddled(resp.Batches[0], resp.LogStartOffset)
		return
	}
	if len(resp.Batches) > 0 && resp.Batches[0].Epoch < r.cache.Latest() {
		r.cutForeignEpochs(resp.Batches[0], resp.LogStartOffset)
		return
	}
	if len(resp.Batches) > 0 {
		for _, b := range resp.Batches {
			r.assign(b.Epoch, b.BaseOffset)
		}
		r.rd.LogOps = append(r.rd.LogOps, LogOp{Kind: OpAppend, Batches: append([]BatchMeta(nil), resp.Batches...)})
		r.leo = next
	}
	if ls := min(resp.LogStartOffset, r.leo); ls > r.logStart {
		r.logStart = ls
		r.rd.LogOps = append(r.rd.LogOps, LogOp{Kind: OpAdvanceLogStart, Offset: ls})
		if r.cache.TruncateFromStart(ls) {
			r.rd.EpochsChanged = true
		}
	}
	hw := min(max(resp.HighWatermark, r.logStart), r.leo)
	if hw > r.hw || (hw < r.hw && r.followerHWFromOlderLE()) {
		r.setHW(hw, "from leader")
	}
	r.followerHWLE = r.le
	r.setAlignedEpoch(r.le)
}

// cutForeignEpochs handles a leader's batch b whose epoch is below this
// replica's latest cached epoch ℓ, which the leader let pass its
// DivergingEpoch check (§4.3 step 4): appended, the log's epochs would go
// back, which storage refuses (and the shell would take the log offline).
// The leader's log is epoch-monotone, so its records below b.BaseOffset
// have epochs ≤ b.Epoch, and this replica's records of epochs > b.Epoch
// (from s, the start of its first such epoch) are not the leader's. Within
// one cluster an epoch has one leader and starts at one offset on every
// replica, so this never happens there (a bug); across clusters the same
// epoch number can denote each cluster's own records after a tainted
// replica's unclean election (SPEC §6.8; seed 432: B's epoch 2 at [0, 12)
// here, A's epoch 2 from 20 on the leader, so the leader's endOffsetFor(2)
// passed fetch(12, last 2) and sent A's epoch-0 records at 12).
//
// If this replica holds such records (s < LEO), the leader's check has been
// shown to accept records that are not its own for this replica, so no
// epoch proves the rest of the log either: cutting to s and re-running the
// check could keep the other cluster's records below s. The log restarts
// empty at the leader's log start, as on OFFSET_OUT_OF_RANGE (§4.4), the
// one offset where both logs provably agree, and re-copies the leader's.
// If only an epoch this replica led without writing starts at the LEO (s
// = LEO), no record is contradicted: §4.4's truncation for
// DivergingEpoch{b.Epoch, b.BaseOffset} drops just that cache entry. Either
// way the cache loses an entry, so a leader repeating the answer cannot
// livelock the follower. Nothing else of the answer (HW, log start,
// aligned epoch) is taken: it was no prefix-proving answer.
func (r *Replica) cutForeignEpochs(b BatchMeta, leaderLogStart twinlog.Offset) {
	latest := r.cache.Latest()
	reason := fmt.Sprintf("divergence: leader's batch at %d has epoch %d below cached epoch %d", b.BaseOffset, b.Epoch, latest)
	if s, _ := r.cache.StartOffsetOfFirstEpochAfter(b.Epoch); s >= r.leo {
		r.truncateLog(r.leo, CauseDivergence, reason)
		return
	}
	// The leader's log start is remote input: a valid one is ≤ the offset
	// it served from.
	r.restartLog(min(max(leaderLogStart, 0), b.BaseOffset), CauseDivergence, reason)
}

// cutStraddled handles a leader's batch b that holds this replica's LEO
// inside it (b.BaseOffset < LEO ≤ b.LastOffset). Followers copy batches
// whole and byte for byte and every truncation ends a log at a batch
// boundary (ConfirmTruncation), so a log that is a prefix of the leader's
// ends where one of the leader's batches ends: this one is not, though the
// leader's DivergingEpoch check passed. Within one cluster that never
// happens (a bug); across clusters the same epoch number can denote each
// cluster's own records after a tainted replica's unclean election (SPEC
// §6.8; two-cluster seed 760568: A's epoch 6 from 175 on the leader, B's
// copied epoch 6 from 70 on the followers, whose fetch(102, last 6) passed
// and met A's batch [101, 103]). Refusing the answer would leave the
// follower refetching forever, out of the ISR; as in cutForeignEpochs no
// epoch proves any part of the log, so it restarts empty at the leader's log
// start (valid: ≤ b.BaseOffset) and re-copies the leader's log. Nothing
// else of the answer is taken.
func (r *Replica) cutStraddled(b BatchMeta, leaderLogStart twinlog.Offset) {
	r.restartLog(min(max(leaderLogStart, 0), b.BaseOffset), CauseDivergence,
		fmt.Sprintf("divergence: leader's batch [%d, %d] holds the log end %d", b.BaseOffset, b.LastOffset, r.leo))
}

// divergenceTruncationOffset is SPEC §4.4's DivergingEpoch rule.
func (r *Replica) divergenceTruncationOffset(d EpochEndOffset) twinlog.Offset {
	if d.Epoch == twinlog.NoEpoch || r.cache.Len() == 0 {
		return min(d.EndOffset, r.leo)
	}
	ef, of := r.cache.EndOffsetFor(d.Epoch, r.leo)
	if ef == d.Epoch {
		return min(of, d.EndOffset, r.leo)
	}
	return min(of, r.leo)
}

// followerHWFromOlderLE: the follower takes a lower leader HW only from the
// first answer in a new LE (a new leader starts from its own, possibly
// lagging, HW: SPEC §4.2); within one LE the leader's HW never decreases, so a
// lower value is a reordered answer.
func (r *Replica) followerHWFromOlderLE() bool { return r.followerHWLE != r.le }
