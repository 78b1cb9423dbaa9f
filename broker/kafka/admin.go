package kafka

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Admin is the cluster's admin API as the broker serves it: the topic and
// config operations forwarded to the controller, DescribeTopicPartitions
// from the broker's metadata (the methods the gRPC admin service calls).
type Admin interface {
	CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error)
	DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error)
	DescribeConfigs(ctx context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error)
	AlterConfigs(ctx context.Context, req *pb.AlterConfigsRequest) (*pb.AlterConfigsResponse, error)
	DescribeTopicPartitions(ctx context.Context, req *pb.DescribeTopicPartitionsRequest) (*pb.DescribeTopicPartitionsResponse, error)
}

// Kafka's config resource types and sources (DescribeConfigs,
// IncrementalAlterConfigs).
const (
	kafkaResourceTopic  = 2
	kafkaResourceBroker = 4

	kafkaSourceTopic          = 1 // DYNAMIC_TOPIC_CONFIG
	kafkaSourceBroker         = 2 // DYNAMIC_BROKER_CONFIG
	kafkaSourceClusterDefault = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	kafkaSourceDefault        = 5 // DEFAULT_CONFIG

	opSet    = 0
	opDelete = 1

	topicAlreadyExists = 36
	invalidConfig      = 40
)

// defaultReplicationFactor is what a CreateTopics asking for the broker
// default (-1) gets: three replicas, or every broker of a smaller cluster.
// Kafka's default.replication.factor is 1; a twinlog topic exists to
// survive a broker loss, so the default is the one Confluent and Redpanda
// ship. num.partitions stays Kafka's 1.
func defaultReplicationFactor(brokers int) int32 { return int32(min(3, max(brokers, 1))) }

// createTopics answers CreateTopics (key 19) through the controller. -1
// partitions is 1, -1 replicas is defaultReplicationFactor.
func (s *Server) createTopics(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	preq := &pb.CreateTopicsRequest{ValidateOnly: req.ValidateOnly}
	brokers := 0
	if md, err := s.backend.Metadata(ctx, &pb.MetadataRequest{NoTopics: true}); err == nil {
		brokers = len(md.GetBrokers())
	}
	for _, t := range req.Topics {
		ct := &pb.CreatableTopic{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: int32(t.ReplicationFactor), Configs: map[string]string{}}
		if len(t.ReplicaAssignment) == 0 {
			if ct.NumPartitions == -1 {
				ct.NumPartitions = 1
			}
			if ct.ReplicationFactor == -1 {
				ct.ReplicationFactor = defaultReplicationFactor(brokers)
			}
		}
		for _, a := range t.ReplicaAssignment {
			ct.Assignments = append(ct.Assignments, &pb.ReplicaAssignment{Replicas: a.Replicas})
		}
		for _, c := range t.Configs {
			if c.Value != nil {
				ct.Configs[c.Name] = *c.Value
			}
		}
		preq.Topics = append(preq.Topics, ct)
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(req.GetVersion())
	presp, err := s.admin.CreateTopics(ctx, preq)
	results := map[string]*pb.TopicResult{}
	for _, r := range presp.GetTopics() {
		results[r.GetName()] = r
	}
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = preq.Topics[i].NumPartitions, int16(preq.Topics[i].ReplicationFactor)
		if n := len(t.ReplicaAssignment); n > 0 {
			rt.NumPartitions, rt.ReplicationFactor = int32(n), int16(len(t.ReplicaAssignment[0].Replicas))
		}
		r := results[t.Topic]
		switch {
		case err != nil:
			rt.ErrorCode = s.errorCode(err)
			msg := err.Error()
			rt.ErrorMessage = &msg
		case r == nil:
			rt.ErrorCode = unknownServerError
		default:
			rt.ErrorCode = kafkaCode(r.GetError())
			if m := r.GetErrorMessage(); m != "" {
				rt.ErrorMessage = &m
			}
			rt.TopicID = topicID(r.GetTopicId())
		}
		if rt.ErrorCode != 0 {
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func failCreateTopics(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(req.GetVersion())
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, code, -1, -1
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// deleteTopics answers DeleteTopics (key 20) through the controller;
// topics named by id (v6+) are found in the metadata.
func (s *Server) deleteTopics(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	type want struct {
		name string
		id   [16]byte
	}
	var wants []want
	for _, n := range req.TopicNames {
		wants = append(wants, want{name: n})
	}
	byID := false
	for _, t := range req.Topics {
		w := want{id: t.TopicID}
		if t.Topic != nil {
			w.name = *t.Topic
		} else {
			byID = true
		}
		wants = append(wants, w)
	}
	if byID {
		md, err := s.backend.Metadata(ctx, &pb.MetadataRequest{})
		if err != nil {
			return nil, err
		}
		for i, w := range wants {
			if w.name != "" {
				continue
			}
			for _, t := range md.GetTopics() {
				if topicID(t.GetTopicId()) == w.id {
					wants[i].name = t.GetName()
				}
			}
		}
	}
	preq := &pb.DeleteTopicsRequest{}
	for _, w := range wants {
		if w.name != "" {
			preq.Names = append(preq.Names, w.name)
		}
	}
	var presp *pb.DeleteTopicsResponse
	var err error
	if len(preq.Names) > 0 {
		presp, err = s.admin.DeleteTopics(ctx, preq)
	}
	results := map[string]*pb.TopicResult{}
	for _, r := range presp.GetTopics() {
		results[r.GetName()] = r
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	resp.SetVersion(req.GetVersion())
	for _, w := range wants {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.TopicID = w.id
		if w.name != "" {
			name := w.name
			rt.Topic = &name
		}
		r := results[w.name]
		switch {
		case w.name == "":
			rt.ErrorCode = unknownTopicID
		case err != nil:
			rt.ErrorCode = s.errorCode(err)
			msg := err.Error()
			rt.ErrorMessage = &msg
		case r == nil:
			rt.ErrorCode = unknownServerError
		default:
			rt.ErrorCode = kafkaCode(r.GetError())
			if m := r.GetErrorMessage(); m != "" {
				rt.ErrorMessage = &m
			}
			rt.TopicID = topicID(r.GetTopicId())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func failDeleteTopics(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	resp.SetVersion(req.GetVersion())
	for _, n := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(n), code
		resp.Topics = append(resp.Topics, rt)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// configResource is a Kafka config resource as twinlog names it: a topic,
// the cluster-wide defaults (Kafka's broker resource with an empty name),
// or one broker; ok false for a type twinlog has no configs for.
func configResource(t kmsg.ConfigResourceType, name string) (*pb.ConfigResource, bool) {
	switch {
	case t == kafkaResourceTopic:
		return &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: name}, true
	case t == kafkaResourceBroker && name == "":
		return &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER}, true
	case t == kafkaResourceBroker:
		if _, err := strconv.ParseInt(name, 10, 32); err != nil {
			return nil, false
		}
		return &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: name}, true
	}
	return nil, false
}

// kafkaSource is a config entry's source as Kafka names it.
func kafkaSource(s pb.ConfigSource, broker bool) kmsg.ConfigSource {
	switch s {
	case pb.ConfigSource_CONFIG_SOURCE_TOPIC:
		if broker {
			return kafkaSourceBroker
		}
		return kafkaSourceTopic
	case pb.ConfigSource_CONFIG_SOURCE_CLUSTER:
		return kafkaSourceClusterDefault
	case pb.ConfigSource_CONFIG_SOURCE_DEFAULT:
		return kafkaSourceDefault
	}
	return 0
}

// describeConfigs answers DescribeConfigs (key 32) through the controller,
// one resource at a time so that one resource's error is its own.
func (s *Server) describeConfigs(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	resp.SetVersion(req.GetVersion())
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		res, ok := configResource(r.ResourceType, r.ResourceName)
		if !ok {
			rr.ErrorCode = invalidRequest
			msg := "twinlog has configs for topics and brokers only"
			rr.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		presp, err := s.admin.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{res}})
		var result *pb.DescribeConfigsResult
		if err == nil && len(presp.GetResults()) == 1 {
			result = presp.GetResults()[0]
		}
		switch {
		case err != nil:
			rr.ErrorCode = s.errorCode(err)
			msg := err.Error()
			rr.ErrorMessage = &msg
		case result == nil:
			rr.ErrorCode = unknownServerError
		case result.GetError() != pb.ErrorCode_ERROR_CODE_NONE:
			rr.ErrorCode = kafkaCode(result.GetError())
			msg := result.GetErrorMessage()
			rr.ErrorMessage = &msg
		default:
			wanted := map[string]bool{}
			for _, n := range r.ConfigNames {
				wanted[n] = true
			}
			for _, e := range result.GetEntries() {
				if r.ConfigNames != nil && !wanted[e.GetName()] {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				v := e.GetValue()
				c.Name, c.Value = e.GetName(), &v
				c.Source = kafkaSource(e.GetSource(), r.ResourceType == kafkaResourceBroker)
				c.IsDefault = e.GetSource() == pb.ConfigSource_CONFIG_SOURCE_DEFAULT
				rr.Configs = append(rr.Configs, c)
			}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func failDescribeConfigs(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	resp.SetVersion(req.GetVersion())
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// incrementalAlterConfigs answers IncrementalAlterConfigs (key 44)
// through the controller: SET and DELETE; APPEND and SUBTRACT (for list
// configs) are INVALID_REQUEST, since no twinlog config is a list.
func (s *Server) incrementalAlterConfigs(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.SetVersion(req.GetVersion())
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		fail := func(code int16, msg string) {
			rr.ErrorCode, rr.ErrorMessage = code, &msg
			resp.Resources = append(resp.Resources, rr)
		}
		res, ok := configResource(r.ResourceType, r.ResourceName)
		if !ok {
			fail(invalidRequest, "twinlog has configs for topics and brokers only")
			continue
		}
		ar := &pb.AlterConfigsResource{Resource: res, Set: map[string]string{}}
		bad := ""
		for _, c := range r.Configs {
			switch {
			case c.Op == opSet && c.Value != nil:
				ar.Set[c.Name] = *c.Value
			case c.Op == opSet:
				bad = "SET of " + c.Name + " without a value"
			case c.Op == opDelete:
				ar.Delete = append(ar.Delete, c.Name)
			default:
				bad = "operation " + c.Op.String() + " on " + c.Name + ": twinlog has no list configs (SET and DELETE only)"
			}
		}
		if bad != "" {
			fail(invalidConfig, bad)
			continue
		}
		presp, err := s.admin.AlterConfigs(ctx, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{ar}, ValidateOnly: req.ValidateOnly})
		switch {
		case err != nil:
			fail(s.errorCode(err), err.Error())
		case len(presp.GetResults()) != 1:
			fail(unknownServerError, "the controller answered no result")
		case presp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE:
			res := presp.GetResults()[0]
			fail(kafkaCode(res.GetError()), res.GetErrorMessage())
		default:
			resp.Resources = append(resp.Resources, rr)
		}
	}
	return resp, nil
}

func failIncrementalAlterConfigs(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resp.SetVersion(req.GetVersion())
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// describeCluster answers DescribeCluster (key 60) from the metadata, as
// Metadata does: the brokers with a Kafka listener, this broker as the
// controller.
func (s *Server) describeCluster(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.SetVersion(req.GetVersion())
	resp.ClusterAuthorizedOperations = authorizedOperationsOmitted
	if req.EndpointType > 1 {
		// Controllers are not reachable over the Kafka protocol.
		resp.ErrorCode = 114 // MISMATCHED_ENDPOINT_TYPE
		return resp, nil
	}
	md, err := s.backend.Metadata(ctx, &pb.MetadataRequest{NoTopics: true})
	if err != nil {
		return nil, err
	}
	resp.ClusterID, resp.ControllerID = md.GetClusterId(), s.cfg.BrokerID
	for _, b := range md.GetBrokers() {
		if b.GetKafkaPort() == 0 {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.GetId(), b.GetKafkaHost(), b.GetKafkaPort()
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}

func failDescribeCluster(kreq kmsg.Request, code int16) kmsg.Response {
	resp := kreq.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.SetVersion(kreq.GetVersion())
	resp.ErrorCode = code
	return resp
}

// describeTopicPartitions answers DescribeTopicPartitions (key 75, KIP-966)
// with the broker's own (SPEC §5): the same paging, cursor and limits.
func (s *Server) describeTopicPartitions(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	preq := &pb.DescribeTopicPartitionsRequest{ResponsePartitionLimit: req.ResponsePartitionLimit}
	for _, t := range req.Topics {
		preq.Topics = append(preq.Topics, &pb.DescribeTopicPartitionsTopic{Name: t.Topic})
	}
	if c := req.Cursor; c != nil {
		preq.Cursor = &pb.Cursor{TopicName: c.Topic, PartitionIndex: c.Partition}
	}
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	resp.SetVersion(req.GetVersion())
	presp, err := s.admin.DescribeTopicPartitions(ctx, preq)
	if err != nil {
		return failDescribeTopicPartitions(req, s.errorCode(err)), nil
	}
	switch presp.GetError() {
	case pb.ErrorCode_ERROR_CODE_NONE:
	case pb.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED:
		// A cut page (SPEC §5): Kafka says so with NextCursor alone.
	default:
		// A request-level refusal (a cursor naming no requested topic):
		// Kafka has no top-level error field, so every topic carries it.
		return failDescribeTopicPartitions(req, kafkaCode(presp.GetError())), nil
	}
	for _, t := range presp.GetTopics() {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		name := t.GetName()
		rt.Topic, rt.ErrorCode, rt.IsInternal = &name, kafkaCode(t.GetError()), t.GetIsInternal()
		rt.TopicID = topicID(t.GetTopicId())
		rt.AuthorizedOperations = authorizedOperationsOmitted
		for _, p := range t.GetPartitions() {
			rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			rp.ErrorCode, rp.Partition = kafkaCode(p.GetError()), p.GetPartitionIndex()
			rp.LeaderID, rp.LeaderEpoch = p.GetLeaderId(), p.GetLeaderEpoch()
			rp.Replicas, rp.ISR = orEmpty(p.GetReplicas()), orEmpty(p.GetIsr())
			rp.EligibleLeaderReplicas, rp.LastKnownELR = orEmpty(p.GetEligibleLeaderReplicas()), orEmpty(p.GetLastKnownElr())
			rp.OfflineReplicas = orEmpty(p.GetOfflineReplicas())
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if c := presp.GetNextCursor(); c != nil {
		resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: c.GetTopicName(), Partition: c.GetPartitionIndex()}
	}
	return resp, nil
}

func failDescribeTopicPartitions(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	resp.SetVersion(req.GetVersion())
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		name := t.Topic
		rt.Topic, rt.ErrorCode, rt.AuthorizedOperations = &name, code, authorizedOperationsOmitted
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// orEmpty is s, or an empty list where Kafka's field is not nullable.
func orEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
