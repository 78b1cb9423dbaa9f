// Command twinbench is a load generator for twinlog in the spirit of
// kafka-producer-perf-test and the OpenMessaging Benchmark: producers with
// batching and several requests in flight per partition, consumers measuring
// end-to-end latency, HDR histograms, a table or --json.
//
//	twinbench --inprocess --partitions 8 --rf 3 --min-isr 2 --acks -1 --record-size 1024 --duration 30s
//	twinbench --bootstrap 127.0.0.1:9091 --rate 2000 --duration 60s --json
//	twinbench --inprocess --kafka   # the same load through the Kafka listeners (franz-go)
//	twinbench --inprocess --kafka --compression lz4 --payload text   # lz4 batches of log-like values
//	twinbench --bootstrap 127.0.0.1:9091 --kafka --kafka-bootstrap 127.0.0.1:9291 --pids 101,102,103   # cluster A's brokerd pids: the brokers' own CPU s/MB
//	twinbench --inprocess --tls     # mutual TLS on every hop (see tls.go)
//	twinbench --inprocess --compare-tls 3 --duration 20s   # plaintext and TLS alternately, medians
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"math"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	tlstransport "github.com/twinlog/twinlog/security/transport"
	"github.com/twinlog/twinlog/storage"
)

type options struct {
	bootstrap    string
	inprocess    bool
	brokers      int
	topic        string
	partitions   int
	rf           int
	minISR       int
	acks         int
	recordSize   int
	batchRecords int
	inflight     int
	duration     time.Duration
	warmup       time.Duration
	rate         float64
	consume      bool
	syncEach     bool
	jsonOut      bool
	dataDir      string
	pprofAddr    string
	pids         string
	floor        bool
	// kafka drives the brokers' Kafka listeners (franz-go) instead of
	// gRPC: the same batches, requests in flight and consumers.
	kafka          bool
	kafkaBootstrap string
	// tls runs the in-process cluster with mutual TLS on every hop
	// (controller, brokers, replication, the bench's clients); see tls.go.
	tls bool
	// compareTLS runs the in-process benchmark this many times in
	// plaintext and as many with TLS, alternately, and prints medians.
	compareTLS int
	// client is the bench's clients' TLS (nil: plaintext), set by
	// --inprocess --tls.
	client *tlstransport.Transport
	// compression is the producers' batch codec, payload what their
	// values hold (payload.go).
	compression compression
	payload     payload
	// cpuSplit profiles the measured window to tell the in-process
	// brokers' CPU from the load generator's (cpusplit.go).
	cpuSplit bool
}

// The brokers' non-zeroing gRPC buffer pool also for the proto codec (and,
// with --inprocess, the brokers in this process).
func init() { experimental.SetDefaultBufferPool(broker.BufferPool) }

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2) // the flag set printed the error and the usage
	}
	if o.pprofAddr != "" {
		runtime.SetBlockProfileRate(int(100 * time.Microsecond))
		runtime.SetMutexProfileFraction(10)
		go func() { _ = http.ListenAndServe(o.pprofAddr, nil) }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "twinbench:", err)
		os.Exit(1)
	}
}

// parseFlags parses the command line; errors and --help are printed to
// out.
func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("twinbench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.bootstrap, "bootstrap", "", "broker host:port of a running cluster")
	fs.BoolVar(&o.inprocess, "inprocess", false, "start a controller and --brokers brokers in this process (TCP loopback, temp dirs)")
	fs.IntVar(&o.brokers, "brokers", 3, "brokers for --inprocess")
	fs.StringVar(&o.topic, "topic", "", "topic (default: bench-<unix time>, created)")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions")
	fs.IntVar(&o.rf, "rf", 3, "replication factor")
	fs.IntVar(&o.minISR, "min-isr", 2, "min.insync.replicas of the topic")
	fs.IntVar(&o.acks, "acks", -1, "acks: 0, 1 or -1 (all)")
	fs.IntVar(&o.recordSize, "record-size", 1024, "record value bytes")
	fs.IntVar(&o.batchRecords, "batch", 64, "records per batch (one batch per request)")
	fs.IntVar(&o.inflight, "inflight", 4, "concurrent requests per partition")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "measured run time")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up")
	fs.Float64Var(&o.rate, "rate", 0, "target records/s over all partitions (0: as fast as possible)")
	fs.BoolVar(&o.consume, "consume", true, "run consumers and measure end-to-end latency")
	fs.BoolVar(&o.syncEach, "fsync", false, "--inprocess: fsync every batch on every replica (group commit)")
	fs.BoolVar(&o.jsonOut, "json", false, "print JSON instead of a table")
	fs.StringVar(&o.dataDir, "data-dir", "", "--inprocess: data directory (default: a temp dir, removed)")
	fs.StringVar(&o.pids, "pids", "", "comma-separated broker process ids to report CPU (also per MB of payload acknowledged) and RSS for (brokers started outside twinbench): the brokers' CPU alone, without the load generator's")
	fs.BoolVar(&o.kafka, "kafka", false, "produce and consume through the brokers' Kafka listeners (franz-go) instead of gRPC, with the same batches and requests in flight")
	fs.StringVar(&o.kafkaBootstrap, "kafka-bootstrap", "", "with --kafka and --bootstrap: a broker's Kafka listener host:port")
	fs.Var(&o.compression, "compression", "batch compression `codec`, "+choices(compressionCodecs)+" (default none), on either API: each request's batch is compressed "+
		"with franz-go's compressor (kgo.DefaultCompressor, what kgo.ProducerBatchCompression installs) and sent uncompressed when that is not shorter, as kgo does")
	fs.Var(&o.payload, "payload", "record values after their 8-byte send time, a `kind`: zeros (the default; compress to almost nothing), random (incompressible), "+
		"text (JSON log lines, compress about as logs do: 2.6x with lz4)")
	fs.BoolVar(&o.cpuSplit, "cpu-split", false, "--inprocess: CPU-profile the measured window and report the brokers' share of the process CPU (per MB too) apart from the load generator's, by profiler labels")
	fs.BoolVar(&o.tls, "tls", false, "--inprocess: mutual TLS on every hop (a CA and certificates made in the data dir; the bench's clients dial with TLS too)")
	fs.IntVar(&o.compareTLS, "compare-tls", 0, "--inprocess: run the benchmark N times in plaintext and N times with --tls, alternately, each on a fresh cluster, and print the medians")
	fs.BoolVar(&o.floor, "floor", false, "measure the machine's floor instead: one bare gRPC echo of a request's bytes on loopback, at the same request rate")
	fs.StringVar(&o.pprofAddr, "pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q", fs.Args())
		fmt.Fprintln(out, "twinbench:", err)
		return options{}, err
	}
	return o, nil
}

// Result is the --json output.
type Result struct {
	Config          map[string]any `json:"config"`
	DurationSeconds float64        `json:"duration_seconds"`
	Records         int64          `json:"records"`
	// Bytes is the acknowledged records' values (payload), uncompressed.
	Bytes int64 `json:"bytes"`
	// BatchBytes is the acknowledged batches as sent (compressed with
	// --compression), UncompressedBatchBytes the same batches before
	// compression: their ratio is the codec's on this payload.
	BatchBytes             int64          `json:"batch_bytes"`
	UncompressedBatchBytes int64          `json:"uncompressed_batch_bytes"`
	CompressionRatio       float64        `json:"compression_ratio"`
	RecordsPerSec          float64        `json:"records_per_sec"`
	MBPerSec               float64        `json:"mb_per_sec"`
	Requests               int64          `json:"requests"`
	Errors                 map[string]int `json:"errors"`
	ProduceLatencyMs       Percentiles    `json:"produce_latency_ms"`
	EndToEndLatencyMs      *Percentiles   `json:"end_to_end_latency_ms,omitempty"`
	ConsumedRecords        int64          `json:"consumed_records"`
	Process                *ProcessStats  `json:"process,omitempty"`
	Brokers                []BrokerStats  `json:"brokers,omitempty"`
	// BrokersCPUSecondsPerMB is the --pids processes' CPU seconds,
	// together, per MB (1e6 bytes) of payload acknowledged: the brokers'
	// CPU alone when they run as their own processes.
	BrokersCPUSecondsPerMB float64 `json:"brokers_cpu_seconds_per_mb,omitempty"`
	// LoadAvg is /proc/loadavg at the end: other work on the machine
	// competes for the same cores.
	LoadAvg string `json:"loadavg,omitempty"`
}

// BrokerStats is the CPU and RSS of a broker process given by --pids.
type BrokerStats struct {
	PID        int     `json:"pid"`
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUCores   float64 `json:"cpu_cores_avg"`
	MaxRSSMB   float64 `json:"max_rss_mb"`
}

// Percentiles of a latency histogram in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// ProcessStats is this process's CPU and RSS (the brokers, with
// --inprocess, share it with the load generator).
type ProcessStats struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUCores   float64 `json:"cpu_cores_avg"`
	// CPUSecondsPerMB is CPUSeconds per MB (1e6 bytes) of payload
	// acknowledged. With --inprocess it is the brokers' and the load
	// generator's (producers, compression, consumers, decompression)
	// together; the brokers' alone needs them in their own processes
	// and --pids (Result.BrokersCPUSecondsPerMB).
	CPUSecondsPerMB float64 `json:"cpu_seconds_per_mb"`
	MaxRSSMB        float64 `json:"max_rss_mb"`
	// With --cpu-split: LoadCPUShare is the load generator's share of the
	// CPU profile's samples, BrokersCPUSeconds the rest of CPUSeconds (the
	// in-process brokers' and the Go runtime's background work), per MB
	// of payload acknowledged in BrokersCPUSecondsPerMB.
	LoadCPUShare           float64 `json:"load_cpu_share,omitempty"`
	BrokersCPUSeconds      float64 `json:"brokers_cpu_seconds,omitempty"`
	BrokersCPUSecondsPerMB float64 `json:"brokers_cpu_seconds_per_mb,omitempty"`
}

func percentiles(h *hdr.Histogram) Percentiles {
	ms := func(v int64) float64 { return float64(v) / 1000 }
	return Percentiles{P50: ms(h.ValueAtQuantile(50)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000}
}

// dial connects to a broker with tr's client credentials (nil: plaintext).
func dial(addr string, tr *tlstransport.Transport) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(tr.ClientCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
		experimental.WithBufferPool(broker.BufferPool),
		grpc.WithWriteBufferSize(256<<10), grpc.WithReadBufferSize(256<<10),
		grpc.WithInitialWindowSize(16<<20), grpc.WithInitialConnWindowSize(64<<20))
}

type cluster struct {
	conns   map[int32]*grpc.ClientConn
	leaders []int32
	les     []int32
}

// spreadAssignments places partition p's replicas on brokers p, p+1, ...
// (sorted ids, round-robin) so leaders, the first replica, are spread
// evenly and deterministically over the brokers. nil (let the controller
// place) when the brokers cannot be listed.
func spreadAssignments(ctx context.Context, boot *grpc.ClientConn, parts, rf int) []*pb.ReplicaAssignment {
	md, err := pb.NewFetchServiceClient(boot).Metadata(ctx, &pb.MetadataRequest{})
	if err != nil || len(md.GetBrokers()) < rf {
		return nil
	}
	var ids []int32
	for _, b := range md.GetBrokers() {
		ids = append(ids, b.GetId())
	}
	slices.Sort(ids)
	out := make([]*pb.ReplicaAssignment, parts)
	for p := range parts {
		a := &pb.ReplicaAssignment{}
		for j := range rf {
			a.Replicas = append(a.Replicas, ids[(p+j)%len(ids)])
		}
		out[p] = a
	}
	return out
}

func discover(ctx context.Context, boot *grpc.ClientConn, topic string, parts int, tr *tlstransport.Transport) (*cluster, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := pb.NewFetchServiceClient(boot).Metadata(ctx, &pb.MetadataRequest{Topics: []string{topic}})
		if err == nil && len(md.GetTopics()) == 1 && md.GetTopics()[0].GetError() == pb.ErrorCode_ERROR_CODE_NONE &&
			len(md.GetTopics()[0].GetPartitions()) == parts {
			c := &cluster{conns: map[int32]*grpc.ClientConn{}}
			addrs := map[int32]string{}
			for _, b := range md.GetBrokers() {
				addrs[b.GetId()] = b.GetHost() + ":" + strconv.Itoa(int(b.GetPort()))
			}
			ok := true
			for _, p := range md.GetTopics()[0].GetPartitions() {
				if p.GetLeaderId() < 0 || len(p.GetIsr()) < len(p.GetReplicas()) {
					ok = false
					break
				}
				c.leaders = append(c.leaders, p.GetLeaderId())
				c.les = append(c.les, p.GetLeaderEpoch())
			}
			if ok {
				spread := map[int32]int{}
				for _, l := range c.leaders {
					spread[l]++
				}
				fmt.Fprintf(os.Stderr, "twinbench: partition leaders per broker %v\n", spread)
				for _, l := range c.leaders {
					if _, done := c.conns[l]; done {
						continue
					}
					conn, err := dial(addrs[l], tr)
					if err != nil {
						return nil, err
					}
					c.conns[l] = conn
				}
				return c, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topic %s not ready (last error %v)", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func run(ctx context.Context, o options) error {
	if o.floor {
		res, err := floor(ctx, o)
		if err != nil {
			return err
		}
		return output(o, res, printFloor)
	}
	if o.compareTLS > 0 {
		return compareTLS(ctx, o)
	}
	res, err := runOnce(ctx, o)
	if err != nil {
		return err
	}
	return output(o, res, printTable)
}

// runOnce starts the in-process cluster with --inprocess, creates the
// topic unless --topic names one, and runs the load.
func runOnce(ctx context.Context, o options) (*Result, error) {
	if o.tls && !o.inprocess {
		return nil, errors.New("--tls needs --inprocess")
	}
	if o.cpuSplit && !o.inprocess {
		return nil, errors.New("--cpu-split needs --inprocess (brokers in their own processes: --pids)")
	}
	if o.inprocess {
		ip, err := startInProcess(ctx, o)
		if err != nil {
			return nil, err
		}
		defer ip.stop()
		o.bootstrap, o.kafkaBootstrap, o.client = ip.bootstrap, ip.kafkaBootstrap, ip.client
	}
	// Everything the load starts from here carries its profiler label,
	// the brokers' goroutines none (--cpu-split).
	var res *Result
	var err error
	withLoadLabel(ctx, func(ctx context.Context) { res, err = runLoad(ctx, o) })
	return res, err
}

// runLoad creates the topic unless --topic names one and runs the load.
func runLoad(ctx context.Context, o options) (*Result, error) {
	if o.bootstrap == "" {
		return nil, errors.New("--bootstrap or --inprocess is required")
	}
	boot, err := dial(o.bootstrap, o.client)
	if err != nil {
		return nil, err
	}
	defer boot.Close()
	if o.topic == "" {
		o.topic = fmt.Sprintf("bench-%d", time.Now().UnixNano())
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ct := &pb.CreatableTopic{
			Name: o.topic, NumPartitions: int32(o.partitions), ReplicationFactor: int32(o.rf),
			Configs: map[string]string{"min.insync.replicas": strconv.Itoa(o.minISR)},
		}
		if as := spreadAssignments(cctx, boot, o.partitions, o.rf); as != nil {
			ct.NumPartitions, ct.ReplicationFactor, ct.Assignments = 0, 0, as
		}
		resp, err := pb.NewAdminServiceClient(boot).CreateTopics(cctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{ct}})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("create topic: %w", err)
		}
		if e := resp.GetTopics()[0].GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
			return nil, fmt.Errorf("create topic: %v %s", e, resp.GetTopics()[0].GetErrorMessage())
		}
	}
	cl, err := discover(ctx, boot, o.topic, o.partitions, o.client)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range cl.conns {
			c.Close()
		}
	}()
	var tr transport = grpcTransport{o: o, cl: cl}
	if o.kafka {
		if o.kafkaBootstrap == "" {
			return nil, errors.New("--kafka needs --kafka-bootstrap with --bootstrap (or --inprocess)")
		}
		kt, err := newKafkaTransport(ctx, o, cl)
		if err != nil {
			return nil, err
		}
		defer kt.close()
		tr = kt
	}
	return bench(ctx, o, tr), nil
}

// output prints res as indented JSON with --json, else as table does.
func output(o options, res *Result, table func(*Result)) error {
	if o.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	table(res)
	return nil
}

func bench(ctx context.Context, o options, tr transport) *Result {
	var (
		measuring atomic.Bool
		records   atomic.Int64
		bytes     atomic.Int64
		sent      atomic.Int64 // batch bytes as sent
		raw       atomic.Int64 // the same batches uncompressed
		requests  atomic.Int64
		consumed  atomic.Int64
		errMu     sync.Mutex
		errs      = map[string]int{}
		histMu    sync.Mutex
		prodHist  = hdr.New(1, 60_000_000, 3) // µs
		e2eHist   = hdr.New(1, 60_000_000, 3)
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	workers := o.partitions * o.inflight
	perWorkerRate := o.rate / float64(workers)
	comp := o.compression.compressor()
	for p := 0; p < o.partitions; p++ {
		for w := 0; w < o.inflight; w++ {
			k := p*o.inflight + w // worker index, for the --rate phase
			send := tr.producer(p, k)
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := newStamper(o.payload.values(o.batchRecords, o.recordSize, uint64(k)), comp)
				interval := time.Duration(0)
				if perWorkerRate > 0 {
					interval = time.Duration(float64(time.Second) * float64(o.batchRecords) / perWorkerRate)
				}
				// With --rate, worker k starts k/workers of an interval late:
				// the workers' requests interleave evenly instead of every
				// worker sending at the same instant (a burst of workers
				// batches once per interval, which measured queueing, not the
				// steady rate asked for).
				next := time.Now().Add(time.Duration(int64(interval) * int64(k) / int64(workers)))
				tick := time.NewTimer(time.Hour)
				defer tick.Stop()
				for runCtx.Err() == nil {
					if interval > 0 {
						if d := time.Until(next); d > 0 {
							tick.Reset(d)
							select {
							case <-tick.C:
							case <-runCtx.Done():
								return
							}
						}
						next = next.Add(interval)
					}
					buf := st.stamp(time.Now())
					start := time.Now()
					code, err := send(runCtx, buf)
					lat := time.Since(start)
					if !measuring.Load() {
						continue
					}
					requests.Add(1)
					if err != nil {
						if runCtx.Err() != nil {
							return
						}
						code = "rpc: " + strings.SplitN(err.Error(), ":", 3)[len(strings.SplitN(err.Error(), ":", 3))-1]
					}
					if code != "" {
						errMu.Lock()
						errs[code]++
						errMu.Unlock()
						continue
					}
					records.Add(int64(o.batchRecords))
					bytes.Add(int64(o.batchRecords * o.recordSize))
					sent.Add(int64(len(buf)))
					raw.Add(int64(len(st.buf)))
					histMu.Lock()
					_ = prodHist.RecordValue(max(lat.Microseconds(), 1))
					histMu.Unlock()
				}
			}()
		}
	}
	if o.consume {
		for p := 0; p < o.partitions; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var off int64 = -1
				fetch := tr.consumer(p)
				for runCtx.Err() == nil {
					if off < 0 { // start at the end
						hw, err := tr.highWatermark(runCtx, p)
						if err != nil {
							time.Sleep(50 * time.Millisecond)
							continue
						}
						off = hw
					}
					records, err := fetch(runCtx, off)
					if err != nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					now := time.Now().UnixNano()
					var lats []int64
					for bv := range splitBatches(records) {
						rs, err := bv.Records() // validates, crc included
						if err != nil {
							break
						}
						for _, r := range rs {
							if len(r.Value) >= 8 {
								lats = append(lats, (now-int64(binary.BigEndian.Uint64(r.Value)))/1000)
							}
						}
						off = int64(bv.LastOffset()) + 1
					}
					if measuring.Load() {
						consumed.Add(int64(len(lats)))
						histMu.Lock()
						for _, l := range lats {
							_ = e2eHist.RecordValue(max(l, 1))
						}
						histMu.Unlock()
					}
				}
			}()
		}
	}
	sleepCtx(ctx, o.warmup)
	var pids []int
	for _, f := range strings.Split(o.pids, ",") {
		if pid, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	pcpu0 := make([]float64, len(pids))
	for i, pid := range pids {
		pcpu0[i] = cpuSecondsOf(strconv.Itoa(pid))
	}
	var split *cpuSplit
	if o.cpuSplit {
		var err error
		if split, err = startCPUSplit(); err != nil {
			fmt.Fprintln(os.Stderr, "twinbench: --cpu-split:", err)
		}
	}
	cpu0 := cpuSeconds()
	measuring.Store(true)
	start := time.Now()
	sleepCtx(ctx, o.duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	cpu1 := cpuSeconds()
	var loadNs, otherNs int64
	if split != nil {
		var err error
		if loadNs, otherNs, err = split.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "twinbench: --cpu-split:", err)
		}
	}
	var brokers []BrokerStats
	for i, pid := range pids {
		c := cpuSecondsOf(strconv.Itoa(pid))
		if c < 0 || pcpu0[i] < 0 {
			continue // gone, or no /proc
		}
		brokers = append(brokers, BrokerStats{PID: pid, CPUSeconds: c - pcpu0[i], CPUCores: (c - pcpu0[i]) / elapsed.Seconds(),
			MaxRSSMB: maxRSSMBOf(strconv.Itoa(pid))})
	}
	cancel()
	wg.Wait()
	res := &Result{
		Config: map[string]any{"topic": o.topic, "partitions": o.partitions, "rf": o.rf, "min_isr": o.minISR,
			"acks": o.acks, "record_size": o.recordSize, "batch_records": o.batchRecords, "inflight": o.inflight,
			"rate": o.rate, "inprocess": o.inprocess, "fsync_each_batch": o.syncEach, "gomaxprocs": runtime.GOMAXPROCS(0),
			"api": tr.name(), "tls": o.client != nil, "compression": o.compression.String(), "payload": o.payload.String()},
		DurationSeconds: elapsed.Seconds(), Records: records.Load(), Bytes: bytes.Load(), Requests: requests.Load(),
		BatchBytes: sent.Load(), UncompressedBatchBytes: raw.Load(),
		Errors: errs, ProduceLatencyMs: percentiles(prodHist), ConsumedRecords: consumed.Load(), Brokers: brokers,
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAvg = strings.TrimSpace(string(la))
	}
	res.RecordsPerSec = float64(res.Records) / elapsed.Seconds()
	res.MBPerSec = float64(res.Bytes) / elapsed.Seconds() / 1e6
	if res.BatchBytes > 0 {
		res.CompressionRatio = float64(res.UncompressedBatchBytes) / float64(res.BatchBytes)
	}
	mb := float64(res.Bytes) / 1e6
	if len(brokers) > 0 && mb > 0 {
		var cpu float64
		for _, b := range brokers {
			cpu += b.CPUSeconds
		}
		res.BrokersCPUSecondsPerMB = cpu / mb
	}
	if o.consume && e2eHist.TotalCount() > 0 {
		p := percentiles(e2eHist)
		res.EndToEndLatencyMs = &p
	}
	if cpu0 >= 0 && cpu1 >= 0 {
		res.Process = &ProcessStats{CPUSeconds: cpu1 - cpu0, CPUCores: (cpu1 - cpu0) / elapsed.Seconds(), MaxRSSMB: maxRSSMB()}
		if mb > 0 {
			res.Process.CPUSecondsPerMB = res.Process.CPUSeconds / mb
		}
		if loadNs+otherNs > 0 {
			p := res.Process
			p.LoadCPUShare = float64(loadNs) / float64(loadNs+otherNs)
			p.BrokersCPUSeconds = (1 - p.LoadCPUShare) * p.CPUSeconds
			if mb > 0 {
				p.BrokersCPUSecondsPerMB = p.BrokersCPUSeconds / mb
			}
		}
	}
	return res
}

// splitBatches yields buf's batches by their length fields, unvalidated,
// up to the first that does not fit: BatchView.Records validates each.
// (storage.Batches validates too, which checksummed every consumed byte
// twice in the consumers, CPU the in-process brokers then lacked.)
func splitBatches(buf []byte) iter.Seq[storage.BatchView] {
	return func(yield func(storage.BatchView) bool) {
		for len(buf) >= storage.BatchHeaderSize {
			size := batchLengthEnd + int64(storage.BatchView(buf).BatchLength())
			if size < storage.BatchHeaderSize || size > int64(len(buf)) {
				return
			}
			if !yield(storage.BatchView(buf[:size:size])) {
				return
			}
			buf = buf[size:]
		}
	}
}

// stamper is one producer's batch, encoded once and re-stamped for each
// request: the send time in each value's first 8 bytes (end-to-end latency)
// and in the header's timestamps, then the crc. The bytes equal a fresh
// storage.AppendBatch of the records with that time (main_test.go), but
// each request no longer re-encodes every record, two copies of every
// value: with --inprocess the load generator takes CPU from the brokers it
// measures. With a compressor the records are compressed for every
// request (their send times differ), as a producer compresses each batch.
type stamper struct {
	buf  []byte
	vals []int // offsets of the values in buf; none below 8 bytes
	comp kgo.Compressor
	// out is the compressed batch; zbuf the compressor's buffer.
	out  []byte
	zbuf bytes.Buffer
}

// Kafka v2 record batch header offsets (storage/batch.go).
const (
	batchOffLength         = 8
	batchOffCRC            = 17
	batchOffAttributes     = 21
	batchOffFirstTimestamp = 27
	batchOffMaxTimestamp   = 35
	// batchLengthEnd is baseOffset and batchLength: the bytes
	// batchLength does not count.
	batchLengthEnd = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// newStamper encodes records of values (at least one; the stamper keeps
// copies), compressed with comp unless it is nil. Each value starts with a
// marker unique in the batch, so its offset is found by search.
func newStamper(values [][]byte, comp kgo.Compressor) *stamper {
	recs := make([]storage.Record, len(values))
	size := len(values[0])
	for i := range recs {
		recs[i].Value = bytes.Clone(values[i])
		if size >= 8 {
			binary.BigEndian.PutUint64(recs[i].Value, stampMarker(i))
		}
	}
	buf, err := storage.AppendBatch(nil, recs, storage.BatchOptions{})
	if err != nil {
		panic(err) // n >= 1 records always encode
	}
	st := &stamper{buf: buf, comp: comp}
	if size < 8 {
		return st
	}
	var m [8]byte
	pos := storage.BatchHeaderSize
	for i := range recs {
		binary.BigEndian.PutUint64(m[:], stampMarker(i))
		j := bytes.Index(buf[pos:], m[:])
		st.vals = append(st.vals, pos+j)
		pos += j + len(values[i])
	}
	return st
}

func stampMarker(i int) uint64 { return 0xa5a5a5a5<<32 | uint64(i) }

// stamp sets the batch's send time to now, compresses it with a
// compressor, and returns it; the buffer is the same on every call (the
// previous request must have completed).
func (s *stamper) stamp(now time.Time) []byte {
	b := s.buf
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint64(b[batchOffFirstTimestamp:], ms)
	binary.BigEndian.PutUint64(b[batchOffMaxTimestamp:], ms)
	for _, off := range s.vals {
		binary.BigEndian.PutUint64(b[off:], uint64(now.UnixNano()))
	}
	if s.comp != nil {
		s.zbuf.Reset()
		recs := b[storage.BatchHeaderSize:]
		// kgo's producer (sink.go) keeps a batch uncompressed when the
		// codec fails or does not make it shorter: random bytes go out
		// as they are.
		if z, codec := s.comp.Compress(&s.zbuf, recs); z != nil && codec > kgo.CodecNone && len(z) < len(recs) {
			s.out = append(append(s.out[:0], b[:storage.BatchHeaderSize]...), z...)
			b = s.out
			binary.BigEndian.PutUint32(b[batchOffLength:], uint32(len(b)-batchLengthEnd))
			binary.BigEndian.PutUint16(b[batchOffAttributes:], uint16(codec))
		}
	}
	binary.BigEndian.PutUint32(b[batchOffCRC:], crc32.Checksum(b[batchOffAttributes:], castagnoli))
	return b
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// cpuSeconds is user+system CPU of this process from /proc (−1 elsewhere).
func cpuSeconds() float64 { return cpuSecondsOf("self") }

func cpuSecondsOf(pid string) float64 {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return -1
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func maxRSSMB() float64 { return maxRSSMBOf("self") }

func maxRSSMBOf(pid string) float64 {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return math.NaN()
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	return math.NaN()
}

func printTable(r *Result) {
	c := r.Config
	fmt.Printf("twinbench  api=%v partitions=%v rf=%v min_isr=%v acks=%v record=%vB batch=%v inflight=%v rate=%v fsync=%v tls=%v compression=%v payload=%v\n",
		c["api"], c["partitions"], c["rf"], c["min_isr"], c["acks"], c["record_size"], c["batch_records"], c["inflight"], c["rate"], c["fsync_each_batch"], c["tls"],
		c["compression"], c["payload"])
	fmt.Printf("%-28s %12.2f\n", "duration (s)", r.DurationSeconds)
	fmt.Printf("%-28s %12.0f\n", "throughput (records/s)", r.RecordsPerSec)
	fmt.Printf("%-28s %12.2f\n", "throughput (MB/s)", r.MBPerSec)
	fmt.Printf("%-28s %12d\n", "requests", r.Requests)
	fmt.Printf("%-28s %12.2f (%d of %d batch bytes sent)\n", "compression ratio", r.CompressionRatio, r.BatchBytes, r.UncompressedBatchBytes)
	pl := r.ProduceLatencyMs
	fmt.Printf("%-28s %8.3f %8.3f %8.3f %8.3f\n", "produce latency ms p50/p99/p999/max", pl.P50, pl.P99, pl.P999, pl.Max)
	if e := r.EndToEndLatencyMs; e != nil {
		fmt.Printf("%-28s %8.3f %8.3f %8.3f %8.3f\n", "end-to-end ms p50/p99/p999/max", e.P50, e.P99, e.P999, e.Max)
	}
	fmt.Printf("%-28s %12d\n", "consumed records", r.ConsumedRecords)
	if p := r.Process; p != nil {
		fmt.Printf("%-28s %12.2f cores, max RSS %.0f MB\n", "process CPU", p.CPUCores, p.MaxRSSMB)
		what := "twinbench CPU s/MB"
		if c["inprocess"] == true {
			what = "CPU s/MB brokers+loadgen"
		}
		fmt.Printf("%-28s %12.4f (CPU seconds per MB of payload acknowledged)\n", what, p.CPUSecondsPerMB)
		if p.BrokersCPUSeconds > 0 {
			fmt.Printf("%-28s %12.4f (profile: load generator %.0f%% of the samples)\n", "CPU s/MB brokers (split)", p.BrokersCPUSecondsPerMB, 100*p.LoadCPUShare)
		}
	}
	if r.LoadAvg != "" {
		fmt.Printf("%-28s %s\n", "loadavg (machine)", r.LoadAvg)
	}
	for _, b := range r.Brokers {
		fmt.Printf("%-28s %12.2f cores, max RSS %.0f MB\n", fmt.Sprintf("broker pid %d CPU", b.PID), b.CPUCores, b.MaxRSSMB)
	}
	if len(r.Brokers) > 0 {
		fmt.Printf("%-28s %12.4f (the --pids brokers' CPU seconds per MB of payload acknowledged)\n", "brokers CPU s/MB", r.BrokersCPUSecondsPerMB)
	}
	for k, v := range r.Errors {
		fmt.Printf("error %-40s %d\n", k, v)
	}
}
