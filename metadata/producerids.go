package metadata

import (
	"hash/fnv"

	"github.com/twinlog/twinlog/internal/configdef"
)

// Idempotent producer ids (Kafka's KIP-98 producer id, allocated in blocks
// as KIP-730 does) are split into disjoint spaces, one per cluster:
//
//	 63   62            48 47                                        0
//	+---+----------------+-------------------------------------------+
//	| 0 |  space (15 b)  |              counter (48 bits)            |
//	+---+----------------+-------------------------------------------+
//
// The controller hands out counters in blocks from 0 up, never twice
// (controller/metastate, ProducerIdsRecord); the space is the cluster's
// producer.id.space. Two clusters with different spaces thus never give
// the same id to two producers, which matters once a mirror copies one
// cluster's batches, producer ids included, into the other.
const (
	// MaxProducerIDSpace is the largest space (producer.id.space).
	MaxProducerIDSpace = configdef.MaxProducerIDSpace
	// ProducerIDCounterBits is the width of the counter within a space.
	ProducerIDCounterBits = 48
	// ProducerIDCounterLimit is one past the largest counter: a space holds
	// the ids [FirstProducerID(s), FirstProducerID(s)+ProducerIDCounterLimit).
	ProducerIDCounterLimit = int64(1) << ProducerIDCounterBits
)

// ProducerIDSpace returns the producer id space of the cluster clusterID
// whose stored cluster configs are clusterConfigs: producer.id.space if it
// is stored, else DerivedProducerIDSpace(clusterID). Both are fixed for the
// cluster's life (the key is static and written at the first start only;
// the cluster id never changes), so the space never changes either. The
// controller, which allocates, and the brokers, which report the space in
// Metadata, call it on the same records.
func ProducerIDSpace(clusterConfigs map[string]string, clusterID string) int32 {
	if v, ok := clusterConfigs[KeyProducerIDSpace]; ok {
		// Stored values were validated (ValidateConfig); one that does not
		// parse cannot be stored, and the derived space is the only other
		// fixed answer.
		if n, err := configdef.ParseDecimal(v, 1, MaxProducerIDSpace); err == nil {
			return int32(n)
		}
	}
	return DerivedProducerIDSpace(clusterID)
}

// DerivedProducerIDSpace is the space of a cluster without
// producer.id.space: 1 + FNV-1a(clusterID) mod MaxProducerIDSpace, so
// 1 to MaxProducerIDSpace. Two clusters' derived spaces collide with
// probability 1/32767; a mirror between them is refused (the operator sets
// producer.id.space on a new cluster to avoid it).
func DerivedProducerIDSpace(clusterID string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(clusterID))
	return int32(h.Sum32()%MaxProducerIDSpace) + 1
}

// FirstProducerID is the first id of space (counter 0).
func FirstProducerID(space int32) int64 { return int64(space) << ProducerIDCounterBits }

// ProducerIDSpaceOf returns the space id belongs to.
func ProducerIDSpaceOf(id int64) int32 { return int32(id >> ProducerIDCounterBits) }
