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
	// StartOffsetCommit hands a commit to its coordinator before it
	// returns (a connection's commits reach it in order) and calls done
	// once with the answer, unless cancel is called first.
	StartOffsetCommit(req group.OffsetCommitRequest, done func(*group.OffsetCommitResponse, error)) (cancel func())
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

// Begin starts a request of callback form (start calls done once with its
// outcome, unless the cancel it returns is called first) and returns the
// wait for the outcome: ctx ending first cancels the request and answers
// ctx's error. Calling the wait is what waits; starting does not.
func Begin[T any](ctx context.Context, start func(done func(T, error)) (cancel func())) (wait func() (T, error)) {
	type result struct {
		t   T
		err error
	}
	ch := make(chan result, 1)
	cancel := start(func(t T, err error) { ch <- result{t, err} })
	return func() (T, error) {
		select {
		case r := <-ch:
			return r.t, r.err
		case <-ctx.Done():
			cancel()
			var zero T
			return zero, ctx.Err()
		}
	}
}
