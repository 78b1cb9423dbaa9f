// Package source is the destination's client of a mirror source cluster
// (SPEC §6.3, §6.4): it resolves the source's partition leaders with
// Metadata through the mirror's bootstrap addresses, sends Fetch{MIRROR} to
// them and asks GetLastMirroredEpochs of the leader of the source's
// __mirror_state partition. It holds no mirror state of its own; the
// per-partition decisions are mirror/plan's and the runner is the broker's.
//
// A Client is safe for concurrent use. Every RPC has a deadline.
package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/state"
)

// ErrUnreachable: no bootstrap or leader address answered.
var ErrUnreachable = errors.New("source: unreachable")

// Dialer opens (or returns a cached) client connection to "host:port".
type Dialer func(addr string) (*grpc.ClientConn, error)

// Client talks to one source cluster.
type Client struct {
	dial    Dialer
	timeout time.Duration

	mu        sync.Mutex
	bootstrap []string
	clusterID string
	brokers   map[int32]string
	topics    map[string]*pb.MetadataTopic
}

// New returns a client for the given bootstrap addresses. timeout bounds
// each RPC.
func New(dial Dialer, bootstrap []string, timeout time.Duration) *Client {
	return &Client{dial: dial, timeout: timeout, bootstrap: append([]string(nil), bootstrap...),
		brokers: map[int32]string{}, topics: map[string]*pb.MetadataTopic{}}
}

// SetBootstrap re-points the client (a mirror re-pointed by StartMirrorTopics).
func (c *Client) SetBootstrap(bootstrap []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fmt.Sprint(bootstrap) == fmt.Sprint(c.bootstrap) {
		return
	}
	c.bootstrap = append([]string(nil), bootstrap...)
	c.brokers, c.topics, c.clusterID = map[int32]string{}, map[string]*pb.MetadataTopic{}, ""
}

// ClusterID is the source's cluster id as last seen ("" unknown).
func (c *Client) ClusterID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clusterID
}

// Refresh asks Metadata for topics (plus __mirror_state) through the known
// brokers, then the bootstrap addresses; the first answer wins.
func (c *Client) Refresh(ctx context.Context, topics ...string) error {
	c.mu.Lock()
	addrs := make([]string, 0, len(c.brokers)+len(c.bootstrap))
	for _, a := range c.brokers {
		addrs = append(addrs, a)
	}
	addrs = append(addrs, c.bootstrap...)
	c.mu.Unlock()
	req := &pb.MetadataRequest{Topics: append(append([]string(nil), topics...), state.Topic)}
	var last error = ErrUnreachable
	for _, a := range addrs {
		conn, err := c.dial(a)
		if err != nil {
			last = err
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		resp, err := pb.NewFetchServiceClient(conn).Metadata(rctx, req)
		cancel()
		if err != nil {
			last = err
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		c.mu.Lock()
		c.clusterID = resp.GetClusterId()
		c.brokers = map[int32]string{}
		for _, b := range resp.GetBrokers() {
			c.brokers[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
		}
		for _, t := range resp.GetTopics() {
			c.topics[t.GetName()] = t
		}
		c.mu.Unlock()
		return nil
	}
	return fmt.Errorf("%w: %v", ErrUnreachable, last)
}

// Topic returns the cached metadata of topic (nil if unknown).
func (c *Client) Topic(topic string) *pb.MetadataTopic {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topics[topic]
}

// PartitionLeader is a source partition's leader as known.
type PartitionLeader struct {
	TopicID     string
	Leader      int32
	LeaderEpoch twinlog.Epoch
	Addr        string
}

// Leader resolves tp's leader from the cache, refreshing when unknown or
// when refresh is set. Errors: UNKNOWN_TOPIC_OR_PARTITION (the source does
// not have it), NOT_LEADER_OR_FOLLOWER (no live leader), or ErrUnreachable.
func (c *Client) Leader(ctx context.Context, tp twinlog.TopicPartition, refresh bool) (PartitionLeader, pb.ErrorCode, error) {
	if refresh || c.Topic(tp.Topic) == nil {
		if err := c.Refresh(ctx, tp.Topic); err != nil {
			return PartitionLeader{}, pb.ErrorCode_ERROR_CODE_NONE, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.topics[tp.Topic]
	if t == nil || t.GetError() == pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION || int(tp.Partition) >= len(t.GetPartitions()) {
		return PartitionLeader{}, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, nil
	}
	p := t.GetPartitions()[tp.Partition]
	addr, ok := c.brokers[p.GetLeaderId()]
	if p.GetLeaderId() < 0 || !ok {
		return PartitionLeader{TopicID: t.GetTopicId(), Leader: -1}, pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, nil
	}
	return PartitionLeader{TopicID: t.GetTopicId(), Leader: p.GetLeaderId(), LeaderEpoch: twinlog.Epoch(p.GetLeaderEpoch()), Addr: addr}, pb.ErrorCode_ERROR_CODE_NONE, nil
}

// FetchRequest is one Fetch{MIRROR} of a single partition.
type FetchRequest struct {
	RequesterClusterID string
	TopicPartition     twinlog.TopicPartition
	// TopicID is the requester's topic id; the source refuses the fetch
	// with INCONSISTENT_TOPIC_ID if its topic has another (re-created).
	TopicID            string
	FetchOffset        twinlog.Offset
	CurrentLeaderEpoch twinlog.Epoch
	LastFetchedEpoch   twinlog.Epoch
	MaxWait            time.Duration
	MaxBytes           int32
}

// Fetch sends Fetch{MIRROR} to addr (the source leader) and returns the
// partition's answer.
func (c *Client) Fetch(ctx context.Context, addr string, r FetchRequest) (*pb.FetchPartitionResponse, error) {
	conn, err := c.dial(addr)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, r.MaxWait+c.timeout)
	defer cancel()
	resp, err := pb.NewFetchServiceClient(conn).Fetch(rctx, &pb.FetchRequest{
		ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_MIRROR,
		MaxWaitMs: int32(r.MaxWait.Milliseconds()), MinBytes: 1, MaxBytes: r.MaxBytes,
		RequesterClusterId: r.RequesterClusterID,
		Partitions: []*pb.FetchPartition{{
			Topic: r.TopicPartition.Topic, Partition: r.TopicPartition.Partition, TopicId: r.TopicID,
			FetchOffset: int64(r.FetchOffset), CurrentLeaderEpoch: int32(r.CurrentLeaderEpoch),
			LastFetchedEpoch: int32(r.LastFetchedEpoch), PartitionMaxBytes: r.MaxBytes,
		}},
	})
	if code, msg, ok := denied(err); ok {
		return &pb.FetchPartitionResponse{Topic: r.TopicPartition.Topic, Partition: r.TopicPartition.Partition, Error: code, ErrorMessage: msg}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(resp.GetPartitions()) != 1 {
		return nil, fmt.Errorf("source: fetch answered %d partitions", len(resp.GetPartitions()))
	}
	return resp.GetPartitions()[0], nil
}

// LastMirroredEpoch asks the source for tp's LMLE (SPEC §6.4): the leader of
// the topic's __mirror_state partition, or any broker when the source has no
// __mirror_state. It returns the lmle or a protocol error code:
// UNKNOWN_TOPIC_OR_PARTITION or INCONSISTENT_TOPIC_ID, without asking, when
// the source's Metadata no longer shows the partition under topicID.
func (c *Client) LastMirroredEpoch(ctx context.Context, requesterClusterID, topicID string, tp twinlog.TopicPartition) (twinlog.Epoch, pb.ErrorCode, error) {
	if err := c.Refresh(ctx, tp.Topic); err != nil {
		return twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_NONE, err
	}
	c.mu.Lock()
	// The source's Metadata must still show the topic, with the mirror
	// topic's id: the answering broker's view alone may be stale, and a
	// lost topic must never be answered −1 ("truncate everything").
	t := c.topics[tp.Topic]
	srcID, srcParts := "", int32(0)
	if t != nil && t.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
		srcID, srcParts = t.GetTopicId(), int32(len(t.GetPartitions()))
	}
	if code := plan.SourceTopicCheck(srcID, srcParts, tp.Partition, topicID); code != pb.ErrorCode_ERROR_CODE_NONE {
		c.mu.Unlock()
		return twinlog.NoEpoch, code, nil
	}
	var addr string
	st := c.topics[state.Topic]
	if st == nil || st.GetError() != pb.ErrorCode_ERROR_CODE_NONE || len(st.GetPartitions()) == 0 {
		for _, a := range c.brokers {
			addr = a
			break
		}
	} else {
		p := st.GetPartitions()[state.PartitionFor(tp.Topic, int32(len(st.GetPartitions())))]
		addr = c.brokers[p.GetLeaderId()]
	}
	c.mu.Unlock()
	if addr == "" {
		return twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, nil
	}
	conn, err := c.dial(addr)
	if err != nil {
		return twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_NONE, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := pb.NewMirrorSourceServiceClient(conn).GetLastMirroredEpochs(rctx, &pb.GetLastMirroredEpochsRequest{
		RequesterClusterId: requesterClusterID, Topic: tp.Topic, TopicId: topicID, Partitions: []int32{tp.Partition},
	})
	if code, _, ok := denied(err); ok {
		return twinlog.NoEpoch, code, nil
	}
	if err != nil {
		return twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_NONE, err
	}
	for _, p := range resp.GetPartitions() {
		if p.GetPartition() == tp.Partition {
			return twinlog.Epoch(p.GetLmle()), p.GetError(), nil
		}
	}
	return twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, nil
}

// denied returns the protocol code and message of a source's authorization
// refusal (a PermissionDenied status naming it, security/authz), false for any other
// outcome: the source refusing this cluster's principal is an answer, which
// the mirror machine takes as fatal (SPEC §6.3), not a transport failure to
// retry for ever.
func denied(err error) (pb.ErrorCode, string, bool) {
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != codes.PermissionDenied {
		return pb.ErrorCode_ERROR_CODE_NONE, "", false
	}
	return errcode.Denied(st.Message()), "source: " + st.Message(), true
}
