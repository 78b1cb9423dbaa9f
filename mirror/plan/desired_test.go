package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestDesiredChange: the events a shell steps for a change of the desired
// state, given the machine's state (both shells call DesiredChange).
func TestDesiredChange(t *testing.T) {
	d := func(s twinlogv1.MirrorState, gen int64) Desired {
		return Desired{State: s, Generation: gen, SourceClusterID: "a"}
	}
	start := func(gen int64) Event { return Start{Generation: gen, SourceClusterID: "a"} }
	for _, tc := range []struct {
		name     string
		old, new Desired
		st       twinlogv1.MirrorState
		want     []Event
	}{
		{"first start", Desired{}, d(Mirroring, 1), NotStarted, []Event{start(1)}},
		{"new generation", d(Mirroring, 1), d(Mirroring, 2), Mirroring, []Event{start(2)}},
		{"restart after STOPPED", d(Stopped, 1), d(Mirroring, 1), Stopped, []Event{start(1)}},
		{"resume", d(Paused, 1), d(Mirroring, 1), Paused, []Event{Resume{}}},
		{"resume a deferred pause", d(Paused, 1), d(Mirroring, 1), Pending, []Event{Resume{}}},
		{"new leadership of a running mirror", d(Mirroring, 1), d(Mirroring, 1), NotStarted, []Event{start(1)}},
		{"unchanged, running", d(Mirroring, 1), d(Mirroring, 1), Mirroring, nil},
		{"pause while mirroring", d(Mirroring, 1), d(Paused, 1), Mirroring, []Event{Pause{}}},
		{"pause while pending (kept as desired)", d(Mirroring, 1), d(Paused, 1), Pending, []Event{Pause{}}},
		{"pause while truncating", d(Mirroring, 1), d(Paused, 1), Truncating, []Event{Pause{}}},
		{"started and paused since the last look", d(Stopped, 1), d(Paused, 2), Stopped, []Event{start(2), Pause{}}},
		{"unchanged, paused", d(Paused, 1), d(Paused, 1), Paused, nil},
		{"stop", d(Mirroring, 1), d(Stopped, 1), Mirroring, []Event{Stop{}}},
		{"stop from FAILED", d(Mirroring, 1), d(Stopped, 1), Failed, []Event{Stop{}}},
		{"stop already stopping", d(Mirroring, 1), d(Stopped, 1), Stopping, nil},
		{"stop already stopped", d(Stopped, 1), d(Stopped, 1), Stopped, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DesiredChange(tc.old, tc.new, tc.st)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DesiredChange(%v -> %v, %v) (-want +got):\n%s", tc.old.State, tc.new.State, tc.st, diff)
			}
		})
	}
}

// TestReplicaStatusEqual: the shells re-send ReplicaStatusChanged only when
// the view changed, so every field counts, a follower's aligned epoch 0
// included (one shell's copy once read a missing follower as epoch 0).
func TestReplicaStatusEqual(t *testing.T) {
	base := func() ReplicaStatus {
		return ReplicaStatus{
			Replicas: []twinlog.BrokerID{1, 2, 3}, ISR: []twinlog.BrokerID{1, 2},
			FollowerAlignedEpoch: map[twinlog.BrokerID]twinlog.Epoch{2: 0}, MinInsyncReplicas: 2,
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*ReplicaStatus)
		want   bool
	}{
		{"same", func(*ReplicaStatus) {}, true},
		{"ISR", func(s *ReplicaStatus) { s.ISR = []twinlog.BrokerID{1} }, false},
		{"replicas", func(s *ReplicaStatus) { s.Replicas = []twinlog.BrokerID{1, 2, 4} }, false},
		{"maximal ISR", func(s *ReplicaStatus) { s.MaximalISR = []twinlog.BrokerID{1, 2, 3} }, false},
		{"min ISR", func(s *ReplicaStatus) { s.MinInsyncReplicas = 3 }, false},
		{"unclean support", func(s *ReplicaStatus) { s.SupportUncleanLeaderElection = true }, false},
		{"aligned epoch", func(s *ReplicaStatus) { s.FollowerAlignedEpoch[2] = 1 }, false},
		{"other follower aligned at 0", func(s *ReplicaStatus) {
			s.FollowerAlignedEpoch = map[twinlog.BrokerID]twinlog.Epoch{3: 0}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.change(&b)
			if got := a.Equal(b); got != tc.want {
				t.Errorf("Equal = %t, want %t", got, tc.want)
			}
		})
	}
}
