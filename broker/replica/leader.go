package replica

import (
	"slices"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Propose decides a produce request (SPEC §4.1). On acceptance the machine
// moves its LEO past the batch and Ready.LogOps carries the append; acks=1
// completes in that Ready, acks=all when the HW passes the batch.
func (r *Replica) Propose(p Proposal, nowMs int64) ProposeDecision {
	d := ProposeDecision{BaseOffset: twinlog.NoOffset, LastOffset: twinlog.NoOffset, LeaderEpoch: r.le}
	switch {
	case r.role != RoleLeader:
		d.Error = errNotLeader
		return d
	case !r.writable:
		d.Error = errReadOnly
		return d
	case p.NumRecords < 1 || (p.Acks != AcksAll && p.Acks != AcksLeader && p.Acks != AcksNone):
		d.Error = errInvalidRequest
		return d
	case p.Acks == AcksAll && len(r.isr) < r.effectiveMinISR():
		d.Error = errNotEnough
		return d
	case r.truncationUnconfirmed:
		// The log may end below LEO until ConfirmTruncation (the shell
		// runs it with the truncation's Ready, so only a shell breaking the
		// Ready contract gets here).
		d.Error = errNotLeader
		return d
	}
	d.BaseOffset = r.leo
	d.LastOffset = r.leo + twinlog.Offset(p.NumRecords) - 1
	b := BatchMeta{BaseOffset: d.BaseOffset, LastOffset: d.LastOffset, Epoch: r.le}
	r.rd.LogOps = append(r.rd.LogOps, LogOp{Kind: OpAppend, Batches: []BatchMeta{b}, ProposalID: p.ID, Leader: true})
	r.assign(r.le, d.BaseOffset)
	r.leo = d.LastOffset + 1
	switch p.Acks {
	case AcksLeader:
		r.rd.ProduceResults = append(r.rd.ProduceResults, ProduceResult{ID: p.ID, Error: errNone, BaseOffset: d.BaseOffset})
	case AcksAll:
		r.pending = append(r.pending, pendingProduce{id: p.ID, base: d.BaseOffset, last: d.LastOffset, deadline: nowMs + p.TimeoutMs})
	}
	r.reevaluate(nowMs)
	return d
}

// ProposeDuplicate answers a produce the shell found to repeat a batch this
// leader's log holds at [base, last] (an idempotent producer's retry,
// storage/producer): nothing is appended, and the answer is the one the
// original got, with the same checks as Propose and, for acks=all, once
// the HW passes last (at once if it has), as Kafka answers a duplicate.
func (r *Replica) ProposeDuplicate(p Proposal, base, last twinlog.Offset, nowMs int64) ProposeDecision {
	d := ProposeDecision{BaseOffset: twinlog.NoOffset, LastOffset: twinlog.NoOffset, LeaderEpoch: r.le}
	switch {
	case r.role != RoleLeader || r.truncationUnconfirmed:
		d.Error = errNotLeader
		return d
	case !r.writable:
		d.Error = errReadOnly
		return d
	case p.Acks != AcksAll && p.Acks != AcksLeader && p.Acks != AcksNone,
		base < r.logStart || last < base || last >= r.leo:
		d.Error = errInvalidRequest
		return d
	case p.Acks == AcksAll && len(r.isr) < r.effectiveMinISR():
		d.Error = errNotEnough
		return d
	}
	d.BaseOffset, d.LastOffset = base, last
	switch {
	case p.Acks == AcksLeader, p.Acks == AcksAll && r.hw > last:
		r.rd.ProduceResults = append(r.rd.ProduceResults, ProduceResult{ID: p.ID, Error: errNone, BaseOffset: base})
	case p.Acks == AcksAll:
		r.pending = append(r.pending, pendingProduce{id: p.ID, base: base, last: last, deadline: nowMs + p.TimeoutMs})
	}
	return d
}

// HandleFollowerFetch decides one partition of a Fetch served by this
// replica (SPEC §4.3 steps 1–7), for followers, consumers and mirrors alike.
// Only FOLLOWER fetches that get records change leader state.
func (r *Replica) HandleFollowerFetch(f FetchRequest, nowMs int64) FetchDecision {
	d := FetchDecision{
		TruncationOffset: twinlog.NoOffset, ReadFrom: f.FetchOffset, ReadUpTo: f.FetchOffset,
		HighWatermark: r.hw, LogStartOffset: r.logStart, LogEndOffset: r.leo, LeaderEpoch: r.le,
	}
	isFollower := f.FetcherType == pb.FetcherType_FETCHER_TYPE_FOLLOWER
	// Step 1.
	if r.role != RoleLeader {
		d.Error = errNotLeader
		return d
	}
	if f.FetcherType == pb.FetcherType_FETCHER_TYPE_MIRROR && !r.writable {
		d.Error = errInvalidMirrorSrc
		return d
	}
	var fs *follower
	if isFollower {
		// Kafka's getReplicaOrException: a fetcher outside R is not served.
		if fs = r.followers[f.ReplicaID]; fs == nil {
			d.Error = errNotLeader
			return d
		}
	}
	// Step 2. A Kafka-listener consumer without a leader epoch asks for no
	// check at all, as Kafka's protocol defines −1 (KIP-320).
	unchecked := f.CurrentLeaderEpoch == twinlog.NoEpoch && f.LeaderEpochOptional
	if f.FetcherType == pb.FetcherType_FETCHER_TYPE_CONSUMER && !unchecked {
		trunc := twinlog.NoOffset
		for _, tp := range r.truncPts {
			if tp.LeaderEpoch > f.CurrentLeaderEpoch && tp.Offset < f.FetchOffset && (trunc < 0 || tp.Offset < trunc) {
				trunc = tp.Offset
			}
		}
		if trunc >= 0 {
			d.Error, d.TruncationOffset = errLogTruncated, trunc
			return d
		}
	}
	if f.CurrentLeaderEpoch == twinlog.NoEpoch && f.FetcherType != pb.FetcherType_FETCHER_TYPE_MIRROR && !unchecked {
		d.Error = errInvalidRequest
		return d
	}
	if f.CurrentLeaderEpoch != twinlog.NoEpoch {
		switch {
		case f.CurrentLeaderEpoch < r.le:
			d.Error = errFenced
			return d
		case f.CurrentLeaderEpoch > r.le || r.truncationPending():
			d.Error = errUnknownEpoch
			return d
		}
	}
	if f.FetcherType == pb.FetcherType_FETCHER_TYPE_CONSUMER && f.CommittedInEpoch && r.hw < r.leso {
		// A reader that must see every committed record (__mirror_state,
		// SPEC §6.4: "once it has read up to its HW in its current LE")
		// waits until this leader's HW covers what it had on taking the LE.
		d.Error = errLoadInProgress
		return d
	}
	if isFollower && r.taintsPending {
		// The durable taints are not loaded yet (SPEC §6.4): the follower
		// may be tainted, so neither serve it nor note anything about it.
		d.Error = errUnknownEpoch
		return d
	}
	if isFollower {
		if d.Error = r.fenceFollowerFetch(f, fs); d.Error != errNone {
			return d
		}
	}
	// Step 3.
	if f.FetchOffset < r.logStart {
		d.Error = errOutOfRange
		return d
	}
	// Step 4.
	if t, ok := r.taints[f.ReplicaID]; isFollower && ok &&
		(f.LastFetchedEpoch > t.Epoch || f.FetchOffset > max(t.Offset, r.logStart)) {
		if t.Epoch == twinlog.NoEpoch {
			d.Error = errOutOfRange
			return d
		}
		d.DivergingEpoch = &EpochEndOffset{Epoch: min(f.LastFetchedEpoch, t.Epoch), EndOffset: t.Offset}
		return d
	}
	if e, o, ok := r.cache.Diverging(f.LastFetchedEpoch, f.FetchOffset, r.leo); ok {
		d.DivergingEpoch = &EpochEndOffset{Epoch: e, EndOffset: o}
		return d
	}
	// Step 5.
	if f.FetchOffset > r.leo {
		d.Error = errOutOfRange
		return d
	}
	// Step 6.
	if isFollower {
		d.ReadUpTo = r.leo
	} else {
		d.ReadUpTo = r.hw
	}
	if !isFollower {
		return d
	}
	// Step 7.
	r.updateFollower(f, fs, nowMs)
	d.HighWatermark = r.hw
	return d
}

// fenceFollowerFetch refuses a follower fetch that is older than one this
// leader already evaluated in this LE, before anything about the follower
// is noted (an extension of SPEC §4.3: Kafka's fetch session epoch). A
// fetch describes the follower's log when it was sent; a delayed one may
// describe records the follower has since truncated on an answer to a later
// fetch (DivergingEpoch, OFFSET_OUT_OF_RANGE), and the leader's log may
// have changed so that it now passes step 4 (a mirror partition appends the
// other cluster's records, whose epoch numbers mean other records; simulator
// seed two:448). Taking its fetchOffset as the follower's LEO would let the
// HW pass the follower's real LEO (§8.7). So: an older broker epoch than the
// last fetch's or the registered one (a previous incarnation, perhaps
// before a lossy crash) → STALE_BROKER_EPOCH; the same broker epoch and a
// Seq not above the last fetch's → INVALID_FETCH_SESSION_EPOCH; Seq 0 (an
// unnumbered fetch) → INVALID_REQUEST. Every fetch that passes is recorded,
// whatever the later steps answer, since any answer from step 3 on may
// change the follower's log. The one exception is an identical
// re-evaluation of the last fetch after it was served at step 7: the
// shell's long poll evaluates one request again, and a NONE answer only
// lets the follower append, so the fetch still describes a prefix of its
// log. The record is per LE: a fetch of an older LE is fenced at step 2.
//
// The broker epoch must be exactly the one this leader's metadata has
// registered for the replica, acceptable or not, as issue 13 asks: anyone
// can put a replica id and a guessed epoch on the wire, and an accepted
// fetch moves the follower's LEO (and with it the HW), clears its taint
// (repairTaint) and may propose it for the ISR. An older epoch is a previous
// incarnation. A newer one, or a broker the metadata does not show, is
// either forged or a registration this leader's metadata does not show yet;
// either way the leader cannot vouch for it, and the answer is the same
// retriable STALE_BROKER_EPOCH: the follower's machine ignores the error,
// and its shell fetches again (broker/fetcher.go after a short wait or a
// metadata change), passing once this leader's image has the registration.
//
// Until sweep seed 729424 was understood this check spared brokers the
// leader held unacceptable (fenced, in controlled shutdown): refusing them
// broke §8.9 there. The cause was a taint, not the check: a later run's
// looser taint replaced the earlier one of a replica that had not fetched
// since (plan.RunTaints), which the relaxed check had hidden by letting the
// fenced replica repair its taint in between.
func (r *Replica) fenceFollowerFetch(f FetchRequest, fs *follower) ErrorCode {
	if f.Seq <= 0 {
		return errInvalidRequest
	}
	if reg, ok := r.registeredEpochOf(f.ReplicaID); !ok || f.BrokerEpoch != reg {
		return errStaleBrokerEpoch
	}
	last := fs.lastFetch
	switch {
	case last.Seq == 0 || f.BrokerEpoch > last.BrokerEpoch:
	case f.BrokerEpoch < last.BrokerEpoch:
		return errStaleBrokerEpoch
	case f.Seq > last.Seq:
	case f == last && fs.lastFetchServed:
	default:
		return errStaleFetch
	}
	fs.lastFetch, fs.lastFetchServed = f, false
	return errNone
}

func (r *Replica) updateFollower(f FetchRequest, fs *follower, nowMs int64) {
	fs.lastFetchServed = true
	switch {
	case f.FetchOffset >= r.leo:
		fs.lastCaughtUpMs = nowMs
	case fs.lastFetchLeaderLEO >= 0 && f.FetchOffset >= fs.lastFetchLeaderLEO:
		fs.lastCaughtUpMs = max(fs.lastCaughtUpMs, fs.lastFetchMs)
	}
	fs.lastFetchLeaderLEO = r.leo
	fs.lastFetchMs = nowMs
	fs.leo = f.FetchOffset
	fs.brokerEpoch = f.BrokerEpoch
	fs.fetchedInLE = true
	fs.alignedEpoch = r.le
	r.repairTaint(f.ReplicaID)
	r.maybeExpandISR(f.ReplicaID, fs)
	r.reevaluate(nowMs)
}

// truncationPending: this LE was bumped for a truncation (§6.2f) the leader
// has not done yet.
func (r *Replica) truncationPending() bool {
	if r.truncatedInLE {
		return false
	}
	for _, tp := range r.truncPts {
		if tp.LeaderEpoch == r.le {
			return true
		}
	}
	return false
}

// maybeAdvanceHW applies SPEC §4.2.
func (r *Replica) maybeAdvanceHW() {
	if len(r.isr) < r.effectiveMinISR() {
		return
	}
	hw := r.leo
	for _, id := range r.maximalISR() {
		if id == r.cfg.ID {
			continue
		}
		fs := r.followers[id]
		if fs == nil || !fs.fetchedInLE {
			return // a member not yet fetched in this LE blocks
		}
		hw = min(hw, fs.leo)
	}
	if hw > r.hw {
		r.setHW(hw, "leader")
		r.hwFloor = hw
	}
}

// maybeExpandISR applies SPEC §4.5 (KAFKA-7128, KIP-841/903).
func (r *Replica) maybeExpandISR(id twinlog.BrokerID, fs *follower) {
	if r.inflight != nil || slices.Contains(r.maximalISR(), id) {
		return
	}
	if r.recovery == pb.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING {
		return // AlterPartition([self], RECOVERED) first (§3.5)
	}
	if r.taintBlocksISR(id) || !fs.fetchedInLE || fs.leo < r.hw || fs.leo < r.leso {
		return
	}
	reg, ok := r.brokers[id]
	if !ok || reg != fs.brokerEpoch {
		return
	}
	r.proposeISR(append(slices.Clone(r.isr), id), r.recovery, "expand")
}

func (r *Replica) maybeProposeRecovered() {
	if r.inflight != nil || r.recovery != pb.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING {
		return
	}
	r.proposeISR([]twinlog.BrokerID{r.cfg.ID}, pb.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERED, "recovered")
}

func (r *Replica) proposeISR(isr []twinlog.BrokerID, rec pb.LeaderRecoveryState, why string) {
	r.alterSeq++
	m := r.effectiveMinISR()
	r.inflight = &inflightAlter{seq: r.alterSeq, isr: isr, recovery: rec, minISR: m}
	req := &pb.AlterPartitionRequest{
		BrokerId:       int32(r.cfg.ID),
		BrokerEpoch:    int64(r.brokerEpochOf(r.cfg.ID)),
		Topic:          r.cfg.Partition.Topic,
		Partition:      r.cfg.Partition.Partition,
		LeaderEpoch:    int32(r.le),
		PartitionEpoch: int32(r.pe),
		RecoveryState:  rec,
		// The m this leader applies: the controller refuses the change if
		// its own differs (see controller/metastate/doc.go), so ISR and ELR
		// are never computed with an m the leader's HW does not use.
		MinInsyncReplicas: int32(m),
	}
	for _, id := range isr {
		e := r.brokerEpochOf(id)
		if id != r.cfg.ID {
			e = -1
			if fs := r.followers[id]; fs != nil {
				e = fs.brokerEpoch
			}
		}
		req.NewIsr = append(req.NewIsr, &pb.IsrMember{BrokerId: int32(id), BrokerEpoch: int64(e)})
	}
	r.rd.AlterPartition = &AlterPartitionProposal{Seq: r.alterSeq, Request: req}
	r.event(EventISRChange, "propose %v (%s, seq %d)", isr, why, r.alterSeq)
}

// registeredEpochOf is id's registered broker epoch in the applied
// metadata, acceptable or not (PartitionState.Registered, then Brokers).
func (r *Replica) registeredEpochOf(id twinlog.BrokerID) (twinlog.BrokerEpoch, bool) {
	if e, ok := r.registered[id]; ok {
		return e, true
	}
	e, ok := r.brokers[id]
	return e, ok
}

// ownBrokerEpoch is this broker's registered epoch as its follower fetches
// carry it: the registration, acceptable or not (fenced right after a
// restart, say), since the leader serves a follower fetch only with exactly
// that epoch (fenceFollowerFetch); −1 if the metadata has none.
func (r *Replica) ownBrokerEpoch() twinlog.BrokerEpoch {
	if e, ok := r.registeredEpochOf(r.cfg.ID); ok {
		return e
	}
	return -1
}

func (r *Replica) brokerEpochOf(id twinlog.BrokerID) twinlog.BrokerEpoch {
	if e, ok := r.brokers[id]; ok {
		return e
	}
	return -1
}

// HandleAlterPartitionResponse completes the in-flight ISR change seq
// (SPEC §4.5). Success commits it. An error rolls the maximal ISR back to the
// committed one only when it is definitive, i.e. the controller checked the
// request against the current partition epoch and did not apply it
// (INELIGIBLE_REPLICA, INVALID_REQUEST: §3.6 checks 6–8 run after check 5;
// any refusal that carries this leader, LE and partition epoch, such as
// INVALID_UPDATE_VERSION for a stale min.insync.replicas: controller/
// metastate's deviation, whose answer no later metadata would resolve when
// m went back before the leader saw it change — simulator seed 1416705).
// Any other outcome is ambiguous: a lost answer (REQUEST_TIMED_OUT,
// transport errors), or an answer to a retry of a request that was applied
// (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, NOT_CONTROLLER,
// UNKNOWN_TOPIC_OR_PARTITION, …). Then the change stays pending, so the HW
// keeps counting the maximal ISR (safe whether or not the controller
// committed it), until a retry answers or metadata with a newer partition
// epoch replaces it (Kafka Partition.handleAlterPartitionError). Answers to
// an older seq, from another LE, or older than the applied partition epoch
// are ignored (Kafka Partition.handleAlterPartitionUpdate).
func (r *Replica) HandleAlterPartitionResponse(seq uint64, resp *pb.AlterPartitionResponse, nowMs int64) {
	if r.role != RoleLeader || r.inflight == nil || r.inflight.seq != seq {
		r.event(EventIgnored, "alter-partition response seq %d (stale)", seq)
		return
	}
	switch {
	case resp.GetError() != errNone && !definitiveAlterReject(resp.GetError()) && !r.refusedAtOwnEpochs(resp):
		r.event(EventAlterRejected, "%v: outcome unknown, keeping maximal ISR %v until metadata", resp.GetError(), r.maximalISR())
		return
	case resp.GetError() != errNone:
		r.inflight = nil
		r.event(EventAlterRejected, "%v: rollback to %v", resp.GetError(), r.isr)
	case twinlog.Epoch(resp.GetLeaderEpoch()) != r.le:
		// Committed, but in another LE: the controller bumped the LE in the
		// same change (a reassignment completing, SPEC §3.7), so its ISR may
		// hold a member the committed r.isr lacks. Dropping the pending
		// change would let the HW pass that member's LEO (§8.7); keep the
		// maximal ISR until metadata brings the new LE (becomeLeader or a
		// role change resets it). Simulator seeds 4, 168, 189.
		r.event(EventIgnored, "alter-partition committed in LE %d, at LE %d: keeping maximal ISR %v until metadata", resp.GetLeaderEpoch(), r.le, r.maximalISR())
		return
	case twinlog.PartitionEpoch(resp.GetPartitionEpoch()) < r.pe:
		r.inflight = nil
		r.event(EventIgnored, "alter-partition response PE %d < %d", resp.GetPartitionEpoch(), r.pe)
	default:
		r.inflight = nil
		r.pe = twinlog.PartitionEpoch(resp.GetPartitionEpoch())
		r.isr = r.isr[:0]
		for _, id := range resp.GetIsr() {
			r.isr = append(r.isr, twinlog.BrokerID(id))
		}
		r.recovery = resp.GetRecoveryState()
		r.event(EventISRChange, "committed %v (PE %d)", r.isr, r.pe)
	}
	r.reevaluate(nowMs)
}

// AbortAlterPartition tells the machine that the shell never sent the
// in-flight ISR change seq (no attempt can have reached the controller):
// like a definitive rejection, the maximal ISR goes back to the committed one.
func (r *Replica) AbortAlterPartition(seq uint64, nowMs int64) {
	if r.role != RoleLeader || r.inflight == nil || r.inflight.seq != seq {
		return
	}
	r.inflight = nil
	r.event(EventAlterRejected, "seq %d not sent: rollback to %v", seq, r.isr)
	r.reevaluate(nowMs)
}

// AlterPartitionPending reports whether seq is still the in-flight ISR change
// awaiting an answer (the shell retries it while this holds).
func (r *Replica) AlterPartitionPending(seq uint64) bool {
	return r.role == RoleLeader && r.inflight != nil && r.inflight.seq == seq
}

// definitiveAlterReject: the controller compared the request with the current
// partition epoch (§3.6 checks 1–5 passed) and refused it, so neither this
// attempt nor an earlier one of the same request was applied.
func definitiveAlterReject(c ErrorCode) bool {
	return c == pb.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA || c == errInvalidRequest
}

// refusedAtOwnEpochs reports whether a refusal names this leader, its LE and
// the partition epoch it applies (which the in-flight request carried: a
// newer one would have replaced the request): the controller compared the
// request with that very state and wrote nothing.
func (r *Replica) refusedAtOwnEpochs(resp *pb.AlterPartitionResponse) bool {
	return twinlog.BrokerID(resp.GetLeader()) == r.cfg.ID && twinlog.Epoch(resp.GetLeaderEpoch()) == r.le &&
		twinlog.PartitionEpoch(resp.GetPartitionEpoch()) == r.pe
}

// Tick advances time to nowMs: ISR shrink (SPEC §4.5) and produce timeouts
// (§4.1).
func (r *Replica) Tick(nowMs int64) {
	if r.role != RoleLeader {
		return
	}
	kept := r.pending[:0]
	for _, p := range r.pending {
		if nowMs >= p.deadline {
			r.rd.ProduceResults = append(r.rd.ProduceResults, ProduceResult{ID: p.id, Error: errTimedOut, BaseOffset: p.base})
			continue
		}
		kept = append(kept, p)
	}
	r.pending = kept
	if r.inflight != nil {
		return
	}
	var out []twinlog.BrokerID
	for _, id := range r.isr {
		if id == r.cfg.ID {
			continue
		}
		fs := r.followers[id]
		if fs == nil || nowMs-fs.lastCaughtUpMs > r.cfg.ReplicaLagTimeMaxMs {
			out = append(out, id)
		}
	}
	if len(out) > 0 {
		isr := slices.DeleteFunc(slices.Clone(r.isr), func(id twinlog.BrokerID) bool { return slices.Contains(out, id) })
		r.proposeISR(isr, r.recovery, "shrink")
	}
	r.reevaluate(nowMs)
}

// evaluatePending completes acks=all requests (SPEC §4.1).
func (r *Replica) evaluatePending() {
	if len(r.pending) == 0 {
		return
	}
	tooFew := len(r.maximalISR()) < r.effectiveMinISR()
	kept := r.pending[:0]
	for _, p := range r.pending {
		switch {
		case r.hw > p.last:
			r.rd.ProduceResults = append(r.rd.ProduceResults, ProduceResult{ID: p.id, Error: errNone, BaseOffset: p.base})
		case tooFew:
			r.rd.ProduceResults = append(r.rd.ProduceResults, ProduceResult{ID: p.id, Error: errNotEnoughAfter, BaseOffset: p.base})
		default:
			kept = append(kept, p)
		}
	}
	r.pending = kept
}

func (r *Replica) failPending(code ErrorCode) {
	for _, p := range r.pending {
		r.rd.ProduceResults = append(r.rd.ProduceResults, ProduceResult{ID: p.id, Error: code, BaseOffset: p.base})
	}
	r.pending = nil
}
