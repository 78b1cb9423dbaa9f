package broker

import (
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/follow"
	"github.com/twinlog/twinlog/storage"
)

// followerFixture is broker 3 following t/0 from leader 1 and t/1 from
// leader 2, without a controller or gRPC.
func followerFixture(t *testing.T) (*Broker, []*partition) {
	t.Helper()
	b := unitBroker(t, 3)
	return b, []*partition{
		hostPartition(t, b, twinlog.TopicPartition{Topic: "t", Partition: 0}, 1),
		hostPartition(t, b, twinlog.TopicPartition{Topic: "t", Partition: 1}, 2),
	}
}

// Each leader's fetcher numbers only its own partitions' fetches. The
// fetcher for leader 2 used to number t/0's next fetch too (and drop it),
// which made the answer to leader 1's fetch in flight stale: every record
// was fetched again. With two leaders that was 3 follower fetches per
// acks=all produce instead of 2.
func TestFetcherKeepsOtherLeadersFetchCurrent(t *testing.T) {
	b, parts := followerFixture(t)
	items1 := follow.Next(1, b.followPartitions())
	if len(items1) != 1 || items1[0].P.(followPartition).p != parts[0] {
		t.Fatalf("leader 1's fetcher took %d items, want t/0 only", len(items1))
	}
	// Leader 2's fetcher builds its request while leader 1's is in flight.
	items2 := follow.Next(2, b.followPartitions())
	if len(items2) != 1 || items2[0].P.(followPartition).p != parts[1] {
		t.Fatalf("leader 2's fetcher took %d items, want t/1 only", len(items2))
	}
	batch, err := storage.EncodeBatch([]storage.Record{{Value: []byte("v")}}, storage.BatchOptions{LeaderEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	resp := &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{
		Topic: "t", Partition: 0, LeaderEpoch: 1, HighWatermark: 0, LogStartOffset: 0, LogEndOffset: 1, Records: batch,
	}}}
	if progress, _ := follow.Apply(items1, resp, corruptFails(t)); !progress {
		t.Fatal("apply reported no progress")
	}
	parts[0].mu.Lock()
	leo := parts[0].r.LogEndOffset()
	parts[0].mu.Unlock()
	if leo != 1 {
		t.Fatalf("t/0 LEO %d after leader 1 answered with offset 0, want 1 (answer dropped as stale)", leo)
	}
}

// corruptFails fails the test if an answer is dropped as corrupt.
func corruptFails(t *testing.T) func(follow.Item, error) {
	return func(it follow.Item, err error) { t.Errorf("%v: answer dropped: %v", it.P.TopicPartition(), err) }
}
