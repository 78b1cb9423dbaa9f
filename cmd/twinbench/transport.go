package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/broker/codec"
)

// transport is the API the load goes through: the same batches, requests
// in flight and consumers over either.
type transport interface {
	name() string
	// producer returns worker k's send of one batch to partition p: the
	// error code of a refused batch ("" when acknowledged), or an error.
	// buf is the caller's again when send returns.
	producer(p, k int) func(ctx context.Context, buf []byte) (string, error)
	// consumer returns partition p's fetch from an offset (record bytes
	// valid until the next call).
	consumer(p int) func(ctx context.Context, off int64) ([]byte, error)
	// highWatermark is partition p's HW, where consumers start.
	highWatermark(ctx context.Context, p int) (int64, error)
}

// grpcTransport is twinlog's own API.
type grpcTransport struct {
	o  options
	cl *cluster
}

func (grpcTransport) name() string { return "grpc" }

func (t grpcTransport) producer(p, _ int) func(context.Context, []byte) (string, error) {
	client := pb.NewProduceServiceClient(t.cl.conns[t.cl.leaders[p]])
	// Sends buf without a protobuf copy; buf is reused only after the call
	// returns.
	send := grpc.ForceCodecV2(codec.NewCall(broker.BufferPool))
	return func(ctx context.Context, buf []byte) (string, error) {
		resp, err := client.Produce(ctx, &pb.ProduceRequest{Acks: int32(t.o.acks), TimeoutMs: 30000,
			Partitions: []*pb.ProducePartitionData{{Topic: t.o.topic, Partition: int32(p), Records: buf}}}, send)
		if err != nil {
			return "", err
		}
		if e := resp.GetPartitions()[0].GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
			return e.String(), nil
		}
		return "", nil
	}
}

func (t grpcTransport) consumer(p int) func(context.Context, int64) ([]byte, error) {
	fc := pb.NewFetchServiceClient(t.cl.conns[t.cl.leaders[p]])
	// Records alias a pooled receive buffer until Release.
	recv := codec.NewCall(broker.BufferPool)
	return func(ctx context.Context, off int64) ([]byte, error) {
		recv.Release()
		resp, err := fc.Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
			MaxWaitMs: 500, MinBytes: 1, MaxBytes: 8 << 20,
			Partitions: []*pb.FetchPartition{{Topic: t.o.topic, Partition: int32(p), FetchOffset: off,
				CurrentLeaderEpoch: t.cl.les[p], LastFetchedEpoch: -1}}}, grpc.ForceCodecV2(recv))
		if err != nil {
			return nil, err
		}
		if e := resp.GetPartitions()[0].GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
			return nil, fmt.Errorf("fetch: %v", e)
		}
		return resp.GetPartitions()[0].GetRecords(), nil
	}
}

func (t grpcTransport) highWatermark(ctx context.Context, p int) (int64, error) {
	fc := pb.NewFetchServiceClient(t.cl.conns[t.cl.leaders[p]])
	lo, err := fc.ListOffsets(ctx, &pb.ListOffsetsRequest{Topics: []*pb.ListOffsetsTopic{{Name: t.o.topic,
		Partitions: []*pb.ListOffsetsPartition{{Index: int32(p), CurrentLeaderEpoch: -1, Spec: pb.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK}}}}})
	if err != nil {
		return 0, err
	}
	if e := lo.GetTopics()[0].GetPartitions()[0].GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
		return 0, fmt.Errorf("list offsets: %v", e)
	}
	return lo.GetTopics()[0].GetPartitions()[0].GetOffset(), nil
}

// kafkaTransport sends the same batches as Kafka Produce requests with
// franz-go's client, to each partition's leader. A Kafka broker answers a
// connection's requests one at a time, so each producing worker has its
// own client (its own connections), as --inflight requests in flight per
// partition need; consumers share one.
type kafkaTransport struct {
	o       options
	cl      *cluster
	seeds   []string
	workers []*kgo.Client
	cons    *kgo.Client
	// topicID names the topic in Fetch v13 and later (KIP-516), which
	// ignore the name: kgo sends the newest version the broker lists.
	topicID [16]byte
}

func newKafkaTransport(ctx context.Context, o options, cl *cluster) (*kafkaTransport, error) {
	t := &kafkaTransport{o: o, cl: cl, seeds: []string{o.kafkaBootstrap}}
	c, err := kgo.NewClient(append(kafkaOpts(o), kgo.SeedBrokers(t.seeds...))...)
	if err != nil {
		return nil, err
	}
	t.cons = c
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(o.topic)
	req.Topics = append(req.Topics, rt)
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(mctx, c)
	switch {
	case err != nil:
	case len(resp.Topics) != 1:
		err = fmt.Errorf("%d topics in the answer", len(resp.Topics))
	default:
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("kafka metadata of %s: %w", o.topic, err)
	}
	t.topicID = resp.Topics[0].TopicID
	return t, nil
}

func (t *kafkaTransport) close() {
	for _, c := range t.workers {
		c.Close()
	}
	t.cons.Close()
}

func (*kafkaTransport) name() string { return "kafka" }

func (t *kafkaTransport) producer(p, _ int) func(context.Context, []byte) (string, error) {
	c, err := kgo.NewClient(append(kafkaOpts(t.o), kgo.SeedBrokers(t.seeds...))...)
	if err != nil {
		return func(context.Context, []byte) (string, error) { return "", err }
	}
	t.workers = append(t.workers, c) // before the workers start; close() after they end
	leader := c.Broker(int(t.cl.leaders[p]))
	return func(ctx context.Context, buf []byte) (string, error) {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = int16(t.o.acks), 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = t.o.topic, t.topicID // v13+ sends the id
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), buf
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if t.o.acks == 0 {
			// No answer comes; kgo completes the request once written.
			_, err := leader.Request(ctx, req)
			return "", err
		}
		resp, err := req.RequestWith(ctx, leader)
		if err != nil {
			return "", err
		}
		if e := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); e != nil {
			return e.Error(), nil
		}
		return "", nil
	}
}

func (t *kafkaTransport) consumer(p int) func(context.Context, int64) ([]byte, error) {
	leader := t.cons.Broker(int(t.cl.leaders[p]))
	return func(ctx context.Context, off int64) ([]byte, error) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 500, 1, 8<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = t.o.topic, t.topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = int32(p), off, t.cl.les[p], 8<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, leader)
		if err != nil {
			return nil, err
		}
		pr := resp.Topics[0].Partitions[0]
		if e := kerr.ErrorForCode(pr.ErrorCode); e != nil {
			return nil, e
		}
		return pr.RecordBatches, nil
	}
}

func (t *kafkaTransport) highWatermark(ctx context.Context, p int) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = t.o.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = int32(p), -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, t.cons.Broker(int(t.cl.leaders[p])))
	if err != nil {
		return 0, err
	}
	pr := resp.Topics[0].Partitions[0]
	if e := kerr.ErrorForCode(pr.ErrorCode); e != nil {
		return 0, e
	}
	return pr.Offset, nil
}

// kafkaAddr is host:port of a listener.
func kafkaAddr(l net.Listener) string {
	a := l.Addr().(*net.TCPAddr)
	return net.JoinHostPort(a.IP.String(), strconv.Itoa(a.Port))
}
