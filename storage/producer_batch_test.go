package storage

import (
	"errors"
	"hash/crc32"
	"testing"
)

// TestValidateProducerBatches: a client's batches must have dense offset
// deltas and a true maxTimestamp (ErrInvalidProducerBatch), while
// ValidateBatches still takes both (replicated and mirrored batches may
// have gaps); the timestamp range covers every record of every batch.
func TestValidateProducerBatches(t *testing.T) {
	enc := func(opt BatchOptions, recs ...Record) []byte {
		b, err := EncodeBatch(recs, opt)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	gap := enc(BatchOptions{RecordOffsets: true}, Record{Offset: 0, Timestamp: 5}, Record{Offset: 3, Timestamp: 6})
	lie := enc(BatchOptions{}, Record{Timestamp: 5}, Record{Timestamp: 9})
	be.PutUint64(lie[offMaxTimestamp:], 7)
	be.PutUint32(lie[offCRC:], crc32.Checksum(lie[offAttributes:], castagnoli))
	noSeq := enc(BatchOptions{Producer: &Producer{ID: 4, Epoch: 0, BaseSequence: -1}}, Record{Timestamp: 5})
	badID := enc(BatchOptions{Producer: &Producer{ID: -2, Epoch: 0, BaseSequence: 0}}, Record{Timestamp: 5})
	for name, buf := range map[string][]byte{"gap": gap, "maxTimestamp": lie, "no sequence": noSeq, "producer id -2": badID} {
		if _, err := ValidateBatches(buf); err != nil {
			t.Errorf("%s: ValidateBatches: %v", name, err)
		}
		if _, _, err := ValidateProducerBatches(buf); !errors.Is(err, ErrInvalidProducerBatch) {
			t.Errorf("%s: ValidateProducerBatches: %v, want ErrInvalidProducerBatch", name, err)
		}
	}
	two := append(enc(BatchOptions{}, Record{Timestamp: 20}, Record{Timestamp: -3}), enc(BatchOptions{}, Record{Timestamp: 40})...)
	v, ts, err := ValidateProducerBatches(two)
	if err != nil || len(v.Batches()) != 2 || ts != (TimestampRange{Min: -3, Max: 40}) {
		t.Fatalf("two batches: %d batches, %+v, %v; want 2, {-3 40}, nil", len(v.Batches()), ts, err)
	}
	if _, _, err := ValidateProducerBatches(two[:len(two)-1]); err == nil || errors.Is(err, ErrInvalidProducerBatch) {
		t.Fatalf("truncated batch: %v, want a corruption error", err)
	}
}
