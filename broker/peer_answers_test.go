package broker

import (
	"testing"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestFetcherEmptyAnswer (issue 13, peers): a leader's answer with no
// partitions, or only partitions nobody asked for, is no progress and
// changes nothing: no panic, the replica's log and fetch state stay, and
// the next fetch is numbered and sent as usual (the fetcher does not wedge).
func TestFetcherEmptyAnswer(t *testing.T) {
	b, parts := followerFixture(t)
	f := &fetcher{b: b, leader: 1}
	for _, resp := range []*pb.FetchResponse{
		nil,
		{},
		{Partitions: []*pb.FetchPartitionResponse{nil}},
		{Partitions: []*pb.FetchPartitionResponse{{Topic: "other", Partition: 7, LeaderEpoch: 1, HighWatermark: 5, LogEndOffset: 5}}},
	} {
		items := f.nextItems()
		if len(items) != 1 || items[0].p != parts[0] {
			t.Fatalf("fetcher took %d items, want t/0", len(items))
		}
		if f.apply(items, resp) {
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
