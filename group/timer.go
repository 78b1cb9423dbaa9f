package group

import "container/heap"

// timerKind is what a timer does when it fires; the keys mirror Kafka's
// timer keys (classicGroupHeartbeatKey, classicGroupJoinKey,
// classicGroupSyncKey, the group expiration key): scheduling a key again
// replaces its timer.
type timerKind uint8

const (
	// timerHeartbeat expires a member's session (or a new member's parked
	// join, or a pending member that never rejoined).
	timerHeartbeat timerKind = iota
	// timerJoin completes a rebalance's join phase: its timeout, or a step
	// of a new group's initial delay.
	timerJoin
	// timerSync removes members that did not send SyncGroup in time.
	timerSync
	// timerCleanup expires offsets and deletes empty groups.
	timerCleanup
)

type timerKey struct {
	kind   timerKind
	group  string
	member string
}

// timer is one scheduled timer with the arguments its action takes, as
// Kafka's scheduled closures capture them.
type timer struct {
	key        timerKey
	deadlineMs int64
	seq        uint64
	index      int
	// generation is a sync timer's generation.
	generation int32
	// initial marks a join timer of the initial rebalance, with the delay
	// it waited and the rebalance time remaining.
	initial           bool
	delayMs, remainMs int64
}

// timers is a keyed timer queue ordered by (deadline, scheduling order),
// so firing order is deterministic.
type timers struct {
	live map[timerKey]*timer
	q    timerHeap
	seq  uint64
}

func newTimers() timers { return timers{live: map[timerKey]*timer{}} }

// schedule sets key's timer at deadlineMs, replacing any, and returns it
// for its arguments to be set.
func (ts *timers) schedule(key timerKey, deadlineMs int64) *timer {
	ts.seq++
	if t := ts.live[key]; t != nil {
		*t = timer{key: key, deadlineMs: deadlineMs, seq: ts.seq, index: t.index}
		heap.Fix(&ts.q, t.index)
		return t
	}
	t := &timer{key: key, deadlineMs: deadlineMs, seq: ts.seq}
	ts.live[key] = t
	heap.Push(&ts.q, t)
	return t
}

func (ts *timers) cancel(key timerKey) {
	if t := ts.live[key]; t != nil {
		heap.Remove(&ts.q, t.index)
		delete(ts.live, key)
	}
}

// next is the earliest deadline, NoTick when none.
func (ts *timers) next() int64 {
	if len(ts.q) == 0 {
		return NoTick
	}
	return ts.q[0].deadlineMs
}

// popDue removes and returns the earliest timer due at nowMs, nil when
// none. Every action that schedules its own key again moves the deadline
// forward by at least a millisecond or stops (Tick's loop ends).
func (ts *timers) popDue(nowMs int64) *timer {
	if len(ts.q) == 0 || ts.q[0].deadlineMs > nowMs {
		return nil
	}
	t := heap.Pop(&ts.q).(*timer)
	delete(ts.live, t.key)
	return t
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].deadlineMs != h[j].deadlineMs {
		return h[i].deadlineMs < h[j].deadlineMs
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
