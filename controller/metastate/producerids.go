package metastate

import (
	"fmt"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// ProducerIDBlockSize is how many producer ids one AllocateProducerIds
// hands a broker (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE): a
// metadata change per thousand idempotent producers, and at most a
// thousand ids lost when a broker restarts with a block half used.
const ProducerIDBlockSize = 1000

// AllocateProducerIds hands broker req.BrokerId the next block of
// ProducerIDBlockSize producer ids of the cluster's space
// (metadata.ProducerIDSpace; Kafka's KIP-730): the block starts at the
// stored ProducerIdsRecord's next id (the space's first id before any
// block), and the delta stores the record with next moved past the block.
// The shell answers only once the delta is durable, and snapshots keep the
// record, so no block is handed out twice, across controller restarts
// included.
//
// Refused, with the codes of the other broker RPCs (Heartbeat,
// AlterPartition): an unknown broker, a broker epoch that is not the
// registered one, or a fenced broker (STALE_BROKER_EPOCH: the requester is
// not a live registration; it retries once registered and unfenced). A
// space whose counter would pass 2^48 is UNKNOWN_SERVER_ERROR (Kafka's
// answer to an exhausted id space); nothing is written.
func (s *State) AllocateProducerIds(req *twinlogv1.AllocateProducerIdsRequest) (*twinlogv1.MetadataDelta, *twinlogv1.AllocateProducerIdsResponse) {
	fail := func(ec twinlogv1.ErrorCode, format string, args ...any) (*twinlogv1.MetadataDelta, *twinlogv1.AllocateProducerIdsResponse) {
		return nil, &twinlogv1.AllocateProducerIdsResponse{Error: ec, ErrorMessage: fmt.Sprintf(format, args...)}
	}
	id, epoch := req.GetBrokerId(), req.GetBrokerEpoch()
	if ec, msg := s.liveRequester(id, epoch); ec != ecNone {
		return fail(ec, "%s", msg)
	}
	space := s.ProducerIDSpace()
	first := metadata.FirstProducerID(space)
	next := first
	if r := s.ProducerIDs(); r != nil {
		next = r.GetNextProducerId()
	}
	counter := next - first
	switch {
	case counter < 0 || counter > metadata.ProducerIDCounterLimit:
		// The space is fixed for the cluster's life (static key, fixed
		// cluster id): a stored id outside it is a corrupt record, and
		// nothing below it may be handed out again.
		return fail(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR,
			"stored next producer id %d is not in this cluster's producer id space %d (%s): refusing to allocate", next, space, metadata.KeyProducerIDSpace)
	case counter > metadata.ProducerIDCounterLimit-ProducerIDBlockSize:
		return fail(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR,
			"producer id space %d is exhausted: %d ids handed out, no block of %d left", space, counter, ProducerIDBlockSize)
	}
	d := &twinlogv1.MetadataDelta{Offset: s.Offset() + 1, ProducerIds: &twinlogv1.ProducerIdsRecord{
		BrokerId: id, BrokerEpoch: epoch, NextProducerId: next + ProducerIDBlockSize,
	}}
	return d, &twinlogv1.AllocateProducerIdsResponse{ProducerIdStart: next, ProducerIdLen: ProducerIDBlockSize}
}
