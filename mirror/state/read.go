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

// errDiverged: the leader's log does not hold the records the reader
// read last (a diverging epoch): they were cut and others written since.
var errDiverged = errors.New("log diverges from what was read")

// MaxReadBytes bounds one read of a __mirror_state partition.
const MaxReadBytes = 4 << 20

// ReadLocal is a leader's read of its own replica of a __mirror_state
// partition: the records from offset from below its HW hw, and the epoch
// of the last one's batch (NoEpoch without records). A leader whose HW is
// below leso (its LEO on taking its LE) has not committed in its LE yet
// and may not know of records its predecessor committed: not ready (the
// local form of FetchRequest.committed_in_epoch). last is the epoch of the
// last record the reader holds below from (NoEpoch: unknown): when the log
// no longer has the reader's records up to from (storage.Log.Diverging,
// the check a leader makes of a fetch's last_fetched_epoch) the read fails
// with errDiverged.
func ReadLocal(l *storage.Log, from twinlog.Offset, last twinlog.Epoch, hw, leso twinlog.Offset) ([]storage.Record, twinlog.Epoch, twinlog.Offset, error) {
	if hw < leso {
		return nil, twinlog.NoEpoch, -1, fmt.Errorf("%w: leader HW %d below its epoch start offset %d", ErrNotReady, hw, leso)
	}
	if l.Diverging(last, from) {
		return nil, twinlog.NoEpoch, -1, fmt.Errorf("%w: %w at %d (epoch %d)", ErrNotReady, errDiverged, from, last)
	}
	if from >= hw {
		return nil, twinlog.NoEpoch, hw, nil
	}
	rr, err := l.Read(from, MaxReadBytes, hw)
	if err != nil {
		return nil, twinlog.NoEpoch, -1, err
	}
	recs, epoch, err := decodeBatches(rr.Batches)
	return recs, epoch, hw, err
}

// ReadRequest is the consumer fetch that reads partition sp from offset
// from on its leader, whose LE in the reader's metadata is le; last is the
// epoch of the reader's last record below from (NoEpoch: unknown), which
// the leader checks against its log (KIP-320).
func ReadRequest(sp int32, from twinlog.Offset, last twinlog.Epoch, le int32) *pb.FetchRequest {
	return &pb.FetchRequest{
		ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, MaxBytes: MaxReadBytes, CommittedInEpoch: true,
		Partitions: []*pb.FetchPartition{{Topic: Topic, Partition: sp, FetchOffset: int64(from),
			CurrentLeaderEpoch: le, LastFetchedEpoch: int32(last)}},
	}
}

// ReadAnswer reads the leader's answer to ReadRequest(sp, …): its records,
// the epoch of the last one's batch (NoEpoch without records) and the HW.
// A peer's answer is input: anything but exactly the partition asked for,
// with error NONE, no diverging epoch and records that decode, is an
// error.
func ReadAnswer(sp int32, resp *pb.FetchResponse) ([]storage.Record, twinlog.Epoch, twinlog.Offset, error) {
	if n := len(resp.GetPartitions()); n != 1 {
		return nil, twinlog.NoEpoch, -1, fmt.Errorf("%w: fetch answered %d partitions", ErrNotReady, n)
	}
	pr := resp.GetPartitions()[0]
	if pr.GetTopic() != Topic || pr.GetPartition() != sp {
		return nil, twinlog.NoEpoch, -1, fmt.Errorf("%w: fetch of %s-%d answered %s-%d", ErrNotReady, Topic, sp, pr.GetTopic(), pr.GetPartition())
	}
	if pr.GetError() == pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
		return nil, twinlog.NoEpoch, -1, fmt.Errorf("%w: %w", ErrNotReady, errOutOfRange)
	}
	if pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return nil, twinlog.NoEpoch, -1, fmt.Errorf("%w: %v", ErrNotReady, pr.GetError())
	}
	if d := pr.GetDivergingEpoch(); d != nil {
		return nil, twinlog.NoEpoch, -1, fmt.Errorf("%w: %w (leader: epoch %d ends at %d)", ErrNotReady, errDiverged, d.GetEpoch(), d.GetEndOffset())
	}
	recs, epoch, err := decodeBatches(pr.GetRecords())
	return recs, epoch, twinlog.Offset(pr.GetHighWatermark()), err
}

// DecodeRecords decodes the batches of a read into records that own
// their keys and values; bad bytes are an error.
func DecodeRecords(buf []byte) ([]storage.Record, error) {
	recs, _, err := decodeBatches(buf)
	return recs, err
}

// decodeBatches is DecodeRecords that also returns the epoch of the last
// record's batch (NoEpoch without records).
func decodeBatches(buf []byte) ([]storage.Record, twinlog.Epoch, error) {
	var out []storage.Record
	last := twinlog.NoEpoch
	for bv, err := range storage.Batches(buf) {
		if err != nil {
			return nil, twinlog.NoEpoch, err
		}
		rs, err := bv.Records()
		if err != nil {
			return nil, twinlog.NoEpoch, err
		}
		for _, r := range rs {
			r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
			out = append(out, r)
		}
		if len(rs) > 0 {
			last = bv.LeaderEpoch()
		}
	}
	return out, last, nil
}
