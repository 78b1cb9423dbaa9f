package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/source"
	"github.com/twinlog/twinlog/storage/epoch"
)

// PreviewMirrorTruncation says, changing nothing, what starting a mirror's
// topics would truncate on this cluster: per partition, the source's last
// mirrored leader epoch (GetLastMirroredEpochs, as the run asks it) and the
// cut plan.LMLETruncationOffset makes of this cluster's leader's log
// (GetReplicaLogInfo: log start, HW, LEO, epoch cache), which is the
// decision the leader's mirror run takes with the same inputs (SPEC §6.6
// step 2). It is what a failback discards, shown before it does
// (`mirrors create|start --dry-run`). A divergence found later while
// fetching may cut further (§6.3); a topic this cluster lacks is created by
// the mirror, empty, and loses nothing.
func (s mirrorServer) PreviewMirrorTruncation(ctx context.Context, req *twinlogv1.PreviewMirrorTruncationRequest) (*twinlogv1.PreviewMirrorTruncationResponse, error) {
	c := s.c
	bootstrap, topics := req.GetSourceBootstrap(), req.GetTopics()
	m, err := read(c, func(st *metastate.State) *twinlogv1.MirrorRecord { return st.Mirror(req.GetMirror()) })
	if err != nil {
		return nil, err
	}
	if len(bootstrap) == 0 {
		bootstrap = m.GetSourceBootstrap()
	}
	if len(topics) == 0 {
		for _, mt := range m.GetTopics() {
			topics = append(topics, mt.GetTopic())
		}
	}
	switch {
	case len(bootstrap) == 0:
		return nil, status.Errorf(codes.InvalidArgument, "mirror %q does not exist here: give the source's addresses", req.GetMirror())
	case len(topics) == 0:
		return nil, status.Errorf(codes.InvalidArgument, "no topics: mirror %q has none, name them", req.GetMirror())
	case len(topics) > maxPreviewTopics:
		return nil, status.Errorf(codes.InvalidArgument, "%d topics: at most %d per preview", len(topics), maxPreviewTopics)
	}
	ctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	src, sources := c.resolveSource(ctx, bootstrap, topics)

	// The local image, under the read lock; I/O after.
	type pending struct {
		out      *twinlogv1.MirrorTruncationPreview
		sourceID string
		addr     string
		topicID  string
	}
	var parts []*pending
	resp := &twinlogv1.PreviewMirrorTruncationResponse{}
	fail := func(p *twinlogv1.MirrorTruncationPreview, code twinlogv1.ErrorCode, format string, args ...any) {
		p.Error, p.ErrorMessage = code, fmt.Sprintf(format, args...)
	}
	running := map[string]bool{} // the mirror's topics already started
	for _, mt := range m.GetTopics() {
		switch mt.GetDesiredState() {
		case twinlogv1.MirrorState_MIRROR_STATE_MIRRORING, twinlogv1.MirrorState_MIRROR_STATE_PAUSED:
			running[mt.GetTopic()] = true
		}
	}
	c.mu.RLock()
	clusterID := c.state.ClusterID()
	for _, name := range topics {
		tr := c.state.Topic(name)
		srcTopic, ok := sources[name]
		if tr == nil {
			p := &twinlogv1.MirrorTruncationPreview{Topic: name, Partition: -1, Lmle: -1, TruncationOffset: -1}
			fail(p, twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "no topic %q here: the mirror creates it (nothing is truncated)", name)
			resp.Partitions = append(resp.Partitions, p)
			continue
		}
		for i := range tr.GetPartitionCount() {
			p := &twinlogv1.MirrorTruncationPreview{Topic: name, Partition: i, Leader: -1, Lmle: -1, TruncationOffset: -1,
				LogStartOffset: -1, HighWatermark: -1, LogEndOffset: -1}
			resp.Partitions = append(resp.Partitions, p)
			switch {
			case running[name] && tr.GetMirrorName() == req.GetMirror():
				// Its run truncated when it started; what it holds past
				// the LMLE now was copied from the source.
				p.ErrorMessage = "already mirroring: its truncation was done when it started"
				continue
			case src.ID == "" || !ok:
				fail(p, twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE, "the source (%v) does not answer", bootstrap)
				continue
			case srcTopic.Missing:
				fail(p, twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "the source has no topic %q", name)
				continue
			}
			pr := c.state.Partition(name, i)
			br := c.state.Broker(pr.GetLeader())
			if pr == nil || pr.GetLeader() < 0 || br == nil || br.GetFenced() {
				fail(p, twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, "no unfenced leader here")
				continue
			}
			p.Leader = pr.GetLeader()
			parts = append(parts, &pending{out: p, sourceID: srcTopic.TopicID, topicID: tr.GetTopicId(),
				addr: net.JoinHostPort(br.GetHost(), strconv.Itoa(int(br.GetPort())))})
		}
	}
	c.mu.RUnlock()

	conns := rpcopt.NewPool(c.dial)
	defer conns.Close()
	sc := source.New(source.GRPC(conns.Get), bootstrap, c.cfg.RecoveryRPCTimeout)
	var wg sync.WaitGroup
	sem := make(chan struct{}, previewConcurrency)
	for _, p := range parts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			tp := twinlog.TopicPartition{Topic: p.out.Topic, Partition: p.out.Partition}
			lmle, code, err := sc.LastMirroredEpochWait(ctx, clusterID, p.sourceID, tp)
			switch {
			case err != nil:
				fail(p.out, twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE, "source's last mirrored epoch: %v", err)
				return
			case code != twinlogv1.ErrorCode_ERROR_CODE_NONE:
				fail(p.out, code, "source's last mirrored epoch: %v", code)
				return
			}
			p.out.Lmle = int32(lmle)
			info, err := replicaLogInfo(ctx, conns, p.addr, p.topicID, tp)
			if err != nil {
				fail(p.out, twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE, "leader %d: %v", p.out.Leader, err)
				return
			}
			if info.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
				fail(p.out, info.GetError(), "leader %d: %v", p.out.Leader, info.GetError())
				return
			}
			previewTruncation(p.out, lmle, info, func(e twinlog.Epoch) (twinlog.Epoch, twinlog.Offset, error) {
				return sourceEnd(ctx, sc, conns, tp, e)
			})
		})
	}
	wg.Wait()
	return resp, nil
}

// A preview's bounds: topics per request, partitions asked at once (each
// costs a Metadata and GetLastMirroredEpochs at the source, GetReplicaLogInfo
// here and an OffsetForLeaderEpoch at the source), and its whole time (each
// RPC also has RecoveryRPCTimeout).
const (
	maxPreviewTopics   = 1000
	previewConcurrency = 16
	previewTimeout     = 30 * time.Second
)

// sourceEndFunc answers the source leader's end of epoch e (its
// OffsetForLeaderEpoch): the answer a mirror fetch with lastFetchedEpoch e
// checks against.
type sourceEndFunc func(e twinlog.Epoch) (twinlog.Epoch, twinlog.Offset, error)

// previewTruncation fills out with what a run makes of the log info
// describes, by the run's own rules: the LMLE truncation
// (plan.LMLETruncationOffset, SPEC §6.6 step 2), then the divergence the
// first fetch meets (plan.DivergenceTruncation, §6.3), which is what
// removes the records this cluster wrote in the LMLE's own epoch after the
// source stopped copying them (a planned failover leaves this cluster's
// leader in that epoch). A later divergence may cut further only if the
// source's log changes meanwhile.
func previewTruncation(out *twinlogv1.MirrorTruncationPreview, lmle twinlog.Epoch, info *twinlogv1.ReplicaLogInfo, sourceEnd sourceEndFunc) {
	entries := make([]epoch.Entry, 0, len(info.GetEpochs()))
	for _, e := range info.GetEpochs() {
		entries = append(entries, epoch.Entry{Epoch: twinlog.Epoch(e.GetEpoch()), StartOffset: twinlog.Offset(e.GetStartOffset())})
	}
	cache, err := epoch.NewCache(entries)
	if err != nil {
		out.Error, out.ErrorMessage = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR, fmt.Sprintf("leader's epoch cache: %v", err)
		return
	}
	start, hw, leo := twinlog.Offset(info.GetLogStartOffset()), twinlog.Offset(info.GetHighWatermark()), twinlog.Offset(info.GetLogEndOffset())
	out.LogStartOffset, out.HighWatermark, out.LogEndOffset = int64(start), int64(hw), int64(leo)
	cut := twinlog.NoOffset
	apply := func(t plan.Truncation) {
		if t.NoOp {
			return
		}
		cut = t.Offset
		if t.Full {
			cut = start
			cache, _ = epoch.NewCache(nil)
		} else {
			cache.TruncateFromEnd(t.Offset)
		}
	}
	apply(plan.LMLETruncationOffset(cache, lmle, start, leo))
	end := leo
	if cut >= 0 {
		end = cut
	}
	if el := cache.Latest(); end > start && el != twinlog.NoEpoch {
		se, so, err := sourceEnd(el)
		if err != nil {
			out.Error, out.ErrorMessage = twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE,
				fmt.Sprintf("the source's end of epoch %d: %v (the divergence cut is unknown)", el, err)
		} else if se < el || so < end {
			apply(plan.DivergenceTruncation(cache, start, end, se, so))
		}
	}
	if cut < 0 {
		return
	}
	out.TruncationOffset = int64(cut)
	out.RecordsRemoved = int64(max(leo-cut, 0))
	out.CommittedRecordsRemoved = int64(max(hw-cut, 0))
}

// sourceEnd asks the source's leader of tp for its end of epoch e.
func sourceEnd(ctx context.Context, sc *source.Client, conns *rpcopt.Pool, tp twinlog.TopicPartition, e twinlog.Epoch) (twinlog.Epoch, twinlog.Offset, error) {
	l, code, err := sc.LeaderWait(ctx, tp, false)
	switch {
	case err != nil:
		return 0, 0, err
	case code != twinlogv1.ErrorCode_ERROR_CODE_NONE:
		return 0, 0, fmt.Errorf("source leader: %v", code)
	}
	ends := askEnd(ctx, conns, l.Addr, []leaderQuery{{name: tp.Topic, index: tp.Partition, epoch: int32(l.LeaderEpoch), ask: int32(e)}})
	if ends[0].Err != "" {
		return 0, 0, errors.New(ends[0].Err)
	}
	return twinlog.Epoch(ends[0].Epoch), twinlog.Offset(ends[0].EndOffset), nil
}

// replicaLogInfo asks the broker at addr for tp's log (GetReplicaLogInfo).
func replicaLogInfo(ctx context.Context, conns *rpcopt.Pool, addr, topicID string, tp twinlog.TopicPartition) (*twinlogv1.ReplicaLogInfo, error) {
	conn, err := conns.Get(addr)
	if err != nil {
		return nil, err
	}
	resp, err := twinlogv1.NewReplicationServiceClient(conn).GetReplicaLogInfo(ctx, &twinlogv1.GetReplicaLogInfoRequest{
		BrokerEpoch: -1, Topics: []*twinlogv1.GetReplicaLogInfoTopic{{Topic: tp.Topic, TopicId: topicID, Partitions: []int32{tp.Partition}}},
	})
	if err != nil {
		return nil, err
	}
	for _, t := range resp.GetTopics() {
		for _, p := range t.GetPartitions() {
			if t.GetTopic() == tp.Topic && p.GetPartition() == tp.Partition {
				return p, nil
			}
		}
	}
	return nil, fmt.Errorf("no answer for %v", tp)
}
