package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/coord"
	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/group"
	"github.com/twinlog/twinlog/metadata"
)

// The group coordinators' side of the broker (broker/coord.Env): the
// __consumer_offsets partitions this broker leads, read and written
// through the same partitions as every topic.

// groupsCommitTimeout bounds one coordinator append's wait for acks=all
// (Kafka's offsets.commit.timeout.ms).
const groupsCommitTimeout = 5 * time.Second

// groupsReadBytes bounds one read of a loading coordinator.
const groupsReadBytes = 1 << 20

// groupsEnv is coord.Env over a Broker.
type groupsEnv struct{ b *Broker }

var _ coord.Env = groupsEnv{}

func (e groupsEnv) NowMs() int64 { return e.b.nowMs() }

func (e groupsEnv) AfterFunc(d time.Duration, f func()) func() {
	b := e.b
	stop := make(chan struct{})
	var once sync.Once
	b.goLoop(b.runCtx, func(ctx context.Context) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			if !b.crashed() {
				f()
			}
		case <-stop:
		case <-ctx.Done():
		}
	})
	return func() { once.Do(func() { close(stop) }) }
}

func (e groupsEnv) Go(f func(ctx context.Context)) { e.b.goLoop(e.b.runCtx, f) }

func (e groupsEnv) Partitions() (int32, bool) {
	b := e.b
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return coord.PartitionsIn(b.image)
}

func offsetsTP(p int32) twinlog.TopicPartition {
	return twinlog.TopicPartition{Topic: metadata.ConsumerOffsetsTopic, Partition: p}
}

// leaderLocked reports whether p leads in epoch (any epoch for -1).
func leaderLocked(p *partition, epoch int32) bool {
	return p.usableLocked() == nil && p.r.Role() == replica.RoleLeader && (epoch < 0 || int32(p.r.LeaderEpoch()) == epoch)
}

func (e groupsEnv) Leads(sp int32) (int32, bool) {
	p := e.b.partition(offsetsTP(sp))
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !leaderLocked(p, -1) {
		return 0, false
	}
	return int32(p.r.LeaderEpoch()), true
}

func (e groupsEnv) Read(sp, epoch int32, from int64) ([]group.Record, int64, bool, error) {
	tp := offsetsTP(sp)
	p := e.b.partition(tp)
	if p == nil {
		return nil, 0, false, fmt.Errorf("%s is not hosted here", tp)
	}
	p.mu.Lock()
	leads := leaderLocked(p, epoch)
	hw, leo := p.r.HighWatermark(), p.r.LogEndOffset()
	p.mu.Unlock()
	if !leads {
		return nil, 0, false, fmt.Errorf("%s: not its leader in epoch %d", tp, epoch)
	}
	recs, next, end, err := coord.ReadLog(p.log, from, hw, leo, groupsReadBytes)
	if err != nil && !errors.Is(err, coord.ErrNotReady) {
		err = fmt.Errorf("%s: %w", tp, err)
	}
	return recs, next, end, err
}

func (e groupsEnv) Append(sp, epoch int32, recs []group.Record, done func(group.ErrorCode)) group.ErrorCode {
	b := e.b
	tp := offsetsTP(sp)
	refuse := func(c pb.ErrorCode) group.ErrorCode { return group.ErrorCode(errcode.Of(c).Kafka) }
	p := b.partition(tp)
	if p == nil {
		return refuse(pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER)
	}
	p.mu.Lock()
	leads := leaderLocked(p, epoch)
	p.mu.Unlock()
	if !leads {
		return refuse(pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER)
	}
	batch, err := coord.EncodeAppend(b.nowMs(), recs)
	if err != nil {
		return refuse(pb.ErrorCode_ERROR_CODE_INVALID_RECORD)
	}
	out := &pb.ProducePartitionResponse{}
	ch, _ := b.producePartition(&pb.ProducePartitionData{Topic: tp.Topic, Partition: tp.Partition, Records: batch},
		replica.AcksAll, groupsCommitTimeout, out)
	if ch == nil {
		if out.Error == pb.ErrorCode_ERROR_CODE_NONE {
			out.Error = pb.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR // acks=all always waits
		}
		return refuse(out.Error)
	}
	b.goLoop(b.runCtx, func(ctx context.Context) {
		guard := time.NewTimer(groupsCommitTimeout + 2*b.cfg.TickInterval + time.Second)
		defer guard.Stop()
		select {
		case res := <-ch:
			done(group.ErrorCode(errcode.Of(res.Error).Kafka))
		case <-guard.C:
			done(group.RequestTimedOut)
		case <-ctx.Done():
			done(group.RequestTimedOut) // the run ends: the outcome is unknown
		}
	})
	return group.None
}

func (e groupsEnv) Coordinator(sp int32) (kafka.Coordinator, bool) {
	b := e.b
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return coord.CoordinatorIn(b.image, sp)
}

func (e groupsEnv) CreateTopic(ctx context.Context) error {
	b := e.b
	ctl, err := b.controller()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.RPCTimeout)
	defer cancel()
	resp, err := ctl.EnsureInternalTopic(ctx, &pb.EnsureInternalTopicRequest{
		BrokerId: int32(b.cfg.ID), BrokerEpoch: b.brokerEpoch(), Topic: metadata.ConsumerOffsetsTopic,
	})
	if err != nil {
		return err
	}
	if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return fmt.Errorf("%v: %s", resp.GetError(), resp.GetErrorMessage())
	}
	return nil
}

func (e groupsEnv) PartitionExists(topic string, partition int32) bool {
	b := e.b
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.image.Partition(topic, partition) != nil
}
