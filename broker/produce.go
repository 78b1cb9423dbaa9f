package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/storage"
)

// Produce appends each partition's batches on its leader (SPEC §4.1) and
// waits for the per-partition results acks asks for. Internal topics are
// refused (INVALID_TOPIC, Kafka's answer to a produce to an internal
// topic): only brokers write them, through AppendInternal.
func (b *Broker) Produce(ctx context.Context, req *pb.ProduceRequest) (*pb.ProduceResponse, error) {
	return b.startProduce(req, false)(ctx)
}

// StartProduce is Produce's start form (kafka.Backend): req's batches are
// validated and appended (or refused) when it returns, and wait waits for
// the answer; ctx's end ends the wait, not the produce.
func (b *Broker) StartProduce(req *pb.ProduceRequest) (wait func(ctx context.Context) (*pb.ProduceResponse, error)) {
	return b.startProduce(req, false)
}

// AppendInternal is a broker's own acks=all append to an internal topic
// (writeMirrorState). The writer must be registered with exactly the
// broker epoch it sends, in this broker's metadata, and the topic must be
// internal, so the path is no way around Produce's refusal.
func (b *Broker) AppendInternal(ctx context.Context, req *pb.AppendInternalRequest) (*pb.AppendInternalResponse, error) {
	pd := req.GetPartition()
	if pd == nil {
		return nil, invalidf("append internal without a partition")
	}
	b.metaMu.Lock()
	reg := b.image.Broker(req.GetBrokerId())
	b.metaMu.Unlock()
	if code, msg := serve.InternalWriter(reg, req.GetBrokerId(), req.GetBrokerEpoch()); code != pb.ErrorCode_ERROR_CODE_NONE {
		return &pb.AppendInternalResponse{Partition: &pb.ProducePartitionResponse{
			Topic: pd.GetTopic(), Partition: pd.GetPartition(), BaseOffset: -1, LeaderId: -1, Error: code, ErrorMessage: msg,
		}}, nil
	}
	resp, err := b.startProduce(&pb.ProduceRequest{Acks: int32(replica.AcksAll), TimeoutMs: req.GetTimeoutMs(),
		Partitions: []*pb.ProducePartitionData{pd}}, true)(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.AppendInternalResponse{Partition: resp.GetPartitions()[0]}, nil // produce answers each partition asked
}

// internalTopic reports a topic only brokers write: one the metadata marks
// internal, or any name reserved for internal topics (which clients cannot
// create) in case the metadata does not know it yet.
func (b *Broker) internalTopic(topic string) bool {
	if metadata.IsReservedTopicName(topic) {
		return true
	}
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.image.Topic(topic).GetInternal()
}

// startProduce is StartProduce; internal says whether the request is a
// broker's own (AppendInternal), which must name internal topics only,
// where a client's must name none.
func (b *Broker) startProduce(req *pb.ProduceRequest, internal bool) func(context.Context) (*pb.ProduceResponse, error) {
	start := time.Now()
	answer := func(resp *pb.ProduceResponse, err error) func(context.Context) (*pb.ProduceResponse, error) {
		return func(context.Context) (*pb.ProduceResponse, error) {
			b.obs.ObserveRequest("produce", time.Since(start))
			return resp, err
		}
	}
	acks := replica.Acks(req.GetAcks())
	if acks != replica.AcksNone && acks != replica.AcksLeader && acks != replica.AcksAll {
		resp := &pb.ProduceResponse{}
		for _, pd := range req.GetPartitions() {
			resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{
				Topic: pd.GetTopic(), Partition: pd.GetPartition(), Error: pb.ErrorCode_ERROR_CODE_INVALID_REQUIRED_ACKS,
				BaseOffset: -1, LeaderId: -1,
			})
		}
		return answer(resp, nil)
	}
	if len(req.GetPartitions()) == 0 {
		return answer(nil, invalidf("produce without partitions"))
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
		if b.internalTopic(pd.GetTopic()) != internal {
			out.Error = pb.ErrorCode_ERROR_CODE_INVALID_TOPIC
			out.ErrorMessage = fmt.Sprintf("topic %q is internal: only brokers write it", pd.GetTopic())
			if internal {
				out.ErrorMessage = fmt.Sprintf("topic %q is not internal", pd.GetTopic())
			}
			continue
		}
		ch, p := b.producePartition(pd, acks, timeout, out)
		if ch != nil {
			waits = append(waits, pending{i, ch, p})
		}
	}
	if len(waits) == 0 {
		return answer(resp, nil)
	}
	return func(ctx context.Context) (*pb.ProduceResponse, error) {
		defer func() { b.obs.ObserveRequest("produce", time.Since(start)) }()
		// The machine times acks=all out at timeoutMs on its ticks; this
		// bound only guards against a partition that stops ticking.
		guard := time.NewTimer(time.Until(start.Add(timeout + 2*b.cfg.TickInterval + time.Second)))
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
		out.Error, out.LeaderId = b.notHosted(tp)
		return nil, nil
	}
	records := pd.GetRecords()
	// Validated once here; the log appends it without re-checking crcs.
	// The log stamps the buffer in place. Through gRPC, records alias a
	// receive buffer the request owns until the handler returns
	// (codec.Server, releaseProduce), so records is ours: no copy of every
	// produced byte. The append happens in this call (processReadyLocked),
	// so nothing refers to it afterwards.
	buf, numRecords, code, msg := b.validateBatches(tp.Topic, records)
	if code != pb.ErrorCode_ERROR_CODE_NONE {
		out.Error, out.ErrorMessage = code, msg
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
	d, duplicate := serve.Propose(p.r, p.log, buf, replica.Proposal{ID: id, Acks: acks, TimeoutMs: timeout.Milliseconds(), NumRecords: numRecords}, b.nowMs(), out)
	if o := idempotentOutcome(duplicate, d.Error); o != "" {
		b.obs.ObserveIdempotentRefusal(o)
	}
	if d.Error == pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		b.metaMu.Lock()
		desired := b.image.MirrorTopicState(tp.Topic)
		b.metaMu.Unlock()
		out.Error, out.ErrorMessage = serve.ReadOnlyRefusal(desired)
	}
	if d.Error != pb.ErrorCode_ERROR_CODE_NONE {
		p.processReadyLocked()
		return nil, nil
	}
	if !duplicate {
		p.proposals[id] = buf
	}
	var ch chan replica.ProduceResult
	if acks != replica.AcksNone {
		ch = make(chan replica.ProduceResult, 1)
		p.results[id] = &produceWaiter{last: d.LastOffset, ch: ch}
	}
	p.processReadyLocked()
	// Appended by now unless the log failed: drop the batch either way, as
	// its buffer goes back to the pool when the request ends.
	delete(p.proposals, id)
	return ch, p
}

// IdempotentRefusalOutcomes are ObserveIdempotentRefusal's outcomes (the
// metric's outcome label, the alert's selector), in the order
// idempotentOutcome gives them.
var IdempotentRefusalOutcomes = []string{"duplicate", "out_of_order_sequence", "invalid_producer_epoch", "duplicate_sequence"}

// idempotentOutcome names a produce an idempotent producer's state
// decided: a duplicate answered, or the refusal code's outcome; "" for
// anything else.
func idempotentOutcome(duplicate bool, code pb.ErrorCode) string {
	switch {
	case duplicate:
		return IdempotentRefusalOutcomes[0]
	case code == pb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER:
		return IdempotentRefusalOutcomes[1]
	case code == pb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH:
		return IdempotentRefusalOutcomes[2]
	case code == pb.ErrorCode_ERROR_CODE_DUPLICATE_SEQUENCE_NUMBER:
		return IdempotentRefusalOutcomes[3]
	}
	return ""
}

// validateBatches checks the producer's batches for topic with the
// broker's limits (serve.ValidateProduceMessage); a compacted topic takes
// keyed records only.
func (b *Broker) validateBatches(topic string, records []byte) (storage.Validated, int, pb.ErrorCode, string) {
	return serve.ValidateProduceMessage(records, b.nowMs(), serve.ProduceLimits{
		MaxBatchBytes: b.cfg.Log.MaxBatchBytes, TimestampBeforeMax: b.cfg.LogMessageTimestampBeforeMax, TimestampAfterMax: b.cfg.LogMessageTimestampAfterMax,
		RequireKeys: b.compacted(topic),
	})
}
