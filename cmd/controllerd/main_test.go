package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/twinlog/twinlog/internal/config"
)

// TestControllerLimitsReachController: the controllerd keys of the
// controller's caps reach controller.Config, and the defaults give a config
// controller.Config.Validate accepts.
func TestControllerLimitsReachController(t *testing.T) {
	fs := pflag.NewFlagSet("controllerd", pflag.ContinueOnError)
	config.RegisterControllerFlags(fs)
	if err := fs.Parse([]string{"--cluster.id=a", "--create.topics.max.partitions.per.request=123",
		"--cluster.max.partitions=4567", "--metadata.fetch.max.bytes=65536"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadController("", fs)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	c := controllerConfig(cfg)
	if c.CreateTopicsMaxPartitionsPerRequest != 123 || c.MaxClusterPartitions != 4567 || c.MaxFetchBytes != 65536 {
		t.Errorf("controller.Config limits %d, %d, %d; want 123, 4567, 65536", c.CreateTopicsMaxPartitionsPerRequest, c.MaxClusterPartitions, c.MaxFetchBytes)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("controller.Config.Validate: %v", err)
	}
}
