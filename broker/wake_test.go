package broker

import (
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// wakeFixture is broker 1 leading tp with followers 2 and 3, without a
// controller or gRPC: fetches go straight to fetchOnce.
func wakeFixture(t *testing.T) (*Broker, *partition) {
	t.Helper()
	b := unitBroker(t, 1)
	return b, hostPartition(t, b, twinlog.TopicPartition{Topic: "t", Partition: 0}, 1)
}

// unitBroker is broker id with one log dir and no controller, not running.
func unitBroker(t *testing.T, id twinlog.BrokerID) *Broker {
	t.Helper()
	b, err := New(Config{ID: id, ControllerAddr: "unused:1", LogDirs: []string{t.TempDir()}}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.closeDirs(false) })
	return b
}

// hostPartition makes b host tp led by leader at LE 1, replicas 1, 2 and 3
// all in the ISR, min ISR 2.
func hostPartition(t *testing.T, b *Broker, tp twinlog.TopicPartition, leader twinlog.BrokerID) *partition {
	t.Helper()
	l, err := b.dirs[0].GetOrCreate(tp)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPartition(b, tp, "id", b.dirs[0], l, storage.NoAlignedEpoch)
	if err != nil {
		t.Fatal(err)
	}
	b.parts[tp] = p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.r.ApplyPartitionState(replica.PartitionState{
		Leader: leader, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []twinlog.BrokerID{1, 2, 3}, ISR: []twinlog.BrokerID{1, 2, 3}, MinISR: 2,
		Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1, 3: 1},
	}, b.nowMs())
	p.processReadyLocked()
	return p
}

// followerFetch is one FOLLOWER fetch evaluation at offset, with w (if not
// nil) registered first, as a long poll does.
func followerFetch(t *testing.T, b *Broker, p *partition, id twinlog.BrokerID, offset int64, w *fetchWaiter) *pb.FetchPartitionResponse {
	t.Helper()
	req := &pb.FetchRequest{
		ReplicaId: int32(id), ReplicaBrokerEpoch: 1, FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER,
		Partitions: []*pb.FetchPartition{{Topic: p.tp.Topic, Partition: p.tp.Partition, FetchOffset: offset, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}},
	}
	if offset > 0 {
		req.Partitions[0].LastFetchedEpoch = 1
	}
	// Followers number their fetches where the protocol has fetch_seq
	// (set by name: the field is newer than this test).
	fetchSeq++
	m := req.Partitions[0].ProtoReflect()
	if fd := m.Descriptor().Fields().ByName("fetch_seq"); fd != nil {
		m.Set(fd, protoreflect.ValueOfInt64(fetchSeq))
	}
	var waits []*fetchWaiter
	if w != nil {
		p.addWaiter(w)
		waits = []*fetchWaiter{w}
	}
	resp, _, _ := b.fetchOnce(req, b.fetchTargets(req, []*partition{p}, nil), waits)
	if e := resp.Partitions[0].GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("follower %d fetch at %d: %v", id, offset, e)
	}
	return resp.Partitions[0]
}

var fetchSeq int64

func newWaiter() *fetchWaiter {
	w := &fetchWaiter{ch: make(chan struct{}, 1), follower: true}
	w.seen.Store(-1)
	return w
}

func woken(w *fetchWaiter) bool {
	select {
	case <-w.ch:
		return true
	default:
		return false
	}
}

// An HW advance gives a follower's long poll nothing (its bound is the
// LEO): neither the parked poll of the other follower nor the poll of the
// fetch that advanced it may wake. Both did on every acks=all completion,
// each then re-evaluating all of its fetch's partitions for nothing.
func TestHWAdvanceWakesNoFollowerPoll(t *testing.T) {
	b, p := wakeFixture(t)
	batch, err := storage.EncodeBatch([]storage.Record{{Value: []byte("v")}}, storage.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := &pb.ProducePartitionResponse{}
	ch, _ := b.producePartition(&pb.ProducePartitionData{Topic: "t", Partition: 0, Records: batch}, replica.AcksAll, 30*time.Second, out)
	if out.Error != pb.ErrorCode_ERROR_CODE_NONE || ch == nil {
		t.Fatalf("produce: %v", out.Error)
	}
	// Both followers copy offset 0; follower 3 then long-polls at the LEO.
	followerFetch(t, b, p, 3, 0, nil)
	followerFetch(t, b, p, 2, 0, nil)
	w3 := newWaiter()
	followerFetch(t, b, p, 3, 1, w3)
	if woken(w3) {
		t.Fatal("follower 3's poll woke on its own fetch")
	}
	// Follower 2 reports offset 1: the HW passes the batch.
	w2 := newWaiter()
	r := followerFetch(t, b, p, 2, 1, w2)
	if r.GetHighWatermark() != 1 {
		t.Fatalf("HW %d, want 1", r.GetHighWatermark())
	}
	select {
	case res := <-ch:
		if res.Error != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("acks=all result %v", res.Error)
		}
	default:
		t.Fatal("acks=all produce not answered at HW 1")
	}
	if woken(w3) {
		t.Error("the HW advance woke follower 3's poll")
	}
	if woken(w2) {
		t.Error("follower 2's fetch woke its own poll")
	}
}
