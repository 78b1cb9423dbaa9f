package metastate

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"google.golang.org/protobuf/proto"
)

// ErrOffsetGap is returned by Apply for a delta that does not follow the
// current metadata offset.
var ErrOffsetGap = errors.New("metastate: delta offset does not follow the metadata offset")

// Rand is the injected randomness (STYLE: interface{ IntN(int) int }).
type Rand interface{ IntN(n int) int }

// Config configures a State.
type Config struct {
	// ClusterID names the cluster; snapshots carry it.
	ClusterID string
	// Rand produces topic ids and placement start offsets. Nil means a fixed
	// deterministic sequence.
	Rand Rand
	// MaxCreatePartitionsPerRequest caps the partitions (and so the topics)
	// one CreateTopics request may create, as Kafka caps the records of one
	// controller operation; 0 means DefaultMaxCreatePartitionsPerRequest.
	MaxCreatePartitionsPerRequest int
	// MaxClusterPartitions caps the partitions of the whole cluster; 0 means
	// DefaultMaxClusterPartitions.
	MaxClusterPartitions int
}

// Defaults of the CreateTopics caps (Config).
const (
	DefaultMaxCreatePartitionsPerRequest = 10000
	DefaultMaxClusterPartitions          = 100000
)

// State is the whole metadata image of one cluster plus the controller's
// soft (never persisted) state: heartbeat times and unclean recovery rounds.
//
// State is not safe for concurrent use. Commands never change the image: they
// return a *twinlogv1.MetadataDelta that the shell persists and then hands to
// Apply. Each command's delta must be applied (or dropped) before the next
// command is computed, because deltas are full records computed against the
// current image and carry the next offset.
type State struct {
	clusterID     string
	offset        int64
	brokers       map[int32]*twinlogv1.BrokerRecord
	topics        map[string]*twinlogv1.TopicRecord
	partitions    map[string][]*twinlogv1.PartitionRecord
	mirrors       map[string]*twinlogv1.MirrorRecord
	clusterConfig map[string]string

	// Indexes of the image, kept by putPartition and dropTopicPartitions so
	// that fencing a broker and electing leaderless partitions touch only
	// the partitions concerned instead of scanning and sorting all of them.
	byBroker   map[int32]map[tpKey]struct{} // partitions whose R holds the broker
	leaderless map[tpKey]struct{}           // partitions with L = −1

	// Soft state.
	rnd         Rand
	limits      Config
	heartbeatMs map[int32]int64
	rounds      map[tpKey]*Round
	nextRoundID uint64
	// exhausted holds partitions whose change was refused because an epoch
	// would overflow, until the shell drains them (DrainEpochExhausted).
	exhausted map[tpKey]Event
}

type tpKey struct {
	topic string
	part  int32
}

// New returns an empty image at offset 0.
func New(cfg Config) *State {
	s := &State{clusterID: cfg.ClusterID, rnd: cfg.Rand, limits: cfg}
	if s.limits.MaxCreatePartitionsPerRequest <= 0 {
		s.limits.MaxCreatePartitionsPerRequest = DefaultMaxCreatePartitionsPerRequest
	}
	if s.limits.MaxClusterPartitions <= 0 {
		s.limits.MaxClusterPartitions = DefaultMaxClusterPartitions
	}
	if s.rnd == nil {
		s.rnd = &splitmix{}
	}
	s.reset()
	return s
}

func (s *State) reset() {
	s.offset = 0
	s.brokers = map[int32]*twinlogv1.BrokerRecord{}
	s.topics = map[string]*twinlogv1.TopicRecord{}
	s.partitions = map[string][]*twinlogv1.PartitionRecord{}
	s.mirrors = map[string]*twinlogv1.MirrorRecord{}
	s.clusterConfig = map[string]string{}
	s.byBroker = map[int32]map[tpKey]struct{}{}
	s.leaderless = map[tpKey]struct{}{}
	s.heartbeatMs = map[int32]int64{}
	s.rounds = map[tpKey]*Round{}
	s.exhausted = map[tpKey]Event{}
}

// errEpochExhausted explains a change refused because the partition's leader
// or partition epoch is at MaxInt32.
var errEpochExhausted = errors.New("metastate: the partition's epochs are exhausted (at MaxInt32); recreate the topic")

// noteEpochExhausted records that a change of k was not written because its
// leader epoch or partition epoch would overflow. Wrapping would make every
// replica's epoch newer than the controller's (or fence them all), so the
// least-bad outcome is to keep the partition exactly as it is: its leader
// keeps serving if it can, and nothing is elected. The operator learns it
// from the EventEpochExhausted the shell drains and logs.
func (s *State) noteEpochExhausted(k tpKey, p *twinlogv1.PartitionRecord) {
	s.exhausted[k] = Event{Kind: EventEpochExhausted, Topic: k.topic, Partition: k.part, Broker: p.GetLeader(),
		OldLeader: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(), ISR: p.GetIsr(), ELR: p.GetElr()}
}

// DrainEpochExhausted returns, sorted, the EventEpochExhausted events noted
// since the last call: changes that were refused because an epoch would have
// overflowed.
func (s *State) DrainEpochExhausted() []Event {
	if len(s.exhausted) == 0 {
		return nil
	}
	ks := slices.SortedFunc(maps.Keys(s.exhausted), cmpKey)
	out := make([]Event, 0, len(ks))
	for _, k := range ks {
		out = append(out, s.exhausted[k])
	}
	clear(s.exhausted)
	return out
}

// splitmix is the default deterministic Rand.
type splitmix struct{ x uint64 }

func (r *splitmix) IntN(n int) int {
	r.x += 0x9e3779b97f4a7c15
	z := r.x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(n))
}

// ClusterID returns the cluster id.
func (s *State) ClusterID() string { return s.clusterID }

// Offset returns the metadata offset of the last applied delta.
func (s *State) Offset() int64 { return s.offset }

// Broker returns the registration of id, nil if unknown. Do not modify it.
func (s *State) Broker(id int32) *twinlogv1.BrokerRecord { return s.brokers[id] }

// Brokers returns all registrations sorted by id. Do not modify them.
func (s *State) Brokers() []*twinlogv1.BrokerRecord {
	out := make([]*twinlogv1.BrokerRecord, 0, len(s.brokers))
	for _, id := range slices.Sorted(maps.Keys(s.brokers)) {
		out = append(out, s.brokers[id])
	}
	return out
}

// Topic returns the topic record, nil if unknown. Do not modify it.
func (s *State) Topic(name string) *twinlogv1.TopicRecord { return s.topics[name] }

// TopicNames returns all topic names in byte-wise order.
func (s *State) TopicNames() []string { return slices.Sorted(maps.Keys(s.topics)) }

// Partition returns a partition record, nil if unknown. Do not modify it.
func (s *State) Partition(topic string, p int32) *twinlogv1.PartitionRecord {
	ps := s.partitions[topic]
	if p < 0 || int(p) >= len(ps) {
		return nil
	}
	return ps[p]
}

// Mirror returns a mirror record, nil if unknown. Do not modify it.
func (s *State) Mirror(name string) *twinlogv1.MirrorRecord { return s.mirrors[name] }

// ClusterConfigs returns a copy of the cluster-level configs.
func (s *State) ClusterConfigs() map[string]string { return maps.Clone(s.clusterConfig) }

// Acceptable reports SPEC §1.2 acceptability: registered, unfenced, not in
// controlled shutdown, no offline log dir. (Replica-to-dir placement is not in
// the metadata, so any offline dir makes all the broker's replicas
// unacceptable; this is conservative.)
func (s *State) Acceptable(b int32) bool { return s.view().acceptable(b) }

// Alive reports a registered, unfenced broker (DescribeTopicPartitions'
// "leader alive", SPEC §5).
func (s *State) Alive(b int32) bool {
	br := s.brokers[b]
	return br != nil && !br.GetFenced()
}

// MinISR returns m = min(min.insync.replicas, |R|) for a partition of topic
// with replication factor rf; rf <= 0 returns the configured value.
func (s *State) MinISR(topic string, rf int) int {
	if rf <= 0 {
		return s.view().minInsync(topic)
	}
	return s.view().m(topic, rf)
}

// TopicConfig returns the effective value of key for topic: topic, then
// cluster, then default (SPEC §1.3).
func (s *State) TopicConfig(topic, key string) string { return s.view().topicConfig(topic, key) }

// ClusterConfig returns the effective cluster-level value of key.
func (s *State) ClusterConfig(key string) string { return s.view().clusterConfigValue(key) }

// ClusterConfigSet returns key's cluster-wide value and true if an operator
// set it (AlterConfigs on the cluster); "" and false if it has its default.
// A broker's own setting of a broker-scoped key yields to a set value only
// (Kafka's order: dynamic cluster default, then the static file, then the
// built-in default).
func (s *State) ClusterConfigSet(key string) (string, bool) {
	v, ok := s.view().clusterConfigs()[key]
	return v, ok
}

// ELREnabled reports eligible.leader.replicas.enabled.
func (s *State) ELREnabled() bool { return s.view().elrEnabled() }

// UncleanStrategy returns the effective strategy for topic (SPEC §3.5).
func (s *State) UncleanStrategy(topic string) string { return s.view().strategy(topic) }

// Apply installs a delta computed by a command (or read back at start-up)
// and returns the notable transitions it made. The delta's offset must be
// Offset()+1.
//
// Apply takes ownership of d: its records become part of the image (they
// are not copied), so neither the caller nor anyone it shared d with may
// modify d afterwards. Reading it (marshalling, serving it to followers,
// applying it to another State) is fine: the image never modifies a record
// in place.
func (s *State) Apply(d *twinlogv1.MetadataDelta) ([]Event, error) {
	if d == nil {
		return nil, nil
	}
	if d.GetOffset() != s.offset+1 {
		return nil, fmt.Errorf("%w: got %d, at %d", ErrOffsetGap, d.GetOffset(), s.offset)
	}
	events := s.events(d)
	for _, id := range d.GetRemovedBrokers() {
		delete(s.brokers, id)
		delete(s.heartbeatMs, id)
	}
	for _, b := range d.GetBrokers() {
		s.brokers[b.GetBrokerId()] = b
	}
	if cc := d.GetClusterConfig(); cc != nil {
		s.clusterConfig = cc.GetConfigs()
		if s.clusterConfig == nil {
			s.clusterConfig = map[string]string{}
		}
	}
	for _, name := range d.GetRemovedTopics() {
		delete(s.topics, name)
		s.dropTopicPartitions(name)
		for k := range s.rounds {
			if k.topic == name {
				delete(s.rounds, k)
			}
		}
	}
	for _, t := range d.GetTopics() {
		old := s.topics[t.GetName()]
		if old != nil && old.GetTopicId() != t.GetTopicId() {
			s.dropTopicPartitions(t.GetName())
		}
		s.topics[t.GetName()] = t
	}
	for _, p := range d.GetPartitions() {
		s.putPartition(p)
	}
	for _, name := range d.GetRemovedMirrors() {
		delete(s.mirrors, name)
	}
	for _, m := range d.GetMirrors() {
		s.mirrors[m.GetName()] = m
	}
	s.offset = d.GetOffset()
	return events, nil
}

func (s *State) putPartition(p *twinlogv1.PartitionRecord) {
	ps := s.partitions[p.GetTopic()]
	for int(p.GetPartition()) >= len(ps) {
		ps = append(ps, nil)
	}
	old := ps[p.GetPartition()]
	ps[p.GetPartition()] = p
	s.partitions[p.GetTopic()] = ps
	s.index(old, p)
}

// index moves k's index entries from old (nil: none) to p (nil: none).
func (s *State) index(old, p *twinlogv1.PartitionRecord) {
	var k tpKey
	if p != nil {
		k = tpKey{p.GetTopic(), p.GetPartition()}
	} else {
		k = tpKey{old.GetTopic(), old.GetPartition()}
	}
	if old != nil && p != nil && slices.Equal(old.GetReplicas(), p.GetReplicas()) {
		// R unchanged (the common case): only the leaderless entry may move.
	} else {
		s.indexReplicas(k, old, p)
	}
	if p != nil && p.GetLeader() == noBroker {
		s.leaderless[k] = struct{}{}
	} else {
		delete(s.leaderless, k)
	}
}

func (s *State) indexReplicas(k tpKey, old, p *twinlogv1.PartitionRecord) {
	for _, b := range old.GetReplicas() {
		if !contains(p.GetReplicas(), b) {
			if set := s.byBroker[b]; set != nil {
				delete(set, k)
				if len(set) == 0 {
					delete(s.byBroker, b)
				}
			}
		}
	}
	for _, b := range p.GetReplicas() {
		set := s.byBroker[b]
		if set == nil {
			set = map[tpKey]struct{}{}
			s.byBroker[b] = set
		}
		set[k] = struct{}{}
	}
}

// dropTopicPartitions removes a topic's partitions and their index entries.
func (s *State) dropTopicPartitions(name string) {
	for _, p := range s.partitions[name] {
		if p != nil {
			s.index(p, nil)
		}
	}
	delete(s.partitions, name)
}

// Snapshot returns the whole image (not the soft state), sorted.
func (s *State) Snapshot() *twinlogv1.MetadataSnapshot {
	snap := &twinlogv1.MetadataSnapshot{
		Offset:        s.offset,
		ClusterId:     s.clusterID,
		ClusterConfig: &twinlogv1.ClusterConfigRecord{Configs: maps.Clone(s.clusterConfig)},
	}
	for _, b := range s.Brokers() {
		snap.Brokers = append(snap.Brokers, proto.Clone(b).(*twinlogv1.BrokerRecord))
	}
	for _, name := range s.TopicNames() {
		snap.Topics = append(snap.Topics, proto.Clone(s.topics[name]).(*twinlogv1.TopicRecord))
		for _, p := range s.partitions[name] {
			if p != nil {
				snap.Partitions = append(snap.Partitions, cloneP(p))
			}
		}
	}
	names := slices.Sorted(maps.Keys(s.mirrors))
	for _, n := range names {
		snap.Mirrors = append(snap.Mirrors, proto.Clone(s.mirrors[n]).(*twinlogv1.MirrorRecord))
	}
	return snap
}

// Restore replaces the image with snap and clears the soft state (heartbeat
// times restart from the next Tick, recovery rounds are not persisted).
func (s *State) Restore(snap *twinlogv1.MetadataSnapshot) {
	s.reset()
	s.offset = snap.GetOffset()
	if snap.GetClusterId() != "" {
		s.clusterID = snap.GetClusterId()
	}
	for _, b := range snap.GetBrokers() {
		s.brokers[b.GetBrokerId()] = proto.Clone(b).(*twinlogv1.BrokerRecord)
	}
	for _, t := range snap.GetTopics() {
		s.topics[t.GetName()] = proto.Clone(t).(*twinlogv1.TopicRecord)
	}
	for _, p := range snap.GetPartitions() {
		s.putPartition(cloneP(p))
	}
	for _, m := range snap.GetMirrors() {
		s.mirrors[m.GetName()] = proto.Clone(m).(*twinlogv1.MirrorRecord)
	}
	if cc := snap.GetClusterConfig().GetConfigs(); cc != nil {
		s.clusterConfig = maps.Clone(cc)
	}
}

// FromSnapshot builds a State from a snapshot, e.g. a broker's metadata copy.
func FromSnapshot(snap *twinlogv1.MetadataSnapshot, cfg Config) *State {
	s := New(cfg)
	s.Restore(snap)
	return s
}

// sortedPartitions returns every partition in (topic, index) order.
func (s *State) sortedPartitions() []*twinlogv1.PartitionRecord {
	var out []*twinlogv1.PartitionRecord
	names := slices.Sorted(maps.Keys(s.partitions))
	for _, n := range names {
		for _, p := range s.partitions[n] {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}
