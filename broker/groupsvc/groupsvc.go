// Package groupsvc answers GroupService (twinctl groups, a mirror's offset
// sync) from a broker's group coordinators (broker/coord's Host): the one
// translation between GroupService's messages and the coordinators', which
// the broker's gRPC server and the simulator's brokers both serve. The
// Kafka listener's group APIs reach the same coordinators through
// broker/kafka.
package groupsvc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/coord"
	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/group"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
)

// Service answers GroupService's requests.
type Service struct {
	// Host is the broker's coordinators; nil: the broker runs none (it has
	// no Kafka listener) and answers so.
	Host *coord.Host
	// Broker is a registered broker's GroupService address
	// (FindCoordinator's answer); ok false if the broker is not registered.
	Broker func(id int32) (host string, port int32, ok bool)
	// Allowed reports whether the caller (ctx's principal) may do need;
	// nil allows everything. ListGroups lists only the groups the caller may
	// describe, FetchOffsets only the topics (as Kafka's answers do).
	Allowed func(ctx context.Context, need authz.Need) bool
}

// Code is the enum value of a coordinator's (Kafka) code, and a message
// naming the Kafka code when the enum has no value for it.
func Code(k group.ErrorCode) (pb.ErrorCode, string) {
	c, ok := errcode.FromKafka(int16(k))
	if !ok {
		return c, "group coordinator answered " + k.String()
	}
	return c, ""
}

// noCoordinators answers every group request of a broker without a Kafka
// listener, which runs no coordinator.
const noCoordinators = "this broker has no Kafka listener and coordinates no groups"

func (s Service) allowed(ctx context.Context, need authz.Need) bool {
	return s.Allowed == nil || s.Allowed(ctx, need)
}

// FindCoordinator names the coordinator of a group.
func (s Service) FindCoordinator(ctx context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	if s.Host == nil {
		return &pb.FindCoordinatorResponse{Error: pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, ErrorMessage: noCoordinators, NodeId: -1}, nil
	}
	c, err := s.Host.FindCoordinator(ctx, 0, req.GetGroupId())
	if err != nil {
		return nil, err
	}
	if c.ErrorCode != group.None {
		code, msg := Code(c.ErrorCode)
		if c.Message != "" {
			msg = c.Message
		}
		return &pb.FindCoordinatorResponse{Error: code, ErrorMessage: msg, NodeId: -1}, nil
	}
	host, port, ok := s.Broker(c.NodeID)
	if !ok {
		return &pb.FindCoordinatorResponse{Error: pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
			ErrorMessage: "the coordinator is not registered", NodeId: -1}, nil
	}
	return &pb.FindCoordinatorResponse{NodeId: c.NodeID, Host: host, Port: port}, nil
}

// ListGroups lists the groups this broker coordinates that the caller may
// describe.
func (s Service) ListGroups(ctx context.Context, _ *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	if s.Host == nil {
		return &pb.ListGroupsResponse{}, nil // no coordinator: no groups here
	}
	r, err := s.Host.ListGroups(ctx, group.ListGroupsRequest{})
	if err != nil {
		return nil, err
	}
	resp := &pb.ListGroupsResponse{}
	resp.Error, resp.ErrorMessage = Code(r.ErrorCode)
	for _, g := range r.Groups {
		if !s.allowed(ctx, authz.Need{Op: acl.Describe, Type: acl.Group, Name: g.GroupID}) {
			continue
		}
		resp.Groups = append(resp.Groups, &pb.ListedGroup{GroupId: g.GroupID, ProtocolType: g.ProtocolType, State: g.GroupState})
	}
	return resp, nil
}

// DescribeGroups describes groups in the request's order; a consumer
// group's member assignments are decoded.
func (s Service) DescribeGroups(ctx context.Context, req *pb.DescribeGroupsRequest) (*pb.DescribeGroupsResponse, error) {
	resp := &pb.DescribeGroupsResponse{}
	if s.Host == nil {
		for _, id := range req.GetGroupIds() {
			resp.Groups = append(resp.Groups, &pb.GroupDescription{GroupId: id, Error: pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, ErrorMessage: noCoordinators})
		}
		return resp, nil
	}
	ds, err := s.Host.DescribeGroups(ctx, req.GetGroupIds())
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		g := &pb.GroupDescription{GroupId: d.GroupID, State: d.GroupState, ProtocolType: d.ProtocolType, Protocol: d.ProtocolData}
		g.Error, g.ErrorMessage = Code(d.ErrorCode)
		for _, m := range d.Members {
			gm := &pb.GroupMemberDescription{MemberId: m.MemberID, ClientId: m.ClientID, ClientHost: m.ClientHost}
			if m.GroupInstanceID != nil {
				gm.GroupInstanceId = *m.GroupInstanceID
			}
			if d.ProtocolType == "consumer" {
				gm.Assignment = consumerAssignment(m.MemberAssignment)
			}
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// consumerAssignment decodes a consumer group member's assignment (Kafka's
// ConsumerProtocolAssignment); nil if it does not decode.
func consumerAssignment(b []byte) []*pb.TopicPartitions {
	if len(b) == 0 {
		return nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil
	}
	out := make([]*pb.TopicPartitions, 0, len(a.Topics))
	for _, t := range a.Topics {
		out = append(out, &pb.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
	}
	return out
}

// FetchOffsets answers a group's committed offsets of the topics the
// caller may describe.
func (s Service) FetchOffsets(ctx context.Context, req *pb.FetchOffsetsRequest) (*pb.FetchOffsetsResponse, error) {
	if s.Host == nil {
		return &pb.FetchOffsetsResponse{Error: pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, ErrorMessage: noCoordinators}, nil
	}
	r, err := s.Host.OffsetFetch(ctx, group.OffsetFetchRequest{GroupID: req.GetGroupId()})
	if err != nil {
		return nil, err
	}
	resp := &pb.FetchOffsetsResponse{}
	resp.Error, resp.ErrorMessage = Code(r.ErrorCode)
	for _, t := range r.Topics {
		if !s.allowed(ctx, authz.Need{Op: acl.Describe, Type: acl.Topic, Name: t.Name}) {
			continue // Kafka's OffsetFetch of all topics leaves these out
		}
		for _, p := range t.Partitions {
			o := &pb.CommittedOffset{Topic: t.Name, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata}
			o.Error, _ = Code(p.ErrorCode)
			resp.Offsets = append(resp.Offsets, o)
		}
	}
	return resp, nil
}

// adminCommitVersion is the OffsetCommit version of an administrator's
// commit: before v9, so that a commit to a new group creates it (Kafka's
// AdminClient sends v8 for AlterConsumerGroupOffsets).
const adminCommitVersion = 8

// CommitOffsets commits offsets as an administrator (no member, no
// generation: a group with members refuses it), waiting for the answer.
func (s Service) CommitOffsets(ctx context.Context, req *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	return kafka.Begin(ctx, func(done func(*pb.CommitOffsetsResponse, error)) func() { return s.StartCommitOffsets(req, done) })()
}

// StartCommitOffsets is CommitOffsets' callback form: the commit reaches
// the coordinator before it returns, done gets the answer once, unless
// cancel is called first.
func (s Service) StartCommitOffsets(req *pb.CommitOffsetsRequest, done func(*pb.CommitOffsetsResponse, error)) (cancel func()) {
	resp := &pb.CommitOffsetsResponse{}
	fail := func(code pb.ErrorCode) *pb.CommitOffsetsResponse {
		for _, o := range req.GetOffsets() {
			resp.Results = append(resp.Results, &pb.CommittedOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(), Error: code})
		}
		return resp
	}
	if s.Host == nil {
		done(fail(pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR), nil)
		return func() {}
	}
	creq := group.OffsetCommitRequest{Version: adminCommitVersion, GroupID: req.GetGroupId(), GenerationID: -1, RetentionTimeMs: -1}
	index := map[string]int{}
	for _, o := range req.GetOffsets() {
		i, ok := index[o.GetTopic()]
		if !ok {
			i = len(creq.Topics)
			index[o.GetTopic()] = i
			creq.Topics = append(creq.Topics, group.CommitTopic{Name: o.GetTopic()})
		}
		md := o.GetMetadata()
		creq.Topics[i].Partitions = append(creq.Topics[i].Partitions, group.CommitPartition{
			Partition: o.GetPartition(), Offset: o.GetOffset(), LeaderEpoch: o.GetLeaderEpoch(), Metadata: &md,
		})
	}
	return s.Host.StartOffsetCommit(creq, func(r *group.OffsetCommitResponse, err error) {
		switch {
		case err != nil:
			done(nil, err)
			return
		case r == nil:
			done(fail(pb.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR), nil) // commits are never superseded
			return
		}
		codes := map[twinlog.TopicPartition]group.ErrorCode{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes[twinlog.TopicPartition{Topic: t.Name, Partition: p.Partition}] = p.ErrorCode
			}
		}
		for _, o := range req.GetOffsets() {
			c, _ := Code(codes[twinlog.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}])
			resp.Results = append(resp.Results, &pb.CommittedOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(), Error: c})
		}
		done(resp, nil)
	})
}

// DeleteGroups deletes groups; results in the request's order.
func (s Service) DeleteGroups(ctx context.Context, req *pb.DeleteGroupsRequest) (*pb.DeleteGroupsResponse, error) {
	resp := &pb.DeleteGroupsResponse{}
	if s.Host == nil {
		for _, id := range req.GetGroupIds() {
			resp.Results = append(resp.Results, &pb.GroupResult{GroupId: id, Error: pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, ErrorMessage: noCoordinators})
		}
		return resp, nil
	}
	r, err := s.Host.DeleteGroups(ctx, req.GetGroupIds())
	if err != nil {
		return nil, err
	}
	for _, g := range r.Results {
		gr := &pb.GroupResult{GroupId: g.GroupID}
		gr.Error, gr.ErrorMessage = Code(g.ErrorCode)
		resp.Results = append(resp.Results, gr)
	}
	return resp, nil
}
