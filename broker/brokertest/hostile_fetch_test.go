package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/state"
)

// TestForgedFollowerFetchMovesNothing (issue 13, follower fetches): R
// {L, X, Y}, X's fetches held so X's LEO stays 0 in the leader's view and
// the HW at 0 with offset 0 written. Fetches as X with X's broker epoch + 1
// or − 1, and as an id outside the replica set, all claiming offset 1, are
// refused and leave the HW at 0. Before, the leader served epoch + 1 (only
// an older epoch was refused) and took the HW to 1 without X having the
// record.
func TestForgedFollowerFetchMovesNothing(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 3, ReplicaLagTimeMax: time.Minute})
	c.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	leader, le := c.Leader("t", 0)
	var x, y twinlog.BrokerID
	for _, id := range c.IDs() {
		switch {
		case id == leader:
		case x == 0:
			x = id
		default:
			y = id
		}
	}
	c.HoldFetches(x, "t", 0)
	c.ReleaseFetches(y, "t", 0) // recorded: we wait for Y's report below
	if r, err := c.ProduceTo(ctx, leader, "t", 0, 1, 5*time.Second, []byte("v")); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("produce: %v %v", r, err)
	}
	// Y's LEO 1 reached the leader once a fetch at 1 was answered.
	c.WaitFor("Y reports LEO 1", func() bool {
		for _, f := range c.Fetches(y, "t", 0) {
			if f.FetchOffset >= 1 && f.Err == nil && f.Error == pb.ErrorCode_ERROR_CODE_NONE {
				return true
			}
		}
		return false
	})
	hw := func() twinlog.Offset {
		st, _ := c.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: "t"})
		return st.HighWatermark
	}
	if got := hw(); got != 0 {
		t.Fatalf("HW %d with X held, want 0", got)
	}
	xEpoch := int64(c.Broker(x).BrokerEpoch())
	seq := int64(1) << 62 // above any seq X's replica has used
	for _, tc := range []struct {
		name    string
		replica twinlog.BrokerID
		epoch   int64
		want    pb.ErrorCode
	}{
		{"broker epoch + 1", x, xEpoch + 1, pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH},
		{"broker epoch − 1", x, xEpoch - 1, pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH},
		{"not a replica", 7, 1, pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER},
	} {
		seq++
		resp, err := c.FetchClient(leader).Fetch(ctx, &pb.FetchRequest{
			ReplicaId: int32(tc.replica), ReplicaBrokerEpoch: tc.epoch, FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER,
			Partitions: []*pb.FetchPartition{{Topic: "t", FetchOffset: 1, CurrentLeaderEpoch: int32(le), LastFetchedEpoch: int32(le), FetchSeq: seq}},
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := resp.GetPartitions()[0].GetError(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if got := hw(); got != 0 {
			t.Fatalf("%s: HW %d after a forged fetch, want 0 (X has nothing)", tc.name, got)
		}
	}
	// X itself, once released, is served with its registered epoch.
	c.ReleaseFetches(x, "t", 0)
	c.WaitFor("HW 1 once X fetches", func() bool { return hw() == 1 })
}

// TestProduceToInternalTopicRefused (issue 13, internal topics): a client's
// Produce to __mirror_state is refused with INVALID_TOPIC and appends
// nothing; before, it was appended like any record. The broker's own
// writes (AppendInternal) keep working: the mirror records its run, and a
// forged AppendInternal with a wrong broker epoch is refused.
func TestProduceToInternalTopicRefused(t *testing.T) {
	a, b := TwoClusters(t)
	a.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	a.MustProduce(ctx, "t", 0, -1, []byte("a0"))
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	b.WaitFor("mirror run recorded in __mirror_state", func() bool {
		run, _, ok := stateRecords(t, b, "m", "t", topicID(t, a, "t"))
		return ok && run != nil
	})
	leader, _ := b.Leader(state.Topic, 0)
	st, _ := b.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: state.Topic})
	r, err := b.ProduceTo(ctx, leader, state.Topic, 0, -1, 5*time.Second, []byte("forged"))
	if err != nil {
		t.Fatal(err)
	}
	if r.GetError() != pb.ErrorCode_ERROR_CODE_INVALID_TOPIC {
		t.Errorf("client produce to %s: %v, want INVALID_TOPIC", state.Topic, r.GetError())
	}
	epoch := int64(b.Broker(leader).BrokerEpoch())
	ar, err := pb.NewReplicationServiceClient(b.conn(b.Addr(leader))).AppendInternal(ctx, &pb.AppendInternalRequest{
		BrokerId: int32(leader), BrokerEpoch: epoch + 1, TimeoutMs: 5000,
		Partition: &pb.ProducePartitionData{Topic: state.Topic, Records: EncodeValues([]byte("forged"))},
	})
	if err != nil || ar.GetPartition().GetError() != pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
		t.Errorf("AppendInternal with broker epoch + 1: %v %v, want STALE_BROKER_EPOCH", ar, err)
	}
	ar, err = pb.NewReplicationServiceClient(b.conn(b.Addr(leader))).AppendInternal(ctx, &pb.AppendInternalRequest{
		BrokerId: int32(leader), BrokerEpoch: epoch, TimeoutMs: 5000,
		Partition: &pb.ProducePartitionData{Topic: "t", Records: EncodeValues([]byte("forged"))},
	})
	if err != nil || ar.GetPartition().GetError() != pb.ErrorCode_ERROR_CODE_INVALID_TOPIC {
		t.Errorf("AppendInternal to a normal topic: %v %v, want INVALID_TOPIC", ar, err)
	}
	if after, _ := b.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: state.Topic}); after.LogEndOffset != st.LogEndOffset {
		t.Errorf("%s LEO %d -> %d after refused writes", state.Topic, st.LogEndOffset, after.LogEndOffset)
	}
	// The mirror still writes its state and copies records.
	a.MustProduce(ctx, "t", 0, -1, []byte("a1"))
	b.WaitFor("B copies the second record", func() bool {
		l, _, _, _, ok := b.PartitionInfo("t", 0)
		return ok && l >= 0 && b.Running(l) && b.LogEndOffset(l, "t", 0) == 2
	})
}
