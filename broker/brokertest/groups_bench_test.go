package brokertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog/broker"
)

// BenchmarkGroupCommits is issue 16's coordinator load: 1,000 groups, each
// committing one offset every 100 ms (10,000 commits a second over
// __consumer_offsets' 50 partitions, each an acks=all append), for 10 s,
// through franz-go over the in-process cluster's Kafka listeners; it
// reports the commit latency's p50 and p99 (target p99 ≤ 10 ms on this
// machine). Every commit must succeed. TWINLOG_BENCH_GROUPS sets another
// number of groups.
//
// The groups' commit clocks are spread evenly over the 100 ms, as
// independent consumers' are. TWINLOG_BENCH_ALIGNED=1 starts them all at
// once instead: every 100 ms a burst of one commit per group arrives
// together, and the latency measured is mostly the burst's queue.
func BenchmarkGroupCommits(bm *testing.B) {
	c := NewCluster(bm, Options{MinISR: 2, Configure: func(cfg *broker.Config) { cfg.Groups.InitialRebalanceDelayMs = 100 }})
	c.CreateTopic("g", 3, 3, nil)
	const (
		every = 100 * time.Millisecond
		d     = 10 * time.Second
	)
	groups := 1000
	aligned := os.Getenv("TWINLOG_BENCH_ALIGNED") == "1"
	if n, err := strconv.Atoi(os.Getenv("TWINLOG_BENCH_GROUPS")); err == nil && n > 0 {
		groups = n // a lighter load, to tell saturation from per-commit cost
	}
	// A handful of clients, as many applications would share brokers.
	var clients []*kgo.Client
	for range 8 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.Dialer(c.KafkaDialer()))
		if err != nil {
			bm.Fatal(err)
		}
		defer cl.Close()
		clients = append(clients, cl)
	}
	commit := func(ctx context.Context, cl *kgo.Client, grp string, offset int64) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = grp, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "g"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = int32(offset%3), offset, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Warm up: every group's coordinator found and __consumer_offsets
	// created and loaded.
	for g := range groups {
		grp := fmt.Sprintf("bench-%d", g)
		for {
			err := commit(ctx, clients[g%len(clients)], grp, 0)
			if err == nil {
				break
			}
			if ctx.Err() != nil || !kerr.IsRetriable(err) {
				bm.Fatalf("warm-up commit of %s: %v", grp, err)
			}
		}
	}
	for bm.Loop() {
		var (
			mu   sync.Mutex
			lats []time.Duration
			errs int
			wg   sync.WaitGroup
		)
		end := time.Now().Add(d)
		for g := range groups {
			wg.Go(func() {
				grp, cl := fmt.Sprintf("bench-%d", g), clients[g%len(clients)]
				if !aligned {
					time.Sleep(time.Duration(g) * every / time.Duration(groups)) // this group's phase
				}
				tick := time.NewTicker(every)
				defer tick.Stop()
				for n := int64(1); time.Now().Before(end); n++ {
					start := time.Now()
					err := commit(ctx, cl, grp, n)
					lat := time.Since(start)
					mu.Lock()
					lats = append(lats, lat)
					if err != nil {
						errs++
					}
					mu.Unlock()
					<-tick.C
				}
			})
		}
		wg.Wait()
		if errs > 0 {
			bm.Fatalf("%d of %d commits failed", errs, len(lats))
		}
		bm.Logf("%d groups (aligned %t): %d commits in %v (%.0f/s), latency p50 %.2f ms p99 %.2f ms max %.2f ms; loadavg %s",
			groups, aligned, len(lats), d, float64(len(lats))/d.Seconds(), pct(lats, 0.5), pct(lats, 0.99), pct(lats, 1), loadAvg())
		bm.ReportMetric(float64(len(lats))/d.Seconds(), "commits/s")
		bm.ReportMetric(pct(lats, 0.5), "commit-p50-ms")
		bm.ReportMetric(pct(lats, 0.99), "commit-p99-ms")
	}
}
