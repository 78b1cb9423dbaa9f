package plan_test

import (
	"testing"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

func newMachine(t *testing.T) (*plan.Machine, *plog) {
	t.Helper()
	l := newLog()
	m, err := plan.New(plan.Config{BrokerID: 1, Mirror: "m", TopicPartition: twinlog.TopicPartition{Topic: "t"}, TopicID: topicID},
		plan.Deps{Log: l, Rand: zeroRand{}})
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

func stepOK(t *testing.T, m *plan.Machine, ev plan.Event) []plan.Action {
	t.Helper()
	if err := m.Step(ev); err != nil {
		t.Fatalf("step %T: %v", ev, err)
	}
	as := m.Ready().Actions
	m.Advance()
	return as
}

// ackWrites acknowledges every state-record write in as.
func ackWrites(t *testing.T, m *plan.Machine, as []plan.Action) []plan.Action {
	t.Helper()
	var out []plan.Action
	for _, a := range as {
		switch a := a.(type) {
		case plan.WriteRunRecord:
			out = append(out, stepOK(t, m, plan.WriteAcked{Seq: a.Seq})...)
		case plan.WriteLmleRecord:
			out = append(out, stepOK(t, m, plan.WriteAcked{Seq: a.Seq})...)
		}
	}
	return out
}

func findBump(as []plan.Action) (plan.BumpLeaderEpoch, bool) {
	for _, a := range as {
		if b, ok := a.(plan.BumpLeaderEpoch); ok {
			return b, true
		}
	}
	return plan.BumpLeaderEpoch{}, false
}

// Bug 4 (sim seed 104): a zombie leader in LE 0 loads a run record written
// in LE 4 with truncation epoch 2. It must not panic, nor write, fetch or
// accept produces; a later, real leadership proceeds normally.
func TestBecameLeaderWithNewerRecordIsIgnored(t *testing.T) {
	desired := plan.Desired{State: plan.Mirroring, Generation: 1}
	for _, tc := range []struct {
		name string
		run  *twinlogv1.MirrorRunRecord
		lmle *twinlogv1.MirrorLmleRecord
	}{
		{"run truncation and state epoch", &twinlogv1.MirrorRunRecord{State: plan.Mirroring, Generation: 1, LmleUsed: -1, TruncationEpoch: 2, StateEpoch: 4, LmleRecorded: -1}, nil},
		{"run state epoch", &twinlogv1.MirrorRunRecord{State: plan.Pending, Generation: 1, LmleUsed: -1, TruncationEpoch: -1, StateEpoch: 3, LmleRecorded: -1}, nil},
		{"lmle state epoch", nil, &twinlogv1.MirrorLmleRecord{Lmle: 2, StateEpoch: 5, LeaderEpochAfterStop: -1, LeoAtStop: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newMachine(t)
			as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 0, Run: tc.run, Lmle: tc.lmle, Desired: desired})
			for _, a := range as {
				switch a := a.(type) {
				case plan.StartFetcher, plan.WriteRunRecord, plan.WriteLmleRecord, plan.BumpLeaderEpoch, plan.QueryLMLE, plan.AddTaints:
					t.Fatalf("stale leadership acted: %#v", a)
				case plan.SetWritable:
					if a.Writable {
						t.Fatalf("stale leadership writable")
					}
				}
			}
			if m.Writable() {
				t.Fatal("writable")
			}
			if as := stepOK(t, m, plan.Tick{NowMs: 1_000_000}); len(as) != 0 {
				t.Fatalf("tick acted: %v", as)
			}
			// Newer leadership (metadata caught up) proceeds from the record.
			as = stepOK(t, m, plan.BecameLeader{LeaderEpoch: 6, Run: tc.run, Lmle: tc.lmle, Desired: desired})
			if len(as) == 0 {
				t.Fatal("current leadership did nothing")
			}
		})
	}
}

// A writable (STOPPED) leader that then receives a stale BecameLeader ... is
// covered by the same path: it first loses writability.
func TestStaleBecameLeaderDropsWritable(t *testing.T) {
	m, _ := newMachine(t)
	stepOK(t, m, plan.BecameLeader{LeaderEpoch: 1, Desired: plan.Desired{}})
	if !m.Writable() {
		t.Fatal("topic in no mirror not writable")
	}
	stale := &twinlogv1.MirrorRunRecord{State: plan.Stopped, Generation: 1, LmleUsed: -1, TruncationEpoch: 3, StateEpoch: 4, LmleRecorded: -1}
	as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 2, Run: stale, Desired: plan.Desired{State: plan.Stopped, Generation: 1}})
	if m.Writable() {
		t.Fatal("still writable")
	}
	found := false
	for _, a := range as {
		if w, ok := a.(plan.SetWritable); ok && !w.Writable {
			found = true
		}
	}
	if !found {
		t.Fatalf("no SetWritable{false} in %v", as)
	}
}

// Bug 6 (sim seeds 297, 210): the run bump 11 → 12 is answered late, after
// Stop issued the stop bump from LE 11. The fenced stop bump must be retried
// from the current LE 12 (and above it), and the partition must then stop.
func TestBumpRetryUsesCurrentLeaderEpoch(t *testing.T) {
	m, _ := newMachine(t)
	as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 11, Desired: plan.Desired{State: plan.Mirroring, Generation: 1}})
	var q plan.QueryLMLE
	for _, a := range as {
		if a, ok := a.(plan.QueryLMLE); ok {
			q = a
		}
	}
	ackWrites(t, m, as)
	as = stepOK(t, m, plan.LMLEAnswer{Seq: q.Seq, LMLE: -1})
	runBump, ok := findBump(as)
	if !ok || runBump.LeaderEpoch != 11 {
		t.Fatalf("run bump %+v", runBump)
	}
	ackWrites(t, m, as)

	as = stepOK(t, m, plan.Stop{})
	as = ackWrites(t, m, as)
	stopBump, ok := findBump(as)
	if !ok || stopBump.LeaderEpoch != 11 || stopBump.Seq == runBump.Seq {
		t.Fatalf("stop bump %+v in %v", stopBump, as)
	}

	stepOK(t, m, plan.BumpDone{Seq: runBump.Seq, LeaderEpoch: 12}) // late
	if m.LeaderEpoch() != 12 {
		t.Fatalf("LE %d", m.LeaderEpoch())
	}
	stepOK(t, m, plan.BumpFailed{Seq: stopBump.Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH})
	as = stepOK(t, m, plan.Tick{NowMs: 10})
	retry, ok := findBump(as)
	if !ok {
		t.Fatalf("no retry in %v", as)
	}
	if retry.Seq != stopBump.Seq || retry.LeaderEpoch != 12 || retry.MinLeaderEpoch <= 12 {
		t.Fatalf("retry %+v, want seq %d from LE 12 to above 12", retry, stopBump.Seq)
	}
	as = stepOK(t, m, plan.BumpDone{Seq: retry.Seq, LeaderEpoch: 13})
	ackWrites(t, m, as)
	if m.State() != plan.Stopped || !m.Writable() || m.LeaderEpoch() != 13 {
		t.Fatalf("state %v writable %v LE %d", m.State(), m.Writable(), m.LeaderEpoch())
	}
}

// Bug 8 (sim seed 3083): LMLE −1 with an empty log whose cache holds the
// leader's own (LE, LEO) entry must truncate fully so that MIRRORING starts
// with an empty cache (§8.16).
func TestLMLEMinusOneEmptyLogTruncatesCache(t *testing.T) {
	m, l := newMachine(t)
	l.cache.Assign(1, 0) // own (LE 1, LEO 0) from a writable period
	as := stepOK(t, m, plan.BecameLeader{LeaderEpoch: 1, Desired: plan.Desired{State: plan.Mirroring, Generation: 1}})
	var q plan.QueryLMLE
	for _, a := range as {
		if a, ok := a.(plan.QueryLMLE); ok {
			q = a
		}
	}
	ackWrites(t, m, as)
	as = stepOK(t, m, plan.LMLEAnswer{Seq: q.Seq, LMLE: -1})
	b, ok := findBump(as)
	if !ok || b.TruncationOffset != 0 {
		t.Fatalf("bump %+v", b)
	}
	as = stepOK(t, m, plan.BumpDone{Seq: b.Seq, LeaderEpoch: 2})
	var tf *plan.TruncateFully
	for _, a := range as {
		if a, ok := a.(plan.TruncateFully); ok {
			tf = &a
		}
	}
	if tf == nil || tf.RestartAt != 0 {
		t.Fatalf("no TruncateFully(0) in %v", as)
	}
}
