package runner

import (
	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/replica"
)

// Replica is the part of a partition's replica (*replica.Replica) the
// mirror flags read and set; the host holds its lock.
type Replica interface {
	Role() replica.Role
	LeaderEpoch() twinlog.Epoch
	Writable() bool
	SetMirrorPartition(bool)
	SetWritable(bool)
}

// BecomingLeader reports whether applying metadata st starts a leadership
// of broker self that the mirror runner did not cause: it was not leader,
// or st's LE is later than both its current LE and writableLE, the LE in
// which the runner made the partition writable (−1 never). A leader can
// move into a later LE without following in between (an unclean election
// it never saw as a follower, a reassignment, missed metadata); a STOPPED
// leadership's writability must not survive into it, since the machine's
// BecameLeader for the new LE starts read-only (SPEC §6.2a; simulator seed
// 191, TestKnownBugWritableAcrossLeaderEpochs). The runner's own bumps are
// not new leaderships: a stop bump's LE is the LE SetWritable carries.
func BecomingLeader(r Replica, st replica.PartitionState, self twinlog.BrokerID, writableLE twinlog.Epoch) bool {
	if st.Leader != self {
		return false
	}
	return r.Role() != replica.RoleLeader || st.LeaderEpoch > max(r.LeaderEpoch(), writableLE)
}

// ApplyMirrorFlags sets the replica's mirror hooks before a metadata
// change is applied, and returns whether the runner's writable flag
// stands: a partition in no mirror is a normal writable one; a mirror
// partition is read-only (SPEC §6.2a) and keeps its cache to record epochs
// (§6.2c) until its runner, as leader, has read a committed STOPPED record
// (writable) — taking leadership always starts read-only.
func ApplyMirrorFlags(r Replica, inMirror, becomingLeader, writable bool) bool {
	if !inMirror {
		r.SetMirrorPartition(false)
		if !r.Writable() {
			r.SetWritable(true)
		}
		return false
	}
	if becomingLeader || !writable {
		r.SetMirrorPartition(true)
		r.SetWritable(false)
		return false
	}
	return true
}
