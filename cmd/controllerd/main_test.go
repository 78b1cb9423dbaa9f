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

// TestProducerIDSpaceReachesController: producer.id.space goes into the
// first-start cluster configs when set, and is left out when unset (0), so
// the controller derives the space from the cluster id.
func TestProducerIDSpaceReachesController(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "": absent
	}{
		{[]string{"--cluster.id=a"}, ""},
		{[]string{"--cluster.id=a", "--producer.id.space=2"}, "2"},
	} {
		fs := pflag.NewFlagSet("controllerd", pflag.ContinueOnError)
		config.RegisterControllerFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
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
		if got, ok := c.ClusterConfigs["producer.id.space"]; got != tc.want || ok != (tc.want != "") {
			t.Errorf("%v: producer.id.space %q (set %t), want %q", tc.args, got, ok, tc.want)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%v: controller.Config.Validate: %v", tc.args, err)
		}
	}
}
