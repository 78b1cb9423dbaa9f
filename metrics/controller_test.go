package metrics

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/twinlog/twinlog/controller"
)

func TestControllerMetricsScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := NewController(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.ObservePartition(controller.PartitionStats{Topic: "a", Partition: 0, ISR: 2, ELR: 1})
	c.ObservePartition(controller.PartitionStats{Topic: "a", Partition: 1, ISR: 3})
	c.ObservePartition(controller.PartitionStats{Topic: "b", Partition: 0, ISR: 1})
	c.ForgetPartition("b", 0)
	c.ObserveCluster(controller.ClusterStats{ElectableLeaders: 6, UnderMinISR: 1, Offline: 2, FencedBrokers: 1, MetadataOffset: 42})
	c.ObserveElections(3, 1)
	c.ObserveCommit(3 * time.Millisecond)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	got, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	want := map[string]dto.MetricType{
		"twinlog_partition_electable_leaders":              dto.MetricType_GAUGE,
		"twinlog_partition_isr_size":                       dto.MetricType_GAUGE,
		"twinlog_partition_elr_size":                       dto.MetricType_GAUGE,
		"twinlog_cluster_electable_leaders":                dto.MetricType_GAUGE,
		"twinlog_under_min_isr_partitions":                 dto.MetricType_GAUGE,
		"twinlog_offline_partitions":                       dto.MetricType_GAUGE,
		"twinlog_fenced_brokers":                           dto.MetricType_GAUGE,
		"twinlog_leader_elections_total":                   dto.MetricType_COUNTER,
		"twinlog_unclean_elections_total":                  dto.MetricType_COUNTER,
		"twinlog_controller_metadata_offset":               dto.MetricType_GAUGE,
		"twinlog_controller_bbolt_commit_duration_seconds": dto.MetricType_HISTOGRAM,
	}
	for name, typ := range want {
		mf, ok := got[name]
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("%s: type %v, want %v", name, mf.GetType(), typ)
		}
	}
	el := got["twinlog_partition_electable_leaders"]
	if n := len(el.GetMetric()); n != 2 {
		t.Fatalf("electable series = %d, want 2 (b-0 forgotten)", n)
	}
	for _, m := range el.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["topic"] == "a" && labels["partition"] == "0" && m.GetGauge().GetValue() != 3 {
			t.Errorf("a-0 electable = %v, want 3", m.GetGauge().GetValue())
		}
	}
	if v := got["twinlog_unclean_elections_total"].GetMetric()[0].GetCounter().GetValue(); v != 1 {
		t.Errorf("unclean = %v", v)
	}
	if v := got["twinlog_controller_bbolt_commit_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); v != 1 {
		t.Errorf("commit samples = %v", v)
	}
}

// TestOffsetSyncMetrics: each sync sets its time, group count and adds its
// commits and clamps; only a sync that reached everything moves the last
// success; a failed one counts.
func TestOffsetSyncMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := NewController(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.ObserveOffsetSync("m", controller.OffsetSyncStats{At: time.UnixMilli(10_000), Groups: 3, OffsetsCommitted: 5, OffsetsClamped: 1})
	// The failure counter exists from the first sync on (alerts and
	// dashboards find a 0 series, not none).
	if g, ok := gathered(t, reg)["twinlog_mirror_offset_sync_failures_total,mirror=m"]; !ok || g != 0 {
		t.Fatalf("failures after a successful sync: %v (present %v), want 0", g, ok)
	}
	c.ObserveOffsetSync("m", controller.OffsetSyncStats{At: time.UnixMilli(20_000), Groups: 2, OffsetsCommitted: 2, Failed: true})
	got := gathered(t, reg)
	for k, v := range map[string]float64{
		"twinlog_mirror_offset_sync_timestamp_seconds,mirror=m":              20,
		"twinlog_mirror_offset_sync_last_success_timestamp_seconds,mirror=m": 10,
		"twinlog_mirror_offset_sync_groups,mirror=m":                         2,
		"twinlog_mirror_offset_sync_commits_total,mirror=m":                  7,
		"twinlog_mirror_offset_sync_clamped_total,mirror=m":                  1,
		"twinlog_mirror_offset_sync_failures_total,mirror=m":                 1,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
