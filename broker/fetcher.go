package broker

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/codec"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/wire"
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

type fetchItem struct {
	p   *partition
	req replica.FetchRequest
}

func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	b := f.b
	log := b.log.With("fetcher_leader", f.leader)
	backoff := 20 * time.Millisecond
	// The responses' records alias a pooled receive buffer until
	// recv.Release, instead of a protobuf copy of every replicated byte.
	recv := codec.NewCall(BufferPool)
	for ctx.Err() == nil {
		items := f.nextItems()
		if len(items) == 0 {
			// Nothing to fetch from this leader now; wait for a retarget.
			if !f.waitKick(ctx, time.Second) {
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
		req := &pb.FetchRequest{
			ReplicaId: int32(b.cfg.ID), ReplicaBrokerEpoch: b.epoch.Load(),
			FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER,
			MaxWaitMs:   int32(b.cfg.ReplicaFetchMaxWait.Milliseconds()), MinBytes: 1,
			MaxBytes: int32(b.cfg.ReplicaFetchMaxBytes),
		}
		for _, it := range items {
			req.Partitions = append(req.Partitions, wire.FetchPartition(it.p.tp, it.req, int32(b.cfg.ReplicaFetchPartitionMaxBytes)))
		}
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
			if !f.waitKick(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 20 * time.Millisecond
		progress := f.apply(items, resp)
		recv.Release() // applied: nothing refers to the records any more
		if !progress {
			// Only errors (fenced, not leader yet): wait for metadata.
			if !f.waitKick(ctx, 50*time.Millisecond) {
				return
			}
		}
	}
}

// nextItems numbers the next fetch of every partition this broker follows
// from f.leader. Only those: NextFetch makes its answer the only one the
// replica takes, so numbering a partition another leader's fetcher has a
// request in flight for made that fetcher's answer stale. With partitions
// led by k brokers each follower fetched every record about 1+(k-1)/2
// times (3 fetches per acks=all produce instead of 2 with two leaders),
// reading, sending and validating the copies it then dropped.
func (f *fetcher) nextItems() []fetchItem {
	var items []fetchItem
	for _, p := range f.b.partitions() {
		p.mu.Lock()
		// NextFetch numbers nothing unless the replica follows; the leader
		// check keeps it to this fetcher's partitions.
		if p.usableLocked() == nil && p.r.Leader() == f.leader {
			if t, ok := p.r.NextFetch(); ok {
				items = append(items, fetchItem{p, t.Request})
			}
		}
		p.mu.Unlock()
	}
	return items
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

// apply hands every partition's answer to its replica and handles Ready. It
// reports whether any partition made progress (no error).
func (f *fetcher) apply(items []fetchItem, resp *pb.FetchResponse) bool {
	b := f.b
	byTP := make(map[twinlog.TopicPartition]*pb.FetchPartitionResponse, len(resp.GetPartitions()))
	for _, pr := range resp.GetPartitions() {
		byTP[twinlog.TopicPartition{Topic: pr.GetTopic(), Partition: pr.GetPartition()}] = pr
	}
	progress := false
	var flush []*partition
	now := b.nowMs()
	for _, it := range items {
		pr := byTP[it.p.tp]
		if pr == nil {
			continue
		}
		fr, recs, err := wire.Answer(it.req, pr)
		if err != nil {
			// SPEC §2.2: followers verify too; refetch.
			it.p.logger.Warn("follower fetch", "err", err)
			continue
		}
		if fr.Error == pb.ErrorCode_ERROR_CODE_NONE {
			progress = true
		}
		p := it.p
		p.mu.Lock()
		if p.usableLocked() == nil {
			leo := p.r.LogEndOffset()
			p.fetched = recs
			p.r.HandleFetchResponse(fr, now)
			p.processReadyLocked()
			if b.cfg.FlushPolicy == FlushEveryBatch && p.r.LogEndOffset() > leo {
				flush = append(flush, p)
			}
		}
		p.mu.Unlock()
	}
	// Durable before the next fetch reports the new LEO to the leader. The
	// partitions' fsyncs run side by side: the next fetch waits for the
	// slowest one, not for their sum.
	flushAll(flush)
	return progress
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
func flushAll(ps []*partition) {
	flushOne := func(p *partition) {
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
