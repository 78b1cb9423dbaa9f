package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/controller/metastore"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
)

// The handlers below only decode, call the controller, encode and map
// errors. Protocol errors travel in-band as ErrorCode (SPEC §1.4); gRPC
// status codes are for transport-level failures: Unavailable when the
// controller cannot persist, Internal otherwise.

func registerServices(s *grpc.Server, c *Controller) {
	twinlogv1.RegisterControllerServiceServer(s, controllerServer{c: c})
	twinlogv1.RegisterAdminServiceServer(s, adminServer{c: c})
	twinlogv1.RegisterMirrorServiceServer(s, mirrorServer{c: c})
}

// ControllerService is the broker-facing service the controller serves over
// gRPC, for in-process callers (the simulator's brokers).
func (c *Controller) ControllerService() twinlogv1.ControllerServiceServer {
	return controllerServer{c: c}
}

// Interceptor is the authorization the gRPC server applies before every
// handler, for in-process callers that call the services directly (the
// simulator routes its calls through it, with each caller's principal).
func (c *Controller) Interceptor() grpc.UnaryServerInterceptor { return c.authz.UnaryInterceptor() }

// AdminService is the operator-facing service, for in-process callers (the
// simulator's operator).
func (c *Controller) AdminService() twinlogv1.AdminServiceServer {
	return adminServer{c: c}
}

// toStatus maps an error to a gRPC status: a store failure is Unavailable
// (rpcopt.ToStatus).
func toStatus(err error) error {
	return rpcopt.ToStatus(err, rpcopt.StatusRule{Err: ErrUnavailable, Code: codes.Unavailable})
}

// run is the common shape of a mutating command: compute the delta and the
// response, persist, apply; the response is returned only if the delta is
// durable.
func run[R any](c *Controller, fn func(s *metastate.State) (*twinlogv1.MetadataDelta, R)) (R, error) {
	var resp R
	err := c.Propose(func(s *metastate.State) *twinlogv1.MetadataDelta {
		var d *twinlogv1.MetadataDelta
		d, resp = fn(s)
		return d
	})
	if err != nil {
		var zero R
		return zero, toStatus(err)
	}
	return resp, nil
}

// read runs fn under the read lock.
func read[R any](c *Controller, fn func(s *metastate.State) R) (R, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.failed != nil {
		var zero R
		return zero, toStatus(c.failed)
	}
	return fn(c.state), nil
}

type controllerServer struct {
	twinlogv1.UnimplementedControllerServiceServer
	c *Controller
}

func (s controllerServer) RegisterBroker(ctx context.Context, req *twinlogv1.RegisterBrokerRequest) (*twinlogv1.RegisterBrokerResponse, error) {
	now := s.c.nowMs()
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.RegisterBrokerResponse) {
		return st.RegisterBroker(req, now)
	})
}

func (s controllerServer) BrokerHeartbeat(ctx context.Context, req *twinlogv1.BrokerHeartbeatRequest) (*twinlogv1.BrokerHeartbeatResponse, error) {
	return s.c.Heartbeat(req)
}

// Heartbeat handles a broker heartbeat and keeps the runtime state it
// reports: mirror partition statuses for DescribeMirrors, offline
// partitions for ListBrokers.
func (c *Controller) Heartbeat(req *twinlogv1.BrokerHeartbeatRequest) (*twinlogv1.BrokerHeartbeatResponse, error) {
	now := c.nowMs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return nil, toStatus(c.failed)
	}
	d, resp := c.state.Heartbeat(req, now)
	if err := c.commitLocked(d); err != nil {
		return nil, toStatus(err)
	}
	if resp.GetError() == twinlogv1.ErrorCode_ERROR_CODE_NONE {
		if ms := req.GetMirrorPartitions(); len(ms) > 0 {
			cp := make([]*twinlogv1.MirrorPartitionStatus, len(ms))
			for i, m := range ms {
				cp[i] = proto.Clone(m).(*twinlogv1.MirrorPartitionStatus)
			}
			c.mirrorStats[req.GetBrokerId()] = cp
		} else {
			delete(c.mirrorStats, req.GetBrokerId())
		}
		c.keepOfflineLocked(req)
	}
	return resp, nil
}

// Bounds on the offline partitions the controller keeps per broker: an
// operator needs the count and the first partitions with a short reason;
// a broken or hostile broker must not make every ListBrokers answer huge.
const (
	MaxOfflinePartitionsKept = 1000
	MaxOfflineReasonBytes    = 256
)

// offlineReport is a broker's latest report of its offline partitions. It
// belongs to the registration with brokerEpoch: ListBrokers shows it only
// while that registration is live (not fenced, not replaced by a
// re-registration), so a report ends with the broker's session without the
// controller having to track the session's end.
type offlineReport struct {
	brokerEpoch int64
	count       int32 // as reported, before the bounds
	partitions  []*twinlogv1.OfflinePartition
}

// keepOfflineLocked records the offline partitions of an accepted heartbeat
// (an empty list clears the broker's report): entries with an invalid topic
// name or partition are dropped, at most MaxOfflinePartitionsKept are kept
// and reasons are cut to MaxOfflineReasonBytes. c.mu is held.
func (c *Controller) keepOfflineLocked(req *twinlogv1.BrokerHeartbeatRequest) {
	ops := req.GetOfflinePartitions()
	if len(ops) == 0 {
		delete(c.offline, req.GetBrokerId())
		return
	}
	r := offlineReport{brokerEpoch: req.GetBrokerEpoch(), count: int32(min(len(ops), math.MaxInt32))}
	for _, op := range ops {
		if len(r.partitions) == MaxOfflinePartitionsKept {
			break
		}
		if metastate.ValidateTopicName(op.GetTopic()) != nil || op.GetPartition() < 0 {
			continue
		}
		r.partitions = append(r.partitions, &twinlogv1.OfflinePartition{Topic: op.GetTopic(), Partition: op.GetPartition(),
			Reason: truncateUTF8(op.GetReason(), MaxOfflineReasonBytes)})
	}
	if c.offline == nil {
		c.offline = map[int32]offlineReport{}
	}
	c.offline[req.GetBrokerId()] = r
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func (s controllerServer) AlterPartition(ctx context.Context, req *twinlogv1.AlterPartitionRequest) (*twinlogv1.AlterPartitionResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.AlterPartitionResponse) {
		return st.AlterPartition(req)
	})
}

func (s controllerServer) BumpLeaderEpoch(ctx context.Context, req *twinlogv1.BumpLeaderEpochRequest) (*twinlogv1.BumpLeaderEpochResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.BumpLeaderEpochResponse) {
		return st.BumpLeaderEpoch(req)
	})
}

// AllocateProducerIds hands a broker the next block of producer ids; the
// block is durable before the answer (run), so no id is given twice.
func (s controllerServer) AllocateProducerIds(ctx context.Context, req *twinlogv1.AllocateProducerIdsRequest) (*twinlogv1.AllocateProducerIdsResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.AllocateProducerIdsResponse) {
		return st.AllocateProducerIds(req)
	})
}

// EnsureInternalTopic creates __consumer_offsets on a broker's first
// FindCoordinator; the topic is durable before the answer (run).
func (s controllerServer) EnsureInternalTopic(ctx context.Context, req *twinlogv1.EnsureInternalTopicRequest) (*twinlogv1.EnsureInternalTopicResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.EnsureInternalTopicResponse) {
		return st.EnsureInternalTopic(req)
	})
}

func (s controllerServer) FetchMetadata(ctx context.Context, req *twinlogv1.FetchMetadataRequest) (*twinlogv1.FetchMetadataResponse, error) {
	resp, err := s.c.FetchMetadata(ctx, req)
	return resp, toStatus(err)
}

// FetchMetadata long-polls the change log (SPEC §3.1): it returns the deltas
// from req.FromOffset on, waiting up to min(MaxWaitMs, MaxFetchWait, ctx
// deadline) for the first one; a snapshot page when FromOffset was compacted
// away or req.SnapshotCursor continues one (then the deltas after the
// snapshot come with its last page); OFFSET_OUT_OF_RANGE when FromOffset is
// past the head + 1 (the follower saw changes this controller does not
// have); INVALID_REQUEST for a malformed cursor (snapshotPage).
//
// Every response stays within MaxFetchBytes encoded (proto.Size of the whole
// response) except one that must exceed it to progress: a snapshot page of
// at most one item (and no deltas), or, without a snapshot, a single delta. A
// follower far behind thus pages through the snapshot by cursor and through
// the log by from_offset, and no response outgrows its transport's message
// limit as cluster.max.partitions grows.
func (c *Controller) FetchMetadata(ctx context.Context, req *twinlogv1.FetchMetadataRequest) (*twinlogv1.FetchMetadataResponse, error) {
	from := max(req.GetFromOffset(), 1)
	maxDeltas := c.cfg.MaxFetchDeltas
	if n := int(req.GetMaxDeltas()); n > 0 && n < maxDeltas {
		maxDeltas = n
	}
	wait := time.Duration(max(req.GetMaxWaitMs(), 0)) * time.Millisecond
	wait = min(wait, c.cfg.MaxFetchWait)
	var timer <-chan time.Time
	for {
		c.mu.RLock()
		head, notify, failed, clusterID, closing := c.state.Offset(), c.notify, c.failed, c.state.ClusterID(), c.closing
		c.mu.RUnlock()
		if failed != nil {
			return nil, failed
		}
		resp := &twinlogv1.FetchMetadataResponse{HighOffset: head, ClusterId: clusterID}
		if from > head+1 {
			resp.Error = twinlogv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE
			return resp, nil
		}
		if cur := req.GetSnapshotCursor(); cur != nil {
			// A follower in the middle of a snapshot is behind by
			// definition: it gets its next page at once.
			return c.snapshotPage(resp, cur, maxDeltas)
		}
		if from <= head || wait <= 0 || closing {
			if from > head {
				return resp, nil
			}
			return c.readLog(resp, from, maxDeltas)
		}
		if timer == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-notify:
		case <-timer:
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// readLog answers from the change log, or with the first snapshot page when
// from was compacted away.
func (c *Controller) readLog(resp *twinlogv1.FetchMetadataResponse, from int64, maxDeltas int) (*twinlogv1.FetchMetadataResponse, error) {
	deltas, err := c.store.ReadDeltas(from, maxDeltas)
	if errors.Is(err, metastore.ErrCompacted) {
		return c.snapshotPage(resp, nil, maxDeltas)
	}
	if err != nil {
		return nil, err
	}
	resp.Deltas = boundDeltas(deltas, c.cfg.MaxFetchBytes-proto.Size(resp), true)
	return resp, nil
}

// errBadCursor stops a snapshot page read whose cursor is malformed; the
// reason is in the response's error message.
var errBadCursor = errors.New("controller: bad snapshot cursor")

// snapshotPage fills resp with one page of the stored snapshot: the first
// page when cur is nil or stale (its offset is older than the stored
// snapshot's: a compaction replaced the snapshot it paged, and the follower
// restarts rather than join pages of two snapshots), else the page at
// cur.Position. Items are added while the whole response stays within
// MaxFetchBytes, and always at least one. A partial page gets
// NextSnapshotCursor; the last page gets the deltas after the snapshot,
// only as many as still fit (the snapshot alone already progresses).
//
// A cursor with a negative offset or position, an offset newer than the
// stored snapshot, a position at or past its end, or any cursor when no
// snapshot is stored gets INVALID_REQUEST: no snapshot the follower could
// have been given matches it.
func (c *Controller) snapshotPage(resp *twinlogv1.FetchMetadataResponse, cur *twinlogv1.SnapshotCursor, maxDeltas int) (*twinlogv1.FetchMetadataResponse, error) {
	invalid := func(format string, args ...any) (*twinlogv1.FetchMetadataResponse, error) {
		resp.Error = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
		resp.ErrorMessage = fmt.Sprintf(format, args...)
		return resp, nil
	}
	if cur != nil && (cur.GetOffset() < 0 || cur.GetPosition() < 0) {
		return invalid("snapshot cursor (offset %d, position %d) is negative", cur.GetOffset(), cur.GetPosition())
	}
	var reason string
	envelope := 0
	start := func(offset, items int64) (int64, error) {
		pos := int64(0)
		switch {
		case cur == nil || cur.GetOffset() < offset:
		case cur.GetOffset() > offset:
			reason = fmt.Sprintf("snapshot cursor names offset %d, newer than the stored snapshot at %d", cur.GetOffset(), offset)
			return 0, errBadCursor
		case cur.GetPosition() >= items:
			reason = fmt.Sprintf("snapshot cursor position %d is past the end of snapshot %d (%d items)", cur.GetPosition(), offset, items)
			return 0, errBadCursor
		default:
			pos = cur.GetPosition()
		}
		// The response around the snapshot, with the largest cursor this
		// snapshot can need: the page is sized before it is known whether
		// it is the last one.
		resp.SnapshotPosition = pos
		resp.NextSnapshotCursor = &twinlogv1.SnapshotCursor{Offset: offset, Position: items}
		envelope = proto.Size(resp) + protowire.SizeTag(snapshotField)
		return pos, nil
	}
	fits := func(size int) bool { return envelope+protowire.SizeBytes(size) <= c.cfg.MaxFetchBytes }
	page, err := c.store.ReadSnapshotPage(start, fits)
	switch {
	case errors.Is(err, errBadCursor):
		return invalid("%s", reason)
	case err != nil:
		return nil, err
	case page == nil && cur != nil:
		return invalid("snapshot cursor at offset %d but no snapshot is stored", cur.GetOffset())
	case page == nil:
		return nil, errors.New("controller: log compacted but no snapshot stored")
	}
	resp.Snapshot = page.Snapshot
	if page.Next < page.Items {
		resp.NextSnapshotCursor.Position = page.Next
		return resp, nil
	}
	resp.NextSnapshotCursor = nil
	deltas, err := c.store.ReadDeltas(page.Snapshot.GetOffset()+1, maxDeltas)
	if err != nil {
		// A compaction since the page was read dropped deltas right
		// after this snapshot: the follower applies the snapshot alone
		// and its next fetch gets the deltas or the newer snapshot.
		if errors.Is(err, metastore.ErrCompacted) {
			return resp, nil
		}
		return nil, err
	}
	resp.Deltas = boundDeltas(deltas, c.cfg.MaxFetchBytes-proto.Size(resp), false)
	return resp, nil
}

// snapshotField is FetchMetadataResponse.snapshot's field number, for the
// size of the page's tag and length around it.
var snapshotField = (&twinlogv1.FetchMetadataResponse{}).ProtoReflect().Descriptor().Fields().ByName("snapshot").Number()

// boundDeltas keeps the longest prefix of deltas whose encoded size as
// fields of the response is at most budget. With atLeastOne it keeps the
// first delta regardless, so that a follower progresses (a delta is one
// command's change; the CreateTopics caps bound the largest).
func boundDeltas(deltas []*twinlogv1.MetadataDelta, budget int, atLeastOne bool) []*twinlogv1.MetadataDelta {
	n := 0
	for i, d := range deltas {
		n += protowire.SizeTag(deltasField) + protowire.SizeBytes(proto.Size(d))
		if n > budget && (i > 0 || !atLeastOne) {
			return deltas[:i]
		}
	}
	return deltas
}

// deltasField is FetchMetadataResponse.deltas's field number.
var deltasField = (&twinlogv1.FetchMetadataResponse{}).ProtoReflect().Descriptor().Fields().ByName("deltas").Number()

type adminServer struct {
	twinlogv1.UnimplementedAdminServiceServer
	c *Controller
}

func (s adminServer) CreateTopics(ctx context.Context, req *twinlogv1.CreateTopicsRequest) (*twinlogv1.CreateTopicsResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.CreateTopicsResponse) {
		return st.CreateTopics(req)
	})
}

func (s adminServer) DeleteTopics(ctx context.Context, req *twinlogv1.DeleteTopicsRequest) (*twinlogv1.DeleteTopicsResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.DeleteTopicsResponse) {
		return st.DeleteTopics(req)
	})
}

func (s adminServer) DescribeConfigs(ctx context.Context, req *twinlogv1.DescribeConfigsRequest) (*twinlogv1.DescribeConfigsResponse, error) {
	return read(s.c, func(st *metastate.State) *twinlogv1.DescribeConfigsResponse { return st.DescribeConfigs(req) })
}

func (s adminServer) AlterConfigs(ctx context.Context, req *twinlogv1.AlterConfigsRequest) (*twinlogv1.AlterConfigsResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.AlterConfigsResponse) {
		return st.AlterConfigs(req)
	})
}

func (s adminServer) CreateAcls(ctx context.Context, req *twinlogv1.CreateAclsRequest) (*twinlogv1.CreateAclsResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.CreateAclsResponse) {
		return st.CreateAcls(req)
	})
}

func (s adminServer) DeleteAcls(ctx context.Context, req *twinlogv1.DeleteAclsRequest) (*twinlogv1.DeleteAclsResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.DeleteAclsResponse) {
		return st.DeleteAcls(req)
	})
}

func (s adminServer) DescribeAcls(ctx context.Context, req *twinlogv1.DescribeAclsRequest) (*twinlogv1.DescribeAclsResponse, error) {
	return read(s.c, func(st *metastate.State) *twinlogv1.DescribeAclsResponse { return st.DescribeAcls(req) })
}

func (s adminServer) AlterUserScramCredentials(ctx context.Context, req *twinlogv1.AlterUserScramCredentialsRequest) (*twinlogv1.AlterUserScramCredentialsResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.AlterUserScramCredentialsResponse) {
		return st.AlterUserScramCredentials(req)
	})
}

func (s adminServer) DescribeUserScramCredentials(ctx context.Context, req *twinlogv1.DescribeUserScramCredentialsRequest) (*twinlogv1.DescribeUserScramCredentialsResponse, error) {
	return read(s.c, func(st *metastate.State) *twinlogv1.DescribeUserScramCredentialsResponse {
		return st.DescribeUserScramCredentials(req)
	})
}

func (s adminServer) ListBrokers(ctx context.Context, req *twinlogv1.ListBrokersRequest) (*twinlogv1.ListBrokersResponse, error) {
	return read(s.c, func(st *metastate.State) *twinlogv1.ListBrokersResponse {
		resp := &twinlogv1.ListBrokersResponse{ClusterId: st.ClusterID(), MetadataOffset: st.Offset()}
		for _, b := range st.Brokers() {
			resp.Brokers = append(resp.Brokers, proto.Clone(b).(*twinlogv1.BrokerRecord))
			r, ok := s.c.offline[b.GetBrokerId()]
			if !ok || r.brokerEpoch != b.GetBrokerEpoch() || b.GetFenced() {
				continue // none reported, or by a session that has ended
			}
			bo := &twinlogv1.BrokerOfflinePartitions{BrokerId: b.GetBrokerId(), Count: r.count}
			for _, p := range r.partitions {
				bo.Partitions = append(bo.Partitions, proto.CloneOf(p))
			}
			resp.OfflinePartitions = append(resp.OfflinePartitions, bo)
		}
		return resp
	})
}

func (s adminServer) UnregisterBroker(ctx context.Context, req *twinlogv1.UnregisterBrokerRequest) (*twinlogv1.UnregisterBrokerResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.UnregisterBrokerResponse) {
		return st.UnregisterBroker(req)
	})
}

func (s adminServer) ElectLeaders(ctx context.Context, req *twinlogv1.ElectLeadersRequest) (*twinlogv1.ElectLeadersResponse, error) {
	c := s.c
	now := c.nowMs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return nil, toStatus(c.failed)
	}
	d, res := c.state.ElectLeaders(req, now)
	if err := c.commitLocked(d); err != nil {
		c.state.AbortRounds(roundIDs(res.StartRounds))
		return nil, toStatus(err)
	}
	for _, r := range res.StartRounds {
		c.startRoundLocked(r)
	}
	return res.Response, nil
}

func (s adminServer) AlterPartitionReassignments(ctx context.Context, req *twinlogv1.AlterPartitionReassignmentsRequest) (*twinlogv1.AlterPartitionReassignmentsResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.AlterPartitionReassignmentsResponse) {
		return st.AlterPartitionReassignments(req)
	})
}

func (s adminServer) DescribeTopicPartitions(ctx context.Context, req *twinlogv1.DescribeTopicPartitionsRequest) (*twinlogv1.DescribeTopicPartitionsResponse, error) {
	limit := s.c.cfg.MaxRequestPartitionSizeLimit
	return read(s.c, func(st *metastate.State) *twinlogv1.DescribeTopicPartitionsResponse {
		return st.DescribeTopicPartitionsFor(req, limit, s.c.describable(ctx))
	})
}

// describable says which topics the caller of ctx may describe (SPEC §5's
// authorization; every topic with the authorizer off).
func (c *Controller) describable(ctx context.Context) func(topic string) bool {
	if !c.authz.Enabled() {
		return nil
	}
	return func(topic string) bool {
		return c.authz.Allowed(ctx, authz.Need{Op: acl.Describe, Type: acl.Topic, Name: topic})
	}
}

type mirrorServer struct {
	twinlogv1.UnimplementedMirrorServiceServer
	c *Controller
}

func (s mirrorServer) CreateMirror(ctx context.Context, req *twinlogv1.CreateMirrorRequest) (*twinlogv1.CreateMirrorResponse, error) {
	// Resolve the source cluster id before taking the lock: it is network
	// I/O and may be slow or impossible (controllers need not reach the
	// other cluster; brokers' mirror fetchers verify ids themselves).
	src, sources := s.c.resolveSource(ctx, req.GetSourceBootstrap(), req.GetTopics())
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.CreateMirrorResponse) {
		return st.CreateMirror(req, src, sources)
	})
}

func (s mirrorServer) DeleteMirror(ctx context.Context, req *twinlogv1.DeleteMirrorRequest) (*twinlogv1.DeleteMirrorResponse, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.DeleteMirrorResponse) {
		return st.DeleteMirror(req)
	})
}

func (s mirrorServer) setDesired(mirror string, topics []string, op metastate.MirrorOp, bootstrap []string) ([]*twinlogv1.MirrorTopicResult, error) {
	return run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, []*twinlogv1.MirrorTopicResult) {
		return st.SetMirrorTopicsDesiredState(mirror, topics, op, bootstrap)
	})
}

func (s mirrorServer) StartMirrorTopics(ctx context.Context, req *twinlogv1.StartMirrorTopicsRequest) (*twinlogv1.StartMirrorTopicsResponse, error) {
	bootstrap := req.GetSourceBootstrap()
	if len(bootstrap) == 0 {
		if m, err := read(s.c, func(st *metastate.State) *twinlogv1.MirrorRecord { return st.Mirror(req.GetMirror()) }); err == nil {
			bootstrap = m.GetSourceBootstrap()
		}
	}
	// The cluster id the addresses answer goes to metastate too: new
	// addresses must be the mirror's source cluster (a mirror is never
	// re-pointed at another cluster), and so must the old ones that
	// describe the topics; new addresses must report a producer id space
	// other than this cluster's.
	var src metastate.SourceCluster
	var sources map[string]metastate.SourceTopic
	if len(bootstrap) > 0 && (len(req.GetTopics()) > 0 || len(req.GetSourceBootstrap()) > 0) {
		src, sources = s.c.resolveSource(ctx, bootstrap, req.GetTopics())
	}
	res, err := run(s.c, func(st *metastate.State) (*twinlogv1.MetadataDelta, []*twinlogv1.MirrorTopicResult) {
		return st.StartMirrorTopics(req.GetMirror(), req.GetTopics(), req.GetSourceBootstrap(), src, sources)
	})
	if err != nil {
		return nil, err
	}
	return &twinlogv1.StartMirrorTopicsResponse{Topics: res}, nil
}

// StopMirrorTopics records the desired STOPPED state. With waitForCatchUp
// (SPEC §6.7 step 1) it first waits, up to timeoutMs (at most
// rpcopt.MaxCatchUpWait; 0 means that maximum), until every partition
// of the topics is caught up on facts gathered after the request arrived
// (catchup.go: the destination leader's HW ≥ the source leader's HW);
// otherwise every topic gets REQUEST_TIMED_OUT, with the reason it was not
// caught up, and nothing is written.
func (s mirrorServer) StopMirrorTopics(ctx context.Context, req *twinlogv1.StopMirrorTopicsRequest) (*twinlogv1.StopMirrorTopicsResponse, error) {
	// A stop the state would refuse for every topic (an unknown mirror,
	// topics not in it, a transition it forbids) is refused before the
	// catch-up wait and the offset sync: it must not wait, nor commit a
	// group's offsets here, for nothing.
	dry, err := read(s.c, func(st *metastate.State) []*twinlogv1.MirrorTopicResult {
		_, res := st.SetMirrorTopicsDesiredState(req.GetMirror(), req.GetTopics(), metastate.MirrorStop, nil)
		return res
	})
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(dry, func(r *twinlogv1.MirrorTopicResult) bool { return r.GetError() == twinlogv1.ErrorCode_ERROR_CODE_NONE }) {
		return &twinlogv1.StopMirrorTopicsResponse{Topics: dry}, nil
	}
	if req.GetWaitForCatchUp() {
		// A wait with no timeout, or a longer one, waits rpcopt.MaxCatchUpWait.
		wait := rpcopt.CapWait(time.Duration(req.GetTimeoutMs())*time.Millisecond, rpcopt.MaxCatchUpWait)
		ok, reasons := s.c.waitMirrorCaughtUp(ctx, req.GetMirror(), req.GetTopics(), wait)
		if !ok {
			resp := &twinlogv1.StopMirrorTopicsResponse{}
			for i, t := range req.GetTopics() {
				msg := "mirror not caught up within timeoutMs"
				if i < len(reasons) && reasons[i] != "" {
					msg += ": " + reasons[i]
				} else {
					msg += ": other topics are not"
				}
				resp.Topics = append(resp.Topics, &twinlogv1.MirrorTopicResult{Topic: t,
					Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT, ErrorMessage: msg})
			}
			return resp, nil
		}
	}
	// The last offset sync before the topics become writable (issue 16):
	// after the catch-up wait when asked, so that a group resumes here
	// where it committed on the source. Bounded: a source that is gone (a
	// disaster failover) must not hold the stop up.
	syncTimeout := finalOffsetSyncTimeout
	if !req.GetWaitForCatchUp() {
		syncTimeout = disasterOffsetSyncTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	st := s.c.SyncOffsets(sctx, req.GetMirror())
	cancel()
	s.c.log.Info("offset sync before stopping", "mirror", req.GetMirror(), "topics", req.GetTopics(),
		"committed", st.GetOffsetsCommitted(), "err", st.GetError())
	res, err := s.setDesired(req.GetMirror(), req.GetTopics(), metastate.MirrorStop, nil)
	if err != nil {
		return nil, err
	}
	return &twinlogv1.StopMirrorTopicsResponse{Topics: res}, nil
}

func (s mirrorServer) PauseMirrorTopics(ctx context.Context, req *twinlogv1.PauseMirrorTopicsRequest) (*twinlogv1.PauseMirrorTopicsResponse, error) {
	res, err := s.setDesired(req.GetMirror(), req.GetTopics(), metastate.MirrorPause, nil)
	if err != nil {
		return nil, err
	}
	return &twinlogv1.PauseMirrorTopicsResponse{Topics: res}, nil
}

func (s mirrorServer) ResumeMirrorTopics(ctx context.Context, req *twinlogv1.ResumeMirrorTopicsRequest) (*twinlogv1.ResumeMirrorTopicsResponse, error) {
	res, err := s.setDesired(req.GetMirror(), req.GetTopics(), metastate.MirrorResume, nil)
	if err != nil {
		return nil, err
	}
	return &twinlogv1.ResumeMirrorTopicsResponse{Topics: res}, nil
}

// resolveSource asks the source bootstrap brokers for their cluster id,
// producer id space and the listed topics: Metadata gives the cluster id and
// space (metastate.SourceCluster) and each topic's name, topic id, partition count and
// replication factor, DescribeConfigs (which the broker forwards to the
// source's controller) the topic's own settings (source TOPIC entries; which
// of them are copied is metadata.MirroredTopicConfigs). A topic the source
// says it does not have is described as Missing (metastate refuses it with
// UNKNOWN_TOPIC_OR_PARTITION); one it could not describe is left out
// (metastate refuses it with BROKER_NOT_AVAILABLE rather than start it
// unchecked). The first answer that describes every topic wins; an answer
// with topics missing is kept while the other addresses are asked (a broker
// may not have seen a topic just created). Bounded by RecoveryRPCTimeout. It
// returns a zero SourceCluster and nil if no Metadata answers. If Metadata answers but no
// broker can describe the configs, the topics carry ConfigsErr (metastate
// refuses to create them without their configs).
func (c *Controller) resolveSource(ctx context.Context, bootstrap, topics []string) (metastate.SourceCluster, map[string]metastate.SourceTopic) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RecoveryRPCTimeout)
	defer cancel()
	var (
		bestSrc, partialSrc metastate.SourceCluster
		best, partial       map[string]metastate.SourceTopic
	)
	missing := func(sources map[string]metastate.SourceTopic) int {
		n := 0
		for _, st := range sources {
			if st.Missing {
				n++
			}
		}
		return n
	}
	for _, addr := range bootstrap {
		src, sources, err := c.describeSource(ctx, addr, topics)
		switch {
		case err == nil && missing(sources) == 0:
			return src, sources
		case err == nil && (best == nil || missing(sources) < missing(best)):
			bestSrc, best = src, sources
		case err != nil && sources != nil && partial == nil:
			partialSrc, partial = src, sources
		}
		c.log.Debug("resolve mirror source", "addr", addr, "err", err)
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case best != nil:
		return bestSrc, best
	case partial != nil:
		c.log.Warn("mirror source topic configs unreadable; topics to create are refused", "bootstrap", bootstrap)
		return partialSrc, partial
	}
	c.log.Warn("mirror source unresolved; its topics are refused until it answers", "bootstrap", bootstrap)
	return metastate.SourceCluster{}, nil
}

// describeSource is resolveSource against one source broker. When Metadata
// answers but DescribeConfigs does not, it returns the sources marked with
// ConfigsErr and the error.
func (c *Controller) describeSource(ctx context.Context, addr string, topics []string) (metastate.SourceCluster, map[string]metastate.SourceTopic, error) {
	var src metastate.SourceCluster
	conn, err := c.dial(addr)
	if err != nil {
		return src, nil, err
	}
	defer func() { _ = conn.Close() }()
	want := slices.Clone(topics)
	if want == nil {
		want = []string{}
	}
	md, err := twinlogv1.NewFetchServiceClient(conn).Metadata(ctx, &twinlogv1.MetadataRequest{Topics: want})
	if err != nil {
		return src, nil, err
	}
	if md.GetClusterId() == "" {
		return src, nil, errors.New("metadata without a cluster id")
	}
	src = metastate.SourceCluster{ID: md.GetClusterId(), ProducerIDSpace: md.GetProducerIdSpace()}
	sources := map[string]metastate.SourceTopic{}
	var res []*twinlogv1.ConfigResource
	for _, t := range md.GetTopics() {
		if len(topics) > 0 && !slices.Contains(topics, t.GetName()) {
			continue
		}
		if t.GetError() == twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
			sources[t.GetName()] = metastate.SourceTopic{Name: t.GetName(), Missing: true}
			continue
		}
		if t.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE || t.GetTopicId() == "" || len(t.GetPartitions()) == 0 {
			continue // not described: refused as unreachable, not guessed
		}
		sources[t.GetName()] = metastate.SourceTopic{Name: t.GetName(), TopicID: t.GetTopicId(),
			Partitions: int32(len(t.GetPartitions())), ReplicationFactor: int32(len(t.GetPartitions()[0].GetReplicas()))}
		res = append(res, &twinlogv1.ConfigResource{Type: twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: t.GetName()})
	}
	if len(res) == 0 || len(topics) == 0 {
		// No topic named: only the cluster id and space are wanted.
		return src, sources, nil
	}
	dc, err := twinlogv1.NewAdminServiceClient(conn).DescribeConfigs(ctx, &twinlogv1.DescribeConfigsRequest{Resources: res})
	if err != nil {
		for n, st := range sources {
			if !st.Missing {
				st.ConfigsErr = "DescribeConfigs: " + status.Convert(err).Message()
				sources[n] = st
			}
		}
		return src, sources, err
	}
	described := map[string]bool{}
	for _, r := range dc.GetResults() {
		name := r.GetResource().GetName()
		st, ok := sources[name]
		if !ok || st.Missing {
			continue
		}
		described[name] = true
		switch r.GetError() {
		case twinlogv1.ErrorCode_ERROR_CODE_NONE:
			for _, e := range r.GetEntries() {
				if e.GetSource() == twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC {
					if st.Configs == nil {
						st.Configs = map[string]string{}
					}
					st.Configs[e.GetName()] = e.GetValue()
				}
			}
		case twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION:
			// Deleted since Metadata answered: the source no longer has it.
			st = metastate.SourceTopic{Name: name, Missing: true}
		default:
			st.ConfigsErr = fmt.Sprintf("DescribeConfigs: %v %s", r.GetError(), r.GetErrorMessage())
		}
		sources[name] = st
	}
	for n, st := range sources {
		if !described[n] && !st.Missing {
			st.ConfigsErr = "DescribeConfigs: no answer for the topic"
			sources[n] = st
		}
	}
	return src, sources, nil
}

// DescribeMirrors aggregates the runtime states that destination leaders
// report in heartbeats (SPEC §6.11) onto the mirror definitions: for each
// member partition the current leader's report, else the newest report from
// any broker, else just the desired state.
func (s mirrorServer) DescribeMirrors(ctx context.Context, req *twinlogv1.DescribeMirrorsRequest) (*twinlogv1.DescribeMirrorsResponse, error) {
	c := s.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.failed != nil {
		return nil, toStatus(c.failed)
	}
	names := req.GetNames()
	if len(names) == 0 {
		// All mirrors: those the caller may describe (listed names were
		// authorized by the interceptor).
		names = slices.DeleteFunc(slices.Sorted(maps.Keys(c.mirrorNames)), func(n string) bool {
			return !c.authz.Allowed(ctx, authz.Need{Op: acl.Describe, Type: acl.Mirror, Name: n})
		})
	}
	type key struct {
		topic string
		part  int32
	}
	byPart := map[string]map[key]map[int32]*twinlogv1.MirrorPartitionStatus{}
	for b, sts := range c.mirrorStats {
		for _, st := range sts {
			m := byPart[st.GetMirror()]
			if m == nil {
				m = map[key]map[int32]*twinlogv1.MirrorPartitionStatus{}
				byPart[st.GetMirror()] = m
			}
			k := key{st.GetTopic(), st.GetPartition()}
			if m[k] == nil {
				m[k] = map[int32]*twinlogv1.MirrorPartitionStatus{}
			}
			m[k][b] = st
		}
	}
	resp := &twinlogv1.DescribeMirrorsResponse{}
	for _, name := range names {
		mr := c.state.Mirror(name)
		if mr == nil {
			return nil, status.Errorf(codes.NotFound, "unknown mirror %q", name)
		}
		desc := &twinlogv1.MirrorDescription{
			Name: mr.GetName(), SourceBootstrap: slices.Clone(mr.GetSourceBootstrap()), SourceClusterId: mr.GetSourceClusterId(),
		}
		if st := c.offsetSync[name]; st != nil {
			desc.OffsetSync = proto.Clone(st).(*twinlogv1.MirrorOffsetSyncStatus)
		}
		if res := c.lastACLSync; res != nil {
			desc.AclSync = res.status(name)
		}
		for _, mt := range mr.GetTopics() {
			tr := c.state.Topic(mt.GetTopic())
			for p := range tr.GetPartitionCount() {
				pr := c.state.Partition(mt.GetTopic(), p)
				reports := byPart[name][key{mt.GetTopic(), p}]
				var st *twinlogv1.MirrorPartitionStatus
				if r, ok := reports[pr.GetLeader()]; ok && pr != nil {
					st = r
				} else {
					for _, b := range slices.Sorted(maps.Keys(reports)) {
						if r := reports[b]; st == nil || r.GetLeaderEpoch() > st.GetLeaderEpoch() {
							st = r
						}
					}
				}
				if st != nil {
					st = proto.Clone(st).(*twinlogv1.MirrorPartitionStatus)
				} else {
					st = &twinlogv1.MirrorPartitionStatus{Mirror: name, Topic: mt.GetTopic(), Partition: p,
						LeaderId: pr.GetLeader(), LeaderEpoch: pr.GetLeaderEpoch()}
				}
				st.DesiredState = mt.GetDesiredState()
				desc.Partitions = append(desc.Partitions, st)
			}
		}
		resp.Mirrors = append(resp.Mirrors, desc)
	}
	return resp, nil
}
