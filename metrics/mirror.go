package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
)

// Mirror implements broker.MirrorObserver with Prometheus collectors (SPEC
// §7): per-partition lag and state on the destination leaders, partitions
// per state, tainted replicas, truncations, bytes mirrored and fetch errors.
type Mirror struct {
	lagRecords  *prometheus.GaugeVec
	lagSeconds  *prometheus.GaugeVec
	fetchAge    *prometheus.GaugeVec
	state       *prometheus.GaugeVec
	partitions  *prometheus.GaugeVec
	tainted     *prometheus.GaugeVec
	truncations *prometheus.CounterVec
	truncated   *prometheus.CounterVec
	bytes       prometheus.Counter
	fetchErrors *prometheus.CounterVec

	mu    sync.Mutex
	parts map[tpKey]partState // led mirror partitions, for mirror_partitions
}

type tpKey struct {
	topic     string
	partition int32
}

type partState struct {
	mirror string
	state  pb.MirrorState
}

var _ broker.MirrorObserver = (*Mirror)(nil)

// BrokerObserver is the broker's full Observer: core and mirror metrics.
type BrokerObserver struct {
	*Broker
	*Mirror
}

// NewMirror registers the mirror collectors on reg.
func NewMirror(reg prometheus.Registerer) (*Mirror, error) {
	tp := []string{"topic", "partition"}
	m := &Mirror{
		lagRecords: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_mirror_lag_records", Help: "Source HW minus the destination HW: the source's committed records a failover now would lose (led mirror partitions).",
		}, tp),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_mirror_lag_seconds", Help: "Age of the oldest source record the destination has not committed, from the fetch that first showed it committed at the source; 0 when caught up.",
		}, tp),
		fetchAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_mirror_source_fetch_age_seconds",
			Help: "Seconds since the last fetch response from the source (led mirror partitions; -1 before the first): the lag figures are that old.",
		}, tp),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_mirror_partition_state", Help: "1 for the current mirror state of a led partition.",
		}, []string{"mirror", "topic", "partition", "state"}),
		partitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_mirror_partitions", Help: "Led mirror partitions per state.",
		}, []string{"mirror", "state"}),
		tainted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "twinlog_mirror_tainted_replicas", Help: "Replicas tainted by an LMLE truncation.",
		}, tp),
		truncations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "twinlog_mirror_truncations_total", Help: "Mirror leader truncations by reason.",
		}, []string{"reason"}),
		truncated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "twinlog_mirror_truncated_records_total", Help: "Records removed by mirror leader truncations.",
		}, []string{"reason"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "twinlog_mirror_bytes_total", Help: "Bytes appended by mirror fetchers.",
		}),
		fetchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "twinlog_mirror_fetch_errors_total", Help: "Failed mirror fetches by error.",
		}, []string{"error"}),
		parts: map[tpKey]partState{},
	}
	for _, c := range []prometheus.Collector{m.lagRecords, m.lagSeconds, m.fetchAge, m.state, m.partitions, m.tainted,
		m.truncations, m.truncated, m.bytes, m.fetchErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func stateName(s pb.MirrorState) string {
	n := s.String()
	const p = "MIRROR_STATE_"
	if len(n) > len(p) && n[:len(p)] == p {
		return n[len(p):]
	}
	return n
}

// ObserveMirrorPartition implements broker.MirrorObserver.
func (m *Mirror) ObserveMirrorPartition(st *pb.MirrorPartitionStatus) {
	p := strconv.Itoa(int(st.GetPartition()))
	m.lagRecords.WithLabelValues(st.GetTopic(), p).Set(float64(st.GetLagRecords()))
	m.lagSeconds.WithLabelValues(st.GetTopic(), p).Set(st.GetLagSeconds())
	m.fetchAge.WithLabelValues(st.GetTopic(), p).Set(st.GetSourceFetchAgeSeconds())
	m.tainted.WithLabelValues(st.GetTopic(), p).Set(float64(len(st.GetTaints())))
	m.mu.Lock()
	defer m.mu.Unlock()
	k := tpKey{st.GetTopic(), st.GetPartition()}
	old, had := m.parts[k]
	now := partState{st.GetMirror(), st.GetState()}
	if had && old == now {
		return
	}
	if had {
		m.state.DeleteLabelValues(old.mirror, k.topic, p, stateName(old.state))
		m.partitions.WithLabelValues(old.mirror, stateName(old.state)).Dec()
	}
	m.parts[k] = now
	m.state.WithLabelValues(now.mirror, k.topic, p, stateName(now.state)).Set(1)
	m.partitions.WithLabelValues(now.mirror, stateName(now.state)).Inc()
}

// ForgetMirrorPartition implements broker.MirrorObserver.
func (m *Mirror) ForgetMirrorPartition(topic string, partition int32) {
	p := strconv.Itoa(int(partition))
	m.lagRecords.DeleteLabelValues(topic, p)
	m.lagSeconds.DeleteLabelValues(topic, p)
	m.fetchAge.DeleteLabelValues(topic, p)
	m.tainted.DeleteLabelValues(topic, p)
	m.mu.Lock()
	defer m.mu.Unlock()
	k := tpKey{topic, partition}
	if old, ok := m.parts[k]; ok {
		m.state.DeleteLabelValues(old.mirror, topic, p, stateName(old.state))
		m.partitions.WithLabelValues(old.mirror, stateName(old.state)).Dec()
		delete(m.parts, k)
	}
}

// ObserveMirrorState implements broker.MirrorObserver (transitions are
// reflected through ObserveMirrorPartition).
func (m *Mirror) ObserveMirrorState(string, string, int32, pb.MirrorState, pb.MirrorState) {}

// ObserveMirrorTruncation implements broker.MirrorObserver.
func (m *Mirror) ObserveMirrorTruncation(_ string, _ int32, reason string, records int64) {
	m.truncations.WithLabelValues(reason).Inc()
	m.truncated.WithLabelValues(reason).Add(float64(records))
}

// ObserveMirrorBytes implements broker.MirrorObserver.
func (m *Mirror) ObserveMirrorBytes(_ string, _ int32, n int) { m.bytes.Add(float64(n)) }

// ObserveMirrorFetchError implements broker.MirrorObserver.
func (m *Mirror) ObserveMirrorFetchError(_ string, _ int32, code string) {
	m.fetchErrors.WithLabelValues(code).Inc()
}

// ObserveMirrorTaints implements broker.MirrorObserver (the gauge follows
// the reported taints).
func (m *Mirror) ObserveMirrorTaints(string, int32, int) {}
