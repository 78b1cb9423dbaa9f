package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/broker/coord"
)

// gathered maps "name{label=value,...}" to the sample value (histograms:
// sample count).
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestBrokerObserver(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := NewBroker(reg)
	if err != nil {
		t.Fatal(err)
	}
	// Shares a registry with the controller collectors without clashes.
	if _, err := NewController(reg); err != nil {
		t.Fatalf("controller collectors on the same registry: %v", err)
	}
	b.ObservePartition(broker.PartitionStats{Topic: "t", Partition: 0, Leader: true, HighWatermark: 7, LogEndOffset: 9,
		ISRSize: 2, UnderReplicated: true})
	b.ObserveTruncation("divergence")
	b.ObserveRequest("produce", 3*time.Millisecond)
	b.ObserveBytesIn(100)
	b.ObserveBytesOut(50)
	b.ObserveISRChange(false)
	b.ObserveISRChange(true)
	b.ObserveOfflinePartitions(2)
	b.ObserveProducerIDBlock(true)
	b.ObserveProducerID()
	b.ObserveProducerID()
	b.ObserveKafkaConnections(3)
	b.ObserveKafkaRequest("Produce", time.Millisecond)
	b.ObserveKafkaClosed("oversized")
	b.ObserveCleanRound(broker.CleanRound{Result: "cleaned", BytesRead: 1000, BytesWritten: 300, BytesBefore: 500, BytesAfter: 300,
		RecordsRemoved: 7, Duration: 20 * time.Millisecond})
	b.ObserveCleanerState(0.75, -time.Second, 1)
	b.ObserveRetention(2, 4096)
	got := gathered(t, reg)
	for k, v := range map[string]float64{
		"twinlog_log_retention_deleted_segments_total":            2,
		"twinlog_log_retention_deleted_bytes_total":               4096,
		"twinlog_partition_high_watermark,partition=0,topic=t":    7,
		"twinlog_partition_log_end_offset,partition=0,topic=t":    9,
		"twinlog_leader_isr_size,partition=0,topic=t":             2,
		"twinlog_partition_under_replicated,partition=0,topic=t":  1,
		"twinlog_partition_under_min_isr,partition=0,topic=t":     0,
		"twinlog_log_truncations_total,reason=divergence":         1,
		"twinlog_log_truncations_total,reason=lmle":               0,
		"twinlog_log_truncations_total,reason=out_of_range":       0,
		"twinlog_request_duration_seconds,api=produce":            1,
		"twinlog_bytes_in_total":                                  100,
		"twinlog_bytes_out_total":                                 50,
		"twinlog_isr_shrinks_total":                               1,
		"twinlog_isr_expands_total":                               1,
		"twinlog_broker_offline_partitions":                       2,
		"twinlog_producer_id_blocks_total,result=ok":              1,
		"twinlog_producer_id_blocks_total,result=error":           0,
		"twinlog_producer_ids_total":                              2,
		"twinlog_kafka_connections":                               3,
		"twinlog_kafka_request_duration_seconds,api=Produce":      1,
		"twinlog_kafka_connections_closed_total,reason=oversized": 1,
		"twinlog_kafka_connections_closed_total,reason=malformed": 0,
		"twinlog_log_cleaner_rounds_total,result=cleaned":         1,
		"twinlog_log_cleaner_rounds_total,result=error":           0,
		"twinlog_log_cleaner_round_duration_seconds":              1,
		"twinlog_log_cleaner_read_bytes_total":                    1000,
		"twinlog_log_cleaner_written_bytes_total":                 300,
		"twinlog_log_cleaner_reclaimed_bytes_total":               200,
		"twinlog_log_cleaner_removed_records_total":               7,
		"twinlog_log_cleaner_max_dirty_ratio":                     0.75,
		"twinlog_log_cleaner_max_compaction_delay_seconds":        0,
		"twinlog_log_cleaner_uncleanable_partitions":              1,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	// A follower exports HW/LEO only.
	b.ObservePartition(broker.PartitionStats{Topic: "t", Partition: 0, HighWatermark: 8, LogEndOffset: 9})
	if _, ok := gathered(t, reg)["twinlog_leader_isr_size,partition=0,topic=t"]; ok {
		t.Errorf("follower exports leader ISR size")
	}
	b.ForgetPartition("t", 0)
	if _, ok := gathered(t, reg)["twinlog_partition_high_watermark,partition=0,topic=t"]; ok {
		t.Errorf("forgotten partition still exported")
	}
}

// TestGroupMetrics: groups by state (every state reported, 0 when empty),
// rebalances and commits counted, one lag series per reported partition;
// a partition no longer reported loses its series.
func TestGroupMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := NewBroker(reg)
	if err != nil {
		t.Fatal(err)
	}
	b.ObserveGroupRebalance()
	b.ObserveOffsetCommits(3)
	b.ObserveGroups(broker.GroupStats{Groups: map[string]int{"Stable": 2, "Empty": 1},
		Lag: []coord.Lag{{Group: "g", Topic: "t", Partition: 0, Lag: 5}, {Group: "g", Topic: "t", Partition: 1, Lag: 0}}, LagDropped: 4})
	got := gathered(t, reg)
	for k, v := range map[string]float64{
		"twinlog_groups,state=Stable":                            2,
		"twinlog_groups,state=Empty":                             1,
		"twinlog_groups,state=PreparingRebalance":                0,
		"twinlog_group_rebalances_total":                         1,
		"twinlog_group_offset_commits_total":                     3,
		"twinlog_group_consumer_lag,group=g,partition=0,topic=t": 5,
		"twinlog_group_consumer_lag,group=g,partition=1,topic=t": 0,
		"twinlog_group_consumer_lag_unreported":                  4,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	b.ObserveGroups(broker.GroupStats{Groups: map[string]int{}, Lag: []coord.Lag{{Group: "g", Topic: "t", Partition: 1, Lag: 2}}})
	got = gathered(t, reg)
	if _, ok := got["twinlog_group_consumer_lag,group=g,partition=0,topic=t"]; ok {
		t.Error("the lag series of a partition no longer reported is still there")
	}
	if got["twinlog_group_consumer_lag,group=g,partition=1,topic=t"] != 2 || got["twinlog_groups,state=Stable"] != 0 {
		t.Errorf("after the second report: %v", got)
	}
}
