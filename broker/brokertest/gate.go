package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Gates are test hooks on the calls a node makes over the Network: they
// force interleavings the real timing would rarely produce (a follower that
// stops fetching one partition, an answer lost after the leader acted on the
// request, an AlterPartition held in flight). They live entirely in the
// harness (a unary client interceptor on every dialled connection): the
// brokers run unchanged production code. With no rule set, every call
// passes untouched.

// FetchAction decides what happens to one gated Fetch (follower or mirror).
type FetchAction int8

const (
	// FetchPass sends the request and delivers the answer.
	FetchPass FetchAction = iota
	// FetchHold does not send the request; the call waits until a rule
	// change lets it through or its context ends (the fetcher then retries
	// after its backoff and is held again). It blocks the follower's whole
	// fetcher to that leader, so use it in single-partition tests.
	FetchHold
	// FetchBlind sends the request (the leader acts on it: the follower's
	// LEO, ISR and HW move there) but the answer is lost: the follower sees
	// a transport error and keeps its log and HW.
	FetchBlind
)

// FetchInfo is one follower Fetch of a gated partition, as a rule sees it.
type FetchInfo struct {
	Leader             string // leader node name, e.g. "a-2"
	FetchOffset        twinlog.Offset
	CurrentLeaderEpoch twinlog.Epoch
	LastFetchedEpoch   twinlog.Epoch
}

// FetchRecord is a gated Fetch that reached the leader, with its answer.
type FetchRecord struct {
	FetchInfo
	Action FetchAction // FetchPass or FetchBlind
	Err    error       // transport error (the answer is absent)
	// The partition's answer (zero if Err).
	Error          pb.ErrorCode
	LeaderEpoch    twinlog.Epoch
	HighWatermark  twinlog.Offset
	DivergingEpoch *pb.EpochEndOffset
	Records        int
}

func (r FetchRecord) String() string {
	s := fmt.Sprintf("fetch→%s offset %d LE %d last %d", r.Leader, r.FetchOffset, r.CurrentLeaderEpoch, r.LastFetchedEpoch)
	if r.Action == FetchBlind {
		s += " (answer lost)"
	}
	if r.Err != nil {
		return s + ": " + r.Err.Error()
	}
	s += fmt.Sprintf(": %v HW %d records %d", r.Error, r.HighWatermark, r.Records)
	if d := r.DivergingEpoch; d != nil {
		s += fmt.Sprintf(" diverging (%d, %d)", d.GetEpoch(), d.GetEndOffset())
	}
	return s
}

// FetchRule decides the action for a follower's fetch of one partition.
type FetchRule func(FetchInfo) FetchAction

type gateKey struct {
	node      string
	topic     string
	partition int32
	mirror    bool // the node's mirror fetches (as a destination leader), not its follower fetches
}

type gates struct {
	mu        sync.Mutex
	fetch     map[gateKey]FetchRule
	log       map[gateKey][]FetchRecord
	held      map[gateKey]int // calls waiting in FetchHold
	holdAlter map[string]bool // node → hold its AlterPartition calls
	wake      chan struct{}   // closed at every rule change
	notify    map[*Cluster]func()
}

var errAnswerLost = errors.New("brokertest: fetch answer lost (FetchBlind)")

const (
	methodFetch = "/twinlog.v1.FetchService/Fetch"
	methodAlter = "/twinlog.v1.ControllerService/AlterPartition"
)

func (g *gates) init() {
	if g.wake == nil {
		g.fetch, g.log, g.holdAlter = map[gateKey]FetchRule{}, map[gateKey][]FetchRecord{}, map[string]bool{}
		g.held = map[gateKey]int{}
		g.wake, g.notify = make(chan struct{}), map[*Cluster]func(){}
	}
}

// changedLocked wakes held calls to re-evaluate their rule.
func (g *gates) changedLocked() {
	close(g.wake)
	g.wake = make(chan struct{})
}

func (g *gates) notifyAll() {
	g.mu.Lock()
	fs := make([]func(), 0, len(g.notify))
	for _, f := range g.notify {
		fs = append(fs, f)
	}
	g.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (g *gates) interceptor(from, to string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		call := func() error { return invoker(ctx, method, req, reply, cc, opts...) }
		switch method {
		case methodFetch:
			if fr, ok := req.(*pb.FetchRequest); ok {
				switch fr.GetFetcherType() {
				case pb.FetcherType_FETCHER_TYPE_FOLLOWER:
					return g.gateFetch(ctx, from, to, false, fr, reply, call)
				case pb.FetcherType_FETCHER_TYPE_MIRROR:
					return g.gateFetch(ctx, from, to, true, fr, reply, call)
				}
			}
		case methodAlter:
			if err := g.waitAlter(ctx, from); err != nil {
				return err
			}
		}
		return call()
	}
}

func (g *gates) waitAlter(ctx context.Context, from string) error {
	for {
		g.mu.Lock()
		g.init()
		hold, wake := g.holdAlter[from], g.wake
		g.mu.Unlock()
		if !hold {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// gateFetch applies the strictest rule among the request's gated
// partitions, then records the gated partitions' answers.
func (g *gates) gateFetch(ctx context.Context, from, to string, mirror bool, req *pb.FetchRequest, reply any, call func() error) error {
	for {
		g.mu.Lock()
		g.init()
		act, wake := FetchPass, g.wake
		gated := false
		for _, p := range req.GetPartitions() {
			rule := g.fetch[gateKey{from, p.GetTopic(), p.GetPartition(), mirror}]
			if rule == nil {
				continue
			}
			gated = true
			act = max(act, rule(FetchInfo{Leader: to, FetchOffset: twinlog.Offset(p.GetFetchOffset()),
				CurrentLeaderEpoch: twinlog.Epoch(p.GetCurrentLeaderEpoch()), LastFetchedEpoch: twinlog.Epoch(p.GetLastFetchedEpoch())}))
		}
		if act == FetchHold {
			g.setHeldLocked(from, mirror, req, 1)
		}
		g.mu.Unlock()
		if act == FetchHold {
			g.notifyAll()
			var err error
			select {
			case <-wake:
			case <-ctx.Done():
				err = ctx.Err()
			}
			g.mu.Lock()
			g.setHeldLocked(from, mirror, req, -1)
			g.mu.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		err := call()
		if gated {
			g.record(from, to, mirror, req, reply, act, err)
		}
		if err == nil && act == FetchBlind {
			return errAnswerLost
		}
		return err
	}
}

func (g *gates) setHeldLocked(from string, mirror bool, req *pb.FetchRequest, d int) {
	for _, p := range req.GetPartitions() {
		g.held[gateKey{from, p.GetTopic(), p.GetPartition(), mirror}] += d
	}
}

func (g *gates) record(from, to string, mirror bool, req *pb.FetchRequest, reply any, act FetchAction, err error) {
	resp, _ := reply.(*pb.FetchResponse)
	g.mu.Lock()
	for _, p := range req.GetPartitions() {
		k := gateKey{from, p.GetTopic(), p.GetPartition(), mirror}
		if g.fetch[k] == nil {
			continue
		}
		rec := FetchRecord{FetchInfo: FetchInfo{Leader: to, FetchOffset: twinlog.Offset(p.GetFetchOffset()),
			CurrentLeaderEpoch: twinlog.Epoch(p.GetCurrentLeaderEpoch()), LastFetchedEpoch: twinlog.Epoch(p.GetLastFetchedEpoch())},
			Action: act, Err: err}
		if err == nil {
			for _, pr := range resp.GetPartitions() {
				if pr.GetTopic() == k.topic && pr.GetPartition() == k.partition {
					rec.Error, rec.LeaderEpoch, rec.HighWatermark = pr.GetError(), twinlog.Epoch(pr.GetLeaderEpoch()), twinlog.Offset(pr.GetHighWatermark())
					rec.DivergingEpoch = pr.GetDivergingEpoch()
					if recs, derr := DecodeRecords(pr.GetRecords()); derr == nil {
						rec.Records = len(recs)
					}
				}
			}
		}
		g.log[k] = append(g.log[k], rec)
	}
	g.mu.Unlock()
	g.notifyAll()
}

// SetFetchRule gates follower id's fetches of topic-p with rule (nil:
// ungated, the log of its fetches is kept). Gated fetches are recorded
// (Fetches). The rule is evaluated with the gate lock held: keep it pure.
func (c *Cluster) SetFetchRule(id twinlog.BrokerID, topic string, p int32, rule FetchRule) {
	c.setFetchRule(gateKey{c.nodeName(id), topic, p, false}, rule)
}

// setFetchRule installs (nil: removes) the rule of one gate key.
func (c *Cluster) setFetchRule(k gateKey, rule FetchRule) {
	g := &c.Net.gates
	g.mu.Lock()
	g.init()
	g.notify[c] = c.notify
	if rule == nil {
		delete(g.fetch, k)
	} else {
		g.fetch[k] = rule
	}
	g.changedLocked()
	g.mu.Unlock()
	c.notify()
}

// HoldFetches stops follower id fetching topic-p (FetchHold) until
// ReleaseFetches or another rule.
func (c *Cluster) HoldFetches(id twinlog.BrokerID, topic string, p int32) {
	c.SetFetchRule(id, topic, p, func(FetchInfo) FetchAction { return FetchHold })
}

// ReleaseFetches lets follower id fetch topic-p normally (still recorded).
func (c *Cluster) ReleaseFetches(id twinlog.BrokerID, topic string, p int32) {
	c.SetFetchRule(id, topic, p, func(FetchInfo) FetchAction { return FetchPass })
}

// FetchesUpTo passes follower id's fetches of topic-p below offset limit
// and holds the others: the follower's LEO may pass limit with the last
// answer, but the leader never hears of it.
func (c *Cluster) FetchesUpTo(id twinlog.BrokerID, topic string, p int32, limit twinlog.Offset) {
	c.SetFetchRule(id, topic, p, func(fi FetchInfo) FetchAction {
		if fi.FetchOffset < limit {
			return FetchPass
		}
		return FetchHold
	})
}

// BlindFetchFrom passes follower id's fetches of topic-p below offset from;
// the first one at or above from reaches the leader but its answer is lost,
// and every later one is held: the leader learns the follower's LEO, the
// follower never learns the HW that fetch moved.
func (c *Cluster) BlindFetchFrom(id twinlog.BrokerID, topic string, p int32, from twinlog.Offset) {
	var once sync.Once
	c.SetFetchRule(id, topic, p, func(fi FetchInfo) FetchAction {
		if fi.FetchOffset < from {
			return FetchPass
		}
		act := FetchHold
		once.Do(func() { act = FetchBlind })
		return act
	})
}

// HoldAlterPartition holds (or, with false, releases) broker id's
// AlterPartition calls before they reach the controller: the leader's ISR
// change stays in flight (its maximal ISR keeps the addition). Hold it for
// less than the broker's RPCTimeout, or raise that, lest the broker give up
// and roll back.
func (c *Cluster) HoldAlterPartition(id twinlog.BrokerID, hold bool) {
	g := &c.Net.gates
	g.mu.Lock()
	g.init()
	g.notify[c] = c.notify
	g.holdAlter[c.nodeName(id)] = hold
	g.changedLocked()
	g.mu.Unlock()
	c.notify()
}

// Fetches returns follower id's recorded (gated) fetches of topic-p.
func (c *Cluster) Fetches(id twinlog.BrokerID, topic string, p int32) []FetchRecord {
	return c.gateRecords(gateKey{c.nodeName(id), topic, p, false})
}

// gateRecords is the recorded fetches of one gate key.
func (c *Cluster) gateRecords(k gateKey) []FetchRecord {
	g := &c.Net.gates
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	return slices.Clone(g.log[k])
}

// gateHeld reports whether a fetch of one gate key waits in FetchHold.
func (c *Cluster) gateHeld(k gateKey) bool {
	g := &c.Net.gates
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	return g.held[k] > 0
}

// FetchHeld reports whether a fetch of follower id for topic-p waits in
// FetchHold now: then no fetch of it is in flight (one per leader).
func (c *Cluster) FetchHeld(id twinlog.BrokerID, topic string, p int32) bool {
	return c.gateHeld(gateKey{c.nodeName(id), topic, p, false})
}

// SetMirrorFetchRule gates broker id's mirror fetches (SPEC §6.3: as the
// destination leader, to the source's leader) of topic-p with rule, as
// SetFetchRule does its follower fetches; the two kinds are gated apart.
// Gated mirror fetches are recorded (MirrorFetches).
func (c *Cluster) SetMirrorFetchRule(id twinlog.BrokerID, topic string, p int32, rule FetchRule) {
	c.setFetchRule(gateKey{c.nodeName(id), topic, p, true}, rule)
}

// HoldMirrorFetches stops broker id's mirror fetcher of topic-p sending
// Fetch{MIRROR} (FetchHold) until ReleaseMirrorFetches: the fetcher waits in
// the call without an error until its RPC deadline, so its status keeps the
// last source HW it saw.
func (c *Cluster) HoldMirrorFetches(id twinlog.BrokerID, topic string, p int32) {
	c.SetMirrorFetchRule(id, topic, p, func(FetchInfo) FetchAction { return FetchHold })
}

// ReleaseMirrorFetches lets broker id's mirror fetches of topic-p through
// (still recorded).
func (c *Cluster) ReleaseMirrorFetches(id twinlog.BrokerID, topic string, p int32) {
	c.SetMirrorFetchRule(id, topic, p, func(FetchInfo) FetchAction { return FetchPass })
}

// MirrorFetches returns broker id's recorded (gated) mirror fetches of
// topic-p.
func (c *Cluster) MirrorFetches(id twinlog.BrokerID, topic string, p int32) []FetchRecord {
	return c.gateRecords(gateKey{c.nodeName(id), topic, p, true})
}

// MirrorFetchHeld reports whether a mirror fetch of broker id for topic-p
// waits in FetchHold now: then none of its is in flight to the source.
func (c *Cluster) MirrorFetchHeld(id twinlog.BrokerID, topic string, p int32) bool {
	return c.gateHeld(gateKey{c.nodeName(id), topic, p, true})
}
