package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// initProducerID sends InitProducerId at version v and returns the answer.
func (c *client) initProducerID(v int16, txnID *string, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	c.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(v)
	req.TransactionalID, req.TransactionTimeoutMillis = txnID, 60_000
	req.ProducerID, req.ProducerEpoch = pid, epoch
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(v)
	c.recv(c.send(req), resp, req.IsFlexible())
	return resp
}

// TestInitProducerID: InitProducerId is advertised at v0-v4 and answered
// at each (flexible from v2) with a new id of the backend's at epoch 0,
// also for a producer that names its old id and epoch (v3+, KIP-360); a
// transactional id is refused, fatal and unsent to the backend, with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the backend's refusal goes out
// as its Kafka code (retriable COORDINATOR_LOAD_IN_PROGRESS); v5 is
// UNSUPPORTED_VERSION.
func TestInitProducerID(t *testing.T) {
	s, fb, addr := startServer(t, Config{BrokerID: 1})
	advertised := false
	for _, k := range s.Versions() {
		if k.ApiKey == 22 {
			advertised = k.MinVersion == 0 && k.MaxVersion == 4
		}
	}
	if !advertised {
		t.Fatalf("InitProducerId not advertised at 0..4: %v", s.Versions())
	}
	c := dial(t, addr)
	seen := map[int64]bool{}
	for v := int16(0); v <= 4; v++ {
		for _, old := range []int64{-1, 1000} {
			if old >= 0 && v < 3 {
				continue
			}
			resp := c.initProducerID(v, nil, old, int16(min(old, 7)))
			if resp.ErrorCode != 0 || resp.ProducerID < 1000 || seen[resp.ProducerID] || resp.ProducerEpoch != 0 {
				t.Fatalf("v%d (old id %d): error %d, id %d, epoch %d; want a new id at epoch 0", v, old, resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
			}
			seen[resp.ProducerID] = true
		}
	}
	calls := fb.pids.Load()
	for _, txn := range []string{"tx", ""} {
		resp := c.initProducerID(4, &txn, -1, -1)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.TransactionalIDAuthorizationFailed || kerr.IsRetriable(err) || resp.ProducerID != -1 {
			t.Fatalf("transactional id %q: %v, id %d; want TRANSACTIONAL_ID_AUTHORIZATION_FAILED, not retriable", txn, err, resp.ProducerID)
		}
	}
	if fb.pids.Load() != calls {
		t.Fatal("a transactional InitProducerId reached the backend")
	}
	fb.pidCode.Store(int32(pb.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS))
	resp := c.initProducerID(2, nil, -1, -1)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.CoordinatorLoadInProgress || !kerr.IsRetriable(err) || resp.ProducerID != -1 {
		t.Fatalf("backend without a block: %v, id %d; want retriable COORDINATOR_LOAD_IN_PROGRESS", err, resp.ProducerID)
	}
	if resp := c.initProducerID(5, nil, -1, -1); kerr.ErrorForCode(resp.ErrorCode) != kerr.UnsupportedVersion {
		t.Fatalf("v5: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
	}
}
