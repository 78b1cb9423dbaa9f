package replica

import (
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestHWCapAtTruncationPoints: a replica becoming leader in LE le starts
// from min(HW, o) for every truncation point (e, o) with validated < e < le
// (SPEC §6.2f, §4.2; capHWAtTruncationPoints). Replica 1 of R {1,2}, ISR
// {1,2} (2 has not fetched, so the HW cannot re-advance), log [0, 20) of
// epoch 1 unless stated.
func TestHWCapAtTruncationPoints(t *testing.T) {
	for _, tc := range []struct {
		name      string
		logStart  twinlog.Offset
		hw        twinlog.Offset
		aligned   twinlog.Epoch
		points    []TruncationPoint
		le        twinlog.Epoch
		isr       []twinlog.BrokerID
		notMirror bool // a normal partition again (stopped), points kept
		wantHW    twinlog.Offset
	}{
		{name: "no points", hw: 20, aligned: 1, le: 3, wantHW: 20},
		{name: "missed point", hw: 20, aligned: 1, points: []TruncationPoint{{2, 7}}, le: 3, wantHW: 7},
		{name: "missed point, not a mirror partition any more", hw: 20, aligned: 1, points: []TruncationPoint{{2, 7}}, le: 3, notMirror: true, wantHW: 7},
		{name: "point validated by aligned_epoch", hw: 20, aligned: 2, points: []TruncationPoint{{2, 7}}, le: 3, wantHW: 20},
		{name: "aligned past the point", hw: 20, aligned: 4, points: []TruncationPoint{{2, 7}}, le: 5, wantHW: 20},
		{name: "no aligned_epoch", hw: 20, aligned: twinlog.NoEpoch, points: []TruncationPoint{{2, 7}}, le: 3, wantHW: 7},
		{name: "HW already below the point", hw: 5, aligned: 1, points: []TruncationPoint{{2, 7}}, le: 3, wantHW: 5},
		{name: "HW at the point", hw: 7, aligned: 1, points: []TruncationPoint{{2, 7}}, le: 3, wantHW: 7},
		{name: "smallest missed point wins", hw: 20, aligned: 1, points: []TruncationPoint{{2, 12}, {4, 9}, {5, 15}}, le: 6, wantHW: 9},
		{name: "only points after the validated LE", hw: 20, aligned: 4, points: []TruncationPoint{{2, 3}, {4, 9}, {5, 15}}, le: 6, wantHW: 15},
		{name: "point in the new LE is the leader's own truncation", hw: 20, aligned: 1, points: []TruncationPoint{{3, 7}}, le: 3, wantHW: 20},
		{name: "point below the log start", logStart: 10, hw: 20, aligned: 1, points: []TruncationPoint{{2, 4}}, le: 3, wantHW: 10},
		{name: "sole ISR member re-advances at once (§4.2)", hw: 20, aligned: 1, points: []TruncationPoint{{2, 7}}, le: 3, isr: []twinlog.BrokerID{1}, wantHW: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isr := tc.isr
			if isr == nil {
				isr = []twinlog.BrokerID{1, 2}
			}
			r, err := New(Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
				LogStartOffset: tc.logStart, LogEndOffset: 20, HighWatermark: tc.hw,
				Epochs: []epoch.Entry{{Epoch: 1, StartOffset: tc.logStart}}, AlignedEpoch: tc.aligned,
			})
			if err != nil {
				t.Fatal(err)
			}
			r.SetMirrorPartition(!tc.notMirror)
			r.ApplyPartitionState(PartitionState{Leader: 1, LeaderEpoch: tc.le, PartitionEpoch: 1, Replicas: []twinlog.BrokerID{1, 2},
				ISR: isr, MinISR: 1, Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1}, TruncationPoints: tc.points}, 0)
			if got := r.HighWatermark(); got != tc.wantHW {
				t.Fatalf("HW %d, want %d", got, tc.wantHW)
			}
			if rd := r.Ready(); tc.wantHW < tc.hw && (rd.HighWatermark == nil || *rd.HighWatermark != tc.wantHW) {
				t.Fatalf("Ready.HighWatermark %v, want %d (the capped HW is persisted)", rd.HighWatermark, tc.wantHW)
			}
			r.CheckInvariants()
		})
	}
}

// TestHWCapValidatedInMemory: an LE the replica led counts as validated
// (in memory) once its own owed truncation is done; a leadership that ended
// before its owed truncation does not validate that point. Replica 1 of R
// {1,2} bumps to LE 2 with point (2, 10) and loses LE 2 to 2 (LE 3) without
// fetching; it is elected again in LE 4 with aligned_epoch 1.
func TestHWCapValidatedInMemory(t *testing.T) {
	brokers := map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1}
	for _, tc := range []struct {
		name     string
		truncate bool // TruncateAsLeader(10) in LE 2, copy [10, 20) again, 2 fetches it
		wantHW   twinlog.Offset
	}{
		{"owed truncation done: LE 2 validated", true, 20},
		{"owed truncation never done", false, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
				LogEndOffset: 20, HighWatermark: 20, Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}}, AlignedEpoch: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			r.SetMirrorPartition(true)
			st := func(leader twinlog.BrokerID, le twinlog.Epoch) PartitionState {
				return PartitionState{Leader: leader, LeaderEpoch: le, PartitionEpoch: twinlog.PartitionEpoch(le), Replicas: []twinlog.BrokerID{1, 2},
					ISR: []twinlog.BrokerID{1, 2}, MinISR: 1, Brokers: brokers, TruncationPoints: []TruncationPoint{{2, 10}}}
			}
			r.ApplyPartitionState(st(1, 2), 0) // the bump: truncation (2, 10) owed
			if r.HighWatermark() != 20 {
				t.Fatalf("HW %d before the owed truncation, want 20 (TruncateAsLeader cuts it)", r.HighWatermark())
			}
			if tc.truncate {
				if err := r.TruncateAsLeader(10, 0); err != nil {
					t.Fatal(err)
				}
				if err := r.ConfirmTruncation(10, 0); err != nil {
					t.Fatal(err)
				}
				if err := r.AppendAsMirrorLeader([]BatchMeta{{BaseOffset: 10, LastOffset: 19, Epoch: 2}}, 0); err != nil {
					t.Fatal(err)
				}
				d := r.HandleFollowerFetch(FetchRequest{ReplicaID: 2, BrokerEpoch: 1, FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER,
					FetchOffset: 20, CurrentLeaderEpoch: 2, LastFetchedEpoch: 2, Seq: 1}, 0)
				if d.Error != errNone || d.DivergingEpoch != nil || r.HighWatermark() != 20 {
					t.Fatalf("follower fetch in LE 2: %v %v, HW %d, want NONE and HW 20", d.Error, d.DivergingEpoch, r.HighWatermark())
				}
			}
			r.Advance()
			r.ApplyPartitionState(st(2, 3), 0)
			r.ApplyPartitionState(st(1, 4), 0)
			if got := r.HighWatermark(); got != tc.wantHW {
				t.Fatalf("HW %d in LE 4, want %d", got, tc.wantHW)
			}
			r.CheckInvariants()
		})
	}
}
