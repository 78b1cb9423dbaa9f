package controller

import (
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
)

// partStat is what one partition contributes to the SPEC §7 gauges.
type partStat struct {
	isr, elr    int
	offline     bool
	underMinISR bool
}

// statsTracker keeps the cluster gauges incrementally so an applied delta
// costs O(partitions it touches), not O(all partitions). Guarded by
// Controller.mu.
type statsTracker struct {
	topics map[string][]partStat
	totals ClusterStats
}

func (st *statsTracker) reset(s *metastate.State, obs Observer) {
	st.topics = map[string][]partStat{}
	st.totals = ClusterStats{}
	for _, name := range s.TopicNames() {
		st.refreshTopic(s, name, obs)
	}
	st.countBrokers(s)
	st.totals.MetadataOffset = s.Offset()
	obs.ObserveCluster(st.totals)
}

func (st *statsTracker) apply(s *metastate.State, d *twinlogv1.MetadataDelta, obs Observer) {
	if d.GetClusterConfig() != nil {
		// min.insync.replicas may have changed for every topic.
		for _, name := range s.TopicNames() {
			st.refreshTopic(s, name, obs)
		}
	} else {
		for _, name := range d.GetRemovedTopics() {
			st.refreshTopic(s, name, obs)
		}
		for _, t := range d.GetTopics() {
			st.refreshTopic(s, t.GetName(), obs)
		}
		for _, p := range d.GetPartitions() {
			st.refreshPartition(s, p.GetTopic(), p.GetPartition(), obs)
		}
	}
	if len(d.GetBrokers()) > 0 || len(d.GetRemovedBrokers()) > 0 {
		st.countBrokers(s)
	}
	st.totals.MetadataOffset = s.Offset()
	obs.ObserveCluster(st.totals)
}

func (st *statsTracker) countBrokers(s *metastate.State) {
	n := 0
	for _, b := range s.Brokers() {
		if b.GetFenced() {
			n++
		}
	}
	st.totals.FencedBrokers = n
}

// refreshTopic recomputes every partition of name (or forgets them if the
// topic is gone or shrank).
func (st *statsTracker) refreshTopic(s *metastate.State, name string, obs Observer) {
	count := int32(0)
	if t := s.Topic(name); t != nil {
		count = t.GetPartitionCount()
	}
	old := st.topics[name]
	for i := int32(len(old)) - 1; i >= count; i-- {
		st.sub(old[i])
		obs.ForgetPartition(name, i)
	}
	if count == 0 {
		delete(st.topics, name)
		return
	}
	for i := range count {
		st.refreshPartition(s, name, i, obs)
	}
}

func (st *statsTracker) refreshPartition(s *metastate.State, topic string, i int32, obs Observer) {
	p := s.Partition(topic, i)
	ps := st.topics[topic]
	if p == nil {
		if int(i) < len(ps) {
			st.sub(ps[i])
			ps[i] = partStat{}
		}
		return
	}
	for int(i) >= len(ps) {
		ps = append(ps, partStat{})
	}
	n := partStat{
		isr:         len(p.GetIsr()),
		elr:         len(p.GetElr()),
		offline:     p.GetLeader() < 0,
		underMinISR: len(p.GetIsr()) < s.MinISR(topic, len(p.GetReplicas())),
	}
	st.sub(ps[i])
	st.add(n)
	ps[i] = n
	st.topics[topic] = ps
	obs.ObservePartition(PartitionStats{Topic: topic, Partition: i, ISR: n.isr, ELR: n.elr})
}

func (st *statsTracker) add(p partStat) { st.addSigned(p, 1) }
func (st *statsTracker) sub(p partStat) { st.addSigned(p, -1) }

func (st *statsTracker) addSigned(p partStat, sign int) {
	st.totals.ElectableLeaders += sign * (p.isr + p.elr)
	if p.offline {
		st.totals.Offline += sign
	}
	if p.underMinISR {
		st.totals.UnderMinISR += sign
	}
}

// snapshot returns the current totals (tests).
func (st *statsTracker) snapshot() ClusterStats { return st.totals }
