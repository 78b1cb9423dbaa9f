package brokertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
)

// acked records every acknowledged acks=all record by offset.
type acked map[twinlog.Offset]string

func (a acked) produce(t *testing.T, ctx context.Context, c *Cluster, topic string, n int, tag string) {
	t.Helper()
	for i := range n {
		v := fmt.Sprintf("%s-%d", tag, i)
		off := c.MustProduce(ctx, topic, 0, -1, []byte(v))
		a[off] = v
	}
}

// check verifies every acked record by offset and content, and that no
// offset is below the HW without a record.
func (a acked) check(t *testing.T, ctx context.Context, c *Cluster, topic string) []Record {
	t.Helper()
	top := twinlog.Offset(-1)
	for off := range a {
		top = max(top, off)
	}
	// A new leader starts from its local HW (SPEC §4.2): acked records
	// become visible once the ISR has fetched in the new LE.
	c.WaitFor("HW passes every acked record", func() bool {
		leader, _, _, _, ok := c.PartitionInfo(topic, 0)
		if !ok || leader < 0 || c.Broker(leader) == nil {
			return false
		}
		st, ok := c.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: topic, Partition: 0})
		return ok && st.HighWatermark > top
	})
	recs, hw := c.ConsumeAll(ctx, topic, 0)
	got := map[twinlog.Offset]string{}
	for _, r := range recs {
		got[r.Offset] = string(r.Value)
	}
	for off, v := range a {
		if off >= hw {
			t.Errorf("acked offset %d is at or above HW %d", off, hw)
			continue
		}
		if got[off] != v {
			t.Errorf("acked offset %d: got %q want %q", off, got[off], v)
		}
	}
	return recs
}

// replicasIdentical waits until every running replica has the same LEO and
// then compares their logs by reading each replica's local copy through
// its status (LEO) and the leader's records.
func waitReplicasCaughtUp(c *Cluster, topic string) {
	c.WaitFor("replicas caught up", func() bool {
		leader, _, isr, rs, ok := c.PartitionInfo(topic, 0)
		if !ok || leader < 0 || len(isr) != len(rs) {
			return false
		}
		leo := c.LogEndOffset(leader, topic, 0)
		for _, id := range rs {
			if c.LogEndOffset(twinlog.BrokerID(id), topic, 0) != leo {
				return false
			}
		}
		return true
	})
}

func TestAckedSurviveLeaderKill(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 3, MinISR: 2})
	c.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := acked{}
	a.produce(t, ctx, c, "t", 30, "before")
	leader, le := c.Leader("t", 0)
	c.KillBroker(leader)
	a.produce(t, ctx, c, "t", 30, "after")
	newLeader, newLE := c.Leader("t", 0)
	if newLeader == leader || newLE <= le {
		t.Fatalf("leader %d LE %d after killing %d at LE %d", newLeader, newLE, leader, le)
	}
	a.check(t, ctx, c, "t")
	c.RestartBroker(leader)
	waitReplicasCaughtUp(c, "t")
	a.check(t, ctx, c, "t")
}

func TestAckedSurviveFollowerKills(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 5, MinISR: 3})
	c.CreateTopic("t", 1, 5, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := acked{}
	a.produce(t, ctx, c, "t", 20, "before")
	leader, _ := c.Leader("t", 0)
	var killed []twinlog.BrokerID
	for _, id := range c.IDs() {
		if id != leader && len(killed) < 2 {
			c.KillBroker(id)
			killed = append(killed, id)
		}
	}
	a.produce(t, ctx, c, "t", 20, "during")
	for _, id := range killed {
		c.RestartBroker(id)
	}
	a.produce(t, ctx, c, "t", 10, "after")
	waitReplicasCaughtUp(c, "t")
	a.check(t, ctx, c, "t")
}

func TestCleanRestartAll(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 3, MinISR: 2})
	c.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := acked{}
	a.produce(t, ctx, c, "t", 25, "v")
	waitReplicasCaughtUp(c, "t")
	epochs := map[twinlog.BrokerID]twinlog.BrokerEpoch{}
	for _, id := range c.IDs() {
		epochs[id] = c.Broker(id).BrokerEpoch()
		c.StopBroker(id)
	}
	for _, id := range c.IDs() {
		c.RestartBroker(id)
		// SPEC §2.5: the clean-shutdown file gives PreviousBrokerEpoch.
		if got := c.Broker(id).PreviousBrokerEpoch(); got != epochs[id] {
			t.Errorf("broker %d: previous broker epoch %d, want %d", id, got, epochs[id])
		}
	}
	a.check(t, ctx, c, "t")
	a.produce(t, ctx, c, "t", 5, "after")
	waitReplicasCaughtUp(c, "t")
	a.check(t, ctx, c, "t")
}

// TestS13HWGate drives SPEC S13 end to end: a full ISR acks; followers cut
// off shrink the ISR to {leader}, then acks=all gets NOT_ENOUGH_REPLICAS
// and appends nothing, acks=1 appends but stays unreadable; healing the
// links lets the followers rejoin and the HW pass the record.
func TestS13HWGate(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 3, MinISR: 2})
	c.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := acked{}
	a.produce(t, ctx, c, "t", 10, "v")
	leader, _ := c.Leader("t", 0)
	var others []twinlog.BrokerID
	for _, id := range c.IDs() {
		if id != leader {
			others = append(others, id)
			c.Cut(leader, id)
		}
	}
	// A pending acks=all request ends with NOT_ENOUGH_REPLICAS_AFTER_APPEND
	// when the maximal ISR drops below m, or times out.
	r, err := c.ProduceTo(ctx, leader, "t", 0, -1, 10*time.Second, []byte("pending"))
	if err != nil {
		t.Fatal(err)
	}
	if r.GetError() != pb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND && r.GetError() != pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
		t.Fatalf("pending acks=all: %v", r.GetError())
	}
	c.WaitFor("ISR shrinks to the leader", func() bool {
		st, ok := c.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: "t", Partition: 0})
		return ok && len(st.ISR) == 1
	})
	st, _ := c.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: "t", Partition: 0})
	leo := st.LogEndOffset
	r, err = c.ProduceTo(ctx, leader, "t", 0, -1, time.Second, []byte("rejected"))
	if err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS {
		t.Fatalf("acks=all with |ISR| < m: %v %v", r.GetError(), err)
	}
	if got := c.LogEndOffset(leader, "t", 0); got != leo {
		t.Fatalf("NOT_ENOUGH_REPLICAS appended: LEO %d -> %d", leo, got)
	}
	r, err = c.ProduceTo(ctx, leader, "t", 0, 1, time.Second, []byte("acks1"))
	if err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("acks=1: %v %v", r.GetError(), err)
	}
	acks1 := twinlog.Offset(r.GetBaseOffset())
	st, _ = c.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: "t", Partition: 0})
	if st.HighWatermark > acks1 {
		t.Fatalf("acks=1 record readable with ISR {leader}: HW %d", st.HighWatermark)
	}
	for _, id := range others {
		c.Heal(leader, id)
	}
	c.WaitFor("ISR expands and HW passes the acks=1 record", func() bool {
		st, ok := c.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: "t", Partition: 0})
		return ok && len(st.ISR) >= 2 && st.HighWatermark > acks1
	})
	recs := a.check(t, ctx, c, "t")
	if !slices.ContainsFunc(recs, func(r Record) bool { return r.Offset == acks1 && string(r.Value) == "acks1" }) {
		t.Fatalf("acks=1 record not readable after the ISR grew")
	}
}

// countingObserver counts truncations by reason.
type countingObserver struct {
	broker.Observer
	mu     sync.Mutex
	reason map[string]int
}

func (o *countingObserver) ObserveTruncation(r string) {
	o.mu.Lock()
	o.reason[r]++
	o.mu.Unlock()
}

func (o *countingObserver) count(r string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reason[r]
}

// TestDivergentTailTruncated is SPEC S4(b) end to end: the leader appends
// an unreplicated acks=1 tail while cut off from its followers, then shuts
// down (its tail is durable); a follower takes over in a new LE and writes;
// when the old leader returns, its fetch with the old lastFetchedEpoch gets
// DivergingEpoch and it truncates the tail. Every replica ends identical.
func TestDivergentTailTruncated(t *testing.T) {
	obs := map[twinlog.BrokerID]*countingObserver{}
	var mu sync.Mutex
	c := NewCluster(t, Options{Brokers: 3, MinISR: 1, ReplicaLagTimeMax: 20 * time.Second,
		Observer: func(id twinlog.BrokerID) broker.Observer {
			mu.Lock()
			defer mu.Unlock()
			if obs[id] == nil {
				obs[id] = &countingObserver{Observer: nopObs{}, reason: map[string]int{}}
			}
			return obs[id]
		}})
	c.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := acked{}
	a.produce(t, ctx, c, "t", 10, "v")
	waitReplicasCaughtUp(c, "t")
	old, _ := c.Leader("t", 0)
	for _, id := range c.IDs() {
		if id != old {
			c.Cut(old, id)
		}
	}
	for i := range 5 {
		r, err := c.ProduceTo(ctx, old, "t", 0, 1, time.Second, fmt.Appendf(nil, "tail-%d", i))
		if err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("acks=1 tail: %v %v", r.GetError(), err)
		}
	}
	c.StopBroker(old) // controlled shutdown moves leadership; the tail is flushed
	a.produce(t, ctx, c, "t", 10, "new")
	for _, id := range c.IDs() {
		if id != old {
			c.Heal(old, id)
		}
	}
	c.RestartBroker(old)
	waitReplicasCaughtUp(c, "t")
	recs := a.check(t, ctx, c, "t")
	for _, r := range recs {
		if len(r.Value) >= 4 && string(r.Value[:4]) == "tail" {
			t.Fatalf("unreplicated tail record %q survived at %d", r.Value, r.Offset)
		}
	}
	if n := obs[old].count("divergence"); n == 0 {
		t.Fatalf("old leader counted no divergence truncation")
	}
}

type nopObs struct{}

func (nopObs) ObservePartition(broker.PartitionStats) {}
func (nopObs) ForgetPartition(string, int32)          {}
func (nopObs) ObserveTruncation(string)               {}
func (nopObs) ObserveRequest(string, time.Duration)   {}
func (nopObs) ObserveBytesIn(int)                     {}
func (nopObs) ObserveIdempotentRefusal(string)        {}
func (nopObs) ObserveBytesOut(int)                    {}
func (nopObs) ObserveISRChange(bool)                  {}
