package runner

import (
	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
)

// The rules a runner applies around its machine's leaderships, whatever
// hosts it.

// Leadership is what a runner knows of its machine's leadership.
type Leadership struct {
	// Leading: the machine was told BecameLeader and not LostLeadership
	// since.
	Leading bool
	// KnownLE is the LE the machine knows: the BecameLeader's, or a
	// BumpDone's.
	KnownLE twinlog.Epoch
	// Bumps counts BumpLeaderEpoch RPCs in flight, whose answers raise
	// the LE without a new leadership.
	Bumps int
}

// Observe decides from a reading of the partition (this broker leads it
// and may act on it, in LE le) how the machine's leadership changes: end,
// the current one ends (LostLeadership; the fetcher stops); begin, a new
// one begins once the host has loaded the partition's __mirror_state
// records (BecameLeader).
//
// A leadership the machine did not cause ends before the records load: the
// partition was led in between by another broker, or elected again in an
// LE this broker never saw as a follower, and no bump of the machine's own
// is in flight. Its late outcomes (a write acknowledged, a stop done and
// its SetWritable) must not act in le, and loading may fail and be retried
// for many ticks (simulator seed 1417630).
func (l Leadership) Observe(leading bool, le twinlog.Epoch) (end, begin bool) {
	if !leading {
		return l.Leading, false
	}
	end = l.Leading && le > l.KnownLE && l.Bumps == 0
	return end, !l.Leading || end
}

// TaintsReplica is the part of the partition's replica that holds
// follower fetches until the leadership's taints are loaded.
type TaintsReplica interface {
	Role() replica.Role
	LeaderEpoch() twinlog.Epoch
	TaintsPending() bool
}

// TaintsSettled reports whether the replica, taints-pending since it became
// leader in a new LE, may now serve follower fetches (SPEC §6.4): this
// leadership stepped BecameLeader and leads in an LE the runner knows (not
// a later one it has yet to load, nor one the machine refused as stale)
// and owns the state it loaded (plan.Machine.StateOwned: the LMLE record,
// which a zombie's late write could still change, and the first run
// record, without which a follower could count as aligned with a run this
// leader never joined; seeds 1416997, 1709687, 1901841). m is nil before
// the runner has a machine.
func (l Leadership) TaintsSettled(m *plan.Machine, r TaintsReplica) bool {
	return m != nil && l.Leading && m.Leading() && m.StateOwned() &&
		r.Role() == replica.RoleLeader && r.TaintsPending() && r.LeaderEpoch() <= l.KnownLE
}

// Sent counts a BumpLeaderEpoch the host sends for the machine.
func (l *Leadership) Sent() { l.Bumps++ }

// Note takes in an event the host hands the machine: a bump's answer
// (BumpDone or BumpFailed) is no longer in flight, and BumpDone's LE is
// the machine's own.
func (l *Leadership) Note(ev plan.Event) {
	switch ev := ev.(type) {
	case plan.BumpDone:
		l.Bumps--
		l.KnownLE = max(l.KnownLE, ev.LeaderEpoch)
	case plan.BumpFailed:
		l.Bumps--
	}
}

// BumpOutcome is a bump's result once the controller answered it with LE
// want and the local replica runs in LE le (leader reporting whether it
// leads): BumpDone when it leads in want, so that the truncation that
// follows is made in that LE; BumpFailed NOT_LEADER_OR_FOLLOWER when the
// partition moved past want or to another leader (the machine hears the
// rest from the next observation); nothing yet (done false) while le is
// below want.
func BumpOutcome(seq uint64, want, le twinlog.Epoch, leader bool) (ev plan.Event, done bool) {
	switch {
	case le < want:
		return nil, false
	case !leader || le > want:
		return plan.BumpFailed{Seq: seq, Error: pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER}, true
	}
	return plan.BumpDone{Seq: seq, LeaderEpoch: want}, true
}

// TaintsOf is the replica's form of the taints an LMLE record holds (SPEC
// §6.4): a new leadership installs exactly these (replica.ResetTaints).
func TaintsOf(lmle *pb.MirrorLmleRecord) map[twinlog.BrokerID]replica.Taint {
	out := make(map[twinlog.BrokerID]replica.Taint, len(lmle.GetTaints()))
	for _, t := range lmle.GetTaints() {
		out[twinlog.BrokerID(t.GetReplica())] = replica.Taint{Epoch: twinlog.Epoch(t.GetEpoch()), Offset: twinlog.Offset(t.GetOffset())}
	}
	return out
}
