package plan_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/storage/epoch"
)

func cache(t *testing.T, es ...epoch.Entry) *epoch.Cache {
	t.Helper()
	c, err := epoch.NewCache(es)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type E = epoch.Entry

func TestLMLETruncationOffset(t *testing.T) {
	seedB := []E{en(0, 0), en(1, 1), en(2, 2), en(3, 3), en(4, 5)} // §6.9 row 8, LEO 6
	tests := []struct {
		name          string
		entries       []E
		lmle          twinlog.Epoch
		logStart, leo twinlog.Offset
		want          plan.Truncation
	}{
		{"-1 truncates fully", []E{en(0, 0)}, -1, 0, 2, plan.Truncation{Full: true, Offset: 0, RestartAt: 0}},
		{"-1 keeps log start", []E{en(3, 10)}, -1, 10, 12, plan.Truncation{Full: true, Offset: 10, RestartAt: 10}},
		{"-1 on an empty log is a no-op", nil, -1, 0, 0, plan.Truncation{NoOp: true, Offset: -1}},
		// An epoch without records on an empty log must go too (§8.16).
		{"-1 on an empty log with a cache entry truncates fully", []E{en(1, 0)}, -1, 0, 0, plan.Truncation{Full: true, Offset: 0, RestartAt: 0}},
		{"-1 on an empty log at log start 7", []E{en(3, 7)}, -1, 7, 7, plan.Truncation{Full: true, Offset: 7, RestartAt: 7}},
		{"§6.9 row 5: lmle 1 cuts 2@2a", []E{en(0, 0), en(1, 1), en(2, 2)}, 1, 0, 3, plan.Truncation{Offset: 2}},
		{"§6.9 row 8: lmle 3 cuts 5@4b", seedB, 3, 0, 6, plan.Truncation{Offset: 5}},
		{"gap epoch: first epoch > lmle", []E{en(1, 0), en(5, 4)}, 3, 0, 8, plan.Truncation{Offset: 4}},
		{"no epoch after lmle: no-op", []E{en(1, 0), en(3, 2)}, 3, 0, 6, plan.Truncation{NoOp: true, Offset: -1}},
		{"§6.10 row 7: lmle 5 no-op", []E{en(1, 0), en(5, 2)}, 5, 0, 4, plan.Truncation{NoOp: true, Offset: -1}},
		// An epoch without records after the LMLE is cut at the LEO (cache only):
		// a mirror cache holds record epochs only (§6.2c, inv. 16).
		{"epoch after lmle without records", []E{en(1, 0), en(4, 3)}, 1, 0, 3, plan.Truncation{Offset: 3}},
		{"every retained record foreign", []E{en(2, 0)}, 1, 5, 9, plan.Truncation{Full: true, Offset: 5, RestartAt: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan.LMLETruncationOffset(cache(t, tt.entries...), tt.lmle, tt.logStart, tt.leo)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestEmptyEpochTruncation(t *testing.T) {
	noOp := plan.Truncation{NoOp: true, Offset: -1}
	tests := []struct {
		name          string
		entries       []E
		lmleUsed      twinlog.Epoch
		logStart, leo twinlog.Offset
		want          plan.Truncation
	}{
		// Seed 177: cache [0:0 2:15 3:20 4:23 5:39], LEO 39, lmleUsed 4.
		{"own empty epoch above lmleUsed", []E{en(0, 0), en(2, 15), en(3, 20), en(4, 23), en(5, 39)}, 4, 0, 39, plan.Truncation{Offset: 39}},
		{"latest epoch has records", []E{en(0, 0), en(5, 39)}, 4, 0, 41, noOp},
		{"empty epoch not above lmleUsed", []E{en(0, 0), en(4, 39)}, 4, 0, 39, noOp},
		{"empty cache", nil, -1, 0, 0, noOp},
		{"empty log: fully at log start", []E{en(6, 7)}, 4, 7, 7, plan.Truncation{Full: true, Offset: 7, RestartAt: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan.EmptyEpochTruncation(cache(t, tt.entries...), tt.lmleUsed, tt.logStart, tt.leo)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestDivergenceTruncation(t *testing.T) {
	tests := []struct {
		name     string
		entries  []E
		logStart twinlog.Offset
		leo      twinlog.Offset
		el       twinlog.Epoch
		ol       twinlog.Offset
		want     plan.Truncation
	}{
		{"§6.9 row 9", []E{en(0, 0), en(1, 1), en(2, 2), en(3, 3)}, 0, 5, 3, 4, plan.Truncation{Offset: 4}},
		{"S4b", []E{en(1, 0)}, 0, 4, 1, 2, plan.Truncation{Offset: 2}},
		{"S4c: follower (1,1)", []E{en(1, 0), en(2, 1)}, 0, 4, 1, 2, plan.Truncation{Offset: 1}},
		{"S4d: follower (1,0)", []E{en(2, 0)}, 0, 3, 1, 5, plan.Truncation{Offset: 0}},
		{"E_L = -1", []E{en(1, 0)}, 0, 6, -1, 3, plan.Truncation{Offset: 3}},
		{"empty cache", nil, 0, 6, 2, 3, plan.Truncation{Offset: 3}},
		{"§6.10 1.3a", []E{en(1, 0)}, 0, 4, 1, 1, plan.Truncation{Offset: 1}},
		{"nothing to cut", []E{en(1, 0)}, 0, 4, 1, 9, plan.Truncation{NoOp: true, Offset: -1}},
		{"seed 1117508: an empty epoch at the LEO goes", []E{en(0, 0), en(1, 40), en(4, 54), en(5, 72), en(9, 112)}, 0, 112, 5, 112, plan.Truncation{Offset: 112}},
		{"an empty epoch at an empty log's start goes", []E{en(9, 20)}, 20, 20, 5, 20, plan.Truncation{Full: true, Offset: 20, RestartAt: 20}},
		{"the diverging epoch itself at the LEO stays", []E{en(1, 0), en(5, 4)}, 0, 4, 5, 9, plan.Truncation{NoOp: true, Offset: -1}},
		{"below log start", []E{en(3, 10)}, 10, 14, 3, 7, plan.Truncation{Full: true, Offset: 10, RestartAt: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan.DivergenceTruncation(cache(t, tt.entries...), tt.logStart, tt.leo, tt.el, tt.ol)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestLMLEAtStopAndBump(t *testing.T) {
	c := cache(t, en(0, 0), en(1, 1))
	if got := plan.LMLEAtStop(true, c, 7); got != 1 {
		t.Errorf("aligned: %d", got)
	}
	if got := plan.LMLEAtStop(false, c, 7); got != 7 {
		t.Errorf("unaligned with record: %d", got)
	}
	if got := plan.LMLEAtStop(false, c, -1); got != -1 {
		t.Errorf("unaligned without record: %d", got)
	}
	if got := plan.LMLEAtStop(true, cache(t), 4); got != -1 {
		t.Errorf("aligned, empty log: %d", got)
	}
	for _, tt := range []struct{ lmle, le, want twinlog.Epoch }{{1, 1, 2}, {3, 3, 4}, {5, 8, 9}, {9, 4, 10}, {-1, 0, 1}} {
		if got := plan.StopBumpEpoch(tt.lmle, tt.le); got != tt.want {
			t.Errorf("StopBumpEpoch(%d, %d) = %d, want %d", tt.lmle, tt.le, got, tt.want)
		}
	}
	for _, tt := range []struct {
		te, ae twinlog.Epoch
		want   bool
	}{{-1, -1, false}, {-1, 5, false}, {3, 2, false}, {3, 3, true}, {3, 4, true}, {0, 0, true}} {
		if got := plan.Aligned(tt.te, tt.ae); got != tt.want {
			t.Errorf("Aligned(%d, %d) = %v", tt.te, tt.ae, got)
		}
	}
}

func TestReadyToMirror(t *testing.T) {
	ids := func(b ...twinlog.BrokerID) []twinlog.BrokerID { return b }
	al := func(kv ...twinlog.Epoch) map[twinlog.BrokerID]twinlog.Epoch {
		m := map[twinlog.BrokerID]twinlog.Epoch{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[twinlog.BrokerID(kv[i])] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name string
		st   plan.ReplicaStatus
		self twinlog.Epoch
		te   twinlog.Epoch
		want bool
	}{
		{"all aligned", plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1, 2, 3), FollowerAlignedEpoch: al(2, 5, 3, 6), MinInsyncReplicas: 2}, 5, 5, true},
		{"no run", plan.ReplicaStatus{Replicas: ids(1), ISR: ids(1), MinInsyncReplicas: 1}, 5, -1, false},
		{"leader unaligned", plan.ReplicaStatus{Replicas: ids(1), ISR: ids(1), MinInsyncReplicas: 1}, 4, 5, false},
		{"follower not answered", plan.ReplicaStatus{Replicas: ids(1, 2), ISR: ids(1, 2), FollowerAlignedEpoch: al(), MinInsyncReplicas: 1}, 5, 5, false},
		{"follower aligned in older LE", plan.ReplicaStatus{Replicas: ids(1, 2), ISR: ids(1, 2), FollowerAlignedEpoch: al(2, 4), MinInsyncReplicas: 1}, 5, 5, false},
		{"ISR below m", plan.ReplicaStatus{Replicas: ids(1, 2, 3), ISR: ids(1), MinInsyncReplicas: 2}, 5, 5, false},
		{"m capped by |R|", plan.ReplicaStatus{Replicas: ids(1), ISR: ids(1), MinInsyncReplicas: 2}, 5, 5, true},
		{"skip out-of-ISR, config false", plan.ReplicaStatus{Replicas: ids(1, 2), ISR: ids(1), MinInsyncReplicas: 1}, 5, 5, true},
		{"config true needs ISR = R", plan.ReplicaStatus{Replicas: ids(1, 2), ISR: ids(1), MinInsyncReplicas: 1, SupportUncleanLeaderElection: true}, 5, 5, false},
		{"config true, all in", plan.ReplicaStatus{Replicas: ids(1, 2), ISR: ids(1, 2), FollowerAlignedEpoch: al(2, 7), MinInsyncReplicas: 1, SupportUncleanLeaderElection: true}, 5, 5, true},
		{"expansion in flight", plan.ReplicaStatus{Replicas: ids(1, 2), ISR: ids(1), MaximalISR: ids(1, 2), FollowerAlignedEpoch: al(2, 5), MinInsyncReplicas: 1}, 5, 5, false},
		{"maximal = ISR", plan.ReplicaStatus{Replicas: ids(1, 2), ISR: ids(1), MaximalISR: ids(1), MinInsyncReplicas: 1}, 5, 5, true},
		{"shrink in flight", plan.ReplicaStatus{Replicas: ids(1, 2), ISR: ids(1, 2), MaximalISR: ids(1, 2), FollowerAlignedEpoch: al(2, 5), MinInsyncReplicas: 1}, 5, 5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plan.ReadyToMirror(tt.st, 1, tt.self, tt.te); got != tt.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

func TestTaints(t *testing.T) {
	skipped := plan.SkippedReplicas([]twinlog.BrokerID{3, 1, 2}, []twinlog.BrokerID{1})
	if d := cmp.Diff([]twinlog.BrokerID{3, 2}, skipped); d != "" {
		t.Fatal(d)
	}
	added := plan.TaintsFor(skipped, 5, 6)
	existing := []plan.Taint{{Replica: 2, Epoch: 1, Offset: 9}, {Replica: 4, Epoch: 3, Offset: 2}}
	got := plan.MergeTaints(existing, added)
	want := []plan.Taint{
		{Replica: 2, Epoch: 1, Offset: 6}, // smaller epoch (1) and smaller offset (6)
		{Replica: 3, Epoch: 5, Offset: 6},
		{Replica: 4, Epoch: 3, Offset: 2},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("merge (-want +got)\n%s", d)
	}
	// §6.10 M6 row 4 then a later run: a2 tainted (1, 2), then (5, 6) → (1, 2).
	got = plan.MergeTaints([]plan.Taint{{Replica: 2, Epoch: 1, Offset: 2}}, []plan.Taint{{Replica: 2, Epoch: 5, Offset: 6}})
	if d := cmp.Diff([]plan.Taint{{Replica: 2, Epoch: 1, Offset: 2}}, got); d != "" {
		t.Fatal(d)
	}
	// A run installs its taint merged with the one a skipped replica has,
	// and only on the replicas it skipped.
	if d := cmp.Diff([]plan.Taint{{Replica: 2, Epoch: 1, Offset: 6}, {Replica: 3, Epoch: 5, Offset: 6}},
		plan.RunTaints(existing, skipped, 5, 6)); d != "" {
		t.Fatalf("run taints (-want +got)\n%s", d)
	}
	if d := cmp.Diff([]plan.Taint{{Replica: 4, Epoch: 3, Offset: 2}}, plan.WithoutTaint(existing, 2)); d != "" {
		t.Fatal(d)
	}
	if len(existing) != 2 {
		t.Fatal("WithoutTaint modified its input")
	}
}

func TestFetchFieldsLagBackoff(t *testing.T) {
	if got := plan.MirrorFetchRequest(7, cache(t).Latest(), 0); got != (plan.FetchRequest{FetchOffset: 0, CurrentLeaderEpoch: 7, LastFetchedEpoch: -1}) {
		t.Errorf("empty: %+v", got)
	}
	if got := plan.MirrorFetchRequest(-1, cache(t, en(1, 0), en(3, 2)).Latest(), 5); got != (plan.FetchRequest{FetchOffset: 5, CurrentLeaderEpoch: -1, LastFetchedEpoch: 3}) {
		t.Errorf("got %+v", got)
	}
	if n, e := plan.AppendablePrefix([]twinlog.Epoch{1, 1, 7, 7}, 3); n != 2 || e != 7 {
		t.Errorf("prefix %d, %d", n, e)
	}
	if n, e := plan.AppendablePrefix([]twinlog.Epoch{1, 3}, 3); n != 2 || e != -1 {
		t.Errorf("prefix %d, %d", n, e)
	}
	for attempt, want := range []int64{100, 200, 400, 800, 1000, 1000} {
		if got := plan.Backoff(maxRand{}, attempt, 100, 1000); got != want {
			t.Errorf("Backoff(%d) = %d, want %d", attempt, got, want)
		}
	}
	if got := plan.Backoff(zeroRand{}, 3, 100, 1000); got != 0 {
		t.Errorf("full jitter lower bound %d", got)
	}
}

type zeroRand struct{}

func (zeroRand) IntN(int) int { return 0 }

// TestAnswerLastMirroredEpoch: the source-side rule of SPEC §6.4, except
// that a topic or partition the source does not have, or has under another
// topic id, is an error fatal to the requester's run and never −1 ("truncate
// everything"): a topic deleted or re-created on the source must not erase
// its mirror (issue 13, docs/spec-deviations.md).
func TestAnswerLastMirroredEpoch(t *testing.T) {
	rec := &twinlogv1.MirrorLmleRecord{Lmle: 3, SourceClusterId: "B"}
	ok := plan.SourceView{HasStateTopic: true, StateLeader: true, CaughtUp: true, LocalTopicID: "t1", PartitionCount: 2, Partition: 1, Record: rec}
	with := func(f func(*plan.SourceView)) plan.SourceView { v := ok; f(&v); return v }
	noState := plan.SourceView{LocalTopicID: "t1", PartitionCount: 1}
	withNoState := func(f func(*plan.SourceView)) plan.SourceView { v := noState; f(&v); return v }
	const (
		none         = twinlogv1.ErrorCode_ERROR_CODE_NONE
		notLeader    = twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
		loading      = twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS
		invalid      = twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_SOURCE
		unknown      = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		inconsistent = twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID
	)
	tests := []struct {
		name      string
		requester string
		topicID   string
		v         plan.SourceView
		lmle      twinlog.Epoch
		code      twinlogv1.ErrorCode
	}{
		{"record", "B", "t1", ok, 3, none},
		{"no __mirror_state: any broker answers -1", "B", "t1", noState, -1, none},
		{"no record", "B", "t1", with(func(v *plan.SourceView) { v.Record = nil }), -1, none},
		{"other source cluster", "C", "t1", ok, -1, none},
		{"other topic id", "B", "t2", ok, -1, inconsistent},
		{"requester without topic id", "B", "", ok, -1, inconsistent},
		{"topic unknown locally", "B", "t1", with(func(v *plan.SourceView) { v.LocalTopicID = "" }), -1, unknown},
		{"partition unknown locally", "B", "t1", with(func(v *plan.SourceView) { v.Partition = 2 }), -1, unknown},
		{"negative partition", "B", "t1", with(func(v *plan.SourceView) { v.Partition = -1 }), -1, unknown},
		{"no __mirror_state, topic unknown", "B", "t1", plan.SourceView{}, -1, unknown},
		{"no __mirror_state, partition unknown", "B", "t1", withNoState(func(v *plan.SourceView) { v.Partition = 1 }), -1, unknown},
		{"no __mirror_state, other topic id", "B", "t2", noState, -1, inconsistent},
		{"not the state leader", "B", "t1", with(func(v *plan.SourceView) { v.StateLeader = false }), -1, notLeader},
		{"not the state leader, topic unknown", "B", "t1", with(func(v *plan.SourceView) { v.StateLeader, v.LocalTopicID = false, "" }), -1, notLeader},
		{"not caught up", "B", "t1", with(func(v *plan.SourceView) { v.CaughtUp = false }), -1, loading},
		{"mirror MIRRORING", "B", "t1", with(func(v *plan.SourceView) {
			v.InMirror, v.DesiredState, v.RunState = true, plan.Mirroring, plan.Mirroring
		}), -1, invalid},
		{"desired STOPPED, still STOPPING", "B", "t1", with(func(v *plan.SourceView) {
			v.InMirror, v.DesiredState, v.RunState = true, plan.Stopped, plan.Stopping
		}), -1, invalid},
		{"mirror STOPPED", "B", "t1", with(func(v *plan.SourceView) {
			v.InMirror, v.DesiredState, v.RunState = true, plan.Stopped, plan.Stopped
		}), 3, none},
		{"mirror FAILED", "B", "t1", with(func(v *plan.SourceView) {
			v.InMirror, v.DesiredState, v.RunState = true, plan.Mirroring, plan.Failed
		}), -1, invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, code := plan.AnswerLastMirroredEpoch(tt.requester, tt.topicID, tt.v)
			if l != tt.lmle || code != tt.code {
				t.Fatalf("got (%d, %v), want (%d, %v)", l, code, tt.lmle, tt.code)
			}
		})
	}
}

// TestStateTable: the __mirror_state reader rule.
func TestStateTable(t *testing.T) {
	var tab plan.StateTable[plan.LmleKey, *twinlogv1.MirrorLmleRecord]
	k := plan.LmleKey{TopicID: "t1", Partition: 0}
	steps := []struct {
		rec     *twinlogv1.MirrorLmleRecord
		applied bool
		want    int32 // lmle after, -9 none
	}{
		{&twinlogv1.MirrorLmleRecord{StateEpoch: 3, Lmle: 1}, true, 1},
		{&twinlogv1.MirrorLmleRecord{StateEpoch: 2, Lmle: 9}, false, 1}, // fenced writer
		{&twinlogv1.MirrorLmleRecord{StateEpoch: 3, Lmle: 2}, true, 2},  // same epoch: latest wins
		{&twinlogv1.MirrorLmleRecord{StateEpoch: 5, Lmle: 3}, true, 3},
		{nil, true, -9}, // tombstone
		{&twinlogv1.MirrorLmleRecord{StateEpoch: 1, Lmle: 4}, true, 4}, // reset stateEpoch
	}
	for i, s := range steps {
		if got := tab.Apply(k, s.rec); got != s.applied {
			t.Fatalf("step %d applied = %v", i, got)
		}
		r, ok := tab.Get(k)
		if s.want == -9 {
			if ok {
				t.Fatalf("step %d: key survived its tombstone", i)
			}
			continue
		}
		if r.GetLmle() != s.want {
			t.Fatalf("step %d: lmle %d, want %d", i, r.GetLmle(), s.want)
		}
	}
}

func en(e twinlog.Epoch, o twinlog.Offset) E { return E{Epoch: e, StartOffset: o} }

// TestFetchedBatches: a mirror leader appends fetched batches while their
// epochs neither exceed LE (§6.2d) nor go below its latest cached epoch or
// an earlier batch's (SPEC §6.8, simulator seed 432); a first batch below
// the latest cached epoch is foreign, and nothing is appended. An answer
// holding an epoch above the source LE the fetch was made in (or MaxEpoch)
// is refused whole: no source batch header may push the LE past what the
// source leader itself runs in (issue 13).
func TestFetchedBatches(t *testing.T) {
	for _, tc := range []struct {
		epochs          []twinlog.Epoch
		le, latest, src twinlog.Epoch
		n               int
		need            twinlog.Epoch
		wantForeign     bool
		wantErr         bool
	}{
		{[]twinlog.Epoch{1, 1, 7, 7}, 3, -1, 7, 2, 7, false, false},
		{[]twinlog.Epoch{1, 3}, 3, 1, 3, 2, -1, false, false},
		{[]twinlog.Epoch{0, 0, 2}, 7, 2, 5, 0, -1, true, false}, // seed 432
		{[]twinlog.Epoch{2, 3, 2}, 7, 2, 3, 2, -1, false, false},
		{[]twinlog.Epoch{2, 9}, 7, 2, 9, 1, 9, false, false},
		{[]twinlog.Epoch{2, 9}, 7, 2, -1, 1, 9, false, false}, // source LE unknown: unchecked
		{nil, 7, 2, 0, 0, -1, false, false},
		// Absurd epochs: nothing appended, no bump asked for.
		{[]twinlog.Epoch{2, 10}, 7, 2, 9, 0, -1, false, true},
		{[]twinlog.Epoch{1, math.MaxInt32}, 3, 1, 4, 0, -1, false, true},
		{[]twinlog.Epoch{math.MaxInt32}, 3, 1, math.MaxInt32, 0, -1, false, true},
		{[]twinlog.Epoch{math.MaxInt32}, 3, 1, -1, 0, -1, false, true},
	} {
		n, need, foreign, err := plan.FetchedBatches(tc.epochs, tc.le, tc.latest, tc.src)
		if n != tc.n || need != tc.need || foreign != tc.wantForeign || (err != nil) != tc.wantErr {
			t.Errorf("FetchedBatches(%v, LE %d, latest %d, source LE %d) = %d, %d, %t, %v; want %d, %d, %t, error %t",
				tc.epochs, tc.le, tc.latest, tc.src, n, need, foreign, err, tc.n, tc.need, tc.wantForeign, tc.wantErr)
		}
	}
}

// TestMirrorFetchTopicID: the source refuses a Fetch{MIRROR} naming another
// topic id (a topic re-created between the requester's Metadata and its
// fetch) with INCONSISTENT_TOPIC_ID, which is fatal to the run; an empty id
// is not checked, nor are other fetchers'.
func TestMirrorFetchTopicID(t *testing.T) {
	mirror, follower := twinlogv1.FetcherType_FETCHER_TYPE_MIRROR, twinlogv1.FetcherType_FETCHER_TYPE_FOLLOWER
	for _, tc := range []struct {
		fetcher          twinlogv1.FetcherType
		requested, local string
		want             twinlogv1.ErrorCode
	}{
		{mirror, "t1", "t1", twinlogv1.ErrorCode_ERROR_CODE_NONE},
		{mirror, "", "t1", twinlogv1.ErrorCode_ERROR_CODE_NONE},
		{mirror, "t1", "t2", twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID},
		{follower, "t1", "t2", twinlogv1.ErrorCode_ERROR_CODE_NONE},
	} {
		got := plan.MirrorFetchTopicID(tc.fetcher, tc.requested, tc.local)
		if got != tc.want {
			t.Errorf("MirrorFetchTopicID(%v, %q, %q) = %v, want %v", tc.fetcher, tc.requested, tc.local, got, tc.want)
		}
		if got != twinlogv1.ErrorCode_ERROR_CODE_NONE && !plan.Fatal(got) {
			t.Errorf("%v is not fatal to the run", got)
		}
	}
}

// TestSourceLeaderEpochUsable: metadata naming an older source leader epoch
// than one already fetched in is not used (KIP-320), nor one at or below
// the run's LMLE (its floor lmleUsed + 1); the same or a newer one is.
func TestSourceLeaderEpochUsable(t *testing.T) {
	for _, tc := range []struct {
		seen, min, answered twinlog.Epoch
		want                bool
	}{
		{0, 0, 0, true}, {11, 0, 11, true}, {8, 0, 11, true}, {11, 0, 8, false}, {11, 0, -1, false},
		// Seed 1737467: a failback with LMLE 3 (floor 4), nothing seen yet.
		{0, 4, 3, false}, {0, 4, 4, true}, {0, 4, 7, true}, {7, 4, 5, false},
	} {
		if got := plan.SourceLeaderEpochUsable(tc.seen, tc.min, tc.answered); got != tc.want {
			t.Errorf("SourceLeaderEpochUsable(%d, %d, %d) = %t, want %t", tc.seen, tc.min, tc.answered, got, tc.want)
		}
	}
	for lmle, want := range map[twinlog.Epoch]twinlog.Epoch{-1: 0, 0: 1, 3: 4} {
		if got := plan.MinSourceLeaderEpoch(lmle); got != want {
			t.Errorf("MinSourceLeaderEpoch(%d) = %d, want %d", lmle, got, want)
		}
	}
}

// TestLagClock: the lag is what a failover would lose now: the source's
// committed records the destination has not committed, and the age of the
// oldest of them since a fetch first showed it committed at the source; 0
// and 0 when caught up, however long ago the last fetch was.
func TestLagClock(t *testing.T) {
	var c plan.LagClock
	check := func(src, dest twinlog.Offset, now int64, wantRecs int64, wantSecs float64) {
		t.Helper()
		if r, s := c.Lag(src, dest, now); r != wantRecs || s != wantSecs {
			t.Fatalf("Lag(%d, %d, %d) = %d, %v; want %d, %v", src, dest, now, r, s, wantRecs, wantSecs)
		}
	}
	c.Observe(10, 10, 1000)
	check(10, 10, 50_000, 0, 0) // idle and caught up: no lag, however old
	c.Observe(20, 10, 2000)     // source committed up to 20 at 2.0 s
	c.Observe(30, 12, 3000)     // ... up to 30 at 3.0 s; destination HW 12
	check(30, 12, 4000, 18, 2)  // offset 12 was committed at the source by 2.0 s
	c.Observe(30, 25, 5000)     // destination committed past 20
	check(30, 25, 5500, 5, 2.5) // offset 25 was first seen committed at 3.0 s
	c.Observe(30, 30, 6000)
	check(30, 30, 6000, 0, 0)
	// Full: the newest entry absorbs later HWs and keeps its (older) time.
	for i := range 100 {
		c.Observe(twinlog.Offset(100+i), 30, int64(10_000+i))
	}
	// 32 entries: 100..131 first seen at 10.000..10.031 s; then 131 grew to
	// 199 keeping 10.031 s, so offset 190's age is counted from there.
	check(199, 190, 20_000, 9, 9.969)
}
