package metastate

import (
	"maps"
	"math"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
	"google.golang.org/protobuf/proto"
)

// txn is a copy-on-write view of the image used to compute one delta. Reads
// see the pending changes; the image itself is never modified, and is read
// only through its exported readers and index iterators.
type txn struct {
	s             *State
	brokers       map[int32]*twinlogv1.BrokerRecord
	removedBroker map[int32]bool
	topics        map[string]*twinlogv1.TopicRecord
	removedTopics map[string]bool
	parts         map[tpKey]*twinlogv1.PartitionRecord
	mirrors       map[string]*twinlogv1.MirrorRecord
	removedMirror map[string]bool
	clusterConfig map[string]string // nil: unchanged

	// Leader-epoch inputs, resolved against the image when the delta is built
	// so that LE rises once per written change (SPEC §3.3).
	bump  map[tpKey]bool
	minLE map[tpKey]int32
}

func (s *State) view() *txn {
	return &txn{
		s:             s,
		brokers:       map[int32]*twinlogv1.BrokerRecord{},
		removedBroker: map[int32]bool{},
		topics:        map[string]*twinlogv1.TopicRecord{},
		removedTopics: map[string]bool{},
		parts:         map[tpKey]*twinlogv1.PartitionRecord{},
		mirrors:       map[string]*twinlogv1.MirrorRecord{},
		removedMirror: map[string]bool{},
		bump:          map[tpKey]bool{},
		minLE:         map[tpKey]int32{},
	}
}

func (t *txn) broker(id int32) *twinlogv1.BrokerRecord {
	if t.removedBroker[id] {
		return nil
	}
	if b, ok := t.brokers[id]; ok {
		return b
	}
	return t.s.Broker(id)
}

func (t *txn) putBroker(b *twinlogv1.BrokerRecord) {
	delete(t.removedBroker, b.GetBrokerId())
	t.brokers[b.GetBrokerId()] = b
}

func (t *txn) removeBroker(id int32) {
	delete(t.brokers, id)
	t.removedBroker[id] = true
}

func (t *txn) brokerIDs() []int32 {
	ids := map[int32]bool{}
	for _, b := range t.s.Brokers() {
		ids[b.GetBrokerId()] = true
	}
	for id := range t.brokers {
		ids[id] = true
	}
	for id := range t.removedBroker {
		delete(ids, id)
	}
	return keys(ids)
}

func (t *txn) topic(name string) *twinlogv1.TopicRecord {
	if t.removedTopics[name] {
		return nil
	}
	if tr, ok := t.topics[name]; ok {
		return tr
	}
	return t.s.Topic(name)
}

func (t *txn) putTopic(tr *twinlogv1.TopicRecord) {
	delete(t.removedTopics, tr.GetName())
	t.topics[tr.GetName()] = tr
}

func (t *txn) removeTopic(name string) {
	delete(t.topics, name)
	for k := range t.parts {
		if k.topic == name {
			delete(t.parts, k)
		}
	}
	t.removedTopics[name] = true
}

func (t *txn) topicNames() []string {
	// The image's names come sorted; the txn's removals leave them so, and
	// only topics the txn created need another sort.
	out := slices.DeleteFunc(t.s.TopicNames(), func(n string) bool { return t.topic(n) == nil })
	added := false
	for n := range t.topics {
		if t.s.Topic(n) == nil {
			out = append(out, n)
			added = true
		}
	}
	if added {
		slices.Sort(out)
	}
	return out
}

func (t *txn) partition(topic string, p int32) *twinlogv1.PartitionRecord {
	tr := t.topic(topic)
	if tr == nil || p < 0 || p >= tr.GetPartitionCount() {
		return nil
	}
	if pr, ok := t.parts[tpKey{topic, p}]; ok {
		return pr
	}
	if orig := t.s.Partition(topic, p); orig != nil && orig.GetTopicId() == tr.GetTopicId() {
		return orig
	}
	return nil
}

func (t *txn) putPartition(p *twinlogv1.PartitionRecord) {
	t.parts[tpKey{p.GetTopic(), p.GetPartition()}] = p
}

// allPartitions returns every partition of the view in (topic, index) order.
func (t *txn) allPartitions() []*twinlogv1.PartitionRecord {
	var out []*twinlogv1.PartitionRecord
	for _, n := range t.topicNames() {
		for i := range t.topic(n).GetPartitionCount() {
			if p := t.partition(n, i); p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// partitionsOf returns the view's partitions whose R may hold broker b: the
// image's (by the index) and every partition changed in the txn, in no
// particular order. Callers check membership themselves.
func (t *txn) partitionsOf(b int32) []*twinlogv1.PartitionRecord {
	out := make([]*twinlogv1.PartitionRecord, 0, t.s.BrokerPartitionCount(b)+len(t.parts))
	for topic, part := range t.s.BrokerPartitions(b) {
		if _, ok := t.parts[tpKey{topic, part}]; ok {
			continue
		}
		if p := t.partition(topic, part); p != nil {
			out = append(out, p)
		}
	}
	for k := range t.parts {
		if p := t.partition(k.topic, k.part); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// leaderlessKeys returns the keys of the view's partitions without a leader
// in (topic, index) order, from the image's index and the txn's changes.
func (t *txn) leaderlessKeys() []tpKey {
	var out []tpKey
	add := func(k tpKey) {
		if p := t.partition(k.topic, k.part); p != nil && p.GetLeader() == noBroker {
			out = append(out, k)
		}
	}
	for topic, part := range t.s.LeaderlessPartitions() {
		k := tpKey{topic, part}
		if _, ok := t.parts[k]; !ok {
			add(k)
		}
	}
	for k := range t.parts {
		add(k)
	}
	slices.SortFunc(out, cmpKey)
	return out
}

func (t *txn) mirror(name string) *twinlogv1.MirrorRecord {
	if t.removedMirror[name] {
		return nil
	}
	if m, ok := t.mirrors[name]; ok {
		return m
	}
	return t.s.Mirror(name)
}

func (t *txn) putMirror(m *twinlogv1.MirrorRecord) {
	delete(t.removedMirror, m.GetName())
	t.mirrors[m.GetName()] = m
}

func (t *txn) removeMirror(name string) {
	delete(t.mirrors, name)
	t.removedMirror[name] = true
}

func (t *txn) clusterConfigs() map[string]string {
	if t.clusterConfig != nil {
		return t.clusterConfig
	}
	return t.s.StoredClusterConfigs()
}

// The config readers below resolve through metadata's functions, the ones
// the image's own readers use, over the txn's pending records.

func (t *txn) clusterConfigValue(key string) string {
	return metadata.ResolveClusterConfig(t.clusterConfigs(), key)
}

func (t *txn) minInsync(topic string) int {
	return metadata.ResolveMinInsync(t.topic(topic), t.clusterConfigs())
}

// m is SPEC §1.2's m = min(min.insync.replicas, |R|).
func (t *txn) m(topic string, rf int) int {
	return metadata.ResolveMinISR(t.topic(topic), t.clusterConfigs(), rf)
}

func (t *txn) elrEnabled() bool { return metadata.ResolveELREnabled(t.clusterConfigs()) }

// strategy is SPEC §3.5: aggressive if unclean.leader.election.enable, else
// unclean.recovery.strategy.
func (t *txn) strategy(topic string) string {
	return metadata.ResolveUncleanStrategy(t.topic(topic), t.clusterConfigs())
}

func (t *txn) acceptable(b int32) bool { return metadata.BrokerAcceptable(t.broker(b)) }

// delta builds the MetadataDelta of the pending changes, nil if none. Records
// equal to the image are dropped (SPEC §3.3 "a change whose result equals the
// current state is not written"); each written partition gets PE + 1 and the
// leader epoch of SPEC §3.3.
func (t *txn) delta() *twinlogv1.MetadataDelta {
	s := t.s
	d := &twinlogv1.MetadataDelta{Offset: s.Offset() + 1}
	changed := false
	for _, id := range slices.Sorted(maps.Keys(t.removedBroker)) {
		if s.Broker(id) != nil {
			d.RemovedBrokers = append(d.RemovedBrokers, id)
			changed = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(t.brokers)) {
		b := t.brokers[id]
		if !proto.Equal(b, s.Broker(id)) {
			d.Brokers = append(d.Brokers, b)
			changed = true
		}
	}
	if t.clusterConfig != nil && !maps.Equal(t.clusterConfig, s.StoredClusterConfigs()) {
		d.ClusterConfig = &twinlogv1.ClusterConfigRecord{Configs: maps.Clone(t.clusterConfig)}
		changed = true
	}
	for _, n := range slices.Sorted(maps.Keys(t.removedTopics)) {
		if s.Topic(n) != nil && t.topics[n] == nil {
			d.RemovedTopics = append(d.RemovedTopics, n)
			changed = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(t.topics)) {
		tr := t.topics[n]
		old := s.Topic(n)
		if old != nil && old.GetTopicId() != tr.GetTopicId() {
			d.RemovedTopics = append(d.RemovedTopics, n)
		}
		if !proto.Equal(tr, old) {
			d.Topics = append(d.Topics, tr)
			changed = true
		}
	}
	// t.parts holds records private to the txn (every put is a clone or a
	// new record), so the epochs are resolved in place: no clone, and one
	// hand-written comparison per record.
	for _, k := range slices.SortedFunc(maps.Keys(t.parts), cmpKey) {
		n := t.parts[k]
		old := s.Partition(k.topic, k.part)
		if old == nil || old.GetTopicId() != n.GetTopicId() {
			d.Partitions = append(d.Partitions, n)
			changed = true
			continue
		}
		le := old.GetLeaderEpoch()
		if n.GetLeader() != old.GetLeader() || t.bump[k] {
			if le == math.MaxInt32 {
				// Wrapping would fence every replica for good; the change
				// is refused and the partition stays as it is (see
				// State.noteEpochExhausted).
				s.noteEpochExhausted(k, old)
				continue
			}
			le++
		}
		if min, ok := t.minLE[k]; ok && min > le {
			le = min
		}
		n.LeaderEpoch = le
		n.PartitionEpoch = old.GetPartitionEpoch()
		if metadata.PartitionEqual(n, old) {
			continue
		}
		if n.GetPartitionEpoch() == math.MaxInt32 {
			s.noteEpochExhausted(k, old)
			continue
		}
		n.PartitionEpoch++
		d.Partitions = append(d.Partitions, n)
		changed = true
	}
	for _, n := range slices.Sorted(maps.Keys(t.removedMirror)) {
		if s.Mirror(n) != nil && t.mirrors[n] == nil {
			d.RemovedMirrors = append(d.RemovedMirrors, n)
			changed = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(t.mirrors)) {
		if !proto.Equal(t.mirrors[n], s.Mirror(n)) {
			d.Mirrors = append(d.Mirrors, t.mirrors[n])
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return d
}

// result returns the record a partition will have after d (or now, if d
// does not touch it).
func (s *State) result(d *twinlogv1.MetadataDelta, topic string, p int32) *twinlogv1.PartitionRecord {
	for _, pr := range d.GetPartitions() {
		if pr.GetTopic() == topic && pr.GetPartition() == p {
			return pr
		}
	}
	return s.Partition(topic, p)
}

func cloneB(b *twinlogv1.BrokerRecord) *twinlogv1.BrokerRecord {
	return proto.Clone(b).(*twinlogv1.BrokerRecord)
}

func cloneT(tr *twinlogv1.TopicRecord) *twinlogv1.TopicRecord {
	return proto.Clone(tr).(*twinlogv1.TopicRecord)
}

func protoEqual(a, b proto.Message) bool { return proto.Equal(a, b) }
