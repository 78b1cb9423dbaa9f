package kafka

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
)

// Admin is the cluster's admin API as the broker serves it: the topic,
// config, ACL and SCRAM credential operations forwarded to the controller,
// DescribeTopicPartitions from the broker's metadata (the methods the gRPC
// admin service calls). The listener authorizes its requests itself
// (authz.go), with the principal of the Kafka connection: the Admin must
// not check them again against the gRPC caller of ctx, which has none.
type Admin interface {
	CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error)
	DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error)
	DescribeConfigs(ctx context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error)
	AlterConfigs(ctx context.Context, req *pb.AlterConfigsRequest) (*pb.AlterConfigsResponse, error)
	DescribeTopicPartitions(ctx context.Context, req *pb.DescribeTopicPartitionsRequest) (*pb.DescribeTopicPartitionsResponse, error)
	CreateAcls(ctx context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error)
	DeleteAcls(ctx context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error)
	DescribeAcls(ctx context.Context, req *pb.DescribeAclsRequest) (*pb.DescribeAclsResponse, error)
	AlterUserScramCredentials(ctx context.Context, req *pb.AlterUserScramCredentialsRequest) (*pb.AlterUserScramCredentialsResponse, error)
	DescribeUserScramCredentials(ctx context.Context, req *pb.DescribeUserScramCredentialsRequest) (*pb.DescribeUserScramCredentialsResponse, error)
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
	acc := s.access(ctx)
	preq := &pb.CreateTopicsRequest{ValidateOnly: req.ValidateOnly}
	// brokers: the cluster's, asked once a topic wants the default
	// replication factor (-1: not yet). A broker without its metadata
	// cannot say how many there are; it does not guess 1 (the connection
	// closes, as for its Metadata, and the client asks another broker).
	brokers := -1
	defaultRF := func() (int32, error) {
		if brokers < 0 {
			md, err := s.backend.Metadata(ctx, &pb.MetadataRequest{NoTopics: true})
			if err != nil {
				return 0, err
			}
			brokers = len(md.GetBrokers())
		}
		return defaultReplicationFactor(brokers), nil
	}
	// creatable[i] is the request's topic i as asked of the controller,
	// nil for a topic the principal may not create.
	creatable := make([]*pb.CreatableTopic, len(req.Topics))
	for i, t := range req.Topics {
		if !acc.createTopic(t.Topic) {
			continue
		}
		ct := &pb.CreatableTopic{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: int32(t.ReplicationFactor), Configs: map[string]string{}}
		if len(t.ReplicaAssignment) == 0 {
			if ct.NumPartitions == -1 {
				ct.NumPartitions = 1
			}
			if ct.ReplicationFactor == -1 {
				rf, err := defaultRF()
				if err != nil {
					return nil, err
				}
				ct.ReplicationFactor = rf
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
		creatable[i] = ct
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(req.GetVersion())
	var presp *pb.CreateTopicsResponse
	var err error
	if len(preq.Topics) > 0 || len(req.Topics) == 0 {
		presp, err = s.admin.CreateTopics(ctx, preq)
	}
	results := map[string]*pb.TopicResult{}
	for _, r := range presp.GetTopics() {
		results[r.GetName()] = r
	}
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		ct := creatable[i]
		if ct == nil {
			rt.ErrorCode, rt.ErrorMessage = topicAuthorizationFailed, kmsg.StringPtr("Authorization failed.")
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.NumPartitions, rt.ReplicationFactor = ct.NumPartitions, int16(ct.ReplicationFactor)
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
		name     string
		id       [16]byte
		byID     bool
		denied   int16 // TOPIC_AUTHORIZATION_FAILED: not asked of the controller
		showName bool  // the name may be answered (denied by id: not without Describe)
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
			byID, w.byID = true, true
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
	acc := s.access(ctx)
	preq := &pb.DeleteTopicsRequest{}
	for i, w := range wants {
		if w.name == "" {
			continue
		}
		wants[i].denied, wants[i].showName = acc.deleteTopic(w.name, w.byID)
		if wants[i].denied == 0 {
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
		if w.name != "" && (w.denied == 0 || w.showName) {
			name := w.name
			rt.Topic = &name
		}
		r := results[w.name]
		switch {
		case w.name == "":
			rt.ErrorCode = unknownTopicID
		case w.denied != 0:
			rt.ErrorCode = w.denied
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
	acc := s.access(ctx)
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
		if code := acc.config(acl.DescribeConfigs, res); code != 0 {
			rr.ErrorCode = code
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
	acc := s.access(ctx)
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
		if code := acc.config(acl.AlterConfigs, res); code != 0 {
			rr.ErrorCode = code
			resp.Resources = append(resp.Resources, rr)
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
	// No ACL is needed, as in Kafka: it tells what Metadata tells.
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
// with the broker's own (SPEC §5): the same paging, cursor and limits,
// and with an Authorizer SPEC §5's rule (see describeView).
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
	var v describeView
	if acc := s.access(ctx); acc.enabled() {
		var err error
		if preq, v, err = s.authorizeDescribe(ctx, acc, preq); err != nil {
			return failDescribeTopicPartitions(req, s.errorCode(err)), nil
		}
		if preq == nil {
			return resp, nil // no topic the principal may describe
		}
	}
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
		name := t.GetName()
		if denied, ok := v.denied(name); ok {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.AuthorizedOperations = &denied, topicAuthorizationFailed, authorizedOperationsOmitted
			resp.Topics = append(resp.Topics, rt)
			if !v.asked[name] {
				continue
			}
		}
		if v.every && t.GetError() == pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION && len(t.GetPartitions()) == 0 {
			continue // deleted since it was listed: not a topic of "every topic"
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
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
		name := c.GetTopicName()
		if denied, ok := v.denied(name); ok {
			name = denied
		}
		resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: c.GetPartitionIndex()}
	}
	return resp, nil
}

// describeView is how DescribeTopicPartitions applies SPEC §5's rule
// (Describe on each topic: a listed topic denied is a
// TOPIC_AUTHORIZATION_FAILED entry, an unlisted one is skipped) without
// asking the broker about a denied topic and without changing the paging,
// which only the broker computes (it alone knows
// max.request.partition.size.limit):
//
//   - Every topic (no list): the names come from the broker's metadata,
//     and the broker is asked for those the principal may describe, by
//     name. A skipped topic is then no part of the paging at all, as SPEC
//     §5 wants: not counted against the limit, never the cursor. A cursor
//     naming one of them is kept; one naming a topic denied or gone starts
//     the list after it (from partition 0, as the paging over every topic
//     does).
//   - A list: each denied topic is replaced by a placeholder, its name
//     followed by a NUL byte. No topic has a NUL in its name, so the
//     broker answers the placeholder as an unknown listed topic, which SPEC
//     §5 pages exactly as a denied one (an entry without partitions, not
//     counted, the cursor if the limit ran out just before it); and the
//     placeholder is its name's immediate successor in byte-wise order, so
//     it sorts where the name does among any other names. The placeholder's
//     entry and cursor are answered as the denied topic, and a cursor
//     naming a denied topic names its placeholder.
type describeView struct {
	// placeholders maps each placeholder to the denied listed topic it
	// stands for.
	placeholders map[string]string
	// asked are the listed topics the principal may describe; one may be
	// a placeholder too (a listed name ending in NUL), and is then
	// answered after the denied topic.
	asked map[string]bool
	// from is the cursor's topic: a placeholder stands for its topic only
	// at or after it (a listed name below it is not on the page).
	from string
	// every: the request is for every topic, asked by name; a topic the
	// broker no longer has is left out, as it would have been.
	every bool
}

// placeholder is the name a denied listed topic is asked as (describeView).
func placeholder(topic string) string { return topic + "\x00" }

// denied returns the denied topic that name, in the broker's answer,
// stands for.
func (v describeView) denied(name string) (string, bool) {
	t, ok := v.placeholders[name]
	return t, ok && t >= v.from
}

// authorizeDescribe rewrites a DescribeTopicPartitions request for the
// principal (describeView); nil when there is nothing to ask.
func (s *Server) authorizeDescribe(ctx context.Context, acc *access, preq *pb.DescribeTopicPartitionsRequest) (*pb.DescribeTopicPartitionsRequest, describeView, error) {
	v := describeView{from: preq.GetCursor().GetTopicName()}
	out := &pb.DescribeTopicPartitionsRequest{ResponsePartitionLimit: preq.GetResponsePartitionLimit(), Cursor: preq.GetCursor()}
	if len(preq.GetTopics()) > 0 {
		v.placeholders, v.asked = map[string]string{}, map[string]bool{}
		for _, t := range preq.GetTopics() {
			name := t.GetName()
			if acc.describeTopic(name) {
				v.asked[name] = true
				out.Topics = append(out.Topics, t)
				continue
			}
			v.placeholders[placeholder(name)] = name
			out.Topics = append(out.Topics, &pb.DescribeTopicPartitionsTopic{Name: placeholder(name)})
		}
		if c := preq.GetCursor(); c != nil && !acc.describeTopic(c.GetTopicName()) {
			out.Cursor = &pb.Cursor{TopicName: placeholder(c.GetTopicName()), PartitionIndex: c.GetPartitionIndex()}
		}
		return out, v, nil
	}
	v.every = true
	c := preq.GetCursor()
	if c.GetPartitionIndex() < 0 {
		// INVALID_REQUEST, which without listed topics to carry it is an
		// empty answer.
		return nil, v, nil
	}
	md, err := s.backend.Metadata(ctx, &pb.MetadataRequest{})
	if err != nil {
		return nil, v, err
	}
	out.Cursor = nil
	for _, t := range md.GetTopics() {
		name := t.GetName()
		if (c != nil && name < c.GetTopicName()) || !acc.describeTopic(name) {
			continue
		}
		if c != nil && name == c.GetTopicName() {
			out.Cursor = c
		}
		out.Topics = append(out.Topics, &pb.DescribeTopicPartitionsTopic{Name: name})
	}
	if len(out.Topics) == 0 {
		return nil, v, nil // an empty list would ask for every topic
	}
	return out, v, nil
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
