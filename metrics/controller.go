package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/twinlog/twinlog/controller"
)

// Controller implements controller.Observer with Prometheus collectors
// (SPEC §7).
type Controller struct {
	electable        *prometheus.GaugeVec
	isrSize          *prometheus.GaugeVec
	elrSize          *prometheus.GaugeVec
	clusterElectable prometheus.Gauge
	underMinISR      prometheus.Gauge
	offline          prometheus.Gauge
	fenced           prometheus.Gauge
	elections        prometheus.Counter
	unclean          prometheus.Counter
	offset           prometheus.Gauge
	commit           prometheus.Histogram

	syncAt        *prometheus.GaugeVec
	syncSuccessAt *prometheus.GaugeVec
	syncGroups    *prometheus.GaugeVec
	syncCommitted *prometheus.CounterVec
	syncClamped   *prometheus.CounterVec
	syncFailures  *prometheus.CounterVec

	aclSyncAt       prometheus.Gauge
	aclSyncCreated  prometheus.Counter
	aclSyncRemoved  prometheus.Counter
	aclSyncFailures prometheus.Counter
}

var (
	_ controller.Observer           = (*Controller)(nil)
	_ controller.OffsetSyncObserver = (*Controller)(nil)
	_ controller.ACLSyncObserver    = (*Controller)(nil)
)

// NewController registers the controller collectors on reg.
func NewController(reg prometheus.Registerer) (*Controller, error) {
	tp := []string{"topic", "partition"}
	c := &Controller{
		electable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_partition_electable_leaders",
			Help: "Replicas that may become leader cleanly: |ISR| + |ELR|.",
		}, tp),
		isrSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_partition_isr_size", Help: "Size of the partition's committed ISR.",
		}, tp),
		elrSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_partition_elr_size", Help: "Size of the partition's eligible leader replicas.",
		}, tp),
		clusterElectable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "twinlog_cluster_electable_leaders", Help: "Sum of |ISR| + |ELR| over all partitions.",
		}),
		underMinISR: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "twinlog_under_min_isr_partitions", Help: "Partitions whose ISR is smaller than min.insync.replicas.",
		}),
		offline: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "twinlog_offline_partitions", Help: "Partitions without a leader.",
		}),
		fenced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "twinlog_fenced_brokers", Help: "Registered brokers that are fenced.",
		}),
		elections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "twinlog_leader_elections_total", Help: "Leader elections, clean and unclean.",
		}),
		unclean: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "twinlog_unclean_elections_total", Help: "Unclean leader elections.",
		}),
		offset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "twinlog_controller_metadata_offset", Help: "Offset of the last applied metadata change.",
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "twinlog_controller_bbolt_commit_duration_seconds",
			Help:    "Latency of one bbolt transaction persisting a metadata change set.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	m := []string{"mirror"}
	c.syncAt = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "twinlog_mirror_offset_sync_timestamp_seconds", Help: "When the mirror's last offset sync ended (Unix seconds).",
	}, m)
	c.syncSuccessAt = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "twinlog_mirror_offset_sync_last_success_timestamp_seconds", Help: "When the mirror's last offset sync that reached every group ended (Unix seconds).",
	}, m)
	c.syncGroups = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "twinlog_mirror_offset_sync_groups", Help: "Source groups the mirror's last offset sync took.",
	}, m)
	c.syncCommitted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "twinlog_mirror_offset_sync_commits_total", Help: "Offsets the mirror's offset sync wrote to this cluster's groups.",
	}, m)
	c.syncClamped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "twinlog_mirror_offset_sync_clamped_total", Help: "Offsets written below what was committed: clamped to this cluster's high watermark, or moved out of truncated history.",
	}, m)
	c.syncFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "twinlog_mirror_offset_sync_failures_total", Help: "Offset syncs that did not reach every group (source or coordinator unreachable; mirrors describe shows the error).",
	}, m)
	c.aclSyncAt = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "twinlog_mirror_acl_sync_timestamp_seconds", Help: "When the last ACL sync from the mirrors' sources ended (Unix seconds; mirror.acl.sync.enable).",
	})
	c.aclSyncCreated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_mirror_acl_sync_created_total", Help: "ACL bindings the ACL sync created here (a source has them).",
	})
	c.aclSyncRemoved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_mirror_acl_sync_removed_total", Help: "ACL bindings the ACL sync removed here (the filters select them, no source has them).",
	})
	c.aclSyncFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_mirror_acl_sync_failures_total", Help: "ACL syncs that did not read every source or could not write here (the controller logs why); removals wait for a complete one.",
	})
	for _, col := range []prometheus.Collector{c.electable, c.isrSize, c.elrSize, c.clusterElectable,
		c.underMinISR, c.offline, c.fenced, c.elections, c.unclean, c.offset, c.commit,
		c.syncAt, c.syncSuccessAt, c.syncGroups, c.syncCommitted, c.syncClamped, c.syncFailures,
		c.aclSyncAt, c.aclSyncCreated, c.aclSyncRemoved, c.aclSyncFailures} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ObserveOffsetSync implements controller.OffsetSyncObserver.
func (c *Controller) ObserveOffsetSync(mirror string, st controller.OffsetSyncStats) {
	at := float64(st.At.UnixMilli()) / 1000
	c.syncAt.WithLabelValues(mirror).Set(at)
	c.syncGroups.WithLabelValues(mirror).Set(float64(st.Groups))
	c.syncCommitted.WithLabelValues(mirror).Add(float64(st.OffsetsCommitted))
	c.syncClamped.WithLabelValues(mirror).Add(float64(st.OffsetsClamped))
	failures := c.syncFailures.WithLabelValues(mirror) // 0 from the first sync on
	if st.Failed {
		failures.Inc()
	} else {
		c.syncSuccessAt.WithLabelValues(mirror).Set(at)
	}
}

// ObserveACLSync implements controller.ACLSyncObserver.
func (c *Controller) ObserveACLSync(r controller.ACLSyncResult) {
	c.aclSyncAt.Set(float64(r.At.UnixMilli()) / 1000)
	c.aclSyncCreated.Add(float64(r.Created))
	c.aclSyncRemoved.Add(float64(r.Removed))
	if r.Err != "" {
		c.aclSyncFailures.Inc()
	}
}

// ObservePartition implements controller.Observer.
func (c *Controller) ObservePartition(p controller.PartitionStats) {
	part := strconv.Itoa(int(p.Partition))
	c.electable.WithLabelValues(p.Topic, part).Set(float64(p.ISR + p.ELR))
	c.isrSize.WithLabelValues(p.Topic, part).Set(float64(p.ISR))
	c.elrSize.WithLabelValues(p.Topic, part).Set(float64(p.ELR))
}

// ForgetPartition implements controller.Observer.
func (c *Controller) ForgetPartition(topic string, partition int32) {
	part := strconv.Itoa(int(partition))
	c.electable.DeleteLabelValues(topic, part)
	c.isrSize.DeleteLabelValues(topic, part)
	c.elrSize.DeleteLabelValues(topic, part)
}

// ObserveCluster implements controller.Observer.
func (c *Controller) ObserveCluster(s controller.ClusterStats) {
	c.clusterElectable.Set(float64(s.ElectableLeaders))
	c.underMinISR.Set(float64(s.UnderMinISR))
	c.offline.Set(float64(s.Offline))
	c.fenced.Set(float64(s.FencedBrokers))
	c.offset.Set(float64(s.MetadataOffset))
}

// ObserveElections implements controller.Observer.
func (c *Controller) ObserveElections(total, unclean int) {
	c.elections.Add(float64(total))
	c.unclean.Add(float64(unclean))
}

// ObserveCommit implements controller.Observer.
func (c *Controller) ObserveCommit(d time.Duration) { c.commit.Observe(d.Seconds()) }
