package broker

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/metadata"
)

// probeDesc is a service registered on the broker's own gRPC server: Boom
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

// TestBrokerServerOptions (issue 13, transport): the broker's gRPC server
// carries rpcopt.ServerOptions as the controller's does. A handler panic
// answers codes.Internal and the broker keeps serving; every handler has a
// deadline of at most rpcopt.MaxHandlerTime even when the client sent none
// (before, the broker had its own recovery but no handler deadline, no
// MaxConcurrentStreams and no server pings).
func TestBrokerServerOptions(t *testing.T) {
	b, err := New(Config{ID: 1, ControllerAddr: "unused:1", LogDirs: []string{t.TempDir()}},
		Deps{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.closeDirs(false) })
	b.GRPCServer().RegisterService(&probeDesc, struct{}{})
	lis := bufconn.Listen(1 << 20)
	done := make(chan error, 1)
	go func() { done <- b.GRPCServer().Serve(lis) }()
	t.Cleanup(func() {
		b.GRPCServer().Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()

	err = conn.Invoke(t.Context(), "/twinlog.test.Probe/Boom", &emptypb.Empty{}, &emptypb.Empty{})
	if status.Code(err) != codes.Internal {
		t.Fatalf("panicking handler: %v, want codes.Internal", err)
	}
	// Still serving, through the broker's own codec and handlers (this
	// broker has no controller, so its Metadata handler answers that it
	// has no metadata yet).
	_, err = pb.NewFetchServiceClient(conn).Metadata(t.Context(), &pb.MetadataRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), metadata.ErrNotLoaded.Error()) {
		t.Fatalf("broker after a handler panic: %v, want its Metadata handler's %q", err, metadata.ErrNotLoaded)
	}
	// Nor does it answer a mirror's LMLE query from the empty image (it
	// would say the topic is gone, failing the asking run).
	_, err = pb.NewMirrorSourceServiceClient(conn).GetLastMirroredEpochs(t.Context(), &pb.GetLastMirroredEpochsRequest{Topic: "t", TopicId: "T", Partitions: []int32{0}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), metadata.ErrNotLoaded.Error()) {
		t.Fatalf("GetLastMirroredEpochs of a broker without metadata: %v, want %q", err, metadata.ErrNotLoaded)
	}

	left := &durationpb.Duration{}
	if err := conn.Invoke(context.Background(), "/twinlog.test.Probe/Deadline", &emptypb.Empty{}, left); err != nil {
		t.Fatal(err)
	}
	if d := left.AsDuration(); d <= 0 || d > rpcopt.MaxHandlerTime {
		t.Fatalf("handler deadline %v left without a client deadline, want in (0, %v]", d, rpcopt.MaxHandlerTime)
	}
}

// The handler deadline must not cut a legitimate wait short.
func TestHandlerDeadlineAboveWaits(t *testing.T) {
	c := Config{}.withDefaults()
	for name, d := range map[string]time.Duration{
		"fetch long-poll (MaxFetchWait)":           MaxFetchWait,
		"default produce timeout":                  c.DefaultProduceTimeout,
		"metadata long-poll (MetadataMaxWait)":     c.MetadataMaxWait + c.RPCTimeout,
		"a __mirror_state read round (RPCTimeout)": c.RPCTimeout,
	} {
		if d >= rpcopt.MaxHandlerTime {
			t.Errorf("%s %v is not below rpcopt.MaxHandlerTime %v", name, d, rpcopt.MaxHandlerTime)
		}
	}
}
