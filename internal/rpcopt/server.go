package rpcopt

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

const (
	// MaxConcurrentStreams bounds the RPCs one client connection may have
	// in flight (gRPC's default is unlimited): a single client cannot tie
	// up every handler goroutine. It is far above what one peer needs: a
	// destination broker's mirror runners share one connection to each
	// source broker and each holds one long-poll fetch, so a broker pair
	// mirroring more partitions than this would queue their fetches.
	MaxConcurrentStreams = 16384
	// MaxHandlerTime is the server-side deadline of every unary handler,
	// applied whatever deadline (or none) the client sent. The longest
	// legitimate waits are below it: a metadata long-poll (at most 30 s)
	// and a mirror stop's wait_for_catch_up (capped at MaxCatchUpWait).
	MaxHandlerTime = 6 * time.Minute
	// MaxCatchUpWait caps StopMirrorTopics' timeout_ms (SPEC §6.7 step 1):
	// an operator who needs longer asks again.
	MaxCatchUpWait = 5 * time.Minute
	// ServerPingTime and ServerPingTimeout: the server pings a connection
	// idle that long and closes it if the ping is not answered, so a client
	// that vanished does not hold its streams and buffers for ever (the
	// default is two hours).
	ServerPingTime    = 30 * time.Second
	ServerPingTimeout = 10 * time.Second
)

// ServerOptions are the options every twinlog gRPC server shares: the
// keepalive enforcement and pings, a bound on concurrent streams, a
// panic-recovering interceptor (a handler bug answers codes.Internal instead
// of killing the daemon) and the MaxHandlerTime deadline. log receives
// handler panics with their stacks.
func ServerOptions(log *slog.Logger) []grpc.ServerOption {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return []grpc.ServerOption{
		ServerKeepalive(),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: ServerPingTime, Timeout: ServerPingTimeout}),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.ChainUnaryInterceptor(RecoverUnary(log), DeadlineUnary(MaxHandlerTime)),
		grpc.ChainStreamInterceptor(RecoverStream(log)),
	}
}

// RecoverUnary turns a handler panic into codes.Internal, logged with the
// stack.
func RecoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("handler panic", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				resp, err = nil, status.Errorf(codes.Internal, "internal error in %s", info.FullMethod)
			}
		}()
		return handler(ctx, req)
	}
}

// RecoverStream is RecoverUnary for streaming handlers.
func RecoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("stream handler panic", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Errorf(codes.Internal, "internal error in %s", info.FullMethod)
			}
		}()
		return handler(srv, ss)
	}
}

// DeadlineUnary gives every unary handler a deadline of at most max from
// its start (a client's earlier deadline stays). Streams are left alone:
// the only ones served are health Watch and reflection, long-lived by
// design.
func DeadlineUnary(max time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, max)
		defer cancel()
		return handler(ctx, req)
	}
}

// CapWait bounds a client-requested wait: non-positive (no limit asked) or
// above max gives max.
func CapWait(d, max time.Duration) time.Duration {
	if d <= 0 || d > max {
		return max
	}
	return d
}

// StatusRule maps errors matching Err (errors.Is) to a gRPC status code.
type StatusRule struct {
	Err  error
	Code codes.Code
}

// ToStatus maps a handler's error to the gRPC status a client sees, in the
// one way every twinlog service does (etcd's rpctypes style): a status
// error passes as it is; then the caller's rules, in order; then a
// context's end (DeadlineExceeded, Canceled); anything else is Internal.
//
// Protocol outcomes (twinlogv1.ErrorCode, errcode's table) never come here:
// they travel in the response message, and a gRPC status means the request
// itself could not be handled (malformed, the server stopping, its store
// failing). So the error table has no gRPC status per code.
func ToStatus(err error, rules ...StatusRule) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, r := range rules {
		if errors.Is(err, r.Err) {
			return status.Error(r.Code, err.Error())
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
