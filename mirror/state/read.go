package state

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage"
)

// errOutOfRange: the leader's log does not hold the offset read from
// (OFFSET_OUT_OF_RANGE).
var errOutOfRange = errors.New("read offset out of range")

// MaxReadBytes bounds one read of a __mirror_state partition.
const MaxReadBytes = 4 << 20

// ReadLocal is a leader's read of its own replica of a __mirror_state
// partition: the records from offset from below its HW hw. A leader whose
// HW is below leso (its LEO on taking its LE) has not committed in its LE
// yet and may not know of records its predecessor committed: not ready
// (the local form of FetchRequest.committed_in_epoch).
func ReadLocal(l *storage.Log, from, hw, leso twinlog.Offset) ([]storage.Record, twinlog.Offset, error) {
	if hw < leso {
		return nil, -1, fmt.Errorf("%w: leader HW %d below its epoch start offset %d", ErrNotReady, hw, leso)
	}
	if from >= hw {
		return nil, hw, nil
	}
	rr, err := l.Read(from, MaxReadBytes, hw)
	if err != nil {
		return nil, -1, err
	}
	recs, err := DecodeRecords(rr.Batches)
	return recs, hw, err
}

// ReadRequest is the consumer fetch that reads partition sp from offset
// from on its leader, whose LE in the reader's metadata is le.
func ReadRequest(sp int32, from twinlog.Offset, le int32) *pb.FetchRequest {
	return &pb.FetchRequest{
		ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, MaxBytes: MaxReadBytes, CommittedInEpoch: true,
		Partitions: []*pb.FetchPartition{{Topic: Topic, Partition: sp, FetchOffset: int64(from),
			CurrentLeaderEpoch: le, LastFetchedEpoch: -1}},
	}
}

// ReadAnswer reads the leader's answer to ReadRequest(sp, …): its records
// and HW. A peer's answer is input: anything but exactly the partition
// asked for, with error NONE and records that decode, is an error.
func ReadAnswer(sp int32, resp *pb.FetchResponse) ([]storage.Record, twinlog.Offset, error) {
	if n := len(resp.GetPartitions()); n != 1 {
		return nil, -1, fmt.Errorf("%w: fetch answered %d partitions", ErrNotReady, n)
	}
	pr := resp.GetPartitions()[0]
	if pr.GetTopic() != Topic || pr.GetPartition() != sp {
		return nil, -1, fmt.Errorf("%w: fetch of %s-%d answered %s-%d", ErrNotReady, Topic, sp, pr.GetTopic(), pr.GetPartition())
	}
	if pr.GetError() == pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
		return nil, -1, fmt.Errorf("%w: %w", ErrNotReady, errOutOfRange)
	}
	if pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return nil, -1, fmt.Errorf("%w: %v", ErrNotReady, pr.GetError())
	}
	recs, err := DecodeRecords(pr.GetRecords())
	return recs, twinlog.Offset(pr.GetHighWatermark()), err
}

// DecodeRecords decodes the batches of a read into records that own
// their keys and values; bad bytes are an error.
func DecodeRecords(buf []byte) ([]storage.Record, error) {
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
