package controller

import (
	"math"
	"testing"
	"time"
)

// TestUntilMsSaturates: the time left of a recovery round whose deadline
// metastate saturated at MaxInt64 (a huge unclean.recovery.timeout.ms) is
// practically unlimited; (deadline - now) * time.Millisecond wrapped it to
// a negative or arbitrary duration.
func TestUntilMsSaturates(t *testing.T) {
	const now = 1_700_000_000_000
	for _, tc := range []struct {
		deadline, now int64
		want          time.Duration
	}{
		{math.MaxInt64, now, math.MaxInt64},
		{now + 9_300_000_000_000, now, math.MaxInt64}, // more ms than a Duration holds
		{now + 1500, now, 1500 * time.Millisecond},
		{now - 20, now, -20 * time.Millisecond},
		{math.MinInt64, now, math.MinInt64},
		{math.MaxInt64, -5, math.MaxInt64},
	} {
		if got := untilMs(tc.deadline, tc.now); got != tc.want {
			t.Errorf("untilMs(%d, %d) = %v, want %v", tc.deadline, tc.now, got, tc.want)
		}
	}
}
