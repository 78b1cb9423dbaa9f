package broker

import (
	"testing"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/follow"
)

// TestFetcherEmptyAnswer (issue 13, peers): a leader's answer with no
// partitions, or only partitions nobody asked for, is no progress and
// changes nothing: no panic, the replica's log and fetch state stay, and
// the next fetch is numbered and sent as usual (the fetcher does not wedge).
func TestFetcherEmptyAnswer(t *testing.T) {
	b, parts := followerFixture(t)
	for _, resp := range []*pb.FetchResponse{
		nil,
		{},
		{Partitions: []*pb.FetchPartitionResponse{nil}},
		{Partitions: []*pb.FetchPartitionResponse{{Topic: "other", Partition: 7, LeaderEpoch: 1, HighWatermark: 5, LogEndOffset: 5}}},
	} {
		items := follow.Next(1, b.followPartitions())
		if len(items) != 1 || items[0].P.(followPartition).p != parts[0] {
			t.Fatalf("fetcher took %d items, want t/0", len(items))
		}
		if progress, _ := follow.Apply(items, resp, corruptFails(t)); progress {
			t.Errorf("answer %v reported progress", resp)
		}
		parts[0].mu.Lock()
		leo, hw := parts[0].r.LogEndOffset(), parts[0].r.HighWatermark()
		parts[0].mu.Unlock()
		if leo != 0 || hw != 0 {
			t.Errorf("answer %v moved LEO/HW to %d/%d", resp, leo, hw)
		}
	}
}
