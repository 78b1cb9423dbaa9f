package codec

import (
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Field numbers (api/proto/twinlog/v1/broker.proto, common.proto).
const (
	produceReqAcks       = 1
	produceReqTimeoutMs  = 2
	produceReqPartitions = 3

	producePartTopic     = 1
	producePartPartition = 2
	producePartRecords   = 3

	fetchRespPartitions = 1

	fetchPartTopic            = 1
	fetchPartPartition        = 2
	fetchPartError            = 3
	fetchPartErrorMessage     = 4
	fetchPartLeaderEpoch      = 5
	fetchPartHighWatermark    = 6
	fetchPartLogStartOffset   = 7
	fetchPartLogEndOffset     = 8
	fetchPartDivergingEpoch   = 9
	fetchPartTruncationOffset = 10
	fetchPartRecords          = 11
	fetchPartLeaderID         = 12

	epochEndOffsetEpoch     = 1
	epochEndOffsetEndOffset = 2
)

// The encoders below write fields in field-number order and omit proto3
// zero values, as the protobuf runtime does, so their output is the proto
// codec's byte for byte. They report false for a message carrying unknown
// fields; the caller then uses the proto codec.

func appendInt32(b []byte, num protowire.Number, v int32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v)) // sign-extended, as protobuf does
}

func appendInt64(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func hasUnknown(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) > 0 }

// bytesFieldSize is the encoded size of a non-empty bytes field of n bytes.
func bytesFieldSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeVarint(uint64(n)) + n
}

// pieces accumulates an encoding made of small encoded fields (one growing
// byte slice) and large byte fields sent from their own buffers.
type pieces struct {
	meta  []byte
	start int // meta[start:] is not yet in out
	out   mem.BufferSlice
}

// big appends the tag and length of a bytes field and then buf itself.
func (p *pieces) big(num protowire.Number, buf mem.Buffer) {
	p.meta = protowire.AppendTag(p.meta, num, protowire.BytesType)
	p.meta = protowire.AppendVarint(p.meta, uint64(buf.Len()))
	p.out = append(p.out, mem.SliceBuffer(p.meta[p.start:len(p.meta):len(p.meta)]))
	p.start = len(p.meta)
	p.out = append(p.out, buf)
}

func (p *pieces) done() mem.BufferSlice {
	if p.start < len(p.meta) {
		p.out = append(p.out, mem.SliceBuffer(p.meta[p.start:]))
	}
	return p.out
}

// marshalProduceRequest encodes req with each partition's records sent
// from the caller's buffer (not copied).
func marshalProduceRequest(req *pb.ProduceRequest) (mem.BufferSlice, bool) {
	if hasUnknown(req) {
		return nil, false
	}
	for _, pd := range req.GetPartitions() {
		if pd == nil || hasUnknown(pd) {
			return nil, false
		}
	}
	p := pieces{meta: make([]byte, 0, 32+48*len(req.GetPartitions()))}
	p.meta = appendInt32(p.meta, produceReqAcks, req.GetAcks())
	p.meta = appendInt32(p.meta, produceReqTimeoutMs, req.GetTimeoutMs())
	for _, pd := range req.GetPartitions() {
		var head [64]byte
		h := appendString(head[:0], producePartTopic, pd.GetTopic())
		h = appendInt32(h, producePartPartition, pd.GetPartition())
		size := len(h)
		if n := len(pd.GetRecords()); n > 0 {
			size += bytesFieldSize(producePartRecords, n)
		}
		p.meta = protowire.AppendTag(p.meta, produceReqPartitions, protowire.BytesType)
		p.meta = protowire.AppendVarint(p.meta, uint64(size))
		p.meta = append(p.meta, h...)
		switch recs := pd.GetRecords(); {
		case mem.IsBelowBufferPoolingThreshold(len(recs)):
			if len(recs) > 0 {
				p.meta = protowire.AppendTag(p.meta, producePartRecords, protowire.BytesType)
				p.meta = protowire.AppendBytes(p.meta, recs)
			}
		default:
			p.big(producePartRecords, mem.SliceBuffer(recs))
		}
	}
	return p.done(), true
}

// marshalFetchResponse encodes resp with each partition's records sent from
// its own buffer, which it hands to the returned slice: gRPC puts it back
// into pool once written (empty ones go back now).
func marshalFetchResponse(resp *pb.FetchResponse, pool mem.BufferPool) (mem.BufferSlice, bool) {
	if hasUnknown(resp) {
		return nil, false
	}
	for _, pr := range resp.GetPartitions() {
		if pr == nil || hasUnknown(pr) || (pr.GetDivergingEpoch() != nil && hasUnknown(pr.GetDivergingEpoch())) {
			return nil, false
		}
	}
	p := pieces{meta: make([]byte, 0, 96*len(resp.GetPartitions()))}
	for _, pr := range resp.GetPartitions() {
		var head [160]byte
		h := appendString(head[:0], fetchPartTopic, pr.GetTopic())
		h = appendInt32(h, fetchPartPartition, pr.GetPartition())
		h = appendInt32(h, fetchPartError, int32(pr.GetError()))
		h = appendString(h, fetchPartErrorMessage, pr.GetErrorMessage())
		h = appendInt32(h, fetchPartLeaderEpoch, pr.GetLeaderEpoch())
		h = appendInt64(h, fetchPartHighWatermark, pr.GetHighWatermark())
		h = appendInt64(h, fetchPartLogStartOffset, pr.GetLogStartOffset())
		h = appendInt64(h, fetchPartLogEndOffset, pr.GetLogEndOffset())
		if d := pr.GetDivergingEpoch(); d != nil {
			var e [32]byte
			eb := appendInt32(e[:0], epochEndOffsetEpoch, d.GetEpoch())
			eb = appendInt64(eb, epochEndOffsetEndOffset, d.GetEndOffset())
			h = protowire.AppendTag(h, fetchPartDivergingEpoch, protowire.BytesType)
			h = protowire.AppendBytes(h, eb)
		}
		if pr.TruncationOffset != nil {
			h = protowire.AppendTag(h, fetchPartTruncationOffset, protowire.VarintType)
			h = protowire.AppendVarint(h, uint64(*pr.TruncationOffset))
		}
		var t [16]byte
		tail := appendInt32(t[:0], fetchPartLeaderID, pr.GetLeaderId())
		recs := pr.GetRecords()
		size := len(h) + len(tail)
		if len(recs) > 0 {
			size += bytesFieldSize(fetchPartRecords, len(recs))
		}
		p.meta = protowire.AppendTag(p.meta, fetchRespPartitions, protowire.BytesType)
		p.meta = protowire.AppendVarint(p.meta, uint64(size))
		p.meta = append(p.meta, h...)
		switch {
		case len(recs) > 0 && !mem.IsBelowBufferPoolingThreshold(cap(recs)):
			p.big(fetchPartRecords, mem.NewBuffer(&recs, pool))
		case len(recs) > 0:
			// Small: copied (mem.NewBuffer would not pool it either).
			p.meta = protowire.AppendTag(p.meta, fetchPartRecords, protowire.BytesType)
			p.meta = protowire.AppendBytes(p.meta, recs)
			pool.Put(&recs)
		case cap(recs) > 0:
			pool.Put(&recs)
		}
		pr.Records = nil // owned by the buffer slice now
		p.meta = append(p.meta, tail...)
	}
	return p.done(), true
}

// The decoders below alias bytes fields into b. They report false, with
// the message reset, when b holds anything they do not decode exactly as
// the protobuf runtime would (unknown fields, unexpected wire types,
// invalid UTF-8): the caller then uses proto.Unmarshal, which copies.

type decoder struct {
	b  []byte
	ok bool
}

func (d *decoder) tag() (protowire.Number, protowire.Type) {
	num, typ, n := protowire.ConsumeTag(d.b)
	if n < 0 {
		d.ok = false
		return 0, 0
	}
	d.b = d.b[n:]
	return num, typ
}

func (d *decoder) varint(typ protowire.Type) uint64 {
	if typ != protowire.VarintType {
		d.ok = false
		return 0
	}
	v, n := protowire.ConsumeVarint(d.b)
	if n < 0 {
		d.ok = false
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(typ protowire.Type) []byte {
	if typ != protowire.BytesType {
		d.ok = false
		return nil
	}
	v, n := protowire.ConsumeBytes(d.b)
	if n < 0 {
		d.ok = false
		return nil
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(typ protowire.Type) string {
	v := d.bytes(typ)
	if !utf8.Valid(v) {
		d.ok = false
		return ""
	}
	return string(v)
}

// alias returns v for a proto3 bytes field: nil when empty, as protobuf
// decodes it; the full slice expression keeps appends from overwriting
// the next field.
func alias(v []byte) []byte {
	if len(v) == 0 {
		return nil
	}
	return v[:len(v):len(v)]
}

// unmarshalProduceRequest decodes b into req (fresh), aliasing records. It
// reports whether records alias b; if not, req was decoded by
// proto.Unmarshal (or err says why not).
func unmarshalProduceRequest(b []byte, req *pb.ProduceRequest) (bool, error) {
	if decodeProduceRequest(b, req) {
		return true, nil
	}
	proto.Reset(req)
	return false, proto.Unmarshal(b, req)
}

func decodeProduceRequest(b []byte, req *pb.ProduceRequest) bool {
	d := decoder{b: b, ok: true}
	for d.ok && len(d.b) > 0 {
		switch num, typ := d.tag(); num {
		case produceReqAcks:
			req.Acks = int32(d.varint(typ))
		case produceReqTimeoutMs:
			req.TimeoutMs = int32(d.varint(typ))
		case produceReqPartitions:
			pd := &pb.ProducePartitionData{}
			if !decodeProducePartition(d.bytes(typ), pd) {
				return false
			}
			req.Partitions = append(req.Partitions, pd)
		default:
			return false
		}
	}
	return d.ok
}

func decodeProducePartition(b []byte, pd *pb.ProducePartitionData) bool {
	d := decoder{b: b, ok: true}
	for d.ok && len(d.b) > 0 {
		switch num, typ := d.tag(); num {
		case producePartTopic:
			pd.Topic = d.str(typ)
		case producePartPartition:
			pd.Partition = int32(d.varint(typ))
		case producePartRecords:
			pd.Records = alias(d.bytes(typ))
		default:
			return false
		}
	}
	return d.ok
}

// unmarshalFetchResponse is unmarshalProduceRequest for FetchResponse.
func unmarshalFetchResponse(b []byte, resp *pb.FetchResponse) (bool, error) {
	if decodeFetchResponse(b, resp) {
		return true, nil
	}
	proto.Reset(resp)
	return false, proto.Unmarshal(b, resp)
}

func decodeFetchResponse(b []byte, resp *pb.FetchResponse) bool {
	d := decoder{b: b, ok: true}
	for d.ok && len(d.b) > 0 {
		switch num, typ := d.tag(); num {
		case fetchRespPartitions:
			pr := &pb.FetchPartitionResponse{}
			if !decodeFetchPartition(d.bytes(typ), pr) {
				return false
			}
			resp.Partitions = append(resp.Partitions, pr)
		default:
			return false
		}
	}
	return d.ok
}

func decodeFetchPartition(b []byte, pr *pb.FetchPartitionResponse) bool {
	d := decoder{b: b, ok: true}
	for d.ok && len(d.b) > 0 {
		switch num, typ := d.tag(); num {
		case fetchPartTopic:
			pr.Topic = d.str(typ)
		case fetchPartPartition:
			pr.Partition = int32(d.varint(typ))
		case fetchPartError:
			pr.Error = pb.ErrorCode(int32(d.varint(typ)))
		case fetchPartErrorMessage:
			pr.ErrorMessage = d.str(typ)
		case fetchPartLeaderEpoch:
			pr.LeaderEpoch = int32(d.varint(typ))
		case fetchPartHighWatermark:
			pr.HighWatermark = int64(d.varint(typ))
		case fetchPartLogStartOffset:
			pr.LogStartOffset = int64(d.varint(typ))
		case fetchPartLogEndOffset:
			pr.LogEndOffset = int64(d.varint(typ))
		case fetchPartDivergingEpoch:
			// A repeated embedded message merges into the first.
			if pr.DivergingEpoch == nil {
				pr.DivergingEpoch = &pb.EpochEndOffset{}
			}
			if !decodeEpochEndOffset(d.bytes(typ), pr.DivergingEpoch) {
				return false
			}
		case fetchPartTruncationOffset:
			v := int64(d.varint(typ))
			pr.TruncationOffset = &v
		case fetchPartRecords:
			pr.Records = alias(d.bytes(typ))
		case fetchPartLeaderID:
			pr.LeaderId = int32(d.varint(typ))
		default:
			return false
		}
	}
	return d.ok
}

func decodeEpochEndOffset(b []byte, e *pb.EpochEndOffset) bool {
	d := decoder{b: b, ok: true}
	for d.ok && len(d.b) > 0 {
		switch num, typ := d.tag(); num {
		case epochEndOffsetEpoch:
			e.Epoch = int32(d.varint(typ))
		case epochEndOffsetEndOffset:
			e.EndOffset = int64(d.varint(typ))
		default:
			return false
		}
	}
	return d.ok
}
