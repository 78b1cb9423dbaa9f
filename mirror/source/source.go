// Package source is the destination's client of a mirror source cluster
// (SPEC §6.3, §6.4): it resolves the source's partition leaders with
// Metadata through the mirror's bootstrap addresses, sends Fetch{MIRROR} to
// them and asks GetLastMirroredEpochs of the leader of the source's
// __mirror_state partition. It holds no mirror state of its own; the
// per-partition decisions are mirror/plan's and the runner is
// mirror/runner's.
//
// The client's decisions (which address to ask, what the cache answers,
// when a source's answer is a refusal) are made here once; its RPCs go
// through a Transport: gRPC in production (GRPC), the simulated
// cross-cluster network in internal/sim. Every call completes through a
// callback, once, on whichever goroutine the Transport answers on (the
// cache answers synchronously); the Wait forms block for callers on a
// goroutine of their own.
//
// A Client is safe for concurrent use. Every RPC has a deadline.
package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/state"
)

// ErrUnreachable: no bootstrap or leader address answered.
var ErrUnreachable = errors.New("source: unreachable")

// Transport carries the client's RPCs to the source broker at addr
// ("host:port"), each bounded by timeout and by ctx. Each call runs done
// exactly once, with the answer or the error (a gRPC status error for a
// refusal, as the source's interceptor sends it).
type Transport interface {
	Metadata(ctx context.Context, addr string, timeout time.Duration, req *pb.MetadataRequest, done func(*pb.MetadataResponse, error))
	Fetch(ctx context.Context, addr string, timeout time.Duration, req *pb.FetchRequest, done func(*pb.FetchResponse, error))
	LastMirroredEpochs(ctx context.Context, addr string, timeout time.Duration, req *pb.GetLastMirroredEpochsRequest, done func(*pb.GetLastMirroredEpochsResponse, error))
}

// Dialer opens (or returns a cached) client connection to "host:port".
type Dialer func(addr string) (rpcopt.Conn, error)

// GRPC is the production Transport: each RPC on a goroutine of its own,
// over a connection from dial.
type GRPC Dialer

func (d GRPC) Metadata(ctx context.Context, addr string, timeout time.Duration, req *pb.MetadataRequest, done func(*pb.MetadataResponse, error)) {
	goCall(d, ctx, addr, timeout, func(ctx context.Context, conn grpc.ClientConnInterface) (*pb.MetadataResponse, error) {
		return pb.NewFetchServiceClient(conn).Metadata(ctx, req)
	}, done)
}

func (d GRPC) Fetch(ctx context.Context, addr string, timeout time.Duration, req *pb.FetchRequest, done func(*pb.FetchResponse, error)) {
	goCall(d, ctx, addr, timeout, func(ctx context.Context, conn grpc.ClientConnInterface) (*pb.FetchResponse, error) {
		return pb.NewFetchServiceClient(conn).Fetch(ctx, req)
	}, done)
}

func (d GRPC) LastMirroredEpochs(ctx context.Context, addr string, timeout time.Duration, req *pb.GetLastMirroredEpochsRequest, done func(*pb.GetLastMirroredEpochsResponse, error)) {
	goCall(d, ctx, addr, timeout, func(ctx context.Context, conn grpc.ClientConnInterface) (*pb.GetLastMirroredEpochsResponse, error) {
		return pb.NewMirrorSourceServiceClient(conn).GetLastMirroredEpochs(ctx, req)
	}, done)
}

func goCall[Resp any](dial GRPC, ctx context.Context, addr string, timeout time.Duration, call func(context.Context, grpc.ClientConnInterface) (Resp, error), done func(Resp, error)) {
	go func() {
		conn, err := dial(addr)
		if err != nil {
			var zero Resp
			done(zero, err)
			return
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		done(call(ctx, conn))
	}()
}

// Client talks to one source cluster.
type Client struct {
	tr      Transport
	timeout time.Duration

	mu        sync.Mutex
	bootstrap []string
	clusterID string
	// offset is the metadata offset of the answer the cache holds.
	offset  int64
	brokers map[int32]string
	topics  map[string]*pb.MetadataTopic
}

// New returns a client for the given bootstrap addresses. timeout bounds
// each RPC (a Fetch: its long-poll wait and timeout).
func New(tr Transport, bootstrap []string, timeout time.Duration) *Client {
	return &Client{tr: tr, timeout: timeout, bootstrap: append([]string(nil), bootstrap...),
		brokers: map[int32]string{}, topics: map[string]*pb.MetadataTopic{}}
}

// Track re-points the client at a mirror's bootstrap addresses (nothing
// changes when they are the same; other ones drop what was learnt) and
// returns the source cluster id the mirror expects: sourceClusterID, or
// when that is unset, the id the source last answered with ("" unknown).
func (c *Client) Track(bootstrap []string, sourceClusterID string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(bootstrap, c.bootstrap) {
		c.bootstrap = slices.Clone(bootstrap)
		c.brokers, c.topics, c.clusterID, c.offset = map[int32]string{}, map[string]*pb.MetadataTopic{}, "", 0
	}
	if sourceClusterID == "" {
		return c.clusterID
	}
	return sourceClusterID
}

// ClusterID is the source's cluster id as last seen ("" unknown).
func (c *Client) ClusterID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clusterID
}

// Refresh asks Metadata for topics (plus __mirror_state) of the known
// brokers, then of the bootstrap addresses, one after the other; the first
// answer wins, unless it is older than the one the cache holds (a broker
// whose metadata lags: its view may lack a topic the cluster has), which is
// taken only if no address answers better.
func (c *Client) Refresh(ctx context.Context, topics []string, done func(error)) {
	c.mu.Lock()
	addrs := make([]string, 0, len(c.brokers)+len(c.bootstrap))
	for _, id := range sortedIDs(c.brokers) {
		addrs = append(addrs, c.brokers[id])
	}
	addrs = append(addrs, c.bootstrap...)
	c.mu.Unlock()
	req := &pb.MetadataRequest{Topics: append(append([]string(nil), topics...), state.Topic)}
	var stale *pb.MetadataResponse // the freshest of the lagging answers
	var ask func(i int, last error)
	ask = func(i int, last error) {
		if i == len(addrs) {
			if stale != nil {
				c.take(stale)
				done(nil)
				return
			}
			done(fmt.Errorf("%w: %v", ErrUnreachable, last))
			return
		}
		c.tr.Metadata(ctx, addrs[i], c.timeout, req, func(resp *pb.MetadataResponse, err error) {
			switch {
			case err != nil && ctx.Err() != nil:
				done(ctx.Err())
			case err != nil:
				ask(i+1, err)
			case c.lags(resp):
				if stale == nil || resp.GetMetadataOffset() > stale.GetMetadataOffset() {
					stale = resp
				}
				ask(i+1, fmt.Errorf("%s: metadata at offset %d, behind %d", addrs[i], resp.GetMetadataOffset(), c.cachedOffset()))
			default:
				c.take(resp)
				done(nil)
			}
		})
	}
	ask(0, ErrUnreachable)
}

// lags: resp is older than the cache's answer from the same cluster.
func (c *Client) lags(resp *pb.MetadataResponse) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return resp.GetClusterId() == c.clusterID && resp.GetMetadataOffset() < c.offset
}

func (c *Client) cachedOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// take puts a Metadata answer in the cache.
func (c *Client) take(resp *pb.MetadataResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clusterID, c.offset = resp.GetClusterId(), resp.GetMetadataOffset()
	c.brokers = map[int32]string{}
	for _, b := range resp.GetBrokers() {
		c.brokers[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
	}
	for _, t := range resp.GetTopics() {
		c.topics[t.GetName()] = t
	}
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

// Leader resolves tp's leader from the cache (done runs before Leader
// returns), refreshing first when the topic is unknown or refresh is set.
// Codes: UNKNOWN_TOPIC_OR_PARTITION (the source does not have it),
// NOT_LEADER_OR_FOLLOWER (no live leader); errors: ErrUnreachable.
func (c *Client) Leader(ctx context.Context, tp twinlog.TopicPartition, refresh bool, done func(PartitionLeader, pb.ErrorCode, error)) {
	if !refresh && c.Topic(tp.Topic) != nil {
		done(c.cachedLeader(tp))
		return
	}
	c.Refresh(ctx, []string{tp.Topic}, func(err error) {
		if err != nil {
			done(PartitionLeader{}, pb.ErrorCode_ERROR_CODE_NONE, err)
			return
		}
		done(c.cachedLeader(tp))
	})
}

func (c *Client) cachedLeader(tp twinlog.TopicPartition) (PartitionLeader, pb.ErrorCode, error) {
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

// LeaderWait is Leader for a caller on a goroutine of its own.
func (c *Client) LeaderWait(ctx context.Context, tp twinlog.TopicPartition, refresh bool) (PartitionLeader, pb.ErrorCode, error) {
	type out struct {
		l    PartitionLeader
		code pb.ErrorCode
		err  error
	}
	ch := make(chan out, 1)
	c.Leader(ctx, tp, refresh, func(l PartitionLeader, code pb.ErrorCode, err error) { ch <- out{l, code, err} })
	o := <-ch
	return o.l, o.code, o.err
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

// Fetch sends Fetch{MIRROR} to addr (the source leader) and hands over the
// partition's answer; a refusal of this cluster's principal is an answer
// (its error code), not an error.
func (c *Client) Fetch(ctx context.Context, addr string, r FetchRequest, done func(*pb.FetchPartitionResponse, error)) {
	req := &pb.FetchRequest{
		ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_MIRROR,
		MaxWaitMs: int32(r.MaxWait.Milliseconds()), MinBytes: 1, MaxBytes: r.MaxBytes,
		RequesterClusterId: r.RequesterClusterID,
		Partitions: []*pb.FetchPartition{{
			Topic: r.TopicPartition.Topic, Partition: r.TopicPartition.Partition, TopicId: r.TopicID,
			FetchOffset: int64(r.FetchOffset), CurrentLeaderEpoch: int32(r.CurrentLeaderEpoch),
			LastFetchedEpoch: int32(r.LastFetchedEpoch), PartitionMaxBytes: r.MaxBytes,
		}},
	}
	c.tr.Fetch(ctx, addr, r.MaxWait+c.timeout, req, func(resp *pb.FetchResponse, err error) {
		if code, msg, ok := denied(err); ok {
			done(&pb.FetchPartitionResponse{Topic: r.TopicPartition.Topic, Partition: r.TopicPartition.Partition, Error: code, ErrorMessage: msg}, nil)
			return
		}
		if err != nil {
			done(nil, err)
			return
		}
		if len(resp.GetPartitions()) != 1 {
			done(nil, fmt.Errorf("source: fetch answered %d partitions", len(resp.GetPartitions())))
			return
		}
		done(resp.GetPartitions()[0], nil)
	})
}

// LastMirroredEpoch asks the source for tp's LMLE (SPEC §6.4): the leader of
// the topic's __mirror_state partition, or any broker when the source has no
// __mirror_state. It hands over the lmle or a protocol error code:
// UNKNOWN_TOPIC_OR_PARTITION or INCONSISTENT_TOPIC_ID, without asking, when
// the source's Metadata no longer shows the partition under topicID.
func (c *Client) LastMirroredEpoch(ctx context.Context, requesterClusterID, topicID string, tp twinlog.TopicPartition, done func(twinlog.Epoch, pb.ErrorCode, error)) {
	c.Refresh(ctx, []string{tp.Topic}, func(err error) {
		if err != nil {
			done(twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_NONE, err)
			return
		}
		addr, code := c.lmleAddr(topicID, tp)
		if code != pb.ErrorCode_ERROR_CODE_NONE {
			done(twinlog.NoEpoch, code, nil)
			return
		}
		// The broker asked must know at least what this answer showed
		// (it refuses, Unavailable, while its metadata lags).
		req := &pb.GetLastMirroredEpochsRequest{RequesterClusterId: requesterClusterID, Topic: tp.Topic, TopicId: topicID,
			Partitions: []int32{tp.Partition}, MinMetadataOffset: c.cachedOffset()}
		c.tr.LastMirroredEpochs(ctx, addr, c.timeout, req, func(resp *pb.GetLastMirroredEpochsResponse, err error) {
			if code, _, ok := denied(err); ok {
				done(twinlog.NoEpoch, code, nil)
				return
			}
			if err != nil {
				done(twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_NONE, err)
				return
			}
			for _, p := range resp.GetPartitions() {
				if p.GetPartition() == tp.Partition {
					done(twinlog.Epoch(p.GetLmle()), p.GetError(), nil)
					return
				}
			}
			done(twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, nil)
		})
	})
}

// lmleAddr is the broker to ask tp's LMLE of, from the cache just
// refreshed, or the code refusing to ask.
func (c *Client) lmleAddr(topicID string, tp twinlog.TopicPartition) (string, pb.ErrorCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The source's Metadata must still show the topic, with the mirror
	// topic's id: the answering broker's view alone may be stale, and a
	// lost topic must never be answered −1 ("truncate everything").
	t := c.topics[tp.Topic]
	srcID, srcParts := "", int32(0)
	if t != nil && t.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
		srcID, srcParts = t.GetTopicId(), int32(len(t.GetPartitions()))
	}
	if code := plan.SourceTopicCheck(srcID, srcParts, tp.Partition, topicID); code != pb.ErrorCode_ERROR_CODE_NONE {
		return "", code
	}
	var addr string
	st := c.topics[state.Topic]
	if st == nil || st.GetError() != pb.ErrorCode_ERROR_CODE_NONE || len(st.GetPartitions()) == 0 {
		if ids := sortedIDs(c.brokers); len(ids) > 0 {
			addr = c.brokers[ids[0]]
		}
	} else {
		p := st.GetPartitions()[state.PartitionFor(tp.Topic, int32(len(st.GetPartitions())))]
		addr = c.brokers[p.GetLeaderId()]
	}
	if addr == "" {
		return "", pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
	}
	return addr, pb.ErrorCode_ERROR_CODE_NONE
}

// LastMirroredEpochWait is LastMirroredEpoch for a caller on a goroutine
// of its own.
func (c *Client) LastMirroredEpochWait(ctx context.Context, requesterClusterID, topicID string, tp twinlog.TopicPartition) (twinlog.Epoch, pb.ErrorCode, error) {
	type out struct {
		lmle twinlog.Epoch
		code pb.ErrorCode
		err  error
	}
	ch := make(chan out, 1)
	c.LastMirroredEpoch(ctx, requesterClusterID, topicID, tp, func(lmle twinlog.Epoch, code pb.ErrorCode, err error) { ch <- out{lmle, code, err} })
	o := <-ch
	return o.lmle, o.code, o.err
}

// sortedIDs: the known brokers in id order (map order would make the
// simulator's runs differ from one run of a seed to the next).
func sortedIDs(brokers map[int32]string) []int32 {
	ids := make([]int32, 0, len(brokers))
	for id := range brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
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
