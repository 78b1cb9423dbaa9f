// Package serve is a leader's side of a Fetch and of a Produce, the one
// copy the broker's handlers and the simulator's leaders run.
//
// Once evaluates a Fetch: every partition of the request is decided by
// its replica (broker/replica HandleFollowerFetch), answered through
// broker/wire, and read from its log within the response's byte budget.
// The broker's handler evaluates a request once per long-poll wake-up;
// the simulator's leaders answer every fetch (follower, consumer, mirror)
// with it. ValidateProduce and Propose (produce.go) check a producer's
// batches and put them to the replica. ListOffsets and
// OffsetForLeaderEpoch (offsets.go) answer the leaders' offsets.
package serve

import (
	"sync"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/wire"
)

// Partition is one partition of a fetch as the leader's host holds it. Its
// lock guards the replica; Read runs without it.
type Partition interface {
	sync.Locker
	// Replica is the partition's replica (partition locked).
	Replica() *replica.Replica
	// Unusable is NONE while the partition is open, else the code a
	// fetch of it is answered with (partition locked).
	Unusable() pb.ErrorCode
	// ProcessReady performs what the replica decided (partition locked).
	ProcessReady()
	// Read returns the batches of [from, upTo), up to maxBytes but at
	// least one batch if any qualifies (storage.Log.Read), or the code
	// the fetch of the partition is answered with.
	Read(from twinlog.Offset, maxBytes int, upTo twinlog.Offset) ([]byte, pb.ErrorCode)
	// OffsetForTimestamp is the first offset whose timestamp is at least
	// ts (storage.Log.OffsetForTimestamp), or the code ListOffsets is
	// answered with; it runs without the lock, as Read.
	OffsetForTimestamp(ts int64) (twinlog.Offset, pb.ErrorCode)
}

// Target is one partition of a request as the host found it: P, or the
// error it is refused with before its replica is asked (not hosted, a
// mirror fetch of another topic id) and the leader the host knows of.
type Target struct {
	P        Partition
	Error    pb.ErrorCode
	LeaderID int32
}

// Budget is the record bytes one response may carry: the request's
// maxBytes (0: no wish) clamped to the broker's fetch.max.bytes.
func Budget(maxBytes int32, fetchMaxBytes int) int {
	if maxBytes <= 0 {
		return fetchMaxBytes
	}
	return min(int(maxBytes), fetchMaxBytes)
}

// Once evaluates every partition of req (targets in its order) once at
// nowMs, reading at most budget record bytes in all and each partition's
// own cap. evaluated, if set, hears each decision with the partition
// locked, before its Ready is processed (the broker's long poll marks
// what this evaluation saw). total is the record bytes read; stop reports
// an answer that must go out now: an error or a divergence for some
// partition.
func Once(req *pb.FetchRequest, targets []Target, budget int, nowMs int64, evaluated func(i int, d replica.FetchDecision)) (resp *pb.FetchResponse, total int, stop bool) {
	resp = &pb.FetchResponse{Partitions: make([]*pb.FetchPartitionResponse, len(targets))}
	for i, fp := range req.GetPartitions() {
		out := &pb.FetchPartitionResponse{Topic: fp.GetTopic(), Partition: fp.GetPartition(), HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1, LeaderId: -1}
		resp.Partitions[i] = out
		t := targets[i]
		if t.P == nil {
			out.Error, out.LeaderId = t.Error, t.LeaderID
			stop = true
			continue
		}
		d, leader, code := decide(t.P, wire.FetchRequest(req, fp), nowMs, func(d replica.FetchDecision) {
			if evaluated != nil {
				evaluated(i, d)
			}
		})
		if code != pb.ErrorCode_ERROR_CODE_NONE {
			out.Error = code
			stop = true
			continue
		}
		wire.FillAnswer(out, d, leader)
		if d.DivergingEpoch != nil || d.Error != pb.ErrorCode_ERROR_CODE_NONE {
			stop = true
			continue
		}
		if !wire.Readable(d) || budget <= 0 {
			continue
		}
		limit := budget
		if pm := int(fp.GetPartitionMaxBytes()); pm > 0 {
			limit = min(limit, pm)
		}
		recs, code := t.P.Read(d.ReadFrom, limit, d.ReadUpTo)
		if code != pb.ErrorCode_ERROR_CODE_NONE {
			out.Error = code
			stop = true
			continue
		}
		out.Records = recs
		total += len(recs)
		budget -= len(recs)
	}
	return resp, total, stop
}

// decide asks p's replica about fr under p's lock; code is the partition's
// own error when it is not open.
func decide(p Partition, fr replica.FetchRequest, nowMs int64, evaluated func(replica.FetchDecision)) (d replica.FetchDecision, leader twinlog.BrokerID, code pb.ErrorCode) {
	p.Lock()
	defer p.Unlock()
	if code = p.Unusable(); code != pb.ErrorCode_ERROR_CODE_NONE {
		return d, 0, code
	}
	r := p.Replica()
	d = r.HandleFollowerFetch(fr, nowMs)
	evaluated(d)
	p.ProcessReady()
	return d, r.Leader(), pb.ErrorCode_ERROR_CODE_NONE
}
