package codec

import (
	"bytes"
	"sync"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// countingPool is a BufferPool that records what is taken and returned.
type countingPool struct {
	mu       sync.Mutex
	out      map[*byte]bool // first byte of each buffer handed out
	gets     int
	puts     int
	foreign  int // puts of buffers this pool never handed out
	doubled  int // puts of buffers already returned
	returned map[*byte]bool
}

func newCountingPool() *countingPool {
	return &countingPool{out: map[*byte]bool{}, returned: map[*byte]bool{}}
}

func (p *countingPool) Get(n int) *[]byte {
	b := make([]byte, n, n+64)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gets++
	p.out[&b[:1][0]] = true
	return &b
}

func (p *countingPool) Put(b *[]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.puts++
	key := &(*b)[:1][0]
	switch {
	case !p.out[key]:
		p.foreign++
	case p.returned[key]:
		p.doubled++
	}
	p.returned[key] = true
}

func (p *countingPool) check(t interface {
	Helper()
	Fatalf(string, ...any)
}) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gets != p.puts || p.foreign != 0 || p.doubled != 0 {
		t.Fatalf("pool: %d gets, %d puts, %d foreign, %d double puts", p.gets, p.puts, p.foreign, p.doubled)
	}
}

func genBytes(t *rapid.T, label string) []byte {
	return rapid.SliceOfN(rapid.Byte(), 0, 3000).Draw(t, label)
}

func genInt32(t *rapid.T, label string) int32 {
	return rapid.OneOf(rapid.Just(int32(0)), rapid.Int32Range(-3, 3), rapid.Int32()).Draw(t, label)
}

func genInt64(t *rapid.T, label string) int64 {
	return rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(-3, 3), rapid.Int64()).Draw(t, label)
}

func genString(t *rapid.T, label string) string {
	return rapid.OneOf(rapid.Just(""), rapid.StringN(0, 20, -1)).Draw(t, label)
}

func genProduceRequest(t *rapid.T) *pb.ProduceRequest {
	req := &pb.ProduceRequest{Acks: genInt32(t, "acks"), TimeoutMs: genInt32(t, "timeout")}
	for range rapid.IntRange(0, 4).Draw(t, "partitions") {
		req.Partitions = append(req.Partitions, &pb.ProducePartitionData{
			Topic: genString(t, "topic"), Partition: genInt32(t, "partition"), Records: genBytes(t, "records"),
		})
	}
	return req
}

func genFetchResponse(t *rapid.T) *pb.FetchResponse {
	resp := &pb.FetchResponse{}
	for range rapid.IntRange(0, 4).Draw(t, "partitions") {
		pr := &pb.FetchPartitionResponse{
			Topic: genString(t, "topic"), Partition: genInt32(t, "partition"),
			Error:        pb.ErrorCode(genInt32(t, "error")),
			ErrorMessage: genString(t, "message"), LeaderEpoch: genInt32(t, "le"),
			HighWatermark: genInt64(t, "hw"), LogStartOffset: genInt64(t, "ls"), LogEndOffset: genInt64(t, "leo"),
			Records: genBytes(t, "records"), LeaderId: genInt32(t, "leader"),
		}
		if rapid.Bool().Draw(t, "diverging") {
			pr.DivergingEpoch = &pb.EpochEndOffset{Epoch: genInt32(t, "epoch"), EndOffset: genInt64(t, "end")}
		}
		if rapid.Bool().Draw(t, "truncation") {
			v := genInt64(t, "trunc")
			pr.TruncationOffset = &v
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return resp
}

// pooled copies records into buffers from pool, as the fetch handler's
// reads do (sometimes an empty one).
func pooled(t *rapid.T, resp *pb.FetchResponse, pool mem.BufferPool) *pb.FetchResponse {
	c := proto.Clone(resp).(*pb.FetchResponse)
	for _, pr := range c.Partitions {
		if len(pr.Records) > 0 || rapid.Bool().Draw(t, "empty pooled") {
			b := pool.Get(len(pr.Records))
			copy(*b, pr.Records)
			pr.Records = *b
		}
	}
	return c
}

func TestMarshalMatchesProto(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := genProduceRequest(t)
		want, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		out, err := NewCall(newCountingPool()).Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("ProduceRequest encoding differs:\n got %x\nwant %x", got, want)
		}

		resp := genFetchResponse(t)
		want, err = proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		pool := newCountingPool()
		out, err = NewServer(pool).Marshal(pooled(t, resp, pool))
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("FetchResponse encoding differs:\n got %x\nwant %x", got, want)
		}
		out.Free() // what gRPC does once written: every record buffer goes back
		pool.check(t)
	})
}

func TestUnmarshalMatchesProto(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := genProduceRequest(t)
		wire, _ := proto.Marshal(req)
		var got pb.ProduceRequest
		aliased, err := unmarshalProduceRequest(wire, &got)
		if err != nil || !aliased {
			t.Fatalf("aliased %v, err %v", aliased, err)
		}
		if !proto.Equal(&got, req) {
			t.Fatalf("decoded %v, want %v", &got, req)
		}

		resp := genFetchResponse(t)
		wire, _ = proto.Marshal(resp)
		var gotResp pb.FetchResponse
		aliased, err = unmarshalFetchResponse(wire, &gotResp)
		if err != nil || !aliased {
			t.Fatalf("aliased %v, err %v", aliased, err)
		}
		if !proto.Equal(&gotResp, resp) {
			t.Fatalf("decoded %v, want %v", &gotResp, resp)
		}
	})
}

// TestUnmarshalArbitraryBytes: on any input the decoders fail exactly when
// proto.Unmarshal fails and otherwise agree with it (unknown fields, wire
// type mismatches and bad UTF-8 fall back to it).
func TestUnmarshalArbitraryBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var wire []byte
		if rapid.Bool().Draw(t, "valid start") {
			wire, _ = proto.Marshal(genFetchResponse(t))
			if rapid.Bool().Draw(t, "as produce") {
				wire, _ = proto.Marshal(genProduceRequest(t))
			}
		}
		for range rapid.IntRange(0, 3).Draw(t, "edits") {
			switch rapid.IntRange(0, 3).Draw(t, "edit") {
			case 0: // flip a byte
				if len(wire) > 0 {
					i := rapid.IntRange(0, len(wire)-1).Draw(t, "at")
					wire[i] ^= rapid.Byte().Draw(t, "xor")
				}
			case 1: // truncate
				wire = wire[:rapid.IntRange(0, len(wire)).Draw(t, "len")]
			case 2: // an unknown or mistyped field
				num := protowire.Number(rapid.IntRange(1, 14).Draw(t, "num"))
				wire = protowire.AppendTag(wire, num, protowire.VarintType)
				wire = protowire.AppendVarint(wire, rapid.Uint64().Draw(t, "v"))
			case 3: // a nested partition with arbitrary content
				wire = protowire.AppendTag(wire, 1, protowire.BytesType)
				wire = protowire.AppendBytes(wire, rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "nested"))
			}
		}
		var want, got pb.FetchResponse
		wantErr := proto.Unmarshal(wire, &want)
		_, gotErr := unmarshalFetchResponse(wire, &got)
		if (wantErr == nil) != (gotErr == nil) || (wantErr == nil && !proto.Equal(&got, &want)) {
			t.Fatalf("FetchResponse: got %v (%v), want %v (%v)", &got, gotErr, &want, wantErr)
		}
		var wantReq, gotReq pb.ProduceRequest
		wantErr = proto.Unmarshal(wire, &wantReq)
		_, gotErr = unmarshalProduceRequest(wire, &gotReq)
		if (wantErr == nil) != (gotErr == nil) || (wantErr == nil && !proto.Equal(&gotReq, &wantReq)) {
			t.Fatalf("ProduceRequest: got %v (%v), want %v (%v)", &gotReq, gotErr, &wantReq, wantErr)
		}
	})
}

func TestInvalidUTF8FallsBack(t *testing.T) {
	wire := protowire.AppendTag(nil, produceReqPartitions, protowire.BytesType)
	part := protowire.AppendTag(nil, producePartTopic, protowire.BytesType)
	part = protowire.AppendBytes(part, []byte{0xff, 0xfe})
	wire = protowire.AppendBytes(wire, part)
	var req pb.ProduceRequest
	if _, err := unmarshalProduceRequest(wire, &req); err == nil {
		t.Fatal("invalid UTF-8 topic decoded without error")
	}
}

// TestServerOwnership: a produce request's records alias one receive buffer
// until Release; fetch records go back to the pool once gRPC frees the
// encoding; nothing is returned twice or leaked.
func TestServerOwnership(t *testing.T) {
	pool := newCountingPool()
	c := NewServer(pool)
	in := &pb.ProduceRequest{Acks: -1, Partitions: []*pb.ProducePartitionData{
		{Topic: "t", Partition: 1, Records: bytes.Repeat([]byte{7}, 5000)},
		{Topic: "t", Partition: 2, Records: []byte{1, 2, 3}},
	}}
	wire, _ := proto.Marshal(in)
	orig := bytes.Clone(wire)
	// Split the message across buffers as the transport's frames do.
	data := mem.BufferSlice{mem.SliceBuffer(wire[:100]), mem.SliceBuffer(wire[100:])}
	var req pb.ProduceRequest
	if err := c.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&req, in) {
		t.Fatalf("decoded %v", &req)
	}
	// The records alias one writable buffer: the log stamps them in place.
	req.Partitions[0].Records[0] = 9
	if in.Partitions[0].Records[0] != 7 || !bytes.Equal(wire, orig) {
		t.Fatal("records alias the caller's or the transport's bytes")
	}
	if c.Held() != 1 {
		t.Fatalf("held %d, want 1", c.Held())
	}
	c.Release(&req)
	c.Release(&req) // idempotent
	if c.Held() != 0 || req.Partitions[0].Records != nil {
		t.Fatal("release kept the buffer or the aliases")
	}

	// Unknown fields: decoded by proto, nothing held.
	withUnknown := protowire.AppendTag(append([]byte(nil), wire...), 9, protowire.VarintType)
	withUnknown = protowire.AppendVarint(withUnknown, 1)
	var req2 pb.ProduceRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(withUnknown)}, &req2); err != nil {
		t.Fatal(err)
	}
	if c.Held() != 0 || len(req2.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("held %d, unknown %x", c.Held(), req2.ProtoReflect().GetUnknown())
	}
	c.Release(&req2)

	resp := &pb.FetchResponse{}
	for i, n := range []int{0, 10, 70000} {
		b := pool.Get(n)
		for j := range *b {
			(*b)[j] = byte(i)
		}
		resp.Partitions = append(resp.Partitions, &pb.FetchPartitionResponse{Topic: "t", Partition: int32(i), Records: *b})
	}
	want, _ := proto.Marshal(resp)
	out, err := c.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Materialize(), want) {
		t.Fatal("fetch response encoding differs from proto")
	}
	out.Free()
	pool.check(t)
}

func TestCallRelease(t *testing.T) {
	pool := newCountingPool()
	c := NewCall(pool)
	in := &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{Topic: "t", Records: []byte("abc")}}}
	wire, _ := proto.Marshal(in)
	for range 3 {
		var resp pb.FetchResponse
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &resp); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&resp, in) {
			t.Fatalf("decoded %v", &resp)
		}
	}
	c.Release()
	pool.check(t)
	// Other messages use the proto codec.
	var req pb.FetchRequest
	wire, _ = proto.Marshal(&pb.FetchRequest{ReplicaId: 3, MaxWaitMs: 500})
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &req); err != nil || req.GetReplicaId() != 3 {
		t.Fatalf("FetchRequest: %v %v", &req, err)
	}
}
