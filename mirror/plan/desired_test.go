package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

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
