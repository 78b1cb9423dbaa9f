package brokertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/storage"
)

// keyed is a record of the compaction test; a nil value is a tombstone.
type keyed struct {
	off   twinlog.Offset
	key   string
	value []byte
}

// produceKeyed sends one batch of recs (acks=all) to the leader of
// topic-0, retrying on leader moves, and returns its base offset.
func produceKeyed(ctx context.Context, t *testing.T, c *Cluster, topic string, recs []keyed) twinlog.Offset {
	t.Helper()
	rs := make([]storage.Record, len(recs))
	for i, r := range recs {
		rs[i] = storage.Record{Timestamp: time.Now().UnixMilli(), Value: r.value}
		if r.key != "" {
			rs[i].Key = []byte(r.key)
		}
	}
	for {
		b, err := storage.EncodeBatch(rs, storage.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		leader, _ := c.Leader(topic, 0)
		resp, err := c.ProduceClient(leader).Produce(ctx, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000,
			Partitions: []*pb.ProducePartitionData{{Topic: topic, Partition: 0, Records: b}}})
		if err == nil && resp.GetPartitions()[0].GetError() == pb.ErrorCode_ERROR_CODE_NONE {
			return twinlog.Offset(resp.GetPartitions()[0].GetBaseOffset())
		}
		if ctx.Err() != nil {
			t.Fatalf("produce: %v %v", err, resp)
		}
		c.waitChangeOr(ctx, 50*time.Millisecond)
	}
}

// consumeKeyed reads topic-0 from its leader below the HW as a Kafka
// consumer does: batch by batch, the next fetch at the last batch's next
// offset (an empty batch moves it too).
func consumeKeyed(ctx context.Context, t *testing.T, c *Cluster, topic string) ([]keyed, twinlog.Offset) {
	t.Helper()
	leader, le := c.Leader(topic, 0)
	var out []keyed
	var off, hw twinlog.Offset
	for first := true; first || off < hw; first = false {
		resp, err := c.FetchClient(leader).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
			MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: topic, FetchOffset: int64(off), CurrentLeaderEpoch: int32(le), LastFetchedEpoch: -1}}})
		if err != nil || resp.GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("fetch at %d from %d: %v %v", off, leader, err, resp)
		}
		pr := resp.GetPartitions()[0]
		hw = twinlog.Offset(pr.GetHighWatermark())
		n := 0
		for b, err := range storage.Batches(pr.GetRecords()) {
			if err != nil {
				t.Fatal(err)
			}
			rs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				out = append(out, keyed{r.Offset, string(r.Key), r.Value})
			}
			off, n = b.NextOffset(), n+1
		}
		if n == 0 {
			break
		}
	}
	return out, hw
}

// TestCompactedTopic: a compacted topic refuses keyless records; its
// leader and followers each clean their logs; a follower that was down
// catches up by copying the compacted leader's batches, gaps and all, and
// cleans its own copy; after the leader dies a consumer of the new leader
// reads per key the latest record below the cleaned end, each at the
// offset it was produced at, and everything after it.
func TestCompactedTopic(t *testing.T) {
	c := NewCluster(t, Options{MinISR: 2, Configure: func(cfg *broker.Config) { cfg.Log.SegmentMaxBytes = 2048 }})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := c.Admin().AlterConfigs(ctx, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
		Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER},
		Set:      map[string]string{"log.cleaner.backoff.ms": "20", "log.cleaner.threads": "2"},
	}}})
	if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("AlterConfigs: %v %v", resp, err)
	}
	const topic = "compacted"
	c.CreateTopic(topic, 1, 3, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
	tp := twinlog.TopicPartition{Topic: topic}

	leader, _ := c.Leader(topic, 0)
	b, _ := storage.EncodeBatch([]storage.Record{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte("no key")}}, storage.BatchOptions{})
	pr, err := c.ProduceClient(leader).Produce(ctx, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000,
		Partitions: []*pb.ProducePartitionData{{Topic: topic, Records: b}}})
	if err != nil || pr.GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_INVALID_RECORD ||
		!strings.Contains(pr.GetPartitions()[0].GetErrorMessage(), "without a key") {
		t.Fatalf("keyless record: %v %v", pr, err)
	}

	var model []keyed
	produce := func(batches int) {
		for range batches {
			var recs []keyed
			for range 4 {
				x := len(model) + len(recs)
				r := keyed{key: fmt.Sprintf("k%d", x%9), value: fmt.Appendf(nil, "v%d-%s", x, strings.Repeat("x", 40))}
				if x%13 == 12 {
					r.value = nil
				}
				recs = append(recs, r)
			}
			base := produceKeyed(ctx, t, c, topic, recs)
			for i := range recs {
				recs[i].off = base + twinlog.Offset(i)
			}
			model = append(model, recs...)
		}
	}
	produce(30)
	follower := twinlog.BrokerID(1)
	if follower == leader {
		follower = 2
	}
	c.StopBroker(follower)
	produce(30)
	cleaned := func(id twinlog.BrokerID) func() bool {
		return func() bool {
			st, ok := c.Broker(id).LogCleanerStatus(tp)
			return ok && st.LastStats.RecordsRemoved > 0 && !st.NeedsCleaning
		}
	}
	for _, id := range c.IDs() {
		if id != follower {
			c.WaitFor(fmt.Sprintf("broker %d cleaned its log", id), cleaned(id))
		}
	}
	c.RestartBroker(follower)
	c.WaitFor("the restarted follower back in the ISR", func() bool {
		_, _, isr, _, ok := c.PartitionInfo(topic, 0)
		return ok && len(isr) == 3
	})
	produce(5) // the follower's copy of the compacted batches is below its HW
	c.WaitFor(fmt.Sprintf("broker %d cleaned its copy", follower), cleaned(follower))

	check := func(what string) {
		t.Helper()
		got, hw := consumeKeyed(ctx, t, c, topic)
		end := twinlog.Offset(0)
		for _, id := range c.IDs() {
			if c.Running(id) {
				st, _ := c.Broker(id).LogCleanerStatus(tp)
				end = max(end, st.FirstDirtyOffset)
			}
		}
		latest := map[string]twinlog.Offset{}
		for _, r := range model {
			if r.off < end {
				latest[r.key] = r.off
			}
		}
		byOff := map[twinlog.Offset]keyed{}
		for _, r := range model {
			byOff[r.off] = r
		}
		gaps := 0
		prev := twinlog.Offset(-1)
		seen := map[twinlog.Offset]bool{}
		for _, r := range got {
			w, ok := byOff[r.off]
			if !ok || w.key != r.key || string(w.value) != string(r.value) || (w.value == nil) != (r.value == nil) {
				t.Fatalf("%s: read %s=%q at %d, produced %s=%q", what, r.key, r.value, r.off, w.key, w.value)
			}
			if r.off != prev+1 {
				gaps++
			}
			prev = r.off
			seen[r.off] = true
		}
		for _, r := range model {
			if r.off >= hw {
				continue
			}
			if latest[r.key] == r.off || r.off >= end {
				if !seen[r.off] {
					t.Fatalf("%s: the latest record of %s at %d is missing (cleaned to %d, HW %d)", what, r.key, r.off, end, hw)
				}
			}
		}
		if gaps == 0 || len(got) >= len(model) {
			t.Fatalf("%s: %d records of %d, %d gaps: not compacted", what, len(got), len(model), gaps)
		}
	}
	check("from the first leader")
	// The follower that copied the compacted batches leads next.
	c.KillBroker(leader)
	for _, id := range c.IDs() {
		if id != leader && id != follower {
			c.KillBroker(id)
		}
	}
	c.WaitFor("the restarted follower leads", func() bool { l, _, _, _, ok := c.PartitionInfo(topic, 0); return ok && l == follower })
	check("from the restarted follower")
}
