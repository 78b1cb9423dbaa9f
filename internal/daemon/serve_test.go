package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// The probe port follows the daemon's health service, answers in
// plaintext, and serves nothing else.
func TestServeHealth(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	addr := freeAddr(t)
	stop, err := ServeHealth(addr, hs, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := ServeHealth(addr, hs, log); err == nil || !strings.Contains(err.Error(), "health.listen.address") {
		t.Fatalf("second listener on %s: err %v, want the key named", addr, err)
	}

	ctx := context.Background()
	if err := Healthcheck(ctx, addr, 5*time.Second, insecure.NewCredentials()); err == nil || !strings.Contains(err.Error(), "NOT_SERVING") {
		t.Fatalf("before serving: %v, want NOT_SERVING", err)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if err := Healthcheck(ctx, addr, 5*time.Second, insecure.NewCredentials()); err != nil {
		t.Fatalf("serving: %v", err)
	}

	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection on the probe port: %v, want Unimplemented", err)
	}

	hs.Shutdown()
	if err := Healthcheck(ctx, addr, 5*time.Second, insecure.NewCredentials()); err == nil {
		t.Fatal("after Shutdown the probe still reports SERVING")
	}
}

func TestServeMetrics(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "twinlog_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	addr := freeAddr(t)
	stop, err := ServeMetrics(addr, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := ServeMetrics(addr, reg, log); err == nil || !strings.Contains(err.Error(), "metrics.address") {
		t.Fatalf("second listener on %s: err %v, want the key named", addr, err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "twinlog_test_total 3") {
		t.Fatalf("scrape:\n%s", body)
	}
}
