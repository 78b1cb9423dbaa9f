// Command brokerd runs one twinlog broker (SPEC §4).
//
//	brokerd --config configs/cluster-a/broker-1.yaml
//	brokerd healthcheck --address 127.0.0.1:9091 [--timeout 2s]
package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/experimental"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/internal/config"
	"github.com/twinlog/twinlog/internal/daemon"
	"github.com/twinlog/twinlog/metrics"
	"github.com/twinlog/twinlog/storage"
)

// The codec shares the broker's non-zeroing buffer pool (see broker.BufferPool).
func init() { experimental.SetDefaultBufferPool(broker.BufferPool) }

func main() {
	if err := newRootCmd().Execute(); err != nil {
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	var configFile, logFormat, logLevel string
	root := &cobra.Command{
		Use:           "brokerd",
		Short:         "twinlog broker",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := daemon.NewLogger(logFormat, logLevel)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return err
			}
			// A typo in a variable name would otherwise go unnoticed:
			// the key keeps its file or default value.
			if unknown := config.UnknownBrokerEnv(os.Environ()); len(unknown) > 0 {
				log.Warn("ignoring TWINLOG_ environment variables that name no brokerd config key", "vars", unknown)
			}
			cfg, err := config.LoadBroker(configFile, cmd.Flags())
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil {
				// The rules that are the broker's (fetch.max.bytes under
				// the transport limit), before anything starts.
				err = brokerConfig(cfg).Validate()
			}
			if err != nil {
				log.Error("invalid configuration", "err", err)
				return err
			}
			daemon.TuneGC(log, cfg.GCPercent, cfg.MemoryLimitBytes)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := run(ctx, cfg, log); err != nil {
				log.Error("broker exited", "err", err)
				return err
			}
			return nil
		},
	}
	fs := root.Flags()
	fs.StringVar(&configFile, "config", "", "YAML config file (keys: internal/config, SPEC §1.3)")
	fs.StringVar(&logFormat, "log.format", "json", "log format: json or text")
	fs.StringVar(&logLevel, "log.level", "info", "log level: debug, info, warn, error")
	config.RegisterBrokerFlags(fs)
	root.AddCommand(daemon.HealthcheckCmd("broker", "127.0.0.1:9091"))
	return root
}

// brokerConfig maps the file/flag configuration onto broker.Config.
// log.flush.interval.messages = 1 selects group-committed fsyncs per batch.
func brokerConfig(cfg config.BrokerConfig) broker.Config {
	bc := broker.Config{
		ID:                           twinlog.BrokerID(cfg.BrokerID),
		ClusterID:                    cfg.ClusterID,
		ListenAddr:                   cfg.ListenAddress,
		AdvertisedAddr:               cfg.AdvertisedAddress,
		KafkaListenAddr:              cfg.KafkaListenAddress,
		KafkaAdvertisedAddr:          cfg.KafkaAdvertisedAddress,
		KafkaMaxRequestBytes:         cfg.SocketRequestMaxBytes,
		KafkaIdleTimeout:             cfg.ConnectionsMaxIdle,
		SASLMechanisms:               cfg.SASLEnabledMechanisms,
		SASLMaxSessionLifetime:       cfg.ConnectionsMaxReauth,
		ControllerAddr:               cfg.ControllerAddress,
		LogDirs:                      cfg.Log.Dirs,
		ReplicaLagTimeMax:            cfg.ReplicaLagTimeMax,
		HeartbeatInterval:            cfg.BrokerHeartbeatInterval,
		MaxRequestPartitionSizeLimit: int(cfg.MaxRequestPartitionSizeLimit),
		FetchMaxBytes:                cfg.FetchMaxBytes,
		LogMessageTimestampBeforeMax: cfg.LogMessageTimestampBeforeMax,
		LogMessageTimestampAfterMax:  cfg.LogMessageTimestampAfterMax,
		MirrorPendingTimeout:         cfg.Mirror.PendingTimeout,
		MirrorRetryInitialBackoff:    cfg.Mirror.FailedRetryInitialBackoff,
		MirrorRetryMaxBackoff:        cfg.Mirror.FailedRetryMaxBackoff,
		MirrorRetryMaxAttempts:       cfg.Mirror.FailedRetryMaxAttempts,
		Log: storage.Options{
			SegmentMaxBytes: cfg.Log.SegmentBytes,
			SegmentMaxAge:   max(cfg.Log.RollInterval, 0),
			FlushInterval:   max(cfg.Log.FlushInterval, 0),
		},
	}
	if cfg.LogMessageTimestampBeforeMax == config.NoTimestampBound {
		// broker.Config's "no bound" is zero (a bound of ~292 years would
		// still refuse timestamps near MinInt64). After keeps
		// NoTimestampBound: its zero means the 1h default.
		bc.LogMessageTimestampBeforeMax = 0
	}
	if cfg.Log.RetentionBytes > 0 {
		bc.LogRetentionBytes = cfg.Log.RetentionBytes
	}
	if cfg.Log.Retention > 0 {
		bc.LogRetention = cfg.Log.Retention
	}
	bc.LogRetentionCheckInterval = cfg.Log.RetentionCheckInterval
	switch n := cfg.Log.FlushIntervalMessages; {
	case n == 1:
		bc.FlushPolicy = broker.FlushEveryBatch
	case n > 1 && n < math.MaxInt64:
		bc.Log.FlushMessages = n
	}
	return bc
}

// run wires config → broker.Config, metrics and the /metrics server, and
// blocks in Broker.Run until ctx ends.
func run(ctx context.Context, cfg config.BrokerConfig, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bobs, err := metrics.NewBroker(reg)
	if err != nil {
		return err
	}
	mobs, err := metrics.NewMirror(reg)
	if err != nil {
		return err
	}
	obs := metrics.BrokerObserver{Broker: bobs, Mirror: mobs}
	tls, az, err := daemon.Security(cfg.Security, log)
	if err != nil {
		return err
	}
	if err := metrics.WireSecurity(reg, tls, &az); err != nil {
		return err
	}
	bc := brokerConfig(cfg)
	bc.Authz = az
	b, err := broker.New(bc, broker.Deps{Logger: log, Observer: obs, Transport: tls})
	if err != nil {
		return err
	}
	if cfg.MetricsAddress != "" {
		stop, err := daemon.ServeMetrics(cfg.MetricsAddress, reg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.HealthAddress != "" {
		stop, err := daemon.ServeHealth(cfg.HealthAddress, b.Health(), log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return b.Run(ctx)
}

// newHealthcheckCmd: dial, call grpc.health.v1.Health/Check for service "",
// exit 0 iff SERVING (deploy/README.md's contract).
