package coord

import (
	"fmt"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/group"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/storage"
)

// The parts of an Env that decide something, shared by every host (the
// broker's groupsEnv and the simulator's): what a metadata image says of
// __consumer_offsets and its coordinators, how a coordinator's partition
// is read while loading, and how its appends are encoded.

// PartitionsIn is Env.Partitions over a broker's metadata image.
func PartitionsIn(img *metadata.Image) (int32, bool) {
	t := img.Topic(metadata.ConsumerOffsetsTopic)
	if t == nil {
		return 0, false
	}
	return t.GetPartitionCount(), true
}

// CoordinatorIn is Env.Coordinator over a broker's metadata image: the
// leader of partition p with the Kafka address it registered.
func CoordinatorIn(img *metadata.Image, p int32) (kafka.Coordinator, bool) {
	pr := img.Partition(metadata.ConsumerOffsetsTopic, p)
	if pr == nil || pr.GetLeader() < 0 {
		return kafka.Coordinator{}, false
	}
	reg := img.Broker(pr.GetLeader())
	if reg == nil || reg.GetKafkaPort() == 0 {
		return kafka.Coordinator{}, false
	}
	return kafka.Coordinator{NodeID: pr.GetLeader(), Host: reg.GetKafkaHost(), Port: reg.GetKafkaPort()}, true
}

// ReadLog is Env.Read over the log of a partition its host leads in the
// asked epoch, with high watermark hw and log end leo: ErrNotReady while
// hw trails leo, else the records from from (at least the log start) up
// to at most maxBytes below hw.
func ReadLog(l *storage.Log, from int64, hw, leo twinlog.Offset, maxBytes int) ([]group.Record, int64, bool, error) {
	if hw < leo {
		return nil, 0, false, ErrNotReady
	}
	from = max(from, int64(l.LogStartOffset()))
	if from >= int64(hw) {
		return nil, from, true, nil
	}
	rr, err := l.Read(twinlog.Offset(from), maxBytes, hw)
	if err != nil {
		return nil, 0, false, err
	}
	var out []group.Record
	next := from
	for bv, err := range storage.Batches(rr.Batches) {
		if err != nil {
			return nil, 0, false, err
		}
		rs, err := bv.Records()
		if err != nil {
			return nil, 0, false, fmt.Errorf("offset %d: %w", bv.BaseOffset(), err)
		}
		for _, r := range rs {
			out = append(out, group.Record{Key: r.Key, Value: r.Value})
		}
		next = int64(bv.NextOffset())
	}
	if next == from { // nothing below the HW from here (a read always returns a whole batch)
		return out, int64(hw), true, nil
	}
	return out, next, next >= int64(hw), nil
}

// EncodeAppend is the batch Env.Append writes for recs at nowMs.
func EncodeAppend(nowMs int64, recs []group.Record) ([]byte, error) {
	rs := make([]storage.Record, len(recs))
	for i, r := range recs {
		rs[i] = storage.Record{Timestamp: nowMs, Key: r.Key, Value: r.Value}
	}
	return storage.EncodeBatch(rs, storage.BatchOptions{})
}
