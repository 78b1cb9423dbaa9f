package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ServeMetrics serves reg as Prometheus /metrics on addr (plaintext HTTP)
// until stop is called. The port is bound before it returns, so a taken
// port fails the daemon's start instead of leaving it unscraped.
func ServeMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "addr", addr, "err", err)
		}
	}()
	log.Info("metrics serving", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// ServeHealth serves hs, and nothing else, as plaintext gRPC on addr
// (health.listen.address) until stop is called: Kubernetes' gRPC probes
// speak neither TLS nor SASL, so they cannot use the daemon's own listener
// once it requires mutual TLS. The health service tells only SERVING or
// NOT_SERVING, so the port needs no authentication; requests are small
// and few (a probe a second), and the server is bounded to match.
func ServeHealth(addr string, hs healthpb.HealthServer, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health.listen.address %s: %w", addr, err)
	}
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(4<<10),
		grpc.MaxConcurrentStreams(16),
		grpc.ConnectionTimeout(5*time.Second),
	)
	healthpb.RegisterHealthServer(srv, hs)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.Error("health server", "addr", addr, "err", err)
		}
	}()
	log.Info("health serving", "addr", ln.Addr().String())
	return func() {
		done := make(chan struct{})
		go func() { srv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			srv.Stop() // a Watch stream never ends on its own
		}
	}, nil
}
