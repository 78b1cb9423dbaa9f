package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// produceTimeout is a produce request's own timeout and a margin for the
// answer to arrive once it expires.
func produceTimeout(kreq kmsg.Request) time.Duration {
	ms := max(kreq.(*kmsg.ProduceRequest).TimeoutMillis, 0)
	return time.Duration(ms)*time.Millisecond + requestTimeout
}

// startProduce answers Produce (key 0) through the broker's Produce (SPEC
// §4.1): the record bytes of each partition are passed as they came, the
// broker validates them as Kafka's RecordBatch v2 and appends them before
// startProduce returns; the wait is for the acks (pipeline.go).
// Transactional produce is refused (transactions are out of scope), and
// so v11 and v12, which differ from v10 only for transactions, are v10.
// From v13 topics are named by id (KIP-516): an id no topic has is
// UNKNOWN_TOPIC_ID. With acks=0 the client expects no answer and gets
// none.
func (s *Server) startProduce(ctx context.Context, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ProduceRequest)
	if req.TransactionID != nil {
		return answered(failProduce(req, invalidTxnState))
	}
	byID := req.GetVersion() >= 13
	if byID {
		for i := range req.Topics {
			t := &req.Topics[i]
			t.Topic, _ = s.backend.TopicName(topicIDString(t.TopicID)) // "": unknown
		}
	}
	denied := s.access(ctx).produce(req)
	preq := &pb.ProduceRequest{Acks: int32(req.Acks), TimeoutMs: req.TimeoutMillis}
	for _, t := range req.Topics {
		if (byID && t.Topic == "") || denied[t.Topic] {
			continue
		}
		for _, p := range t.Partitions {
			preq.Partitions = append(preq.Partitions, &pb.ProducePartitionData{Topic: t.Topic, Partition: p.Partition, Records: p.Records})
		}
	}
	var wait func(context.Context) (*pb.ProduceResponse, error)
	if len(preq.Partitions) > 0 {
		wait = s.backend.StartProduce(preq)
	}
	// The records are appended or refused: the answer needs only the
	// request's shape, not its bytes.
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			req.Topics[i].Partitions[j].Records = nil
		}
	}
	return func() kmsg.Response {
		var presp *pb.ProduceResponse
		code := int16(0)
		if wait != nil {
			var err error
			if presp, err = wait(ctx); err != nil {
				code = s.errorCode(err)
			}
		}
		if req.Acks == 0 {
			return nil // a denied topic's records are dropped silently, as Kafka does
		}
		resp := produceAnswer(req, denied, code, presp)
		if req.GetVersion() >= 10 {
			s.hintProduce(ctx, resp)
		}
		return resp
	}
}

// hintProduce adds KIP-951's leader hints (leaders.go) to resp's moved
// partitions.
func (s *Server) hintProduce(ctx context.Context, resp *kmsg.ProduceResponse) {
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
		rb := kmsg.NewProduceResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.GetId(), b.GetKafkaHost(), b.GetKafkaPort()
		resp.Brokers = append(resp.Brokers, rb)
	}
}

// produceAnswer is Produce's answer in the request's shape: the broker's
// answer per partition, code for all when the broker gave none.
func produceAnswer(req *kmsg.ProduceRequest, denied map[string]bool, code int16, presp *pb.ProduceResponse) *kmsg.ProduceResponse {
	byTP := make(map[tp]*pb.ProducePartitionResponse, len(presp.GetPartitions()))
	for _, pr := range presp.GetPartitions() {
		byTP[tp{pr.GetTopic(), pr.GetPartition()}] = pr
	}
	resp := failProduce(req, code).(*kmsg.ProduceResponse) // the request's shape
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			pr := byTP[tp{rt.Topic, rp.Partition}]
			switch {
			case req.GetVersion() >= 13 && rt.Topic == "": // no topic has the id
				rp.ErrorCode = unknownTopicID
				continue
			case denied[rt.Topic]:
				rp.ErrorCode = topicAuthorizationFailed
				continue
			case code != 0:
				continue
			case pr == nil: // the broker answers every partition asked; a bug otherwise
				rp.ErrorCode = unknownServerError
				continue
			}
			rp.ErrorCode = kafkaCode(pr.GetError())
			rp.BaseOffset = pr.GetBaseOffset()
			rp.LogStartOffset = pr.GetLogStartOffset()
			if m := pr.GetErrorMessage(); m != "" {
				rp.ErrorMessage = &m
			}
		}
	}
	return resp
}

// tp is a topic partition as a map key.
type tp struct {
	topic     string
	partition int32
}

func failProduce(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.SetVersion(req.GetVersion())
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
