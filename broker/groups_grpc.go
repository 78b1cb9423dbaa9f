package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/group"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
)

// groupServer is GroupService (twinctl groups, a mirror's offset sync)
// over the same coordinators as the Kafka listener's group APIs.
type groupServer struct {
	pb.UnimplementedGroupServiceServer
	b *Broker
}

// groupCode is the enum value of a coordinator's (Kafka) code, and a
// message naming the Kafka code when the enum has no value for it.
func groupCode(k group.ErrorCode) (pb.ErrorCode, string) {
	c, ok := errcode.FromKafka(int16(k))
	if !ok {
		return c, "group coordinator answered " + k.String()
	}
	return c, ""
}

// noCoordinators answers every group request of a broker without a Kafka
// listener, which runs no coordinator.
const noCoordinators = "this broker has no Kafka listener and coordinates no groups"

func (s groupServer) FindCoordinator(ctx context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	b := s.b
	if b.groups == nil {
		return &pb.FindCoordinatorResponse{Error: pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, ErrorMessage: noCoordinators, NodeId: -1}, nil
	}
	c, err := b.groups.FindCoordinator(ctx, 0, req.GetGroupId())
	if err != nil {
		return nil, toStatus(err)
	}
	if c.ErrorCode != group.None {
		code, msg := groupCode(c.ErrorCode)
		if c.Message != "" {
			msg = c.Message
		}
		return &pb.FindCoordinatorResponse{Error: code, ErrorMessage: msg, NodeId: -1}, nil
	}
	b.metaMu.Lock()
	reg := b.image.Broker(c.NodeID)
	b.metaMu.Unlock()
	if reg == nil {
		return &pb.FindCoordinatorResponse{Error: pb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
			ErrorMessage: "the coordinator is not registered", NodeId: -1}, nil
	}
	return &pb.FindCoordinatorResponse{NodeId: c.NodeID, Host: reg.GetHost(), Port: reg.GetPort()}, nil
}

func (s groupServer) ListGroups(ctx context.Context, _ *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	b := s.b
	if b.groups == nil {
		return &pb.ListGroupsResponse{}, nil // no coordinator: no groups here
	}
	r, err := b.groups.ListGroups(ctx, group.ListGroupsRequest{})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.ListGroupsResponse{}
	resp.Error, resp.ErrorMessage = groupCode(r.ErrorCode)
	for _, g := range r.Groups {
		// Only the groups the caller may describe (Kafka's ListGroups).
		if !b.authz.Allowed(ctx, authz.Need{Op: acl.Describe, Type: acl.Group, Name: g.GroupID}) {
			continue
		}
		resp.Groups = append(resp.Groups, &pb.ListedGroup{GroupId: g.GroupID, ProtocolType: g.ProtocolType, State: g.GroupState})
	}
	return resp, nil
}

func (s groupServer) DescribeGroups(ctx context.Context, req *pb.DescribeGroupsRequest) (*pb.DescribeGroupsResponse, error) {
	b := s.b
	resp := &pb.DescribeGroupsResponse{}
	if b.groups == nil {
		for _, id := range req.GetGroupIds() {
			resp.Groups = append(resp.Groups, &pb.GroupDescription{GroupId: id, Error: pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, ErrorMessage: noCoordinators})
		}
		return resp, nil
	}
	ds, err := b.groups.DescribeGroups(ctx, req.GetGroupIds())
	if err != nil {
		return nil, toStatus(err)
	}
	for _, d := range ds {
		g := &pb.GroupDescription{GroupId: d.GroupID, State: d.GroupState, ProtocolType: d.ProtocolType, Protocol: d.ProtocolData}
		g.Error, g.ErrorMessage = groupCode(d.ErrorCode)
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

func (s groupServer) FetchOffsets(ctx context.Context, req *pb.FetchOffsetsRequest) (*pb.FetchOffsetsResponse, error) {
	b := s.b
	if b.groups == nil {
		return &pb.FetchOffsetsResponse{Error: pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, ErrorMessage: noCoordinators}, nil
	}
	r, err := b.groups.OffsetFetch(ctx, group.OffsetFetchRequest{GroupID: req.GetGroupId()})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.FetchOffsetsResponse{}
	resp.Error, resp.ErrorMessage = groupCode(r.ErrorCode)
	describable := b.describable(ctx)
	for _, t := range r.Topics {
		if describable != nil && !describable(t.Name) {
			continue // Kafka's OffsetFetch of all topics leaves these out
		}
		for _, p := range t.Partitions {
			o := &pb.CommittedOffset{Topic: t.Name, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata}
			o.Error, _ = groupCode(p.ErrorCode)
			resp.Offsets = append(resp.Offsets, o)
		}
	}
	return resp, nil
}

// adminCommitVersion is the OffsetCommit version of an administrator's
// commit: before v9, so that a commit to a new group creates it (Kafka's
// AdminClient sends v8 for AlterConsumerGroupOffsets).
const adminCommitVersion = 8

func (s groupServer) CommitOffsets(ctx context.Context, req *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	b := s.b
	resp := &pb.CommitOffsetsResponse{}
	fail := func(code pb.ErrorCode) *pb.CommitOffsetsResponse {
		for _, o := range req.GetOffsets() {
			resp.Results = append(resp.Results, &pb.CommittedOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(), Error: code})
		}
		return resp
	}
	if b.groups == nil {
		return fail(pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR), nil
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
	r, err := b.groups.OffsetCommit(ctx, creq)
	if err != nil {
		return nil, toStatus(err)
	}
	if r == nil {
		return fail(pb.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR), nil // commits are never superseded
	}
	codes := map[twinlog.TopicPartition]group.ErrorCode{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			codes[twinlog.TopicPartition{Topic: t.Name, Partition: p.Partition}] = p.ErrorCode
		}
	}
	for _, o := range req.GetOffsets() {
		c, _ := groupCode(codes[twinlog.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}])
		resp.Results = append(resp.Results, &pb.CommittedOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(), Error: c})
	}
	return resp, nil
}

func (s groupServer) DeleteGroups(ctx context.Context, req *pb.DeleteGroupsRequest) (*pb.DeleteGroupsResponse, error) {
	b := s.b
	resp := &pb.DeleteGroupsResponse{}
	if b.groups == nil {
		for _, id := range req.GetGroupIds() {
			resp.Results = append(resp.Results, &pb.GroupResult{GroupId: id, Error: pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, ErrorMessage: noCoordinators})
		}
		return resp, nil
	}
	r, err := b.groups.DeleteGroups(ctx, req.GetGroupIds())
	if err != nil {
		return nil, toStatus(err)
	}
	for _, g := range r.Results {
		gr := &pb.GroupResult{GroupId: g.GroupID}
		gr.Error, gr.ErrorMessage = groupCode(g.ErrorCode)
		resp.Results = append(resp.Results, gr)
	}
	return resp, nil
}
