package replica

import (
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/epoch"
)

// staleFetchPair is simulator seed two:448 reduced to two replicas of a
// mirror partition: leader 1 (LE 4, log [0:0 2:10], LEO 18) and follower 3
// (its own cluster's epoch 3 records up to 72: [0:0 2:10 3:18], LEO 72),
// both in the ISR, m = 2, so the HW is min(LEO 1, LEO 3).
type staleFetchPair struct {
	t       *testing.T
	leader  *Replica
	follow  *Replica
	brokers map[twinlog.BrokerID]twinlog.BrokerEpoch
	// wireEpoch, if set, is the broker epoch the follower's fetches carry
	// (the shell sends its registration epoch; the machine's is its
	// metadata view).
	wireEpoch twinlog.BrokerEpoch
}

func newStaleFetchPair(t *testing.T) *staleFetchPair {
	t.Helper()
	p := &staleFetchPair{t: t, brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 3: 30}}
	var err error
	p.leader, err = New(Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
		LogEndOffset: 18, HighWatermark: 10, Epochs: []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 10}}, AlignedEpoch: twinlog.NoEpoch,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.leader.SetMirrorPartition(true)
	p.follow, err = New(Config{ID: 3, Partition: twinlog.TopicPartition{Topic: "t"}}, LogState{
		LogEndOffset: 72, HighWatermark: 10, AlignedEpoch: twinlog.NoEpoch,
		Epochs: []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 10}, {Epoch: 3, StartOffset: 18}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.leader.ApplyPartitionState(p.state(), 0)
	p.follow.ApplyPartitionState(p.state(), 0)
	p.leader.Advance()
	p.follow.Advance()
	return p
}

func (p *staleFetchPair) state() PartitionState {
	return PartitionState{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 4, Replicas: []twinlog.BrokerID{1, 3},
		ISR: []twinlog.BrokerID{1, 3}, MinISR: 2, Brokers: p.brokers}
}

// fetch sends the follower's next fetch to the leader and hands the answer
// back (no records: the leader's log only matters through its cache here).
func (p *staleFetchPair) fetch() FetchDecision {
	p.t.Helper()
	ft, ok := p.follow.NextFetch()
	if !ok {
		p.t.Fatal("follower has no fetch")
	}
	wire := ft.Request
	if p.wireEpoch != 0 {
		wire.BrokerEpoch = p.wireEpoch
	}
	d := p.leader.HandleFollowerFetch(wire, 0)
	p.leader.Advance()
	p.follow.HandleFetchResponse(FetchResponse{Request: ft.Request, Error: d.Error, LeaderEpoch: d.LeaderEpoch,
		HighWatermark: d.HighWatermark, LogStartOffset: d.LogStartOffset, LogEndOffset: d.LogEndOffset, DivergingEpoch: d.DivergingEpoch}, 0)
	truncated := false
	for _, op := range p.follow.Ready().LogOps {
		truncated = truncated || op.Kind == OpTruncate
	}
	p.follow.Advance()
	if truncated {
		if err := p.follow.ConfirmTruncation(p.follow.LogEndOffset(), 0); err != nil {
			p.t.Fatal(err)
		}
	}
	return d
}

// divergeAndMirror plays seed 448 up to the stale fetch's arrival: the
// follower's fetch at 72 is answered DivergingEpoch{2, 18} and the follower
// truncates to 18 and fetches from there (the leader notes LEO 18, HW 18);
// then the leader mirrors the other cluster's records 18–80, whose epoch is
// also 3: endOffsetFor(3) is now 81.
func (p *staleFetchPair) divergeAndMirror() {
	p.t.Helper()
	if d := p.fetch(); d.DivergingEpoch == nil || *d.DivergingEpoch != (EpochEndOffset{2, 18}) {
		p.t.Fatalf("fetch at 72: %v %v, want DivergingEpoch (2, 18)", d.Error, d.DivergingEpoch)
	}
	if got := p.follow.LogEndOffset(); got != 18 {
		p.t.Fatalf("follower LEO %d after DivergingEpoch, want 18", got)
	}
	if d := p.fetch(); d.Error != errNone || d.DivergingEpoch != nil {
		p.t.Fatalf("fetch at 18: %v %v, want NONE", d.Error, d.DivergingEpoch)
	}
	if err := p.leader.AppendAsMirrorLeader([]BatchMeta{{BaseOffset: 18, LastOffset: 80, Epoch: 3}}, 0); err != nil {
		p.t.Fatal(err)
	}
	p.leader.Advance()
	p.checkLeaderView(18, 18)
}

// checkLeaderView asserts the leader's view of the follower's LEO and its HW.
func (p *staleFetchPair) checkLeaderView(leo, hw twinlog.Offset) {
	p.t.Helper()
	if got := p.leader.followers[3].leo; got != leo {
		p.t.Errorf("leader's view of follower 3's LEO %d, want %d (its real LEO is %d)", got, leo, p.follow.LogEndOffset())
	}
	if got := p.leader.HighWatermark(); got != hw {
		p.t.Errorf("leader HW %d, want %d", got, hw)
	}
}

// TestStaleFollowerFetchFenced: a follower fetch delayed in the network
// arrives after the follower acted on the answer to a later one. The leader
// refuses it (FetchRequest.Seq, broker epoch) without noting anything, so
// neither its view of the follower's LEO nor its HW moves past the
// follower's real LEO (SPEC §8.7). Without the fence (fenceFollowerFetch
// returning NONE) the "delayed seq" and "older broker epoch" cases take the
// stale fetchOffset 72 as the follower's LEO and the HW goes to 72 while
// the follower holds 18 records: simulator seed two:448.
func TestStaleFollowerFetchFenced(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stale builds the delayed request from the follower's first one
		// (offset 72, last fetched epoch 3, Seq 1).
		stale func(t *testing.T, p *staleFetchPair, first FetchRequest) FetchRequest
		want  ErrorCode
	}{
		{"delayed seq", func(t *testing.T, p *staleFetchPair, first FetchRequest) FetchRequest {
			return first
		}, errStaleFetch},
		{"older broker epoch than the last fetch", func(t *testing.T, p *staleFetchPair, first FetchRequest) FetchRequest {
			// The follower re-registered (broker epoch 31) and fetched
			// with it once the leader's metadata showed the registration
			// (before that the leader refuses 31 too: only the registered
			// epoch is served). The stale fetch carries a larger Seq (a
			// restarted process numbers from its own clock).
			p.brokers = map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 3: 31}
			p.leader.ApplyPartitionState(p.state(), 0)
			p.leader.Advance()
			p.wireEpoch = 31
			if d := p.fetch(); d.Error != errNone {
				t.Fatalf("fetch with broker epoch 31: %v", d.Error)
			}
			first.Seq = 1000
			return first
		}, errStaleBrokerEpoch},
		{"older broker epoch than the registered one", func(t *testing.T, p *staleFetchPair, first FetchRequest) FetchRequest {
			p.brokers = map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 3: 31}
			p.leader.ApplyPartitionState(p.state(), 0) // same LE and PE: only Brokers is taken
			p.leader.Advance()
			p.wireEpoch = 31
			first.Seq = 1000
			return first
		}, errStaleBrokerEpoch},
		{"unnumbered", func(t *testing.T, p *staleFetchPair, first FetchRequest) FetchRequest {
			first.Seq = 0
			return first
		}, errInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newStaleFetchPair(t)
			// The follower's first fetch (offset 72, last fetched epoch 3)
			// is delayed; it retries with the next Seq.
			first, _ := p.follow.NextFetch()
			if first.Request.FetchOffset != 72 || first.Request.LastFetchedEpoch != 3 || first.Request.Seq != 1 {
				t.Fatalf("first fetch %+v", first.Request)
			}
			p.divergeAndMirror()
			stale := tc.stale(t, p, first.Request)
			d := p.leader.HandleFollowerFetch(stale, 0)
			p.checkLeaderView(18, 18)
			if p.leader.HasReady() {
				t.Errorf("stale fetch produced leader work: %+v", p.leader.Ready())
			}
			if d.Error != tc.want || d.DivergingEpoch != nil || d.ReadUpTo != d.ReadFrom {
				t.Fatalf("stale fetch: %v diverging %v read [%d, %d), want %v and no records", d.Error, d.DivergingEpoch, d.ReadFrom, d.ReadUpTo, tc.want)
			}
			// The follower's own next fetch is served as usual.
			if d := p.fetch(); d.Error != errNone || d.DivergingEpoch != nil {
				t.Fatalf("next fetch: %v %v, want NONE", d.Error, d.DivergingEpoch)
			}
			p.leader.CheckInvariants()
		})
	}
}

// TestFollowerFetchReevaluation: the shell's long poll evaluates one request
// again; that passes the fence only while the request is the last one the
// leader evaluated and was served (NONE without DivergingEpoch). A copy of a
// request answered DivergingEpoch is refused even when the leader's log has
// changed so that it would now pass step 4 (the seed 448 pattern without a
// second request).
func TestFollowerFetchReevaluation(t *testing.T) {
	t.Run("served request re-evaluated", func(t *testing.T) {
		p := newStaleFetchPair(t)
		p.divergeAndMirror()
		ft, _ := p.follow.NextFetch() // offset 18, last fetched epoch 2
		for i := range 2 {
			if d := p.leader.HandleFollowerFetch(ft.Request, int64(i)); d.Error != errNone || d.DivergingEpoch != nil || d.ReadUpTo != 81 {
				t.Fatalf("evaluation %d: %v %v up to %d, want NONE up to 81", i, d.Error, d.DivergingEpoch, d.ReadUpTo)
			}
		}
		older := ft.Request
		older.Seq--
		if d := p.leader.HandleFollowerFetch(older, 2); d.Error != errStaleFetch {
			t.Fatalf("older seq after the re-evaluation: %v, want %v", d.Error, errStaleFetch)
		}
	})
	t.Run("diverged request copied", func(t *testing.T) {
		p := newStaleFetchPair(t)
		ft, _ := p.follow.NextFetch() // offset 72, last fetched epoch 3
		if d := p.leader.HandleFollowerFetch(ft.Request, 0); d.DivergingEpoch == nil {
			t.Fatalf("fetch at 72: %v, want DivergingEpoch", d.Error)
		}
		if err := p.leader.AppendAsMirrorLeader([]BatchMeta{{BaseOffset: 18, LastOffset: 80, Epoch: 3}}, 0); err != nil {
			t.Fatal(err)
		}
		p.leader.Advance()
		if d := p.leader.HandleFollowerFetch(ft.Request, 0); d.Error != errStaleFetch {
			t.Fatalf("copy after DivergingEpoch: %v %v, want %v", d.Error, d.DivergingEpoch, errStaleFetch)
		}
		if got := p.leader.followers[3].leo; got != twinlog.NoOffset {
			t.Errorf("leader noted follower LEO %d from a refused fetch", got)
		}
	})
	t.Run("new leader epoch starts afresh", func(t *testing.T) {
		p := newStaleFetchPair(t)
		p.divergeAndMirror()
		// LE 5: the record is per LE (a fetch of LE 4 is fenced at step
		// 2), so the follower's next Seq is taken whatever came before.
		st := p.state()
		st.LeaderEpoch, st.PartitionEpoch = 5, 5
		p.leader.ApplyPartitionState(st, 0)
		p.follow.ApplyPartitionState(st, 0)
		p.leader.Advance()
		p.follow.Advance()
		if d := p.fetch(); d.Error != errNone {
			t.Fatalf("first fetch in LE 5: %v, want NONE", d.Error)
		}
	})
}

// TestRebuiltReplicaContinuesSeq: Config.FetchSeqStart numbers a rebuilt
// replica's fetches above its predecessor's, so the leader takes them.
func TestRebuiltReplicaContinuesSeq(t *testing.T) {
	p := newStaleFetchPair(t)
	p.divergeAndMirror()
	last := p.follow.fetchSeq
	for _, tc := range []struct {
		start int64
		want  ErrorCode
	}{{0, errStaleFetch}, {last, errNone}} {
		r, err := New(Config{ID: 3, Partition: twinlog.TopicPartition{Topic: "t"}, FetchSeqStart: tc.start}, LogState{
			LogEndOffset: 18, HighWatermark: 18, AlignedEpoch: twinlog.NoEpoch,
			Epochs: []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 10}},
		})
		if err != nil {
			t.Fatal(err)
		}
		r.ApplyPartitionState(p.state(), 0)
		ft, _ := r.NextFetch()
		if d := p.leader.HandleFollowerFetch(ft.Request, 0); d.Error != tc.want {
			t.Errorf("FetchSeqStart %d (predecessor's last %d): %v, want %v", tc.start, last, d.Error, tc.want)
		}
	}
	if _, err := New(Config{ID: 3, FetchSeqStart: -1}, LogState{}); err == nil {
		t.Error("negative FetchSeqStart accepted")
	}
}
