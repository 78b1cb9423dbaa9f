package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/group"
)

// Kafka codes the host answers itself.
const (
	// invalidRequest refuses a FindCoordinator for a transaction
	// coordinator: twinlog has no transactions.
	invalidRequest group.ErrorCode = 42
	// keyTypeGroup is FindCoordinator's key type of a consumer group.
	keyTypeGroup int8 = 0
)

// FindCoordinator answers the leader of the group's __consumer_offsets
// partition. While the topic does not exist it asks the controller to
// create it and answers COORDINATOR_NOT_AVAILABLE (the client asks again),
// as Kafka does on the first FindCoordinator.
func (h *Host) FindCoordinator(ctx context.Context, keyType int8, key string) (kafka.Coordinator, error) {
	na := func(format string, args ...any) (kafka.Coordinator, error) {
		return kafka.Coordinator{NodeID: -1, Port: -1, ErrorCode: group.CoordinatorNotAvailable, Message: fmt.Sprintf(format, args...)}, nil
	}
	if keyType != keyTypeGroup {
		return kafka.Coordinator{NodeID: -1, Port: -1, ErrorCode: invalidRequest,
			Message: fmt.Sprintf("key type %d: twinlog coordinates consumer groups only (no transactions)", keyType)}, nil
	}
	n, ok := h.env.Partitions()
	if !ok {
		if err := h.env.CreateTopic(ctx); err != nil {
			h.log.Info("cannot create __consumer_offsets", "err", err)
			return na("the group coordinators' topic cannot be created yet: %v", err)
		}
		if n, ok = h.env.Partitions(); !ok {
			return na("the group coordinators' topic is being created")
		}
	}
	c, ok := h.env.Coordinator(group.PartitionFor(key, n))
	if !ok {
		return na("the group's coordinator partition has no leader")
	}
	return c, nil
}

// answer turns a shard call's outcome into the typed answer: the
// coordinator's, nil for a superseded request, notCoordinator's when the
// shard unloaded without answering.
func answer[T group.ResponseBody](body group.ResponseBody, err error, notCoordinator func() T) (T, error) {
	var zero T
	switch {
	case errors.Is(err, errUnloaded):
		return notCoordinator(), nil
	case err != nil:
		return zero, err
	case body == nil:
		return zero, nil
	}
	t, ok := body.(T)
	if !ok {
		return zero, fmt.Errorf("coord: answer %T to a %T request", body, zero)
	}
	return t, nil
}

// The requests whose answer may wait (for a rebalance, for an append to
// be durable) have two forms: Start… calls done with the answer, for a
// host that cannot block (the simulator), and the blocking form of
// kafka.Groups waits for it. done is called once unless cancel is called
// first, possibly before Start… returns, and with a shard's lock held:
// it must not call the Host. A nil answer with a nil error is a
// superseded request (no answer is sent); an error is a bug.

// startCall runs one coordinator call on groupID's shard and hands done
// the typed answer (nc's when this broker does not coordinate the group,
// or the shard unloaded without answering).
func startCall[T group.ResponseBody](h *Host, groupID string, fn func(c *group.Coordinator, nowMs int64, ref group.Ref), nc func() T, done func(T, error)) (cancel func()) {
	s := h.shardFor(groupID)
	if s == nil {
		done(nc(), nil)
		return func() {}
	}
	return s.start(func(now int64, ref group.Ref) { fn(s.c, now, ref) }, func(body group.ResponseBody) {
		b, err := bodyOf(body)
		done(answer(b, err, nc))
	})
}

// wait is the blocking form of a Start… call.
func wait[T any](ctx context.Context, start func(done func(T, error)) (cancel func())) (T, error) {
	return kafka.Begin(ctx, start)()
}

// JoinGroup implements kafka.Groups.
func (h *Host) JoinGroup(ctx context.Context, req group.JoinGroupRequest) (*group.JoinGroupResponse, error) {
	return wait(ctx, func(done func(*group.JoinGroupResponse, error)) func() { return h.StartJoinGroup(req, done) })
}

// StartJoinGroup is JoinGroup's callback form.
func (h *Host) StartJoinGroup(req group.JoinGroupRequest, done func(*group.JoinGroupResponse, error)) (cancel func()) {
	nc := func() *group.JoinGroupResponse {
		return &group.JoinGroupResponse{ErrorCode: group.NotCoordinator, GenerationID: -1, MemberID: req.MemberID}
	}
	return startCall(h, req.GroupID, func(c *group.Coordinator, now int64, ref group.Ref) { c.JoinGroup(now, ref, req) }, nc,
		func(resp *group.JoinGroupResponse, err error) {
			if resp != nil && resp.ErrorCode == group.None && resp.MemberID == resp.Leader {
				h.cfg.Observer.Rebalanced()
			}
			done(resp, err)
		})
}

// SyncGroup implements kafka.Groups.
func (h *Host) SyncGroup(ctx context.Context, req group.SyncGroupRequest) (*group.SyncGroupResponse, error) {
	return wait(ctx, func(done func(*group.SyncGroupResponse, error)) func() { return h.StartSyncGroup(req, done) })
}

// StartSyncGroup is SyncGroup's callback form.
func (h *Host) StartSyncGroup(req group.SyncGroupRequest, done func(*group.SyncGroupResponse, error)) (cancel func()) {
	nc := func() *group.SyncGroupResponse { return &group.SyncGroupResponse{ErrorCode: group.NotCoordinator} }
	return startCall(h, req.GroupID, func(c *group.Coordinator, now int64, ref group.Ref) { c.SyncGroup(now, ref, req) }, nc, done)
}

// Heartbeat implements kafka.Groups.
func (h *Host) Heartbeat(ctx context.Context, req group.HeartbeatRequest) (*group.HeartbeatResponse, error) {
	return wait(ctx, func(done func(*group.HeartbeatResponse, error)) func() { return h.StartHeartbeat(req, done) })
}

// StartHeartbeat is Heartbeat's callback form.
func (h *Host) StartHeartbeat(req group.HeartbeatRequest, done func(*group.HeartbeatResponse, error)) (cancel func()) {
	nc := func() *group.HeartbeatResponse { return &group.HeartbeatResponse{ErrorCode: group.NotCoordinator} }
	return startCall(h, req.GroupID, func(c *group.Coordinator, now int64, ref group.Ref) { c.Heartbeat(now, ref, req) }, nc, done)
}

// LeaveGroup implements kafka.Groups.
func (h *Host) LeaveGroup(ctx context.Context, req group.LeaveGroupRequest) (*group.LeaveGroupResponse, error) {
	return wait(ctx, func(done func(*group.LeaveGroupResponse, error)) func() { return h.StartLeaveGroup(req, done) })
}

// StartLeaveGroup is LeaveGroup's callback form.
func (h *Host) StartLeaveGroup(req group.LeaveGroupRequest, done func(*group.LeaveGroupResponse, error)) (cancel func()) {
	nc := func() *group.LeaveGroupResponse { return &group.LeaveGroupResponse{ErrorCode: group.NotCoordinator} }
	return startCall(h, req.GroupID, func(c *group.Coordinator, now int64, ref group.Ref) { c.LeaveGroup(now, ref, req) }, nc, done)
}

// OffsetCommit implements kafka.Groups. A partition that does not exist
// is refused UNKNOWN_TOPIC_OR_PARTITION and the others are committed, as
// Kafka's request handler does before the coordinator sees the request.
func (h *Host) OffsetCommit(ctx context.Context, req group.OffsetCommitRequest) (*group.OffsetCommitResponse, error) {
	return wait(ctx, func(done func(*group.OffsetCommitResponse, error)) func() { return h.StartOffsetCommit(req, done) })
}

// StartOffsetCommit is OffsetCommit's callback form.
func (h *Host) StartOffsetCommit(req group.OffsetCommitRequest, done func(*group.OffsetCommitResponse, error)) (cancel func()) {
	failed := func(code group.ErrorCode) *group.OffsetCommitResponse {
		return commitAnswer(req, func(string, int32) group.ErrorCode { return code })
	}
	known := req
	known.Topics = nil
	unknown := 0
	for _, t := range req.Topics {
		kt := group.CommitTopic{Name: t.Name}
		for _, p := range t.Partitions {
			if h.env.PartitionExists(t.Name, p.Partition) {
				kt.Partitions = append(kt.Partitions, p)
			} else {
				unknown++
			}
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	if len(known.Topics) == 0 && unknown > 0 && h.shardFor(req.GroupID) != nil {
		done(failed(group.UnknownTopicOrPartition), nil)
		return func() {}
	}
	nc := func() *group.OffsetCommitResponse { return failed(group.NotCoordinator) }
	return startCall(h, req.GroupID, func(c *group.Coordinator, now int64, ref group.Ref) { c.OffsetCommit(now, ref, known) }, nc,
		func(resp *group.OffsetCommitResponse, err error) {
			if resp != nil {
				h.cfg.Observer.Committed(committedPartitions(resp))
			}
			if err != nil || resp == nil || unknown == 0 {
				done(resp, err)
				return
			}
			codes := map[topicPartition]group.ErrorCode{}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					codes[topicPartition{Topic: t.Name, Partition: p.Partition}] = p.ErrorCode
				}
			}
			done(commitAnswer(req, func(topic string, p int32) group.ErrorCode {
				if c, ok := codes[topicPartition{Topic: topic, Partition: p}]; ok {
					return c
				}
				return group.UnknownTopicOrPartition
			}), nil)
		})
}

// committedPartitions counts the partitions a commit wrote.
func committedPartitions(r *group.OffsetCommitResponse) int {
	n := 0
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == group.None {
				n++
			}
		}
	}
	return n
}

// topicPartition is the shared type's shorter name.
type topicPartition = twinlog.TopicPartition

// commitAnswer answers every partition of req, in its order, with code's.
func commitAnswer(req group.OffsetCommitRequest, code func(topic string, p int32) group.ErrorCode) *group.OffsetCommitResponse {
	out := &group.OffsetCommitResponse{Topics: make([]group.TopicResult, len(req.Topics))}
	for i, t := range req.Topics {
		out.Topics[i] = group.TopicResult{Name: t.Name, Partitions: make([]group.PartitionResult, len(t.Partitions))}
		for j, p := range t.Partitions {
			out.Topics[i].Partitions[j] = group.PartitionResult{Partition: p.Partition, ErrorCode: code(t.Name, p.Partition)}
		}
	}
	return out
}

// OffsetFetch implements kafka.Groups: the coordinator's durable offsets.
func (h *Host) OffsetFetch(_ context.Context, req group.OffsetFetchRequest) (*group.OffsetFetchResponse, error) {
	s := h.shardFor(req.GroupID)
	if s == nil {
		return &group.OffsetFetchResponse{GroupID: req.GroupID, ErrorCode: group.NotCoordinator}, nil
	}
	var resp group.OffsetFetchResponse
	s.read(func(c *group.Coordinator) { resp = c.OffsetFetch(req) })
	return &resp, nil
}

// ListGroups implements kafka.Groups: the groups of every shard, sorted;
// the first error a shard answers (one still loading) is the answer's.
func (h *Host) ListGroups(_ context.Context, req group.ListGroupsRequest) (*group.ListGroupsResponse, error) {
	out := &group.ListGroupsResponse{}
	for _, s := range h.allShards() {
		var r group.ListGroupsResponse
		s.read(func(c *group.Coordinator) { r = c.ListGroups(req) })
		if out.ErrorCode == group.None {
			out.ErrorCode = r.ErrorCode
		}
		out.Groups = append(out.Groups, r.Groups...)
	}
	slices.SortFunc(out.Groups, func(a, b group.ListedGroup) int { return strings.Compare(a.GroupID, b.GroupID) })
	return out, nil
}

// DescribeGroups implements kafka.Groups.
func (h *Host) DescribeGroups(_ context.Context, groupIDs []string) ([]group.DescribedGroup, error) {
	out := make([]group.DescribedGroup, len(groupIDs))
	for i, id := range groupIDs {
		s := h.shardFor(id)
		if s == nil {
			out[i] = group.DescribedGroup{GroupID: id, ErrorCode: group.NotCoordinator}
			continue
		}
		s.read(func(c *group.Coordinator) { out[i] = c.DescribeGroups([]string{id})[0] })
	}
	return out, nil
}

// DeleteGroups implements kafka.Groups: each shard deletes its groups;
// the results are in the request's order.
func (h *Host) DeleteGroups(ctx context.Context, groupIDs []string) (*group.DeleteGroupsResponse, error) {
	codes := make(map[string]group.ErrorCode, len(groupIDs))
	byShard := map[*shard][]string{}
	var order []*shard
	for _, id := range groupIDs {
		s := h.shardFor(id)
		if s == nil {
			codes[id] = group.NotCoordinator
			continue
		}
		if _, ok := byShard[s]; !ok {
			order = append(order, s)
		}
		byShard[s] = append(byShard[s], id)
	}
	for _, s := range order {
		ids := byShard[s]
		nc := func() *group.DeleteGroupsResponse {
			r := &group.DeleteGroupsResponse{}
			for _, id := range ids {
				r.Results = append(r.Results, group.DeletedGroup{GroupID: id, ErrorCode: group.NotCoordinator})
			}
			return r
		}
		body, err := s.call(ctx, func(now int64, ref group.Ref) { s.c.DeleteGroups(now, ref, ids) })
		resp, err := answer(body, err, nc)
		if err != nil {
			return nil, err
		}
		if resp == nil {
			resp = nc()
		}
		for _, r := range resp.Results {
			codes[r.GroupID] = r.ErrorCode
		}
	}
	out := &group.DeleteGroupsResponse{Results: make([]group.DeletedGroup, len(groupIDs))}
	for i, id := range groupIDs {
		out.Results[i] = group.DeletedGroup{GroupID: id, ErrorCode: codes[id]}
	}
	return out, nil
}

// OffsetDelete implements kafka.Groups.
func (h *Host) OffsetDelete(ctx context.Context, req group.OffsetDeleteRequest) (*group.OffsetDeleteResponse, error) {
	nc := func() *group.OffsetDeleteResponse {
		return &group.OffsetDeleteResponse{ErrorCode: group.NotCoordinator}
	}
	return wait(ctx, func(done func(*group.OffsetDeleteResponse, error)) func() {
		return startCall(h, req.GroupID, func(c *group.Coordinator, now int64, ref group.Ref) { c.OffsetDelete(now, ref, req) }, nc, done)
	})
}
