package replica

import (
	"fmt"
	"slices"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/epoch"
)

// CheckInvariants panics if a local data-plane invariant (SPEC §8 7–13, the
// parts one replica can see) does not hold. The simulator calls it after
// every step.
func (r *Replica) CheckInvariants() {
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("replica %d %v: invariant: %s", r.cfg.ID, r.cfg.Partition, fmt.Sprintf(format, args...)))
	}
	if !(r.logStart <= r.hw && r.hw <= r.leo) {
		fail("logStart %d ≤ HW %d ≤ LEO %d", r.logStart, r.hw, r.leo)
	}
	entries := r.cache.Entries()
	for i, e := range entries {
		if e.StartOffset > r.leo {
			fail("cache entry %v beyond LEO %d", e, r.leo)
		}
		if i == 0 && e.StartOffset < r.logStart {
			fail("cache entry %v below log start %d", e, r.logStart)
		}
	}
	if r.role == RoleLeader {
		if r.hw < r.hwFloor {
			fail("leader HW %d fell below %d", r.hw, r.hwFloor)
		}
		// SPEC §8.10 "(LE, LESO)": the entry for LE starts at LESO, or
		// earlier when the log already held LE records on entering it.
		if !r.mirror && !r.truncatedInLE && !slices.ContainsFunc(entries, func(e epoch.Entry) bool {
			return e.Epoch == r.le && e.StartOffset <= r.leso
		}) {
			fail("non-mirror leader cache %v lacks (LE %d, LESO %d)", entries, r.le, r.leso)
		}
		if r.leso > r.leo {
			fail("LESO %d > LEO %d", r.leso, r.leo)
		}
		for _, p := range r.pending {
			if p.last < r.hw {
				fail("acks=all %d below HW %d still pending", p.id, r.hw)
			}
		}
		if r.inflight != nil && !slices.Contains(r.inflight.isr, r.cfg.ID) {
			fail("proposed ISR %v without the leader", r.inflight.isr)
		}
	}
	if l := r.cache.Latest(); l != twinlog.NoEpoch && r.le != twinlog.NoEpoch && l > r.le && r.role == RoleLeader {
		fail("cache epoch %d above LE %d", l, r.le)
	}
}
