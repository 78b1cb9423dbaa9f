package config

import (
	"strings"
	"testing"
)

// TestControllerLimits: the controller's request and cluster caps are
// controllerd keys with the bounds of internal/configdef; before, they
// existed only as controller.Config fields and could not be set.
func TestControllerLimits(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"per request 0", "create.topics.max.partitions.per.request: 0\n", "create.topics.max.partitions.per.request = 0: must be ≥ 1"},
		{"per request huge", "create.topics.max.partitions.per.request: 1000001\ncluster.max.partitions: 2000000\n", "create.topics.max.partitions.per.request = 1000001: must be ≤ 1000000"},
		{"per request above cluster", "create.topics.max.partitions.per.request: 5000\ncluster.max.partitions: 4000\n", "cluster.max.partitions = 4000: must be ≥ create.topics.max.partitions.per.request (5000)"},
		{"cluster 0", "cluster.max.partitions: 0\n", "cluster.max.partitions = 0: must be ≥ 1"},
		{"cluster huge", "cluster.max.partitions: 10000001\n", "cluster.max.partitions = 10000001: must be ≤ 10000000"},
		{"fetch bytes tiny", "metadata.fetch.max.bytes: 1024\n", "metadata.fetch.max.bytes = 1024: must be ≥ 65536"},
		{"fetch bytes over the message limit", "metadata.fetch.max.bytes: 67108864\n", "metadata.fetch.max.bytes = 67108864: must be ≤ 33554432"},
		{"num partitions of __mirror_state", "mirror.state.topic.num.partitions: 5000\n", "mirror.state.topic.num.partitions = 5000: must be ≤ 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadController(writeFile(t, "cluster.id: a\n"+tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want containing %q", err, tt.want)
			}
		})
	}
	if _, err := LoadController(writeFile(t, "cluster.id: a\ncluster.max.partitions: 010\n"), nil); err == nil || !strings.Contains(err.Error(), "leading zeros") {
		t.Errorf("cluster.max.partitions: 010 loaded: %v", err)
	}
	c, err := LoadController(writeFile(t, "cluster.id: a\ncreate.topics.max.partitions.per.request: 500\ncluster.max.partitions: 500\nmetadata.fetch.max.bytes: 65536\n"), nil)
	if err == nil {
		err = c.Validate()
	}
	if err != nil || c.CreateTopicsMaxPartitionsPerRequest != 500 || c.MaxClusterPartitions != 500 || c.MetadataFetchMaxBytes != 65536 {
		t.Fatalf("limits at their bounds: %+v, %v", c, err)
	}
}
