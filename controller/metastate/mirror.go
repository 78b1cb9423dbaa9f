package metastate

import (
	"fmt"
	"maps"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
	"google.golang.org/protobuf/proto"
)

// MirrorOp is an operator request on mirror topics (SPEC §6.5).
type MirrorOp uint8

// Mirror operations.
const (
	MirrorStart MirrorOp = iota + 1
	MirrorStop
	MirrorPause
	MirrorResume
)

const (
	mirrorMirroring = twinlogv1.MirrorState_MIRROR_STATE_MIRRORING
	mirrorPaused    = twinlogv1.MirrorState_MIRROR_STATE_PAUSED
	mirrorStopped   = twinlogv1.MirrorState_MIRROR_STATE_STOPPED
)

// SourceTopic is what the shell learned about one topic from the mirror
// source's Metadata (SPEC §6.1): the mirror topic takes the source's name,
// topic id and partition count. It is a pure input: metastate never talks to
// the source.
type SourceTopic struct {
	Name    string
	TopicID string
	// Partitions is the source's partition count (> 0).
	Partitions int32
	// ReplicationFactor for a topic created locally; 0 means
	// min(3, acceptable brokers).
	ReplicationFactor int32
	// Configs are the source topic's own settings (its topic-level
	// overrides); only metadata.MirroredTopicConfigs keys with valid values are
	// copied to a topic created here, the rest are dropped.
	Configs map[string]string
	// ConfigsErr, if set, says the source's configs could not be read (the
	// source's DescribeConfigs failed): a topic that would be created from
	// this description is refused with BROKER_NOT_AVAILABLE rather than
	// created without them; an existing topic is unaffected. Retrying
	// StartMirrorTopics reads them again.
	ConfigsErr string
	// Missing says the source answered and has no such topic (its Metadata
	// said UNKNOWN_TOPIC_OR_PARTITION): the topic is refused with that code.
	// Only Name is set then.
	Missing bool
}

// SourceCluster is what the shell learned of a mirror's source cluster from
// its brokers' Metadata. It is a pure input: metastate never talks to the
// source.
type SourceCluster struct {
	// ID is the source's cluster id, "" if no address answered.
	ID string
	// ProducerIDSpace is the source's producer id space
	// (MetadataResponse.producer_id_space, metadata.ProducerIDSpace there);
	// 0 if the source did not report one (a broker older than the field).
	ProducerIDSpace int32
}

// ProducerIDSpaceRefusal is the rule for a mirror source's producer id
// space as src reports it: a source must allocate idempotent producer ids
// in another space than this cluster's (metadata.KeyProducerIDSpace), or a
// mirror topic would hold batches of two producers with one id, and the
// destination's own producers' ids could meet the source's after a
// failover. It returns INVALID_CONFIG for a source in this cluster's space,
// INVALID_REQUEST for one that does not report its space (0: a broker
// older than the field, whose space cannot be checked; upgrading it lets
// the request through), else ecNone.
func (s *State) ProducerIDSpaceRefusal(src SourceCluster) (twinlogv1.ErrorCode, string) {
	own := s.ProducerIDSpace()
	switch src.ProducerIDSpace {
	case 0:
		return ecInvalid, fmt.Sprintf("source cluster %s does not report its producer id space (%s; a broker older than this controller?): "+
			"cannot check that its idempotent producer ids differ from this cluster's (space %d); upgrade the source's brokers and retry",
			src.ID, metadata.KeyProducerIDSpace, own)
	case own:
		return twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG, fmt.Sprintf("source cluster %s allocates producer ids in space %d, this cluster's own (%s): "+
			"the two clusters' idempotent producer ids would collide in mirrored topics; mirror between clusters whose %s differ "+
			"(it is fixed at a cluster's first start, derived from cluster.id when unset)",
			src.ID, own, metadata.KeyProducerIDSpace, metadata.KeyProducerIDSpace)
	}
	return ecNone, ""
}

// CreateMirror defines a mirror (SPEC §6.1) with the source cluster id the
// shell resolved (required: BROKER_NOT_AVAILABLE without it), refuses a
// source in this cluster's producer id space or that does not report its
// space (ProducerIDSpaceRefusal), creates the
// __mirror_state topic at the first mirror (SPEC §6.4) and starts the listed
// topics. sources describes the listed topics as the source has them (from
// its Metadata, keyed by name); see StartMirrorTopics for what a description
// does and for why a topic without one is refused.
//
// It is all or nothing: if any listed topic is refused, the response's error
// is the first refused topic's (each topic's result says why) and nothing is
// written — no mirror, no topic, no __mirror_state — so a mistyped topic or
// source leaves nothing half-created behind (issue 13).
func (s *State) CreateMirror(req *twinlogv1.CreateMirrorRequest, src SourceCluster, sources map[string]SourceTopic) (*twinlogv1.MetadataDelta, *twinlogv1.CreateMirrorResponse) {
	sourceClusterID := src.ID
	resp := &twinlogv1.CreateMirrorResponse{}
	t := s.view()
	switch {
	case ValidateTopicName(req.GetName()) != nil:
		resp.Error, resp.ErrorMessage = ecInvalid, fmt.Sprintf("invalid mirror name: %v", ValidateTopicName(req.GetName()))
		return nil, resp
	case t.mirror(req.GetName()) != nil:
		resp.Error, resp.ErrorMessage = twinlogv1.ErrorCode_ERROR_CODE_MIRROR_ALREADY_EXISTS, "mirror exists"
		return nil, resp
	case len(req.GetSourceBootstrap()) == 0:
		resp.Error, resp.ErrorMessage = ecInvalid, "no source bootstrap addresses"
		return nil, resp
	case sourceClusterID == "":
		// Every LMLE record names the cluster it mirrored from and the
		// other cluster's LMLE query must match it (SPEC §6.4); a mirror
		// whose brokers had not yet heard from the source would record an
		// LMLE nobody may read, and the next failback would truncate
		// everything (found by make chaos). Learn the id now or refuse.
		resp.Error = twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE
		resp.ErrorMessage = fmt.Sprintf("source cluster unreachable at %v: its cluster id is needed to create the mirror; retry when it answers",
			req.GetSourceBootstrap())
		return nil, resp
	}
	if ec, msg := s.ProducerIDSpaceRefusal(src); ec != ecNone {
		resp.Error, resp.ErrorMessage = ec, fmt.Sprintf("mirror %q not created: %s", req.GetName(), msg)
		return nil, resp
	}
	if err := t.ensureMirrorStateTopic(); err != nil {
		resp.Error, resp.ErrorMessage = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, err.Error()
		return nil, resp
	}
	t.putMirror(&twinlogv1.MirrorRecord{Name: req.GetName(), SourceBootstrap: slices.Clone(req.GetSourceBootstrap()), SourceClusterId: sourceClusterID})
	resp.Topics = t.mirrorOp(req.GetName(), req.GetTopics(), MirrorStart, nil, sourceClusterID, sources, true)
	for _, r := range resp.Topics {
		if r.GetError() == ecNone {
			continue
		}
		resp.Error = r.GetError()
		resp.ErrorMessage = fmt.Sprintf("mirror %q not created: topic %q: %s", req.GetName(), r.GetTopic(), r.GetErrorMessage())
		for _, ok := range resp.Topics {
			if ok.GetError() == ecNone {
				ok.ErrorMessage = "not started: the mirror was not created (another topic was refused)"
			}
		}
		return nil, resp
	}
	return t.delta(), resp
}

// ensureMirrorStateTopic creates __mirror_state if it does not exist (SPEC
// §6.4): internal, RF min(mirror.state.topic.replication.factor, acceptable
// brokers), min ISR min(2, RF), unclean.recovery.strategy=none,
// mirror.state.topic.num.partitions partitions.
func (t *txn) ensureMirrorStateTopic() error {
	if t.topic(mirrorStateTopic) != nil {
		return nil
	}
	rf := min(int(metadata.ConfigInt(t.clusterConfigValue(metadata.KeyMirrorStateReplication), defaultMirrorTopicReplication)), t.acceptableCount())
	n := int(metadata.ConfigInt(t.clusterConfigValue(metadata.KeyMirrorStateNumPartitions), 1))
	assign, err := t.placement(n, rf)
	if err != nil {
		return fmt.Errorf("cannot place %s: %v", mirrorStateTopic, err)
	}
	t.createTopic(mirrorStateTopic, t.newTopicID(), assign, map[string]string{
		metadata.KeyMinInsyncReplicas:       fmt.Sprint(min(2, rf)),
		metadata.KeyUncleanRecoveryStrategy: metadata.StrategyNone,
	}, true)
	return nil
}

func (t *txn) acceptableCount() int {
	n := 0
	for _, id := range t.brokerIDs() {
		if t.acceptable(id) {
			n++
		}
	}
	return n
}

// DeleteMirror removes a mirror whose topics are all STOPPED (SPEC §6.5);
// its topics keep once_mirrored.
func (s *State) DeleteMirror(req *twinlogv1.DeleteMirrorRequest) (*twinlogv1.MetadataDelta, *twinlogv1.DeleteMirrorResponse) {
	t := s.view()
	m := t.mirror(req.GetName())
	if m == nil {
		return nil, &twinlogv1.DeleteMirrorResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR, ErrorMessage: "unknown mirror"}
	}
	for _, mt := range m.GetTopics() {
		if mt.GetDesiredState() != mirrorStopped {
			return nil, &twinlogv1.DeleteMirrorResponse{Error: ecInvalid, ErrorMessage: fmt.Sprintf("topic %q is not STOPPED", mt.GetTopic())}
		}
		if tr := t.topic(mt.GetTopic()); tr != nil && tr.GetMirrorName() == m.GetName() {
			n := cloneT(tr)
			n.MirrorName = ""
			t.putTopic(n)
		}
	}
	t.removeMirror(m.GetName())
	return t.delta(), &twinlogv1.DeleteMirrorResponse{}
}

// SetMirrorTopicsDesiredState applies Start/Stop/Pause/Resume to topics of a
// mirror (SPEC §6.5): Start from new, STOPPED or a (retried) MIRRORING
// desired state, generation + 1; Pause only from MIRRORING; Resume only from
// PAUSED; Stop from anything but STOPPED; any other transition is
// INVALID_REQUEST (SPEC §6.5). Start here has no source description, so it
// only restarts topics that are already members of the mirror; a topic joins
// a mirror through CreateMirror or StartMirrorTopics, which check it against
// the source. It cannot re-point the mirror: that needs the new addresses'
// cluster id (StartMirrorTopics), so a non-empty sourceBootstrap is
// INVALID_REQUEST for every topic.
//
// Stop is only the desired-state change. waitForCatchUp (SPEC §6.7 step 1)
// has no field in the MirrorTopicRecord: the controller shell waits for the
// lag that destination leaders report in heartbeats to reach 0 before it
// calls this (REQUEST_TIMED_OUT with nothing written otherwise).
func (s *State) SetMirrorTopicsDesiredState(mirror string, topics []string, op MirrorOp, sourceBootstrap []string) (*twinlogv1.MetadataDelta, []*twinlogv1.MirrorTopicResult) {
	if len(sourceBootstrap) > 0 {
		return nil, refuseAll(topics, ecInvalid, "re-pointing a mirror needs the new addresses' cluster id: use StartMirrorTopics")
	}
	return s.mirrorTopicsOp(mirror, topics, op, nil, SourceCluster{}, nil, false)
}

// StartMirrorTopics is Start with the source's description of the topics
// (SPEC §6.1, §6.3): a topic that does not exist locally is created with the
// source's name, topic id, partition count, replication factor and
// mirrored configs (metadata.MirroredTopicConfigs; read-only: it belongs to the
// mirror, once_mirrored set); an existing topic with another topic id gets
// INCONSISTENT_TOPIC_ID (a local topic of its own, or one mirrored from a
// source topic since re-created: mirroring over it would erase it); partitions
// the source added are added. A topic the source does not have (Missing) is
// UNKNOWN_TOPIC_OR_PARTITION. A topic missing from sources (the source could
// not be asked) is BROKER_NOT_AVAILABLE, retriable: starting it blind would
// mirror over whatever the local topic holds. Refused topics change nothing;
// the others start.
//
// sourceClusterID is the cluster id the shell resolved from the addresses it
// described the topics through (the new sourceBootstrap if any, else the
// mirror's; "" if none answered). A mirror's source cluster never changes:
// its LMLE records, and the other cluster's LMLE answers, name that cluster
// (SPEC §6.4), so a mirror silently pointed at another cluster would mirror
// it under the old one's name. New addresses are taken only if they answer
// the mirror's source cluster (RepointRefusal) and it reports a producer id
// space other than this cluster's (ProducerIDSpaceRefusal, as CreateMirror);
// otherwise every topic is refused and nothing changes. The space is not
// checked without new addresses: the mirror's source was checked when the
// mirror was created (or re-pointed).
func (s *State) StartMirrorTopics(mirror string, topics []string, sourceBootstrap []string, src SourceCluster, sources map[string]SourceTopic) (*twinlogv1.MetadataDelta, []*twinlogv1.MirrorTopicResult) {
	return s.mirrorTopicsOp(mirror, topics, MirrorStart, sourceBootstrap, src, sources, true)
}

// RepointRefusal is the rule for the source of mirror m as a Start finds
// it: bootstrap (new addresses, or none) answered sourceClusterID ("" none
// answered). It returns an error code and message, or ecNone:
// INVALID_REQUEST when the addresses answer another cluster than the
// mirror's source, BROKER_NOT_AVAILABLE when new addresses did not answer
// (their cluster cannot be checked). A mirror recorded without a cluster id
// takes the new addresses' (mirrorOp).
func RepointRefusal(m *twinlogv1.MirrorRecord, bootstrap []string, sourceClusterID string) (twinlogv1.ErrorCode, string) {
	repoint := len(bootstrap) > 0 && !slices.Equal(bootstrap, m.GetSourceBootstrap())
	switch {
	case sourceClusterID != "" && m.GetSourceClusterId() != "" && sourceClusterID != m.GetSourceClusterId():
		if repoint {
			return ecInvalid, fmt.Sprintf("the mirror's source is cluster %s; the new addresses %v answer cluster %s: create a new mirror",
				m.GetSourceClusterId(), bootstrap, sourceClusterID)
		}
		return ecInvalid, fmt.Sprintf("the mirror's source is cluster %s; its addresses %v now answer cluster %s: re-point it at cluster %s's addresses, or create a new mirror",
			m.GetSourceClusterId(), m.GetSourceBootstrap(), sourceClusterID, m.GetSourceClusterId())
	case repoint && sourceClusterID == "":
		return twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE,
			fmt.Sprintf("the new source addresses %v did not answer: cannot check that they are the mirror's source cluster %s; nothing changed, retry when they answer",
				bootstrap, m.GetSourceClusterId())
	}
	return ecNone, ""
}

func refuseAll(topics []string, ec twinlogv1.ErrorCode, msg string) []*twinlogv1.MirrorTopicResult {
	var out []*twinlogv1.MirrorTopicResult
	for _, n := range topics {
		out = append(out, &twinlogv1.MirrorTopicResult{Topic: n, Error: ec, ErrorMessage: msg})
	}
	if len(out) == 0 {
		// No topic to carry the refusal (a request that only re-points):
		// one result for the mirror itself, so it is not taken for success.
		out = append(out, &twinlogv1.MirrorTopicResult{Error: ec, ErrorMessage: msg})
	}
	return out
}

func (s *State) mirrorTopicsOp(mirror string, topics []string, op MirrorOp, sourceBootstrap []string, src SourceCluster, sources map[string]SourceTopic, described bool) (*twinlogv1.MetadataDelta, []*twinlogv1.MirrorTopicResult) {
	t := s.view()
	m := t.mirror(mirror)
	if m == nil {
		var out []*twinlogv1.MirrorTopicResult
		for _, n := range topics {
			out = append(out, &twinlogv1.MirrorTopicResult{Topic: n, Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR})
		}
		return nil, out
	}
	if op == MirrorStart && described {
		if ec, msg := RepointRefusal(m, sourceBootstrap, src.ID); ec != ecNone {
			return nil, refuseAll(topics, ec, msg)
		}
		if repoint := len(sourceBootstrap) > 0 && !slices.Equal(sourceBootstrap, m.GetSourceBootstrap()); repoint {
			if ec, msg := s.ProducerIDSpaceRefusal(src); ec != ecNone {
				return nil, refuseAll(topics, ec, "the new source addresses are refused: "+msg)
			}
		}
	}
	out := t.mirrorOp(mirror, topics, op, sourceBootstrap, src.ID, sources, described)
	if len(out) > 0 && !slices.ContainsFunc(out, func(r *twinlogv1.MirrorTopicResult) bool { return r.GetError() == ecNone }) {
		// Every topic refused: not even a re-pointed source bootstrap is
		// written.
		return nil, out
	}
	return t.delta(), out
}

// mirrorTopicFromSource creates the local topic from the source or checks
// and extends an existing one. It returns an error code and message, or
// ecNone.
func (t *txn) mirrorTopicFromSource(mirror string, st SourceTopic) (twinlogv1.ErrorCode, string) {
	name := st.Name
	tr := t.topic(name)
	if st.TopicID == "" || st.Partitions < 1 {
		return ecInvalid, "source description lacks a topic id or partitions"
	}
	if tr == nil {
		if err := ValidateTopicName(name); err != nil {
			return twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC, err.Error()
		}
		if c := t.collides(name); c != "" {
			return twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC, fmt.Sprintf("topic %q collides with %q", name, c)
		}
		for _, n := range t.topicNames() {
			if t.topic(n).GetTopicId() == st.TopicID {
				return twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID, fmt.Sprintf("topic id %s is used by local topic %q", st.TopicID, n)
			}
		}
		if st.ConfigsErr != "" {
			return twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE,
				fmt.Sprintf("cannot read the source topic's configs (%s); retry when the source's controller answers", st.ConfigsErr)
		}
		rf := int(st.ReplicationFactor)
		if rf <= 0 {
			rf = min(defaultMirrorTopicReplication, t.acceptableCount())
		}
		assign, err := t.placement(int(st.Partitions), rf)
		if err != nil {
			return twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, err.Error()
		}
		cfg := map[string]string{}
		for k, v := range st.Configs {
			if metadata.ValidateConfig(metadata.ScopeTopic, k, v) == nil && configDef(k).Mirrored {
				cfg[k] = v
			}
		}
		if len(cfg) == 0 {
			cfg = nil
		}
		t.createTopic(name, st.TopicID, assign, cfg, false)
		n := cloneT(t.topic(name))
		n.MirrorName, n.OnceMirrored = mirror, true
		t.putTopic(n)
		return ecNone, ""
	}
	if tr.GetTopicId() != st.TopicID {
		// A never-mirrored local topic is a different topic; a once-mirrored
		// one with another id was mirrored from a topic since re-created.
		// Mirroring over either would truncate it to the source's log.
		what := "a local topic, not a copy of the source's"
		if tr.GetOnceMirrored() {
			what = "mirrored from an earlier topic of that name (re-created on the source since)"
		}
		return twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID,
			fmt.Sprintf("topic %q exists here with topic id %s, the source's has %s: it is %s; refusing to mirror over it",
				name, tr.GetTopicId(), st.TopicID, what)
	}
	if cur := tr.GetPartitionCount(); st.Partitions > cur {
		// New source partitions are added (SPEC §6.1), placed like the
		// existing ones' replication factor.
		rf := len(t.partition(name, 0).GetReplicas())
		assign, err := t.placement(int(st.Partitions-cur), max(rf, 1))
		if err != nil {
			return twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, err.Error()
		}
		n := cloneT(tr)
		n.PartitionCount = st.Partitions
		t.putTopic(n)
		for i, r := range assign {
			t.addPartition(name, tr.GetTopicId(), cur+int32(i), r)
		}
	}
	return ecNone, ""
}

// mirrorOp applies op to topics of mirror in t. described: a Start must
// have the source's description of each topic (sources) and checks the topic
// against it; otherwise a Start restarts members of the mirror only.
func (t *txn) mirrorOp(mirror string, topics []string, op MirrorOp, bootstrap []string, sourceClusterID string, sources map[string]SourceTopic, described bool) []*twinlogv1.MirrorTopicResult {
	m := proto.Clone(t.mirror(mirror)).(*twinlogv1.MirrorRecord)
	if len(bootstrap) > 0 {
		// Checked by RepointRefusal: the same source cluster.
		m.SourceBootstrap = slices.Clone(bootstrap)
		if m.GetSourceClusterId() == "" {
			m.SourceClusterId = sourceClusterID
		}
	}
	byName := map[string]*twinlogv1.MirrorTopicRecord{}
	for _, mt := range m.GetTopics() {
		byName[mt.GetTopic()] = mt
	}
	var out []*twinlogv1.MirrorTopicResult
	for _, name := range topics {
		res := &twinlogv1.MirrorTopicResult{Topic: name}
		out = append(out, res)
		fail := func(ec twinlogv1.ErrorCode, msg string) { res.Error, res.ErrorMessage = ec, msg }
		if cur := t.topic(name); op != MirrorStart || byName[name].GetDesiredState() == mirrorPaused ||
			(cur != nil && (cur.GetInternal() || (cur.GetMirrorName() != "" && cur.GetMirrorName() != mirror))) {
			// Not a start, or refused below before anything is created or
			// extended.
		} else if described {
			st, ok := sources[name]
			switch {
			case !ok:
				fail(twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE,
					fmt.Sprintf("the source did not describe topic %q (unreachable?): it is not started unchecked; retry when the source answers", name))
				continue
			case st.Missing:
				fail(ecUnknown, fmt.Sprintf("the source has no topic %q", name))
				continue
			}
			st.Name = name
			if ec, msg := t.mirrorTopicFromSource(mirror, st); ec != ecNone {
				fail(ec, msg)
				continue
			}
		} else if byName[name] == nil {
			fail(ecInvalid, fmt.Sprintf("topic %q is not a topic of mirror %q: StartMirrorTopics adds it after checking it against the source", name, mirror))
			continue
		}
		tr := t.topic(name)
		if tr == nil {
			fail(ecUnknown, "unknown topic")
			continue
		}
		if tr.GetInternal() {
			fail(ecInvalid, "internal topics cannot be mirrored")
			continue
		}
		if tr.GetMirrorName() != "" && tr.GetMirrorName() != mirror {
			fail(ecInvalid, "topic belongs to mirror "+tr.GetMirrorName())
			continue
		}
		mt := byName[name]
		cur := twinlogv1.MirrorState_MIRROR_STATE_UNSPECIFIED
		if mt != nil {
			cur = mt.GetDesiredState()
		}
		next := cur
		switch op {
		case MirrorStart:
			if cur == mirrorPaused {
				fail(ecInvalid, "start from PAUSED: resume instead")
				continue
			}
			next = mirrorMirroring
		case MirrorStop:
			if mt == nil || cur == mirrorStopped {
				fail(ecInvalid, "stop from STOPPED")
				continue
			}
			next = mirrorStopped
		case MirrorPause:
			if cur != mirrorMirroring {
				fail(ecInvalid, "pause only from MIRRORING")
				continue
			}
			next = mirrorPaused
		case MirrorResume:
			if cur != mirrorPaused {
				fail(ecInvalid, "resume only from PAUSED")
				continue
			}
			next = mirrorMirroring
		default:
			fail(ecInvalid, "unknown mirror operation")
			continue
		}
		if mt == nil {
			mt = &twinlogv1.MirrorTopicRecord{Topic: name}
			byName[name] = mt
		}
		mt.DesiredState = next
		if op == MirrorStart {
			mt.Generation++
		}
		n := cloneT(tr)
		n.MirrorName = mirror
		n.OnceMirrored = true
		t.putTopic(n)
	}
	m.Topics = nil
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		m.Topics = append(m.Topics, byName[n])
	}
	t.putMirror(m)
	return out
}
