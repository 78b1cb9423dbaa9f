package main

import (
	"context"
	"fmt"
	"net"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The --floor mode measures what the machine charges for one gRPC round
// trip on loopback, with nothing behind it: an echo of one request's bytes,
// at the request rate the produce run would use. An acks=all produce needs
// at least two such trips one after the other (producer to leader and back,
// leader to follower and back), so on a machine whose floor p50 is 0.3 ms
// no broker reaches a produce p50 below 0.6 ms at that rate. On an idle VM
// the time goes to waking parked threads and virtual CPUs, which grows
// with the gap between requests; the floor shows how much.

// rawCodec passes []byte messages through unchanged.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append((*(v.(*[]byte)))[:0], b...)
	return nil
}
func (rawCodec) Name() string { return "twinbench-raw" }

var echoDesc = grpc.ServiceDesc{
	ServiceName: "twinbench.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Echo", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var b []byte
		if err := dec(&b); err != nil {
			return nil, err
		}
		return &b, nil
	}}},
}

// floor runs the echo server and sends one request of the produce run's
// size every 1/(rate/batch) seconds (back to back without --rate) for the
// run's duration.
func floor(ctx context.Context, o options) (*Result, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(&echoDesc, struct{}{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	msg := newStamper(o.payload.values(o.batchRecords, o.recordSize, 0), o.compression.compressor()).stamp(time.Now())
	interval := time.Duration(0)
	if o.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(o.batchRecords) / o.rate)
	}
	h := hdr.New(1, 60_000_000, 3) // µs
	var requests int64
	call := func() error {
		var out []byte
		return cc.Invoke(ctx, "/twinbench.Echo/Echo", &msg, &out)
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	warm := time.Now().Add(o.warmup)
	start := warm
	end := warm.Add(o.duration)
	next := time.Now()
	for now := time.Now(); now.Before(end) && ctx.Err() == nil; now = time.Now() {
		if interval > 0 {
			if d := next.Sub(now); d > 0 {
				t.Reset(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			next = next.Add(interval)
		}
		t0 := time.Now()
		if err := call(); err != nil {
			return nil, fmt.Errorf("echo: %w", err)
		}
		if t0.After(warm) {
			requests++
			_ = h.RecordValue(max(time.Since(t0).Microseconds(), 1))
		}
	}
	elapsed := time.Since(start)
	return &Result{
		Config: map[string]any{"mode": "floor", "request_bytes": len(msg), "batch_records": o.batchRecords,
			"record_size": o.recordSize, "rate": o.rate},
		DurationSeconds: elapsed.Seconds(), Requests: requests, ProduceLatencyMs: percentiles(h),
	}, nil
}

func printFloor(r *Result) {
	c := r.Config
	fmt.Printf("twinbench floor  one gRPC echo of %v bytes on loopback, rate=%v records/s in batches of %v\n",
		c["request_bytes"], c["rate"], c["batch_records"])
	fmt.Printf("%-28s %12.2f\n", "duration (s)", r.DurationSeconds)
	fmt.Printf("%-28s %12d\n", "round trips", r.Requests)
	pl := r.ProduceLatencyMs
	fmt.Printf("%-28s %8.3f %8.3f %8.3f %8.3f\n", "round trip ms p50/p99/p999/max", pl.P50, pl.P99, pl.P999, pl.Max)
}
