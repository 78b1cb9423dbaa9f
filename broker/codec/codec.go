// Package codec is the gRPC codec of the broker's data path: protobuf on
// the wire, byte for byte what the proto codec sends, but the record bytes
// of produce requests and fetch responses are not copied by the protobuf
// runtime.
//
// The proto codec copies every record byte twice more than the transport
// does: Unmarshal copies a bytes field out of the (materialized) receive
// buffer, and Marshal copies it into the send buffer. For ProduceRequest
// and FetchResponse this package decodes record bytes as aliases of one
// pooled receive buffer, and encodes them as their own mem.Buffer between
// the small encoded fields, so gRPC writes them straight from the caller's
// buffer. Everything else (and any message with fields this package does
// not know) goes through the proto codec.
//
// Aliased buffers have owners: Server holds a ProduceRequest's buffer until
// Server.Release; a Call holds a FetchResponse's buffer until Call.Release.
package codec

import (
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Name is the codec name: the proto codec's, as the wire format is the same.
const Name = proto.Name

func protoCodec() encoding.CodecV2 { return encoding.GetCodecV2(proto.Name) }

// materialize copies data into one buffer from pool, which the caller owns
// (and may write to) until it puts it back.
func materialize(data mem.BufferSlice, pool mem.BufferPool) *[]byte {
	buf := pool.Get(data.Len())
	data.CopyTo(*buf)
	return buf
}

// Server is the codec of a broker's gRPC server (grpc.ForceServerCodecV2).
//
// A ProduceRequest's records alias a pooled receive buffer that the
// request owns until Release(req); the broker writes into it (the log
// stamps offsets in place). A FetchResponse's records must be buffers from
// pool that only that response holds: Marshal hands them to gRPC, which
// returns them to pool once written.
type Server struct {
	pool mem.BufferPool
	base encoding.CodecV2

	mu   sync.Mutex
	held map[*pb.ProduceRequest]*[]byte
}

// NewServer returns a server codec using pool for receive buffers and for
// returning fetch record buffers.
func NewServer(pool mem.BufferPool) *Server {
	return &Server{pool: pool, base: protoCodec(), held: map[*pb.ProduceRequest]*[]byte{}}
}

// Name implements encoding.CodecV2.
func (c *Server) Name() string { return Name }

// Marshal implements encoding.CodecV2.
func (c *Server) Marshal(v any) (mem.BufferSlice, error) {
	if resp, ok := v.(*pb.FetchResponse); ok {
		if out, ok := marshalFetchResponse(resp, c.pool); ok {
			return out, nil
		}
		out, err := c.base.Marshal(v)
		releaseFetchRecords(resp, c.pool)
		return out, err
	}
	return c.base.Marshal(v)
}

// Unmarshal implements encoding.CodecV2.
func (c *Server) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*pb.ProduceRequest)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := materialize(data, c.pool)
	aliased, err := unmarshalProduceRequest(*buf, req)
	if err != nil || !aliased {
		c.pool.Put(buf)
		return err
	}
	c.mu.Lock()
	c.held[req] = buf
	c.mu.Unlock()
	return nil
}

// Release returns the receive buffer req's records alias to the pool; req's
// records must not be used afterwards. A no-op for requests this codec did
// not decode.
func (c *Server) Release(req *pb.ProduceRequest) {
	c.mu.Lock()
	buf, ok := c.held[req]
	delete(c.held, req)
	c.mu.Unlock()
	if ok {
		for _, pd := range req.GetPartitions() {
			pd.Records = nil
		}
		c.pool.Put(buf)
	}
}

// Held is the number of requests whose buffers are not released (tests).
func (c *Server) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

// releaseFetchRecords puts resp's record buffers back into pool.
func releaseFetchRecords(resp *pb.FetchResponse, pool mem.BufferPool) {
	for _, pr := range resp.GetPartitions() {
		if r := pr.GetRecords(); cap(r) > 0 {
			pool.Put(&r)
			pr.Records = nil
		}
	}
}

// Call is a codec for one client call (grpc.ForceCodecV2 as a call
// option): ProduceRequest records are sent from the caller's buffer, which
// must stay unchanged until the call returns, and FetchResponse records
// alias a pooled buffer the Call holds until Release. A Call may be reused
// after Release, one call at a time.
type Call struct {
	pool mem.BufferPool
	base encoding.CodecV2
	bufs []*[]byte
}

// NewCall returns a call codec taking receive buffers from pool.
func NewCall(pool mem.BufferPool) *Call { return &Call{pool: pool, base: protoCodec()} }

// Name implements encoding.CodecV2.
func (c *Call) Name() string { return Name }

// Marshal implements encoding.CodecV2.
func (c *Call) Marshal(v any) (mem.BufferSlice, error) {
	if req, ok := v.(*pb.ProduceRequest); ok {
		if out, ok := marshalProduceRequest(req); ok {
			return out, nil
		}
	}
	return c.base.Marshal(v)
}

// Unmarshal implements encoding.CodecV2.
func (c *Call) Unmarshal(data mem.BufferSlice, v any) error {
	resp, ok := v.(*pb.FetchResponse)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := materialize(data, c.pool)
	aliased, err := unmarshalFetchResponse(*buf, resp)
	if err != nil || !aliased {
		c.pool.Put(buf)
		return err
	}
	c.bufs = append(c.bufs, buf)
	return nil
}

// Release returns the buffers of the responses decoded since the last
// Release; their records must not be used afterwards.
func (c *Call) Release() {
	for i, b := range c.bufs {
		c.pool.Put(b)
		c.bufs[i] = nil
	}
	c.bufs = c.bufs[:0]
}
