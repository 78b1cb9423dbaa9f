package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/metadata"
)

// Idempotent producer ids (Kafka's InitProducerId without a transactional
// id): the controller allocates them in blocks (AllocateProducerIds,
// KIP-730), durable before it answers, and each broker hands out the ids of
// its current block one by one, asking for the next block when it runs out.
// A block is never handed to two brokers nor twice to one, and the
// allocator below never gives an id of its block twice, so no two
// producers of the cluster share an id; the ids of a block half used when
// the broker stops are lost, as in Kafka. Ids carry the cluster's space
// (metadata.ProducerIDSpace), so a mirror's source and destination never
// share one either.

// ProducerIDObserver is an optional Observer extension for producer id
// allocation; metrics.Broker implements it.
type ProducerIDObserver interface {
	// ObserveProducerIDBlock counts one block request to the controller:
	// ok is false when no block came back.
	ObserveProducerIDBlock(ok bool)
	// ObserveProducerID counts an id handed to a producer.
	ObserveProducerID()
}

type nopProducerIDObserver struct{}

func (nopProducerIDObserver) ObserveProducerIDBlock(bool) {}
func (nopProducerIDObserver) ObserveProducerID()          {}

// producerIDBlock is one block [Start, Start+Len) from the controller.
type producerIDBlock struct {
	Start int64
	Len   int32
}

// errProducerIDBlock is an allocation the controller refused: Code and
// Message are its answer.
type errProducerIDBlock struct {
	Code    pb.ErrorCode
	Message string
}

func (e *errProducerIDBlock) Error() string {
	return fmt.Sprintf("broker: allocate producer ids: %v: %s", e.Code, e.Message)
}

// producerIDs hands out the ids of the blocks fetch gets, each once. It
// is safe for concurrent use: one caller at a time fetches a block while
// the others wait for it (each within its own context), and a block must
// lie above every id given before, or it is refused rather than used.
type producerIDs struct {
	fetch func(ctx context.Context) (producerIDBlock, error)
	obs   ProducerIDObserver

	mu sync.Mutex
	// block holds the current block's unused ids.
	block serve.ProducerIDBlock
	// fetching is closed when the block request in flight ends; nil when
	// none is.
	fetching chan struct{}
}

func newProducerIDs(fetch func(ctx context.Context) (producerIDBlock, error), obs ProducerIDObserver) *producerIDs {
	if obs == nil {
		obs = nopProducerIDObserver{}
	}
	return &producerIDs{fetch: fetch, obs: obs}
}

// Next returns an id no call returned before, fetching a block when the
// current one is used up. It waits at most until ctx ends; an error means
// no id was taken.
func (a *producerIDs) Next(ctx context.Context) (int64, error) {
	for {
		a.mu.Lock()
		if id, ok := a.block.Take(); ok {
			a.mu.Unlock()
			a.obs.ObserveProducerID()
			return id, nil
		}
		if wait := a.fetching; wait != nil {
			a.mu.Unlock()
			select {
			case <-wait:
				continue // a block, or the fetcher's failure: look again
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		done := make(chan struct{})
		a.fetching = done
		a.mu.Unlock()

		blk, err := a.fetch(ctx)
		a.mu.Lock()
		a.fetching = nil
		close(done)
		if err == nil {
			// A block that could give an id twice is never used.
			if rerr := a.block.Refill(blk.Start, blk.Len); rerr != nil {
				err = fmt.Errorf("broker: %w", rerr)
			}
		}
		a.mu.Unlock()
		a.obs.ObserveProducerIDBlock(err == nil)
		if err != nil {
			return 0, err
		}
	}
}

// allocateProducerIDs asks the controller for this broker's next block, as
// the registered broker (id and current epoch), within ctx and the RPC
// timeout.
func (b *Broker) allocateProducerIDs(ctx context.Context) (producerIDBlock, error) {
	epoch := b.brokerEpoch()
	if epoch <= 0 {
		return producerIDBlock{}, fmt.Errorf("%w: not registered yet", ErrNotRunning)
	}
	ctl, err := b.controller()
	if err != nil {
		return producerIDBlock{}, fmt.Errorf("%w: %w", errNoController, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.RPCTimeout)
	defer cancel()
	resp, err := ctl.AllocateProducerIds(ctx, &pb.AllocateProducerIdsRequest{BrokerId: int32(b.cfg.ID), BrokerEpoch: epoch})
	if err != nil {
		return producerIDBlock{}, fmt.Errorf("broker: allocate producer ids: %w", err)
	}
	if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return producerIDBlock{}, &errProducerIDBlock{Code: resp.GetError(), Message: resp.GetErrorMessage()}
	}
	return producerIDBlock{Start: resp.GetProducerIdStart(), Len: resp.GetProducerIdLen()}, nil
}

// InitProducerId gives an idempotent producer a new producer id, epoch 0
// (Kafka's InitProducerId without a transactional id; twinlog has no
// transactions, so transaction_timeout_ms is unused). Errors travel in the
// response: COORDINATOR_LOAD_IN_PROGRESS, retriable as in Kafka's brokers
// (KAFKA-14694), while no block can be had (the controller unreachable,
// this broker not registered or fenced), REQUEST_TIMED_OUT when ctx ended
// first, and the controller's UNKNOWN_SERVER_ERROR when the cluster's id
// space is exhausted.
func (b *Broker) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	id, err := b.pids.Next(ctx)
	if err == nil {
		return &pb.InitProducerIdResponse{ProducerId: id, ProducerEpoch: 0}, nil
	}
	resp := &pb.InitProducerIdResponse{ProducerId: -1, ProducerEpoch: -1, ErrorMessage: err.Error()}
	var refused *errProducerIDBlock
	switch {
	case ctx.Err() != nil:
		resp.Error = pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
	case errors.As(err, &refused) && refused.Code == pb.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR:
		resp.Error, resp.ErrorMessage = refused.Code, refused.Message
	default:
		resp.Error = pb.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS
		resp.ErrorMessage = "no producer id block from the controller yet (" + err.Error() + "); retry"
	}
	b.log.Debug("init producer id refused", "code", resp.Error, "err", err)
	return resp, nil
}

// producerIDSpaceLocked is the space Metadata reports: the cluster's
// (metadata.ProducerIDSpace of the image's cluster configs and id), 0
// until the broker has read any metadata, whose cluster configs may set
// it. b.metaMu is held.
func (b *Broker) producerIDSpaceLocked() int32 {
	if b.image.Offset() == 0 {
		return 0
	}
	return metadata.ProducerIDSpace(b.image.StoredClusterConfigs(), b.clusterIDLocked())
}
