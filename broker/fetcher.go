package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/codec"
	"github.com/twinlog/twinlog/broker/follow"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// fetcher is one leader's follow.Fetcher (SPEC §4.4: one long-poll Fetch
// in flight carrying every partition this broker follows from that
// leader) and the goroutines of its requests and pauses.
type fetcher struct {
	f    *follow.Fetcher
	wg   sync.WaitGroup
	ctx  context.Context
	stop context.CancelFunc
	// sends are the requests for the fetcher's worker goroutine (one in
	// flight at a time): one long-lived goroutine keeps its grown stack,
	// where a goroutine per request would grow a new one through gRPC's
	// deep call chain every time (runtime.morestack showed in profiles).
	sends chan fetchSend
}

type fetchSend struct {
	ctx    context.Context
	cancel context.CancelFunc
	req    *pb.FetchRequest
	done   func(*pb.FetchResponse, error)
}

// retargetFetchers starts a fetcher for each leader some hosted follower
// partition follows, stops those no partition follows any more, and kicks
// the others so they pick up new members.
func (b *Broker) retargetFetchers() {
	need := map[twinlog.BrokerID]bool{}
	for _, l := range follow.Leaders(b.followPartitions()) {
		need[l] = true
	}
	b.fetchMu.Lock()
	defer b.fetchMu.Unlock()
	for id, f := range b.fetchers {
		if !need[id] {
			f.halt()
			delete(b.fetchers, id)
			continue
		}
		f.f.Kick()
	}
	limits := follow.Limits{MaxWait: b.cfg.ReplicaFetchMaxWait, MaxBytes: int32(b.cfg.ReplicaFetchMaxBytes), PartitionMaxBytes: int32(b.cfg.ReplicaFetchPartitionMaxBytes)}
	for id := range need {
		if _, ok := b.fetchers[id]; ok {
			continue
		}
		ctx, stop := context.WithCancel(context.Background())
		f := &fetcher{ctx: ctx, stop: stop, sends: make(chan fetchSend, 1)}
		env := fetchEnv{b, f, id}
		f.f = follow.NewFetcher(env, fetchHost{b}, follow.Config{Self: b.cfg.ID, Leader: id, Limits: limits})
		b.fetchers[id] = f
		f.wg.Add(1)
		go env.work()
		f.f.Start()
	}
}

// halt stops the fetcher; its goroutines end on their own.
func (f *fetcher) halt() {
	f.f.Stop()
	f.stop()
}

func (b *Broker) stopFetchers() {
	b.fetchMu.Lock()
	fs := b.fetchers
	b.fetchers = map[twinlog.BrokerID]*fetcher{}
	b.fetchMu.Unlock()
	for _, f := range fs {
		f.halt()
	}
	for _, f := range fs {
		f.wg.Wait()
	}
}

// fetchEnv runs a fetcher's requests and pauses on goroutines of their own,
// ended by the fetcher's stop. A request is bounded by the long poll plus
// the RPC timeout; its answer's records alias a pooled receive buffer
// (instead of a protobuf copy of every replicated byte) until the fetcher
// has applied them.
type fetchEnv struct {
	b      *Broker
	f      *fetcher
	leader twinlog.BrokerID
}

// Send hands the request to the fetcher's worker.
func (e fetchEnv) Send(req *pb.FetchRequest, done func(*pb.FetchResponse, error)) func() {
	ctx, cancel := context.WithTimeout(e.f.ctx, e.b.cfg.ReplicaFetchMaxWait+e.b.cfg.RPCTimeout)
	select {
	case e.f.sends <- fetchSend{ctx: ctx, cancel: cancel, req: req, done: done}:
	case <-e.f.ctx.Done():
		// Stopped: the worker may be gone. The answer must not come from
		// inside Send.
		go done(nil, e.f.ctx.Err())
	}
	return cancel
}

// work runs the fetcher's requests until it stops; each answer is applied
// (done) before its records' receive buffer goes back to the pool.
func (e fetchEnv) work() {
	f := e.f
	defer f.wg.Done()
	recv := codec.NewCall(BufferPool)
	for {
		select {
		case s := <-f.sends:
			e.fetch(recv, s)
		case <-f.ctx.Done():
			for {
				select {
				case s := <-f.sends:
					s.cancel()
					s.done(nil, f.ctx.Err())
				default:
					return
				}
			}
		}
	}
}

func (e fetchEnv) fetch(recv *codec.Call, s fetchSend) {
	b := e.b
	defer s.cancel()
	addr, ok := b.brokerAddr(e.leader)
	if !ok {
		s.done(nil, errNoLeaderAddr)
		return
	}
	c, err := b.conn(addr)
	if err != nil {
		s.done(nil, err)
		return
	}
	resp, err := pb.NewFetchServiceClient(c).Fetch(s.ctx, s.req, grpc.ForceCodecV2(recv))
	if err != nil {
		recv.Release()
		if e.f.ctx.Err() == nil && s.ctx.Err() == nil {
			b.log.Debug("follower fetch", "fetcher_leader", e.leader, "err", err)
		}
		s.done(nil, err)
		return
	}
	s.done(resp, nil)
	recv.Release() // applied: nothing refers to the records any more
}

func (e fetchEnv) After(d time.Duration, fn func()) {
	f := e.f
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if sleep(f.ctx, d) {
			fn()
		}
	}()
}

var errNoLeaderAddr = errors.New("broker: leader address unknown")

// fetchHost is the broker as its fetchers' host.
type fetchHost struct{ b *Broker }

func (h fetchHost) Partitions() []follow.Partition { return h.b.followPartitions() }
func (h fetchHost) BrokerEpoch() int64             { return h.b.brokerEpoch() }

// Applied: with FlushEveryBatch the grown logs are durable before the
// next fetch reports the new LEO to the leader; their fsyncs run side by
// side, so the next fetch waits for the slowest one, not for their sum.
func (h fetchHost) Applied(grew []follow.Partition) {
	if h.b.cfg.FlushPolicy == FlushEveryBatch {
		flushAll(grew)
	}
}

// Corrupt: SPEC §2.2, followers verify too; the partition refetches.
func (h fetchHost) Corrupt(it follow.Item, err error) {
	it.P.(followPartition).p.logger.Warn("follower fetch", "err", err)
}

// followPartitions is every hosted partition as a fetcher numbers them.
func (b *Broker) followPartitions() []follow.Partition {
	ps := b.partitions()
	out := make([]follow.Partition, len(ps))
	for i, p := range ps {
		out[i] = followPartition{p}
	}
	return out
}

// followPartition is a hosted partition as a fetcher uses it.
type followPartition struct{ p *partition }

func (f followPartition) Lock()                                  { f.p.mu.Lock() }
func (f followPartition) Unlock()                                { f.p.mu.Unlock() }
func (f followPartition) TopicPartition() twinlog.TopicPartition { return f.p.tp }
func (f followPartition) Replica() *replica.Replica              { return f.p.r }
func (f followPartition) Usable() bool                           { return f.p.usableLocked() == nil }

func (f followPartition) Fetched(resp replica.FetchResponse, batches storage.Validated) {
	p := f.p
	p.fetched = batches
	p.r.HandleFetchResponse(resp, p.b.nowMs())
	p.processReadyLocked()
}

// fetchSeqClock is the origin of fetchSeqStart.
var fetchSeqClock = time.Now()

// fetchSeqStart is replica.Config.FetchSeqStart for a replica created now:
// the monotonic clock in nanoseconds. A partition removed and hosted again
// within one broker epoch gets a new replica, whose fetches must be
// numbered above its predecessor's (the leader refuses the others, and
// must refuse a delayed fetch of the deleted log); no replica sends a fetch
// per nanosecond, so a later start is above every seq an earlier replica
// of this process used.
func fetchSeqStart() int64 { return max(time.Since(fetchSeqClock).Nanoseconds(), 0) }

// flushAll fsyncs the partitions' logs concurrently and fails those whose
// flush fails.
func flushAll(ps []follow.Partition) {
	flushOne := func(fp follow.Partition) {
		p := fp.(followPartition).p
		if err := p.log.Flush(); err != nil {
			p.mu.Lock()
			p.failLocked(err)
			p.mu.Unlock()
		}
	}
	if len(ps) == 1 {
		flushOne(ps[0])
		return
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { flushOne(p) })
	}
	wg.Wait()
}
