package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/group"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/security/acl"
)

// alice is the principal of the test connections.
const alice = "User:alice"

// grant is one thing the fake authorizer allows.
type grant struct {
	principal string
	op        acl.Operation
	rt        acl.ResourceType
	name      string
}

func topicGrant(op acl.Operation, name string) grant { return grant{alice, op, acl.Topic, name} }
func groupGrant(op acl.Operation, id string) grant   { return grant{alice, op, acl.Group, id} }
func clusterGrant(op acl.Operation) grant            { return grant{alice, op, acl.Cluster, acl.ClusterName} }

// fakeAuthorizer gives every connection principal (or fails with err) and
// allows exactly its grants, no implication: a test names what it means.
type fakeAuthorizer struct {
	mu         sync.Mutex
	principal  string
	err        error
	grants     map[grant]bool
	hosts      map[string]bool // the hosts Allowed was asked about
	principals int             // Principal calls
}

func newFakeAuthorizer(grants ...grant) *fakeAuthorizer {
	f := &fakeAuthorizer{principal: alice}
	f.allow(grants...)
	return f
}

// allow replaces the grants.
func (f *fakeAuthorizer) allow(grants ...grant) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants = map[grant]bool{}
	for _, g := range grants {
		f.grants[g] = true
	}
}

func (f *fakeAuthorizer) Principal(ctx context.Context, _ net.Conn) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.principals++
	if _, ok := ctx.Deadline(); !ok {
		return "", errors.New("Principal without a deadline")
	}
	return f.principal, f.err
}

func (f *fakeAuthorizer) Allowed(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hosts == nil {
		f.hosts = map[string]bool{}
	}
	f.hosts[host] = true
	return f.grants[grant{principal, op, rt, name}]
}

// IdempotentProducer: IdempotentWrite on the cluster or Write on a topic.
func (f *fakeAuthorizer) IdempotentProducer(principal, host string) bool {
	if f.Allowed(principal, host, acl.IdempotentWrite, acl.Cluster, acl.ClusterName) {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for g := range f.grants {
		if g.principal == principal && g.op == acl.Write && g.rt == acl.Topic {
			return true
		}
	}
	return false
}

// recorder keeps the requests a fake got.
type recorder struct {
	mu    sync.Mutex
	calls []any
}

func (r *recorder) record(req any) {
	r.mu.Lock()
	r.calls = append(r.calls, req)
	r.mu.Unlock()
}

func (r *recorder) take() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// recBackend records every request and answers each partition asked
// NONE; its Metadata has the topics of topics (by name) and one broker,
// the test listener.
type recBackend struct {
	recorder
	host   string
	port   int32
	topics []*pb.MetadataTopic
}

// testTopics are recBackend's topics: ok (2 partitions), no and other.
func testTopics() []*pb.MetadataTopic {
	part := func(i int32) *pb.MetadataPartition {
		return &pb.MetadataPartition{Index: i, LeaderId: 1, Replicas: []int32{1}, Isr: []int32{1}}
	}
	return []*pb.MetadataTopic{
		{Name: "no", TopicId: idString(2), Partitions: []*pb.MetadataPartition{part(0)}},
		{Name: "ok", TopicId: idString(1), Partitions: []*pb.MetadataPartition{part(0), part(1)}},
		{Name: "other", TopicId: idString(3), Partitions: []*pb.MetadataPartition{part(0)}},
	}
}

// idString is topic id n as twinlog writes it (base64url of 16 bytes).
func idString(n byte) string {
	id := idBytes(n)
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// idBytes is topic id n as Kafka sends it.
func idBytes(n byte) [16]byte { return [16]byte{15: n} }

func (b *recBackend) StartProduce(req *pb.ProduceRequest) func(context.Context) (*pb.ProduceResponse, error) {
	b.record(req)
	resp := &pb.ProduceResponse{}
	for _, p := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{Topic: p.GetTopic(), Partition: p.GetPartition(), BaseOffset: 7})
	}
	return func(context.Context) (*pb.ProduceResponse, error) { return resp, nil }
}

func (b *recBackend) Fetch(_ context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	b.record(req)
	resp := &pb.FetchResponse{}
	for _, p := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, &pb.FetchPartitionResponse{Topic: p.GetTopic(), Partition: p.GetPartition(), HighWatermark: 10})
	}
	return resp, nil
}

func (b *recBackend) ListOffsets(_ context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	b.record(req)
	resp := &pb.ListOffsetsResponse{}
	for _, t := range req.GetTopics() {
		rt := &pb.ListOffsetsTopicResponse{Name: t.GetName()}
		for _, p := range t.GetPartitions() {
			rt.Partitions = append(rt.Partitions, &pb.ListOffsetsPartitionResponse{Index: p.GetIndex(), Offset: 42})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (b *recBackend) OffsetForLeaderEpoch(_ context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	b.record(req)
	resp := &pb.OffsetForLeaderEpochResponse{}
	for _, p := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, &pb.OffsetForLeaderEpochPartitionResponse{Topic: p.GetTopic(), Partition: p.GetPartition(), EndOffset: 9})
	}
	return resp, nil
}

// setTopics changes Metadata's topics.
func (b *recBackend) setTopics(ts []*pb.MetadataTopic) {
	b.mu.Lock()
	b.topics = ts
	b.mu.Unlock()
}

func (b *recBackend) Metadata(_ context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	b.record(req)
	b.mu.Lock()
	defer b.mu.Unlock()
	resp := &pb.MetadataResponse{ClusterId: "c", Brokers: []*pb.MetadataBroker{{Id: 1, KafkaHost: b.host, KafkaPort: b.port}}}
	switch {
	case req.GetNoTopics():
	case len(req.GetTopics()) == 0:
		resp.Topics = b.topics
	default:
		for _, name := range req.GetTopics() {
			i := slices.IndexFunc(b.topics, func(t *pb.MetadataTopic) bool { return t.GetName() == name })
			if i < 0 {
				resp.Topics = append(resp.Topics, &pb.MetadataTopic{Name: name, Error: pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION})
				continue
			}
			resp.Topics = append(resp.Topics, b.topics[i])
		}
	}
	return resp, nil
}

func (b *recBackend) TopicName(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.topics {
		if t.GetTopicId() == id {
			return t.GetName(), true
		}
	}
	return "", false
}

func (b *recBackend) InitProducerId(_ context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	b.record(req)
	return &pb.InitProducerIdResponse{ProducerId: 1000}, nil
}

// fakeAdmin records every request; its DescribeTopicPartitions pages img
// with serverLimit, the ACL methods answer the canned answers (or err).
type fakeAdmin struct {
	recorder
	mu          sync.Mutex
	img         *metadata.Image
	serverLimit int
	err         error
	created     *pb.CreateAclsResponse
	described   *pb.DescribeAclsResponse
	deleted     *pb.DeleteAclsResponse
	scram       credStore // the SCRAM credential methods' (sasl_test.go)
}

func (a *fakeAdmin) set(change func(a *fakeAdmin)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	change(a)
}

func (a *fakeAdmin) CreateTopics(_ context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	a.record(req)
	resp := &pb.CreateTopicsResponse{}
	for _, t := range req.GetTopics() {
		resp.Topics = append(resp.Topics, &pb.TopicResult{Name: t.GetName(), TopicId: idString(4)})
	}
	return resp, nil
}

func (a *fakeAdmin) DeleteTopics(_ context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	a.record(req)
	resp := &pb.DeleteTopicsResponse{}
	for _, n := range req.GetNames() {
		resp.Topics = append(resp.Topics, &pb.TopicResult{Name: n})
	}
	return resp, nil
}

func (a *fakeAdmin) DescribeConfigs(_ context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error) {
	a.record(req)
	resp := &pb.DescribeConfigsResponse{}
	for _, r := range req.GetResources() {
		resp.Results = append(resp.Results, &pb.DescribeConfigsResult{Resource: r,
			Entries: []*pb.ConfigEntry{{Name: "retention.ms", Value: "1", Source: pb.ConfigSource_CONFIG_SOURCE_DEFAULT}}})
	}
	return resp, nil
}

func (a *fakeAdmin) AlterConfigs(_ context.Context, req *pb.AlterConfigsRequest) (*pb.AlterConfigsResponse, error) {
	a.record(req)
	resp := &pb.AlterConfigsResponse{}
	for range req.GetResources() {
		resp.Results = append(resp.Results, &pb.AlterConfigsResult{})
	}
	return resp, nil
}

func (a *fakeAdmin) DescribeTopicPartitions(_ context.Context, req *pb.DescribeTopicPartitionsRequest) (*pb.DescribeTopicPartitionsResponse, error) {
	a.record(req)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.img == nil {
		return &pb.DescribeTopicPartitionsResponse{}, nil
	}
	return a.img.DescribeTopicPartitions(req, a.serverLimit), nil
}

func (a *fakeAdmin) CreateAcls(_ context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	a.record(req)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.created, a.err
}

func (a *fakeAdmin) DeleteAcls(_ context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	a.record(req)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deleted, a.err
}

func (a *fakeAdmin) DescribeAcls(_ context.Context, req *pb.DescribeAclsRequest) (*pb.DescribeAclsResponse, error) {
	a.record(req)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.described, a.err
}

// authzEnv is a server with every API (a recBackend, a fakeAdmin,
// fakeGroups) and an authorizer, and a connection to it.
type authzEnv struct {
	c    *client
	addr string
	fa   *fakeAuthorizer
	b    *recBackend
	adm  *fakeAdmin
	fg   *fakeGroups
	obs  *countingObserver
}

// startAuthz serves the env's fakes with authorizer fa (nil: none).
func startAuthz(t *testing.T, fa *fakeAuthorizer) *authzEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().(*net.TCPAddr)
	e := &authzEnv{
		addr: ln.Addr().String(), fa: fa,
		b:   &recBackend{host: a.IP.String(), port: int32(a.Port), topics: testTopics()},
		adm: &fakeAdmin{}, fg: &fakeGroups{},
		obs: &countingObserver{requests: map[string]int{}, closed: map[string]int{}},
	}
	cfg := Config{BrokerID: 1, Logger: slog.New(slog.DiscardHandler), Groups: e.fg, Observer: e.obs}
	if fa != nil {
		cfg.Authorizer = fa
	}
	s := NewServer(cfg, e.b, e.adm)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	e.c = dial(t, e.addr)
	return e
}

// takeAll returns what the backend, the admin and the groups got since the
// last take.
func (e *authzEnv) takeAll() []any {
	calls, _ := e.fg.take()
	return append(append(e.b.take(), e.adm.take()...), calls...)
}

// Request builders: each topic with partitions 0..n-1.

func produceReq(v int16, acks int16, topics ...string) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.SetVersion(v)
	r.Acks, r.TimeoutMillis = acks, 1000
	for _, name := range topics {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = name
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = []byte{}
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
	}
	return r
}

func fetchReq(v int16, topics ...string) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.SetVersion(v)
	for _, name := range topics {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = name
		t.Partitions = append(t.Partitions, kmsg.NewFetchRequestTopicPartition())
		r.Topics = append(r.Topics, t)
	}
	return r
}

func listOffsetsReq(v int16, topics ...string) *kmsg.ListOffsetsRequest {
	r := kmsg.NewPtrListOffsetsRequest()
	r.SetVersion(v)
	for _, name := range topics {
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = name
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Timestamp = listLatest
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
	}
	return r
}

func offsetForLeaderEpochReq(v int16, topics ...string) *kmsg.OffsetForLeaderEpochRequest {
	r := kmsg.NewPtrOffsetForLeaderEpochRequest()
	r.SetVersion(v)
	r.ReplicaID = -1
	for _, name := range topics {
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = name
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.CurrentLeaderEpoch, p.LeaderEpoch = -1, 0
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
	}
	return r
}

// metadataReq names topics; none at all is a null list (every topic).
func metadataReq(v int16, topics ...string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.SetVersion(v)
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		r.Topics = append(r.Topics, t)
	}
	return r
}

func createTopicsReq(v int16, topics ...string) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.SetVersion(v)
	for _, name := range topics {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, 1, 1
		r.Topics = append(r.Topics, t)
	}
	return r
}

func deleteTopicsReq(v int16, topics ...string) *kmsg.DeleteTopicsRequest {
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.SetVersion(v)
	for _, name := range topics {
		if v >= 6 {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = kmsg.StringPtr(name)
			r.Topics = append(r.Topics, t)
		} else {
			r.TopicNames = append(r.TopicNames, name)
		}
	}
	return r
}

// configRes is a config resource: a topic's, or ("broker", name) a
// broker's ("" for the cluster's defaults).
type configRes struct {
	broker bool
	name   string
}

func describeConfigsReq(v int16, res ...configRes) *kmsg.DescribeConfigsRequest {
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.SetVersion(v)
	for _, c := range res {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kafkaResourceTopic, c.name
		if c.broker {
			rr.ResourceType = kafkaResourceBroker
		}
		r.Resources = append(r.Resources, rr)
	}
	return r
}

func alterConfigsReq(v int16, res ...configRes) *kmsg.IncrementalAlterConfigsRequest {
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r.SetVersion(v)
	for _, c := range res {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kafkaResourceTopic, c.name
		if c.broker {
			rr.ResourceType = kafkaResourceBroker
		}
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("1")
		rr.Configs = append(rr.Configs, cfg)
		r.Resources = append(r.Resources, rr)
	}
	return r
}

// codesOf maps each item of a response to its codes: a topic (or a
// config resource, "" being the cluster's) to its partitions' codes, or
// its own code for the APIs without partitions; for OffsetFetch v8+,
// "group" and "group/topic".
func codesOf(resp kmsg.Response) map[string][]int16 {
	out := map[string][]int16{}
	add := func(k string, c int16) { out[k] = append(out[k], c) }
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.ErrorCode)
			}
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.ErrorCode)
			}
		}
	case *kmsg.MetadataResponse:
		for _, t := range r.Topics {
			if t.Topic != nil {
				add(*t.Topic, t.ErrorCode)
			}
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			add(t.Topic, t.ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			if t.Topic != nil {
				add(*t.Topic, t.ErrorCode)
			}
		}
	case *kmsg.DescribeConfigsResponse:
		for _, res := range r.Resources {
			add(res.ResourceName, res.ErrorCode)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, res := range r.Resources {
			add(res.ResourceName, res.ErrorCode)
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.ErrorCode)
			}
		}
		for _, g := range r.Groups {
			add(g.Group, g.ErrorCode)
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					add(g.Group+"/"+t.Topic, p.ErrorCode)
				}
			}
		}
	case *kmsg.OffsetDeleteResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.ErrorCode)
			}
		}
	default:
		panic(fmt.Sprintf("codesOf %T", resp))
	}
	return out
}

// askedOf is what the calls asked of the backend, the admin and the
// groups: the topics named (sorted, once each; "<all>" for every topic,
// "<cluster>" and "<broker>" for config resources), and the number of
// calls, Metadata for the broker count (NoTopics) left out.
func askedOf(calls []any) (names []string, n int) {
	add := func(s string) {
		if !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	config := func(res *pb.ConfigResource) {
		switch res.GetType() {
		case pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC:
			add(res.GetName())
		case pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER:
			add("<cluster>")
		default:
			add("<broker>")
		}
	}
	for _, c := range calls {
		n++
		switch r := c.(type) {
		case *pb.ProduceRequest:
			for _, p := range r.GetPartitions() {
				add(p.GetTopic())
			}
		case *pb.FetchRequest:
			for _, p := range r.GetPartitions() {
				add(p.GetTopic())
			}
		case *pb.ListOffsetsRequest:
			for _, t := range r.GetTopics() {
				add(t.GetName())
			}
		case *pb.OffsetForLeaderEpochRequest:
			for _, p := range r.GetPartitions() {
				add(p.GetTopic())
			}
		case *pb.MetadataRequest:
			switch {
			case r.GetNoTopics():
				n--
			case len(r.GetTopics()) == 0:
				add("<all>")
			}
			for _, t := range r.GetTopics() {
				add(t)
			}
		case *pb.CreateTopicsRequest:
			for _, t := range r.GetTopics() {
				add(t.GetName())
			}
		case *pb.DeleteTopicsRequest:
			for _, t := range r.GetNames() {
				add(t)
			}
		case *pb.DescribeConfigsRequest:
			for _, res := range r.GetResources() {
				config(res)
			}
		case *pb.AlterConfigsRequest:
			for _, res := range r.GetResources() {
				config(res.GetResource())
			}
		case *pb.DescribeTopicPartitionsRequest:
			for _, t := range r.GetTopics() {
				add(t.GetName())
			}
		case group.OffsetCommitRequest:
			for _, t := range r.Topics {
				add(t.Name)
			}
		case group.OffsetFetchRequest:
			if r.Topics == nil {
				add("<all>")
			}
			for _, t := range r.Topics {
				add(t.Name)
			}
		case group.OffsetDeleteRequest:
			for _, t := range r.Topics {
				add(t.Name)
			}
		}
	}
	sort.Strings(names)
	return names, n
}

// TestAuthorizeTopics: per API, the items of topics the principal may not
// act on are answered with their authorization code and never reach the
// backend, the admin or the coordinator (no call at all when nothing is
// left); allowed items are answered as without an authorizer.
func TestAuthorizeTopics(t *testing.T) {
	commit := group.OffsetCommitResponse{Topics: []group.TopicResult{{Name: "t1", Partitions: []group.PartitionResult{{Partition: 0}, {Partition: 1}}}}}
	offsetDelete := group.OffsetDeleteResponse{Topics: []group.TopicResult{{Name: "t1", Partitions: []group.PartitionResult{{Partition: 0}, {Partition: 1}}}}}
	for _, tc := range []struct {
		name   string
		grants []grant
		req    kmsg.Request
		want   map[string][]int16 // codesOf the response
		asked  []string           // askedOf the calls (nil: no call)
	}{
		{"produce", []grant{topicGrant(acl.Write, "ok")}, produceReq(7, 1, "ok", "no"),
			map[string][]int16{"ok": {0}, "no": {29}}, []string{"ok"}},
		{"produce, Read is not Write", []grant{topicGrant(acl.Read, "ok")}, produceReq(9, -1, "ok"),
			map[string][]int16{"ok": {29}}, nil},
		{"produce, nothing allowed", nil, produceReq(3, -1, "no", "other"),
			map[string][]int16{"no": {29}, "other": {29}}, nil},
		{"fetch", []grant{topicGrant(acl.Read, "ok")}, fetchReq(12, "ok", "no"),
			map[string][]int16{"ok": {0}, "no": {29}}, []string{"ok"}},
		{"fetch, nothing allowed", []grant{topicGrant(acl.Write, "no")}, fetchReq(4, "no"),
			map[string][]int16{"no": {29}}, nil},
		{"list offsets", []grant{topicGrant(acl.Describe, "ok")}, listOffsetsReq(6, "ok", "no"),
			map[string][]int16{"ok": {0}, "no": {29}}, []string{"ok"}},
		{"list offsets, nothing allowed", nil, listOffsetsReq(1, "no"),
			map[string][]int16{"no": {29}}, nil},
		{"offset for leader epoch", []grant{topicGrant(acl.Describe, "ok")}, offsetForLeaderEpochReq(4, "ok", "no"),
			map[string][]int16{"ok": {0}, "no": {29}}, []string{"ok"}},
		{"offset for leader epoch, nothing allowed", nil, offsetForLeaderEpochReq(0, "no"),
			map[string][]int16{"no": {29}}, nil},
		{"metadata by name", []grant{topicGrant(acl.Describe, "ok")}, metadataReq(12, "ok", "no", "no"),
			map[string][]int16{"ok": {0}, "no": {29}}, []string{"ok"}},
		{"metadata by name, nothing allowed", nil, metadataReq(1, "no"),
			map[string][]int16{"no": {29}}, nil},
		{"metadata, every topic", []grant{topicGrant(acl.Describe, "ok"), topicGrant(acl.Describe, "other")}, metadataReq(12),
			map[string][]int16{"ok": {0}, "other": {0}}, []string{"<all>"}},
		{"metadata v0, every topic", []grant{topicGrant(acl.Describe, "no")}, metadataReq(0),
			map[string][]int16{"no": {0}}, []string{"<all>"}},
		{"create topics", []grant{topicGrant(acl.Create, "ok")}, createTopicsReq(7, "ok", "no"),
			map[string][]int16{"ok": {0}, "no": {29}}, []string{"ok"}},
		{"create topics as the cluster's creator", []grant{clusterGrant(acl.Create)}, createTopicsReq(2, "ok", "no"),
			map[string][]int16{"ok": {0}, "no": {0}}, []string{"no", "ok"}},
		{"create topics, nothing allowed", nil, createTopicsReq(4, "no"),
			map[string][]int16{"no": {29}}, nil},
		{"delete topics", []grant{topicGrant(acl.Delete, "ok")}, deleteTopicsReq(6, "ok", "no"),
			map[string][]int16{"ok": {0}, "no": {29}}, []string{"ok"}},
		{"delete topics v1, nothing allowed", []grant{topicGrant(acl.Describe, "no")}, deleteTopicsReq(1, "no"),
			map[string][]int16{"no": {29}}, nil},
		{"describe configs", []grant{topicGrant(acl.DescribeConfigs, "ok")},
			describeConfigsReq(4, configRes{name: "ok"}, configRes{name: "no"}, configRes{broker: true}, configRes{broker: true, name: "1"}),
			map[string][]int16{"ok": {0}, "no": {29}, "": {31}, "1": {31}}, []string{"ok"}},
		{"describe configs of the cluster", []grant{clusterGrant(acl.DescribeConfigs)},
			describeConfigsReq(1, configRes{name: "no"}, configRes{broker: true}, configRes{broker: true, name: "1"}),
			map[string][]int16{"no": {29}, "": {0}, "1": {0}}, []string{"<broker>", "<cluster>"}},
		{"alter configs", []grant{topicGrant(acl.AlterConfigs, "ok"), topicGrant(acl.DescribeConfigs, "no")},
			alterConfigsReq(1, configRes{name: "ok"}, configRes{name: "no"}, configRes{broker: true}),
			map[string][]int16{"ok": {0}, "no": {29}, "": {31}}, []string{"ok"}},
		{"alter configs of the cluster", []grant{clusterGrant(acl.AlterConfigs)},
			alterConfigsReq(0, configRes{broker: true, name: "1"}),
			map[string][]int16{"1": {0}}, []string{"<broker>"}},
		{"offset commit", []grant{groupGrant(acl.Read, "g"), topicGrant(acl.Read, "t1")}, groupRequest(8, 9),
			map[string][]int16{"t1": {0, 0}, "t2": {29}}, []string{"t1"}},
		{"offset commit, no topic allowed", []grant{groupGrant(acl.Read, "g"), topicGrant(acl.Describe, "t1")}, groupRequest(8, 2),
			map[string][]int16{"t1": {29, 29}, "t2": {29}}, nil},
		{"offset commit, group denied", []grant{groupGrant(acl.Describe, "g"), topicGrant(acl.Read, "t1")}, groupRequest(8, 5),
			map[string][]int16{"t1": {30, 30}, "t2": {30}}, nil},
		{"offset fetch v1", []grant{groupGrant(acl.Describe, "g1"), topicGrant(acl.Describe, "t1")}, groupRequest(9, 1),
			map[string][]int16{"t1": {0, 0}, "t2": {29}}, []string{"t1"}},
		{"offset fetch v7", []grant{groupGrant(acl.Describe, "g1"), topicGrant(acl.Describe, "t2")}, groupRequest(9, 7),
			map[string][]int16{"t1": {29, 29}, "t2": {0}}, []string{"t2"}},
		{"offset fetch v7, no topic allowed", []grant{groupGrant(acl.Describe, "g1")}, groupRequest(9, 7),
			map[string][]int16{"t1": {29, 29}, "t2": {29}}, []string{}},
		{"offset fetch v8", []grant{groupGrant(acl.Describe, "g1"), topicGrant(acl.Describe, "t1")}, groupRequest(9, 8),
			map[string][]int16{"g1": {0}, "g1/t1": {0, 0}, "g1/t2": {29}, "g2": {30}}, []string{"t1"}},
		{"offset fetch v9, every topic", []grant{groupGrant(acl.Describe, "g1"), groupGrant(acl.Describe, "g2"), topicGrant(acl.Describe, "t2")}, groupRequest(9, 9),
			map[string][]int16{"g1": {0}, "g1/t1": {29, 29}, "g1/t2": {0}, "g2": {int16(group.NotCoordinator)}}, []string{"<all>", "t2"}},
		{"offset delete", []grant{groupGrant(acl.Delete, "g"), topicGrant(acl.Read, "t1")}, groupRequest(47, 0),
			map[string][]int16{"t1": {0, 0}, "t2": {29}}, []string{"t1"}},
		{"offset delete, no topic allowed", []grant{groupGrant(acl.Delete, "g")}, groupRequest(47, 0),
			map[string][]int16{"t1": {29, 29}, "t2": {29}}, nil},
		{"offset delete, group denied", []grant{groupGrant(acl.Read, "g"), topicGrant(acl.Read, "t1")}, groupRequest(47, 0),
			map[string][]int16{"t1": {30, 30}, "t2": {30}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startAuthz(t, newFakeAuthorizer(tc.grants...))
			e.fg.set(func(f *fakeGroups) { f.commit, f.offsetDelete, f.fetch = commit, offsetDelete, offsetFetchAnswers })
			resp := e.c.roundTrip(tc.req)
			if got := codesOf(resp); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("codes %v, want %v", got, tc.want)
			}
			asked, n := askedOf(e.takeAll())
			if (tc.asked == nil) != (n == 0) || len(asked) != len(tc.asked) || (len(asked) > 0 && !reflect.DeepEqual(asked, tc.asked)) {
				t.Errorf("asked %v in %d calls, want %v (nil: no call)", asked, n, tc.asked)
			}
		})
	}
}

// everyGroupGrant allows every group operation on the groups of
// groupRequest and every topic operation on its topics.
func everyGroupGrant() []grant {
	var out []grant
	for _, id := range []string{"g", "g1", "g2"} {
		for _, op := range []acl.Operation{acl.Read, acl.Describe, acl.Delete} {
			out = append(out, groupGrant(op, id))
		}
	}
	for _, name := range []string{"t1", "t2"} {
		for _, op := range []acl.Operation{acl.Read, acl.Describe} {
			out = append(out, topicGrant(op, name))
		}
	}
	return out
}

// TestAuthorizeGroupAPIs: every group API but ListGroups, at every served
// version, fails every entry with GROUP_AUTHORIZATION_FAILED when the
// principal may do nothing, without asking the coordinator; allowed, the
// requests reach it as without an authorizer (its error fails them as
// before).
func TestAuthorizeGroupAPIs(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer())
	for key, r := range groupAPIs {
		if key == 16 {
			continue
		}
		for v := r[0]; v <= r[1]; v++ {
			checkFailed(t, key, v, e.c.roundTrip(groupRequest(key, v)), groupAuthorizationFailed)
		}
	}
	if calls := e.takeAll(); len(calls) != 0 {
		t.Errorf("denied group requests reached the coordinator: %v", calls)
	}
	e.fa.allow(everyGroupGrant()...)
	e.fg.set(func(f *fakeGroups) { f.err = context.DeadlineExceeded })
	for key, r := range groupAPIs {
		for v := r[0]; v <= r[1]; v++ {
			checkFailed(t, key, v, e.c.roundTrip(groupRequest(key, v)), requestTimedOut)
		}
	}
}

// TestAuthorizeGroups: FindCoordinator, DescribeGroups and DeleteGroups
// decide each group on its own (the denied ones after the others, never
// asked); ListGroups lists only the groups the principal may describe, or
// every one with Describe on the cluster.
func TestAuthorizeGroups(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(groupGrant(acl.Describe, "g1"), groupGrant(acl.Delete, "g2")))
	e.fg.set(func(f *fakeGroups) {
		f.coordinator = func(int8, string) Coordinator { return Coordinator{NodeID: 1, Host: "h", Port: 1} }
		f.described = describedGroups[:1]
		f.deleted = group.DeleteGroupsResponse{Results: []group.DeletedGroup{{GroupID: "g2"}}}
		f.list = group.ListGroupsResponse{Groups: []group.ListedGroup{{GroupID: "g1"}, {GroupID: "g2"}, {GroupID: "g3"}}}
	})

	// FindCoordinator: v4+ per key, before v4 the one key.
	resp := e.c.roundTrip(groupRequest(10, 4)).(*kmsg.FindCoordinatorResponse)
	want := []kmsg.FindCoordinatorResponseCoordinator{{Key: "g1", NodeID: 1, Host: "h", Port: 1}, {Key: "g2", NodeID: -1, Port: -1, ErrorCode: groupAuthorizationFailed}}
	if !reflect.DeepEqual(resp.Coordinators, want) {
		t.Errorf("FindCoordinator v4: %+v, want %+v", resp.Coordinators, want)
	}
	if got := one[findCall](t, e.fg); got != (findCall{0, "g1"}) {
		t.Errorf("FindCoordinator v4 asked %+v, want g1 only", got)
	}
	req := groupRequest(10, 3).(*kmsg.FindCoordinatorRequest)
	req.CoordinatorKey = "g2"
	if resp := e.c.roundTrip(req).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != groupAuthorizationFailed || resp.NodeID != -1 {
		t.Errorf("FindCoordinator v3 of g2: %+v, want GROUP_AUTHORIZATION_FAILED", resp)
	}
	// A transaction key is no group: Groups refuses it, as without ACLs.
	req.CoordinatorType = 1
	e.c.roundTrip(req)
	if got := one[findCall](t, e.fg); got != (findCall{1, "g2"}) {
		t.Errorf("FindCoordinator of a transaction key asked %+v", got)
	}

	// DescribeGroups: g1 asked, g2 denied after it.
	dresp := e.c.roundTrip(groupRequest(15, 5)).(*kmsg.DescribeGroupsResponse)
	if got := one[describeCall](t, e.fg); !reflect.DeepEqual(got, describeCall{"g1"}) {
		t.Errorf("DescribeGroups asked %v, want g1", got)
	}
	if len(dresp.Groups) != 2 || dresp.Groups[0].Group != "g1" || dresp.Groups[0].ErrorCode != 0 || len(dresp.Groups[0].Members) != 1 ||
		dresp.Groups[1].Group != "g2" || dresp.Groups[1].ErrorCode != groupAuthorizationFailed {
		t.Errorf("DescribeGroups: %+v, want g1 described, g2 GROUP_AUTHORIZATION_FAILED", dresp.Groups)
	}

	// DeleteGroups: g2 asked, g1 (Describe only) denied.
	delResp := e.c.roundTrip(groupRequest(42, 2)).(*kmsg.DeleteGroupsResponse)
	if got := one[deleteCall](t, e.fg); !reflect.DeepEqual(got, deleteCall{"g2"}) {
		t.Errorf("DeleteGroups asked %v, want g2", got)
	}
	if want := []kmsg.DeleteGroupsResponseGroup{{Group: "g2"}, {Group: "g1", ErrorCode: groupAuthorizationFailed}}; !reflect.DeepEqual(delResp.Groups, want) {
		t.Errorf("DeleteGroups: %+v, want %+v", delResp.Groups, want)
	}

	// ListGroups: what the principal may describe, or everything.
	listed := func() []string {
		resp := e.c.roundTrip(groupRequest(16, 5)).(*kmsg.ListGroupsResponse)
		e.fg.take()
		var ids []string
		for _, g := range resp.Groups {
			ids = append(ids, g.Group)
		}
		return ids
	}
	if got := listed(); !reflect.DeepEqual(got, []string{"g1"}) {
		t.Errorf("ListGroups with Describe on g1: %v", got)
	}
	e.fa.allow(clusterGrant(acl.Describe))
	if got := listed(); !reflect.DeepEqual(got, []string{"g1", "g2", "g3"}) {
		t.Errorf("ListGroups with Describe on the cluster: %v", got)
	}
	e.fa.allow()
	if got := listed(); len(got) != 0 {
		t.Errorf("ListGroups with nothing allowed: %v", got)
	}
}

// orNull is *s, or "<null>".
func orNull(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// TestAuthorizeByID: Metadata and DeleteTopics name topics by id too; a
// topic the principal may not Describe is answered by its id without its
// name, one it may Describe but not Delete with its name.
func TestAuthorizeByID(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(topicGrant(acl.Describe, "ok"), topicGrant(acl.Describe, "other")))
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, id := range []byte{1, 2, 9} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.TopicID = idBytes(id)
		req.Topics = append(req.Topics, mt)
	}
	named := kmsg.NewMetadataRequestTopic()
	named.Topic = kmsg.StringPtr("no")
	req.Topics = append(req.Topics, named)
	resp := e.c.roundTrip(req).(*kmsg.MetadataResponse)
	type entry struct {
		name  string
		id    [16]byte
		code  int16
		parts int
	}
	var got []entry
	for _, rt := range resp.Topics {
		got = append(got, entry{orNull(rt.Topic), rt.TopicID, rt.ErrorCode, len(rt.Partitions)})
	}
	want := []entry{{"ok", idBytes(1), 0, 2}, {"<null>", idBytes(2), topicAuthorizationFailed, 0}, {"<null>", idBytes(9), unknownTopicID, 0}, {"no", [16]byte{}, topicAuthorizationFailed, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Metadata by id: %+v, want %+v", got, want)
	}

	// (The fake has no implication: a real Delete ACL implies Describe.)
	e.fa.allow(topicGrant(acl.Delete, "ok"), topicGrant(acl.Describe, "ok"), topicGrant(acl.Describe, "other"))
	e.takeAll()
	dreq := kmsg.NewPtrDeleteTopicsRequest()
	dreq.SetVersion(6)
	for _, id := range []byte{1, 2, 3} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.TopicID = idBytes(id)
		dreq.Topics = append(dreq.Topics, dt)
	}
	dresp := e.c.roundTrip(dreq).(*kmsg.DeleteTopicsResponse)
	var gotDel []entry
	for _, rt := range dresp.Topics {
		gotDel = append(gotDel, entry{orNull(rt.Topic), rt.TopicID, rt.ErrorCode, 0})
	}
	wantDel := []entry{{"ok", [16]byte{}, 0, 0}, {"<null>", idBytes(2), topicAuthorizationFailed, 0}, {"other", idBytes(3), topicAuthorizationFailed, 0}}
	if !reflect.DeepEqual(gotDel, wantDel) {
		t.Errorf("DeleteTopics by id: %+v, want %+v", gotDel, wantDel)
	}
	var deleted []string
	for _, c := range e.adm.take() {
		deleted = append(deleted, c.(*pb.DeleteTopicsRequest).GetNames()...)
	}
	if !reflect.DeepEqual(deleted, []string{"ok"}) {
		t.Errorf("DeleteTopics asked the controller to delete %v, want ok only", deleted)
	}
}

// TestAuthorizeCluster: InitProducerId needs IdempotentWrite on the
// cluster or Write on a topic (KIP-679); denied, it does not reach the
// backend. ApiVersions and DescribeCluster need no ACL (as in Kafka). A
// transactional id is refused as before, whatever the ACLs.
func TestAuthorizeCluster(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(topicGrant(acl.Read, "ok")))
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if e.c.recv(e.c.send(av), resp, false); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Errorf("ApiVersions: %v with %d keys", kerr.ErrorForCode(resp.ErrorCode), len(resp.ApiKeys))
	}
	for _, v := range []int16{0, 4} {
		if resp := e.c.initProducerID(v, nil, -1, -1); resp.ErrorCode != clusterAuthorizationFailed || resp.ProducerID != -1 {
			t.Errorf("InitProducerId v%d with Read only: %v, id %d", v, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID)
		}
	}
	if resp := e.c.initProducerID(4, kmsg.StringPtr("tx"), -1, -1); resp.ErrorCode != transactionalIDAuthorizationFailed {
		t.Errorf("transactional InitProducerId: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if calls := e.takeAll(); len(calls) != 0 {
		t.Errorf("denied requests reached the backend: %v", calls)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.SetVersion(1)
	if resp := e.c.roundTrip(dc).(*kmsg.DescribeClusterResponse); resp.ErrorCode != 0 || len(resp.Brokers) != 1 {
		t.Errorf("DescribeCluster: %v with %d brokers", kerr.ErrorForCode(resp.ErrorCode), len(resp.Brokers))
	}
	for _, g := range []grant{clusterGrant(acl.IdempotentWrite), topicGrant(acl.Write, "ok")} {
		e.fa.allow(g)
		if resp := e.c.initProducerID(4, nil, -1, -1); resp.ErrorCode != 0 || resp.ProducerID != 1000 {
			t.Errorf("InitProducerId with %v: %v, id %d", g, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID)
		}
	}
}

// TestAuthorizeAcksZero: an acks=0 produce to a denied topic is dropped
// silently, as Kafka drops it: no answer, no append; the allowed topics
// of the same request are appended.
func TestAuthorizeAcksZero(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(topicGrant(acl.Write, "ok"), topicGrant(acl.Describe, "ok")))
	e.c.send(produceReq(7, 0, "no"))
	e.c.send(produceReq(7, 0, "ok", "no"))
	resp := e.c.roundTrip(metadataReq(12, "ok")).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata after acks=0 produces: %+v", resp.Topics)
	}
	var produced [][]string
	for _, c := range e.b.take() {
		if p, ok := c.(*pb.ProduceRequest); ok {
			var topics []string
			for _, pp := range p.GetPartitions() {
				topics = append(topics, pp.GetTopic())
			}
			produced = append(produced, topics)
		}
	}
	if !reflect.DeepEqual(produced, [][]string{{"ok"}}) {
		t.Errorf("the backend appended %v, want one produce to ok", produced)
	}
}

// TestAuthorizePeer: the principal is found once per connection, before
// its first request, within a deadline; each question gets it and the
// client's IP address; and a connection whose principal cannot be found
// is closed before any request, counted as "authentication".
func TestAuthorizePeer(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(topicGrant(acl.Describe, "ok")))
	for range 3 {
		e.c.roundTrip(metadataReq(12, "ok"))
	}
	e.fa.mu.Lock()
	principals, hosts := e.fa.principals, e.fa.hosts
	e.fa.mu.Unlock()
	if principals != 1 || !reflect.DeepEqual(hosts, map[string]bool{"127.0.0.1": true}) {
		t.Errorf("Principal called %d times, hosts %v; want once, 127.0.0.1", principals, hosts)
	}

	e.fa.mu.Lock()
	e.fa.err = errors.New("tls: bad certificate")
	e.fa.mu.Unlock()
	c := dial(t, e.addr)
	if !c.closed() {
		t.Fatal("a connection without a principal was not closed")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		e.obs.mu.Lock()
		n := e.obs.closed["authentication"]
		e.obs.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("closed %v, want one authentication", e.obs.closed)
		}
	}
	// The first connection is still served.
	if resp := e.c.roundTrip(metadataReq(12, "ok")).(*kmsg.MetadataResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Errorf("metadata on the first connection: %+v", resp.Topics)
	}
}

// TestNoAuthorizer: without an Authorizer every connection is
// User:ANONYMOUS and everything is allowed, the ACL APIs included.
func TestNoAuthorizer(t *testing.T) {
	e := startAuthz(t, nil)
	if got := codesOf(e.c.roundTrip(produceReq(9, -1, "ok", "no"))); !reflect.DeepEqual(got, map[string][]int16{"ok": {0}, "no": {0}}) {
		t.Errorf("produce: %v", got)
	}
	e.adm.set(func(a *fakeAdmin) { a.described = &pb.DescribeAclsResponse{} })
	req := kmsg.NewPtrDescribeACLsRequest()
	req.SetVersion(3)
	if resp := e.c.roundTrip(req).(*kmsg.DescribeACLsResponse); resp.ErrorCode != 0 {
		t.Errorf("DescribeAcls: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if asked, n := askedOf(e.takeAll()); n != 2 || !reflect.DeepEqual(asked, []string{"no", "ok"}) {
		t.Errorf("asked %v in %d calls, want produce of both and DescribeAcls", asked, n)
	}
}

// dtpEntry is one topic of a DescribeTopicPartitions answer: its name,
// code and partitions.
type dtpEntry struct {
	name  string
	code  int16
	parts []int32
}

// dtpCursor is a DescribeTopicPartitions cursor.
type dtpCursor struct {
	topic string
	part  int32
}

// dtpOracle is SPEC §5 with authorization, written from the text:
// existing maps each topic to its partition count; listed nil asks for
// every topic; limit is max(min(server limit, request limit), 1).
func dtpOracle(existing map[string]int32, listed []string, allowed func(string) bool, limit int, cur *dtpCursor) ([]dtpEntry, *dtpCursor) {
	invalid := func() ([]dtpEntry, *dtpCursor) {
		var out []dtpEntry
		for _, n := range listed {
			out = append(out, dtpEntry{name: n, code: invalidRequest})
		}
		return out, nil
	}
	if cur != nil && cur.part < 0 {
		return invalid()
	}
	var names []string
	if listed == nil {
		for n := range existing {
			if allowed(n) { // unlisted and denied: skipped
				names = append(names, n)
			}
		}
	} else {
		if cur != nil && !slices.Contains(listed, cur.topic) {
			return invalid()
		}
		for _, n := range listed {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return cur != nil && n < cur.topic })
	slices.Sort(names)
	var out []dtpEntry
	count := 0
	for _, n := range names {
		if count == limit {
			return out, &dtpCursor{n, 0}
		}
		pc, ok := existing[n]
		switch {
		case !allowed(n): // listed and denied
			out = append(out, dtpEntry{name: n, code: topicAuthorizationFailed})
			continue
		case !ok:
			out = append(out, dtpEntry{name: n, code: unknownTopicOrPart})
			continue
		}
		e := dtpEntry{name: n}
		for i := int32(0); i < pc; i++ {
			if cur != nil && n == cur.topic && i < cur.part {
				continue
			}
			if count == limit {
				out = append(out, e)
				return out, &dtpCursor{n, i}
			}
			count++
			e.parts = append(e.parts, i)
		}
		out = append(out, e)
	}
	return out, nil
}

// dtpImage is an image of the existing topics, each partition led by
// broker 1.
func dtpImage(existing map[string]int32) (*metadata.Image, []*pb.MetadataTopic) {
	snap := &pb.MetadataSnapshot{ClusterId: "c", Brokers: []*pb.BrokerRecord{{BrokerId: 1, KafkaHost: "h", KafkaPort: 1}}}
	var md []*pb.MetadataTopic
	for _, n := range slices.Sorted(maps.Keys(existing)) {
		id := idString(byte(len(md) + 1))
		snap.Topics = append(snap.Topics, &pb.TopicRecord{Name: n, TopicId: id, PartitionCount: existing[n]})
		for i := range existing[n] {
			snap.Partitions = append(snap.Partitions, &pb.PartitionRecord{Topic: n, TopicId: id, Partition: i, Replicas: []int32{1}, Isr: []int32{1}, Leader: 1})
		}
		md = append(md, &pb.MetadataTopic{Name: n, TopicId: id})
	}
	return metadata.FromSnapshot(snap), md
}

// dtpAnswer is a DescribeTopicPartitions response as dtpOracle answers.
func dtpAnswer(resp *kmsg.DescribeTopicPartitionsResponse) ([]dtpEntry, *dtpCursor) {
	var out []dtpEntry
	for _, t := range resp.Topics {
		e := dtpEntry{name: orNull(t.Topic), code: t.ErrorCode}
		for _, p := range t.Partitions {
			e.parts = append(e.parts, p.Partition)
		}
		out = append(out, e)
	}
	if c := resp.NextCursor; c != nil {
		return out, &dtpCursor{c.Topic, c.Partition}
	}
	return out, nil
}

// TestAuthorizeDescribeTopicPartitions: with random topics, ACLs, lists
// (names that are prefixes of others, duplicates, unknown names, and a
// name ending in NUL included), limits and cursors, every page of every
// paging is SPEC §5's with authorization exactly: a listed topic denied
// is a TOPIC_AUTHORIZATION_FAILED entry paged as SPEC says, an unlisted
// one is skipped, not counted against the limit (the broker's own limit,
// which the listener does not know). No denied topic is ever asked of the
// admin.
func TestAuthorizeDescribeTopicPartitions(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer())
	pool := []string{"a", "a-", "a.b", "a_", "ab", "b", "b0", "c", "t", "t.x", "zz"}
	rng := rand.New(rand.NewPCG(17, 17))
	pages := 0
	for iter := range 400 {
		existing := map[string]int32{}
		for _, n := range pool {
			if rng.IntN(3) > 0 {
				existing[n] = 1 + rng.Int32N(4)
			}
		}
		img, md := dtpImage(existing)
		serverLimit := 1 + rng.IntN(6)
		e.adm.set(func(a *fakeAdmin) { a.img, a.serverLimit = img, serverLimit })
		e.b.setTopics(md)
		names := append(slices.Clone(pool), "a\x00", "gone")
		allowed := map[string]bool{}
		var grants []grant
		for _, n := range names {
			if rng.IntN(2) == 0 {
				allowed[n] = true
				grants = append(grants, topicGrant(acl.Describe, n))
			}
		}
		e.fa.allow(grants...)
		var listed []string
		if rng.IntN(2) == 0 {
			for range 1 + rng.IntN(7) {
				listed = append(listed, names[rng.IntN(len(names))])
			}
		}
		reqLimit := rng.Int32N(8)
		limit := max(min(serverLimit, int(reqLimit)), 1)
		var cur *dtpCursor
		if rng.IntN(3) == 0 {
			cur = &dtpCursor{names[rng.IntN(len(names))], rng.Int32N(5) - 1}
		}
		for page := 0; ; page++ {
			req := kmsg.NewPtrDescribeTopicPartitionsRequest()
			req.ResponsePartitionLimit = reqLimit
			for _, n := range listed {
				rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
				rt.Topic = n
				req.Topics = append(req.Topics, rt)
			}
			if cur != nil {
				req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: cur.topic, Partition: cur.part}
			}
			got, gotNext := dtpAnswer(e.c.roundTrip(req).(*kmsg.DescribeTopicPartitionsResponse))
			want, wantNext := dtpOracle(existing, listed, func(n string) bool { return allowed[n] }, limit, cur)
			pages++
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotNext, wantNext) {
				t.Fatalf("case %d page %d: topics %q, ACLs %v, listed %q, limit %d (server %d), cursor %+v:\n got %+v next %+v\nwant %+v next %+v",
					iter, page, existing, allowed, listed, limit, serverLimit, cur, got, gotNext, want, wantNext)
			}
			for _, c := range e.takeAll() {
				r, ok := c.(*pb.DescribeTopicPartitionsRequest)
				if !ok {
					continue
				}
				for _, n := range append([]string{r.GetCursor().GetTopicName()}, topicsOf(r)...) {
					if _, exists := existing[n]; exists && !allowed[n] {
						t.Fatalf("case %d: the admin was asked about denied topic %q: %v", iter, n, r)
					}
				}
			}
			if gotNext == nil || page > 100 {
				break
			}
			cur = gotNext
		}
	}
	t.Logf("%d pages", pages)
}

func topicsOf(r *pb.DescribeTopicPartitionsRequest) []string {
	var out []string
	for _, t := range r.GetTopics() {
		out = append(out, t.GetName())
	}
	return out
}

// TestDescribeTopicPartitionsPaging: SPEC §5's paging with ACLs on a
// worked example: over every topic a denied one is skipped and not
// counted; listed, it is an entry (the cursor when the limit ran out just
// before it), the next page starting there.
func TestDescribeTopicPartitionsPaging(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(topicGrant(acl.Describe, "a"), topicGrant(acl.Describe, "c")))
	img, md := dtpImage(map[string]int32{"a": 2, "b": 3, "c": 2})
	e.adm.set(func(a *fakeAdmin) { a.img, a.serverLimit = img, 2 })
	e.b.setTopics(md)
	ask := func(listed []string, cur *dtpCursor) ([]dtpEntry, *dtpCursor) {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit = 100 // the server's 2 wins
		for _, n := range listed {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
		}
		if cur != nil {
			req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: cur.topic, Partition: cur.part}
		}
		return dtpAnswer(e.c.roundTrip(req).(*kmsg.DescribeTopicPartitionsResponse))
	}
	for _, tc := range []struct {
		listed []string
		cur    *dtpCursor
		want   []dtpEntry
		next   *dtpCursor
	}{
		// Every topic: b is skipped; a fills the page, c follows.
		{nil, nil, []dtpEntry{{name: "a", parts: []int32{0, 1}}}, &dtpCursor{"c", 0}},
		{nil, &dtpCursor{"c", 0}, []dtpEntry{{name: "c", parts: []int32{0, 1}}}, nil},
		// A cursor on the denied b starts after it.
		{nil, &dtpCursor{"b", 1}, []dtpEntry{{name: "c", parts: []int32{0, 1}}}, nil},
		// Listed: a fills the page, so the next page starts at b.
		{[]string{"c", "b", "a"}, nil, []dtpEntry{{name: "a", parts: []int32{0, 1}}}, &dtpCursor{"b", 0}},
		{[]string{"c", "b", "a"}, &dtpCursor{"b", 0}, []dtpEntry{{name: "b", code: topicAuthorizationFailed}, {name: "c", parts: []int32{0, 1}}}, nil},
		// b alone: its entry, nothing counted.
		{[]string{"b"}, nil, []dtpEntry{{name: "b", code: topicAuthorizationFailed}}, nil},
	} {
		got, next := ask(tc.listed, tc.cur)
		if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(next, tc.next) {
			t.Errorf("listed %v cursor %+v: %+v next %+v, want %+v next %+v", tc.listed, tc.cur, got, next, tc.want, tc.next)
		}
	}
	for _, c := range e.adm.take() {
		if slices.Contains(topicsOf(c.(*pb.DescribeTopicPartitionsRequest)), "b") {
			t.Errorf("the admin was asked about b: %v", c)
		}
	}

	// A listed name that is a denied topic's placeholder (its name and a
	// NUL: no topic, but a client may send it) is answered on its own,
	// after the denied topic, and a cursor on it leaves the denied topic
	// before it out.
	e.fa.allow(topicGrant(acl.Describe, "a\x00"))
	for _, tc := range []struct {
		cur  *dtpCursor
		want []dtpEntry
	}{
		{nil, []dtpEntry{{name: "a", code: topicAuthorizationFailed}, {name: "a\x00", code: unknownTopicOrPart}}},
		{&dtpCursor{"a", 1}, []dtpEntry{{name: "a", code: topicAuthorizationFailed}, {name: "a\x00", code: unknownTopicOrPart}}},
		{&dtpCursor{"a\x00", 0}, []dtpEntry{{name: "a\x00", code: unknownTopicOrPart}}},
	} {
		if got, next := ask([]string{"a\x00", "a"}, tc.cur); !reflect.DeepEqual(got, tc.want) || next != nil {
			t.Errorf("cursor %+v: %+v next %+v, want %+v", tc.cur, got, next, tc.want)
		}
	}
}

// TestACLAPIs: CreateAcls, DescribeAcls and DeleteAcls, at every version,
// translate to the AdminService's requests (by number; v0's pattern type
// is LITERAL, null names match any) and back (the bindings grouped by
// resource, codes through the errcode table); without Alter or Describe on
// the cluster they are CLUSTER_AUTHORIZATION_FAILED and the admin is not
// asked; a failed call answers its gRPC status' code.
func TestACLAPIs(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(clusterGrant(acl.Alter), clusterGrant(acl.Describe)))
	binding := func(rt pb.AclResourceType, name string, pt pb.AclPatternType, principal string, op pb.AclOperation) *pb.AclBinding {
		return &pb.AclBinding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: pb.AclPermission_ACL_PERMISSION_ALLOW}
	}
	topicT := binding(pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, "t", pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL, "User:bob", pb.AclOperation_ACL_OPERATION_READ)
	topicT2 := binding(pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, "t", pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL, "User:carol", pb.AclOperation_ACL_OPERATION_WRITE)
	groupG := binding(pb.AclResourceType_ACL_RESOURCE_TYPE_GROUP, "g.", pb.AclPatternType_ACL_PATTERN_TYPE_PREFIXED, "User:bob", pb.AclOperation_ACL_OPERATION_READ)
	e.adm.set(func(a *fakeAdmin) {
		a.created = &pb.CreateAclsResponse{Results: []*pb.AclResult{{}, {Error: pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, ErrorMessage: "not concrete"}}}
		a.described = &pb.DescribeAclsResponse{Acls: []*pb.AclBinding{topicT, topicT2, groupG}}
		a.deleted = &pb.DeleteAclsResponse{Results: []*pb.DeleteAclsFilterResult{{Deleted: []*pb.AclBinding{topicT}}, {Error: pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, ErrorMessage: "bad filter"}}}
	})
	for v := int16(0); v <= 3; v++ {
		// CreateAcls.
		cr := kmsg.NewPtrCreateACLsRequest()
		cr.SetVersion(v)
		for _, b := range []*pb.AclBinding{topicT, groupG} {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.Principal, c.Host = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, b.Principal, b.Host
			c.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			c.Operation, c.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			cr.Creations = append(cr.Creations, c)
		}
		cresp := e.c.roundTrip(cr).(*kmsg.CreateACLsResponse)
		want := []kmsg.CreateACLsResponseResult{{}, {ErrorCode: invalidRequest, ErrorMessage: kmsg.StringPtr("not concrete")}}
		if !reflect.DeepEqual(cresp.Results, want) {
			t.Errorf("CreateAcls v%d: %+v, want %+v", v, cresp.Results, want)
		}
		wantG := groupG
		if v == 0 { // no pattern type: LITERAL
			wantG = binding(pb.AclResourceType_ACL_RESOURCE_TYPE_GROUP, "g.", pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL, "User:bob", pb.AclOperation_ACL_OPERATION_READ)
		}
		if got := e.adm.take(); len(got) != 1 || !protoEqual(got[0], &pb.CreateAclsRequest{Creations: []*pb.AclBinding{topicT, wantG}}) {
			t.Errorf("CreateAcls v%d asked %v", v, got)
		}

		// DescribeAcls: null name, principal and host match any.
		dr := kmsg.NewPtrDescribeACLsRequest()
		dr.SetVersion(v)
		dr.ResourceType, dr.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeMatch
		dr.Operation, dr.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		dr.Host = kmsg.StringPtr("10.0.0.1")
		dresp := e.c.roundTrip(dr).(*kmsg.DescribeACLsResponse)
		wantPT := pb.AclPatternType_ACL_PATTERN_TYPE_MATCH
		if v == 0 {
			wantPT = pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL
		}
		wantFilter := &pb.DescribeAclsRequest{Filter: &pb.AclFilter{ResourceType: pb.AclResourceType_ACL_RESOURCE_TYPE_ANY, PatternType: wantPT, Host: "10.0.0.1",
			Operation: pb.AclOperation_ACL_OPERATION_ANY, Permission: pb.AclPermission_ACL_PERMISSION_ANY}}
		if got := e.adm.take(); len(got) != 1 || !protoEqual(got[0], wantFilter) {
			t.Errorf("DescribeAcls v%d asked %v, want %v", v, got, wantFilter)
		}
		wantRes := []kmsg.DescribeACLsResponseResource{
			{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, ACLs: []kmsg.DescribeACLsResponseResourceACL{
				{Principal: "User:bob", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow},
				{Principal: "User:carol", Host: "*", Operation: kmsg.ACLOperationWrite, PermissionType: kmsg.ACLPermissionTypeAllow}}},
			{ResourceType: kmsg.ACLResourceTypeGroup, ResourceName: "g.", ResourcePatternType: kmsg.ACLResourcePatternTypePrefixed, ACLs: []kmsg.DescribeACLsResponseResourceACL{
				{Principal: "User:bob", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}}},
		}
		if v == 0 { // the pattern type is not on the wire: kmsg's default
			wantRes[1].ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if dresp.ErrorCode != 0 || !reflect.DeepEqual(dresp.Resources, wantRes) {
			t.Errorf("DescribeAcls v%d: %v %+v, want %+v", v, kerr.ErrorForCode(dresp.ErrorCode), dresp.Resources, wantRes)
		}

		// DeleteAcls.
		del := kmsg.NewPtrDeleteACLsRequest()
		del.SetVersion(v)
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.Principal = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("t"), kmsg.StringPtr("User:bob")
		f.Operation, f.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		del.Filters = append(del.Filters, f, kmsg.NewDeleteACLsRequestFilter())
		delResp := e.c.roundTrip(del).(*kmsg.DeleteACLsResponse)
		wantDel := []kmsg.DeleteACLsResponseResult{
			{MatchingACLs: []kmsg.DeleteACLsResponseResultMatchingACL{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
				Principal: "User:bob", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}}},
			{ErrorCode: invalidRequest, ErrorMessage: kmsg.StringPtr("bad filter")},
		}
		if !reflect.DeepEqual(delResp.Results, wantDel) {
			t.Errorf("DeleteAcls v%d: %+v, want %+v", v, delResp.Results, wantDel)
		}
		wantDelReq := &pb.DeleteAclsRequest{Filters: []*pb.AclFilter{
			{ResourceType: pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, ResourceName: "t", PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL, Principal: "User:bob",
				Operation: pb.AclOperation_ACL_OPERATION_READ, Permission: pb.AclPermission_ACL_PERMISSION_ALLOW},
			{PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL}}}
		if got := e.adm.take(); len(got) != 1 || !protoEqual(got[0], wantDelReq) {
			t.Errorf("DeleteAcls v%d asked %v, want %v", v, got, wantDelReq)
		}
	}

	// A failed call: its status' code on every result.
	e.adm.set(func(a *fakeAdmin) { a.err = status.Error(codes.Unavailable, "no controller") })
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.SetVersion(3)
	cr.Creations = []kmsg.CreateACLsRequestCreation{kmsg.NewCreateACLsRequestCreation()}
	if resp := e.c.roundTrip(cr).(*kmsg.CreateACLsResponse); len(resp.Results) != 1 || resp.Results[0].ErrorCode != notController || resp.Results[0].ErrorMessage == nil {
		t.Errorf("CreateAcls with the controller away: %+v", resp.Results)
	}
	e.adm.set(func(a *fakeAdmin) { a.err = status.Error(codes.PermissionDenied, "TOPIC_AUTHORIZATION_FAILED: no") })
	dr := kmsg.NewPtrDescribeACLsRequest()
	dr.SetVersion(2)
	if resp := e.c.roundTrip(dr).(*kmsg.DescribeACLsResponse); resp.ErrorCode != topicAuthorizationFailed {
		t.Errorf("DescribeAcls refused by the controller: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	e.adm.take()

	// Denied: nothing reaches the admin.
	e.fa.allow(clusterGrant(acl.Describe))
	cr.Creations = append(cr.Creations, kmsg.NewCreateACLsRequestCreation())
	if resp := e.c.roundTrip(cr).(*kmsg.CreateACLsResponse); len(resp.Results) != 2 || resp.Results[0].ErrorCode != clusterAuthorizationFailed || resp.Results[1].ErrorCode != clusterAuthorizationFailed {
		t.Errorf("CreateAcls without Alter: %+v", resp.Results)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.SetVersion(1)
	del.Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}
	if resp := e.c.roundTrip(del).(*kmsg.DeleteACLsResponse); len(resp.Results) != 1 || resp.Results[0].ErrorCode != clusterAuthorizationFailed {
		t.Errorf("DeleteAcls without Alter: %+v", resp.Results)
	}
	e.fa.allow(clusterGrant(acl.Alter))
	if resp := e.c.roundTrip(dr).(*kmsg.DescribeACLsResponse); resp.ErrorCode != clusterAuthorizationFailed || len(resp.Resources) != 0 {
		t.Errorf("DescribeAcls without Describe: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if got := e.adm.take(); len(got) != 0 {
		t.Errorf("denied ACL requests reached the admin: %v", got)
	}
}

// protoEqual compares a recorded request with want.
func protoEqual(got any, want proto.Message) bool {
	m, ok := got.(proto.Message)
	return ok && proto.Equal(m, want)
}

// TestACLAPIVersions: the ACL APIs are advertised at v0-v3, with the
// admin only.
func TestACLAPIVersions(t *testing.T) {
	e := startAuthz(t, nil)
	s := NewServer(Config{}, e.b, nil)
	for _, key := range []int16{29, 30, 31} {
		if _, ok := s.apis[key]; ok {
			t.Errorf("%s served without an admin", kmsg.NameForKey(key))
		}
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	e.c.recv(e.c.send(req), resp, false)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		if k.ApiKey >= 29 && k.ApiKey <= 31 {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
	}
	if want := map[int16][2]int16{29: {0, 3}, 30: {0, 3}, 31: {0, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ACL APIs advertised %v, want %v", got, want)
	}
}

// TestACLsWithFranzGo: franz-go's admin client creates, describes and
// deletes ACLs through the listener as it would through Kafka.
func TestACLsWithFranzGo(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(clusterGrant(acl.Alter), clusterGrant(acl.Describe)))
	bob := &pb.AclBinding{ResourceType: pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, ResourceName: "t", PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
		Principal: "User:bob", Host: "*", Operation: pb.AclOperation_ACL_OPERATION_READ, Permission: pb.AclPermission_ACL_PERMISSION_ALLOW}
	e.adm.set(func(a *fakeAdmin) {
		a.created = &pb.CreateAclsResponse{Results: []*pb.AclResult{{}}}
		a.described = &pb.DescribeAclsResponse{Acls: []*pb.AclBinding{bob}}
		a.deleted = &pb.DeleteAclsResponse{Results: []*pb.DeleteAclsFilterResult{{Deleted: []*pb.AclBinding{bob}}}}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b := kadm.NewACLs().Allow("User:bob").AllowHosts("*").Topics("t").Operations(kadm.OpRead)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, created)
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 1 || described[0].Described[0].Principal != "User:bob" {
		t.Fatalf("DescribeACLs: %v %+v", err, described)
	}
	deleted, err := adm.DeleteACLs(ctx, b)
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 || deleted[0].Deleted[0].Name != "t" {
		t.Fatalf("DeleteACLs: %v %+v", err, deleted)
	}
	if calls := e.adm.take(); len(calls) != 3 {
		t.Errorf("the admin got %d calls, want create, describe, delete", len(calls))
	}
}

// unloadedBackend is a broker that has not loaded its metadata yet.
type unloadedBackend struct{ fakeBackend }

func (*unloadedBackend) Metadata(context.Context, *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	return nil, metadata.ErrNotLoaded
}

// TestCreateTopicsDefaultRFNeedsMetadata: a topic asking for the default
// replication factor is not created with a guess of one replica by a
// broker that cannot count the cluster's brokers (its metadata not loaded
// yet): the request fails (the connection closes) and nothing reaches the
// controller; an explicit replication factor needs no count.
func TestCreateTopicsDefaultRFNeedsMetadata(t *testing.T) {
	adm := &fakeAdmin{}
	s := NewServer(Config{BrokerID: 1, Logger: slog.New(slog.DiscardHandler)}, &unloadedBackend{}, adm)
	req := createTopicsReq(7, "t")
	req.Topics[0].ReplicationFactor = -1
	if _, err := s.createTopics(t.Context(), req); !errors.Is(err, metadata.ErrNotLoaded) {
		t.Fatalf("CreateTopics with the default replication factor: err %v, want %v", err, metadata.ErrNotLoaded)
	}
	if n := len(adm.take()); n != 0 {
		t.Fatalf("%d requests reached the controller", n)
	}
	if _, err := s.createTopics(t.Context(), createTopicsReq(7, "t")); err != nil {
		t.Fatalf("CreateTopics with replication factor 1: %v", err)
	}
}
