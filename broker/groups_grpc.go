package broker

import (
	"context"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/groupsvc"
)

// groupServer is GroupService (twinctl groups, a mirror's offset sync)
// over the same coordinators as the Kafka listener's group APIs; the
// answers are groupsvc's.
type groupServer struct {
	pb.UnimplementedGroupServiceServer
	b *Broker
}

func (s groupServer) svc() groupsvc.Service {
	b := s.b
	return groupsvc.Service{Host: b.groups, Allowed: b.authz.Allowed, Broker: func(id int32) (string, int32, bool) {
		b.metaMu.Lock()
		reg := b.image.Broker(id)
		b.metaMu.Unlock()
		return reg.GetHost(), reg.GetPort(), reg != nil
	}}
}

func (s groupServer) FindCoordinator(ctx context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	resp, err := s.svc().FindCoordinator(ctx, req)
	return resp, toStatus(err)
}

func (s groupServer) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	resp, err := s.svc().ListGroups(ctx, req)
	return resp, toStatus(err)
}

func (s groupServer) DescribeGroups(ctx context.Context, req *pb.DescribeGroupsRequest) (*pb.DescribeGroupsResponse, error) {
	resp, err := s.svc().DescribeGroups(ctx, req)
	return resp, toStatus(err)
}

func (s groupServer) FetchOffsets(ctx context.Context, req *pb.FetchOffsetsRequest) (*pb.FetchOffsetsResponse, error) {
	resp, err := s.svc().FetchOffsets(ctx, req)
	return resp, toStatus(err)
}

func (s groupServer) CommitOffsets(ctx context.Context, req *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	resp, err := s.svc().CommitOffsets(ctx, req)
	return resp, toStatus(err)
}

func (s groupServer) DeleteGroups(ctx context.Context, req *pb.DeleteGroupsRequest) (*pb.DeleteGroupsResponse, error) {
	resp, err := s.svc().DeleteGroups(ctx, req)
	return resp, toStatus(err)
}
