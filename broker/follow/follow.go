// Package follow is a follower broker's side of replication (SPEC §4.4):
// one fetcher per leader broker numbers the next fetch of every partition
// it follows from that leader, carries them in one request, and hands each
// partition its part of the answer. The broker runs a fetcher per leader on
// a goroutine with a long-poll RPC; the simulator sends the same requests
// as messages and applies the answers with the same code.
package follow

import (
	"sync"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/wire"
	"github.com/twinlog/twinlog/storage"
)

// Partition is a hosted partition as a fetcher uses it. Its lock guards
// the replica; every other method is called with it held.
type Partition interface {
	sync.Locker
	TopicPartition() twinlog.TopicPartition
	Replica() *replica.Replica
	// Usable reports that the partition is open (not closed or failed).
	Usable() bool
	// Fetched hands the replica the leader's answer to its fetch and
	// performs what it decides: the host keeps batches for the Ready's
	// append, calls Replica.HandleFetchResponse, and processes the Ready.
	Fetched(resp replica.FetchResponse, batches storage.Validated)
}

// Item is one partition's fetch in a request.
type Item struct {
	P   Partition
	Req replica.FetchRequest
}

// Next numbers the next fetch of every partition of parts that follows
// leader. Only those: NextFetch makes its answer the only one the replica
// takes, so numbering a partition another leader's fetcher has a request
// in flight for would make that fetcher's answer stale (with partitions
// led by k brokers each follower fetched every record about 1+(k-1)/2
// times).
func Next(leader twinlog.BrokerID, parts []Partition) []Item {
	var items []Item
	for _, p := range parts {
		p.Lock()
		// NextFetch numbers nothing unless the replica follows; the
		// leader check keeps it to this fetcher's partitions.
		if r := p.Replica(); p.Usable() && r.Leader() == leader {
			if t, ok := r.NextFetch(); ok {
				items = append(items, Item{P: p, Req: t.Request})
			}
		}
		p.Unlock()
	}
	return items
}

// Limits are a fetcher's request limits: how long the leader may hold the
// fetch for data, the record bytes of the whole answer and of each
// partition (0: no cap).
type Limits struct {
	MaxWait           time.Duration
	MaxBytes          int32
	PartitionMaxBytes int32
}

// Request is the follower fetch of items by broker self in its broker
// epoch.
func Request(self twinlog.BrokerID, brokerEpoch int64, items []Item, l Limits) *pb.FetchRequest {
	req := &pb.FetchRequest{
		ReplicaId: int32(self), ReplicaBrokerEpoch: brokerEpoch,
		FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER,
		MaxWaitMs:   int32(l.MaxWait.Milliseconds()), MinBytes: 1, MaxBytes: l.MaxBytes,
		Partitions: make([]*pb.FetchPartition, len(items)),
	}
	for i, it := range items {
		req.Partitions[i] = wire.FetchPartition(it.P.TopicPartition(), it.Req, l.PartitionMaxBytes)
	}
	return req
}

// Apply hands every item its partition's answer in resp. An answer whose
// records fail their checks is dropped (the partition fetches again, SPEC
// §2.2) and reported to corrupt. grew: the partitions whose log grew (the
// host persists them before the next fetch reports the new LEO).
// progress: the answer brought records, or every partition was answered
// without error. A leader answers at once when a partition errs (fenced,
// not the leader yet), so an answer with an error and no records is no
// progress even if other partitions were answered: fetching again at once
// would spin between the two brokers for as long as the error lasts
// (thousands of fetches a second; brokertest saw heartbeats starve and a
// leader fenced).
func Apply(items []Item, resp *pb.FetchResponse, corrupt func(Item, error)) (progress bool, grew []Partition) {
	byTP := make(map[twinlog.TopicPartition]*pb.FetchPartitionResponse, len(resp.GetPartitions()))
	for _, pr := range resp.GetPartitions() {
		byTP[twinlog.TopicPartition{Topic: pr.GetTopic(), Partition: pr.GetPartition()}] = pr
	}
	answered, errored, records := false, false, false
	for _, it := range items {
		pr := byTP[it.P.TopicPartition()]
		if pr == nil {
			continue
		}
		fr, recs, err := wire.Answer(it.Req, pr)
		if err != nil {
			corrupt(it, err)
			errored = true
			continue
		}
		if fr.Error == pb.ErrorCode_ERROR_CODE_NONE {
			answered = true
			records = records || len(recs.Batches()) > 0
		} else {
			errored = true
		}
		p := it.P
		p.Lock()
		if p.Usable() {
			leo := p.Replica().LogEndOffset()
			p.Fetched(fr, recs)
			if p.Replica().LogEndOffset() > leo {
				grew = append(grew, p)
			}
		}
		p.Unlock()
	}
	return records || (answered && !errored), grew
}

// A fetcher's waits.
const (
	// MinBackoff and MaxBackoff bound the wait after a fetch without an
	// answer: MinBackoff first, doubling up to MaxBackoff, reset by an
	// answer.
	MinBackoff = 20 * time.Millisecond
	MaxBackoff = time.Second
	// NoProgressWait follows an answer with only errors (fenced, not the
	// leader yet): metadata is awaited.
	NoProgressWait = 50 * time.Millisecond
	// IdleWait is the longest wait while nothing follows the leader (a
	// change of the partitions ends it).
	IdleWait = time.Second
)

// Backoff paces a fetcher's retries.
type Backoff struct{ next time.Duration }

// Failed is the wait after a fetch without an answer.
func (b *Backoff) Failed() time.Duration {
	d := max(b.next, MinBackoff)
	b.next = min(2*d, MaxBackoff)
	return d
}

// Answered resets the backoff; the wait before the next fetch is
// NoProgressWait without progress, else none.
func (b *Backoff) Answered(progress bool) time.Duration {
	b.next = MinBackoff
	if !progress {
		return NoProgressWait
	}
	return 0
}
