package authz

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog/security/transport"
)

// rule returns method's rule, false if the table has none.
func rule(method string) (Rule, bool) {
	r, ok := Rules[method]
	return r, ok
}

// authorize runs method's rule for req (nil for a stream).
func (c *Checker) authorize(ctx context.Context, method string, req any) error {
	if !c.Enabled() {
		return nil
	}
	r, ok := rule(method)
	if !ok {
		// An RPC without a rule is refused: a bug to find in tests
		// (TestEveryMethodHasARule), not a hole to ship.
		return Denied(clusterDenied, "%s has no authorization rule", method)
	}
	if r.Public {
		return nil
	}
	if !c.loaded.Load() {
		if p, _ := transport.Principal(ctx); !c.superUser(p) {
			return status.Error(codes.Unavailable, "this broker has not loaded the cluster's ACLs yet (its metadata is catching up): ask another broker, or again")
		}
	}
	if r.Broker != nil {
		if id, ok := r.Broker(req); ok {
			if err := c.CheckBroker(ctx, id); err != nil {
				return err
			}
		}
	}
	if r.Needs != nil {
		if err := c.Check(ctx, r.Needs(req)...); err != nil {
			return err
		}
	}
	if r.Check != nil {
		return r.Check(ctx, c, req)
	}
	return nil
}

// UnaryInterceptor authorizes every unary RPC by Rules before its handler
// runs.
func (c *Checker) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := c.authenticate(ctx)
		if err != nil {
			return nil, err
		}
		if err := c.authorize(ctx, info.FullMethod, req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor authorizes every streaming RPC (health watches,
// reflection) by Rules when the stream opens; their Needs get a nil
// request.
func (c *Checker) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := c.authorize(ss.Context(), info.FullMethod, nil); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// ServerOptions returns the interceptors as server options.
func (c *Checker) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(c.UnaryInterceptor()), grpc.ChainStreamInterceptor(c.StreamInterceptor())}
}
