package runner_test

import (
	"sync"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/runner"
)

// TestCore: outcomes without a machine are dropped; a new leadership's
// actions are performed, and a Drain whose stop holds performs none;
// the replica status is stepped only when it changes; desired state
// changes go through plan.DesiredChange and are remembered; rejections
// reach the host.
func TestCore(t *testing.T) {
	var c runner.Core
	c.Post(plan.Fetched{}) // no machine: dropped, no panic
	m, err := plan.New(plan.Config{BrokerID: 1, Mirror: "m", TopicPartition: twinlog.TopicPartition{Topic: "t"}, TopicID: "id"},
		plan.Deps{Log: planLog{}, Rand: zeroRand{}})
	if err != nil {
		t.Fatal(err)
	}
	c.M = m
	var rejected []plan.Event
	c.Rejected = func(ev plan.Event, _ error) { rejected = append(rejected, ev) }
	c.Step(plan.Tick{NowMs: 1})
	desired := plan.Desired{SourceClusterID: "A", State: pb.MirrorState_MIRROR_STATE_MIRRORING, Generation: 1}
	c.Began(3, desired)
	if !c.Leadership.Leading || c.Leadership.KnownLE != 3 || c.Desired() != desired {
		t.Fatalf("after Began: %+v, desired %+v", c.Leadership, c.Desired())
	}
	c.Step(plan.BecameLeader{LeaderEpoch: 3, Desired: desired})
	if !m.HasReady() {
		t.Fatal("BecameLeader left nothing to perform")
	}
	// A stop that holds at once performs nothing and leaves the Ready.
	c.Drain(func(plan.Action) { t.Error("performed after stop") }, func() bool { return true })
	if !m.HasReady() {
		t.Fatal("a stopped Drain consumed the Ready")
	}
	var performed []plan.Action
	c.Drain(func(a plan.Action) { performed = append(performed, a) }, nil)
	if len(performed) == 0 || m.HasReady() {
		t.Fatalf("performed %d actions, ready left %t", len(performed), m.HasReady())
	}
	c.Post(plan.WriteAcked{Seq: 1 << 60}) // an ack of no write: the machine ignores or refuses it

	st := plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 2}, ISR: []twinlog.BrokerID{1, 2}, MinInsyncReplicas: 1}
	c.NoteStatus(st)
	before := len(rejected)
	c.M = nil // a second, equal status must not be stepped (a nil machine would panic)
	c.NoteStatus(st)
	c.M = m
	if len(rejected) != before {
		t.Fatalf("rejections %v", rejected)
	}
	paused := desired
	paused.State = pb.MirrorState_MIRROR_STATE_PAUSED
	c.ApplyDesired(paused)
	if c.Desired() != paused {
		t.Fatalf("desired %+v after ApplyDesired", c.Desired())
	}
	c.Ended()
	if c.Leadership.Leading {
		t.Fatal("still leading after Ended")
	}
}

// TestReplicaLogLocks: each read takes the host's lock.
func TestReplicaLogLocks(t *testing.T) {
	r, err := replica.New(replica.Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}}, replica.LogState{LogEndOffset: 0, AlignedEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	var l countingLock
	log := runner.ReplicaLog{Replica: r, Lock: &l}
	log.EpochCache()
	log.LogStartOffset()
	log.LogEndOffset()
	log.HighWatermark()
	if log.AlignedEpoch() != -1 || l.n != 5 {
		t.Fatalf("aligned %d, lock taken %d times, want -1 and 5", log.AlignedEpoch(), l.n)
	}
	if (runner.ReplicaLog{Replica: r}).LogEndOffset() != 0 {
		t.Fatal("without a lock")
	}
}

type countingLock struct {
	sync.Mutex
	n int
}

func (l *countingLock) Lock() { l.Mutex.Lock(); l.n++ }
