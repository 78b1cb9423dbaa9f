package broker

import (
	"context"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// Produce appends each partition's batches on its leader (SPEC §4.1) and
// waits for the per-partition results acks asks for.
func (b *Broker) Produce(ctx context.Context, req *pb.ProduceRequest) (*pb.ProduceResponse, error) {
	start := time.Now()
	defer func() { b.obs.ObserveRequest("produce", time.Since(start)) }()
	acks := replica.Acks(req.GetAcks())
	if acks != replica.AcksNone && acks != replica.AcksLeader && acks != replica.AcksAll {
		resp := &pb.ProduceResponse{}
		for _, pd := range req.GetPartitions() {
			resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{
				Topic: pd.GetTopic(), Partition: pd.GetPartition(), Error: pb.ErrorCode_ERROR_CODE_INVALID_REQUIRED_ACKS,
				BaseOffset: -1, LeaderId: -1,
			})
		}
		return resp, nil
	}
	if len(req.GetPartitions()) == 0 {
		return nil, invalidf("produce without partitions")
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 {
		timeout = b.cfg.DefaultProduceTimeout
	}
	resp := &pb.ProduceResponse{Partitions: make([]*pb.ProducePartitionResponse, len(req.GetPartitions()))}
	type pending struct {
		i  int
		ch chan replica.ProduceResult
		p  *partition
	}
	var waits []pending
	for i, pd := range req.GetPartitions() {
		out := &pb.ProducePartitionResponse{Topic: pd.GetTopic(), Partition: pd.GetPartition(), BaseOffset: -1, LeaderId: -1}
		resp.Partitions[i] = out
		ch, p := b.producePartition(pd, acks, timeout, out)
		if ch != nil {
			waits = append(waits, pending{i, ch, p})
		}
	}
	if len(waits) == 0 {
		return resp, nil
	}
	// The machine times acks=all out at timeoutMs on its ticks; this bound
	// only guards against a partition that stops ticking.
	guard := time.NewTimer(timeout + 2*b.cfg.TickInterval + time.Second)
	defer guard.Stop()
	for _, w := range waits {
		out := resp.Partitions[w.i]
		select {
		case res := <-w.ch:
			out.Error = res.Error
			if res.Error == pb.ErrorCode_ERROR_CODE_NONE {
				out.BaseOffset = int64(res.BaseOffset)
			}
			if res.Error == pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER {
				out.LeaderId, _ = b.leaderHint(w.p.tp)
			}
		case <-guard.C:
			out.Error = pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return resp, nil
}

// producePartition validates and proposes one partition's batches; it
// returns a channel for the result when the caller must wait.
func (b *Broker) producePartition(pd *pb.ProducePartitionData, acks replica.Acks, timeout time.Duration, out *pb.ProducePartitionResponse) (chan replica.ProduceResult, *partition) {
	tp := twinlog.TopicPartition{Topic: pd.GetTopic(), Partition: pd.GetPartition()}
	if tp.Topic == "" || tp.Partition < 0 {
		out.Error = pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		return nil, nil
	}
	p := b.partition(tp)
	if p == nil {
		leader, known := b.leaderHint(tp)
		out.LeaderId = leader
		out.Error = pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
		if !known {
			out.Error = pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		}
		return nil, nil
	}
	records := pd.GetRecords()
	// Validated once here; the log appends it without re-checking crcs.
	// The log stamps the buffer in place. Through gRPC, records alias a
	// receive buffer the request owns until the handler returns
	// (codec.Server, releaseProduce), so records is ours: no copy of every
	// produced byte. The append happens in this call (processReadyLocked),
	// so nothing refers to it afterwards.
	buf, numRecords, code := b.validateBatches(records)
	if code != pb.ErrorCode_ERROR_CODE_NONE {
		out.Error = code
		return nil, nil
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		out.Error = storageCode(err)
		return nil, nil
	}
	p.nextID++
	id := p.nextID
	d := p.r.Propose(replica.Proposal{ID: id, Acks: acks, TimeoutMs: timeout.Milliseconds(), NumRecords: numRecords}, b.nowMs())
	out.LeaderEpoch = int32(d.LeaderEpoch)
	out.LogStartOffset = int64(p.r.LogStartOffset())
	if d.Error != pb.ErrorCode_ERROR_CODE_NONE {
		out.Error = d.Error
		if d.Error == pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER {
			out.LeaderId = int32(p.r.Leader())
		}
		p.processReadyLocked()
		return nil, nil
	}
	p.proposals[id] = buf
	var ch chan replica.ProduceResult
	if acks != replica.AcksNone {
		ch = make(chan replica.ProduceResult, 1)
		p.results[id] = &produceWaiter{last: d.LastOffset, ch: ch}
	}
	p.processReadyLocked()
	// Appended by now unless the log failed: drop the batch either way, as
	// its buffer goes back to the pool when the request ends.
	delete(p.proposals, id)
	out.BaseOffset = int64(d.BaseOffset)
	return ch, p
}

// validateBatches checks the producer's batches (SPEC §2.2) and returns the
// number of offsets they take.
func (b *Broker) validateBatches(records []byte) (storage.Validated, int, pb.ErrorCode) {
	if len(records) == 0 {
		return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE
	}
	v, err := storage.ValidateBatches(records)
	if err != nil {
		return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE
	}
	n := 0
	for _, bv := range v.Batches() {
		if bv.Size() > b.cfg.Log.MaxBatchBytes {
			return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE
		}
		n += int(bv.LastOffsetDelta()) + 1
		if n > 1<<30 {
			return storage.Validated{}, 0, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE
		}
	}
	return v, n, pb.ErrorCode_ERROR_CODE_NONE
}
