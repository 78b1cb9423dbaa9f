package metadata

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"google.golang.org/protobuf/proto"
)

// ErrOffsetGap is returned by Apply for a delta that does not follow the
// current metadata offset.
var ErrOffsetGap = errors.New("metadata: delta offset does not follow the metadata offset")

const noBroker = int32(twinlog.NoBroker)

// Image is the persisted metadata of one cluster at one metadata offset:
// brokers, topics, partitions, mirrors, cluster configs and the producer id
// allocation. It is what the
// controller writes and what every broker rebuilds from FetchMetadata.
//
// Image is not safe for concurrent use. Records returned by its readers must
// not be modified: Apply installs a delta's records without copying them.
type Image struct {
	clusterID     string
	offset        int64
	brokers       map[int32]*twinlogv1.BrokerRecord
	topics        map[string]*twinlogv1.TopicRecord
	partitions    map[string][]*twinlogv1.PartitionRecord
	mirrors       map[string]*twinlogv1.MirrorRecord
	clusterConfig map[string]string
	// producerIDs is the producer id allocation (nil: none yet).
	producerIDs *twinlogv1.ProducerIdsRecord
	// acls are the ACL bindings; aclOffset is where they last changed.
	acls      map[ACLKey]struct{}
	aclOffset int64
	// scram are the users' SCRAM credentials.
	scram map[ScramKey]*twinlogv1.UserScramCredentialRecord

	// Indexes of the image, kept by putPartition and dropTopicPartitions so
	// that fencing a broker and electing leaderless partitions (the
	// controller's txn reads them through BrokerPartitions and
	// LeaderlessPartitions) touch only the partitions concerned instead of
	// scanning and sorting all of them.
	byBroker   map[int32]map[tpKey]struct{} // partitions whose R holds the broker
	leaderless map[tpKey]struct{}           // partitions with L = −1
	topicByID  map[string]string            // topic id → name (TopicByID)
}

type tpKey struct {
	topic string
	part  int32
}

// New returns an empty image of cluster clusterID at offset 0.
func New(clusterID string) *Image {
	img := &Image{clusterID: clusterID}
	img.reset()
	return img
}

// FromSnapshot builds an Image from a snapshot, e.g. a broker's metadata
// copy.
func FromSnapshot(snap *twinlogv1.MetadataSnapshot) *Image {
	img := New("")
	img.Restore(snap)
	return img
}

func (img *Image) reset() {
	img.offset = 0
	img.brokers = map[int32]*twinlogv1.BrokerRecord{}
	img.topics = map[string]*twinlogv1.TopicRecord{}
	img.partitions = map[string][]*twinlogv1.PartitionRecord{}
	img.mirrors = map[string]*twinlogv1.MirrorRecord{}
	img.clusterConfig = map[string]string{}
	img.producerIDs = nil
	img.acls = map[ACLKey]struct{}{}
	img.aclOffset = 0
	img.scram = map[ScramKey]*twinlogv1.UserScramCredentialRecord{}
	img.byBroker = map[int32]map[tpKey]struct{}{}
	img.leaderless = map[tpKey]struct{}{}
	img.topicByID = map[string]string{}
}

// ClusterID returns the cluster id.
func (img *Image) ClusterID() string { return img.clusterID }

// Offset returns the metadata offset of the last applied delta.
func (img *Image) Offset() int64 { return img.offset }

// Broker returns the registration of id, nil if unknown. Do not modify it.
func (img *Image) Broker(id int32) *twinlogv1.BrokerRecord { return img.brokers[id] }

// Registered reports whether the image holds broker id's registration in
// epoch (> 0): a broker whose image does has caught up with what the
// cluster knew when it registered.
func (img *Image) Registered(id int32, epoch int64) bool {
	return epoch > 0 && img.Broker(id).GetBrokerEpoch() == epoch
}

// Brokers returns all registrations sorted by id. Do not modify them.
func (img *Image) Brokers() []*twinlogv1.BrokerRecord {
	out := make([]*twinlogv1.BrokerRecord, 0, len(img.brokers))
	for _, id := range slices.Sorted(maps.Keys(img.brokers)) {
		out = append(out, img.brokers[id])
	}
	return out
}

// Topic returns the topic record, nil if unknown. Do not modify it.
func (img *Image) Topic(name string) *twinlogv1.TopicRecord { return img.topics[name] }

// TopicNames returns all topic names in byte-wise order.
func (img *Image) TopicNames() []string { return slices.Sorted(maps.Keys(img.topics)) }

// TopicByID returns the name of the topic whose id is id (false when no
// topic has it: never created, or deleted).
func (img *Image) TopicByID(id string) (string, bool) {
	name, ok := img.topicByID[id]
	return name, ok
}

// putTopic stores t, replacing its name's topic.
func (img *Image) putTopic(t *twinlogv1.TopicRecord) {
	if old := img.topics[t.GetName()]; old != nil {
		delete(img.topicByID, old.GetTopicId())
	}
	img.topics[t.GetName()] = t
	img.topicByID[t.GetTopicId()] = t.GetName()
}

// Partition returns a partition record, nil if unknown. Do not modify it.
func (img *Image) Partition(topic string, p int32) *twinlogv1.PartitionRecord {
	ps := img.partitions[topic]
	if p < 0 || int(p) >= len(ps) {
		return nil
	}
	return ps[p]
}

// SortedPartitions returns every partition in (topic, index) order. Do not
// modify them.
func (img *Image) SortedPartitions() []*twinlogv1.PartitionRecord {
	var out []*twinlogv1.PartitionRecord
	names := slices.Sorted(maps.Keys(img.partitions))
	for _, n := range names {
		for _, p := range img.partitions[n] {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// BrokerPartitionCount returns how many partitions hold broker b in R.
func (img *Image) BrokerPartitionCount(b int32) int { return len(img.byBroker[b]) }

// BrokerPartitions yields the (topic, partition) of every partition whose R
// holds broker b, in no particular order, from the image's index: fencing a
// broker costs its partitions, not the cluster's.
func (img *Image) BrokerPartitions(b int32) iter.Seq2[string, int32] {
	return func(yield func(string, int32) bool) {
		for k := range img.byBroker[b] {
			if !yield(k.topic, k.part) {
				return
			}
		}
	}
}

// LeaderlessPartitions yields the (topic, partition) of every partition
// without a leader, in no particular order, from the image's index.
func (img *Image) LeaderlessPartitions() iter.Seq2[string, int32] {
	return func(yield func(string, int32) bool) {
		for k := range img.leaderless {
			if !yield(k.topic, k.part) {
				return
			}
		}
	}
}

// Mirror returns a mirror record, nil if unknown. Do not modify it.
func (img *Image) Mirror(name string) *twinlogv1.MirrorRecord { return img.mirrors[name] }

// MirrorTopicState is the desired mirror state of topic name
// (MIRRORING, PAUSED, STOPPED, FAILED), UNSPECIFIED when no mirror holds
// it.
func (img *Image) MirrorTopicState(name string) twinlogv1.MirrorState {
	t := img.topics[name]
	if t == nil {
		return twinlogv1.MirrorState_MIRROR_STATE_UNSPECIFIED
	}
	if m := img.mirrors[t.GetMirrorName()]; m != nil {
		for _, mt := range m.GetTopics() {
			if mt.GetTopic() == name {
				return mt.GetDesiredState()
			}
		}
	}
	return twinlogv1.MirrorState_MIRROR_STATE_UNSPECIFIED
}

// MirrorNames returns all mirror names in byte-wise order.
func (img *Image) MirrorNames() []string { return slices.Sorted(maps.Keys(img.mirrors)) }

// ClusterConfigs returns a copy of the cluster-level configs.
func (img *Image) ClusterConfigs() map[string]string { return maps.Clone(img.clusterConfig) }

// StoredClusterConfigs returns the cluster-level configs as stored, without
// a copy, for callers that resolve many values (the controller's change of
// thousands of partitions). Do not modify it.
func (img *Image) StoredClusterConfigs() map[string]string { return img.clusterConfig }

// Acceptable reports SPEC §1.2 acceptability of broker b (BrokerAcceptable).
func (img *Image) Acceptable(b int32) bool { return BrokerAcceptable(img.brokers[b]) }

// BrokerEpochs returns the registered brokers' epochs, all of them and the
// acceptable ones (a broker's replica state needs both: follower fetches
// are checked against every registration, electability against the
// acceptable ones).
func (img *Image) BrokerEpochs() (registered, acceptable map[twinlog.BrokerID]twinlog.BrokerEpoch) {
	registered = make(map[twinlog.BrokerID]twinlog.BrokerEpoch, len(img.brokers))
	acceptable = make(map[twinlog.BrokerID]twinlog.BrokerEpoch, len(img.brokers))
	for id, br := range img.brokers {
		registered[twinlog.BrokerID(id)] = twinlog.BrokerEpoch(br.GetBrokerEpoch())
		if BrokerAcceptable(br) {
			acceptable[twinlog.BrokerID(id)] = twinlog.BrokerEpoch(br.GetBrokerEpoch())
		}
	}
	return registered, acceptable
}

// Alive reports a registered, unfenced broker (DescribeTopicPartitions'
// "leader alive", SPEC §5).
func (img *Image) Alive(b int32) bool { return BrokerAlive(img.brokers[b]) }

// MinISR returns m = min(min.insync.replicas, |R|) for a partition of topic
// with replication factor rf; rf <= 0 returns the configured value.
func (img *Image) MinISR(topic string, rf int) int {
	if rf <= 0 {
		return ResolveMinInsync(img.topics[topic], img.clusterConfig)
	}
	return ResolveMinISR(img.topics[topic], img.clusterConfig, rf)
}

// TopicConfig returns the effective value of key for topic: topic, then
// cluster, then default (SPEC §1.3).
func (img *Image) TopicConfig(topic, key string) string {
	return ResolveTopicConfig(img.topics[topic], img.clusterConfig, key)
}

// ClusterConfig returns the effective cluster-level value of key.
func (img *Image) ClusterConfig(key string) string {
	return ResolveClusterConfig(img.clusterConfig, key)
}

// ClusterConfigSet returns key's cluster-wide value and true if an operator
// set it (AlterConfigs on the cluster); "" and false if it has its default.
// A broker's own setting of a broker-scoped key yields to a set value only
// (Kafka's order: dynamic cluster default, then the static file, then the
// built-in default).
func (img *Image) ClusterConfigSet(key string) (string, bool) {
	v, ok := img.clusterConfig[key]
	return v, ok
}

// ProducerIDs returns the producer id allocation, nil before the first
// block. Do not modify it.
func (img *Image) ProducerIDs() *twinlogv1.ProducerIdsRecord { return img.producerIDs }

// ProducerIDSpace returns the cluster's producer id space
// (metadata.ProducerIDSpace of its cluster configs and id).
func (img *Image) ProducerIDSpace() int32 { return ProducerIDSpace(img.clusterConfig, img.clusterID) }

// ELREnabled reports eligible.leader.replicas.enabled.
func (img *Image) ELREnabled() bool { return ResolveELREnabled(img.clusterConfig) }

// UncleanStrategy returns the effective strategy for topic (SPEC §3.5).
func (img *Image) UncleanStrategy(topic string) string {
	return ResolveUncleanStrategy(img.topics[topic], img.clusterConfig)
}

// Apply installs a delta computed by the controller (or read back at
// start-up, or fetched by a broker). The delta's offset must be Offset()+1.
//
// Apply takes ownership of d: its records become part of the image (they
// are not copied), so neither the caller nor anyone it shared d with may
// modify d afterwards. Reading it (marshalling, serving it to followers,
// applying it to another Image) is fine: the image never modifies a record
// in place.
func (img *Image) Apply(d *twinlogv1.MetadataDelta) error {
	if d == nil {
		return nil
	}
	if d.GetOffset() != img.offset+1 {
		return fmt.Errorf("%w: got %d, at %d", ErrOffsetGap, d.GetOffset(), img.offset)
	}
	for _, id := range d.GetRemovedBrokers() {
		delete(img.brokers, id)
	}
	for _, b := range d.GetBrokers() {
		img.brokers[b.GetBrokerId()] = b
	}
	if cc := d.GetClusterConfig(); cc != nil {
		img.clusterConfig = cc.GetConfigs()
		if img.clusterConfig == nil {
			img.clusterConfig = map[string]string{}
		}
	}
	if r := d.GetProducerIds(); r != nil {
		img.producerIDs = r
	}
	for _, name := range d.GetRemovedTopics() {
		if old := img.topics[name]; old != nil {
			delete(img.topicByID, old.GetTopicId())
		}
		delete(img.topics, name)
		img.dropTopicPartitions(name)
	}
	for _, t := range d.GetTopics() {
		old := img.topics[t.GetName()]
		if old != nil && old.GetTopicId() != t.GetTopicId() {
			img.dropTopicPartitions(t.GetName())
		}
		img.putTopic(t)
	}
	for _, p := range d.GetPartitions() {
		img.putPartition(p)
	}
	for _, name := range d.GetRemovedMirrors() {
		delete(img.mirrors, name)
	}
	for _, m := range d.GetMirrors() {
		img.mirrors[m.GetName()] = m
	}
	img.applyACLs(d)
	img.applyScram(d)
	img.offset = d.GetOffset()
	return nil
}

func (img *Image) putPartition(p *twinlogv1.PartitionRecord) {
	ps := img.partitions[p.GetTopic()]
	for int(p.GetPartition()) >= len(ps) {
		ps = append(ps, nil)
	}
	old := ps[p.GetPartition()]
	ps[p.GetPartition()] = p
	img.partitions[p.GetTopic()] = ps
	img.index(old, p)
}

// index moves k's index entries from old (nil: none) to p (nil: none).
func (img *Image) index(old, p *twinlogv1.PartitionRecord) {
	var k tpKey
	if p != nil {
		k = tpKey{p.GetTopic(), p.GetPartition()}
	} else {
		k = tpKey{old.GetTopic(), old.GetPartition()}
	}
	if old != nil && p != nil && slices.Equal(old.GetReplicas(), p.GetReplicas()) {
		// R unchanged (the common case): only the leaderless entry may move.
	} else {
		img.indexReplicas(k, old, p)
	}
	if p != nil && p.GetLeader() == noBroker {
		img.leaderless[k] = struct{}{}
	} else {
		delete(img.leaderless, k)
	}
}

func (img *Image) indexReplicas(k tpKey, old, p *twinlogv1.PartitionRecord) {
	for _, b := range old.GetReplicas() {
		if !slices.Contains(p.GetReplicas(), b) {
			if set := img.byBroker[b]; set != nil {
				delete(set, k)
				if len(set) == 0 {
					delete(img.byBroker, b)
				}
			}
		}
	}
	for _, b := range p.GetReplicas() {
		set := img.byBroker[b]
		if set == nil {
			set = map[tpKey]struct{}{}
			img.byBroker[b] = set
		}
		set[k] = struct{}{}
	}
}

// dropTopicPartitions removes a topic's partitions and their index entries.
func (img *Image) dropTopicPartitions(name string) {
	for _, p := range img.partitions[name] {
		if p != nil {
			img.index(p, nil)
		}
	}
	delete(img.partitions, name)
}

// Snapshot returns the whole image, sorted, as copies the caller owns.
func (img *Image) Snapshot() *twinlogv1.MetadataSnapshot {
	snap := &twinlogv1.MetadataSnapshot{
		Offset:        img.offset,
		ClusterId:     img.clusterID,
		ClusterConfig: &twinlogv1.ClusterConfigRecord{Configs: maps.Clone(img.clusterConfig)},
	}
	if img.producerIDs != nil {
		snap.ProducerIds = proto.CloneOf(img.producerIDs)
	}
	for _, b := range img.Brokers() {
		snap.Brokers = append(snap.Brokers, proto.Clone(b).(*twinlogv1.BrokerRecord))
	}
	for _, name := range img.TopicNames() {
		snap.Topics = append(snap.Topics, proto.Clone(img.topics[name]).(*twinlogv1.TopicRecord))
		for _, p := range img.partitions[name] {
			if p != nil {
				snap.Partitions = append(snap.Partitions, ClonePartition(p))
			}
		}
	}
	for _, n := range img.MirrorNames() {
		snap.Mirrors = append(snap.Mirrors, proto.Clone(img.mirrors[n]).(*twinlogv1.MirrorRecord))
	}
	snap.Acls = img.ACLs()
	for _, r := range img.ScramCredentials() {
		snap.ScramCredentials = append(snap.ScramCredentials, proto.CloneOf(r))
	}
	return snap
}

// Restore replaces the image with copies of snap's records. The cluster id
// is kept when snap carries none.
func (img *Image) Restore(snap *twinlogv1.MetadataSnapshot) {
	img.reset()
	img.offset = snap.GetOffset()
	if snap.GetClusterId() != "" {
		img.clusterID = snap.GetClusterId()
	}
	for _, b := range snap.GetBrokers() {
		img.brokers[b.GetBrokerId()] = proto.Clone(b).(*twinlogv1.BrokerRecord)
	}
	for _, t := range snap.GetTopics() {
		img.putTopic(proto.Clone(t).(*twinlogv1.TopicRecord))
	}
	for _, p := range snap.GetPartitions() {
		img.putPartition(ClonePartition(p))
	}
	for _, m := range snap.GetMirrors() {
		img.mirrors[m.GetName()] = proto.Clone(m).(*twinlogv1.MirrorRecord)
	}
	if cc := snap.GetClusterConfig().GetConfigs(); cc != nil {
		img.clusterConfig = maps.Clone(cc)
	}
	if r := snap.GetProducerIds(); r != nil {
		img.producerIDs = proto.CloneOf(r)
	}
	for _, b := range snap.GetAcls() {
		img.acls[KeyOf(b)] = struct{}{}
	}
	img.aclOffset = img.offset
	for _, r := range snap.GetScramCredentials() {
		img.scram[scramKeyOf(r)] = proto.CloneOf(r)
	}
}

// CheckConsistency checks what the image keeps beside its records: every
// topic's partition slots match its count, brokers are keyed by their id,
// and the two indexes (by replica broker, leaderless) match the partitions.
// It returns all violations joined.
func (img *Image) CheckConsistency() error {
	var errs []error
	byID := map[string]string{}
	for name, tr := range img.topics {
		if int(tr.GetPartitionCount()) != len(img.partitions[name]) {
			errs = append(errs, fmt.Errorf("topic %s: %d partitions recorded, count %d", name, len(img.partitions[name]), tr.GetPartitionCount()))
		}
		byID[tr.GetTopicId()] = name
	}
	if !maps.Equal(byID, img.topicByID) {
		errs = append(errs, fmt.Errorf("topic id index %v, image %v", img.topicByID, byID))
	}
	byBroker := map[int32]map[tpKey]struct{}{}
	leaderless := map[tpKey]struct{}{}
	for _, p := range img.SortedPartitions() {
		k := tpKey{p.GetTopic(), p.GetPartition()}
		for _, b := range p.GetReplicas() {
			if byBroker[b] == nil {
				byBroker[b] = map[tpKey]struct{}{}
			}
			byBroker[b][k] = struct{}{}
		}
		if p.GetLeader() == noBroker {
			leaderless[k] = struct{}{}
		}
	}
	if !maps.Equal(leaderless, img.leaderless) {
		errs = append(errs, fmt.Errorf("leaderless index %v, image %v", img.leaderless, leaderless))
	}
	if !maps.EqualFunc(byBroker, img.byBroker, func(a, b map[tpKey]struct{}) bool { return maps.Equal(a, b) }) {
		errs = append(errs, fmt.Errorf("broker index differs from the image"))
	}
	for id, b := range img.brokers {
		if b.GetBrokerId() != id {
			errs = append(errs, fmt.Errorf("broker %d recorded as %d", id, b.GetBrokerId()))
		}
	}
	return errors.Join(errs...)
}
