package replica

import (
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestRetentionAdvancesLogStart runs retention the way broker/retention.go
// does: storage deletes whole segments below the replica's HW, then the
// machine takes the log's new start. A consumer or follower below it gets
// OFFSET_OUT_OF_RANGE with that start; the epoch cache loses the epochs
// below it on both sides; an offset above the HW is never taken.
func TestRetentionAdvancesLogStart(t *testing.T) {
	s := newStoreShell(t, 1)
	for _, b := range [][3]int{{0, 3, 1}, {3, 3, 1}, {6, 2, 2}, {8, 2, 2}} {
		if err := s.log.Roll(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.log.AppendAsFollower(s.batch(b[0], b[1], b[2])); err != nil {
			t.Fatal(err)
		}
	}
	s.log.SetHighWatermark(7)
	r, err := New(Config{ID: 1, Partition: storeTP, ReplicaLagTimeMaxMs: 1000}, LogState{
		LogStartOffset: 0, LogEndOffset: 10, HighWatermark: 7, Epochs: s.log.Epochs().Entries(), AlignedEpoch: twinlog.NoEpoch,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	s.apply(partitionState(1, 3, 1, 2))
	if s.r.HighWatermark() != 7 {
		t.Fatalf("HW %d, want 7", s.r.HighWatermark())
	}

	// Everything is beyond 1 byte, but only the segments below the
	// machine's HW 7 may go: [0,3) and [3,6).
	n, _, err := s.log.DeleteRetained(storage.Retention{Bytes: 1, Below: s.r.HighWatermark()})
	if err != nil || n != 2 {
		t.Fatalf("deleted %d segments, %v; want 2", n, err)
	}
	s.r.AdvanceLogStart(s.log.LogStartOffset())
	s.process() // the machine's cache reaches the checkpoint; check() compares both
	if s.r.LogStartOffset() != 6 {
		t.Fatalf("log start %d, want 6", s.r.LogStartOffset())
	}
	if want := []epoch.Entry{{Epoch: 2, StartOffset: 6}, {Epoch: 3, StartOffset: 10}}; !slices.Equal(s.r.EpochEntries(), want) {
		t.Fatalf("cache %v, want %v", s.r.EpochEntries(), want)
	}

	for _, ft := range []pb.FetcherType{pb.FetcherType_FETCHER_TYPE_CONSUMER, pb.FetcherType_FETCHER_TYPE_FOLLOWER} {
		f := FetchRequest{ReplicaID: -1, FetcherType: ft, FetchOffset: 4, CurrentLeaderEpoch: 3, LastFetchedEpoch: twinlog.NoEpoch}
		if ft == pb.FetcherType_FETCHER_TYPE_FOLLOWER {
			f.ReplicaID, f.BrokerEpoch, f.Seq = 2, 200, 1
		}
		d := s.r.HandleFollowerFetch(f, s.now)
		if d.Error != errOutOfRange || d.LogStartOffset != 6 {
			t.Fatalf("%v fetch at 4: error %v, log start %d; want out of range at 6", ft, d.Error, d.LogStartOffset)
		}
	}

	// Lower or beyond the HW: a no-op, then clamped.
	s.r.AdvanceLogStart(2)
	s.r.AdvanceLogStart(9)
	if got := s.r.LogStartOffset(); got != 7 {
		t.Fatalf("log start %d after AdvanceLogStart(9) with HW 7, want 7", got)
	}
	s.r.CheckInvariants()
}
