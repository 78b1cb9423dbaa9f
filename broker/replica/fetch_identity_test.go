package replica

import (
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage/epoch"
)

// identityLeader is replica 1 leading LE 1 of R {1,2,3}, ISR {1,2,3}, m 2,
// with records [0, 5): follower 2 has fetched to 5, follower 3 not at all,
// so the HW is 0 until 3 reports. Registered broker epochs: 1→10, 2→20,
// 3→30, 4→40 (4 is registered but not a replica). With fenced3, broker 3 is
// registered but not acceptable (missing from Brokers, as a fenced broker
// or one with an offline log dir is).
func identityLeader(t *testing.T, fenced3 bool) *Replica {
	t.Helper()
	r, err := New(Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
		LogEndOffset: 5, Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}}, AlignedEpoch: twinlog.NoEpoch,
	})
	if err != nil {
		t.Fatal(err)
	}
	registered := map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 2: 20, 3: 30, 4: 40}
	acceptable := map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 2: 20, 3: 30, 4: 40}
	if fenced3 {
		delete(acceptable, 3)
	}
	r.ApplyPartitionState(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []twinlog.BrokerID{1, 2, 3},
		ISR: []twinlog.BrokerID{1, 2, 3}, MinISR: 2, Brokers: acceptable, Registered: registered}, 0)
	r.Advance()
	if d := r.HandleFollowerFetch(identityFetch(2, 20, 5, 1), 0); d.Error != errNone {
		t.Fatalf("follower 2's fetch: %v", d.Error)
	}
	r.Advance()
	if r.HighWatermark() != 0 {
		t.Fatalf("HW %d before follower 3 fetched, want 0", r.HighWatermark())
	}
	return r
}

func identityFetch(id twinlog.BrokerID, be twinlog.BrokerEpoch, offset twinlog.Offset, seq int64) FetchRequest {
	return FetchRequest{ReplicaID: id, BrokerEpoch: be, FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER,
		FetchOffset: offset, CurrentLeaderEpoch: 1, LastFetchedEpoch: 1, Seq: seq}
}

// TestFollowerFetchIdentity (issue 13, follower fetches): a FOLLOWER fetch
// is served only from a replica of the partition carrying exactly its
// registered broker epoch; any other fetch as replica N, claiming N has
// every record, neither moves the leader's view of N's LEO nor the HW, and
// leaves no work. Before, a larger broker epoch than the registered one was
// served (it took the HW to 5, the forged claim, here), and so was any
// epoch of a registered but unacceptable (fenced) broker.
func TestFollowerFetchIdentity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fenced3 bool
		req     FetchRequest
		want    ErrorCode
	}{
		{"broker epoch + 1", false, identityFetch(3, 31, 5, 1), errStaleBrokerEpoch},
		{"broker epoch − 1", false, identityFetch(3, 29, 5, 1), errStaleBrokerEpoch},
		{"broker epoch −1 (none)", false, identityFetch(3, -1, 5, 1), errStaleBrokerEpoch},
		{"fenced broker, epoch + 1", true, identityFetch(3, 31, 5, 1), errStaleBrokerEpoch},
		{"fenced broker, epoch −1 (none)", true, identityFetch(3, -1, 5, 1), errStaleBrokerEpoch},
		{"unregistered replica", false, identityFetch(5, 50, 5, 1), errNotLeader},
		{"registered broker outside the replica set", false, identityFetch(4, 40, 5, 1), errNotLeader},
		{"the leader's own id", false, identityFetch(1, 10, 5, 1), errNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := identityLeader(t, tc.fenced3)
			d := r.HandleFollowerFetch(tc.req, 1)
			if d.Error != tc.want {
				t.Errorf("fetch: %v, want %v", d.Error, tc.want)
			}
			if r.HasReady() {
				t.Errorf("refused fetch left work: %+v", r.Ready())
			}
			if got := r.HighWatermark(); got != 0 {
				t.Errorf("HW %d after a refused fetch, want 0", got)
			}
			if f := r.followers[3]; f.leo != twinlog.NoOffset || f.fetchedInLE {
				t.Errorf("leader's view of follower 3: LEO %d fetched %t, want unknown", f.leo, f.fetchedInLE)
			}
			// The real follower 3 (registered epoch, fenced or not) is
			// still served and moves the HW: the refusal fenced nothing.
			if d := r.HandleFollowerFetch(identityFetch(3, 30, 5, 2), 2); d.Error != errNone || r.HighWatermark() != 5 {
				t.Errorf("follower 3's own fetch: %v, HW %d, want NONE and 5", d.Error, r.HighWatermark())
			}
		})
	}
}

// TestFollowerFetchNewerRegistration: a restarted follower's fetch with a
// registration the leader's metadata does not show yet is refused with the
// retriable STALE_BROKER_EPOCH, which the follower's machine ignores (no
// truncation, no state change, its next fetch is numbered as usual); once
// the metadata shows it, the same follower's next fetch is served.
func TestFollowerFetchNewerRegistration(t *testing.T) {
	leader := identityLeader(t, false)
	follow, err := New(Config{ID: 3, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
		LogEndOffset: 5, HighWatermark: 0, Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}}, AlignedEpoch: twinlog.NoEpoch,
	})
	if err != nil {
		t.Fatal(err)
	}
	st := PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []twinlog.BrokerID{1, 2, 3},
		ISR: []twinlog.BrokerID{1, 2, 3}, MinISR: 2, Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 2: 20, 3: 31}}
	follow.ApplyPartitionState(st, 0)
	follow.Advance()
	for i := range 2 {
		ft, ok := follow.NextFetch()
		if !ok || ft.Request.BrokerEpoch != 31 {
			t.Fatalf("follower fetch %+v %t, want one with broker epoch 31", ft.Request, ok)
		}
		d := leader.HandleFollowerFetch(ft.Request, 0)
		leader.Advance()
		want := errStaleBrokerEpoch
		if i == 1 {
			want = errNone
		}
		if d.Error != want {
			t.Fatalf("fetch %d: %v, want %v", i, d.Error, want)
		}
		follow.HandleFetchResponse(FetchResponse{Request: ft.Request, Error: d.Error, LeaderEpoch: d.LeaderEpoch,
			HighWatermark: d.HighWatermark, LogStartOffset: d.LogStartOffset, LogEndOffset: d.LogEndOffset}, 0)
		for _, op := range follow.Ready().LogOps {
			t.Fatalf("follower log op %+v on answer %v", op, d.Error)
		}
		follow.Advance()
		if i == 0 {
			// The leader's metadata catches up with the registration.
			leader.ApplyPartitionState(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []twinlog.BrokerID{1, 2, 3},
				ISR: []twinlog.BrokerID{1, 2, 3}, MinISR: 2, Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 2: 20, 3: 31}}, 0)
			leader.Advance()
		}
	}
	if leader.HighWatermark() != 5 {
		t.Fatalf("leader HW %d after the follower's served fetch, want 5", leader.HighWatermark())
	}
}

// TestFollowerFetchCarriesRegisteredEpoch: a follower that is registered but
// not acceptable in its own metadata (fenced right after a restart, say)
// fetches with its registered epoch, the one the leader requires exactly.
// It used to send −1 (its epoch among the acceptable brokers), which the
// leader refuses (two-cluster simulator seed 713802 with 20 s of faults: a
// replica stayed at LEO 21 through 20 s of healing).
func TestFollowerFetchCarriesRegisteredEpoch(t *testing.T) {
	r, err := New(Config{ID: 3, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{AlignedEpoch: twinlog.NoEpoch})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []twinlog.BrokerID{1, 2, 3},
		ISR: []twinlog.BrokerID{1, 2}, MinISR: 2,
		Brokers:    map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 2: 20},
		Registered: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 2: 20, 3: 30}}, 0)
	r.Advance()
	ft, ok := r.NextFetch()
	if !ok {
		t.Fatal("no fetch for a follower")
	}
	if ft.Request.BrokerEpoch != 30 {
		t.Fatalf("fetch carries broker epoch %d, want the registered 30", ft.Request.BrokerEpoch)
	}
}
