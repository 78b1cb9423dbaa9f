// Package wire converts the replication Fetch between the replica
// machine's types (broker/replica) and the API's messages, both ways: the
// follower's request out, the leader's view of it, the leader's answer
// back, and the follower's view of the answer. The broker's fetcher and
// fetch handler and the simulator's follower and leader all convert
// through it, so the simulator crosses the same wire format.
package wire

import (
	"fmt"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// FetchPartition is the wire form of a follower's fetch of tp (NextFetch's
// request), asking for at most maxBytes of it (0: no partition cap).
func FetchPartition(tp twinlog.TopicPartition, r replica.FetchRequest, maxBytes int32) *pb.FetchPartition {
	return &pb.FetchPartition{
		Topic: tp.Topic, Partition: tp.Partition, FetchOffset: int64(r.FetchOffset),
		CurrentLeaderEpoch: int32(r.CurrentLeaderEpoch), LastFetchedEpoch: int32(r.LastFetchedEpoch),
		PartitionMaxBytes: maxBytes, FetchSeq: r.Seq,
	}
}

// FetchRequest is the leader machine's view of partition fp of fetch req.
// Only a FOLLOWER fetch names a replica: a consumer's or a mirror's
// replica_id never makes it one.
func FetchRequest(req *pb.FetchRequest, fp *pb.FetchPartition) replica.FetchRequest {
	fr := replica.FetchRequest{
		ReplicaID:          twinlog.BrokerID(req.GetReplicaId()),
		BrokerEpoch:        twinlog.BrokerEpoch(req.GetReplicaBrokerEpoch()),
		FetcherType:        req.GetFetcherType(),
		FetchOffset:        twinlog.Offset(fp.GetFetchOffset()),
		CurrentLeaderEpoch: twinlog.Epoch(fp.GetCurrentLeaderEpoch()),
		LastFetchedEpoch:   twinlog.Epoch(fp.GetLastFetchedEpoch()),
		Seq:                fp.GetFetchSeq(),
		CommittedInEpoch:   req.GetCommittedInEpoch(),
		LeaderEpochOptional: req.GetLeaderEpochOptional() &&
			req.GetFetcherType() == pb.FetcherType_FETCHER_TYPE_CONSUMER,
	}
	if fr.FetcherType != pb.FetcherType_FETCHER_TYPE_FOLLOWER {
		fr.ReplicaID = twinlog.NoBroker
	}
	return fr
}

// FillAnswer writes the leader machine's decision on one partition, and
// the leader it knows, into out; the records are the caller's (read from
// [d.ReadFrom, d.ReadUpTo) when d allows a read).
func FillAnswer(out *pb.FetchPartitionResponse, d replica.FetchDecision, leader twinlog.BrokerID) {
	out.Error = d.Error
	out.LeaderEpoch = int32(d.LeaderEpoch)
	out.HighWatermark = int64(d.HighWatermark)
	out.LogStartOffset = int64(d.LogStartOffset)
	out.LogEndOffset = int64(d.LogEndOffset)
	out.LeaderId = int32(leader)
	if d.Error == pb.ErrorCode_ERROR_CODE_LOG_TRUNCATED {
		v := int64(d.TruncationOffset)
		out.TruncationOffset = &v
	}
	if d.DivergingEpoch != nil {
		out.DivergingEpoch = &pb.EpochEndOffset{Epoch: int32(d.DivergingEpoch.Epoch), EndOffset: int64(d.DivergingEpoch.EndOffset)}
	}
}

// Readable reports whether the leader reads records for decision d.
func Readable(d replica.FetchDecision) bool {
	return d.Error == pb.ErrorCode_ERROR_CODE_NONE && d.DivergingEpoch == nil && d.ReadUpTo > d.ReadFrom
}

// Answer is the follower machine's view of pr, the leader's answer to its
// request req, with the answer's records validated once (the log appends
// them without checking their crcs again; compressed batches by header and
// crc, storage.ValidateReplicatedBatches). Corrupt records are an error:
// the follower drops the answer and fetches again (SPEC §2.2).
func Answer(req replica.FetchRequest, pr *pb.FetchPartitionResponse) (replica.FetchResponse, storage.Validated, error) {
	fr := replica.FetchResponse{
		Request:        req,
		Error:          pr.GetError(),
		LeaderEpoch:    twinlog.Epoch(pr.GetLeaderEpoch()),
		HighWatermark:  twinlog.Offset(pr.GetHighWatermark()),
		LogStartOffset: twinlog.Offset(pr.GetLogStartOffset()),
		LogEndOffset:   twinlog.Offset(pr.GetLogEndOffset()),
	}
	if d := pr.GetDivergingEpoch(); d != nil {
		fr.DivergingEpoch = &replica.EpochEndOffset{Epoch: twinlog.Epoch(d.GetEpoch()), EndOffset: twinlog.Offset(d.GetEndOffset())}
	}
	var recs storage.Validated
	if raw := pr.GetRecords(); len(raw) > 0 {
		var err error
		if recs, err = storage.ValidateReplicatedBatches(raw); err != nil {
			return replica.FetchResponse{}, storage.Validated{}, fmt.Errorf("corrupt batch from the leader: %w", err)
		}
		for _, bv := range recs.Batches() {
			fr.Batches = append(fr.Batches, replica.BatchMeta{BaseOffset: bv.BaseOffset(), LastOffset: bv.LastOffset(), Epoch: bv.LeaderEpoch()})
		}
	}
	return fr, recs, nil
}
