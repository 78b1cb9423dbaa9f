package brokertest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/storage"
)

// BenchmarkCleanerUnderProduce is issue 16's cleaner target under load:
// the broker's own log cleaner compacts a compacted topic (1 partition, RF
// 3, 16 MiB segments) of 1 GiB of 1 KiB records in 16-record batches over
// 10x as many records as live keys (10% survive, as in storage's
// BenchmarkClean), while a steady produce load runs on another topic; the
// target is ≥ 100 MB/s cleaned and a produce p99 at most 20% above the
// same load's without the cleaner.
//
// The load is 6 producers (franz-go clients over the in-process cluster's
// Kafka listeners), two per partition of a 3-partition RF 3 topic
// (min.insync.replicas 2), each sending one acks=all Produce of 8 records
// of 128 bytes to its partition's leader every 20 ms (300 requests a
// second in all); every request is timed from send to response. It runs
// twice on the same cluster, after the compacted topic is written,
// replicated and synced to disk:
//
//   - baseline, 10 s: log.cleaner.threads is 0 (the cluster config that
//     turns the cleaner off, re-read before each of its looks), so the
//     dirty topic sits there uncleaned;
//   - cleaning: log.cleaner.threads is set to 1 (AlterConfigs) while the
//     load runs, each broker's cleaner (log.cleaner.backoff.ms 100) picks
//     up its replica, and the load runs until every replica is cleaned.
//     Only the requests sent while at least one broker's round ran count
//     (the rounds' spans from the broker's CleanerObserver: end time and
//     CleanRound.Duration); the benchmark fails if no cleaning round
//     swapped segments or none overlapped the load.
//
// It reports both windows' p50 and p99 (base-/clean-p50-ms, -p99-ms), the
// p99 ratio (p99-ratio, target ≤ 1.2), how many requests the cleaning
// window's percentiles are of (clean-requests), and the cleaner's
// throughput cleaned-MB/s: CleanRound.BytesBefore / CleanRound.Duration
// summed over a replica's rounds (BenchmarkClean's measure; BytesBefore
// leaves out the groups a round found nothing to remove from), of the
// slowest of the three replicas. A producer whose request outlasts its
// 20 ms period skips the ticks it missed, so a stall counts once, not as
// the requests it held up.
//
// The three brokers run in this process over bufconn, so this measures
// the implementation's costs on this machine, not a network; and all
// three clean their replicas at once on the same cores, where a real
// cluster's brokers would each have their own, so the cleaning window is
// more crowded than one broker's would be. The logs are on the real disk
// (Options.DiskDirs) like BenchmarkClean's, freshly written, so the
// cleaner mostly reads from the page cache. The broker session and replica
// lag timeouts are Kafka's defaults (9 s, 30 s), so that a busy machine
// does not fence a broker or shrink an ISR mid-measurement.
//
// Run it once with
//
//	go test -run '^$' -bench BenchmarkCleanerUnderProduce -benchtime 1x ./broker/brokertest/
//
// TWINLOG_BENCH_CLEAN_MB sets the compacted topic's size (default 1024);
// TWINLOG_BENCH_CLEAN_IO sets log.cleaner.io.max.bytes.per.second (each
// broker's cleaners' reads and writes; default unset, unthrottled).
func BenchmarkCleanerUnderProduce(bm *testing.B) {
	mb := 1024
	if n, err := strconv.Atoi(os.Getenv("TWINLOG_BENCH_CLEAN_MB")); err == nil && n > 0 {
		mb = n
	}
	configs := map[string]string{"log.cleaner.threads": "0", "log.cleaner.backoff.ms": "100"}
	if io := os.Getenv("TWINLOG_BENCH_CLEAN_IO"); io != "" {
		configs["log.cleaner.io.max.bytes.per.second"] = io
	}
	const (
		compacted  = "compacted"
		loadTopic  = "load"
		loadParts  = 3
		baseWindow = 10 * time.Second
	)
	rounds := &cleanRounds{changed: make(chan struct{}, 1)}
	c := NewCluster(bm, Options{
		MinISR: 2, DiskDirs: true,
		SessionTimeout: 9 * time.Second, ReplicaLagTimeMax: 30 * time.Second,
		ClusterConfigs: configs,
		Observer: func(id twinlog.BrokerID) broker.Observer {
			return cleanRoundObs{id: id, r: rounds}
		},
	})
	c.CreateTopic(compacted, 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(16 << 20)})
	c.CreateTopic(loadTopic, loadParts, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	start := time.Now()
	fillCompacted(ctx, bm, c, compacted, mb)
	waitReplicasCaughtUp(c, compacted)
	if err := syncLogDirs(c); err != nil { // the fill's dirty pages written back now, not during a window
		bm.Fatal(err)
	}
	fillTime := time.Since(start)
	tp := twinlog.TopicPartition{Topic: compacted}
	before := map[twinlog.BrokerID]storage.CleanerStatus{}
	for _, id := range c.IDs() {
		st, ok := c.Broker(id).LogCleanerStatus(tp)
		if !ok || !st.NeedsCleaning || !st.LastClean.IsZero() {
			bm.Fatalf("broker %d: the filled topic is not due, or already cleaned: %+v", id, st)
		}
		before[id] = st
	}
	bm.Logf("wrote %d MB to %s in %v; dirty bytes per replica %d MB", mb, compacted, fillTime.Round(time.Millisecond), before[1].DirtyBytes>>20)

	load := newProduceLoad(bm, c, loadTopic, loadParts)
	defer load.close()
	if _, err := load.run(ctx, after(2*time.Second)); err != nil { // warm-up: connections, metadata
		bm.Fatalf("warm-up: %v", err)
	}

	iterations := 0
	for bm.Loop() {
		if iterations++; iterations > 1 {
			bm.Fatal("one iteration only (the topic is clean after it): run with -benchtime 1x")
		}
		runtime.GC()
		base, err := load.run(ctx, after(baseWindow))
		if err != nil {
			bm.Fatalf("baseline: %v", err)
		}

		runtime.GC()
		stop := make(chan struct{})
		type result struct {
			samples []loadSample
			err     error
		}
		done := make(chan result, 1)
		go func() {
			s, err := load.run(ctx, stop)
			done <- result{s, err}
		}()
		enabled := time.Now()
		resp, err := c.Admin().AlterConfigs(ctx, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
			Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER},
			Set:      map[string]string{"log.cleaner.threads": "1"},
		}}})
		if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			close(stop)
			<-done
			bm.Fatalf("AlterConfigs log.cleaner.threads=1: %v %v", resp, err)
		}
		cleanedAll := func() bool {
			for _, id := range c.IDs() {
				st, ok := c.Broker(id).LogCleanerStatus(tp)
				if !ok || st.NeedsCleaning || st.LastClean.IsZero() || st.LastErr != nil {
					return false
				}
			}
			return true
		}
		timeout := time.After(20 * time.Minute)
		for !cleanedAll() {
			select {
			case <-rounds.changed:
			case <-timeout:
				close(stop)
				<-done
				bm.Fatalf("the replicas of %s not cleaned 20 min after the cleaner was enabled", compacted)
			}
		}
		close(stop)
		res := <-done
		if res.err != nil {
			bm.Fatalf("while cleaning: %v", res.err)
		}
		all := res.samples
		cleanEnd := time.Now()

		// The requests sent while a round ran on some broker.
		spans := rounds.spans()
		var during []loadSample
		for _, s := range all {
			if slices.ContainsFunc(spans, func(r cleanSpan) bool { return !s.at.Before(r.start) && s.at.Before(r.end) }) {
				during = append(during, s)
			}
		}
		var swapped bool
		slowest := -1.0
		for _, id := range c.IDs() {
			var bytes int64
			var d time.Duration
			for _, r := range spans {
				if r.id == id {
					bytes += r.round.BytesBefore
					d += r.round.Duration
					swapped = swapped || r.round.Result == "cleaned"
				}
			}
			st, _ := c.Broker(id).LogCleanerStatus(tp)
			rate := 0.0
			if d > 0 {
				rate = float64(bytes) / d.Seconds() / 1e6
			}
			if slowest < 0 || rate < slowest {
				slowest = rate
			}
			bm.Logf("broker %d: cleaned %d MB in %v (%.0f MB/s); non-active segments %d MB -> %d MB",
				id, bytes>>20, d.Round(time.Millisecond), rate,
				(before[id].CleanBytes+before[id].DirtyBytes)>>20, (st.CleanBytes+st.DirtyBytes)>>20)
		}
		if !swapped || len(during) == 0 {
			bm.Fatalf("no cleaning overlapped the load: %d rounds %+v, %d of %d requests during them", len(spans), spans, len(during), len(all))
		}
		first, last := spans[0].start, spans[0].end
		for _, r := range spans {
			if r.start.Before(first) {
				first = r.start
			}
			if r.end.After(last) {
				last = r.end
			}
		}
		bp99, cp99 := pct(durations(base), 0.99), pct(durations(during), 0.99)
		bm.Logf("baseline (cleaner off): %d requests in %v, p50 %.2f ms p99 %.2f ms max %.2f ms",
			len(base), baseWindow, pct(durations(base), 0.5), bp99, pct(durations(base), 1))
		bm.Logf("cleaning: enabled at +0, rounds from +%v to +%v (%d rounds), load until +%v; %d of %d requests during rounds: p50 %.2f ms p99 %.2f ms max %.2f ms; loadavg %s",
			first.Sub(enabled).Round(time.Millisecond), last.Sub(enabled).Round(time.Millisecond), len(spans),
			cleanEnd.Sub(enabled).Round(time.Millisecond), len(during), len(all),
			pct(durations(during), 0.5), cp99, pct(durations(during), 1), loadAvg())
		bm.ReportMetric(pct(durations(base), 0.5), "base-p50-ms")
		bm.ReportMetric(bp99, "base-p99-ms")
		bm.ReportMetric(pct(durations(during), 0.5), "clean-p50-ms")
		bm.ReportMetric(cp99, "clean-p99-ms")
		bm.ReportMetric(cp99/bp99, "p99-ratio")
		bm.ReportMetric(float64(len(during)), "clean-requests")
		bm.ReportMetric(slowest, "cleaned-MB/s")
	}
}

// fillCompacted writes about mb MiB to topic-0 through its leader's
// produce service: 1 KiB records, keys cycling over a tenth as many keys
// as records, in 16-record batches, 64 batches per acks=all request, 4
// requests in flight.
func fillCompacted(ctx context.Context, bm *testing.B, c *Cluster, topic string, mb int) {
	const (
		recordBytes  = 1 << 10
		batchRecords = 16
		perRequest   = 64 * batchRecords
	)
	records := mb << 10
	live := records / 10
	value := make([]byte, recordBytes-16)
	for i := range value {
		value[i] = byte(i)
	}
	leader, _ := c.Leader(topic, 0)
	pc := c.ProduceClient(leader)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			rs := make([]storage.Record, batchRecords)
			var buf []byte
			for {
				first := int(next.Add(perRequest)) - perRequest
				if first >= records || ctx.Err() != nil {
					return
				}
				buf = buf[:0]
				now := time.Now().UnixMilli()
				for i := first; i < min(first+perRequest, records); i += batchRecords {
					for j := range rs {
						rs[j] = storage.Record{Timestamp: now, Key: []byte("key-" + strconv.Itoa((i+j)%live)), Value: value}
					}
					b, err := storage.EncodeBatch(rs, storage.BatchOptions{})
					if err != nil {
						errs <- err
						return
					}
					buf = append(buf, b...)
				}
				resp, err := pc.Produce(ctx, &pb.ProduceRequest{Acks: -1, TimeoutMs: 30000,
					Partitions: []*pb.ProducePartitionData{{Topic: topic, Partition: 0, Records: buf}}})
				if err == nil && resp.GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
					err = fmt.Errorf("%v %s", resp.GetPartitions()[0].GetError(), resp.GetPartitions()[0].GetErrorMessage())
				}
				if err != nil {
					errs <- fmt.Errorf("produce records %d..: %w", first, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		bm.Fatalf("filling %s: %v", topic, err)
	}
}

// syncLogDirs fsyncs every file under the brokers' directories
// (Options.DiskDirs).
func syncLogDirs(c *Cluster) error {
	for _, id := range c.IDs() {
		err := filepath.WalkDir(c.node(id).dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// produceLoad is the benchmark's steady produce load (see
// BenchmarkCleanerUnderProduce): loadProducers clients, each sending one
// acks=all request to its partition's leader every loadEvery.
type produceLoad struct {
	topic   string
	topicID [16]byte
	clients []*kgo.Client
	parts   []int32
	leaders []twinlog.BrokerID
	batch   []byte
}

const (
	loadProducers = 6
	loadEvery     = 20 * time.Millisecond
)

type loadSample struct {
	at  time.Time // sent
	lat time.Duration
}

func newProduceLoad(bm *testing.B, c *Cluster, topic string, parts int) *produceLoad {
	l := &produceLoad{topic: topic}
	for i := range loadProducers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.Dialer(c.KafkaDialer()), kgo.RequiredAcks(kgo.AllISRAcks()))
		if err != nil {
			bm.Fatal(err)
		}
		l.clients = append(l.clients, cl)
		p := int32(i % parts)
		leader, _ := c.Leader(topic, p)
		l.parts, l.leaders = append(l.parts, p), append(l.leaders, leader)
		// Load the client's brokers, for Broker(id).
		l.topicID = kafkaTopicID(context.Background(), bm, cl, topic)
	}
	vals := make([][]byte, 8)
	for i := range vals {
		vals[i] = make([]byte, 128)
	}
	l.batch = EncodeValues(vals...)
	return l
}

func (l *produceLoad) close() {
	for _, cl := range l.clients {
		cl.Close()
	}
}

// run runs the load until stop and returns every request's sample, or
// an error if a request failed.
func (l *produceLoad) run(ctx context.Context, stop <-chan struct{}) ([]loadSample, error) {
	var (
		mu      sync.Mutex
		samples []loadSample
		errs    int
		lastErr error
		wg      sync.WaitGroup
	)
	for i, cl := range l.clients {
		wg.Go(func() {
			// Producers' clocks spread evenly over the period.
			select {
			case <-time.After(time.Duration(i) * loadEvery / time.Duration(len(l.clients))):
			case <-stop:
				return
			}
			tick := time.NewTicker(loadEvery)
			defer tick.Stop()
			for {
				req := kmsg.NewPtrProduceRequest()
				req.Acks, req.TimeoutMillis = -1, 10000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic, rt.TopicID = l.topic, l.topicID // v13+ sends the id
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = l.parts[i], l.batch
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				at := time.Now()
				resp, err := cl.Broker(int(l.leaders[i])).Request(ctx, req)
				lat := time.Since(at)
				if err == nil {
					err = kerr.ErrorForCode(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
				}
				mu.Lock()
				samples = append(samples, loadSample{at, lat})
				if err != nil {
					errs, lastErr = errs+1, err
				}
				mu.Unlock()
				select {
				case <-tick.C:
				case <-stop:
					return
				}
			}
		})
	}
	wg.Wait()
	if errs > 0 {
		return nil, fmt.Errorf("%d of %d produce requests failed, the last with %w", errs, len(samples), lastErr)
	}
	return samples, nil
}

// after is closed after d.
func after(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(d, func() { close(ch) })
	return ch
}

func durations(s []loadSample) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, x := range s {
		out[i] = x.lat
	}
	return out
}

// cleanRounds collects the brokers' cleaner rounds (CleanerObserver).
type cleanRounds struct {
	mu      sync.Mutex
	rounds  []cleanSpan
	changed chan struct{} // a token after each round
}

type cleanSpan struct {
	id         twinlog.BrokerID
	start, end time.Time
	round      broker.CleanRound
}

func (r *cleanRounds) spans() []cleanSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rounds)
}

// cleanRoundObs is a broker's Observer that records its cleaner rounds.
type cleanRoundObs struct {
	nopObs
	id twinlog.BrokerID
	r  *cleanRounds
}

// ObserveCleanRound implements broker.CleanerObserver: the broker calls
// it when the round ended.
func (o cleanRoundObs) ObserveCleanRound(cr broker.CleanRound) {
	end := time.Now()
	o.r.mu.Lock()
	o.r.rounds = append(o.r.rounds, cleanSpan{id: o.id, start: end.Add(-cr.Duration), end: end, round: cr})
	o.r.mu.Unlock()
	select {
	case o.r.changed <- struct{}{}:
	default:
	}
}

func (cleanRoundObs) ObserveCleanerState(float64, time.Duration, int) {}
