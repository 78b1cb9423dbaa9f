package follow_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/follow"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// part is a hosted partition of a bare replica.
type part struct {
	sync.Mutex
	tp      twinlog.TopicPartition
	r       *replica.Replica
	fetched int
}

func (p *part) TopicPartition() twinlog.TopicPartition { return p.tp }
func (p *part) Replica() *replica.Replica              { return p.r }
func (p *part) Usable() bool                           { return true }
func (p *part) Fetched(resp replica.FetchResponse, _ storage.Validated) {
	p.fetched++
	p.r.HandleFetchResponse(resp, 0)
	p.r.Advance()
}

// following returns broker 1's replica of t-<n> following leader in LE 1.
func following(t *testing.T, n int32, leader twinlog.BrokerID) *part {
	t.Helper()
	tp := twinlog.TopicPartition{Topic: "t", Partition: n}
	r, err := replica.New(replica.Config{ID: 1, Partition: tp, ReplicaLagTimeMaxMs: 1000}, replica.LogState{AlignedEpoch: twinlog.NoEpoch})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(replica.PartitionState{Leader: leader, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []twinlog.BrokerID{1, 2, 3}, ISR: []twinlog.BrokerID{1, 2, 3}, MinISR: 1,
		Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1, 3: 1}}, 0)
	r.Advance()
	return &part{tp: tp, r: r}
}

type sent struct {
	req       *pb.FetchRequest
	done      func(*pb.FetchResponse, error)
	cancelled bool
}

// fenv is a Fetcher's Env and Host: requests and pauses wait for the test.
type fenv struct {
	parts   []follow.Partition
	sends   []*sent
	waits   []time.Duration
	timers  []func()
	applied int
	corrupt int
}

func (e *fenv) Send(req *pb.FetchRequest, done func(*pb.FetchResponse, error)) func() {
	s := &sent{req: req, done: done}
	e.sends = append(e.sends, s)
	return func() { s.cancelled = true }
}
func (e *fenv) After(d time.Duration, f func()) {
	e.waits, e.timers = append(e.waits, d), append(e.timers, f)
}
func (e *fenv) Partitions() []follow.Partition { return e.parts }
func (e *fenv) BrokerEpoch() int64             { return 5 }
func (e *fenv) Applied([]follow.Partition)     { e.applied++ }
func (e *fenv) Corrupt(follow.Item, error)     { e.corrupt++ }

// last is the last request sent.
func (e *fenv) last(t *testing.T) *sent {
	t.Helper()
	if len(e.sends) == 0 {
		t.Fatal("nothing sent")
	}
	return e.sends[len(e.sends)-1]
}

// fire fires the last pause, which must wait d.
func (e *fenv) fire(t *testing.T, d time.Duration) {
	t.Helper()
	if len(e.timers) == 0 || e.waits[len(e.waits)-1] != d {
		t.Fatalf("pauses %v, want one of %v", e.waits, d)
	}
	e.timers[len(e.timers)-1]()
}

// ok answers every partition of req with no records and no error.
func ok(req *pb.FetchRequest) *pb.FetchResponse {
	resp := &pb.FetchResponse{}
	for _, p := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, &pb.FetchPartitionResponse{Topic: p.GetTopic(), Partition: p.GetPartition(),
			HighWatermark: 0, LogStartOffset: 0})
	}
	return resp
}

func newFetcher(e *fenv) *follow.Fetcher {
	return follow.NewFetcher(e, e, follow.Config{Self: 1, Leader: 2})
}

// TestFetcherPipelines: one request carries the partitions following the
// leader (not those following another); an answer with progress is
// applied and followed at once, one without waits NoProgressWait.
func TestFetcherPipelines(t *testing.T) {
	a, b, other := following(t, 0, 2), following(t, 1, 2), following(t, 2, 3)
	e := &fenv{parts: []follow.Partition{a, b, other}}
	f := newFetcher(e)
	f.Start()
	req := e.last(t).req
	if len(e.sends) != 1 || len(req.GetPartitions()) != 2 || req.GetReplicaBrokerEpoch() != 5 {
		t.Fatalf("first request %v", req)
	}
	e.last(t).done(ok(req), nil)
	if a.fetched != 1 || b.fetched != 1 || other.fetched != 0 || e.applied != 1 || len(e.sends) != 2 {
		t.Fatalf("fetched %d %d %d, applied %d, sends %d", a.fetched, b.fetched, other.fetched, e.applied, len(e.sends))
	}
	e.last(t).done(&pb.FetchResponse{}, nil) // nothing for these partitions
	if len(e.sends) != 2 {
		t.Fatal("an answer without progress was followed at once")
	}
	e.fire(t, follow.NoProgressWait)
	if len(e.sends) != 3 {
		t.Fatalf("sends %d after the pause", len(e.sends))
	}
	if got := follow.Leaders(e.parts); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("leaders %v", got)
	}
}

// TestFetcherBacksOff: no answer backs off, doubling; a kick cancels the
// request in flight and sends the next at once.
func TestFetcherBacksOff(t *testing.T) {
	e := &fenv{parts: []follow.Partition{following(t, 0, 2)}}
	f := newFetcher(e)
	f.Start()
	e.last(t).done(nil, errors.New("unreachable"))
	e.fire(t, follow.MinBackoff)
	e.last(t).done(nil, errors.New("unreachable"))
	e.fire(t, 2*follow.MinBackoff)
	if len(e.sends) != 3 {
		t.Fatalf("sends %d", len(e.sends))
	}
	inflight := e.last(t)
	f.Kick()
	if !inflight.cancelled {
		t.Fatal("a kick left the request in flight")
	}
	inflight.done(nil, errors.New("cancelled"))
	if len(e.sends) != 4 {
		t.Fatalf("sends %d: a cancelled request's successor waited", len(e.sends))
	}
	e.fire(t, 2*follow.MinBackoff) // the void pause sends nothing
	if len(e.sends) != 4 {
		t.Fatalf("a void pause sent a request (%d)", len(e.sends))
	}
}

// TestFetcherIdles: with nothing to fetch it pauses IdleWait; a kick
// brings the new partitions at once; Stop cancels and ends it.
func TestFetcherIdles(t *testing.T) {
	e := &fenv{}
	f := newFetcher(e)
	f.Start()
	if len(e.sends) != 0 || len(e.waits) != 1 || e.waits[0] != follow.IdleWait {
		t.Fatalf("sends %d, pauses %v", len(e.sends), e.waits)
	}
	e.parts = []follow.Partition{following(t, 0, 2)}
	f.Kick()
	e.fire(t, 0)
	if len(e.sends) != 1 {
		t.Fatalf("sends %d after the kick", len(e.sends))
	}
	e.last(t).done(&pb.FetchResponse{}, nil) // no progress: a pause
	e.timers[0]()                            // the idle pause, void since
	if len(e.sends) != 1 {
		t.Fatalf("a void idle pause sent a request (%d)", len(e.sends))
	}
	e.fire(t, follow.NoProgressWait)
	inflight := e.last(t)
	f.Stop()
	if !inflight.cancelled {
		t.Fatal("Stop left the request in flight")
	}
	inflight.done(ok(inflight.req), nil)
	f.Kick()
	if len(e.sends) != 2 || e.applied != 1 {
		t.Fatalf("after Stop: sends %d applied %d", len(e.sends), e.applied)
	}
}

// TestFetcherNoSpinOnPartialError: an answer in which one partition errs
// and the others bring nothing is no progress — the leader answered at
// once because of the error, and fetching again at once would spin for as
// long as it lasts — so the fetcher waits NoProgressWait.
func TestFetcherNoSpinOnPartialError(t *testing.T) {
	e := &fenv{parts: []follow.Partition{following(t, 0, 2), following(t, 1, 2)}}
	f := newFetcher(e)
	f.Start()
	resp := ok(e.last(t).req)
	resp.Partitions[1].Error = pb.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH
	e.last(t).done(resp, nil)
	if len(e.sends) != 1 {
		t.Fatalf("sends %d: an error answered at once was followed at once", len(e.sends))
	}
	e.fire(t, follow.NoProgressWait)
	if len(e.sends) != 2 {
		t.Fatalf("sends %d after the pause", len(e.sends))
	}
}
