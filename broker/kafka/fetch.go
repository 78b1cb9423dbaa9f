package kafka

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// fetchTimeout is a fetch's long-poll wait and a margin for the answer.
func fetchTimeout(kreq kmsg.Request) time.Duration {
	ms := max(kreq.(*kmsg.FetchRequest).MaxWaitMillis, 0)
	return time.Duration(ms)*time.Millisecond + requestTimeout
}

// fetch answers a consumer's Fetch (key 1) through the broker's Fetch as
// a CONSUMER (SPEC §4.3): records below the HW, the leader epoch fencing
// of step 2, and KIP-320's diverging epoch when the client sends its last
// fetched epoch. Fetch sessions (KIP-227) are declined: the answer's
// session id is 0, so the client sends full fetches; a request that names
// a session gets FETCH_SESSION_ID_NOT_FOUND and starts over. Replicas do
// not fetch here (they use the broker's gRPC replication service).
// Read-committed consumers read the same records: without transactions
// the last stable offset is the HW. From v13 topics are named by id
// (KIP-516): an id no topic has (deleted, or deleted and created again
// under the same name) is UNKNOWN_TOPIC_ID, so a consumer never reads a
// new topic's records at its old positions.
func (s *Server) fetch(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	switch {
	case req.ReplicaID >= 0 || req.ReplicaState.ID >= 0:
		return failFetch(req, invalidRequest), nil
	case req.SessionID != 0 || req.SessionEpoch > 0:
		resp := failFetch(req, 0).(*kmsg.FetchResponse)
		resp.ErrorCode, resp.Topics = fetchSessionIDError, nil
		return resp, nil
	}
	byID := req.GetVersion() >= 13
	if byID {
		for i := range req.Topics {
			t := &req.Topics[i]
			t.Topic, _ = s.backend.TopicName(topicIDString(t.TopicID)) // "": unknown
		}
	}
	denied := s.access(ctx).fetch(req)
	preq := &pb.FetchRequest{
		ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
		MaxWaitMs: req.MaxWaitMillis, MinBytes: req.MinBytes, MaxBytes: req.MaxBytes,
		// −1 (and every version before 9, which has no such field) asks
		// for no leader epoch check, as Kafka's protocol defines it.
		LeaderEpochOptional: true,
	}
	for _, t := range req.Topics {
		if (byID && t.Topic == "") || denied[t.Topic] {
			continue
		}
		for _, p := range t.Partitions {
			preq.Partitions = append(preq.Partitions, &pb.FetchPartition{
				Topic: t.Topic, Partition: p.Partition, FetchOffset: p.FetchOffset,
				CurrentLeaderEpoch: p.CurrentLeaderEpoch, LastFetchedEpoch: p.LastFetchedEpoch,
				PartitionMaxBytes: p.PartitionMaxBytes,
			})
		}
	}
	var presp *pb.FetchResponse
	code := int16(0)
	if len(preq.Partitions) > 0 {
		var err error
		if presp, err = s.backend.Fetch(ctx, preq); err != nil {
			code = s.errorCode(err)
		}
	}
	byTP := make(map[tp]*pb.FetchPartitionResponse, len(presp.GetPartitions()))
	for _, pr := range presp.GetPartitions() {
		byTP[tp{pr.GetTopic(), pr.GetPartition()}] = pr
	}
	resp := failFetch(req, code).(*kmsg.FetchResponse) // the request's shape
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			switch {
			case byID && rt.Topic == "":
				rt.Partitions[j].ErrorCode = unknownTopicID
				continue
			case denied[rt.Topic]:
				rt.Partitions[j].ErrorCode = topicAuthorizationFailed
				continue
			case code != 0:
				continue
			}
			pr := byTP[tp{rt.Topic, rt.Partitions[j].Partition}]
			if pr == nil {
				pr = &pb.FetchPartitionResponse{Error: pb.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR}
			}
			fillFetchPartition(&rt.Partitions[j], pr)
		}
	}
	if req.GetVersion() >= 16 {
		s.hintFetch(ctx, resp)
	}
	return resp, nil
}

// hintFetch adds KIP-951's leader hints (leaders.go) to resp's moved
// partitions.
func (s *Server) hintFetch(ctx context.Context, resp *kmsg.FetchResponse) {
	var moved []movedPartition
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			if rp := &rt.Partitions[j]; movedCode(rp.ErrorCode) {
				moved = append(moved, movedPartition{tp{rt.Topic, rp.Partition}, func(h leaderHint) {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = h.id, h.epoch
				}})
			}
		}
	}
	for _, b := range s.hintMoved(ctx, moved) {
		rb := kmsg.NewFetchResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.GetId(), b.GetKafkaHost(), b.GetKafkaPort()
		resp.Brokers = append(resp.Brokers, rb)
	}
}

// fillFetchPartition writes the broker's answer for one partition in
// Kafka's form.
func fillFetchPartition(rp *kmsg.FetchResponseTopicPartition, pr *pb.FetchPartitionResponse) {
	rp.ErrorCode = kafkaCode(pr.GetError())
	rp.HighWatermark = pr.GetHighWatermark()
	rp.LastStableOffset = pr.GetHighWatermark()
	rp.LogStartOffset = pr.GetLogStartOffset()
	if pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		// Kafka answers -1 for offsets it did not read on an error.
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
	}
	if d := pr.GetDivergingEpoch(); d != nil {
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = d.GetEpoch(), d.GetEndOffset()
	}
	rp.RecordBatches = pr.GetRecords()
	if rp.RecordBatches == nil {
		// Empty, not null: librdkafka refuses a null record set.
		rp.RecordBatches = []byte{}
	}
}

func failFetch(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(req.GetVersion())
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.RecordBatches = []byte{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// Kafka's ListOffsets timestamps that name a position rather than a time.
const (
	listLatest   = -1
	listEarliest = -2
)

// listOffsets answers ListOffsets (key 2) through the broker's (SPEC
// §4.7): earliest is the log start, latest is the HW (what a consumer may
// read, as Kafka answers a consumer; the last stable offset is the HW
// without transactions), a timestamp the first offset at or after it.
func (s *Server) listOffsets(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	denied := s.access(ctx).listOffsets(req)
	preq := &pb.ListOffsetsRequest{}
	// bad marks the partitions refused here, answered without asking: a
	// timestamp that names no position twinlog has, or a partition asked
	// twice (Kafka refuses duplicates as INVALID_REQUEST too).
	bad := map[tp]bool{}
	seen := map[tp]bool{}
	for _, t := range req.Topics {
		if denied[t.Topic] {
			continue
		}
		pt := &pb.ListOffsetsTopic{Name: t.Topic}
		for _, p := range t.Partitions {
			pp := &pb.ListOffsetsPartition{Index: p.Partition, CurrentLeaderEpoch: p.CurrentLeaderEpoch, Timestamp: p.Timestamp}
			k := tp{t.Topic, p.Partition}
			if seen[k] {
				bad[k] = true
			}
			seen[k] = true
			switch {
			case p.Timestamp == listEarliest:
				pp.Spec = pb.OffsetSpec_OFFSET_SPEC_EARLIEST
			case p.Timestamp == listLatest:
				pp.Spec = pb.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK
			case p.Timestamp >= 0:
				pp.Spec = pb.OffsetSpec_OFFSET_SPEC_TIMESTAMP
			default:
				bad[tp{t.Topic, p.Partition}] = true
				continue
			}
			pt.Partitions = append(pt.Partitions, pp)
		}
		if len(pt.Partitions) > 0 {
			preq.Topics = append(preq.Topics, pt)
		}
	}
	for _, pt := range preq.Topics {
		pt.Partitions = slices.DeleteFunc(pt.Partitions, func(pp *pb.ListOffsetsPartition) bool { return bad[tp{pt.Name, pp.Index}] })
	}
	preq.Topics = slices.DeleteFunc(preq.Topics, func(pt *pb.ListOffsetsTopic) bool { return len(pt.Partitions) == 0 })
	answers := map[tp]*pb.ListOffsetsPartitionResponse{}
	code := int16(0)
	if len(preq.Topics) > 0 {
		presp, err := s.backend.ListOffsets(ctx, preq)
		if err != nil {
			code = s.errorCode(err)
		}
		for _, t := range presp.GetTopics() {
			for _, p := range t.GetPartitions() {
				answers[tp{t.GetName(), p.GetIndex()}] = p
			}
		}
	}
	resp := failListOffsets(req, 0).(*kmsg.ListOffsetsResponse) // the request's shape
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			a := answers[tp{t.Topic, p.Partition}]
			switch {
			case denied[t.Topic]:
				rp.ErrorCode = topicAuthorizationFailed
			case bad[tp{t.Topic, p.Partition}]:
				rp.ErrorCode = invalidRequest
			case code != 0:
				rp.ErrorCode = code
			case a == nil:
				rp.ErrorCode = unknownServerError
			default:
				rp.ErrorCode = kafkaCode(a.GetError())
				if a.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
					rp.Offset, rp.LeaderEpoch = a.GetOffset(), a.GetLeaderEpoch()
					if p.Timestamp >= 0 {
						rp.Timestamp = a.GetTimestamp()
					}
				}
			}
		}
	}
	return resp, nil
}

func failListOffsets(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.SetVersion(req.GetVersion())
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetForLeaderEpoch answers OffsetForLeaderEpoch (key 23) through the
// broker's (SPEC §4.4): the leader's end offset for an epoch, fenced by
// the current leader epoch. Consumers use it to validate their position
// after a leader change (KIP-320).
func (s *Server) offsetForLeaderEpoch(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	// A consumer (replica id −1, or a version before the field) checks its
	// position after being fenced: the answer stops at a failback's
	// truncation point (Replica.ConsumerEndOffsetFor).
	preq := &pb.OffsetForLeaderEpochRequest{Consumer: req.ReplicaID < 0 || req.GetVersion() < 3}
	denied := s.access(ctx).offsetForLeaderEpoch(req)
	for _, t := range req.Topics {
		if denied[t.Topic] {
			continue
		}
		for _, p := range t.Partitions {
			preq.Partitions = append(preq.Partitions, &pb.OffsetForLeaderEpochPartition{
				Topic: t.Topic, Partition: p.Partition, CurrentLeaderEpoch: p.CurrentLeaderEpoch, LeaderEpoch: p.LeaderEpoch,
			})
		}
	}
	var presp *pb.OffsetForLeaderEpochResponse
	code := int16(0)
	if len(preq.Partitions) > 0 {
		var err error
		if presp, err = s.backend.OffsetForLeaderEpoch(ctx, preq); err != nil {
			code = s.errorCode(err)
		}
	}
	answers := map[tp]*pb.OffsetForLeaderEpochPartitionResponse{}
	for _, p := range presp.GetPartitions() {
		answers[tp{p.GetTopic(), p.GetPartition()}] = p
	}
	resp := failOffsetForLeaderEpoch(req, code).(*kmsg.OffsetForLeaderEpochResponse) // the request's shape
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			a := answers[tp{rt.Topic, rp.Partition}]
			switch {
			case denied[rt.Topic]:
				rp.ErrorCode = topicAuthorizationFailed
				continue
			case code != 0:
				continue
			}
			if a == nil {
				rp.ErrorCode = unknownServerError
				continue
			}
			rp.ErrorCode = kafkaCode(a.GetError())
			if a.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
				rp.LeaderEpoch, rp.EndOffset = a.GetLeaderEpoch(), a.GetEndOffset()
			}
		}
	}
	return resp, nil
}

func failOffsetForLeaderEpoch(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.SetVersion(req.GetVersion())
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.LeaderEpoch, rp.EndOffset = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
