package runner_test

import (
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/runner"
)

type flagReplica struct {
	role                    replica.Role
	le                      twinlog.Epoch
	writable, mirrorPartion bool
}

func (r *flagReplica) Role() replica.Role         { return r.role }
func (r *flagReplica) LeaderEpoch() twinlog.Epoch { return r.le }
func (r *flagReplica) Writable() bool             { return r.writable }
func (r *flagReplica) SetMirrorPartition(on bool) { r.mirrorPartion = on }
func (r *flagReplica) SetWritable(on bool)        { r.writable = on }

// TestBecomingLeader: a leadership the runner did not cause starts for a
// replica that was no leader, or that moves to an LE later than both its
// own and the one its runner made the partition writable in (seed 191);
// the runner's own stop bump does not.
func TestBecomingLeader(t *testing.T) {
	const self = 3
	st := func(leader twinlog.BrokerID, le twinlog.Epoch) replica.PartitionState {
		return replica.PartitionState{Leader: leader, LeaderEpoch: le}
	}
	for _, tc := range []struct {
		name       string
		r          flagReplica
		st         replica.PartitionState
		writableLE twinlog.Epoch
		want       bool
	}{
		{"another broker leads", flagReplica{role: replica.RoleLeader, le: 5}, st(2, 6), -1, false},
		{"follower elected", flagReplica{role: replica.RoleFollower, le: 5}, st(self, 6), -1, true},
		{"same LE", flagReplica{role: replica.RoleLeader, le: 6}, st(self, 6), -1, false},
		{"own stop bump", flagReplica{role: replica.RoleLeader, le: 6}, st(self, 7), 7, false},
		{"later LE it never saw (seed 191)", flagReplica{role: replica.RoleLeader, le: 6}, st(self, 11), 6, true},
	} {
		if got := runner.BecomingLeader(&tc.r, tc.st, self, tc.writableLE); got != tc.want {
			t.Errorf("%s: BecomingLeader = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// TestApplyMirrorFlags: no mirror, a normal writable partition; in a
// mirror, read-only unless the runner made it writable and no new
// leadership starts.
func TestApplyMirrorFlags(t *testing.T) {
	r := &flagReplica{}
	if runner.ApplyMirrorFlags(r, false, false, true) || !r.writable || r.mirrorPartion {
		t.Fatalf("no mirror: %+v", r)
	}
	if runner.ApplyMirrorFlags(r, true, false, false) || r.writable || !r.mirrorPartion {
		t.Fatalf("mirror, read-only: %+v", r)
	}
	r = &flagReplica{writable: true}
	if !runner.ApplyMirrorFlags(r, true, false, true) || !r.writable {
		t.Fatalf("stopped mirror partition, same leadership: %+v", r)
	}
	if runner.ApplyMirrorFlags(r, true, true, true) || r.writable || !r.mirrorPartion {
		t.Fatalf("a new leadership starts read-only: %+v", r)
	}
}
