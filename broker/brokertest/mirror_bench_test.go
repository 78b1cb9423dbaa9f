package brokertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Mirror benchmarks (issue 5): run one measurement each with
//
//	go test -run '^$' -bench Mirror -benchtime 1x ./broker/brokertest/
//
// Both clusters run in this process over bufconn on MemFS (3 brokers each),
// so numbers measure the implementation's own costs on this machine, not a
// network. TWINLOG_BENCH_FAILBACK_MB sets the diverged size (default 16).

const benchValueBytes = 1024

func benchValues(n int) [][]byte {
	vs := make([][]byte, n)
	for i := range vs {
		v := make([]byte, benchValueBytes)
		v[0] = 'a'
		vs[i] = v
	}
	return vs
}

type ack struct {
	last twinlog.Offset
	at   time.Time
}

// mirrorLoad produces acks=all batches to every partition of topic on a
// (one producer per partition) for d, at most rate records/s in total
// (0: as fast as A accepts), while sampling B's leader LEOs: lag of a batch
// = time B's leader LEO passed its last offset − time A acknowledged it.
func mirrorLoad(tb testing.TB, a, b *Cluster, topic string, parts int, d time.Duration, rate float64) (aRecs, bRecs int64, lags []time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	const batch = 16
	vals := benchValues(batch)
	aLeaders := make([]twinlog.BrokerID, parts)
	bLeaders := make([]twinlog.BrokerID, parts)
	bStart := make([]twinlog.Offset, parts)
	for p := range parts {
		aLeaders[p], _ = a.Leader(topic, int32(p))
		bLeaders[p], _ = b.Leader(topic, int32(p))
		bStart[p] = b.LogEndOffset(bLeaders[p], topic, int32(p))
	}
	var mu sync.Mutex
	pending := make([][]ack, parts)
	var produced atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	var perProducer time.Duration
	if rate > 0 {
		perProducer = time.Duration(float64(time.Second) * batch * float64(parts) / rate)
	}
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now()
			for time.Now().Before(stop) {
				if perProducer > 0 {
					if w := time.Until(next); w > 0 {
						time.Sleep(w) // rate limiting the load, not synchronisation
					}
					next = next.Add(perProducer)
				}
				r, err := a.ProduceTo(ctx, aLeaders[p], topic, int32(p), -1, 10*time.Second, vals...)
				if err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
					tb.Errorf("produce %s-%d: %v %v", topic, p, r.GetError(), err)
					return
				}
				now := time.Now()
				produced.Add(batch)
				mu.Lock()
				pending[p] = append(pending[p], ack{twinlog.Offset(r.GetBaseOffset()) + batch - 1, now})
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	var bAtStop int64
	go func() {
		defer close(done)
		for {
			ch := b.Changed()
			now := time.Now()
			all := true
			var sum int64
			for p := range parts {
				leo := b.LogEndOffset(bLeaders[p], topic, int32(p))
				sum += int64(leo - bStart[p])
				mu.Lock()
				q := pending[p]
				i := 0
				for i < len(q) && q[i].last < leo {
					lags = append(lags, now.Sub(q[i].at))
					i++
				}
				pending[p] = q[i:]
				if len(pending[p]) > 0 {
					all = false
				}
				mu.Unlock()
			}
			if bAtStop == 0 && now.After(stop) {
				bAtStop = sum
			}
			if now.After(stop) && all && produced.Load() > 0 && sum >= produced.Load() {
				return
			}
			select {
			case <-ch:
			case <-time.After(2 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	<-done
	return produced.Load(), bAtStop, lags
}

func pct(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))]) / float64(time.Millisecond)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return string(b[:len(b)-1])
}

// BenchmarkMirrorThroughput: produce to A (8 partitions, RF 3, acks=all,
// 16 x 1 KiB batches) at 100% of what A accepts, then at 50% of that rate,
// while B mirrors; B bytes/s vs A bytes/s over the window and lag p50/p99.
func BenchmarkMirrorThroughput(bm *testing.B) {
	nw := NewNetwork()
	a := NewCluster(bm, Options{Cluster: "a", Network: nw, MinISR: 2})
	b := NewCluster(bm, Options{Cluster: "b", Network: nw})
	const parts = 8
	a.CreateTopic("t", parts, 3, nil)
	b.CreateMirror("m", a, "t")
	for p := range int32(parts) {
		b.WaitMirrorState("t", p, pb.MirrorState_MIRROR_STATE_MIRRORING)
	}
	const d = 5 * time.Second
	var maxRate float64
	for bm.Loop() {
		for _, share := range []float64{1, 0.5} {
			aRecs, bRecs, lags := mirrorLoad(bm, a, b, "t", parts, d, maxRate*share)
			if share == 1 {
				maxRate = float64(aRecs) / d.Seconds()
			}
			aMB := float64(aRecs*benchValueBytes) / d.Seconds() / 1e6
			bMB := float64(bRecs*benchValueBytes) / d.Seconds() / 1e6
			bm.Logf("load %3.0f%%: A %.1f MB/s (%d records), B %.1f MB/s over the window (ratio %.2f), lag p50 %.1f ms p99 %.1f ms (%d batches); loadavg %s",
				share*100, aMB, aRecs, bMB, bMB/aMB, pct(lags, 0.5), pct(lags, 0.99), len(lags), loadAvg())
			tag := strconv.Itoa(int(share*100)) + "pct"
			bm.ReportMetric(aMB, "A-MB/s-"+tag)
			bm.ReportMetric(bMB/aMB, "B/A-"+tag)
			bm.ReportMetric(pct(lags, 0.5), "lag-p50-ms-"+tag)
			bm.ReportMetric(pct(lags, 0.99), "lag-p99-ms-"+tag)
		}
	}
}

// failoverTime: B mirrors an n-partition topic from A (caught up); time
// from StopMirrorTopics on B until an acks=all produce on B succeeds, for
// the first partition and for every partition.
func failoverTime(bm *testing.B, n int) {
	nw := NewNetwork()
	a := NewCluster(bm, Options{Cluster: "a", Network: nw})
	b := NewCluster(bm, Options{Cluster: "b", Network: nw, MinISR: 2})
	topic := fmt.Sprintf("f%d", n)
	a.CreateTopic(topic, int32(n), 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for p := range int32(n) {
		a.MustProduce(ctx, topic, p, -1, []byte("a"))
	}
	b.CreateMirror("m", a, topic)
	leaders := make([]twinlog.BrokerID, n)
	for p := range int32(n) {
		b.WaitFor("caught up", func() bool {
			st := b.MirrorState(topic, p)
			return st != nil && st.GetState() == pb.MirrorState_MIRROR_STATE_MIRRORING && st.GetLagRecords() == 0 && st.GetLogEndOffset() == 1
		})
		leaders[p], _ = b.Leader(topic, p)
	}
	for bm.Loop() {
		var first atomic.Int64
		start := time.Now()
		if err := mirrorResults("StopMirrorTopics", b.StopMirror("m", false, 0, topic)); err != nil {
			bm.Fatal(err)
		}
		var wg sync.WaitGroup
		for p := range int32(n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					r, err := b.ProduceTo(ctx, leaders[p], topic, p, -1, 5*time.Second, []byte("b"))
					if err == nil && r.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
						first.CompareAndSwap(0, int64(time.Since(start)))
						return
					}
					select {
					case <-b.Changed():
					case <-time.After(time.Millisecond): // client retry backoff
					}
				}
			}()
		}
		wg.Wait()
		all := time.Since(start)
		f := time.Duration(first.Load())
		bm.Logf("failover %d partitions: first acks=all produce after %v, all partitions after %v; loadavg %s", n, f, all, loadAvg())
		bm.ReportMetric(float64(f)/float64(time.Millisecond), "first-ms")
		bm.ReportMetric(float64(all)/float64(time.Millisecond), "all-ms")
	}
}

func BenchmarkMirrorFailover1(bm *testing.B)   { failoverTime(bm, 1) }
func BenchmarkMirrorFailover100(bm *testing.B) { failoverTime(bm, 100) }

// BenchmarkMirrorFailback: B mirrors A; A becomes unreachable, B fails
// over and writes N MB that A does not have (A writes 1 MB of its own);
// then A mirrors B: time from CreateMirror on A until A is MIRRORING with
// lag 0 and A's leader LEO equals B's (LMLE truncation included).
func BenchmarkMirrorFailback(bm *testing.B) {
	mb := 16
	if v, err := strconv.Atoi(os.Getenv("TWINLOG_BENCH_FAILBACK_MB")); err == nil && v > 0 {
		mb = v
	}
	nw := NewNetwork()
	a := NewCluster(bm, Options{Cluster: "a", Network: nw})
	b := NewCluster(bm, Options{Cluster: "b", Network: nw})
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Second)
	defer cancel()
	a.CreateTopic("d", 1, 3, nil)
	a.MustProduce(ctx, "d", 0, -1, []byte("a"))
	b.CreateMirror("m", a, "d")
	b.WaitFor("caught up", func() bool {
		st := b.MirrorState("d", 0)
		return st != nil && st.GetState() == pb.MirrorState_MIRROR_STATE_MIRRORING && st.GetLogEndOffset() == 1
	})
	a.Unreachable(b)
	mustStop(b, "m", "d")
	const batch = 64
	vals := benchValues(batch)
	bl, _ := b.Leader("d", 0)
	for range mb * 1024 / batch {
		if r, err := b.ProduceTo(ctx, bl, "d", 0, -1, 10*time.Second, vals...); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			bm.Fatalf("produce on B: %v %v", r.GetError(), err)
		}
	}
	al, _ := a.Leader("d", 0)
	for range 1024 / batch {
		if r, err := a.ProduceTo(ctx, al, "d", 0, -1, 10*time.Second, vals...); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			bm.Fatalf("produce on A: %v %v", r.GetError(), err)
		}
	}
	bLEO := b.LogEndOffset(bl, "d", 0)
	a.Reachable(b)
	for bm.Loop() {
		start := time.Now()
		a.CreateMirror("back", b, "d")
		a.WaitForTimeout("A caught up with B", 500*time.Second, func() bool {
			st := a.MirrorState("d", 0)
			return st != nil && st.GetState() == pb.MirrorState_MIRROR_STATE_MIRRORING && st.GetLagRecords() == 0 && st.GetLogEndOffset() == int64(bLEO)
		})
		el := time.Since(start)
		bm.Logf("failback after %d MB diverged (B) + 1 MB (A): %v (%.1f MB/s); loadavg %s", mb, el, float64(mb)/el.Seconds(), loadAvg())
		bm.ReportMetric(el.Seconds(), "failback-s")
	}
}
