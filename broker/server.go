package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"net"
	"slices"

	"google.golang.org/grpc"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/scram"
)

// server.go: gRPC handlers only decode, call the Broker, encode and map
// errors.

func registerServices(s *grpc.Server, b *Broker) {
	pb.RegisterProduceServiceServer(s, produceServer{b: b})
	pb.RegisterFetchServiceServer(s, fetchServer{b: b})
	pb.RegisterReplicationServiceServer(s, replicationServer{b: b})
	pb.RegisterAdminServiceServer(s, adminServer{b: b})
	pb.RegisterMirrorSourceServiceServer(s, mirrorSourceServer{b: b})
	pb.RegisterGroupServiceServer(s, groupServer{b: b})
}

type produceServer struct {
	pb.UnimplementedProduceServiceServer
	b *Broker
}

func (s produceServer) Produce(ctx context.Context, req *pb.ProduceRequest) (*pb.ProduceResponse, error) {
	resp, err := s.b.Produce(ctx, req)
	return resp, toStatus(err)
}

func (s produceServer) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	resp, err := s.b.InitProducerId(ctx, req)
	return resp, toStatus(err)
}

type fetchServer struct {
	pb.UnimplementedFetchServiceServer
	b *Broker
}

func (s fetchServer) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	resp, err := s.b.fetch(ctx, req, pooledRead)
	return resp, toStatus(err)
}

func (s fetchServer) ListOffsets(ctx context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	resp, err := s.b.ListOffsets(ctx, req)
	return resp, toStatus(err)
}

func (s fetchServer) OffsetForLeaderEpoch(ctx context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	resp, err := s.b.OffsetForLeaderEpoch(ctx, req)
	return resp, toStatus(err)
}

func (s fetchServer) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	resp, err := s.b.Metadata(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	if describable := s.b.describable(ctx); describable != nil {
		// All topics: only the describable ones; listed ones the caller may
		// not describe: TOPIC_AUTHORIZATION_FAILED, existing or not.
		all := len(req.GetTopics()) == 0
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t *pb.MetadataTopic) bool {
			if describable(t.GetName()) {
				return false
			}
			if !all {
				*t = pb.MetadataTopic{Name: t.GetName(), Error: pb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED}
			}
			return all
		})
	}
	return resp, nil
}

// describable says which topics the caller of ctx may describe; nil with
// the authorizer off (every topic).
func (b *Broker) describable(ctx context.Context) func(topic string) bool {
	if !b.authz.Enabled() {
		return nil
	}
	return func(topic string) bool {
		return b.authz.Allowed(ctx, authz.Need{Op: acl.Describe, Type: acl.Topic, Name: topic})
	}
}

type replicationServer struct {
	pb.UnimplementedReplicationServiceServer
	b *Broker
}

func (s replicationServer) AppendInternal(ctx context.Context, req *pb.AppendInternalRequest) (*pb.AppendInternalResponse, error) {
	resp, err := s.b.AppendInternal(ctx, req)
	return resp, toStatus(err)
}

func (s replicationServer) GetReplicaLogInfo(ctx context.Context, req *pb.GetReplicaLogInfoRequest) (*pb.GetReplicaLogInfoResponse, error) {
	resp, err := s.b.GetReplicaLogInfo(ctx, req)
	return resp, toStatus(err)
}

// adminServer serves DescribeTopicPartitions from the broker's metadata
// (SPEC §5) and forwards the rest to the controller.
type adminServer struct {
	pb.UnimplementedAdminServiceServer
	b *Broker
}

func (s adminServer) admin() (pb.AdminServiceClient, error) {
	c, err := s.b.conn(s.b.cfg.ControllerAddr)
	if err != nil {
		return nil, toStatus(err)
	}
	return pb.NewAdminServiceClient(c), nil
}

// DescribeTopicPartitions pages the image (SPEC §5) for a gRPC caller: only
// the topics it may describe.
func (s adminServer) DescribeTopicPartitions(ctx context.Context, req *pb.DescribeTopicPartitionsRequest) (*pb.DescribeTopicPartitionsResponse, error) {
	return s.b.describeTopicPartitions(req, s.b.describable(ctx)), nil
}

func (b *Broker) describeTopicPartitions(req *pb.DescribeTopicPartitionsRequest, describable func(string) bool) *pb.DescribeTopicPartitionsResponse {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.image.DescribeTopicPartitionsFor(req, b.cfg.MaxRequestPartitionSizeLimit, describable)
}

// kafkaAdmin is the Kafka listener's Admin: the gRPC admin service's
// forwarding, but DescribeTopicPartitions unfiltered, because the listener
// authorizes its connection's principal itself and asks only for what that
// principal may describe (the context carries no gRPC caller).
type kafkaAdmin struct{ adminServer }

func (k kafkaAdmin) DescribeTopicPartitions(_ context.Context, req *pb.DescribeTopicPartitionsRequest) (*pb.DescribeTopicPartitionsResponse, error) {
	return k.b.describeTopicPartitions(req, nil), nil
}

// kafkaSASL is the Kafka listener's SASL configuration (nil without
// mechanisms): credentials from the metadata image.
func (b *Broker) kafkaSASL() *kafka.SASL {
	if len(b.cfg.SASLMechanisms) == 0 {
		return nil
	}
	return &kafka.SASL{Mechanisms: b.cfg.SASLMechanisms, Lookup: b.scramCredential, Random: rand.Reader, MaxSessionLifetime: b.cfg.SASLMaxSessionLifetime}
}

// scramCredential looks a user's SCRAM credential up in the image.
func (b *Broker) scramCredential(user string, m scram.Mechanism) (scram.Credential, bool) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return metadata.ScramLookup(b.image)(user, m)
}

// kafkaListener is the Kafka listener with TLS: with SASL, a client
// certificate is asked for but not required (SASL authenticates the
// clients without one).
func (b *Broker) kafkaListener() net.Listener {
	if len(b.cfg.SASLMechanisms) > 0 {
		return b.tls.ListenClientAuth(b.klis, tls.VerifyClientCertIfGiven)
	}
	return b.tls.Listen(b.klis)
}

// kafkaAuthorizer is the Kafka listener's Authorizer: the connection's
// principal from its TLS certificate (User:ANONYMOUS in plaintext), the
// decisions from the broker's authorizer.
type kafkaAuthorizer struct{ b *Broker }

func (k kafkaAuthorizer) Principal(ctx context.Context, c net.Conn) (string, error) {
	return k.b.tls.ConnPrincipal(ctx, c)
}

func (k kafkaAuthorizer) Allowed(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool {
	return k.b.authz.AllowedAs(principal, host, authz.Need{Op: op, Type: rt, Name: name})
}

func (k kafkaAuthorizer) IdempotentProducer(principal, host string) bool {
	return k.b.authz.IdempotentProducerAs(principal, host)
}

func (s adminServer) CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.CreateTopics(ctx, req)
}

func (s adminServer) DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.DeleteTopics(ctx, req)
}

func (s adminServer) DescribeConfigs(ctx context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.DescribeConfigs(ctx, req)
}

func (s adminServer) AlterConfigs(ctx context.Context, req *pb.AlterConfigsRequest) (*pb.AlterConfigsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.AlterConfigs(ctx, req)
}

func (s adminServer) CreateAcls(ctx context.Context, req *pb.CreateAclsRequest) (*pb.CreateAclsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.CreateAcls(ctx, req)
}

func (s adminServer) DeleteAcls(ctx context.Context, req *pb.DeleteAclsRequest) (*pb.DeleteAclsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.DeleteAcls(ctx, req)
}

func (s adminServer) DescribeAcls(ctx context.Context, req *pb.DescribeAclsRequest) (*pb.DescribeAclsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.DescribeAcls(ctx, req)
}

func (s adminServer) AlterUserScramCredentials(ctx context.Context, req *pb.AlterUserScramCredentialsRequest) (*pb.AlterUserScramCredentialsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.AlterUserScramCredentials(ctx, req)
}

func (s adminServer) DescribeUserScramCredentials(ctx context.Context, req *pb.DescribeUserScramCredentialsRequest) (*pb.DescribeUserScramCredentialsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.DescribeUserScramCredentials(ctx, req)
}

func (s adminServer) ListBrokers(ctx context.Context, req *pb.ListBrokersRequest) (*pb.ListBrokersResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.ListBrokers(ctx, req)
}

func (s adminServer) ElectLeaders(ctx context.Context, req *pb.ElectLeadersRequest) (*pb.ElectLeadersResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.ElectLeaders(ctx, req)
}

func (s adminServer) AlterPartitionReassignments(ctx context.Context, req *pb.AlterPartitionReassignmentsRequest) (*pb.AlterPartitionReassignmentsResponse, error) {
	a, err := s.admin()
	if err != nil {
		return nil, err
	}
	return a.AlterPartitionReassignments(ctx, req)
}
