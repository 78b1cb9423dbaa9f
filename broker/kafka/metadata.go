package kafka

import (
	"context"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// authorizedOperationsOmitted is Kafka's "not requested" value of
// AuthorizedOperations (INT32_MIN).
const authorizedOperationsOmitted = math.MinInt32

// metadata answers Metadata (key 3) from the broker's metadata (SPEC
// §4.6): the brokers that have a Kafka listener, this broker as the
// controller (it forwards admin requests), and the topics asked for, by
// name or by id (all when the list is null). Topics are never created on
// the fly (auto.create.topics.enable is false in twinlog): an unknown one
// is UNKNOWN_TOPIC_OR_PARTITION.
//
// A topic the principal may not Describe is left out of "all topics";
// named, it is TOPIC_AUTHORIZATION_FAILED without partitions or id (and
// is not asked of the broker), listed after the others as Kafka lists it;
// by id, the same without its name (the id is not secret, the name is).
func (s *Server) metadata(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.SetVersion(req.GetVersion())
	resp.AuthorizedOperations = authorizedOperationsOmitted
	acc := s.access(ctx)

	// A null list asks for every topic, an empty one for none; topics
	// named by id only are found in the whole list.
	all := req.Topics == nil || (req.GetVersion() == 0 && len(req.Topics) == 0) // v0: empty means all
	byID := false
	var names, denied []string
	for _, t := range req.Topics {
		switch {
		case t.Topic == nil:
			byID = true
		case !acc.describeTopic(*t.Topic):
			if !slices.Contains(denied, *t.Topic) {
				denied = append(denied, *t.Topic)
			}
		default:
			names = append(names, *t.Topic)
		}
	}
	if byID {
		names = nil
	}
	noTopics := !all && (len(req.Topics) == 0 || (!byID && len(names) == 0))
	presp, err := s.backend.Metadata(ctx, &pb.MetadataRequest{Topics: names, NoTopics: noTopics})
	if err != nil {
		return nil, err // not loaded yet (metadata.ErrNotLoaded): close; the client asks another broker
	}
	cluster := presp.GetClusterId()
	resp.ClusterID = &cluster
	resp.ControllerID = s.cfg.BrokerID
	for _, b := range presp.GetBrokers() {
		if b.GetKafkaPort() == 0 {
			continue
		}
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.GetId(), b.GetKafkaHost(), b.GetKafkaPort()
		resp.Brokers = append(resp.Brokers, rb)
	}
	if !all && len(req.Topics) == 0 {
		return resp, nil
	}
	if !byID {
		for _, t := range presp.GetTopics() {
			if all && !acc.describeTopic(t.GetName()) {
				continue
			}
			resp.Topics = append(resp.Topics, metadataTopic(t))
		}
		for _, name := range denied {
			resp.Topics = append(resp.Topics, deniedMetadataTopic(&name, [16]byte{}))
		}
		return resp, nil
	}
	for i, t := range selectTopics(req.Topics, presp.GetTopics()) {
		w := req.Topics[i]
		switch {
		case w.Topic != nil && !acc.describeTopic(*w.Topic):
			resp.Topics = append(resp.Topics, deniedMetadataTopic(w.Topic, [16]byte{}))
		case t == nil: // an id no topic has
			rt := kmsg.NewMetadataResponseTopic()
			rt.TopicID, rt.ErrorCode, rt.AuthorizedOperations = w.TopicID, unknownTopicID, authorizedOperationsOmitted
			resp.Topics = append(resp.Topics, rt)
		case !acc.describeTopic(t.GetName()):
			resp.Topics = append(resp.Topics, deniedMetadataTopic(nil, w.TopicID))
		default:
			resp.Topics = append(resp.Topics, metadataTopic(t))
		}
	}
	return resp, nil
}

// deniedMetadataTopic is the entry of a topic the principal may not
// Describe: named as it was asked, by name (with no id) or by id (with no
// name).
func deniedMetadataTopic(name *string, id [16]byte) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic, rt.TopicID, rt.ErrorCode, rt.AuthorizedOperations = name, id, topicAuthorizationFailed, authorizedOperationsOmitted
	return rt
}

// selectTopics returns, in request order, the topics asked for by name or
// id among all: an unknown name gets an UNKNOWN_TOPIC_OR_PARTITION entry,
// an id no topic has nil (answered UNKNOWN_TOPIC_ID, as Kafka does).
func selectTopics(want []kmsg.MetadataRequestTopic, all []*pb.MetadataTopic) []*pb.MetadataTopic {
	var out []*pb.MetadataTopic
	for _, w := range want {
		var found *pb.MetadataTopic
		for _, t := range all {
			if (w.Topic != nil && t.GetName() == *w.Topic) || (w.Topic == nil && topicID(t.GetTopicId()) == w.TopicID) {
				found = t
				break
			}
		}
		if found == nil && w.Topic != nil {
			found = &pb.MetadataTopic{Name: *w.Topic, Error: pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}
		}
		out = append(out, found)
	}
	return out
}

// metadataTopic is one topic's Kafka metadata.
func metadataTopic(t *pb.MetadataTopic) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	name := t.GetName()
	rt.Topic = &name
	rt.ErrorCode = kafkaCode(t.GetError())
	rt.TopicID = topicID(t.GetTopicId())
	rt.IsInternal = t.GetIsInternal()
	rt.AuthorizedOperations = authorizedOperationsOmitted
	for _, p := range t.GetPartitions() {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.ErrorCode = kafkaCode(p.GetError())
		rp.Partition = p.GetIndex()
		rp.Leader = p.GetLeaderId()
		rp.LeaderEpoch = p.GetLeaderEpoch()
		rp.Replicas = p.GetReplicas()
		rp.ISR = p.GetIsr()
		if rp.Replicas == nil {
			rp.Replicas = []int32{}
		}
		if rp.ISR == nil {
			rp.ISR = []int32{}
		}
		rp.OfflineReplicas = []int32{}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func failMetadata(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
