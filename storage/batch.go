package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"math"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/producer"
)

// Batch header layout (SPEC §2.2), big-endian. See doc.go for the diagram.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// BatchHeaderSize is the size of the fixed batch header.
	BatchHeaderSize = 61
	// logOverhead is the bytes before and including batchLength.
	logOverhead = 12
	// Magic is the only supported batch format version: Kafka's
	// RecordBatch v2.
	Magic = 2
	// NoProducerID is the producerId of a batch without an idempotent
	// producer (its epoch and base sequence are −1 too).
	NoProducerID = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a record header. A nil Value is encoded as null.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record of a batch. Offset and Timestamp are absolute.
type Record struct {
	Offset    twinlog.Offset
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// BatchOptions shape EncodeBatch.
type BatchOptions struct {
	// BaseOffset and LeaderEpoch are stamped into the header.
	BaseOffset  twinlog.Offset
	LeaderEpoch twinlog.Epoch
	// RecordOffsets uses each Record.Offset (minus BaseOffset) as its offset
	// delta instead of its index; they must increase.
	RecordOffsets bool
	// Producer is the idempotent producer that wrote the batch; nil: none
	// (producerId, producerEpoch and baseSequence −1).
	Producer *Producer
}

// Producer is a batch's idempotent producer fields (SPEC §2.2).
type Producer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// EncodeBatch builds one batch of records. With zero options the batch has
// base offset 0, epoch 0 and dense offset deltas 0..n-1, which is what a
// producer sends and AppendAsLeader re-stamps.
func EncodeBatch(records []Record, opt BatchOptions) ([]byte, error) {
	return AppendBatch(nil, records, opt)
}

// AppendBatch is EncodeBatch appending to dst.
func AppendBatch(dst []byte, records []Record, opt BatchOptions) ([]byte, error) {
	if len(records) == 0 {
		return dst, fmt.Errorf("%w: batch without records", ErrCorrupt)
	}
	start := len(dst)
	first := records[0].Timestamp
	maxTs := first
	var hdr [BatchHeaderSize]byte
	dst = append(dst, hdr[:]...)
	var rec []byte
	prev := int64(-1)
	for i, r := range records {
		delta := int64(i)
		if opt.RecordOffsets {
			delta = int64(r.Offset - opt.BaseOffset)
		}
		if delta <= prev || delta > 1<<31-1 {
			return dst[:start], fmt.Errorf("%w: record %d offset delta %d does not increase", ErrInvalidOffset, i, delta)
		}
		prev = delta
		maxTs = max(maxTs, r.Timestamp)
		rec = rec[:0]
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.Timestamp-first)
		rec = binary.AppendVarint(rec, delta)
		rec = appendBytes(rec, r.Key)
		rec = appendBytes(rec, r.Value)
		rec = binary.AppendVarint(rec, int64(len(r.Headers)))
		for _, h := range r.Headers {
			rec = binary.AppendVarint(rec, int64(len(h.Key)))
			rec = append(rec, h.Key...)
			rec = appendBytes(rec, h.Value)
		}
		dst = binary.AppendVarint(dst, int64(len(rec)))
		dst = append(dst, rec...)
	}
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(opt.BaseOffset))
	be.PutUint32(b[offBatchLength:], uint32(len(b)-logOverhead))
	be.PutUint32(b[offLeaderEpoch:], uint32(opt.LeaderEpoch))
	b[offMagic] = Magic
	be.PutUint16(b[offAttributes:], 0)
	be.PutUint32(b[offLastOffsetDelta:], uint32(prev))
	be.PutUint64(b[offFirstTimestamp:], uint64(first))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	pr := Producer{ID: NoProducerID, Epoch: -1, BaseSequence: -1}
	if opt.Producer != nil {
		pr = *opt.Producer
	}
	be.PutUint64(b[offProducerID:], uint64(pr.ID))
	be.PutUint16(b[offProducerEpoch:], uint16(pr.Epoch))
	be.PutUint32(b[offBaseSequence:], uint32(pr.BaseSequence))
	be.PutUint32(b[offRecordCount:], uint32(len(records)))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return dst, nil
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// BatchView is one encoded batch. Accessors read header fields in place; it
// is only as valid as Validate says.
type BatchView []byte

var be = binary.BigEndian

// BaseOffset is the offset of the first record.
func (b BatchView) BaseOffset() twinlog.Offset { return twinlog.Offset(be.Uint64(b[offBaseOffset:])) }

// BatchLength is the number of bytes after the length field.
func (b BatchView) BatchLength() int32 { return int32(be.Uint32(b[offBatchLength:])) }

// LeaderEpoch is the epoch the batch was produced in.
func (b BatchView) LeaderEpoch() twinlog.Epoch { return twinlog.Epoch(be.Uint32(b[offLeaderEpoch:])) }

// Magic is the format version.
func (b BatchView) Magic() int8 { return int8(b[offMagic]) }

// CRC is the stored checksum.
func (b BatchView) CRC() uint32 { return be.Uint32(b[offCRC:]) }

// Attributes are the batch attributes (0: no compression).
func (b BatchView) Attributes() int16 { return int16(be.Uint16(b[offAttributes:])) }

// LastOffsetDelta is the offset delta of the last record.
func (b BatchView) LastOffsetDelta() int32 { return int32(be.Uint32(b[offLastOffsetDelta:])) }

// LastOffset is the offset of the last record.
func (b BatchView) LastOffset() twinlog.Offset {
	return b.BaseOffset() + twinlog.Offset(b.LastOffsetDelta())
}

// NextOffset is LastOffset + 1.
func (b BatchView) NextOffset() twinlog.Offset { return b.LastOffset() + 1 }

// FirstTimestamp is the timestamp of the first record.
func (b BatchView) FirstTimestamp() int64 { return int64(be.Uint64(b[offFirstTimestamp:])) }

// MaxTimestamp is the largest record timestamp.
func (b BatchView) MaxTimestamp() int64 { return int64(be.Uint64(b[offMaxTimestamp:])) }

// ProducerID is the idempotent producer's id, NoProducerID if none.
func (b BatchView) ProducerID() int64 { return int64(be.Uint64(b[offProducerID:])) }

// ProducerEpoch is the idempotent producer's epoch (−1 if none).
func (b BatchView) ProducerEpoch() int16 { return int16(be.Uint16(b[offProducerEpoch:])) }

// BaseSequence is the sequence number of the first record (−1 if none).
func (b BatchView) BaseSequence() int32 { return int32(be.Uint32(b[offBaseSequence:])) }

// LastSequence is the sequence of the batch's last offset (Kafka's
// lastSequence): BaseSequence plus lastOffsetDelta, wrapping past MaxInt32
// to 0 as producers do. It spans the batch's offsets, not its records: the
// two agree for a producer's batch (dense offsets), and a batch the cleaner
// thinned or emptied keeps its offsets. −1 for a batch without an
// idempotent producer's sequence.
func (b BatchView) LastSequence() int32 {
	if b.BaseSequence() < 0 {
		return -1
	}
	return producer.LastSeq(b.BaseSequence(), b.LastOffsetDelta()+1)
}

// RecordCount is the number of records.
func (b BatchView) RecordCount() int32 { return int32(be.Uint32(b[offRecordCount:])) }

// SetBaseOffset stamps the base offset in place (outside the crc).
func (b BatchView) SetBaseOffset(o twinlog.Offset) { be.PutUint64(b[offBaseOffset:], uint64(o)) }

// SetLeaderEpoch stamps the leader epoch in place (outside the crc).
func (b BatchView) SetLeaderEpoch(e twinlog.Epoch) { be.PutUint32(b[offLeaderEpoch:], uint32(e)) }

// Size is the total encoded size.
func (b BatchView) Size() int { return len(b) }

// batchSize reads the total size of the batch starting at buf from its
// length field; buf must hold at least logOverhead bytes.
func batchSize(buf []byte) int64 { return int64(int32(be.Uint32(buf[offBatchLength:]))) + logOverhead }

// Validate checks magic, lengths, crc, attributes and every record: lengths
// within bounds, offset deltas strictly increasing from >= 0 up to at most
// lastOffsetDelta, recordCount records exactly filling the batch. The last
// record's delta is below lastOffsetDelta in a batch the log cleaner
// thinned (it keeps the batch's offsets, as Kafka's does), and an empty
// batch (recordCount 0, no record bytes, not compressed) is what it leaves
// of a batch whose header must stay (cleaner.go). A producer's batches
// are held to dense deltas by ValidateProducerBatches. Errors are
// *CorruptError with Position 0.
func (b BatchView) Validate() error { return b.validate(nil, nil) }

// validate is Validate; with ts non-nil it also sets ts to the batch's
// smallest and largest record timestamps, and with nullKey non-nil it sets
// it when a record has a null key, in the same walk.
func (b BatchView) validate(ts *TimestampRange, nullKey *bool) error {
	if err := b.validateHeader(); err != nil {
		return err
	}
	if ts != nil {
		*ts = TimestampRange{Min: math.MaxInt64, Max: math.MinInt64}
	}
	n := b.RecordCount()
	if n == 0 {
		return nil
	}
	recs, release, err := b.scratchRecordBytes()
	defer release()
	if err != nil {
		return err
	}
	return b.checkRecords(recs, false, func(r *Record) {
		if ts != nil {
			ts.Min, ts.Max = min(ts.Min, r.Timestamp), max(ts.Max, r.Timestamp)
		}
		if nullKey != nil && r.Key == nil {
			*nullKey = true
		}
	})
}

// checkRecords walks the batch's records recs (recordBytes, the batch's
// header checked) as Validate checks them: record count within the bytes,
// each record well-formed, offset deltas strictly increasing and at most
// lastOffsetDelta. It calls fn on each record (with full, its headers
// filled: eachRecord).
func (b BatchView) checkRecords(recs []byte, full bool, fn func(*Record)) error {
	if n := b.RecordCount(); int64(n) > int64(len(recs)) {
		return corruptf(0, "record count %d cannot fit in %d bytes", n, len(recs))
	}
	var prev int64 = -1
	err := b.eachRecord(recs, func(r *Record, delta int64, _ []byte) error {
		if delta <= prev {
			return corruptf(0, "offset delta %d after %d", delta, prev)
		}
		prev = delta
		fn(r)
		return nil
	}, full)
	if err != nil {
		return err
	}
	if prev > int64(b.LastOffsetDelta()) {
		return corruptf(0, "record offset delta %d beyond lastOffsetDelta %d", prev, b.LastOffsetDelta())
	}
	return nil
}

// validateHeader is Validate without the records: lengths, magic, crc
// (which covers the records, compressed or not), attributes, a
// non-negative base offset, record count and lastOffsetDelta, and an
// empty batch's shape.
func (b BatchView) validateHeader() error {
	if len(b) < BatchHeaderSize {
		return corruptf(0, "batch of %d bytes is shorter than the %d-byte header", len(b), BatchHeaderSize)
	}
	if got := batchSize(b); got != int64(len(b)) {
		return corruptf(0, "batchLength says %d bytes, have %d", got, len(b))
	}
	if b.Magic() != Magic {
		return corruptf(0, "magic %d, want %d", b.Magic(), Magic)
	}
	if crc := crc32.Checksum(b[offAttributes:], castagnoli); crc != b.CRC() {
		return corruptf(0, "crc %08x, computed %08x", b.CRC(), crc)
	}
	if err := checkAttributes(b.Attributes()); err != nil {
		return err
	}
	if b.BaseOffset() < 0 {
		return corruptf(0, "negative base offset %d", b.BaseOffset())
	}
	n := b.RecordCount()
	if n < 0 {
		return corruptf(0, "record count %d", n)
	}
	if b.LastOffsetDelta() < 0 {
		return corruptf(0, "negative lastOffsetDelta %d", b.LastOffsetDelta())
	}
	if n == 0 && (b.Codec() != CodecNone || len(b) != BatchHeaderSize) {
		return corruptf(0, "record count 0 with %d bytes of %s records", len(b)-BatchHeaderSize, b.Codec())
	}
	return nil
}

// Records decodes the records, decompressing a compressed batch once,
// and checks them as Validate does. The returned keys, values and header
// values alias b (or the decompressed records).
func (b BatchView) Records() ([]Record, error) {
	if err := b.validateHeader(); err != nil {
		return nil, err
	}
	if b.RecordCount() == 0 {
		return []Record{}, nil
	}
	recs, err := b.recordBytes()
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, b.RecordCount())
	if err := b.checkRecords(recs, true, func(r *Record) { out = append(out, *r) }); err != nil {
		return nil, err
	}
	return out, nil
}

// eachRecord walks the records in recs (recordBytes); with full it fills
// r's headers (key and value always). raw is the record's encoding, its
// length varint included. Positions in errors count from the first record.
func (b BatchView) eachRecord(recs []byte, fn func(r *Record, delta int64, raw []byte) error, full bool) error {
	p := recs
	pos := func() int64 { return int64(len(recs) - len(p)) }
	varint := func(what string) (int64, error) {
		v, n := binary.Varint(p)
		if n <= 0 {
			return 0, corruptf(0, "bad %s varint at byte %d", what, pos())
		}
		p = p[n:]
		return v, nil
	}
	bytesField := func(what string, nullable bool) ([]byte, error) {
		// Not varint(what + " length"): that concatenation allocated per
		// field on the hot validation path (4% of broker CPU).
		l, n := binary.Varint(p)
		if n <= 0 {
			return nil, corruptf(0, "bad %s length varint at byte %d", what, pos())
		}
		p = p[n:]
		if l == -1 && nullable {
			return nil, nil
		}
		if l < 0 || l > int64(len(p)) {
			return nil, corruptf(0, "%s length %d at byte %d exceeds %d remaining", what, l, pos(), len(p))
		}
		v := p[:l:l]
		p = p[l:]
		return v, nil
	}
	base := b.BaseOffset()
	first := b.FirstTimestamp()
	var r Record
	for i := int32(0); i < b.RecordCount(); i++ {
		start := p
		l, err := varint("record length")
		if err != nil {
			return err
		}
		if l < 1 || l > int64(len(p)) {
			return corruptf(0, "record %d length %d exceeds %d remaining", i, l, len(p))
		}
		rest := p[l:]
		p = p[:l]
		if p[0] != 0 {
			return corruptf(0, "record %d attributes %d", i, p[0])
		}
		p = p[1:]
		tsd, err := varint("timestamp delta")
		if err != nil {
			return err
		}
		od, err := varint("offset delta")
		if err != nil {
			return err
		}
		if od < 0 || od > 1<<31-1 {
			return corruptf(0, "record %d offset delta %d", i, od)
		}
		r = Record{Offset: base + twinlog.Offset(od), Timestamp: first + tsd}
		if r.Key, err = bytesField("key", true); err != nil {
			return err
		}
		if r.Value, err = bytesField("value", true); err != nil {
			return err
		}
		nh, err := varint("header count")
		if err != nil {
			return err
		}
		if nh < 0 || nh > int64(len(p)) {
			return corruptf(0, "record %d header count %d", i, nh)
		}
		if full && nh > 0 {
			r.Headers = make([]Header, 0, nh)
		}
		for range nh {
			k, err := bytesField("header key", false)
			if err != nil {
				return err
			}
			v, err := bytesField("header value", true)
			if err != nil {
				return err
			}
			if full {
				r.Headers = append(r.Headers, Header{Key: string(k), Value: v})
			}
		}
		if len(p) != 0 {
			return corruptf(0, "record %d has %d trailing bytes", i, len(p))
		}
		if err := fn(&r, od, start[:len(start)-len(rest)]); err != nil {
			return err
		}
		p = rest
	}
	if len(p) != 0 {
		return corruptf(0, "%d bytes after the last record", len(p))
	}
	return nil
}

// DecodeBatch splits the first batch off buf and validates it. On success
// it returns the batch (aliasing buf) and the rest.
func DecodeBatch(buf []byte) (BatchView, []byte, error) {
	b, rest, err := splitBatch(buf)
	if err == nil {
		err = b.Validate()
	}
	if err != nil {
		return nil, buf, err
	}
	return b, rest, nil
}

// splitBatch cuts the first batch off buf by its length field, unchecked.
func splitBatch(buf []byte) (BatchView, []byte, error) {
	if len(buf) < logOverhead {
		return nil, buf, corruptf(0, "%d bytes cannot hold a batch length", len(buf))
	}
	size := batchSize(buf)
	if size < BatchHeaderSize || size > int64(len(buf)) {
		return nil, buf, corruptf(0, "batch length %d with %d bytes available", size, len(buf))
	}
	return BatchView(buf[:size:size]), buf[size:], nil
}

// Batches iterates over concatenated batches, validating each. It stops
// after the first error, which it yields with a nil view and a
// *CorruptError positioned in buf.
func Batches(buf []byte) iter.Seq2[BatchView, error] {
	return func(yield func(BatchView, error) bool) {
		var pos int64
		for len(buf) > 0 {
			b, rest, err := DecodeBatch(buf)
			if err != nil {
				yield(nil, withFile(err, "", pos))
				return
			}
			if !yield(b, nil) {
				return
			}
			pos += int64(len(b))
			buf = rest
		}
	}
}

// SplitBatches validates buf and returns its batches.
func SplitBatches(buf []byte) ([]BatchView, error) {
	var out []BatchView
	for b, err := range Batches(buf) {
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Validated is a run of concatenated batches that passed ValidateBatches:
// every batch satisfied BatchView.Validate when it was checked. Only
// ValidateBatches makes a non-empty Validated, so the Log's Append*Validated
// methods can skip the crc and record walk without trusting a flag from
// their caller. The batches alias the validated buffer; the caller must not
// change it between validation and append (the leader's in-place offset and
// epoch stamps are outside the crc).
type Validated struct {
	views []BatchView
}

// ValidateBatches validates buf like SplitBatches and returns it as a
// Validated for a later append. Errors are *CorruptError positioned in buf.
func ValidateBatches(buf []byte) (Validated, error) { return validateBatches(buf, BatchView.Validate) }

// ValidateReplicatedBatches is ValidateBatches for the batches a follower
// fetched from its leader: a compressed batch is checked as Kafka's
// followers check one, by its header and crc (which covers the compressed
// records), without decompressing it. Its leader decompressed and checked
// every record when it took the batch from its producer or source, and the
// crc says these are the same bytes; the records are read again only by
// consumers and the log cleaner, which validate what they decode.
// Uncompressed batches are walked as in ValidateBatches (no decompression
// to save).
func ValidateReplicatedBatches(buf []byte) (Validated, error) {
	return validateBatches(buf, func(b BatchView) error {
		if b.Codec() != CodecNone {
			return b.validateHeader()
		}
		return b.Validate()
	})
}

func validateBatches(buf []byte, validate func(BatchView) error) (Validated, error) {
	var out []BatchView
	var pos int64
	for rest := buf; len(rest) > 0; {
		b, next, err := splitBatch(rest)
		if err == nil {
			err = validate(b)
		}
		if err != nil {
			return Validated{}, withFile(err, "", pos)
		}
		// Views keep the capacity of the whole buffer so that a run of them
		// is written with one call (see Log.split).
		out = append(out, BatchView(buf[pos:pos+int64(len(b))]))
		pos += int64(len(b))
		rest = next
	}
	return Validated{views: out}, nil
}

// ErrInvalidProducerBatch: a batch that is well-formed but not one a
// producer may send (ValidateProducerBatches).
var ErrInvalidProducerBatch = errors.New("storage: invalid producer batch")

// TimestampRange is the smallest and largest record timestamp of some
// batches.
type TimestampRange struct{ Min, Max int64 }

// ValidateProducerBatches is ValidateBatches plus the rules for a client's
// batches (issue 13), which replicated and mirrored batches need not meet
// (a compacted source may leave offset gaps): dense offset deltas
// 0..recordCount−1, i.e. lastOffsetDelta = recordCount−1, so a producer
// cannot make the leader assign offsets no record holds; and maxTimestamp
// equal to the largest record timestamp (batches are CreateTime: the
// header's value is what timestamp lookups trust); producer id −1 or an
// idempotent producer's (≥ 0) with non-negative epoch and base sequence.
// Those errors wrap
// ErrInvalidProducerBatch; malformed batches are *CorruptError as in
// ValidateBatches. It returns the timestamp range over all records, for
// the broker's log.message.timestamp.*.max.ms bounds. One walk per batch.
func ValidateProducerBatches(buf []byte) (Validated, TimestampRange, error) {
	return validateProducerBatches(buf, false)
}

// ErrKeylessRecord: a producer's record without a key, for a compacted
// topic (ValidateKeyedProducerBatches). It wraps ErrInvalidProducerBatch.
var ErrKeylessRecord = fmt.Errorf("%w: compacted topic cannot accept a record without a key", ErrInvalidProducerBatch)

// ValidateKeyedProducerBatches is ValidateProducerBatches for a compacted
// topic (cleanup.policy compact): a record with a null key is refused too
// (ErrKeylessRecord), as Kafka refuses it with INVALID_RECORD, since the
// cleaner could never keep it. Replicated and mirrored batches are not
// held to it. Same single walk per batch.
func ValidateKeyedProducerBatches(buf []byte) (Validated, TimestampRange, error) {
	return validateProducerBatches(buf, true)
}

func validateProducerBatches(buf []byte, requireKeys bool) (Validated, TimestampRange, error) {
	all := TimestampRange{Min: math.MaxInt64, Max: math.MinInt64}
	var out []BatchView
	var pos int64
	for len(buf[pos:]) > 0 {
		rest := buf[pos:]
		if len(rest) < logOverhead {
			return Validated{}, all, withFile(corruptf(0, "%d bytes cannot hold a batch length", len(rest)), "", pos)
		}
		size := batchSize(rest)
		if size < BatchHeaderSize || size > int64(len(rest)) {
			return Validated{}, all, withFile(corruptf(0, "batch length %d with %d bytes available", size, len(rest)), "", pos)
		}
		b := BatchView(rest[:size:size])
		var ts TimestampRange
		var nullKey bool
		nk := &nullKey
		if !requireKeys {
			nk = nil
		}
		if err := b.validate(&ts, nk); err != nil {
			return Validated{}, all, withFile(err, "", pos)
		}
		if int64(b.LastOffsetDelta()) != int64(b.RecordCount())-1 {
			return Validated{}, all, fmt.Errorf("%w: batch at byte %d: lastOffsetDelta %d with %d records (offsets must be dense)",
				ErrInvalidProducerBatch, pos, b.LastOffsetDelta(), b.RecordCount())
		}
		if nullKey {
			return Validated{}, all, fmt.Errorf("%w (batch at byte %d)", ErrKeylessRecord, pos)
		}
		if b.MaxTimestamp() != ts.Max {
			return Validated{}, all, fmt.Errorf("%w: batch at byte %d: maxTimestamp %d, largest record timestamp %d",
				ErrInvalidProducerBatch, pos, b.MaxTimestamp(), ts.Max)
		}
		if pid := b.ProducerID(); pid < NoProducerID || pid >= 0 && (b.ProducerEpoch() < 0 || b.BaseSequence() < 0) {
			return Validated{}, all, fmt.Errorf("%w: batch at byte %d: producer id %d, epoch %d, base sequence %d (an idempotent producer's epoch and sequence are not negative)",
				ErrInvalidProducerBatch, pos, pid, b.ProducerEpoch(), b.BaseSequence())
		}
		all.Min, all.Max = min(all.Min, ts.Min), max(all.Max, ts.Max)
		// As ValidateBatches: views keep the whole buffer's capacity.
		out = append(out, BatchView(buf[pos:pos+size]))
		pos += size
	}
	return Validated{views: out}, all, nil
}

// Batches are the validated batches, in order.
func (v Validated) Batches() []BatchView { return v.views }

// Bytes is the total size of the batches.
func (v Validated) Bytes() int {
	n := 0
	for _, b := range v.views {
		n += len(b)
	}
	return n
}

// Slice is the validated run of batches [i, j).
func (v Validated) Slice(i, j int) Validated { return Validated{views: v.views[i:j]} }
