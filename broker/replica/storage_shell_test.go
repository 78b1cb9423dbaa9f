package replica

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/epoch"
)

// storeShell drives one replica over a real storage.Log on a MemFS the way
// broker/partition.go does (processReadyLocked): log ops in whole batches,
// the epoch checkpoint, HW, Advance, then ConfirmTruncation after a
// truncation. The memLog of env truncates per record and cannot show what
// a straddling batch does.
type storeShell struct {
	t       *testing.T
	fs      *storage.MemFS
	dir     *storage.LogDir
	log     *storage.Log
	r       *Replica
	fetched []byte // follower or mirror batches for the next OpAppend
	ops     []LogOp
	now     int64
}

var storeTP = twinlog.TopicPartition{Topic: "t", Partition: 0}

// newStoreShell opens a log holding batches (base offset, record count,
// epoch) written as leader appends, and a replica over it.
func newStoreShell(t *testing.T, id twinlog.BrokerID, batches ...[3]int) *storeShell {
	t.Helper()
	s := &storeShell{t: t, fs: storage.NewMemFS()}
	d, err := storage.OpenLogDir(s.fs, "/data", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.GetOrCreate(storeTP)
	if err != nil {
		t.Fatal(err)
	}
	s.dir, s.log = d, l
	for _, b := range batches {
		if _, err := l.AppendAsFollower(s.batch(b[0], b[1], b[2])); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	s.r, err = New(Config{ID: id, Partition: storeTP, ReplicaLagTimeMaxMs: 1000}, LogState{
		LogStartOffset: l.LogStartOffset(), LogEndOffset: l.LogEndOffset(), HighWatermark: l.HighWatermark(),
		Epochs: l.Epochs().Entries(), AlignedEpoch: twinlog.NoEpoch,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// batch encodes one batch of n records at base with epoch e.
func (s *storeShell) batch(base, n, e int) []byte {
	recs := make([]storage.Record, n)
	for i := range recs {
		recs[i] = storage.Record{Value: fmt.Appendf(nil, "%d@%d", base+i, e)}
	}
	b, err := storage.EncodeBatch(recs, storage.BatchOptions{BaseOffset: twinlog.Offset(base), LeaderEpoch: twinlog.Epoch(e)})
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

// process handles every pending Ready; ops collects the LogOps applied.
func (s *storeShell) process() {
	s.t.Helper()
	for s.r.HasReady() {
		rd := s.r.Ready()
		truncated := false
		for _, op := range rd.LogOps {
			s.ops = append(s.ops, op)
			var err error
			switch op.Kind {
			case OpAppend:
				if op.Leader {
					s.t.Fatalf("leader proposals are not modelled: %v", op)
				}
				_, err = s.log.AppendAsFollower(s.fetched)
				s.fetched = nil
			case OpTruncate:
				truncated = true
				err = s.log.TruncateTo(op.Offset)
			case OpRestart:
				err = s.log.TruncateFullyAndStartAt(op.Offset)
			}
			if err != nil {
				s.t.Fatalf("%v: %v", op, err)
			}
		}
		if rd.EpochsChanged {
			// broker/partition.go syncEpochsLocked: the log keeps its cache
			// per batch and truncation; re-assign the machine's last entry.
			if have := s.log.Epochs().Entries(); len(rd.EpochEntries) > 0 && !slices.Equal(have, rd.EpochEntries) {
				last := rd.EpochEntries[len(rd.EpochEntries)-1]
				if err := s.log.AssignEpoch(last.Epoch, last.StartOffset); err != nil {
					s.t.Fatal(err)
				}
			}
		}
		if rd.HighWatermark != nil {
			s.log.SetHighWatermark(*rd.HighWatermark)
		}
		s.r.Advance()
		if truncated {
			if err := s.r.ConfirmTruncation(s.log.LogEndOffset(), s.now); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	s.r.CheckInvariants()
	s.check()
}

// check: the replica's view is the log (LEO, HW, epoch cache = checkpoint).
func (s *storeShell) check() {
	s.t.Helper()
	if s.r.LogEndOffset() != s.log.LogEndOffset() || s.r.LogStartOffset() != s.log.LogStartOffset() {
		s.t.Fatalf("replica log [%d, %d), storage [%d, %d)", s.r.LogStartOffset(), s.r.LogEndOffset(), s.log.LogStartOffset(), s.log.LogEndOffset())
	}
	if s.r.HighWatermark() != s.log.HighWatermark() {
		s.t.Fatalf("replica HW %d, storage HW %d", s.r.HighWatermark(), s.log.HighWatermark())
	}
	if re, le := s.r.EpochEntries(), s.log.Epochs().Entries(); !slices.Equal(re, le) {
		s.t.Fatalf("replica cache %v, storage cache %v", re, le)
	}
}

// reopenEpochs closes the log dir cleanly and returns the epoch cache the
// reopened log loads from its checkpoint.
func (s *storeShell) reopenEpochs() []epoch.Entry {
	s.t.Helper()
	if err := s.dir.Close(1); err != nil {
		s.t.Fatal(err)
	}
	d, err := storage.OpenLogDir(s.fs, "/data", storage.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	l, ok := d.Get(storeTP)
	if !ok {
		s.t.Fatal("log gone after reopen")
	}
	return l.Epochs().Entries()
}

func (s *storeShell) apply(st PartitionState) {
	s.r.ApplyPartitionState(st, s.now)
	s.process()
}

func partitionState(leader twinlog.BrokerID, le twinlog.Epoch, replicas ...twinlog.BrokerID) PartitionState {
	brokers := map[twinlog.BrokerID]twinlog.BrokerEpoch{}
	for _, id := range replicas {
		brokers[id] = twinlog.BrokerEpoch(100 * id)
	}
	return PartitionState{Leader: leader, LeaderEpoch: le, PartitionEpoch: 1, Replicas: replicas,
		ISR: slices.Clone(replicas), MinISR: 1, Brokers: brokers}
}

// TestTruncateAsLeaderAtLEOEmitsTruncate: the simulator's seed 535 (SPEC
// §8.10). A leader entered LE 8 on an empty log as a normal partition
// (assign(8, 0)); the topic becomes a mirror and the run's LMLE truncation
// cuts at the LEO, which only drops (8, 0). The machine must emit
// OpTruncate(0): the shell's only other means, re-assigning the machine's
// last entry, has no entry to re-assign once the cache is empty, and the
// checkpoint would keep (8, 0) across a restart (an epoch without records
// in a mirror cache, §8.16).
func TestTruncateAsLeaderAtLEOEmitsTruncate(t *testing.T) {
	s := newStoreShell(t, 3)
	s.apply(partitionState(3, 8, 3, 4))
	if got, want := s.log.Epochs().Entries(), []epoch.Entry{{Epoch: 8, StartOffset: 0}}; !slices.Equal(got, want) {
		t.Fatalf("leader cache on disk %v, want %v", got, want)
	}
	s.r.SetMirrorPartition(true)
	s.r.SetWritable(false)
	s.process()
	s.ops = nil
	if err := s.r.TruncateAsLeader(0, s.now); err != nil {
		t.Fatal(err)
	}
	if rd := s.r.Ready(); !rd.EpochsChanged || len(rd.EpochEntries) != 0 {
		t.Fatalf("epochs changed %t %v, want the cache emptied", rd.EpochsChanged, rd.EpochEntries)
	}
	s.process()
	if want := []LogOp{{Kind: OpTruncate, Offset: 0}}; !slices.EqualFunc(s.ops, want, func(a, b LogOp) bool { return a.String() == b.String() }) {
		t.Fatalf("log ops %v, want %v", s.ops, want)
	}
	if got := s.reopenEpochs(); len(got) != 0 {
		t.Fatalf("checkpoint after restart %v, want empty", got)
	}
}

// TestFollowerTruncatesMidBatch: the simulator's seed 362 (SPEC §4.3 step 4,
// §4.4). A tainted follower's own log ends with batch [2, 4] of epoch 1; the
// leader answers DivergingEpoch{1, T = 3} (the taint's offset need not be a
// batch boundary). The machine truncates to 3, storage removes the
// straddling batch whole and ends at 2: the shell's ConfirmTruncation makes
// the replica take LEO 2 (HW and cache with it), it fetches from 2, and the
// leader's batch appends there without a hole. Until the report the
// follower sends no fetch.
func TestFollowerTruncatesMidBatch(t *testing.T) {
	s := newStoreShell(t, 2, [3]int{0, 2, 1}, [3]int{2, 3, 1})
	s.apply(partitionState(1, 3, 1, 2))
	ft, ok := s.r.NextFetch()
	if !ok || ft.Request.FetchOffset != 5 || ft.Request.LastFetchedEpoch != 1 {
		t.Fatalf("first fetch %+v", ft.Request)
	}
	s.r.HandleFetchResponse(FetchResponse{Request: ft.Request, LeaderEpoch: 3, HighWatermark: 3, LogStartOffset: 0, LogEndOffset: 6,
		DivergingEpoch: &EpochEndOffset{Epoch: 1, EndOffset: 3}}, s.now)
	if got := s.r.LogEndOffset(); got != 3 {
		t.Fatalf("LEO %d after the divergence, want 3", got)
	}
	if _, ok := s.r.NextFetch(); ok {
		t.Fatal("fetch offered before the shell confirmed the truncation")
	}
	s.process() // TruncateTo(3) ends the log at 2; ConfirmTruncation(2)
	if got := s.log.LogEndOffset(); got != 2 {
		t.Fatalf("storage LEO %d, want 2 (the batch [2, 4] goes whole)", got)
	}
	if s.r.HighWatermark() > 2 {
		t.Fatalf("HW %d above LEO 2", s.r.HighWatermark())
	}
	ft, ok = s.r.NextFetch()
	if !ok || ft.Request.FetchOffset != 2 || ft.Request.LastFetchedEpoch != 1 {
		t.Fatalf("next fetch %+v, ok %t, want offset 2, last epoch 1", ft.Request, ok)
	}
	// The leader's records from 2 (its own batches) append at the log end.
	s.fetched = append(s.batch(2, 1, 1), s.batch(3, 3, 3)...)
	s.r.HandleFetchResponse(FetchResponse{Request: ft.Request, LeaderEpoch: 3, HighWatermark: 6, LogStartOffset: 0, LogEndOffset: 6,
		Batches: []BatchMeta{{BaseOffset: 2, LastOffset: 2, Epoch: 1}, {BaseOffset: 3, LastOffset: 5, Epoch: 3}}}, s.now)
	s.process()
	if s.r.LogEndOffset() != 6 || s.r.HighWatermark() != 6 {
		t.Fatalf("after the refetch: LEO %d HW %d, want 6 6", s.r.LogEndOffset(), s.r.HighWatermark())
	}
	rr, err := s.log.Read(0, 1<<20, 6)
	if err != nil {
		t.Fatal(err)
	}
	var got []twinlog.Offset
	for bv, err := range storage.Batches(rr.Batches) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, bv.BaseOffset())
	}
	if want := []twinlog.Offset{0, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("batch bases %v, want %v", got, want)
	}
}

// TestTruncateAsLeaderMidBatch: a mirror leader's truncation (a divergence
// answer from the source, §6.3, names the source's epoch end, which need
// not be a boundary of this log's batches) ends at the straddling batch's
// base: LEO, LESO, HW and the cache follow the log, and no copy is appended
// before the shell confirms.
func TestTruncateAsLeaderMidBatch(t *testing.T) {
	s := newStoreShell(t, 1, [3]int{0, 2, 1}, [3]int{2, 3, 2})
	s.r.SetMirrorPartition(true)
	s.r.SetWritable(false)
	s.apply(partitionState(1, 4, 1, 2))
	if err := s.r.TruncateAsLeader(3, s.now); err != nil {
		t.Fatal(err)
	}
	if err := s.r.AppendAsMirrorLeader([]BatchMeta{{BaseOffset: 3, LastOffset: 3, Epoch: 4}}, s.now); !errors.Is(err, ErrTruncationUnconfirmed) {
		t.Fatalf("append before the confirmation: %v, want ErrTruncationUnconfirmed", err)
	}
	s.process()
	if s.r.LogEndOffset() != 2 || s.r.LeaderEpochStartOffset() != 2 || s.r.HighWatermark() > 2 {
		t.Fatalf("LEO %d LESO %d HW %d, want 2 2 ≤2", s.r.LogEndOffset(), s.r.LeaderEpochStartOffset(), s.r.HighWatermark())
	}
	if want := []epoch.Entry{{Epoch: 1, StartOffset: 0}}; !slices.Equal(s.r.EpochEntries(), want) {
		t.Fatalf("cache %v, want %v", s.r.EpochEntries(), want)
	}
	s.fetched = s.batch(2, 2, 4)
	if err := s.r.AppendAsMirrorLeader([]BatchMeta{{BaseOffset: 2, LastOffset: 3, Epoch: 4}}, s.now); err != nil {
		t.Fatal(err)
	}
	s.process()
	if s.r.LogEndOffset() != 4 {
		t.Fatalf("LEO %d after the copy, want 4", s.r.LogEndOffset())
	}
}

// TestConfirmTruncationRejectsMismatch: a reported log end the machine
// cannot reach by a whole-batch truncation means the log and the replica
// disagree (rebuild from disk).
func TestConfirmTruncationRejectsMismatch(t *testing.T) {
	s := newStoreShell(t, 2, [3]int{0, 2, 1}, [3]int{2, 3, 1})
	s.apply(partitionState(1, 3, 1, 2))
	if err := s.r.ConfirmTruncation(5, s.now); err != nil {
		t.Fatalf("confirming the LEO with nothing owed: %v", err)
	}
	if err := s.r.ConfirmTruncation(2, s.now); !errors.Is(err, ErrLogMismatch) {
		t.Fatalf("a lower LEO with no truncation owed: %v, want ErrLogMismatch", err)
	}
	ft, _ := s.r.NextFetch()
	s.r.HandleFetchResponse(FetchResponse{Request: ft.Request, LeaderEpoch: 3, HighWatermark: 3, LogEndOffset: 6,
		DivergingEpoch: &EpochEndOffset{Epoch: 1, EndOffset: 3}}, s.now)
	if err := s.r.ConfirmTruncation(4, s.now); !errors.Is(err, ErrLogMismatch) {
		t.Fatalf("a log end above the truncation: %v, want ErrLogMismatch", err)
	}
}
