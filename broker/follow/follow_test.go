package follow_test

import (
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/follow"
	"github.com/twinlog/twinlog/broker/replica"
)

// TestBackoff: 20 ms, doubling to 1 s after failures; an answer resets it
// and waits only when it made no progress.
func TestBackoff(t *testing.T) {
	var b follow.Backoff
	var got []time.Duration
	for range 8 {
		got = append(got, b.Failed())
	}
	want := []time.Duration{20, 40, 80, 160, 320, 640, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	if d := b.Answered(true); d != 0 {
		t.Fatalf("wait %v after progress", d)
	}
	if d := b.Answered(false); d != follow.NoProgressWait {
		t.Fatalf("wait %v without progress", d)
	}
	if d := b.Failed(); d != follow.MinBackoff {
		t.Fatalf("first wait after an answer %v", d)
	}
}

type tpOnly struct {
	follow.Partition
	tp twinlog.TopicPartition
}

func (p tpOnly) TopicPartition() twinlog.TopicPartition { return p.tp }

// TestRequest: a follower fetch in the broker's epoch, with the limits,
// one numbered entry per item.
func TestRequest(t *testing.T) {
	items := []follow.Item{
		{P: tpOnly{tp: twinlog.TopicPartition{Topic: "t", Partition: 0}}, Req: replica.FetchRequest{FetchOffset: 5, CurrentLeaderEpoch: 2, LastFetchedEpoch: 1, Seq: 9}},
		{P: tpOnly{tp: twinlog.TopicPartition{Topic: "u", Partition: 3}}, Req: replica.FetchRequest{FetchOffset: 0, CurrentLeaderEpoch: 4, LastFetchedEpoch: -1, Seq: 10}},
	}
	req := follow.Request(7, 42, items, follow.Limits{MaxWait: 500 * time.Millisecond, MaxBytes: 1 << 20, PartitionMaxBytes: 1 << 16})
	if req.GetReplicaId() != 7 || req.GetReplicaBrokerEpoch() != 42 || req.GetFetcherType() != pb.FetcherType_FETCHER_TYPE_FOLLOWER ||
		req.GetMaxWaitMs() != 500 || req.GetMinBytes() != 1 || req.GetMaxBytes() != 1<<20 || len(req.GetPartitions()) != 2 {
		t.Fatalf("request %v", req)
	}
	p := req.GetPartitions()[1]
	if p.GetTopic() != "u" || p.GetPartition() != 3 || p.GetFetchSeq() != 10 || p.GetCurrentLeaderEpoch() != 4 || p.GetPartitionMaxBytes() != 1<<16 {
		t.Fatalf("second partition %v", p)
	}
}
