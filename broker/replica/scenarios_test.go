package replica

import (
	"testing"

	"github.com/twinlog/twinlog"
)

// TestS4Divergence asserts SPEC §9 S4 (a)–(d): the leader's DivergingEpoch
// and the follower's truncation offset.
func TestS4Divergence(t *testing.T) {
	for _, tc := range []struct {
		name, leader, follower string
		le                     twinlog.Epoch
		wantDiv                *EpochEndOffset
		wantLEO                twinlog.Offset // follower LEO after the first answer
	}{
		{"a", "0-4@1,5-6@2", "0-2@1", 2, nil, 7},
		{"b", "0-1@1,2-5@2", "0-3@1", 2, &EpochEndOffset{1, 2}, 2},
		{"c", "0-1@1,2-4@3", "0@1,1-3@2", 3, &EpochEndOffset{1, 2}, 1},
		{"d", "0-4@1,5-6@3", "0-2@2", 3, &EpochEndOffset{1, 5}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(1000)
			e.quiet = true
			e.addNode(1, parseLog(t, tc.leader), 0)
			e.addNode(2, parseLog(t, tc.follower), 0)
			e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2}, []twinlog.BrokerID{1, 2}, 1, tc.le, 1
			e.push(e.ids())
			ft, _ := e.nodes[2].r.NextFetch()
			d := e.nodes[1].r.HandleFollowerFetch(ft.Request, e.now)
			e.processReady(e.nodes[1])
			if (d.DivergingEpoch == nil) != (tc.wantDiv == nil) || (d.DivergingEpoch != nil && *d.DivergingEpoch != *tc.wantDiv) {
				t.Fatalf("diverging = %v, want %v", d.DivergingEpoch, tc.wantDiv)
			}
			if tc.wantDiv != nil && e.nodes[1].r.followers[2].fetchedInLE {
				t.Fatalf("follower state touched on divergence")
			}
			// That answer is lost; the follower sends the fetch again,
			// numbered anew (the leader refuses a Seq it has evaluated).
			ft, _ = e.nodes[2].r.NextFetch()
			e.deliverFetch(queuedFetch{from: 2, target: ft})
			if got := e.nodes[2].r.LogEndOffset(); got != tc.wantLEO {
				t.Fatalf("follower LEO = %d, want %d", got, tc.wantLEO)
			}
		})
	}
}

// TestS1LaggingReplica asserts SPEC §9 S1 (KAFKA-7128).
func TestS1LaggingReplica(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.ctl.m = 1
	e.addNode(2, parseLog(t, "0-9@1"), 5)
	e.addNode(3, parseLog(t, ""), 0)
	e.addNode(4, parseLog(t, "0-9@1"), 5)
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2, 3, 4}, []twinlog.BrokerID{2, 4}, 2, 2, 2
	e.push(e.ids())
	l := e.nodes[2].r
	if l.LeaderEpochStartOffset() != 10 || l.HighWatermark() != 5 {
		t.Fatalf("LESO %d HW %d, want 10, 5", l.LeaderEpochStartOffset(), l.HighWatermark())
	}
	e.sendFetch(3, 5)
	e.deliverFetch(e.fetchQ[0])
	e.fetchQ = nil
	e.sendFetch(3, 1) // reports LEO 5
	e.deliverFetch(e.fetchQ[0])
	e.fetchQ = nil
	if l.AlterPartitionInFlight() {
		t.Fatalf("r3 proposed at LEO 5 < LESO 10")
	}
	e.sendFetch(4, 0)
	e.deliverFetch(e.fetchQ[0])
	e.fetchQ = nil
	if l.HighWatermark() != 10 {
		t.Fatalf("HW %d after r4 fetched, want 10", l.HighWatermark())
	}
	for range 2 {
		e.sendFetch(3, 0)
		e.deliverFetch(e.fetchQ[0])
		e.fetchQ = nil
	}
	if got := l.MaximalISR(); len(got) != 3 {
		t.Fatalf("maximal ISR %v, want r3 added", got)
	}
}

// TestS13AcksAll asserts the acks=all outcomes of SPEC §9 S13.
func TestS13AcksAll(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.ctl.m = 2
	for _, id := range []twinlog.BrokerID{1, 2, 3} {
		e.addNode(id, &memLog{}, 0)
	}
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2, 3}, []twinlog.BrokerID{1, 2, 3}, 1, 1, 1
	e.push(e.ids())
	l := e.nodes[1]
	l.r.Propose(Proposal{ID: 1, Acks: AcksAll, TimeoutMs: 100, NumRecords: 1}, e.now)
	e.processReady(l)
	e.ctl.isr, e.ctl.pe = []twinlog.BrokerID{1, 3}, 2
	e.push(e.ids())
	if _, done := e.results[1]; done {
		t.Fatalf("completed with ISR {1,3}: %v", e.results[1])
	}
	e.ctl.isr, e.ctl.pe = []twinlog.BrokerID{1}, 3
	e.push(e.ids())
	if got := e.results[1].Error; got != errNotEnoughAfter {
		t.Fatalf("got %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", got)
	}
	if d := l.r.Propose(Proposal{ID: 2, Acks: AcksAll, NumRecords: 1}, e.now); d.Error != errNotEnough || l.r.LogEndOffset() != 1 {
		t.Fatalf("acks=all with ISR {1}: %v LEO %d", d.Error, l.r.LogEndOffset())
	}
}

// TestProposeDuplicate: a retried batch the leader holds is answered with
// its original offsets without an append: acks=1 at once, acks=all once
// the HW passes it (at once if it has); a range the log does not hold is
// refused, and so is a duplicate on a follower.
func TestProposeDuplicate(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	for _, id := range []twinlog.BrokerID{1, 2} {
		e.addNode(id, &memLog{}, 0)
	}
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2}, []twinlog.BrokerID{1, 2}, 1, 1, 1
	e.push(e.ids())
	l := e.nodes[1]
	l.r.Propose(Proposal{ID: 1, Acks: AcksAll, TimeoutMs: 1000, NumRecords: 3}, e.now)
	e.processReady(l)
	// The retry before the follower has it: pending, nothing appended.
	if d := l.r.ProposeDuplicate(Proposal{ID: 2, Acks: AcksAll, TimeoutMs: 1000, NumRecords: 3}, 0, 2, e.now); d.Error != errNone || d.BaseOffset != 0 || l.r.LogEndOffset() != 3 {
		t.Fatalf("duplicate: %+v, LEO %d", d, l.r.LogEndOffset())
	}
	e.processReady(l)
	if _, done := e.results[2]; done {
		t.Fatalf("acks=all duplicate answered below the HW: %v", e.results[2])
	}
	if d := l.r.ProposeDuplicate(Proposal{ID: 3, Acks: AcksLeader, NumRecords: 3}, 0, 2, e.now); d.Error != errNone {
		t.Fatalf("acks=1 duplicate: %+v", d)
	}
	e.processReady(l)
	if r, done := e.results[3]; !done || r.Error != errNone || r.BaseOffset != 0 {
		t.Fatalf("acks=1 duplicate result %+v (done %v)", r, done)
	}
	for e.sendFetch(2, 0) {
		e.deliverFetch(e.fetchQ[0])
		e.fetchQ = e.fetchQ[1:]
		if l.r.HighWatermark() == 3 {
			break
		}
	}
	for _, id := range []ProposalID{1, 2} {
		if r, done := e.results[id]; !done || r.Error != errNone || r.BaseOffset != 0 {
			t.Fatalf("proposal %d after the HW passed: %+v (done %v), HW %d", id, r, done, l.r.HighWatermark())
		}
	}
	if d := l.r.ProposeDuplicate(Proposal{ID: 4, Acks: AcksAll, NumRecords: 3}, 0, 2, e.now); d.Error != errNone {
		t.Fatalf("duplicate below the HW: %+v", d)
	}
	e.processReady(l)
	if r, done := e.results[4]; !done || r.Error != errNone {
		t.Fatalf("acks=all duplicate below the HW not answered at once: %+v", r)
	}
	if d := l.r.ProposeDuplicate(Proposal{ID: 5, Acks: AcksAll, NumRecords: 3}, 2, 4, e.now); d.Error != errInvalidRequest {
		t.Fatalf("duplicate past the LEO: %+v", d)
	}
	if d := e.nodes[2].r.ProposeDuplicate(Proposal{ID: 6, Acks: AcksAll, NumRecords: 3}, 0, 2, e.now); d.Error != errNotLeader {
		t.Fatalf("duplicate on a follower: %+v", d)
	}
}
