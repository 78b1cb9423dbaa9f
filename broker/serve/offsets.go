package serve

import (
	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
)

// ListOffsets answers a ListOffsets from the leaders' replicas (SPEC
// §4.7): target resolves each partition as Once's hosts do (its
// Partition, or the error it is refused with). A partition answers only
// in its current leader epoch (EpochCheck); the HW, the log end or start,
// or the first offset at a timestamp below the HW.
func ListOffsets(req *pb.ListOffsetsRequest, target func(twinlog.TopicPartition) Target) *pb.ListOffsetsResponse {
	resp := &pb.ListOffsetsResponse{}
	for _, t := range req.GetTopics() {
		tr := &pb.ListOffsetsTopicResponse{Name: t.GetName()}
		resp.Topics = append(resp.Topics, tr)
		for _, lp := range t.GetPartitions() {
			out := &pb.ListOffsetsPartitionResponse{Index: lp.GetIndex(), Offset: -1, LeaderEpoch: -1, Timestamp: -1}
			tr.Partitions = append(tr.Partitions, out)
			tg := target(twinlog.TopicPartition{Topic: t.GetName(), Partition: lp.GetIndex()})
			var hw, leo, ls twinlog.Offset
			out.Error = withReplica(tg, func(r *replica.Replica) pb.ErrorCode {
				out.LeaderEpoch = int32(r.LeaderEpoch())
				hw, leo, ls = r.HighWatermark(), r.LogEndOffset(), r.LogStartOffset()
				return EpochCheck(r, lp.GetCurrentLeaderEpoch())
			})
			if out.Error != pb.ErrorCode_ERROR_CODE_NONE {
				continue
			}
			switch lp.GetSpec() {
			case pb.OffsetSpec_OFFSET_SPEC_EARLIEST:
				out.Offset = int64(ls)
			case pb.OffsetSpec_OFFSET_SPEC_LATEST:
				out.Offset = int64(leo)
			case pb.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK:
				out.Offset = int64(hw)
			case pb.OffsetSpec_OFFSET_SPEC_TIMESTAMP:
				o, code := tg.P.OffsetForTimestamp(lp.GetTimestamp())
				if code != pb.ErrorCode_ERROR_CODE_NONE {
					out.Error = code
					continue
				}
				if o >= hw {
					o = twinlog.NoOffset
				}
				out.Offset, out.Timestamp = int64(o), lp.GetTimestamp()
			default:
				out.Error = pb.ErrorCode_ERROR_CODE_INVALID_REQUEST
			}
		}
	}
	return resp
}

// OffsetForLeaderEpoch answers the leaders' endOffsetFor (SPEC §4.4; a
// consumer's question stops at a later epoch's truncation point, SPEC
// §6.2f), in each partition's current leader epoch.
func OffsetForLeaderEpoch(req *pb.OffsetForLeaderEpochRequest, target func(twinlog.TopicPartition) Target) *pb.OffsetForLeaderEpochResponse {
	resp := &pb.OffsetForLeaderEpochResponse{}
	for _, q := range req.GetPartitions() {
		out := &pb.OffsetForLeaderEpochPartitionResponse{Topic: q.GetTopic(), Partition: q.GetPartition(), LeaderEpoch: -1, EndOffset: -1}
		resp.Partitions = append(resp.Partitions, out)
		tg := target(twinlog.TopicPartition{Topic: q.GetTopic(), Partition: q.GetPartition()})
		out.Error = withReplica(tg, func(r *replica.Replica) pb.ErrorCode {
			if code := EpochCheck(r, q.GetCurrentLeaderEpoch()); code != pb.ErrorCode_ERROR_CODE_NONE {
				return code
			}
			eo := r.EndOffsetFor(twinlog.Epoch(q.GetLeaderEpoch()))
			if req.GetConsumer() {
				eo = r.ConsumerEndOffsetFor(twinlog.Epoch(q.GetLeaderEpoch()))
			}
			out.LeaderEpoch, out.EndOffset = int32(eo.Epoch), int64(eo.EndOffset)
			return pb.ErrorCode_ERROR_CODE_NONE
		})
	}
	return resp
}

// withReplica runs read on tg's replica under the partition's lock and
// answers its code; a partition not hosted or not usable answers its own
// refusal and read does not run.
func withReplica(tg Target, read func(r *replica.Replica) pb.ErrorCode) pb.ErrorCode {
	p := tg.P
	if p == nil {
		return tg.Error
	}
	p.Lock()
	defer p.Unlock()
	if code := p.Unusable(); code != pb.ErrorCode_ERROR_CODE_NONE {
		return code
	}
	return read(p.Replica())
}

// EpochCheck applies SPEC §4.3 step 2 to a request other than a fetch
// (ListOffsets, OffsetForLeaderEpoch): only the leader answers, in the
// leader epoch the request names (−1: unchecked). The partition is locked.
func EpochCheck(r *replica.Replica, cur int32) pb.ErrorCode {
	switch {
	case r.Role() != replica.RoleLeader:
		return pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
	case cur == -1:
		return pb.ErrorCode_ERROR_CODE_NONE
	case twinlog.Epoch(cur) < r.LeaderEpoch():
		return pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH
	case twinlog.Epoch(cur) > r.LeaderEpoch():
		return pb.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH
	}
	return pb.ErrorCode_ERROR_CODE_NONE
}
