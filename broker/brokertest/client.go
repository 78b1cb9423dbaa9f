package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage"
)

// Record is one consumed record.
type Record struct {
	Offset twinlog.Offset
	Epoch  twinlog.Epoch
	Value  []byte
}

// CreateTopic creates a topic through the controller and waits until every
// partition has a leader that leads it and a full ISR.
func (c *Cluster) CreateTopic(name string, partitions, rf int32, configs map[string]string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Admin().CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{
		Name: name, NumPartitions: partitions, ReplicationFactor: rf, Configs: configs,
	}}})
	if err != nil {
		c.T.Fatalf("CreateTopics: %v", err)
	}
	if e := resp.GetTopics()[0].GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
		c.T.Fatalf("CreateTopics %s: %v %s", name, e, resp.GetTopics()[0].GetErrorMessage())
	}
	id := resp.GetTopics()[0].GetTopicId()
	for p := int32(0); p < partitions; p++ {
		c.WaitFor(fmt.Sprintf("%s-%d led with full ISR, hosted as topic id %s", name, p, id), func() bool {
			_, _, isr, rs, ok := c.PartitionInfo(name, p)
			return ok && len(isr) == len(rs) && c.hostedAs(name, p, id, rs) && c.leaderReady(name, p)
		})
	}
}

// hostedAs reports whether every running replica in rs hosts topic-p as
// topic id: a broker that has not applied a deletion and re-creation of
// the name yet still hosts the old topic, in the same leader epoch 0, and
// would take the new topic's first records into the old log.
func (c *Cluster) hostedAs(topic string, p int32, id string, rs []int32) bool {
	for _, r := range rs {
		b := c.Broker(twinlog.BrokerID(r))
		if b == nil {
			continue
		}
		st, ok := b.PartitionStatus(twinlog.TopicPartition{Topic: topic, Partition: p})
		if !ok || st.TopicID != id {
			return false
		}
	}
	return true
}

// SetTopicConfig sets one config of topic through the controller.
func (c *Cluster) SetTopicConfig(ctx context.Context, topic, key, value string) {
	c.T.Helper()
	resp, err := c.Admin().AlterConfigs(ctx, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
		Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: topic},
		Set:      map[string]string{key: value},
	}}})
	if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		c.T.Fatalf("AlterConfigs %s %s=%s: %v %v", topic, key, value, resp, err)
	}
}

// PartitionInfo returns leader, LE, ISR and replicas per the metadata of
// any running broker (the one with the newest metadata).
func (c *Cluster) PartitionInfo(topic string, p int32) (leader twinlog.BrokerID, le twinlog.Epoch, isr, replicas []int32, ok bool) {
	best := int64(-1)
	for _, id := range c.IDs() {
		if !c.Running(id) {
			continue
		}
		md, err := c.metadataFrom(id, []string{topic})
		if err != nil || md.GetMetadataOffset() <= best || len(md.GetTopics()) == 0 {
			continue
		}
		t := md.GetTopics()[0]
		if t.GetError() != pb.ErrorCode_ERROR_CODE_NONE || int(p) >= len(t.GetPartitions()) {
			continue
		}
		mp := t.GetPartitions()[p]
		best = md.GetMetadataOffset()
		leader, le, isr, replicas, ok = twinlog.BrokerID(mp.GetLeaderId()), twinlog.Epoch(mp.GetLeaderEpoch()), mp.GetIsr(), mp.GetReplicas(), true
	}
	return
}

// leaderReady: the leader named by metadata runs and answers ListOffsets
// for the partition as leader.
func (c *Cluster) leaderReady(topic string, p int32) bool {
	leader, le, _, _, ok := c.PartitionInfo(topic, p)
	if !ok || leader < 0 || !c.Running(leader) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := c.FetchClient(leader).ListOffsets(ctx, &pb.ListOffsetsRequest{Topics: []*pb.ListOffsetsTopic{{
		Name: topic, Partitions: []*pb.ListOffsetsPartition{{Index: p, CurrentLeaderEpoch: int32(le), Spec: pb.OffsetSpec_OFFSET_SPEC_LATEST}}}}})
	return err == nil && resp.GetTopics()[0].GetPartitions()[0].GetError() == pb.ErrorCode_ERROR_CODE_NONE
}

// Leader returns the current leader and LE of a partition, waiting until
// there is one that serves as leader.
func (c *Cluster) Leader(topic string, p int32) (twinlog.BrokerID, twinlog.Epoch) {
	c.T.Helper()
	c.WaitFor(fmt.Sprintf("leader of %s-%d", topic, p), func() bool { return c.leaderReady(topic, p) })
	l, le, _, _, _ := c.PartitionInfo(topic, p)
	return l, le
}

// EncodeValues builds one batch holding values.
func EncodeValues(values ...[]byte) []byte {
	recs := make([]storage.Record, len(values))
	now := time.Now().UnixMilli()
	for i, v := range values {
		recs[i] = storage.Record{Timestamp: now, Value: v}
	}
	b, err := storage.EncodeBatch(recs, storage.BatchOptions{})
	if err != nil {
		panic(err)
	}
	return b
}

// ProduceTo sends one produce request to broker id and returns the
// partition result.
func (c *Cluster) ProduceTo(ctx context.Context, id twinlog.BrokerID, topic string, p int32, acks int32, timeout time.Duration, values ...[]byte) (*pb.ProducePartitionResponse, error) {
	resp, err := c.ProduceClient(id).Produce(ctx, &pb.ProduceRequest{
		Acks: acks, TimeoutMs: int32(timeout.Milliseconds()),
		Partitions: []*pb.ProducePartitionData{{Topic: topic, Partition: p, Records: EncodeValues(values...)}},
	})
	if err != nil {
		return nil, err
	}
	return resp.GetPartitions()[0], nil
}

// ErrCode wraps a non-NONE produce or fetch error code.
type ErrCode struct{ Code pb.ErrorCode }

func (e ErrCode) Error() string { return e.Code.String() }

// Produce sends values as one batch to the current leader once; it returns
// the base offset, or an error (ErrCode for protocol errors).
func (c *Cluster) Produce(ctx context.Context, topic string, p int32, acks int32, values ...[]byte) (twinlog.Offset, error) {
	leader, _, _, _, ok := c.PartitionInfo(topic, p)
	if !ok || leader < 0 || !c.Running(leader) {
		return -1, ErrCode{pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER}
	}
	r, err := c.ProduceTo(ctx, leader, topic, p, acks, 5*time.Second, values...)
	if err != nil {
		return -1, err
	}
	if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return -1, ErrCode{r.GetError()}
	}
	return twinlog.Offset(r.GetBaseOffset()), nil
}

// MustProduce retries Produce on retriable failures (as a client would,
// after a metadata refresh) until it succeeds or ctx ends. Retries may
// duplicate records; the returned offset is the acknowledged one.
func (c *Cluster) MustProduce(ctx context.Context, topic string, p int32, acks int32, values ...[]byte) twinlog.Offset {
	c.T.Helper()
	for {
		off, err := c.Produce(ctx, topic, p, acks, values...)
		if err == nil {
			return off
		}
		if ctx.Err() != nil {
			c.T.Fatalf("produce to %s-%d: %v (last error %v)", topic, p, ctx.Err(), err)
		}
		c.waitChangeOr(ctx, 50*time.Millisecond)
	}
}

// waitChangeOr waits for a cluster change or d (client retry backoff).
func (c *Cluster) waitChangeOr(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.Changed():
	case <-t.C:
	case <-ctx.Done():
	}
}

// ReadFrom fetches (CONSUMER) from broker id starting at offset, once, and
// returns the decoded records, the HW and the error code.
func (c *Cluster) ReadFrom(ctx context.Context, id twinlog.BrokerID, topic string, p int32, le twinlog.Epoch, offset twinlog.Offset, maxWait time.Duration) ([]Record, twinlog.Offset, pb.ErrorCode, error) {
	resp, err := c.FetchClient(id).Fetch(ctx, &pb.FetchRequest{
		ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, MaxWaitMs: int32(maxWait.Milliseconds()),
		MinBytes: 1, MaxBytes: 8 << 20,
		Partitions: []*pb.FetchPartition{{Topic: topic, Partition: p, FetchOffset: int64(offset), CurrentLeaderEpoch: int32(le), LastFetchedEpoch: -1}},
	})
	if err != nil {
		return nil, -1, 0, err
	}
	pr := resp.GetPartitions()[0]
	if pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return nil, -1, pr.GetError(), nil
	}
	recs, err := DecodeRecords(pr.GetRecords())
	if err != nil {
		return nil, -1, 0, err
	}
	hw := twinlog.Offset(pr.GetHighWatermark())
	if n := len(recs); n > 0 && recs[n-1].Offset >= hw {
		return nil, -1, 0, fmt.Errorf("read at or above HW: offset %d, HW %d", recs[n-1].Offset, hw)
	}
	return recs, hw, pb.ErrorCode_ERROR_CODE_NONE, nil
}

// DecodeRecords decodes concatenated batches.
func DecodeRecords(buf []byte) ([]Record, error) {
	var out []Record
	for bv, err := range storage.Batches(buf) {
		if err != nil {
			return nil, err
		}
		rs, err := bv.Records()
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out = append(out, Record{Offset: r.Offset, Epoch: bv.LeaderEpoch(), Value: slices.Clone(r.Value)})
		}
	}
	return out, nil
}

// ConsumeAll reads every record below the leader's HW, retrying across
// leader changes, and returns them with the HW it read up to.
func (c *Cluster) ConsumeAll(ctx context.Context, topic string, p int32) ([]Record, twinlog.Offset) {
	c.T.Helper()
	for {
		recs, hw, err := c.consumeOnce(ctx, topic, p)
		if err == nil {
			return recs, hw
		}
		if ctx.Err() != nil {
			c.T.Fatalf("consume %s-%d: %v", topic, p, err)
		}
		c.waitChangeOr(ctx, 50*time.Millisecond)
	}
}

func (c *Cluster) consumeOnce(ctx context.Context, topic string, p int32) ([]Record, twinlog.Offset, error) {
	leader, le, _, _, ok := c.PartitionInfo(topic, p)
	if !ok || leader < 0 || !c.Running(leader) {
		return nil, -1, errors.New("no leader")
	}
	var all []Record
	var off twinlog.Offset
	hwSeen := twinlog.Offset(-1)
	for {
		recs, hw, code, err := c.ReadFrom(ctx, leader, topic, p, le, off, 0)
		if err != nil {
			return nil, -1, err
		}
		if code != pb.ErrorCode_ERROR_CODE_NONE {
			return nil, -1, ErrCode{code}
		}
		if hwSeen < 0 {
			hwSeen = hw
		}
		for _, r := range recs {
			if r.Offset < hwSeen {
				all = append(all, r)
			}
		}
		if len(recs) == 0 || recs[len(recs)-1].Offset+1 >= hwSeen {
			return all, hwSeen, nil
		}
		off = recs[len(recs)-1].Offset + 1
	}
}

// LogEndOffset is broker id's local LEO for a partition (−1 if not hosted).
func (c *Cluster) LogEndOffset(id twinlog.BrokerID, topic string, p int32) twinlog.Offset {
	b := c.Broker(id)
	if b == nil {
		return -1
	}
	st, ok := b.PartitionStatus(twinlog.TopicPartition{Topic: topic, Partition: p})
	if !ok {
		return -1
	}
	return st.LogEndOffset
}
