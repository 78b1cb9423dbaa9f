package replica

import (
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestAddedBackStartsEmpty: a replica added (back) to R starts empty (SPEC
// §2.1, §3.8) even when its broker never applied the removal
// (discardLogIfAddedBack). Seed 134 of the two-cluster simulator: broker 1
// of cluster B crashed holding B's own epoch-2 records, was reassigned out
// of t-0 and back in while down, and the run's full truncation (LMLE −1)
// happened in between; kept, its epoch-2 records passed the divergence
// check against the leader's mirrored epoch-2 records from cluster A
// (§8.9). Replica 1 here holds [0, 47) of epochs 2 and 3 with aligned_epoch
// 3; leader 5 in LE 6, R {5 3 4 1}.
func TestAddedBackStartsEmpty(t *testing.T) {
	brokers := map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 7, 3: 1, 4: 1, 5: 1}
	state := func(pe twinlog.PartitionEpoch, adding, isr, elr []twinlog.BrokerID) PartitionState {
		return PartitionState{Leader: 5, LeaderEpoch: 6, PartitionEpoch: pe, Replicas: []twinlog.BrokerID{5, 3, 4, 1},
			ISR: isr, ELR: elr, AddingReplicas: adding, MinISR: 1, Brokers: brokers,
			TruncationPoints: []TruncationPoint{{LeaderEpoch: 4, Offset: 0}}}
	}
	one := []twinlog.BrokerID{1}
	isr := []twinlog.BrokerID{5, 3, 4}
	for _, tc := range []struct {
		name string
		// open: the state the replica opens with (first after New); then
		// each of later is applied in turn (PE rising).
		open      PartitionState
		later     []PartitionState
		wantEmpty bool
		// copy: after the first state, the replica copies [0, 10) of
		// epoch 2 from the leader (a log the addition made).
		copy bool
	}{
		{name: "opened in AddingReplicas: log from before the removal", open: state(18, one, isr, nil), wantEmpty: true},
		{name: "opened in R, not adding: keeps its log (taints repair it)", open: state(18, nil, isr, nil)},
		{name: "adding but in the ISR: joined after the addition", open: state(18, one, []twinlog.BrokerID{5, 1}, nil)},
		{name: "adding but in the ELR: may hold committed records", open: state(18, one, []twinlog.BrokerID{5}, one)},
		{name: "adding but in the last known ELR: an unclean recovery's candidate", open: func() PartitionState {
			st := state(18, one, []twinlog.BrokerID{5}, nil)
			st.LastKnownELR = one
			return st
		}()},
		{name: "open in R, then adding without the removal applied", open: state(17, nil, isr, nil),
			later: []PartitionState{state(18, one, isr, nil)}, wantEmpty: true},
		{name: "still adding: the addition's own log is kept", open: state(18, one, isr, nil),
			later: []PartitionState{state(19, one, isr, nil)}, wantEmpty: true, copy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
				LogEndOffset: 47, HighWatermark: 45, AlignedEpoch: 3,
				Epochs: []epoch.Entry{{Epoch: 2, StartOffset: 0}, {Epoch: 3, StartOffset: 31}},
			})
			if err != nil {
				t.Fatal(err)
			}
			r.SetMirrorPartition(true)
			var restarts []LogOp
			step := func(st PartitionState) {
				r.ApplyPartitionState(st, 0)
				rd := r.Ready()
				for _, op := range rd.LogOps {
					if op.Kind == OpRestart {
						restarts = append(restarts, op)
					}
				}
				if len(rd.LogOps) > 0 && rd.AlignedEpoch == nil && r.AlignedEpoch() != twinlog.NoEpoch {
					t.Fatalf("log restarted, aligned_epoch %d kept", r.AlignedEpoch())
				}
				r.Advance()
				r.CheckInvariants()
			}
			step(tc.open)
			if tc.copy {
				f, ok := r.NextFetch()
				if !ok {
					t.Fatal("no fetch after the restart")
				}
				r.HandleFetchResponse(FetchResponse{Request: f.Request, LeaderEpoch: 6, HighWatermark: 10, LogEndOffset: 10,
					Batches: []BatchMeta{{BaseOffset: 0, LastOffset: 9, Epoch: 2}}}, 0)
				r.Advance()
			}
			for _, st := range tc.later {
				step(st)
			}
			if tc.copy {
				if len(restarts) != 1 || r.LogEndOffset() != 10 {
					t.Fatalf("restarts %v, LEO %d; want one restart, then the copied [0, 10) kept", restarts, r.LogEndOffset())
				}
				return
			}
			if !tc.wantEmpty {
				if len(restarts) > 0 || r.LogEndOffset() != 47 || r.HighWatermark() != 45 || r.AlignedEpoch() != 3 {
					t.Fatalf("log changed: restarts %v, LEO %d, HW %d, aligned %d; want it kept", restarts, r.LogEndOffset(), r.HighWatermark(), r.AlignedEpoch())
				}
				return
			}
			if len(restarts) != 1 || restarts[0].Offset != 0 {
				t.Fatalf("restarts %v, want one restart at 0", restarts)
			}
			if r.LogEndOffset() != 0 || r.LogStartOffset() != 0 || r.HighWatermark() != 0 || len(r.EpochEntries()) != 0 || r.AlignedEpoch() != twinlog.NoEpoch {
				t.Fatalf("after restart: log [%d, %d), HW %d, epochs %v, aligned %d; want an empty log at 0",
					r.LogStartOffset(), r.LogEndOffset(), r.HighWatermark(), r.EpochEntries(), r.AlignedEpoch())
			}
			f, ok := r.NextFetch()
			if !ok || f.Request.FetchOffset != 0 || f.Request.LastFetchedEpoch != twinlog.NoEpoch {
				t.Fatalf("next fetch %+v (ok %t), want offset 0 with no last fetched epoch", f, ok)
			}
		})
	}
}
