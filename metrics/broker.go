package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/broker/kafka"
)

// Broker implements broker.Observer with Prometheus collectors (SPEC §7).
type Broker struct {
	hw              *prometheus.GaugeVec
	leo             *prometheus.GaugeVec
	isrSize         *prometheus.GaugeVec
	underReplicated *prometheus.GaugeVec
	underMinISR     *prometheus.GaugeVec
	truncations     *prometheus.CounterVec
	idempotent      *prometheus.CounterVec
	requests        *prometheus.HistogramVec
	bytesIn         prometheus.Counter
	bytesOut        prometheus.Counter
	isrShrinks      prometheus.Counter
	isrExpands      prometheus.Counter
	offline         prometheus.Gauge
	pidBlocks       *prometheus.CounterVec
	pids            prometheus.Counter

	kafkaConns    prometheus.Gauge
	kafkaRequests *prometheus.HistogramVec
	kafkaClosed   *prometheus.CounterVec

	cleanerRounds       *prometheus.CounterVec
	cleanerRoundSeconds prometheus.Histogram
	cleanerReadBytes    prometheus.Counter
	cleanerWrittenBytes prometheus.Counter
	cleanerReclaimed    prometheus.Counter
	cleanerRemoved      prometheus.Counter
	cleanerMaxDirty     prometheus.Gauge
	cleanerMaxDelay     prometheus.Gauge
	cleanerUncleanable  prometheus.Gauge

	retentionSegments prometheus.Counter
	retentionBytes    prometheus.Counter

	groups          *prometheus.GaugeVec
	groupRebalances prometheus.Counter
	groupCommits    prometheus.Counter
	groupLag        *prometheus.GaugeVec
	groupLagDropped prometheus.Gauge
}

var (
	_ broker.Observer           = (*Broker)(nil)
	_ broker.StorageObserver    = (*Broker)(nil)
	_ broker.ProducerIDObserver = (*Broker)(nil)
	_ broker.CleanerObserver    = (*Broker)(nil)
	_ broker.RetentionObserver  = (*Broker)(nil)
	_ broker.GroupObserver      = (*Broker)(nil)
	_ kafka.Observer            = (*Broker)(nil)
)

// NewBroker registers the broker collectors on reg. The leader-side ISR
// gauge is twinlog_leader_isr_size so a registry shared with the controller
// (in-process runs) does not clash with twinlog_partition_isr_size.
func NewBroker(reg prometheus.Registerer) (*Broker, error) {
	tp := []string{"topic", "partition"}
	b := &Broker{
		hw: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_partition_high_watermark", Help: "High watermark of the local replica.",
		}, tp),
		leo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_partition_log_end_offset", Help: "Log end offset of the local replica.",
		}, tp),
		isrSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_leader_isr_size", Help: "ISR size as the partition's leader knows it (leaders only).",
		}, tp),
		underReplicated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_partition_under_replicated", Help: "1 if the led partition's ISR is smaller than its replica set.",
		}, tp),
		underMinISR: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_partition_under_min_isr", Help: "1 if the led partition's ISR is below min.insync.replicas.",
		}, tp),
		truncations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "twinlog_log_truncations_total", Help: "Log truncations by reason (divergence, lmle, out_of_range, added_back).",
		}, []string{"reason"}),
		idempotent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "twinlog_idempotent_produce_refusals_total",
			Help: "Idempotent producers' batches not appended, by outcome: duplicate (a retry answered with its original offsets), out_of_order_sequence, invalid_producer_epoch, duplicate_sequence.",
		}, []string{"outcome"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "twinlog_request_duration_seconds", Help: "Request latency by API.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 20),
		}, []string{"api"}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "twinlog_bytes_in_total", Help: "Produced bytes appended by leaders.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "twinlog_bytes_out_total", Help: "Record bytes returned by Fetch.",
		}),
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "twinlog_isr_shrinks_total", Help: "ISR shrinks proposed by this broker as leader.",
		}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "twinlog_isr_expands_total", Help: "ISR expansions proposed by this broker as leader.",
		}),
		offline: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "twinlog_broker_offline_partitions", Help: "Partitions whose log failed to open at start (corrupt below the recovery point, bad checkpoint, I/O error); offline until repaired.",
		}),
	}
	b.pidBlocks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "twinlog_producer_id_blocks_total", Help: "Producer id blocks asked of the controller (AllocateProducerIds), by result (ok, error).",
	}, []string{"result"})
	b.pids = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_producer_ids_total", Help: "Producer ids handed to idempotent producers (InitProducerId).",
	})
	for _, r := range []string{"ok", "error"} {
		b.pidBlocks.WithLabelValues(r)
	}
	for _, r := range []string{"divergence", "lmle", "out_of_range"} {
		b.truncations.WithLabelValues(r)
	}
	for _, o := range broker.IdempotentRefusalOutcomes {
		b.idempotent.WithLabelValues(o)
	}
	b.kafkaConns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "twinlog_kafka_connections", Help: "Open connections to the Kafka listener.",
	})
	b.kafkaRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "twinlog_kafka_request_duration_seconds", Help: "Kafka protocol requests handled, by API, and their handling time.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	}, []string{"api"})
	b.kafkaClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "twinlog_kafka_connections_closed_total", Help: "Kafka connections the broker closed: oversized or malformed frames, idle, a handler panic, a failed TLS handshake or principal (authentication), a request after the SASL session ended (expired).",
	}, []string{"reason"})
	for _, r := range []string{"oversized", "malformed", "idle", "panic", "authentication", "expired"} {
		b.kafkaClosed.WithLabelValues(r)
	}
	b.cleanerRounds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "twinlog_log_cleaner_rounds_total", Help: "Log cleaner rounds by result: cleaned (segments swapped in), unchanged, aborted (truncation, retention, close), error (the partition is left uncleaned until restart).",
	}, []string{"result"})
	for _, r := range []string{"cleaned", "unchanged", "aborted", "error"} {
		b.cleanerRounds.WithLabelValues(r)
	}
	b.cleanerRoundSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "twinlog_log_cleaner_round_duration_seconds", Help: "Duration of log cleaner rounds.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	})
	b.cleanerReadBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_log_cleaner_read_bytes_total", Help: "Bytes the log cleaner read (log.cleaner.io.max.bytes.per.second bounds reads and writes together).",
	})
	b.cleanerWrittenBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_log_cleaner_written_bytes_total", Help: "Bytes of cleaned segments the log cleaner wrote.",
	})
	b.cleanerReclaimed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_log_cleaner_reclaimed_bytes_total", Help: "Bytes by which swapped-in cleaned segments are smaller than those they replaced.",
	})
	b.cleanerRemoved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_log_cleaner_removed_records_total", Help: "Records the log cleaner removed (superseded, keyless, expired tombstones).",
	})
	b.cleanerMaxDirty = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "twinlog_log_cleaner_max_dirty_ratio", Help: "Largest dirty ratio among the broker's compacted logs (due above min.cleanable.dirty.ratio).",
	})
	b.cleanerMaxDelay = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "twinlog_log_cleaner_max_compaction_delay_seconds", Help: "How far past max.compaction.lag.ms the most overdue compacted log is (0: none overdue).",
	})
	b.cleanerUncleanable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "twinlog_log_cleaner_uncleanable_partitions", Help: "Compacted partitions whose cleaning failed; not cleaned until the broker restarts.",
	})
	b.retentionSegments = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_log_retention_deleted_segments_total", Help: "Segments log retention deleted (retention.ms, retention.bytes) from this broker's logs.",
	})
	b.retentionBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_log_retention_deleted_bytes_total", Help: "Bytes of the segments log retention deleted from this broker's logs.",
	})
	b.groups = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "twinlog_groups", Help: "Consumer groups this broker coordinates, by state (Empty, Stable, PreparingRebalance, CompletingRebalance, Dead).",
	}, []string{"state"})
	for _, st := range groupStates {
		b.groups.WithLabelValues(st)
	}
	b.groupRebalances = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_group_rebalances_total", Help: "Completed rebalances of the groups this broker coordinates.",
	})
	b.groupCommits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "twinlog_group_offset_commits_total", Help: "Partitions committed to the groups this broker coordinates.",
	})
	b.groupLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "twinlog_group_consumer_lag",
		Help: "A group's consumer lag on a partition: the high watermark of this broker's replica minus the committed offset (groups this broker coordinates, partitions it hosts; at most 10,000 series).",
	}, []string{"group", "topic", "partition"})
	b.groupLagDropped = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "twinlog_group_consumer_lag_unreported", Help: "Committed partitions whose lag is not reported: beyond the series limit, or not hosted by this broker.",
	})
	for _, col := range []prometheus.Collector{b.hw, b.leo, b.isrSize, b.underReplicated, b.underMinISR,
		b.truncations, b.idempotent, b.requests, b.bytesIn, b.bytesOut, b.isrShrinks, b.isrExpands, b.offline, b.pidBlocks, b.pids,
		b.kafkaConns, b.kafkaRequests, b.kafkaClosed,
		b.cleanerRounds, b.cleanerRoundSeconds, b.cleanerReadBytes, b.cleanerWrittenBytes, b.cleanerReclaimed, b.cleanerRemoved,
		b.cleanerMaxDirty, b.cleanerMaxDelay, b.cleanerUncleanable, b.retentionSegments, b.retentionBytes,
		b.groups, b.groupRebalances, b.groupCommits, b.groupLag, b.groupLagDropped} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// groupStates are Kafka's classic group states, each reported (0 when no
// group is in it).
var groupStates = []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// ObserveGroups sets the group gauges; lag series of partitions no longer
// reported are removed.
func (b *Broker) ObserveGroups(st broker.GroupStats) {
	for _, s := range groupStates {
		b.groups.WithLabelValues(s).Set(float64(st.Groups[s]))
	}
	b.groupLag.Reset()
	for _, l := range st.Lag {
		b.groupLag.WithLabelValues(l.Group, l.Topic, strconv.Itoa(int(l.Partition))).Set(float64(l.Lag))
	}
	b.groupLagDropped.Set(float64(st.LagDropped))
}

// ObserveGroupRebalance counts a completed rebalance.
func (b *Broker) ObserveGroupRebalance() { b.groupRebalances.Inc() }

// ObserveOffsetCommits counts committed partitions.
func (b *Broker) ObserveOffsetCommits(n int) { b.groupCommits.Add(float64(n)) }

func bool01(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// ObservePartition implements broker.Observer.
func (b *Broker) ObservePartition(s broker.PartitionStats) {
	part := strconv.Itoa(int(s.Partition))
	b.hw.WithLabelValues(s.Topic, part).Set(float64(s.HighWatermark))
	b.leo.WithLabelValues(s.Topic, part).Set(float64(s.LogEndOffset))
	if s.Leader {
		b.isrSize.WithLabelValues(s.Topic, part).Set(float64(s.ISRSize))
		b.underReplicated.WithLabelValues(s.Topic, part).Set(bool01(s.UnderReplicated))
		b.underMinISR.WithLabelValues(s.Topic, part).Set(bool01(s.UnderMinISR))
		return
	}
	b.isrSize.DeleteLabelValues(s.Topic, part)
	b.underReplicated.DeleteLabelValues(s.Topic, part)
	b.underMinISR.DeleteLabelValues(s.Topic, part)
}

// ForgetPartition implements broker.Observer.
func (b *Broker) ForgetPartition(topic string, partition int32) {
	part := strconv.Itoa(int(partition))
	for _, v := range []*prometheus.GaugeVec{b.hw, b.leo, b.isrSize, b.underReplicated, b.underMinISR} {
		v.DeleteLabelValues(topic, part)
	}
}

// ObserveTruncation implements broker.Observer.
func (b *Broker) ObserveTruncation(reason string) { b.truncations.WithLabelValues(reason).Inc() }

// ObserveIdempotentRefusal implements broker.Observer.
func (b *Broker) ObserveIdempotentRefusal(outcome string) {
	b.idempotent.WithLabelValues(outcome).Inc()
}

// ObserveRequest implements broker.Observer.
func (b *Broker) ObserveRequest(api string, d time.Duration) {
	b.requests.WithLabelValues(api).Observe(d.Seconds())
}

// ObserveBytesIn implements broker.Observer.
func (b *Broker) ObserveBytesIn(n int) { b.bytesIn.Add(float64(n)) }

// ObserveBytesOut implements broker.Observer.
func (b *Broker) ObserveBytesOut(n int) { b.bytesOut.Add(float64(n)) }

// ObserveISRChange implements broker.Observer.
func (b *Broker) ObserveISRChange(expand bool) {
	if expand {
		b.isrExpands.Inc()
		return
	}
	b.isrShrinks.Inc()
}

// ObserveOfflinePartitions implements broker.StorageObserver.
func (b *Broker) ObserveOfflinePartitions(n int) { b.offline.Set(float64(n)) }

// ObserveProducerIDBlock implements broker.ProducerIDObserver.
func (b *Broker) ObserveProducerIDBlock(ok bool) {
	if ok {
		b.pidBlocks.WithLabelValues("ok").Inc()
		return
	}
	b.pidBlocks.WithLabelValues("error").Inc()
}

// ObserveProducerID implements broker.ProducerIDObserver.
func (b *Broker) ObserveProducerID() { b.pids.Inc() }

// ObserveKafkaConnections implements kafka.Observer.
func (b *Broker) ObserveKafkaConnections(n int) { b.kafkaConns.Set(float64(n)) }

// ObserveKafkaRequest implements kafka.Observer.
func (b *Broker) ObserveKafkaRequest(api string, d time.Duration) {
	b.kafkaRequests.WithLabelValues(api).Observe(d.Seconds())
}

// ObserveKafkaClosed implements kafka.Observer.
func (b *Broker) ObserveKafkaClosed(reason string) { b.kafkaClosed.WithLabelValues(reason).Inc() }

// ObserveCleanRound implements broker.CleanerObserver.
func (b *Broker) ObserveCleanRound(r broker.CleanRound) {
	b.cleanerRounds.WithLabelValues(r.Result).Inc()
	b.cleanerRoundSeconds.Observe(r.Duration.Seconds())
	b.cleanerReadBytes.Add(float64(r.BytesRead))
	b.cleanerWrittenBytes.Add(float64(r.BytesWritten))
	b.cleanerReclaimed.Add(float64(max(r.BytesBefore-r.BytesAfter, 0)))
	b.cleanerRemoved.Add(float64(r.RecordsRemoved))
}

// ObserveRetention implements broker.RetentionObserver.
func (b *Broker) ObserveRetention(segments int, bytes int64) {
	b.retentionSegments.Add(float64(segments))
	b.retentionBytes.Add(float64(bytes))
}

// ObserveCleanerState implements broker.CleanerObserver.
func (b *Broker) ObserveCleanerState(maxDirtyRatio float64, maxCompactionDelay time.Duration, uncleanable int) {
	b.cleanerMaxDirty.Set(maxDirtyRatio)
	b.cleanerMaxDelay.Set(max(maxCompactionDelay, 0).Seconds())
	b.cleanerUncleanable.Set(float64(uncleanable))
}
