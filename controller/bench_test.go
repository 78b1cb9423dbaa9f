package controller

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/boltstore"
)

// benchController builds a controller without Run (no gRPC serving needed
// unless the benchmark dials it) with nbrokers registered and unfenced.
func benchController(b *testing.B, clock *fakeClock, nbrokers int) (*Controller, map[int32]int64) {
	b.Helper()
	c, err := New(Config{DataDir: b.TempDir(), ClusterID: "bench", TickInterval: time.Hour}, Deps{
		Logger: slog.New(slog.DiscardHandler), Now: clock.Now,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	srv := controllerServer{c: c}
	epochs := map[int32]int64{}
	for id := int32(1); id <= int32(nbrokers); id++ {
		r, err := srv.RegisterBroker(context.Background(), &twinlogv1.RegisterBrokerRequest{BrokerId: id, Host: "h", Port: 1, PreviousBrokerEpoch: -1})
		if err != nil {
			b.Fatal(err)
		}
		epochs[id] = r.GetBrokerEpoch()
	}
	for id := int32(1); id <= int32(nbrokers); id++ {
		if _, err := c.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: epochs[id], AppliedOffset: c.Offset()}); err != nil {
			b.Fatal(err)
		}
	}
	return c, epochs
}

func createTopics(b *testing.B, c *Controller, topics, partitions int, assign func(t, p int) []int32) {
	b.Helper()
	admin := adminServer{c: c}
	for i := range topics {
		ct := &twinlogv1.CreatableTopic{Name: fmt.Sprintf("topic-%04d", i), NumPartitions: int32(partitions), ReplicationFactor: 3}
		if assign != nil {
			ct.NumPartitions, ct.ReplicationFactor = 0, 0
			for p := range partitions {
				ct.Assignments = append(ct.Assignments, &twinlogv1.ReplicaAssignment{Replicas: assign(i, p)})
			}
		}
		r, err := admin.CreateTopics(context.Background(), &twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{ct}})
		if err != nil {
			b.Fatal(err)
		}
		if e := r.GetTopics()[0].GetError(); e != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			b.Fatalf("create: %v %s", e, r.GetTopics()[0].GetErrorMessage())
		}
	}
}

// BenchmarkCreate100kPartitions: 100 topics × 1000 partitions, RF 3, 6
// brokers; one CreateTopics (one delta, one bbolt transaction) per topic.
func BenchmarkCreate100kPartitions(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		c, _ := benchController(b, newClock(), 6)
		b.StartTimer()
		createTopics(b, c, 100, 1000, nil)
		b.StopTimer()
		size, _ := c.store.(*boltstore.Store).FileSize()
		b.ReportMetric(float64(size)/(1<<20), "bbolt_MB")
		c.Close()
		b.StartTimer()
	}
}

// BenchmarkFence10kLeaders: broker 1 leads 10,000 partitions (of 30,000);
// its session times out and one Tick fences it. The measured time covers
// computing, persisting (fsync) and applying the change in which every one
// of them gets a new leader.
func BenchmarkFence10kLeaders(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		clock := newClock()
		c, epochs := benchController(b, clock, 6)
		// Topics 0-9 led by 1, topics 10-29 led by others.
		createTopics(b, c, 30, 1000, func(t, p int) []int32 {
			if t < 10 {
				return []int32{1, int32(2 + p%5), int32(2 + (p+1)%5)}
			}
			l := int32(2 + (t+p)%5)
			return []int32{l, 1, 2 + (l-1)%5}
		})
		if err := c.Tick(context.Background()); err != nil {
			b.Fatal(err)
		}
		clock.Advance(10 * time.Second)
		for id := int32(2); id <= 6; id++ {
			if _, err := c.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: epochs[id], AppliedOffset: c.Offset()}); err != nil {
				b.Fatal(err)
			}
		}
		before := c.Offset()
		b.StartTimer()
		if err := c.Tick(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if c.Offset() == before {
			b.Fatal("nothing fenced")
		}
		moved := 0
		for t := range 10 {
			for p := range int32(1000) {
				pr := c.state.Partition(fmt.Sprintf("topic-%04d", t), p)
				if pr.GetLeader() == 1 || pr.GetLeader() < 0 {
					b.Fatalf("%d-%d: %v", t, p, pr)
				}
				moved++
			}
		}
		// Persisted: the change is in the log.
		ds, err := c.store.ReadDeltas(before+1, 0)
		if err != nil || len(ds) != 1 || len(ds[0].GetPartitions()) < 10000 {
			b.Fatalf("persisted delta: %d deltas, err %v", len(ds), err)
		}
		b.ReportMetric(float64(moved), "leaders_moved")
		c.Close()
		b.StartTimer()
	}
}

// BenchmarkDescribeTopicPartitions100k follows nextCursor over 100,000
// partitions (100 topics × 1000) through gRPC on bufconn with the default
// server limit (1000 per page).
func BenchmarkDescribeTopicPartitions100k(b *testing.B) {
	clock := newClock()
	nw := newNet()
	c, err := New(Config{DataDir: b.TempDir(), ClusterID: "bench", TickInterval: time.Hour}, Deps{
		Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Listener: nw.listen("ctl:1"),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv := controllerServer{c: c}
	for id := int32(1); id <= 6; id++ {
		r, err := srv.RegisterBroker(ctx, &twinlogv1.RegisterBrokerRequest{BrokerId: id, Host: "h", Port: 1, PreviousBrokerEpoch: -1})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: r.GetBrokerEpoch(), AppliedOffset: c.Offset() + 1}); err != nil {
			b.Fatal(err)
		}
	}
	createTopics(b, c, 100, 1000, nil)
	conn, err := nw.dial("ctl:1")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	admin := twinlogv1.NewAdminServiceClient(conn)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	peak := uint64(0)
	b.ResetTimer()
	for b.Loop() {
		var cursor *twinlogv1.Cursor
		total, pages := 0, 0
		for {
			r, err := admin.DescribeTopicPartitions(ctx, &twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 5000, Cursor: cursor})
			if err != nil {
				b.Fatal(err)
			}
			pages++
			for _, t := range r.GetTopics() {
				total += len(t.GetPartitions())
			}
			if pages%10 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
			if r.GetNextCursor() == nil {
				break
			}
			cursor = r.GetNextCursor()
		}
		if total != 100000 || pages != 100 {
			b.Fatalf("%d partitions in %d pages", total, pages)
		}
	}
	b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "peak_heap_above_base_MB")
	b.ReportMetric(float64(base)/(1<<20), "base_heap_MB")
}
