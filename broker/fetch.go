package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/mirror/plan"
)

// Fetch serves FOLLOWER, CONSUMER and MIRROR fetches (SPEC §4.3): the
// replica decides each partition, the log supplies the bytes. Without
// minBytes of data it long-polls up to min(maxWaitMs, ctx deadline), woken
// by appends and HW changes of the partitions asked for.
func (b *Broker) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	return b.fetch(ctx, req, nil)
}

// fetch is Fetch reading records into buffers from alloc (nil: fresh ones).
// The gRPC service passes pooledRead: its codec (codec.Server) sends the
// buffers as they are and returns them to the pool once written; responses
// this function drops go back here.
func (b *Broker) fetch(ctx context.Context, req *pb.FetchRequest, alloc func(int) []byte) (*pb.FetchResponse, error) {
	start := time.Now()
	defer func() { b.obs.ObserveRequest("fetch", time.Since(start)) }()
	if err := validateFetch(req, b.cfg.FetchMaxBytes, b.cfg.Log.MaxBatchBytes); err != nil {
		return nil, err
	}
	wait := min(time.Duration(max(req.GetMaxWaitMs(), 0))*time.Millisecond, MaxFetchWait)
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-5*time.Millisecond)
	}
	parts := make([]*partition, len(req.GetPartitions()))
	for i, fp := range req.GetPartitions() {
		parts[i] = b.partition(twinlog.TopicPartition{Topic: fp.GetTopic(), Partition: fp.GetPartition()})
	}
	targets := b.fetchTargets(req, parts, alloc)
	var ch chan struct{}
	var waits []*fetchWaiter // per partition; nil without a long poll
	var timer *time.Timer
	follower := req.GetFetcherType() == pb.FetcherType_FETCHER_TYPE_FOLLOWER
	for {
		if wait > 0 && ch == nil {
			// Register before evaluating so no append slips between.
			ch = make(chan struct{}, 1)
			waits = make([]*fetchWaiter, len(parts))
			for i, p := range parts {
				if p != nil {
					waits[i] = &fetchWaiter{ch: ch, follower: follower}
					waits[i].seen.Store(-1)
					p.addWaiter(waits[i])
				}
			}
			defer func() {
				for i, p := range parts {
					if p != nil {
						p.removeWaiter(waits[i])
					}
				}
			}()
		}
		resp, bytes, stop := b.fetchOnce(req, targets, waits)
		// minBytes above what one response may carry waits no longer
		// than for a full response.
		if stop || bytes >= min(int(max(req.GetMinBytes(), 1)), serve.Budget(req.GetMaxBytes(), b.cfg.FetchMaxBytes)) || wait <= 0 {
			b.obs.ObserveBytesOut(bytes)
			return resp, nil
		}
		if alloc != nil {
			releaseFetchBuffers(resp)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
			resp, bytes, _ = b.fetchOnce(req, targets, nil)
			b.obs.ObserveBytesOut(bytes)
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fetchPartitionOverhead bounds the encoded size of one
// FetchPartitionResponse without its topic name and records (every field
// at its largest, TestFetchPartitionOverhead), and of its share of the
// response's framing.
const fetchPartitionOverhead = 128

// validateFetch refuses a malformed Fetch (INVALID_REQUEST), before any
// partition is looked at. fetchMaxBytes and maxBatchBytes are
// Config.FetchMaxBytes and Config.Log.MaxBatchBytes: the
// per-partition fields of the answer must fit beside that many record
// bytes and one more batch (Config.Validate leaves room for them) under
// the transport's message limit, so a request for more partitions than fit
// is refused instead of answered with a message the transport drops.
func validateFetch(req *pb.FetchRequest, fetchMaxBytes, maxBatchBytes int) error {
	switch req.GetFetcherType() {
	case pb.FetcherType_FETCHER_TYPE_FOLLOWER:
		if req.GetReplicaId() < 0 {
			return invalidf("follower fetch with replica id %d", req.GetReplicaId())
		}
	case pb.FetcherType_FETCHER_TYPE_CONSUMER, pb.FetcherType_FETCHER_TYPE_MIRROR:
	default:
		return invalidf("fetcher type %v", req.GetFetcherType())
	}
	if len(req.GetPartitions()) == 0 {
		return invalidf("fetch without partitions")
	}
	if req.GetMaxWaitMs() < 0 || req.GetMinBytes() < 0 || req.GetMaxBytes() < 0 {
		return invalidf("negative maxWaitMs, minBytes or maxBytes")
	}
	if req.GetMaxBytes() > 0 && req.GetMinBytes() > req.GetMaxBytes() {
		return invalidf("minBytes %d above maxBytes %d", req.GetMinBytes(), req.GetMaxBytes())
	}
	room := MaxMessageBytes - fetchMaxBytes - maxBatchBytes
	seen := make(map[twinlog.TopicPartition]struct{}, len(req.GetPartitions()))
	for _, fp := range req.GetPartitions() {
		if fp.GetPartitionMaxBytes() < 0 {
			return invalidf("negative partition max bytes")
		}
		tp := twinlog.TopicPartition{Topic: fp.GetTopic(), Partition: fp.GetPartition()}
		if _, dup := seen[tp]; dup {
			// One answer per partition: a duplicate would be read twice
			// into one response, and a FOLLOWER's second copy is a stale
			// fetch of the same seq.
			return invalidf("partition %s-%d twice in one fetch", tp.Topic, tp.Partition)
		}
		seen[tp] = struct{}{}
		if room -= len(tp.Topic) + fetchPartitionOverhead; room < 0 {
			return invalidf("fetch of %d partitions: the answer could exceed the %d-byte message limit", len(req.GetPartitions()), MaxMessageBytes)
		}
	}
	return nil
}

// fetchTargets resolves the request's partitions for serve.Once: a
// partition not hosted, or a mirror fetch of another topic id, is refused
// up front; the others read into buffers from alloc.
func (b *Broker) fetchTargets(req *pb.FetchRequest, parts []*partition, alloc func(int) []byte) []serve.Target {
	ts := make([]serve.Target, len(parts))
	for i, fp := range req.GetPartitions() {
		p := parts[i]
		switch {
		case p == nil:
			ts[i].Error, ts[i].LeaderID = b.notHosted(twinlog.TopicPartition{Topic: fp.GetTopic(), Partition: fp.GetPartition()})
		default:
			// A requester whose mirror topic has another id than this
			// partition (re-created since its Metadata) is refused.
			if ts[i].Error = plan.MirrorFetchTopicID(req.GetFetcherType(), fp.GetTopicId(), p.topicID); ts[i].Error == pb.ErrorCode_ERROR_CODE_NONE {
				ts[i].P = servePartition{p: p, alloc: alloc}
			}
		}
	}
	return ts
}

// fetchOnce evaluates every partition once (serve.Once). It records in
// waits (when non-nil) the read bound each partition was evaluated at, so
// only growth beyond it wakes the long poll; and it does so before the
// Ready is processed: the HW this very fetch advances must not wake its
// own long poll (the waiter still said −1), which cost every acks=all
// completion an empty re-evaluation of all the fetch's partitions.
func (b *Broker) fetchOnce(req *pb.FetchRequest, targets []serve.Target, waits []*fetchWaiter) (*pb.FetchResponse, int, bool) {
	var evaluated func(int, replica.FetchDecision)
	if waits != nil {
		evaluated = func(i int, d replica.FetchDecision) {
			if d.Error == pb.ErrorCode_ERROR_CODE_NONE {
				waits[i].seen.Store(int64(d.ReadUpTo))
			}
		}
	}
	return serve.Once(req, targets, serve.Budget(req.GetMaxBytes(), b.cfg.FetchMaxBytes), b.nowMs(), evaluated)
}

// servePartition is a hosted partition as serve.Once reads it.
type servePartition struct {
	p     *partition
	alloc func(int) []byte
}

func (s servePartition) Lock()                     { s.p.mu.Lock() }
func (s servePartition) Unlock()                   { s.p.mu.Unlock() }
func (s servePartition) Replica() *replica.Replica { return s.p.r }
func (s servePartition) Unusable() pb.ErrorCode    { return storageCode(s.p.usableLocked()) }
func (s servePartition) ProcessReady()             { s.p.processReadyLocked() }

func (s servePartition) Read(from twinlog.Offset, maxBytes int, upTo twinlog.Offset) ([]byte, pb.ErrorCode) {
	rr, err := s.p.log.ReadInto(from, maxBytes, upTo, s.alloc)
	if err != nil {
		return nil, storageCode(err)
	}
	return rr.Batches, pb.ErrorCode_ERROR_CODE_NONE
}

func (s servePartition) OffsetForTimestamp(ts int64) (twinlog.Offset, pb.ErrorCode) {
	o, err := s.p.log.OffsetForTimestamp(ts)
	if err != nil {
		return o, storageCode(err)
	}
	return o, pb.ErrorCode_ERROR_CODE_NONE
}

// offsetsTarget is a ListOffsets or OffsetForLeaderEpoch partition as this
// broker holds it (serve.ListOffsets, serve.OffsetForLeaderEpoch).
func (b *Broker) offsetsTarget(tp twinlog.TopicPartition) serve.Target {
	p := b.partition(tp)
	if p == nil {
		code, leader := b.notHosted(tp)
		return serve.Target{Error: code, LeaderID: leader}
	}
	return serve.Target{P: servePartition{p: p}}
}

// ListOffsets answers from leaders (SPEC §4.7).
func (b *Broker) ListOffsets(ctx context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	return serve.ListOffsets(req, b.offsetsTarget), nil
}

// OffsetForLeaderEpoch answers the leader's endOffsetFor (SPEC §4.4).
func (b *Broker) OffsetForLeaderEpoch(ctx context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	return serve.OffsetForLeaderEpoch(req, b.offsetsTarget), nil
}

// GetReplicaLogInfo answers an unclean recovery round (SPEC §3.5) and a
// failback's preview (the log start, HW and epoch cache too).
func (b *Broker) GetReplicaLogInfo(ctx context.Context, req *pb.GetReplicaLogInfoRequest) (*pb.GetReplicaLogInfoResponse, error) {
	resp := &pb.GetReplicaLogInfoResponse{BrokerEpoch: b.brokerEpoch()}
	for _, t := range req.GetTopics() {
		tr := &pb.GetReplicaLogInfoTopicResponse{Topic: t.GetTopic()}
		resp.Topics = append(resp.Topics, tr)
		for _, i := range t.GetPartitions() {
			out := &pb.ReplicaLogInfo{Partition: i, LastWrittenLeaderEpoch: -1, LogEndOffset: -1}
			tr.Partitions = append(tr.Partitions, out)
			tp := twinlog.TopicPartition{Topic: t.GetTopic(), Partition: i}
			p := b.partition(tp)
			if p == nil && b.offlineErr(tp) != nil {
				// Its log failed to open: the copy exists but cannot be read
				// (the candidate is no candidate until repaired).
				out.Error = pb.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR
				continue
			}
			if p == nil || (t.GetTopicId() != "" && p.topicID != t.GetTopicId()) {
				out.Error = pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
				continue
			}
			p.mu.Lock()
			if err := p.usableLocked(); err != nil {
				out.Error = storageCode(err)
			} else {
				es := p.r.EpochEntries()
				if len(es) > 0 {
					out.LastWrittenLeaderEpoch = int32(es[len(es)-1].Epoch)
				}
				for _, e := range es {
					out.Epochs = append(out.Epochs, &pb.EpochStartOffset{Epoch: int32(e.Epoch), StartOffset: int64(e.StartOffset)})
				}
				out.LogEndOffset = int64(p.r.LogEndOffset())
				out.LogStartOffset = int64(p.r.LogStartOffset())
				out.HighWatermark = int64(p.r.HighWatermark())
			}
			p.mu.Unlock()
		}
	}
	return resp, nil
}

// Metadata answers from this broker's metadata image (SPEC §4.6), with the
// cluster's producer id space (a mirror's controller checks it,
// metastate.ProducerIDSpaceRefusal); ErrNotRunning until the image holds
// the cluster's metadata.
func (b *Broker) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	resp, err := b.image.Metadata(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRunning, err)
	}
	resp.ClusterId, resp.ProducerIdSpace = b.clusterIDLocked(), b.producerIDSpaceLocked()
	return resp, nil
}
