package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/source"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/storage"
)

// __mirror_state (SPEC §6.4): the record format and its reading are
// mirror/state's; this file reads the topic, writes it and answers
// GetLastMirroredEpochs from it.

var errStateNotReady = errors.New("broker: __mirror_state not readable")

// mirrorStateStore caches what this broker read of __mirror_state.
type mirrorStateStore struct {
	mu    sync.Mutex
	views map[int32]*state.View
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
		if name == source.StateTopic {
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
			sp, ok := b.statePartitionOf(k.topic)
			if !ok || !b.leadsState(sp) {
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

// leadsState reports whether this broker leads __mirror_state partition sp.
func (b *Broker) leadsState(sp int32) bool {
	p := b.partition(twinlog.TopicPartition{Topic: source.StateTopic, Partition: sp})
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usableLocked() == nil && p.r.Role() == replica.RoleLeader
}

// statePartitionOf returns the __mirror_state partition holding topic's
// keys and whether the topic exists in this cluster.
func (b *Broker) statePartitionOf(topic string) (int32, bool) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	t := b.image.Topic(source.StateTopic)
	if t == nil {
		return 0, false
	}
	return source.StatePartition(topic, t.GetPartitionCount()), true
}

// syncMirrorState reads __mirror_state partition sp up to its leader's HW
// (locally when this broker leads it) and returns the view. The view is
// shared: callers read it under b.mstate.mu via withStateView.
func (b *Broker) syncMirrorState(ctx context.Context, sp int32) error {
	tp := twinlog.TopicPartition{Topic: source.StateTopic, Partition: sp}
	for {
		b.mstate.mu.Lock()
		v := b.mstate.views[sp]
		if v == nil {
			v = &state.View{}
			b.mstate.views[sp] = v
		}
		from := v.Next
		b.mstate.mu.Unlock()

		recs, hw, err := b.readState(ctx, tp, from)
		if err != nil {
			return err
		}
		b.mstate.mu.Lock()
		if b.mstate.views[sp] == v && v.Next == from {
			for _, r := range recs {
				if r.Offset >= v.Next {
					if err := v.Apply(r.Key, r.Value); err != nil {
						// Only brokers write the topic (AppendInternal);
						// a record none of them writes is skipped, loudly.
						b.log.Warn("skipping unreadable __mirror_state record", "partition", sp, "offset", r.Offset, "err", err)
					}
					v.Next = r.Offset + 1
				}
			}
			if len(recs) == 0 && hw > v.Next {
				v.Next = hw // nothing readable in between (should not happen)
			}
		}
		next := v.Next
		b.mstate.mu.Unlock()
		if next >= hw {
			return nil
		}
	}
}

// readState reads records of a __mirror_state partition from offset from,
// below the leader's HW, and returns them with that HW.
func (b *Broker) readState(ctx context.Context, tp twinlog.TopicPartition, from twinlog.Offset) ([]storage.Record, twinlog.Offset, error) {
	if p := b.partition(tp); p != nil {
		p.mu.Lock()
		leader := p.usableLocked() == nil && p.r.Role() == replica.RoleLeader
		hw := p.r.HighWatermark()
		p.mu.Unlock()
		if leader {
			if from >= hw {
				return nil, hw, nil
			}
			rr, err := p.log.Read(from, 4<<20, hw)
			if err != nil {
				return nil, -1, err
			}
			recs, err := decodeStateRecords(rr.Batches)
			return recs, hw, err
		}
	}
	leader, ok := b.leaderHint(tp)
	if !ok || leader < 0 {
		return nil, -1, errStateNotReady
	}
	addr, ok := b.brokerAddr(twinlog.BrokerID(leader))
	if !ok {
		return nil, -1, errStateNotReady
	}
	c, err := b.conn(addr)
	if err != nil {
		return nil, -1, err
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RPCTimeout)
	defer cancel()
	resp, err := pb.NewFetchServiceClient(c).Fetch(rctx, &pb.FetchRequest{
		ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, MaxBytes: 4 << 20,
		Partitions: []*pb.FetchPartition{{Topic: tp.Topic, Partition: tp.Partition, FetchOffset: int64(from),
			CurrentLeaderEpoch: b.leaderEpochHint(tp), LastFetchedEpoch: -1}},
	})
	if err != nil {
		return nil, -1, err
	}
	// A peer's answer is input: one partition, the one asked for, or an
	// error (never an index panic in the runner).
	if n := len(resp.GetPartitions()); n != 1 {
		return nil, -1, fmt.Errorf("%w: fetch answered %d partitions", errStateNotReady, n)
	}
	pr := resp.GetPartitions()[0]
	if pr.GetTopic() != tp.Topic || pr.GetPartition() != tp.Partition {
		return nil, -1, fmt.Errorf("%w: fetch of %s-%d answered %s-%d", errStateNotReady, tp.Topic, tp.Partition, pr.GetTopic(), pr.GetPartition())
	}
	if pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return nil, -1, fmt.Errorf("%w: %v", errStateNotReady, pr.GetError())
	}
	recs, err := decodeStateRecords(pr.GetRecords())
	return recs, twinlog.Offset(pr.GetHighWatermark()), err
}

func decodeStateRecords(buf []byte) ([]storage.Record, error) {
	var out []storage.Record
	for bv, err := range storage.Batches(buf) {
		if err != nil {
			return nil, err
		}
		rs, err := bv.Records()
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
			out = append(out, r)
		}
	}
	return out, nil
}

func (b *Broker) leaderEpochHint(tp twinlog.TopicPartition) int32 {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	if pr := b.image.Partition(tp.Topic, tp.Partition); pr != nil {
		return pr.GetLeaderEpoch()
	}
	return -1
}

// mirrorRecords returns the applied records of a partition's keys after
// reading its __mirror_state partition up to the HW (nil: none; ok false
// when the state topic could not be read).
func (b *Broker) mirrorRecords(ctx context.Context, mirror string, tp twinlog.TopicPartition, topicID string) (*pb.MirrorRunRecord, *pb.MirrorLmleRecord, error) {
	sp, ok := b.statePartitionOf(tp.Topic)
	if !ok {
		return nil, nil, nil
	}
	if err := b.syncMirrorState(ctx, sp); err != nil {
		return nil, nil, err
	}
	b.mstate.mu.Lock()
	defer b.mstate.mu.Unlock()
	v := b.mstate.views[sp]
	var run *pb.MirrorRunRecord
	var lmle *pb.MirrorLmleRecord
	if r, ok := v.Run.Get(plan.RunKey{Mirror: mirror, TopicID: topicID, Partition: tp.Partition}); ok {
		run = proto.Clone(r).(*pb.MirrorRunRecord)
	}
	if l, ok := v.Lmle.Get(plan.LmleKey{TopicID: topicID, Partition: tp.Partition}); ok {
		lmle = proto.Clone(l).(*pb.MirrorLmleRecord)
	}
	return run, lmle, nil
}

// writeMirrorState appends one record to topic's __mirror_state partition
// with acks=all (SPEC §6.4) through the partition's leader.
func (b *Broker) writeMirrorState(ctx context.Context, topic string, key []byte, value proto.Message) error {
	sp, ok := b.statePartitionOf(topic)
	if !ok {
		return fmt.Errorf("%w: no %s topic", errStateNotReady, source.StateTopic)
	}
	tp := twinlog.TopicPartition{Topic: source.StateTopic, Partition: sp}
	var val []byte
	if value != nil {
		var err error
		if val, err = proto.Marshal(value); err != nil {
			return err
		}
	}
	batch, err := storage.EncodeBatch([]storage.Record{{Timestamp: b.nowMs(), Key: key, Value: val}}, storage.BatchOptions{})
	if err != nil {
		return err
	}
	leader, ok := b.leaderHint(tp)
	if !ok || leader < 0 {
		return fmt.Errorf("%w: no leader", errStateNotReady)
	}
	addr, ok := b.brokerAddr(twinlog.BrokerID(leader))
	if !ok {
		return fmt.Errorf("%w: leader address", errStateNotReady)
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
		return fmt.Errorf("%w: append answered no partition", errStateNotReady)
	}
	if e := resp.GetPartition().GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
		return fmt.Errorf("%w: %v", errStateNotReady, e)
	}
	return nil
}

// GetLastMirroredEpochs answers the other cluster's LMLE query (SPEC §6.4)
// with plan.AnswerLastMirroredEpoch: a topic or partition this cluster does
// not have, or has under another topic id, is an error, never −1.
func (b *Broker) GetLastMirroredEpochs(ctx context.Context, req *pb.GetLastMirroredEpochsRequest) (*pb.GetLastMirroredEpochsResponse, error) {
	resp := &pb.GetLastMirroredEpochsResponse{}
	view := plan.SourceView{}
	sp, has := b.statePartitionOf(req.GetTopic())
	view.HasStateTopic = has
	b.metaMu.Lock()
	mirror := ""
	if t := b.image.Topic(req.GetTopic()); t != nil {
		view.LocalTopicID, view.PartitionCount = t.GetTopicId(), t.GetPartitionCount()
		mirror = t.GetMirrorName()
		if mirror != "" {
			view.InMirror = true
			if m := b.image.Mirror(mirror); m != nil {
				for _, mt := range m.GetTopics() {
					if mt.GetTopic() == req.GetTopic() {
						view.DesiredState = mt.GetDesiredState()
					}
				}
			}
		}
	}
	b.metaMu.Unlock()
	if has {
		stp := twinlog.TopicPartition{Topic: source.StateTopic, Partition: sp}
		if p := b.partition(stp); p != nil {
			p.mu.Lock()
			view.StateLeader = p.usableLocked() == nil && p.r.Role() == replica.RoleLeader
			p.mu.Unlock()
		}
		if view.StateLeader {
			view.CaughtUp = b.syncMirrorState(ctx, sp) == nil
		}
	}
	for _, part := range req.GetPartitions() {
		v := view
		v.Partition = part
		if has && view.CaughtUp {
			b.mstate.mu.Lock()
			sv := b.mstate.views[sp]
			if l, ok := sv.Lmle.Get(plan.LmleKey{TopicID: view.LocalTopicID, Partition: part}); ok {
				v.Record = proto.Clone(l).(*pb.MirrorLmleRecord)
			}
			if r, ok := sv.Run.Get(plan.RunKey{Mirror: mirror, TopicID: view.LocalTopicID, Partition: part}); ok {
				v.RunState = r.GetState()
			}
			b.mstate.mu.Unlock()
		}
		lmle, code := plan.AnswerLastMirroredEpoch(req.GetRequesterClusterId(), req.GetTopicId(), v)
		resp.Partitions = append(resp.Partitions, &pb.LastMirroredEpoch{Partition: part, Error: code, Lmle: int32(lmle)})
	}
	return resp, nil
}

// mirrorFetchTopicCheck is the source side's topic-id check of a
// Fetch{MIRROR} partition (plan.MirrorFetchTopicID): a requester whose
// mirror topic has another id than this broker's partition (the topic was
// deleted and re-created since the requester's Metadata) gets
// INCONSISTENT_TOPIC_ID instead of an OFFSET_OUT_OF_RANGE or DivergingEpoch
// computed from another topic's log. Other fetches are not checked.
func mirrorFetchTopicCheck(req *pb.FetchRequest, fp *pb.FetchPartition, p *partition) pb.ErrorCode {
	if req.GetFetcherType() != pb.FetcherType_FETCHER_TYPE_MIRROR {
		return pb.ErrorCode_ERROR_CODE_NONE
	}
	return plan.MirrorFetchTopicID(fp.GetTopicId(), p.topicID)
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
