package cli

import (
	"errors"
)

// Record is one record as twinctl produces or shows it.
type Record struct {
	// Offset is absolute when decoded; Encode ignores it (the leader
	// assigns offsets, SPEC §4.1).
	Offset int64
	// Timestamp is milliseconds since the Unix epoch.
	Timestamp int64
	// Key and Value are nil for a null key or value.
	Key     []byte
	Value   []byte
	Headers []RecordHeader
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Producer is a batch's idempotent producer fields (SPEC §2.2); NoProducer
// for a batch without one.
type Producer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// NoProducer marks a batch of no idempotent producer.
var NoProducer = Producer{ID: -1, Epoch: -1, BaseSequence: -1}

// Batch is one decoded SPEC §2.2 record batch.
type Batch struct {
	BaseOffset  int64
	LastOffset  int64 // BaseOffset + lastOffsetDelta
	LeaderEpoch int32
	Records     []Record
}

// BatchCodec builds and parses SPEC §2.2 record batches. twinctl does not
// carry its own codec: cmd/twinctl/main.go plugs in the storage package's
// one (see Options.Codec).
type BatchCodec interface {
	// Encode builds one batch from records of producer p with base offset
	// 0 and leader epoch -1; the partition leader stamps both (SPEC §2.2).
	Encode(records []Record, p Producer) ([]byte, error)
	// Decode parses the concatenated batches of a Fetch response. A
	// truncated trailing batch (cut by maxBytes) is dropped, not an error;
	// a bad CRC is an error.
	Decode(b []byte) ([]Batch, error)
}

// CodecFuncs adapts two functions to BatchCodec.
type CodecFuncs struct {
	EncodeFunc func(records []Record, p Producer) ([]byte, error)
	DecodeFunc func(b []byte) ([]Batch, error)
}

// Encode implements BatchCodec.
func (c CodecFuncs) Encode(records []Record, p Producer) ([]byte, error) {
	return c.EncodeFunc(records, p)
}

// Decode implements BatchCodec.
func (c CodecFuncs) Decode(b []byte) ([]Batch, error) { return c.DecodeFunc(b) }

var errNoCodec = errors.New("this twinctl build has no record batch codec (Options.Codec is nil): rebuild cmd/twinctl with the storage batch codec wired in")
