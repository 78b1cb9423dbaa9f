package replica

import (
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestFetchedEpochBelowCache: the simulator's two-cluster seed 432. After a
// tainted replica's unclean election (SPEC §6.8) the leader's epoch 2 is not
// the follower's epoch 2, so fetch(12, last 2) passes the leader's check and
// the answer starts with an epoch-0 batch at 12, below the follower's latest
// cached epoch. Appended, it made storage refuse the append ("batch at 12 has
// epoch 0 after epoch 2"), which takes the partition offline in the broker.
// The follower must never emit such an append: it restarts its log at the
// leader's log start when it holds records the batch contradicts, trims only
// an empty epoch at the LEO otherwise, and drops an answer whose own epochs
// go back. A batch at or above the latest epoch appends as before. A batch
// holding the LEO inside it (seed 760568) proves the log no prefix of the
// leader's and restarts it too.
func TestFetchedEpochBelowCache(t *testing.T) {
	for _, tc := range []struct {
		name      string
		epochs    []epoch.Entry // follower cache; its log is [0, 12), HW 12
		batches   []BatchMeta
		logStart  twinlog.Offset // the leader's
		wantOps   []LogOp
		wantCache []epoch.Entry
		wantLEO   twinlog.Offset
		wantHW    twinlog.Offset
		wantLast  twinlog.Epoch // lastFetchedEpoch of the next fetch
	}{
		{"seed 432: records of a foreign epoch restart the log",
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}},
			[]BatchMeta{{BaseOffset: 12, LastOffset: 14, Epoch: 0}, {BaseOffset: 15, LastOffset: 19, Epoch: 0}, {BaseOffset: 20, LastOffset: 24, Epoch: 2}},
			0, []LogOp{{Kind: OpRestart, Offset: 0}}, nil, 0, 0, twinlog.NoEpoch},
		{"restart at the leader's log start",
			[]epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 6}},
			[]BatchMeta{{BaseOffset: 12, LastOffset: 14, Epoch: 2}},
			4, []LogOp{{Kind: OpRestart, Offset: 4}}, nil, 4, 4, twinlog.NoEpoch},
		{"an empty epoch at the LEO is only trimmed",
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}, {Epoch: 7, StartOffset: 12}},
			[]BatchMeta{{BaseOffset: 12, LastOffset: 14, Epoch: 5}},
			0, []LogOp{{Kind: OpTruncate, Offset: 12}}, []epoch.Entry{{Epoch: 2, StartOffset: 0}}, 12, 12, 2},
		{"epochs going back within the answer: dropped",
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}},
			[]BatchMeta{{BaseOffset: 12, LastOffset: 13, Epoch: 3}, {BaseOffset: 14, LastOffset: 14, Epoch: 2}},
			0, nil, []epoch.Entry{{Epoch: 2, StartOffset: 0}}, 12, 12, 2},
		{"seed 760568: a batch holding the LEO inside it restarts the log",
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}},
			[]BatchMeta{{BaseOffset: 11, LastOffset: 13, Epoch: 2}, {BaseOffset: 14, LastOffset: 14, Epoch: 2}},
			3, []LogOp{{Kind: OpRestart, Offset: 3}}, nil, 3, 3, twinlog.NoEpoch},
		{"a straddling batch restarts no higher than its base",
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}},
			[]BatchMeta{{BaseOffset: 10, LastOffset: 12, Epoch: 2}},
			30, []LogOp{{Kind: OpRestart, Offset: 10}}, nil, 10, 10, twinlog.NoEpoch},
		{"a straddling answer with a bad later batch: dropped",
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}},
			[]BatchMeta{{BaseOffset: 11, LastOffset: 13, Epoch: 2}, {BaseOffset: 13, LastOffset: 14, Epoch: 2}},
			0, nil, []epoch.Entry{{Epoch: 2, StartOffset: 0}}, 12, 12, 2},
		{"a batch wholly below the LEO: dropped",
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}},
			[]BatchMeta{{BaseOffset: 9, LastOffset: 11, Epoch: 2}},
			0, nil, []epoch.Entry{{Epoch: 2, StartOffset: 0}}, 12, 12, 2},
		{"epochs at or above the latest append as before",
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}},
			[]BatchMeta{{BaseOffset: 12, LastOffset: 14, Epoch: 2}, {BaseOffset: 15, LastOffset: 15, Epoch: 4}},
			0, []LogOp{{Kind: OpAppend, Batches: []BatchMeta{{BaseOffset: 12, LastOffset: 14, Epoch: 2}, {BaseOffset: 15, LastOffset: 15, Epoch: 4}}}},
			[]epoch.Entry{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 15}}, 16, 16, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := twinlog.TopicPartition{Topic: "t", Partition: 1}
			r, err := New(Config{ID: 2, Partition: tp, ReplicaLagTimeMaxMs: 1000}, LogState{
				LogEndOffset: 12, HighWatermark: 12, AlignedEpoch: twinlog.NoEpoch, Epochs: tc.epochs,
			})
			if err != nil {
				t.Fatal(err)
			}
			r.ApplyPartitionState(PartitionState{Leader: 1, LeaderEpoch: 11, PartitionEpoch: 1, Replicas: []twinlog.BrokerID{1, 2},
				ISR: []twinlog.BrokerID{1}, MinISR: 1, Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 100, 2: 200}}, 0)
			r.Advance()
			ft, ok := r.NextFetch()
			if !ok || ft.Request.FetchOffset != 12 {
				t.Fatalf("fetch %+v %v", ft.Request, ok)
			}
			r.HandleFetchResponse(FetchResponse{Request: ft.Request, LeaderEpoch: 11, HighWatermark: 54, LogEndOffset: 54,
				LogStartOffset: tc.logStart, Batches: tc.batches}, 0)
			rd := r.Ready()
			if !slices.EqualFunc(rd.LogOps, tc.wantOps, func(a, b LogOp) bool { return a.String() == b.String() }) {
				t.Fatalf("log ops %v, want %v", rd.LogOps, tc.wantOps)
			}
			r.Advance()
			if len(rd.LogOps) > 0 && rd.LogOps[0].Kind == OpTruncate {
				if err := r.ConfirmTruncation(tc.wantLEO, 0); err != nil {
					t.Fatal(err)
				}
			}
			r.CheckInvariants()
			if got := r.EpochEntries(); !slices.Equal(got, tc.wantCache) {
				t.Fatalf("cache %v, want %v", got, tc.wantCache)
			}
			if r.LogEndOffset() != tc.wantLEO || r.HighWatermark() != tc.wantHW {
				t.Fatalf("LEO %d HW %d, want %d, %d", r.LogEndOffset(), r.HighWatermark(), tc.wantLEO, tc.wantHW)
			}
			if ft, ok = r.NextFetch(); !ok || ft.Request.FetchOffset != tc.wantLEO || ft.Request.LastFetchedEpoch != tc.wantLast {
				t.Fatalf("next fetch %+v (%v), want offset %d last %d", ft.Request, ok, tc.wantLEO, tc.wantLast)
			}
		})
	}
}

// TestForeignEpochsConverge runs seed 432's logs through the env: follower
// 2 holds the other cluster's epochs 2 and 5 ({2:0, 5:12}), leader 1 its
// own epochs 0 and 2 ({0:0, 2:20}). DivergingEpoch{2, 54} cuts the follower
// to 12, the epoch-0 answer at 12 restarts it at 0, and it ends as a copy of
// the leader's log (records compared by identity, not only by epoch).
func TestForeignEpochsConverge(t *testing.T) {
	e := newEnv(1000)
	e.quiet = true
	e.addNode(1, parseLog(t, "0-19@0,20-53@2"), 54)
	e.addNode(2, parseLog(t, "0-11@2,12-16@5"), 12)
	for i := range e.nodes[2].log.recs {
		e.nodes[2].log.recs[i].id = "b-" + e.nodes[2].log.recs[i].id // the other cluster's records
	}
	e.ctl.replicas, e.ctl.isr, e.ctl.leader, e.ctl.le, e.ctl.pe = []twinlog.BrokerID{1, 2}, []twinlog.BrokerID{1}, 1, 11, 1
	e.push(e.ids())
	var offsets []twinlog.Offset
	for range 4 {
		ft, ok := e.nodes[2].r.NextFetch()
		if !ok {
			t.Fatal("follower has no fetch")
		}
		offsets = append(offsets, ft.Request.FetchOffset)
		e.deliverFetch(queuedFetch{from: 2, target: ft})
	}
	if want := []twinlog.Offset{17, 12, 0, 54}; !slices.Equal(offsets, want) {
		t.Fatalf("fetch offsets %v, want %v", offsets, want)
	}
	l, f := e.nodes[1].log, e.nodes[2].log
	if f.start != l.start || !slices.Equal(f.recs, l.recs) {
		t.Fatalf("follower log %v (start %d), leader log %v (start %d)", f, f.start, l, l.start)
	}
}
