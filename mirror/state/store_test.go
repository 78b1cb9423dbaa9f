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

func (l *shrinkLog) Read(sp int32, from twinlog.Offset, _ twinlog.Epoch, done func([]storage.Record, twinlog.Epoch, twinlog.Offset, error)) {
	hw := twinlog.Offset(len(l.recs))
	if from > hw {
		if l.remote {
			done(state.ReadAnswer(sp, &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{
				Topic: state.Topic, Partition: sp, Error: pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, HighWatermark: -1}}}))
			return
		}
		done(nil, twinlog.NoEpoch, hw, nil)
		return
	}
	done(append([]storage.Record(nil), l.recs[from:]...), 0, hw, nil)
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
	if _, _, _, err := state.ReadAnswer(0, &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{Topic: state.Topic,
		Error: pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE}}}); !errors.Is(err, state.ErrNotReady) {
		t.Fatalf("OFFSET_OUT_OF_RANGE answer: %v, want ErrNotReady", err)
	}
}

// regrowLog is one __mirror_state partition on a real storage.Log whose
// leader may lose a tail and take new records at its offsets (an unclean
// election, then writes). Local reads are state.ReadLocal's; remote reads
// answer as a leader's fetch does: a diverging epoch when the log does not
// hold the reader's last record (storage.Log.Diverging), else the records
// below the HW.
type regrowLog struct {
	t      *testing.T
	log    *storage.Log
	remote bool
}

func (l *regrowLog) Partitions() (int32, bool) { return 1, true }
func (l *regrowLog) Leads(int32) bool          { return !l.remote }
func (l *regrowLog) NowMs() int64              { return 0 }

func (l *regrowLog) Read(sp int32, from twinlog.Offset, last twinlog.Epoch, done func([]storage.Record, twinlog.Epoch, twinlog.Offset, error)) {
	hw := l.log.LogEndOffset()
	if !l.remote {
		done(state.ReadLocal(l.log, from, last, hw, 0))
		return
	}
	pr := &pb.FetchPartitionResponse{Topic: state.Topic, Partition: sp, HighWatermark: int64(hw)}
	if l.log.Diverging(last, from) {
		e, o := l.log.EndOffsetForEpoch(last)
		pr.DivergingEpoch = &pb.EpochEndOffset{Epoch: int32(e), EndOffset: int64(o)}
	} else if from < hw {
		rr, err := l.log.Read(from, state.MaxReadBytes, hw)
		if err != nil {
			l.t.Fatal(err)
		}
		pr.Records = rr.Batches
	}
	done(state.ReadAnswer(sp, &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{pr}}))
}

// appendRun appends the run record of partition part of the mirror topic,
// in state st, as the leader in epoch e.
func (l *regrowLog) appendRun(part int32, st pb.MirrorState, e twinlog.Epoch) {
	l.t.Helper()
	key, msg := state.Entry("m", "id", part, &pb.MirrorRunRecord{State: st, StateEpoch: 1}, nil)
	val, err := proto.Marshal(msg)
	if err != nil {
		l.t.Fatal(err)
	}
	buf, err := storage.EncodeBatch([]storage.Record{{Key: key, Value: val}}, storage.BatchOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	if err := l.log.AssignEpoch(e, l.log.LogEndOffset()); err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.log.AppendAsLeader(buf, e); err != nil {
		l.t.Fatal(err)
	}
}

// TestStoreRereadsAfterLostTailRegrew: records a Store has read are cut
// from the partition and, before its next read, others are written at
// and past their offsets in a later epoch, so the log's end is beyond
// the view again and an offset check alone sees nothing amiss. The read
// carries the epoch of the view's last record (a fetch's
// last_fetched_epoch, checked by the leader; for its own replica by
// ReadLocal), the log answers that it diverges, and the Store reads the
// partition again from its start: it answers what the log holds, not the
// cut record. Without the epoch the view read on from offset 2 and kept
// STOPPED from the cut tail.
func TestStoreRereadsAfterLostTailRegrew(t *testing.T) {
	for _, remote := range []bool{true, false} {
		lg, err := storage.Open(storage.NewMemFS(), "/p", storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		l := &regrowLog{t: t, log: lg, remote: remote}
		s := state.NewStore(l, nil)
		load := func() *pb.MirrorRunRecord {
			t.Helper()
			var run *pb.MirrorRunRecord
			var err error
			s.Load("t", "m", "id", 0, func(r *pb.MirrorRunRecord, _ *pb.MirrorLmleRecord, e error) { run, err = r, e })
			if err != nil {
				t.Fatalf("remote %t: load: %v", remote, err)
			}
			return run
		}
		l.appendRun(0, pb.MirrorState_MIRROR_STATE_MIRRORING, 1)
		l.appendRun(0, pb.MirrorState_MIRROR_STATE_STOPPED, 1)
		if run := load(); run.GetState() != pb.MirrorState_MIRROR_STATE_STOPPED {
			t.Fatalf("remote %t: first load %v; want STOPPED", remote, run)
		}
		// A replica without offset 1 is elected in epoch 2 and takes a
		// record of the partition at 1 and one of another at 2: the log
		// ends past the view's next offset (2) again.
		if err := lg.TruncateTo(1); err != nil {
			t.Fatal(err)
		}
		l.appendRun(0, pb.MirrorState_MIRROR_STATE_PAUSED, 2)
		l.appendRun(1, pb.MirrorState_MIRROR_STATE_MIRRORING, 2)
		if run := load(); run.GetState() != pb.MirrorState_MIRROR_STATE_PAUSED {
			t.Fatalf("remote %t: load after the regrown tail: %v; want PAUSED (what the log holds)", remote, run)
		}
		// And reads go on from there.
		l.appendRun(0, pb.MirrorState_MIRROR_STATE_STOPPING, 2)
		if run := load(); run.GetState() != pb.MirrorState_MIRROR_STATE_STOPPING {
			t.Fatalf("remote %t: load of a new record: %v; want STOPPING", remote, run)
		}
	}
}
