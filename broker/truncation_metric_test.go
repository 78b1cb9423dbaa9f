package broker

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/twinlog/twinlog/broker/replica"
)

type truncationRecorder struct {
	nopObserver
	reasons []string
}

func (o *truncationRecorder) ObserveTruncation(reason string) { o.reasons = append(o.reasons, reason) }

// TestTruncationMetricReason: the metric's reason comes from the event's
// cause. A mirror leader's cut (as leader) is left to its runner, which
// counts it with the plan's reason (lmle, divergence, out_of_range); read
// from the event's text it was counted a second time, as a divergence.
func TestTruncationMetricReason(t *testing.T) {
	rec := &truncationRecorder{}
	p := &partition{b: &Broker{obs: rec}, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, c := range []replica.TruncationCause{replica.CauseDivergence, replica.CauseOutOfRange, replica.CauseAsLeader, replica.CauseAddedBack} {
		p.logEvent(replica.Event{Type: replica.EventTruncation, Cause: c, Detail: "10 -> 7 (as leader, mirror lmle)"})
	}
	if want := []string{"divergence", "out_of_range", "added_back"}; !slices.Equal(rec.reasons, want) {
		t.Fatalf("reasons %v, want %v", rec.reasons, want)
	}
}
