package state_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/storage"
)

// shrinkLog is one __mirror_state partition whose leader's log can lose
// its tail (an unclean election). remote reads answer as a leader's fetch
// does (ReadAnswer of OFFSET_OUT_OF_RANGE past its log); local reads as
// ReadLocal does (nothing, and the HW, from at or past the HW).
type shrinkLog struct {
	recs   []storage.Record
	remote bool
}

func (l *shrinkLog) Partitions() (int32, bool) { return 1, true }
func (l *shrinkLog) Leads(int32) bool          { return !l.remote }
func (l *shrinkLog) NowMs() int64              { return 0 }

func (l *shrinkLog) Read(sp int32, from twinlog.Offset, done func([]storage.Record, twinlog.Offset, error)) {
	hw := twinlog.Offset(len(l.recs))
	if from > hw {
		if l.remote {
			done(state.ReadAnswer(sp, &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{
				Topic: state.Topic, Partition: sp, Error: pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, HighWatermark: -1}}}))
			return
		}
		done(nil, hw, nil)
		return
	}
	done(append([]storage.Record(nil), l.recs[from:]...), hw, nil)
}

func (l *shrinkLog) appendRun(t *testing.T, st pb.MirrorState) {
	t.Helper()
	key, msg := state.Entry("m", "id", 0, &pb.MirrorRunRecord{State: st, StateEpoch: 1}, nil)
	val, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	l.recs = append(l.recs, storage.Record{Offset: twinlog.Offset(len(l.recs)), Key: key, Value: val})
}

// TestStoreRereadsAfterLostRecords: records a Store has read can vanish
// from the partition (the operator's unclean election of __mirror_state
// elects a replica without them). The Store then reads the partition again
// from its start and answers what the log now holds; before, every later
// read asked for an offset past the leader's log and failed for good, and
// the mirror runners waiting for the state kept their followers out
// (simulator seed 9509490), or, on the leader itself, the view kept
// records the log no longer had.
func TestStoreRereadsAfterLostRecords(t *testing.T) {
	for _, remote := range []bool{true, false} {
		l := &shrinkLog{remote: remote}
		s := state.NewStore(l, nil)
		l.appendRun(t, pb.MirrorState_MIRROR_STATE_MIRRORING)
		l.appendRun(t, pb.MirrorState_MIRROR_STATE_STOPPING)
		l.appendRun(t, pb.MirrorState_MIRROR_STATE_STOPPED)
		load := func() (*pb.MirrorRunRecord, error) {
			var run *pb.MirrorRunRecord
			var err error
			s.Load("t", "m", "id", 0, func(r *pb.MirrorRunRecord, _ *pb.MirrorLmleRecord, e error) { run, err = r, e })
			return run, err
		}
		if run, err := load(); err != nil || run.GetState() != pb.MirrorState_MIRROR_STATE_STOPPED {
			t.Fatalf("remote %t: first load %v, %v; want STOPPED", remote, run, err)
		}
		l.recs = l.recs[:1] // the new leader holds offset 0 only
		run, err := load()
		if err != nil || run.GetState() != pb.MirrorState_MIRROR_STATE_MIRRORING {
			t.Fatalf("remote %t: load after the loss: %v, %v; want MIRRORING (what the log holds)", remote, run, err)
		}
		// Records written after the loss are read from where they are.
		l.appendRun(t, pb.MirrorState_MIRROR_STATE_PAUSED)
		if run, err := load(); err != nil || run.GetState() != pb.MirrorState_MIRROR_STATE_PAUSED {
			t.Fatalf("remote %t: load of a new record: %v, %v; want PAUSED", remote, run, err)
		}
	}
	if _, _, err := state.ReadAnswer(0, &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{Topic: state.Topic,
		Error: pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE}}}); !errors.Is(err, state.ErrNotReady) {
		t.Fatalf("OFFSET_OUT_OF_RANGE answer: %v, want ErrNotReady", err)
	}
}
