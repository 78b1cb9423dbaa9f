package replica

import (
	"fmt"
	"slices"

	"github.com/twinlog/twinlog"
)

// Mirror hooks (SPEC §6), driven by the mirror shell on D's leader.

// SetMirrorPartition marks the partition as a mirror partition (not
// STOPPED): its leader never assigns its own LE to the cache (§6.2c). Set it
// before the ApplyPartitionState that makes this replica leader. Turning it
// off on a leader makes the partition a normal one: the cache gets (LE, LEO)
// (SPEC §6.7 step 5), so new records carry LE.
func (r *Replica) SetMirrorPartition(mirror bool) {
	if r.mirror && !mirror && r.role == RoleLeader {
		r.assign(r.le, r.leo)
	}
	r.mirror = mirror
}

// SetWritable sets whether Produce is accepted (SPEC §1.2 "writable").
// Turning it off fails pending acks=all requests with READ_ONLY_TOPIC (§6.6).
func (r *Replica) SetWritable(w bool) {
	if r.writable && !w {
		r.failPending(errReadOnly)
	}
	r.writable = w
}

// Writable reports whether Produce is accepted.
func (r *Replica) Writable() bool { return r.writable }

// SetTaint records a taint for replica id (§6.6 step 4); the leader answers
// it per §4.3 step 4 and never adds it to the ISR until a fetch clears it
// and the shell confirms the cleared taint is durable (ConfirmTaintCleared).
// It replaces a clearing not yet confirmed.
func (r *Replica) SetTaint(id twinlog.BrokerID, t Taint) {
	delete(r.clearing, id)
	r.taints[id] = t
}

// AddRunTaints installs the taints of a mirror run entering MIRRORING (SPEC
// §6.6 step 4) unless one of them names a member of the maximal ISR: the
// committed ISR, or an addition of the AlterPartition in flight, which the
// controller may already have committed (§3.6) — taints only keep a
// replica out of the ISR from now on (§4.5), and a tainted ISR member is
// what §8.19 forbids. It then installs none and returns those members (the
// machine computed the taints from an older view and checks again).
func (r *Replica) AddRunTaints(ts map[twinlog.BrokerID]Taint) (refused []twinlog.BrokerID) {
	isr := r.maximalISR()
	for id := range ts {
		if slices.Contains(isr, id) {
			refused = append(refused, id)
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		r.event(EventIgnored, "run taints of %v refused: in the maximal ISR %v", refused, isr)
		return refused
	}
	for id, t := range ts {
		r.SetTaint(id, t)
	}
	return nil
}

// ResetTaints replaces the taint set with ts, the partition's durable
// taints: what a new leadership loaded from __mirror_state (SPEC §6.4
// "Leaders of once-mirrored topics load the taints before serving follower
// fetches"). Every leader answers per the durable taints (§6.6 step 4), so
// an in-memory taint the record no longer holds must go: another leader
// may have cleared it durably meanwhile, and keeping it would cut an ISR
// member below the HW (§8.7). Each replica whose cleared taint awaits
// ConfirmTaintCleared is settled by the record too: tainted again if ts
// holds it (the follower repairs it again), else durably clear, and it may
// join the ISR.
func (r *Replica) ResetTaints(ts map[twinlog.BrokerID]Taint, nowMs int64) {
	r.taints = make(map[twinlog.BrokerID]Taint, len(ts))
	for id, t := range ts {
		r.taints[id] = t
	}
	cleared := r.TaintsClearing()
	clear(r.clearing)
	for _, id := range cleared {
		if _, tainted := r.taints[id]; tainted {
			continue
		}
		r.event(EventTaintCleared, "replica %d (durable in the loaded state)", id)
		if fs := r.followers[id]; r.role == RoleLeader && fs != nil {
			r.maybeExpandISR(id, fs)
		}
	}
	r.reevaluate(nowMs)
}

// SetTaintsPending sets whether this leader still has to load the
// partition's durable taints (SPEC §6.4 "Leaders of once-mirrored topics
// load the taints before serving follower fetches"). The shell sets it in
// the same critical section as the ApplyPartitionState that makes this
// replica leader in a new LE of a mirrored or once-mirrored topic, and
// clears it once the taints (possibly none) are installed with SetTaint.
// While it is set, FOLLOWER fetches are answered UNKNOWN_LEADER_EPOCH (as in
// a bumped LE not yet truncated, §4.3 step 2: the follower backs off and
// refetches, never truncates) and change nothing: no follower LEO, caught-up
// time, taint repair, HW or ISR change. CONSUMER and MIRROR fetches are
// unaffected. A leader that cannot read __mirror_state stays pending: its
// followers cannot rejoin the ISR, the availability cost §6.4 implies. It
// only matters on a leader; losing leadership clears it.
func (r *Replica) SetTaintsPending(pending bool) {
	if pending && r.role != RoleLeader {
		return
	}
	if r.taintsPending != pending {
		r.event(EventTaintsPending, "%t at LE %d", pending, r.le)
	}
	r.taintsPending = pending
}

// TaintsPending reports whether follower fetches wait for the taints.
func (r *Replica) TaintsPending() bool { return r.taintsPending }

// repairTaint: a fetch by follower id was answered NONE without
// DivergingEpoch (its log is a prefix of ours), so its taint is repaired
// (§6.6 step 4). The taint stops shaping fetch answers at once, but the
// follower stays out of the ISR until the shell has written the cleared
// taint to __mirror_state (acks=all) and called ConfirmTaintCleared: a
// leader change before that write would otherwise leave an ISR member the
// durable state still calls tainted.
func (r *Replica) repairTaint(id twinlog.BrokerID) {
	if _, ok := r.taints[id]; !ok {
		return
	}
	delete(r.taints, id)
	r.clearing[id] = true
	r.rd.TaintsCleared = append(r.rd.TaintsCleared, id)
	r.event(EventTaintCleared, "replica %d (awaiting durable clear)", id)
}

// taintBlocksISR: id may not join the ISR (SPEC §4.5, §6.6 step 4).
func (r *Replica) taintBlocksISR(id twinlog.BrokerID) bool {
	_, tainted := r.taints[id]
	return tainted || r.clearing[id]
}

// ConfirmTaintCleared tells the leader that the cleared taint of id is
// durable in __mirror_state: the follower may now join the ISR (§4.5).
func (r *Replica) ConfirmTaintCleared(id twinlog.BrokerID, nowMs int64) {
	if !r.clearing[id] {
		return
	}
	delete(r.clearing, id)
	r.event(EventTaintCleared, "replica %d (durable)", id)
	if fs := r.followers[id]; r.role == RoleLeader && fs != nil {
		r.maybeExpandISR(id, fs)
	}
	r.reevaluate(nowMs)
}

// TaintsClearing returns the replicas whose cleared taint awaits
// ConfirmTaintCleared.
func (r *Replica) TaintsClearing() []twinlog.BrokerID {
	out := make([]twinlog.BrokerID, 0, len(r.clearing))
	for id := range r.clearing {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Taints returns the current taints.
func (r *Replica) Taints() map[twinlog.BrokerID]Taint {
	out := make(map[twinlog.BrokerID]Taint, len(r.taints))
	for k, v := range r.taints {
		out[k] = v
	}
	return out
}

// FollowerAlignedEpoch is the LE in which this leader last answered follower
// id NONE without DivergingEpoch (§6.6 step 3), −1 none.
func (r *Replica) FollowerAlignedEpoch(id twinlog.BrokerID) twinlog.Epoch {
	if fs := r.followers[id]; fs != nil {
		return fs.alignedEpoch
	}
	return twinlog.NoEpoch
}

// SetAlignedEpoch records this replica's own aligned epoch (the leader after
// its §6.6 step-2 truncation); Ready.AlignedEpoch asks the shell to persist it.
func (r *Replica) SetAlignedEpoch(e twinlog.Epoch) { r.setAlignedEpoch(e) }

// TruncateAsLeader truncates the leader's log to o after a BumpLeaderEpoch
// with truncation offset o (§6.2f, §6.3, §6.6 step 2): o within [logStart,
// LEO] cuts the log; otherwise the log restarts empty at o. Then HW = min(HW,
// o), LESO = LEO, followers re-validate as on a new LE, and fetches in this
// LE stop getting UNKNOWN_LEADER_EPOCH. Pending acks=all requests whose
// records were cut fail with NOT_LEADER_OR_FOLLOWER.
func (r *Replica) TruncateAsLeader(o twinlog.Offset, nowMs int64) error {
	return r.truncateAsLeader(o, false, nowMs)
}

// TruncateFullyAsLeader is TruncateAsLeader for a full truncation (§6.3
// OFFSET_OUT_OF_RANGE, §6.6 step 2 with LMLE −1): the whole log goes and it
// restarts empty at o (the source's log start) even when o lies inside
// [logStart, LEO], where a cut would keep the records below o.
func (r *Replica) TruncateFullyAsLeader(o twinlog.Offset, nowMs int64) error {
	return r.truncateAsLeader(o, true, nowMs)
}

func (r *Replica) truncateAsLeader(o twinlog.Offset, full bool, nowMs int64) error {
	if r.role != RoleLeader {
		return fmt.Errorf("truncate to %d: %w", o, ErrNotLeader)
	}
	if o < 0 {
		return fmt.Errorf("truncate to %d: %w", o, ErrInvalidBatch)
	}
	if full {
		r.restartLog(o, CauseAsLeader, "as leader, full")
	} else {
		// At the LEO nothing is cut but an epoch without records may go
		// (an LMLE truncation at the LEO, §6.2c): truncateLog emits
		// OpTruncate(LEO) whenever it trims the cache there, so the shell's
		// Log.TruncateTo(LEO) drops the entry from the checkpoint too
		// (§8.10), even when no entry remains for the shell to re-assign.
		r.truncateLog(o, CauseAsLeader, "as leader")
	}
	r.hwFloor = r.hw
	r.truncatedInLE = true
	r.hwCheckedLE = max(r.hwCheckedLE, r.le)
	r.leso = r.leo
	for id, fs := range r.followers {
		r.resetFollower(id, fs, nowMs)
	}
	r.failPendingFrom(r.leo)
	r.reevaluate(nowMs)
	return nil
}

// LatestEpoch is the latest cached epoch (−1 none): a mirror leader's
// fetched batches may not go below it (plan.FetchedBatches).
func (r *Replica) LatestEpoch() twinlog.Epoch { return r.cache.Latest() }

// AppendAsMirrorLeader records batches the mirror fetcher copied from the
// source (§6.2b–d): source offsets and epochs, gaps allowed. A batch below
// LEO, with an epoch above LE (it must wait for BumpLeaderEpoch), or with
// an epoch below the latest cached epoch or an earlier batch's (the log's
// epochs would go back, which storage refuses; the shell must report
// plan.FetchForeignEpoch instead, SPEC §6.8) is rejected with nothing
// changed.
func (r *Replica) AppendAsMirrorLeader(batches []BatchMeta, nowMs int64) error {
	if r.role != RoleLeader {
		return ErrNotLeader
	}
	if r.truncationUnconfirmed {
		return ErrTruncationUnconfirmed
	}
	next, floor := r.leo, max(r.cache.Latest(), 0)
	for _, b := range batches {
		if b.BaseOffset < next || b.LastOffset < b.BaseOffset || b.Epoch < floor || b.Epoch > r.le {
			return fmt.Errorf("%w: %v at LEO %d, LE %d, latest epoch %d", ErrInvalidBatch, b, next, r.le, floor)
		}
		next, floor = b.LastOffset+1, b.Epoch
	}
	if len(batches) == 0 {
		return nil
	}
	for _, b := range batches {
		r.assign(b.Epoch, b.BaseOffset)
	}
	r.rd.LogOps = append(r.rd.LogOps, LogOp{Kind: OpAppend, Batches: append([]BatchMeta(nil), batches...)})
	r.leo = next
	r.reevaluate(nowMs)
	return nil
}
