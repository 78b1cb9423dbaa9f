// Command controllerd runs one twinlog cluster controller (SPEC §3).
//
//	controllerd --config configs/cluster-a/controller.yaml
//	controllerd healthcheck --address 127.0.0.1:9090 [--timeout 2s]
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/twinlog/twinlog/controller"
	"github.com/twinlog/twinlog/internal/config"
	"github.com/twinlog/twinlog/metrics"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	var (
		configFile string
		logFormat  string
		logLevel   string
	)
	root := &cobra.Command{
		Use:           "controllerd",
		Short:         "twinlog cluster controller",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return err
			}
			cfg, err := config.LoadController(configFile, cmd.Flags())
			if err == nil {
				err = cfg.Validate()
			}
			if err != nil {
				log.Error("invalid configuration", "err", err)
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := run(ctx, cfg, log); err != nil {
				log.Error("controller exited", "err", err)
				return err
			}
			return nil
		},
	}
	fs := root.Flags()
	fs.StringVar(&configFile, "config", "", "YAML config file (keys: internal/config, SPEC §1.3)")
	fs.StringVar(&logFormat, "log.format", "json", "log format: json or text")
	fs.StringVar(&logLevel, "log.level", "info", "log level: debug, info, warn, error")
	config.RegisterControllerFlags(fs)
	root.AddCommand(newHealthcheckCmd())
	return root
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log.level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log.format %q: want json or text", format)
}

// run wires config → controller.Config, metrics and the /metrics server, and
// blocks in Controller.Run until ctx ends.
func run(ctx context.Context, cfg config.ControllerConfig, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs, err := metrics.NewController(reg)
	if err != nil {
		return err
	}
	ctl, err := controller.New(controller.Config{
		DataDir:                      cfg.DataDir,
		ClusterID:                    cfg.ClusterID,
		ListenAddr:                   cfg.ListenAddress,
		MaxRequestPartitionSizeLimit: int(cfg.MaxRequestPartitionSizeLimit),
		ClusterConfigs: map[string]string{
			"min.insync.replicas":                   strconv.Itoa(cfg.MinInsyncReplicas),
			"eligible.leader.replicas.enabled":      strconv.FormatBool(cfg.EligibleLeaderReplicasEnabled),
			"unclean.recovery.strategy":             cfg.UncleanRecoveryStrategy,
			"unclean.leader.election.enable":        strconv.FormatBool(cfg.UncleanLeaderElectionEnable),
			"unclean.recovery.timeout.ms":           ms(cfg.UncleanRecoveryTimeout),
			"broker.session.timeout.ms":             ms(cfg.BrokerSessionTimeout),
			"broker.heartbeat.interval.ms":          ms(cfg.BrokerHeartbeatInterval),
			"mirror.state.topic.replication.factor": strconv.Itoa(cfg.MirrorStateTopicReplicationFactor),
			"mirror.state.topic.num.partitions":     strconv.Itoa(cfg.MirrorStateTopicNumPartitions),
		},
	}, controller.Deps{Logger: log, Observer: obs})
	if err != nil {
		return err
	}
	if cfg.MetricsAddress != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		srv := &http.Server{Addr: cfg.MetricsAddress, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "addr", cfg.MetricsAddress, "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("metrics serving", "addr", cfg.MetricsAddress)
	}
	return ctl.Run(ctx)
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// newHealthcheckCmd implements deploy/README.md's contract: dial, call
// grpc.health.v1.Health/Check for service "", exit 0 iff SERVING. It reads no
// config and touches no data.
func newHealthcheckCmd() *cobra.Command {
	var (
		addr    string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:           "healthcheck",
		Short:         "exit 0 if the controller at --address is SERVING",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := healthcheck(cmd.Context(), addr, timeout); err != nil {
				fmt.Fprintln(os.Stderr, "healthcheck:", err)
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "address", "127.0.0.1:9090", "controller gRPC host:port")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "overall deadline")
	return cmd
}

func healthcheck(ctx context.Context, addr string, timeout time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", addr, resp.GetStatus())
	}
	return nil
}
