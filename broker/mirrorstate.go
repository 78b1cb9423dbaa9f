package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/storage"
)

// __mirror_state (SPEC §6.4): the record format and its reading are
// mirror/state's; this file reads the topic, writes it and answers
// GetLastMirroredEpochs from it.

// mirrorStateStore is what this broker read of __mirror_state (a
// state.Store over stateLog) and the topics it last saw.
type mirrorStateStore struct {
	*state.Store
	mu sync.Mutex
	// seen: the topics (by id) of the last reconciled image, to find
	// deletions and DeleteMirrors for the tombstones (SPEC §6.4).
	seen map[string]stateTopic
}

// stateTopic is what the tombstones of one topic need.
type stateTopic struct {
	name, id, mirror string
	partitions       int32
}

// noteStateTombstones compares the image with the last one and has the
// tombstones appended (SPEC §6.4): a deleted topic loses both keys of every
// partition, a topic that left its mirror because of a DeleteMirror loses
// the run keys and keeps its LMLE keys (taints included). Every broker
// reads the same metadata stream; only the leader of the topic's
// __mirror_state partition appends. Called after every applied image.
func (b *Broker) noteStateTombstones(ctx context.Context) {
	b.metaMu.Lock()
	cur := map[string]stateTopic{}
	for _, name := range b.image.TopicNames() {
		if name == state.Topic {
			continue
		}
		t := b.image.Topic(name)
		cur[t.GetTopicId()] = stateTopic{name: name, id: t.GetTopicId(), mirror: t.GetMirrorName(), partitions: t.GetPartitionCount()}
	}
	var keys []stateTombstone
	b.mstate.mu.Lock()
	prev, first := b.mstate.seen, b.mstate.seen == nil
	b.mstate.seen = cur
	b.mstate.mu.Unlock()
	if !first {
		for id, old := range prev {
			now, ok := cur[id]
			for p := range old.partitions {
				if !ok {
					keys = append(keys, stateTombstone{old.name, state.LmleKey(plan.LmleKey{TopicID: id, Partition: p})})
				}
				if old.mirror != "" && (!ok || now.mirror != old.mirror) && b.image.Mirror(old.mirror) == nil {
					keys = append(keys, stateTombstone{old.name, state.RunKey(plan.RunKey{Mirror: old.mirror, TopicID: id, Partition: p})})
				}
			}
		}
	}
	b.metaMu.Unlock()
	if len(keys) == 0 {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.appendTombstones(ctx, keys)
	}()
}

type stateTombstone struct {
	topic string
	key   []byte
}

// appendTombstones writes the tombstones whose __mirror_state partition
// this broker leads, retrying while it leads it.
func (b *Broker) appendTombstones(ctx context.Context, keys []stateTombstone) {
	for _, k := range keys {
		for attempt := 0; ; attempt++ {
			sp, ok := b.mstate.PartitionOf(k.topic)
			if !ok || !(stateLog{b}).Leads(sp) {
				break // not ours: the leader appends it
			}
			err := b.writeMirrorState(ctx, k.topic, k.key, nil)
			if err == nil {
				b.log.Info("mirror state tombstone", "key", strconv.Quote(string(k.key)))
				break
			}
			if ctx.Err() != nil || attempt >= 20 {
				b.log.Warn("mirror state tombstone not written", "key", strconv.Quote(string(k.key)), "err", err)
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(b.cfg.TickInterval * 10):
			}
		}
	}
}

// stateLog is __mirror_state as this broker reads it (state.Log).
type stateLog struct{ b *Broker }

func (l stateLog) NowMs() int64 { return l.b.nowMs() }

func (l stateLog) Partitions() (int32, bool) {
	b := l.b
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	t := b.image.Topic(state.Topic)
	if t == nil {
		return 0, false
	}
	return t.GetPartitionCount(), true
}

// Leads reports whether this broker leads __mirror_state partition sp.
func (l stateLog) Leads(sp int32) bool {
	p := l.b.partition(twinlog.TopicPartition{Topic: state.Topic, Partition: sp})
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usableLocked() == nil && p.r.Role() == replica.RoleLeader
}

// Read reads the local replica when it leads sp, else fetches from the
// leader on a goroutine of the run (RPCTimeout).
func (l stateLog) Read(sp int32, from twinlog.Offset, last twinlog.Epoch, done func([]storage.Record, twinlog.Epoch, twinlog.Offset, error)) {
	b, tp := l.b, twinlog.TopicPartition{Topic: state.Topic, Partition: sp}
	if p, hw, leso, ok := b.stateLeaderLocal(tp); ok {
		done(state.ReadLocal(p.log, from, last, hw, leso))
		return
	}
	b.goLoop(b.runCtx, func(ctx context.Context) { done(b.readStateRemote(ctx, tp, from, last)) })
}

// stateLeaderLocal returns tp's partition with its HW and LE start offset
// when this broker leads it, usable (ok).
func (b *Broker) stateLeaderLocal(tp twinlog.TopicPartition) (p *partition, hw, leso twinlog.Offset, ok bool) {
	p = b.partition(tp)
	if p == nil {
		return nil, -1, -1, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.usableLocked() != nil || p.r.Role() != replica.RoleLeader {
		return nil, -1, -1, false
	}
	return p, p.r.HighWatermark(), p.r.LeaderEpochStartOffset(), true
}

// readStateRemote reads records of a __mirror_state partition from offset
// from, below the leader's HW, with a consumer fetch from its leader, and
// returns them with the epoch of the last and that HW.
func (b *Broker) readStateRemote(ctx context.Context, tp twinlog.TopicPartition, from twinlog.Offset, last twinlog.Epoch) ([]storage.Record, twinlog.Epoch, twinlog.Offset, error) {
	leader, ok := b.leaderHint(tp)
	if !ok || leader < 0 {
		return nil, twinlog.NoEpoch, -1, state.ErrNotReady
	}
	addr, ok := b.brokerAddr(twinlog.BrokerID(leader))
	if !ok {
		return nil, twinlog.NoEpoch, -1, state.ErrNotReady
	}
	c, err := b.conn(addr)
	if err != nil {
		return nil, twinlog.NoEpoch, -1, err
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RPCTimeout)
	defer cancel()
	resp, err := pb.NewFetchServiceClient(c).Fetch(rctx, state.ReadRequest(tp.Partition, from, last, b.leaderEpochHint(tp)))
	if err != nil {
		return nil, twinlog.NoEpoch, -1, err
	}
	return state.ReadAnswer(tp.Partition, resp)
}

func (b *Broker) leaderEpochHint(tp twinlog.TopicPartition) int32 {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	if pr := b.image.Partition(tp.Topic, tp.Partition); pr != nil {
		return pr.GetLeaderEpoch()
	}
	return -1
}

// mirrorRecords reads tp's records (the run record in mirror, the LMLE
// record; nil when absent) after reading its __mirror_state partition up
// to the HW.
func (b *Broker) mirrorRecords(ctx context.Context, mirror string, tp twinlog.TopicPartition, topicID string) (*pb.MirrorRunRecord, *pb.MirrorLmleRecord, error) {
	type loaded struct {
		run  *pb.MirrorRunRecord
		lmle *pb.MirrorLmleRecord
		err  error
	}
	c := make(chan loaded, 1)
	b.mstate.Load(tp.Topic, mirror, topicID, tp.Partition, func(run *pb.MirrorRunRecord, lmle *pb.MirrorLmleRecord, err error) {
		c <- loaded{run, lmle, err}
	})
	select {
	case l := <-c:
		return l.run, l.lmle, l.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// writeMirrorState appends one record to topic's __mirror_state partition
// with acks=all (SPEC §6.4) through the partition's leader.
func (b *Broker) writeMirrorState(ctx context.Context, topic string, key []byte, value proto.Message) error {
	sp, batch, err := b.mstate.Record(topic, key, value)
	if err != nil {
		return err
	}
	tp := twinlog.TopicPartition{Topic: state.Topic, Partition: sp}
	leader, ok := b.leaderHint(tp)
	if !ok || leader < 0 {
		return fmt.Errorf("%w: no leader", state.ErrNotReady)
	}
	addr, ok := b.brokerAddr(twinlog.BrokerID(leader))
	if !ok {
		return fmt.Errorf("%w: leader address", state.ErrNotReady)
	}
	c, err := b.conn(addr)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RPCTimeout)
	defer cancel()
	// AppendInternal, not Produce: Produce refuses internal topics.
	resp, err := pb.NewReplicationServiceClient(c).AppendInternal(rctx, &pb.AppendInternalRequest{
		BrokerId: int32(b.cfg.ID), BrokerEpoch: b.brokerEpoch(),
		TimeoutMs: int32((b.cfg.RPCTimeout - 100*time.Millisecond).Milliseconds()),
		Partition: &pb.ProducePartitionData{Topic: tp.Topic, Partition: tp.Partition, Records: batch},
	})
	if err != nil {
		return err
	}
	if resp.GetPartition() == nil {
		return fmt.Errorf("%w: append answered no partition", state.ErrNotReady)
	}
	if e := resp.GetPartition().GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
		return fmt.Errorf("%w: %v", state.ErrNotReady, e)
	}
	return nil
}

// GetLastMirroredEpochs answers the other cluster's LMLE query (SPEC §6.4,
// state.Store.Answer).
func (b *Broker) GetLastMirroredEpochs(ctx context.Context, req *pb.GetLastMirroredEpochsRequest) (*pb.GetLastMirroredEpochsResponse, error) {
	b.metaMu.Lock()
	view, mirror, err := state.SourceViewOf(b.image, req.GetTopic(), req.GetMinMetadataOffset())
	b.metaMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRunning, err)
	}
	c := make(chan *pb.GetLastMirroredEpochsResponse, 1)
	b.mstate.Answer(req, view, mirror, func(resp *pb.GetLastMirroredEpochsResponse) { c <- resp })
	select {
	case resp := <-c:
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type mirrorSourceServer struct {
	pb.UnimplementedMirrorSourceServiceServer
	b *Broker
}

func (s mirrorSourceServer) GetLastMirroredEpochs(ctx context.Context, req *pb.GetLastMirroredEpochsRequest) (*pb.GetLastMirroredEpochsResponse, error) {
	resp, err := s.b.GetLastMirroredEpochs(ctx, req)
	return resp, toStatus(err)
}

// MirrorStateRecords reads tp's __mirror_state records (run key of mirror,
// LMLE key) up to the state partition's HW; nil when absent. For tests.
func (b *Broker) MirrorStateRecords(ctx context.Context, mirror string, tp twinlog.TopicPartition, topicID string) (*pb.MirrorRunRecord, *pb.MirrorLmleRecord, error) {
	return b.mirrorRecords(ctx, mirror, tp, topicID)
}
