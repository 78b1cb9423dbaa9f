package controller

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/internal/rpcopt"
)

// probeDesc is a service registered on the controller's own gRPC server: Boom
// panics, Deadline answers how long its context has left.
var probeDesc = grpc.ServiceDesc{
	ServiceName: "twinlog.test.Probe",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Boom", Handler: probeHandler("Boom", func(context.Context) (any, error) { panic("boom") })},
		{MethodName: "Deadline", Handler: probeHandler("Deadline", func(ctx context.Context) (any, error) {
			d, ok := ctx.Deadline()
			if !ok {
				return durationpb.New(-1), nil
			}
			return durationpb.New(time.Until(d)), nil
		})},
	},
}

func probeHandler(name string, fn func(context.Context) (any, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, _ any) (any, error) { return fn(ctx) }
		if interceptor == nil {
			return h(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/twinlog.test.Probe/" + name}, h)
	}
}

// The controller's server recovers a handler panic (codes.Internal, the
// controller keeps serving) and gives every handler a deadline even when the
// client sent none.
func TestControllerRecoversPanicsAndBoundsHandlers(t *testing.T) {
	nw := newNet()
	c, err := New(Config{DataDir: t.TempDir(), ClusterID: "test-cluster", TickInterval: time.Hour}, Deps{
		Logger:   slog.New(slog.NewTextHandler(t.Output(), nil)),
		Listener: nw.listen("controller:1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.GRPCServer().RegisterService(&probeDesc, struct{}{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	conn, err := nw.dial("controller:1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()

	err = conn.Invoke(t.Context(), "/twinlog.test.Probe/Boom", &emptypb.Empty{}, &emptypb.Empty{})
	if status.Code(err) != codes.Internal {
		t.Fatalf("panicking handler: %v, want codes.Internal", err)
	}
	if _, err := twinlogv1.NewAdminServiceClient(conn).ListBrokers(t.Context(), &twinlogv1.ListBrokersRequest{}); err != nil {
		t.Fatalf("controller after a handler panic: %v", err)
	}

	left := &durationpb.Duration{}
	if err := conn.Invoke(context.Background(), "/twinlog.test.Probe/Deadline", &emptypb.Empty{}, left); err != nil {
		t.Fatal(err)
	}
	if d := left.AsDuration(); d <= 0 || d > rpcopt.MaxHandlerTime {
		t.Fatalf("handler deadline %v left without a client deadline, want in (0, %v]", d, rpcopt.MaxHandlerTime)
	}
}

// FetchMetadata bounds a response in bytes: a follower far behind gets a
// prefix of the log and pages on by from_offset.
func TestFetchMetadataBoundedInBytes(t *testing.T) {
	const limit = 2000
	h := startController(t, t.TempDir(), newClock(), newNet(), func(c *Config) { c.MaxFetchBytes = limit })
	h.upBrokers(3)
	for i := range 10 {
		h.createTopic(fmt.Sprintf("topic-%d", i), 8, 3, nil)
	}
	head := h.c.Offset()
	from, pages := int64(1), 0
	for from <= head {
		resp, err := h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: from})
		if err != nil {
			t.Fatal(err)
		}
		ds := resp.GetDeltas()
		if len(ds) == 0 || ds[0].GetOffset() != from {
			t.Fatalf("page from %d: %d deltas", from, len(ds))
		}
		size := 0
		for _, d := range ds {
			size += proto.Size(d)
		}
		if len(ds) > 1 && size > limit {
			t.Fatalf("page from %d: %d deltas of %d bytes, limit %d", from, len(ds), size, limit)
		}
		from = ds[len(ds)-1].GetOffset() + 1
		pages++
	}
	if pages < 3 {
		t.Fatalf("%d pages for %d changes under a %d-byte limit", pages, head, limit)
	}
}
