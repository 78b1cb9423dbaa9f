package metastate

import (
	"encoding/base64"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/internal/configdef"
	"github.com/twinlog/twinlog/metadata"
)

// ValidateTopicName applies Kafka's rules: non-empty, at most 249
// characters of [a-zA-Z0-9._-], not "." or "..".
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name cannot be %q", name)
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("topic name is longer than %d characters", maxTopicNameLength)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q has an illegal character %q", name, c)
		}
	}
	return nil
}

// collisionName maps '.' to '_' (Kafka: such names collide in metrics).
func collisionName(n string) string { return strings.ReplaceAll(n, ".", "_") }

func (t *txn) newTopicID() string {
	for {
		b := make([]byte, 16)
		for i := range b {
			b[i] = byte(t.s.rnd.IntN(256))
		}
		id := base64.RawURLEncoding.EncodeToString(b)
		used := false
		for _, n := range t.topicNames() {
			if t.topic(n).GetTopicId() == id {
				used = true
			}
		}
		if !used && strings.Trim(id, "A") != "" {
			return id
		}
	}
}

// placement spreads rf replicas per partition round-robin over the acceptable
// brokers from a random start.
func (t *txn) placement(partitions, rf int) ([][]int32, error) {
	var live []int32
	for _, id := range t.brokerIDs() {
		if t.acceptable(id) {
			live = append(live, id)
		}
	}
	if rf < 1 || rf > len(live) {
		return nil, fmt.Errorf("replication factor %d with %d available brokers", rf, len(live))
	}
	start := t.s.rnd.IntN(len(live))
	out := make([][]int32, partitions)
	for p := range partitions {
		for j := range rf {
			out[p] = append(out[p], live[(start+p+j)%len(live)])
		}
	}
	return out, nil
}

// createTopic adds a topic and its partitions to the txn: ISR = R, leader
// the first acceptable replica, LE = PE = 0.
func (t *txn) createTopic(name, id string, assign [][]int32, configs map[string]string, internal bool) {
	configs = maps.Clone(configs)
	for k, v := range configs {
		configs[k] = configdef.Canonical(k, v)
	}
	t.putTopic(&twinlogv1.TopicRecord{Name: name, TopicId: id, PartitionCount: int32(len(assign)),
		Configs: configs, Internal: internal})
	for i, r := range assign {
		t.addPartition(name, id, int32(i), r)
	}
}

func (t *txn) addPartition(topic, id string, i int32, r []int32) {
	p := &twinlogv1.PartitionRecord{Topic: topic, TopicId: id, Partition: i, Replicas: slices.Clone(r),
		Isr: slices.Clone(r), Leader: noBroker, LastKnownLeader: noBroker,
		RecoveryState: twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERED}
	for _, b := range r {
		if t.acceptable(b) {
			p.Leader = b
			break
		}
	}
	t.putPartition(p)
}

func topicErr(name string, ec twinlogv1.ErrorCode, format string, args ...any) *twinlogv1.TopicResult {
	return &twinlogv1.TopicResult{Name: name, Error: ec, ErrorMessage: fmt.Sprintf(format, args...)}
}

// CreateTopics creates topics (all in one delta); each topic gets its own
// result. Topic ids come from the injected Rand.
func (s *State) CreateTopics(req *twinlogv1.CreateTopicsRequest) (*twinlogv1.MetadataDelta, *twinlogv1.CreateTopicsResponse) {
	t := s.view()
	resp := &twinlogv1.CreateTopicsResponse{}
	// Caps first, before anything is allocated or placed: the request as a
	// whole (every topic is refused), then the cluster (per topic, in order).
	perRequest := s.limits.MaxCreatePartitionsPerRequest
	var requested int64
	for _, ct := range req.GetTopics() {
		requested += int64(requestedPartitions(ct))
	}
	if len(req.GetTopics()) > perRequest || requested > int64(perRequest) {
		for _, ct := range req.GetTopics() {
			resp.Topics = append(resp.Topics, topicErr(ct.GetName(), ecInvalid,
				"the request asks for %d partitions in %d topics; one CreateTopics request may create at most %d partitions", requested, len(req.GetTopics()), perRequest))
		}
		return nil, resp
	}
	total := int64(s.partitionCount())
	seen := map[string]int{}
	for _, ct := range req.GetTopics() {
		seen[ct.GetName()]++
	}
	for _, ct := range req.GetTopics() {
		name := ct.GetName()
		if seen[name] > 1 {
			resp.Topics = append(resp.Topics, topicErr(name, ecInvalid, "topic listed more than once"))
			continue
		}
		if err := ValidateTopicName(name); err != nil {
			resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC, "%v", err))
			continue
		}
		if metadata.IsReservedTopicName(name) {
			resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC,
				"topic names starting with %q are reserved for internal topics", metadata.InternalTopicPrefix))
			continue
		}
		if n := int64(requestedPartitions(ct)); total+n > int64(s.limits.MaxClusterPartitions) {
			resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS,
				"the cluster has %d partitions; %d more would exceed its limit of %d", total, n, s.limits.MaxClusterPartitions))
			continue
		}
		if t.topic(name) != nil {
			resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS, "topic %q already exists", name))
			continue
		}
		if c := t.collides(name); c != "" {
			resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC, "topic %q collides with %q", name, c))
			continue
		}
		if r := t.validateConfigs(metadata.ScopeTopic, ct.GetConfigs()); r != nil {
			resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG, "%v", r))
			continue
		}
		var assign [][]int32
		if len(ct.GetAssignments()) > 0 {
			for _, a := range ct.GetAssignments() {
				assign = append(assign, slices.Clone(a.GetReplicas()))
			}
			if err := t.validateAssignment(assign); err != nil {
				resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, "%v", err))
				continue
			}
		} else {
			if ct.GetNumPartitions() < 1 {
				resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, "partitions must be >= 1"))
				continue
			}
			var err error
			assign, err = t.placement(int(ct.GetNumPartitions()), int(ct.GetReplicationFactor()))
			if err != nil {
				resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, "%v", err))
				continue
			}
		}
		if err := minInsyncFits(ct.GetConfigs(), assign); err != nil {
			resp.Topics = append(resp.Topics, topicErr(name, twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG, "%v", err))
			continue
		}
		id := t.newTopicID()
		t.createTopic(name, id, assign, ct.GetConfigs(), false)
		total += int64(len(assign))
		resp.Topics = append(resp.Topics, &twinlogv1.TopicResult{Name: name, TopicId: id})
	}
	if req.GetValidateOnly() {
		return nil, resp
	}
	return t.delta(), resp
}

// requestedPartitions is how many partitions ct asks for: its explicit
// assignments, else num_partitions (at least one, for counting).
func requestedPartitions(ct *twinlogv1.CreatableTopic) int32 {
	if n := len(ct.GetAssignments()); n > 0 {
		return int32(min(n, math.MaxInt32))
	}
	return max(ct.GetNumPartitions(), 1)
}

// partitionCount is the number of partitions in the image.
func (s *State) partitionCount() int {
	n := 0
	for _, name := range s.TopicNames() {
		n += int(s.Topic(name).GetPartitionCount())
	}
	return n
}

func (t *txn) collides(name string) string {
	for _, n := range t.topicNames() {
		if n != name && collisionName(n) == collisionName(name) {
			return n
		}
	}
	return ""
}

func (t *txn) validateAssignment(assign [][]int32) error {
	brokers := len(t.brokerIDs())
	for i, r := range assign {
		if len(r) == 0 {
			return fmt.Errorf("partition %d has no replicas", i)
		}
		if len(r) > brokers {
			// Checked before the quadratic duplicate check.
			return fmt.Errorf("partition %d has %d replicas but %d brokers are registered", i, len(r), brokers)
		}
		if hasDuplicates(r) {
			return fmt.Errorf("partition %d has duplicate replicas", i)
		}
		for _, b := range r {
			if t.broker(b) == nil {
				return fmt.Errorf("partition %d: broker %d is not registered", i, b)
			}
		}
	}
	return nil
}

func (t *txn) validateConfigs(scope metadata.Scope, cfg map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		if err := metadata.ValidateConfig(scope, k, cfg[k]); err != nil {
			return err
		}
		if configDef(k).Static {
			return fmt.Errorf("config %q is static", k)
		}
	}
	return nil
}

// minInsyncFits refuses a topic-level min.insync.replicas above the
// topic's replication factor (its smallest replica set). SPEC §1.2 caps m
// at |R|, so such a value would never be what the partitions require; Kafka
// accepts it and then fails every acks=all produce with
// NOT_ENOUGH_REPLICAS. Either way the setting does not mean what it says,
// so it is refused where it is made (create and alter; a cluster-wide value
// applies to topics of every size and stays capped).
func minInsyncFits(cfg map[string]string, replicas [][]int32) error {
	v, ok := cfg[metadata.KeyMinInsyncReplicas]
	if !ok || len(replicas) == 0 {
		return nil
	}
	rf := len(replicas[0])
	for _, r := range replicas[1:] {
		rf = min(rf, len(r))
	}
	if m := metadata.ConfigInt(v, 1); m > int64(rf) {
		return fmt.Errorf("%s %d is above the replication factor %d: a partition never has more in-sync replicas than replicas; set it to at most %d", metadata.KeyMinInsyncReplicas, m, rf, rf)
	}
	return nil
}

// DeleteTopics removes topics and their partitions. An internal topic
// (__mirror_state, any topic with Internal set) and a topic that belongs to a
// mirror cannot be deleted.
func (s *State) DeleteTopics(req *twinlogv1.DeleteTopicsRequest) (*twinlogv1.MetadataDelta, *twinlogv1.DeleteTopicsResponse) {
	t := s.view()
	resp := &twinlogv1.DeleteTopicsResponse{}
	for _, name := range req.GetNames() {
		tr := t.topic(name)
		switch {
		case tr == nil:
			resp.Topics = append(resp.Topics, topicErr(name, ecUnknown, "unknown topic %q", name))
		case tr.GetInternal() || name == mirrorStateTopic:
			// Kafka refuses to delete its internal topics too; only the
			// cluster's own code manages them.
			resp.Topics = append(resp.Topics, topicErr(name, ecInvalid, "topic %q is an internal topic and cannot be deleted", name))
		case tr.GetMirrorName() != "":
			resp.Topics = append(resp.Topics, topicErr(name, ecInvalid, "topic %q belongs to mirror %q", name, tr.GetMirrorName()))
		default:
			t.removeTopic(name)
			resp.Topics = append(resp.Topics, &twinlogv1.TopicResult{Name: name, TopicId: tr.GetTopicId()})
		}
	}
	return t.delta(), resp
}

func scopeOf(rt twinlogv1.ConfigResourceType) metadata.Scope {
	switch rt {
	case twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC:
		return metadata.ScopeTopic
	case twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER:
		return metadata.ScopeCluster
	case twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER:
		return metadata.ScopeBroker
	}
	return 0
}

// AlterConfigs sets and deletes configs per resource (incremental). TOPIC
// resources name a topic; CLUSTER the cluster (name ignored); BROKER only
// the cluster-wide broker default (empty name): per-broker dynamic configs
// have no record in the metadata. Each resource is validated on its own.
// Effects: min.insync.replicas follows SPEC §3.8; turning
// eligible.leader.replicas.enabled off applies §3.3 step 5 to every
// partition; every change re-runs the election for leaderless partitions.
func (s *State) AlterConfigs(req *twinlogv1.AlterConfigsRequest) (*twinlogv1.MetadataDelta, *twinlogv1.AlterConfigsResponse) {
	t := s.view()
	resp := &twinlogv1.AlterConfigsResponse{}
	for _, r := range req.GetResources() {
		res := &twinlogv1.AlterConfigsResult{Resource: r.GetResource()}
		resp.Results = append(resp.Results, res)
		ec, err := t.alterConfig(r)
		if err != nil {
			res.Error, res.ErrorMessage = ec, err.Error()
		}
	}
	if req.GetValidateOnly() {
		return nil, resp
	}
	t.afterConfigChange()
	return t.delta(), resp
}

func (t *txn) alterConfig(r *twinlogv1.AlterConfigsResource) (twinlogv1.ErrorCode, error) {
	invalid := twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG
	scope := scopeOf(r.GetResource().GetType())
	var cur map[string]string
	switch scope {
	case metadata.ScopeTopic:
		tr := t.topic(r.GetResource().GetName())
		if tr == nil {
			return ecUnknown, fmt.Errorf("unknown topic %q", r.GetResource().GetName())
		}
		cur = tr.GetConfigs()
	case metadata.ScopeCluster:
		cur = t.clusterConfigs()
	case metadata.ScopeBroker:
		if r.GetResource().GetName() != "" {
			return ecInvalid, fmt.Errorf("per-broker dynamic configs are not supported; use the cluster-wide broker default (empty name)")
		}
		cur = t.clusterConfigs()
	default:
		return ecInvalid, fmt.Errorf("unknown resource type")
	}
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(r.GetSet())) {
		v := r.GetSet()[k]
		if err := metadata.ValidateConfig(scope, k, v); err != nil {
			return invalid, err
		}
		if configDef(k).Static {
			return invalid, fmt.Errorf("config %q is static", k)
		}
		next[k] = configdef.Canonical(k, v)
	}
	for _, k := range r.GetDelete() {
		d, ok := metadata.LookupConfig(k)
		if !ok || d.Scopes&scope == 0 {
			return invalid, fmt.Errorf("unknown config %q for this resource", k)
		}
		if d.Static {
			// Deleting would change the value as much as setting it:
			// producer.id.space would fall back to the derived space.
			return invalid, fmt.Errorf("config %q is static", k)
		}
		delete(next, k)
	}
	touched := func(k string) bool { _, set := r.GetSet()[k]; return set || slices.Contains(r.GetDelete(), k) }
	if err := metadata.CheckOrders(next, touched); err != nil {
		return invalid, err
	}
	if scope == metadata.ScopeTopic {
		name := r.GetResource().GetName()
		if _, set := r.GetSet()[metadata.KeyMinInsyncReplicas]; set {
			var replicas [][]int32
			for i := range t.topic(name).GetPartitionCount() {
				replicas = append(replicas, t.partition(name, i).GetReplicas())
			}
			if err := minInsyncFits(next, replicas); err != nil {
				return invalid, err
			}
		}
		tr := cloneT(t.topic(name))
		tr.Configs = next
		if len(next) == 0 {
			tr.Configs = nil
		}
		t.putTopic(tr)
	} else {
		t.clusterConfig = next
	}
	return ecNone, nil
}

// afterConfigChange applies the config rules of SPEC §3.8 to every partition
// whose effective configs changed, then re-runs elections.
func (t *txn) afterConfigChange() {
	s := t.s
	old := s.view()
	elrOff := old.elrEnabled() && !t.elrEnabled()
	for _, p := range t.allPartitions() {
		topic := p.GetTopic()
		if elrOff {
			// §3.3 step 5 through the ordinary change path (ELR is now off).
			t.change(p, defaultOpts())
			continue
		}
		if old.minInsync(topic) != t.minInsync(topic) {
			m := t.m(topic, len(p.GetReplicas()))
			if len(p.GetIsr()) >= m && (len(p.GetElr()) > 0 || len(p.GetLastKnownElr()) > 0) {
				n := metadata.ClonePartition(p)
				n.Elr, n.LastKnownElr = nil, nil
				t.putPartition(n)
			}
		}
	}
	t.electLeaderless()
}

// DescribeConfigs returns the effective values of every known key for each
// resource with their source.
func (s *State) DescribeConfigs(req *twinlogv1.DescribeConfigsRequest) *twinlogv1.DescribeConfigsResponse {
	t := s.view()
	resp := &twinlogv1.DescribeConfigsResponse{}
	for _, r := range req.GetResources() {
		res := &twinlogv1.DescribeConfigsResult{Resource: r}
		resp.Results = append(resp.Results, res)
		scope := scopeOf(r.GetType())
		var topicCfg map[string]string
		switch scope {
		case metadata.ScopeTopic:
			tr := t.topic(r.GetName())
			if tr == nil {
				res.Error, res.ErrorMessage = ecUnknown, fmt.Sprintf("unknown topic %q", r.GetName())
				continue
			}
			topicCfg = tr.GetConfigs()
		case metadata.ScopeCluster, metadata.ScopeBroker:
		default:
			res.Error, res.ErrorMessage = ecInvalid, "unknown resource type"
			continue
		}
		for _, k := range metadata.KeysWithScope(scope) {
			e := &twinlogv1.ConfigEntry{Name: k, Value: configDef(k).Default, Source: twinlogv1.ConfigSource_CONFIG_SOURCE_DEFAULT}
			if k == metadata.KeyProducerIDSpace {
				// Its default is derived from the cluster id.
				e.Value = strconv.Itoa(int(metadata.DerivedProducerIDSpace(s.ClusterID())))
			}
			if v, ok := t.clusterConfigs()[k]; ok {
				e.Value, e.Source = v, twinlogv1.ConfigSource_CONFIG_SOURCE_CLUSTER
			}
			if v, ok := topicCfg[k]; ok {
				e.Value, e.Source = v, twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC
			}
			res.Entries = append(res.Entries, e)
		}
	}
	return resp
}
