package runner_test

import (
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/runner"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestLeadershipObserve: a leadership ends when the partition is no
// longer led here, or when it is led in a later LE than the machine knows
// with no bump of its own in flight (another broker led in between, or an
// election this broker never saw as a follower: seed 1417630); a new one
// begins whenever the machine does not lead a partition led here.
func TestLeadershipObserve(t *testing.T) {
	for _, tc := range []struct {
		name       string
		l          runner.Leadership
		leading    bool
		le         twinlog.Epoch
		end, begin bool
	}{
		{"not leading, never led", runner.Leadership{KnownLE: -1}, false, 4, false, false},
		{"leadership lost", runner.Leadership{Leading: true, KnownLE: 4}, false, 5, true, false},
		{"first leadership", runner.Leadership{KnownLE: -1}, true, 4, false, true},
		{"same leadership", runner.Leadership{Leading: true, KnownLE: 4}, true, 4, false, false},
		{"own bump in flight", runner.Leadership{Leading: true, KnownLE: 4, Bumps: 1}, true, 5, false, false},
		{"later LE not caused by the machine", runner.Leadership{Leading: true, KnownLE: 4}, true, 6, true, true},
		{"older LE than known (metadata behind a bump)", runner.Leadership{Leading: true, KnownLE: 6}, true, 5, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, begin := tc.l.Observe(tc.leading, tc.le)
			if end != tc.end || begin != tc.begin {
				t.Fatalf("%+v.Observe(%t, %d) = end %t, begin %t; want %t, %t", tc.l, tc.leading, tc.le, end, begin, tc.end, tc.begin)
			}
		})
	}
}

// TestBumpOutcome: a bump is done once the replica leads in the answered
// LE; a replica past it, or no longer leading, fails it; below it, wait.
func TestBumpOutcome(t *testing.T) {
	notLeader := plan.BumpFailed{Seq: 3, Error: pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER}
	for _, tc := range []struct {
		le     twinlog.Epoch
		leader bool
		want   plan.Event
		done   bool
	}{
		{4, true, nil, false},
		{5, true, plan.BumpDone{Seq: 3, LeaderEpoch: 5}, true},
		{5, false, notLeader, true},
		{6, true, notLeader, true},
	} {
		ev, done := runner.BumpOutcome(3, 5, tc.le, tc.leader)
		if ev != tc.want || done != tc.done {
			t.Errorf("BumpOutcome(want 5, LE %d, leader %t) = %#v, %t; want %#v, %t", tc.le, tc.leader, ev, done, tc.want, tc.done)
		}
	}
}

// TestTaintsOf converts an LMLE record's taints.
func TestTaintsOf(t *testing.T) {
	got := runner.TaintsOf(&pb.MirrorLmleRecord{Taints: []*pb.ReplicaTaint{{Replica: 2, Epoch: 3, Offset: 40}, {Replica: 3, Epoch: -1, Offset: 0}}})
	if len(got) != 2 || got[2].Epoch != 3 || got[2].Offset != 40 || got[3].Epoch != -1 {
		t.Fatalf("TaintsOf = %v", got)
	}
	if len(runner.TaintsOf(nil)) != 0 {
		t.Fatal("taints of no record")
	}
}

// TestLeadershipBumps: a bump in flight keeps a later LE from counting as
// a new leadership; its answer ends that, and BumpDone's LE becomes the
// machine's own.
func TestLeadershipBumps(t *testing.T) {
	l := runner.Leadership{Leading: true, KnownLE: 4}
	l.Sent()
	if end, _ := l.Observe(true, 5); end {
		t.Fatal("the machine's own bump ended its leadership")
	}
	l.Note(plan.BumpDone{Seq: 1, LeaderEpoch: 5})
	if l.Bumps != 0 || l.KnownLE != 5 {
		t.Fatalf("after BumpDone: %+v", l)
	}
	if end, _ := l.Observe(true, 5); end {
		t.Fatal("LE 5 is the machine's own")
	}
	l.Sent()
	l.Note(plan.BumpFailed{Seq: 2})
	l.Note(plan.Fetched{})
	if l.Bumps != 0 || l.KnownLE != 5 {
		t.Fatalf("after BumpFailed: %+v", l)
	}
	if end, begin := l.Observe(true, 7); !end || !begin {
		t.Fatal("LE 7 without a bump in flight is not a new leadership")
	}
}

type planLog struct{}

func (planLog) EpochCache() *epoch.Cache       { c, _ := epoch.NewCache(nil); return c }
func (planLog) LogStartOffset() twinlog.Offset { return 0 }
func (planLog) LogEndOffset() twinlog.Offset   { return 0 }
func (planLog) HighWatermark() twinlog.Offset  { return 0 }
func (planLog) AlignedEpoch() twinlog.Epoch    { return -1 }

type zeroRand struct{}

func (zeroRand) IntN(int) int { return 0 }

type taintsReplica struct {
	role    replica.Role
	le      twinlog.Epoch
	pending bool
}

func (r taintsReplica) Role() replica.Role         { return r.role }
func (r taintsReplica) LeaderEpoch() twinlog.Epoch { return r.le }
func (r taintsReplica) TaintsPending() bool        { return r.pending }

// TestTaintsSettled: follower fetches wait until this leadership stepped
// BecameLeader in an LE the runner knows and its state records of that LE
// are acknowledged (seeds 1416997, 1709687, 1901841).
func TestTaintsSettled(t *testing.T) {
	m, err := plan.New(plan.Config{BrokerID: 1, Mirror: "m", TopicPartition: twinlog.TopicPartition{Topic: "t"}, TopicID: "id"},
		plan.Deps{Log: planLog{}, Rand: zeroRand{}})
	if err != nil {
		t.Fatal(err)
	}
	leading := taintsReplica{role: replica.RoleLeader, le: 4, pending: true}
	l := runner.Leadership{Leading: true, KnownLE: 4}
	if l.TaintsSettled(nil, leading) {
		t.Fatal("settled without a machine")
	}
	if err := m.Step(plan.BecameLeader{LeaderEpoch: 4}); err != nil {
		t.Fatal(err)
	}
	if l.TaintsSettled(m, leading) {
		t.Fatal("settled before the leadership's empty LMLE record was acknowledged")
	}
	for _, a := range m.Ready().Actions {
		if w, ok := a.(plan.WriteLmleRecord); ok {
			m.Advance()
			if err := m.Step(plan.WriteAcked{Seq: w.Seq}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if !l.TaintsSettled(m, leading) {
		t.Fatal("not settled with the state owned")
	}
	for name, r := range map[string]taintsReplica{
		"a later LE the runner has not loaded": {role: replica.RoleLeader, le: 5, pending: true},
		"not taints-pending":                   {role: replica.RoleLeader, le: 4},
		"no longer leader":                     {role: replica.RoleFollower, le: 4, pending: true},
	} {
		if l.TaintsSettled(m, r) {
			t.Errorf("%s: settled", name)
		}
	}
	if (runner.Leadership{KnownLE: 4}).TaintsSettled(m, leading) {
		t.Error("settled while the runner's leadership ended")
	}
}
