package metastate

import (
	"fmt"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// defaultOffsetsTopicReplication and defaultOffsetsTopicPartitions are
// Kafka's offsets.topic.replication.factor and offsets.topic.num.partitions.
const (
	defaultOffsetsTopicReplication = 3
	defaultOffsetsTopicPartitions  = 50
)

// EnsureInternalTopic creates __consumer_offsets for a live broker's
// first FindCoordinator, as Kafka does: offsets.topic.num.partitions
// partitions of offsets.topic.replication.factor replicas (both read now,
// static), compacted, min ISR min(2, RF), no unclean recovery (a group's
// committed offsets are worth an unavailable coordinator). Unlike
// __mirror_state it is never created with fewer replicas than asked: with
// fewer acceptable brokers it is refused (INVALID_REPLICATION_FACTOR, which
// the broker answers COORDINATOR_NOT_AVAILABLE, Kafka's answer) until
// enough have registered. An existing topic is left as it is. The
// requester is checked as AllocateProducerIds checks it.
func (s *State) EnsureInternalTopic(req *twinlogv1.EnsureInternalTopicRequest) (*twinlogv1.MetadataDelta, *twinlogv1.EnsureInternalTopicResponse) {
	fail := func(ec twinlogv1.ErrorCode, format string, args ...any) (*twinlogv1.MetadataDelta, *twinlogv1.EnsureInternalTopicResponse) {
		return nil, &twinlogv1.EnsureInternalTopicResponse{Error: ec, ErrorMessage: fmt.Sprintf(format, args...)}
	}
	if ec, msg := s.liveRequester(req.GetBrokerId(), req.GetBrokerEpoch()); ec != ecNone {
		return fail(ec, "%s", msg)
	}
	if req.GetTopic() != metadata.ConsumerOffsetsTopic {
		return fail(ecInvalid, "%q is not a topic brokers create on first use (only %s)", req.GetTopic(), metadata.ConsumerOffsetsTopic)
	}
	t := s.view()
	if t.topic(metadata.ConsumerOffsetsTopic) != nil {
		return nil, &twinlogv1.EnsureInternalTopicResponse{}
	}
	rf := int(metadata.ConfigInt(t.clusterConfigValue(metadata.KeyOffsetsTopicReplication), defaultOffsetsTopicReplication))
	n := int(metadata.ConfigInt(t.clusterConfigValue(metadata.KeyOffsetsTopicNumPartitions), defaultOffsetsTopicPartitions))
	if avail := t.acceptableCount(); avail < rf {
		return fail(twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR,
			"%s needs %s=%d brokers, %d are available", metadata.ConsumerOffsetsTopic, metadata.KeyOffsetsTopicReplication, rf, avail)
	}
	assign, err := t.placement(n, rf)
	if err != nil {
		return fail(twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, "cannot place %s: %v", metadata.ConsumerOffsetsTopic, err)
	}
	t.createTopic(metadata.ConsumerOffsetsTopic, t.newTopicID(), assign, map[string]string{
		metadata.KeyCleanupPolicy:           metadata.CleanupPolicyCompact,
		metadata.KeyMinInsyncReplicas:       fmt.Sprint(min(2, rf)),
		metadata.KeyUncleanRecoveryStrategy: metadata.StrategyNone,
	}, true)
	return t.delta(), &twinlogv1.EnsureInternalTopicResponse{}
}

// liveRequester checks a broker RPC's sender: registered with that broker
// epoch, and not fenced (STALE_BROKER_EPOCH otherwise, as Heartbeat and
// AlterPartition answer; the requester retries once registered and
// unfenced).
func (s *State) liveRequester(id int32, epoch int64) (twinlogv1.ErrorCode, string) {
	br := s.Broker(id)
	switch {
	case br == nil:
		return ecStale, fmt.Sprintf("broker %d is not registered", id)
	case br.GetBrokerEpoch() != epoch:
		return ecStale, fmt.Sprintf("broker %d: stale broker epoch %d (registered %d)", id, epoch, br.GetBrokerEpoch())
	case br.GetFenced():
		return ecStale, fmt.Sprintf("broker %d is fenced: it may ask once it has caught up and is unfenced", id)
	}
	return ecNone, ""
}
