package kafka

import (
	"context"

	"github.com/twinlog/twinlog/group"
)

// Groups is the group coordinator behind the listener: the broker's host
// of the group.Coordinators of the __consumer_offsets partitions it leads
// (issue 16). The listener only translates between Kafka's messages, at
// every served version, and these calls; every decision (membership,
// generations, offsets, which broker coordinates a group) is the host's
// and the coordinator's.
//
// Each call returns the coordinator's answer, which carries Kafka's error
// codes (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ... for a group
// this broker does not coordinate). A call returns a nil answer and a nil
// error when Kafka would never answer the request (group.Superseded: a
// newer JoinGroup or SyncGroup of the same member replaced it): the
// listener sends nothing. An error means no answer came before ctx ended
// (the request's time ran out, or the server is closing).
type Groups interface {
	// FindCoordinator returns the coordinator of a group id: the leader of
	// its __consumer_offsets partition and that broker's Kafka address, or
	// an error code (COORDINATOR_NOT_AVAILABLE while there is none,
	// INVALID_REQUEST for a key type other than group) with a message.
	FindCoordinator(ctx context.Context, keyType int8, key string) (Coordinator, error)
	JoinGroup(ctx context.Context, req group.JoinGroupRequest) (*group.JoinGroupResponse, error)
	SyncGroup(ctx context.Context, req group.SyncGroupRequest) (*group.SyncGroupResponse, error)
	Heartbeat(ctx context.Context, req group.HeartbeatRequest) (*group.HeartbeatResponse, error)
	LeaveGroup(ctx context.Context, req group.LeaveGroupRequest) (*group.LeaveGroupResponse, error)
	OffsetCommit(ctx context.Context, req group.OffsetCommitRequest) (*group.OffsetCommitResponse, error)
	// OffsetFetch answers one group; a v8+ request's groups are asked one
	// call each.
	OffsetFetch(ctx context.Context, req group.OffsetFetchRequest) (*group.OffsetFetchResponse, error)
	// ListGroups lists the groups of every coordinator on this broker
	// (Kafka clients ask every broker and merge).
	ListGroups(ctx context.Context, req group.ListGroupsRequest) (*group.ListGroupsResponse, error)
	// DescribeGroups describes groups in the request's order; a group
	// this broker does not coordinate has NOT_COORDINATOR.
	DescribeGroups(ctx context.Context, groupIDs []string) ([]group.DescribedGroup, error)
	// DeleteGroups deletes groups; results in the request's order.
	DeleteGroups(ctx context.Context, groupIDs []string) (*group.DeleteGroupsResponse, error)
	OffsetDelete(ctx context.Context, req group.OffsetDeleteRequest) (*group.OffsetDeleteResponse, error)
}

// Coordinator is FindCoordinator's answer for one key.
type Coordinator struct {
	NodeID    int32
	Host      string
	Port      int32
	ErrorCode group.ErrorCode
	Message   string
}
