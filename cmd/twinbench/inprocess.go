package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/controller"
	"github.com/twinlog/twinlog/internal/config"
	"github.com/twinlog/twinlog/internal/daemon"
	tlstransport "github.com/twinlog/twinlog/security/transport"
)

// inProcess is a controller and N brokers on TCP loopback with temp dirs.
type inProcess struct {
	bootstrap      string
	kafkaBootstrap string
	// client is the bench's clients' TLS with --tls (nil: plaintext).
	client *tlstransport.Transport
	stop   func()
}

func startInProcess(ctx context.Context, o options) (*inProcess, error) {
	dir := o.dataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "twinbench-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The brokers' runtime settings, as brokerd applies them by default.
	daemon.TuneGC(nil, config.DefaultBrokerGCPercent, 0)
	runCtx, cancel := context.WithCancel(context.Background())
	var done []chan error
	stop := func() {
		cancel()
		// A clean stop takes seconds (controlled shutdown, flushes); one
		// that hangs shows where.
		slow := time.AfterFunc(60*time.Second, func() {
			fmt.Fprintln(os.Stderr, "twinbench: the in-process cluster has not stopped after 60s; goroutines:")
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		})
		defer slow.Stop()
		for _, d := range done {
			<-d
		}
		if o.dataDir == "" {
			os.RemoveAll(dir)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "controller"), 0o755); err != nil {
		return nil, err
	}
	// With --tls every node gets a certificate of one CA made here, and
	// the bench's clients one too; nil transports are plaintext.
	var certs *benchPKI
	nodeTLS := func(string) (*tlstransport.Transport, error) { return nil, nil }
	if o.tls {
		var err error
		if certs, err = newBenchPKI(filepath.Join(dir, "tls")); err != nil {
			return nil, err
		}
		nodeTLS = certs.transport
	}
	ctlTLS, err := nodeTLS("controller")
	if err != nil {
		return nil, err
	}
	clientTLS, err := nodeTLS("twinbench")
	if err != nil {
		return nil, err
	}
	ctlLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctl, err := controller.New(controller.Config{
		DataDir: filepath.Join(dir, "controller"), ClusterID: "bench",
		ClusterConfigs: map[string]string{"min.insync.replicas": strconv.Itoa(o.minISR)},
	}, controller.Deps{Logger: log, Listener: ctlLis, Transport: ctlTLS})
	if err != nil {
		return nil, err
	}
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- ctl.Run(runCtx) }()
	var bootstrap, kafkaBootstrap string
	var brokerDone []chan error
	for i := 1; i <= o.brokers; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			cancel()
			return nil, err
		}
		cfg := broker.Config{
			ID: twinlog.BrokerID(i), ControllerAddr: ctlLis.Addr().String(),
			LogDirs:           []string{filepath.Join(dir, fmt.Sprintf("broker-%d", i))},
			HeartbeatInterval: 500 * time.Millisecond,
		}
		if o.syncEach {
			cfg.FlushPolicy = broker.FlushEveryBatch
		}
		klis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			cancel()
			return nil, err
		}
		btls, err := nodeTLS(fmt.Sprintf("broker-%d", i))
		if err != nil {
			cancel()
			return nil, err
		}
		b, err := broker.New(cfg, broker.Deps{Logger: log, Listener: lis, KafkaListener: klis, Transport: btls})
		if err != nil {
			cancel()
			return nil, err
		}
		d := make(chan error, 1)
		go func() { d <- b.Run(runCtx) }()
		brokerDone = append(brokerDone, d)
		if bootstrap == "" {
			bootstrap, kafkaBootstrap = lis.Addr().String(), kafkaAddr(klis)
		}
	}
	done = append(brokerDone, ctlDone)
	// Wait until every broker is unfenced.
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := dial(bootstrap, clientTLS)
		if err == nil {
			md, merr := newFetch(conn).Metadata(ctx, nil)
			conn.Close()
			if merr == nil && len(md.GetBrokers()) == o.brokers {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("in-process cluster did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &inProcess{bootstrap: bootstrap, kafkaBootstrap: kafkaBootstrap, client: clientTLS, stop: stop}, nil
}

func newFetch(c *grpc.ClientConn) fetchMD { return fetchMD{pb.NewFetchServiceClient(c)} }

type fetchMD struct{ c pb.FetchServiceClient }

func (f fetchMD) Metadata(ctx context.Context, _ []string) (*pb.MetadataResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return f.c.Metadata(cctx, &pb.MetadataRequest{})
}
