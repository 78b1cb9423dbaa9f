// Command controllerd runs one twinlog cluster controller (SPEC §3).
//
//	controllerd --config configs/cluster-a/controller.yaml
//	controllerd healthcheck --address 127.0.0.1:9090 [--timeout 2s]
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/twinlog/twinlog/controller"
	"github.com/twinlog/twinlog/internal/config"
	"github.com/twinlog/twinlog/internal/daemon"
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
			log, err := daemon.NewLogger(logFormat, logLevel)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return err
			}
			// A typo in a variable name would otherwise go unnoticed:
			// the key keeps its file or default value.
			if unknown := config.UnknownControllerEnv(os.Environ()); len(unknown) > 0 {
				log.Warn("ignoring TWINLOG_ environment variables that name no controllerd config key", "vars", unknown)
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
	root.AddCommand(daemon.HealthcheckCmd("controller", "127.0.0.1:9090"))
	return root
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
	tls, az, err := daemon.Security(cfg.Security, log)
	if err != nil {
		return err
	}
	if err := metrics.WireSecurity(reg, tls, &az); err != nil {
		return err
	}
	cc := controllerConfig(cfg)
	cc.Authz = az
	ctl, err := controller.New(cc, controller.Deps{Logger: log, Observer: obs, Transport: tls})
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
		stop, err := daemon.ServeHealth(cfg.HealthAddress, ctl.Health(), log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return ctl.Run(ctx)
}

// controllerConfig maps controllerd's keys to controller.Config: the
// limits, and the cluster configs written at the first start.
func controllerConfig(cfg config.ControllerConfig) controller.Config {
	cc := controller.Config{
		DataDir:                             cfg.DataDir,
		ClusterID:                           cfg.ClusterID,
		ListenAddr:                          cfg.ListenAddress,
		MaxRequestPartitionSizeLimit:        int(cfg.MaxRequestPartitionSizeLimit),
		CreateTopicsMaxPartitionsPerRequest: cfg.CreateTopicsMaxPartitionsPerRequest,
		MaxClusterPartitions:                cfg.MaxClusterPartitions,
		MaxFetchBytes:                       cfg.MetadataFetchMaxBytes,
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
	}
	if cfg.ProducerIDSpace != 0 {
		// Unset (0), nothing is written: the space is derived from the
		// cluster id (metadata.ProducerIDSpace).
		cc.ClusterConfigs["producer.id.space"] = strconv.Itoa(cfg.ProducerIDSpace)
	}
	return cc
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// newHealthcheckCmd implements deploy/README.md's contract: dial, call
// grpc.health.v1.Health/Check for service "", exit 0 iff SERVING. It reads no
// config and touches no data.
