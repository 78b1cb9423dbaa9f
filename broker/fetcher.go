package broker

import (
	"context"
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

// fetcher replicates every partition this broker follows from one leader
// broker: one long-poll Fetch in flight carrying all of them (SPEC §4.4).
// The leader answers as soon as any data arrives, and the next fetch is sent
// as soon as the answer is applied, so replication is pipelined one request
// deep per leader.
type fetcher struct {
	b      *Broker
	leader twinlog.BrokerID

	mu     sync.Mutex
	cancel context.CancelFunc // of the request in flight
	kicked bool
	done   chan struct{}
	stop   context.CancelFunc
}

// retargetFetchers starts a fetcher for each leader some hosted follower
// partition follows and kicks the others so they pick up new members.
func (b *Broker) retargetFetchers() {
	need := map[twinlog.BrokerID]bool{}
	for _, p := range b.partitions() {
		p.mu.Lock()
		if p.usableLocked() == nil && p.r.Role() == replica.RoleFollower {
			need[p.r.Leader()] = true
		}
		p.mu.Unlock()
	}
	b.fetchMu.Lock()
	defer b.fetchMu.Unlock()
	for id, f := range b.fetchers {
		if !need[id] {
			f.stop()
			delete(b.fetchers, id)
			continue
		}
		f.kick()
	}
	for id := range need {
		if _, ok := b.fetchers[id]; ok {
			continue
		}
		ctx, stop := context.WithCancel(context.Background())
		f := &fetcher{b: b, leader: id, done: make(chan struct{}), stop: stop}
		b.fetchers[id] = f
		go f.run(ctx)
	}
}

func (b *Broker) stopFetchers() {
	b.fetchMu.Lock()
	fs := b.fetchers
	b.fetchers = map[twinlog.BrokerID]*fetcher{}
	b.fetchMu.Unlock()
	for _, f := range fs {
		f.stop()
	}
	for _, f := range fs {
		<-f.done
	}
}

// kick cancels the request in flight so the next one includes new members.
func (f *fetcher) kick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kicked = true
	if f.cancel != nil {
		f.cancel()
	}
}

func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	b := f.b
	log := b.log.With("fetcher_leader", f.leader)
	var backoff follow.Backoff
	limits := follow.Limits{MaxWait: b.cfg.ReplicaFetchMaxWait, MaxBytes: int32(b.cfg.ReplicaFetchMaxBytes), PartitionMaxBytes: int32(b.cfg.ReplicaFetchPartitionMaxBytes)}
	// The responses' records alias a pooled receive buffer until
	// recv.Release, instead of a protobuf copy of every replicated byte.
	recv := codec.NewCall(BufferPool)
	for ctx.Err() == nil {
		items := follow.Next(f.leader, b.followPartitions())
		if len(items) == 0 {
			// Nothing to fetch from this leader now; wait for a retarget.
			if !f.waitKick(ctx, follow.IdleWait) {
				return
			}
			continue
		}
		addr, ok := b.brokerAddr(f.leader)
		var conn pb.FetchServiceClient
		if ok {
			if c, err := b.conn(addr); err == nil {
				conn = pb.NewFetchServiceClient(c)
			}
		}
		if conn == nil {
			if !f.waitKick(ctx, 100*time.Millisecond) {
				return
			}
			continue
		}
		req := follow.Request(b.cfg.ID, b.epoch.Load(), items, limits)
		rctx, cancel := context.WithTimeout(ctx, b.cfg.ReplicaFetchMaxWait+b.cfg.RPCTimeout)
		f.mu.Lock()
		if f.kicked {
			// A retarget happened since we built the request: rebuild.
			f.kicked = false
			f.mu.Unlock()
			cancel()
			continue
		}
		f.cancel = cancel
		f.mu.Unlock()
		resp, err := conn.Fetch(rctx, req, grpc.ForceCodecV2(recv))
		f.mu.Lock()
		f.cancel = nil
		kicked := f.kicked
		f.kicked = false
		f.mu.Unlock()
		cancel()
		if err != nil {
			recv.Release()
			if kicked || ctx.Err() != nil {
				continue
			}
			log.Debug("follower fetch", "err", err)
			if !f.waitKick(ctx, backoff.Failed()) {
				return
			}
			continue
		}
		progress, grew := follow.Apply(items, resp, func(it follow.Item, err error) {
			// SPEC §2.2: followers verify too; the partition refetches.
			it.P.(followPartition).p.logger.Warn("follower fetch", "err", err)
		})
		if b.cfg.FlushPolicy == FlushEveryBatch {
			// Durable before the next fetch reports the new LEO to the
			// leader. The partitions' fsyncs run side by side: the next
			// fetch waits for the slowest one, not for their sum.
			flushAll(grew)
		}
		recv.Release() // applied: nothing refers to the records any more
		if d := backoff.Answered(progress); d > 0 {
			// Only errors (fenced, not leader yet): wait for metadata.
			if !f.waitKick(ctx, d) {
				return
			}
		}
	}
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

// waitKick waits d or until kicked; false when ctx ended.
func (f *fetcher) waitKick(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	ch := f.b.Changed()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-ch:
	}
	f.mu.Lock()
	f.kicked = false
	f.mu.Unlock()
	return true
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
