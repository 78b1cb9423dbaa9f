package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// initProducerID answers InitProducerId (key 22) for idempotent producers
// through the broker's InitProducerId: a new producer id of the cluster's
// space at epoch 0. A producer id and epoch sent at v3+ (KIP-360, a
// producer recovering from UNKNOWN_PRODUCER_ID) get a new id too, as
// Kafka's coordinator answers a producer without a transactional id.
//
// An idempotent producer needs IdempotentWrite on the cluster or, as since
// Kafka 3.0 (KIP-679), Write on any topic; else
// CLUSTER_AUTHORIZATION_FAILED.
//
// twinlog has no transactions, so a transactional id (even "") is refused
// with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. The response has no message
// field: the code is the message. It is the one Kafka itself gives a
// producer that may not use transactional ids, every client treats it as
// fatal and names the transactional id as the cause (the Java client's
// TransactionalIdAuthorizationException), where INVALID_REQUEST would send
// the operator looking for a client bug. The listener logs the refusal,
// saying why.
func (s *Server) initProducerID(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	if req.TransactionalID != nil {
		s.cfg.Logger.Info("kafka: InitProducerId with a transactional id refused: twinlog has no transactions; use an idempotent producer without transactional.id",
			"transactional_id", *req.TransactionalID, "version", req.GetVersion())
		return failInitProducerID(req, transactionalIDAuthorizationFailed), nil
	}
	if code := s.access(ctx).initProducerID(); code != 0 {
		return failInitProducerID(req, code), nil
	}
	presp, err := s.backend.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionTimeoutMs: req.TransactionTimeoutMillis})
	if err != nil {
		return failInitProducerID(req, s.errorCode(err)), nil
	}
	resp := failInitProducerID(req, kafkaCode(presp.GetError())).(*kmsg.InitProducerIDResponse)
	if presp.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
		resp.ProducerID, resp.ProducerEpoch = presp.GetProducerId(), int16(presp.GetProducerEpoch())
	}
	return resp, nil
}

func failInitProducerID(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}
