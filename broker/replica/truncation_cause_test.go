package replica

import (
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestTruncationCause: every truncation event says why, so the shell's
// metric reason never depends on the event's text (a mirror leader's cut
// used to be counted as a divergence as well as by its runner). The
// scenario goldens show divergence and as_leader; this covers the rest.
func TestTruncationCause(t *testing.T) {
	truncations := func(r *Replica) []TruncationCause {
		var out []TruncationCause
		for _, ev := range r.Ready().Events {
			if ev.Type == EventTruncation {
				out = append(out, ev.Cause)
			}
		}
		r.Advance()
		return out
	}
	brokers := map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1}
	follower := func(t *testing.T, st PartitionState) *Replica {
		r, err := New(Config{ID: 2, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
			LogEndOffset: 5, HighWatermark: 5, Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}},
		})
		if err != nil {
			t.Fatal(err)
		}
		r.ApplyPartitionState(st, 0)
		r.Advance()
		return r
	}
	st := PartitionState{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 3, Replicas: []twinlog.BrokerID{1, 2},
		ISR: []twinlog.BrokerID{1, 2}, MinISR: 1, Brokers: brokers}

	t.Run("out of range", func(t *testing.T) {
		r := follower(t, st)
		f, ok := r.NextFetch()
		if !ok {
			t.Fatal("no fetch")
		}
		r.HandleFetchResponse(FetchResponse{Request: f.Request, Error: pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE,
			LeaderEpoch: 2, LogStartOffset: 20, HighWatermark: 30, LogEndOffset: 30}, 0)
		if got := truncations(r); len(got) != 1 || got[0] != CauseOutOfRange {
			t.Fatalf("causes %v, want [out_of_range]", got)
		}
	})
	t.Run("added back", func(t *testing.T) {
		added := st
		added.Replicas = []twinlog.BrokerID{1, 3, 2}
		added.AddingReplicas = []twinlog.BrokerID{2}
		added.ISR = []twinlog.BrokerID{1, 3}
		added.Brokers = map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1, 3: 1}
		r, err := New(Config{ID: 2, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
			LogEndOffset: 5, HighWatermark: 5, Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}},
		})
		if err != nil {
			t.Fatal(err)
		}
		r.ApplyPartitionState(added, 0)
		if got := truncations(r); len(got) != 1 || got[0] != CauseAddedBack {
			t.Fatalf("causes %v, want [added_back]", got)
		}
	})
	for c, want := range map[TruncationCause]string{CauseDivergence: "divergence", CauseOutOfRange: "out_of_range",
		CauseAsLeader: "as_leader", CauseAddedBack: "added_back", 0: "unknown"} {
		if c.Label() != want {
			t.Errorf("cause %d label %q, want %q", c, c.Label(), want)
		}
	}
}
