package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/scram"
)

// fakeBackend answers every partition NONE at offset 0, counts produce
// calls, and gives producer ids 1000, 1001, ... (pidCode set: refuses
// InitProducerId with it).
type fakeBackend struct {
	produces atomic.Int32
	pids     atomic.Int64
	pidCode  atomic.Int32 // a pb.ErrorCode
}

func (f *fakeBackend) InitProducerId(context.Context, *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	if code := pb.ErrorCode(f.pidCode.Load()); code != pb.ErrorCode_ERROR_CODE_NONE {
		return &pb.InitProducerIdResponse{Error: code, ErrorMessage: "no block", ProducerId: -1, ProducerEpoch: -1}, nil
	}
	return &pb.InitProducerIdResponse{ProducerId: 1000 + f.pids.Add(1) - 1}, nil
}

func (f *fakeBackend) StartProduce(req *pb.ProduceRequest) func(context.Context) (*pb.ProduceResponse, error) {
	f.produces.Add(1)
	resp := &pb.ProduceResponse{}
	for _, p := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{Topic: p.GetTopic(), Partition: p.GetPartition()})
	}
	return func(context.Context) (*pb.ProduceResponse, error) { return resp, nil }
}

func (f *fakeBackend) Fetch(_ context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	resp := &pb.FetchResponse{}
	for _, p := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, &pb.FetchPartitionResponse{Topic: p.GetTopic(), Partition: p.GetPartition()})
	}
	return resp, nil
}

func (f *fakeBackend) ListOffsets(context.Context, *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	return &pb.ListOffsetsResponse{}, nil
}

func (f *fakeBackend) OffsetForLeaderEpoch(context.Context, *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	return &pb.OffsetForLeaderEpochResponse{}, nil
}

func (f *fakeBackend) TopicName(string) (string, bool) { return "", false }

func (f *fakeBackend) Metadata(context.Context, *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	return &pb.MetadataResponse{ClusterId: "c", Brokers: []*pb.MetadataBroker{{Id: 1, KafkaHost: "h", KafkaPort: 9092}, {Id: 2}}}, nil
}

// countingObserver counts what the server reports.
type countingObserver struct {
	mu       sync.Mutex
	conns    int
	requests map[string]int
	closed   map[string]int
}

func (o *countingObserver) ObserveKafkaConnections(n int) { o.mu.Lock(); o.conns = n; o.mu.Unlock() }
func (o *countingObserver) ObserveKafkaRequest(api string, _ time.Duration) {
	o.mu.Lock()
	o.requests[api]++
	o.mu.Unlock()
}
func (o *countingObserver) ObserveKafkaClosed(reason string) {
	o.mu.Lock()
	o.closed[reason]++
	o.mu.Unlock()
}

// startServer serves a fakeBackend on a loopback listener.
func startServer(t *testing.T, cfg Config) (*Server, *fakeBackend, string) {
	t.Helper()
	fb := &fakeBackend{}
	s, addr := serveBackend(t, cfg, fb)
	return s, fb, addr
}

// serveBackend serves b on a loopback listener until the test ends.
func serveBackend(t *testing.T, cfg Config, b Backend) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	s := NewServer(cfg, b, nil)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

type client struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes req at its version with a request header.
func (c *client) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	if _, err := c.c.Write(f.AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatal(err)
	}
	return c.corr
}

// raw writes bytes as they are.
func (c *client) raw(b []byte) {
	c.t.Helper()
	if _, err := c.c.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response into resp (at version v), checking the
// correlation id; flexible tells whether the header has a tag section.
func (c *client) recv(corr int32, resp kmsg.Response, flexibleHeader bool) {
	c.t.Helper()
	body, err := c.frame()
	if err != nil {
		c.t.Fatalf("reading response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	if flexibleHeader {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decoding %T: %v", resp, err)
	}
}

func (c *client) frame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.r, body)
	return body, err
}

// closed reports whether the server closed the connection.
func (c *client) closed() bool {
	_, err := c.frame()
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// TestApiVersions: the advertised list is the table's, and a version the
// server does not serve is answered in v0 with UNSUPPORTED_VERSION and the
// list (KIP-511), so the client can pick one.
func TestApiVersions(t *testing.T) {
	s, _, addr := startServer(t, Config{BrokerID: 1})
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	c.recv(c.send(req), resp, false)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(s.Versions()) {
		t.Fatalf("ApiVersions v3: error %d, %d keys, want %d", resp.ErrorCode, len(resp.ApiKeys), len(s.Versions()))
	}

	for _, k := range resp.ApiKeys {
		if k.ApiKey == 0 && (k.MinVersion != 0 || k.MaxVersion != 13) {
			t.Errorf("Produce advertised %d..%d, want 0..13 (KAFKA-18659)", k.MinVersion, k.MaxVersion)
		}
	}
	// Produce v2 (the old message format) is advertised but refused.
	p2 := kmsg.NewPtrProduceRequest()
	p2.SetVersion(2)
	p2.Acks = 1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pt.Partitions = append(pt.Partitions, kmsg.NewProduceRequestTopicPartition())
	p2.Topics = append(p2.Topics, pt)
	presp := kmsg.NewPtrProduceResponse()
	presp.SetVersion(2)
	c.recv(c.send(p2), presp, false)
	if err := kerr.ErrorForCode(presp.Topics[0].Partitions[0].ErrorCode); err != kerr.UnsupportedVersion {
		t.Fatalf("Produce v2: %v, want UNSUPPORTED_VERSION", err)
	}

	hi := &pinned{Request: kmsg.NewPtrApiVersionsRequest(), v: 99}
	resp0 := kmsg.NewPtrApiVersionsResponse()
	resp0.SetVersion(0)
	c.recv(c.send(hi), resp0, false)
	if kerr.ErrorForCode(resp0.ErrorCode) != kerr.UnsupportedVersion || len(resp0.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v99: %v with %d keys, want UNSUPPORTED_VERSION and the list", kerr.ErrorForCode(resp0.ErrorCode), len(resp0.ApiKeys))
	}
}

// pinned is a request whose header carries version v whatever kmsg would
// encode; its body is the request's at version 0.
type pinned struct {
	kmsg.Request
	v int16
}

func (p *pinned) GetVersion() int16 { return p.v }
func (p *pinned) IsFlexible() bool  { return false }

// TestAcksZeroGetsNoAnswer: an acks=0 produce is handled (the backend sees
// it) but answered with nothing; the next request's answer is the next
// frame on the connection.
func TestAcksZeroGetsNoAnswer(t *testing.T) {
	_, fb, addr := startServer(t, Config{BrokerID: 1})
	c := dial(t, addr)
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(7)
	p.Acks = 0
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte{}
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	c.send(p)
	m := kmsg.NewPtrMetadataRequest()
	m.SetVersion(9)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(9)
	c.recv(c.send(m), resp, true)
	if fb.produces.Load() != 1 {
		t.Fatalf("backend saw %d produces, want 1", fb.produces.Load())
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "h" || resp.ControllerID != 1 {
		t.Fatalf("metadata brokers %+v controller %d: want only broker 1 (the one with a Kafka listener), controller 1", resp.Brokers, resp.ControllerID)
	}
}

// TestBadFramesCloseOnlyTheirConnection: a frame above
// socket.request.max.bytes, a negative or too short size, an unknown API
// key, a version kmsg cannot decode, and a truncated body each close their
// own connection; another connection keeps being served, and nothing
// panics.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	obs := &countingObserver{requests: map[string]int{}, closed: map[string]int{}}
	_, _, addr := startServer(t, Config{BrokerID: 1, MaxRequestBytes: 1 << 10, Observer: obs})
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 1)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	bad := map[string][]byte{
		"over max":          binary.BigEndian.AppendUint32(nil, 2<<10),
		"negative size":     binary.BigEndian.AppendUint32(nil, 0x80000000),
		"short header":      frame([]byte{0, 3, 0}),
		"unknown key":       frame(header(9999, 0)),
		"unserved key":      frame(header(19, 0)), // CreateTopics: not served yet
		"undecodable":       frame(header(3, 999)),
		"truncated body":    frame(append(header(3, 9), 0, 0, 0, 9)),
		"client id overrun": frame(append(header(3, 9)[:8], 0x7f, 0xff)),
	}
	good := dial(t, addr)
	for name, b := range bad {
		c := dial(t, addr)
		c.raw(b)
		if !c.closed() {
			t.Errorf("%s: connection not closed", name)
		}
		m := kmsg.NewPtrMetadataRequest()
		m.SetVersion(12)
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(12)
		good.recv(good.send(m), resp, true)
	}
	// A client that goes away mid-frame, or resets the connection, sent
	// nothing malformed: not counted.
	for _, reset := range []bool{false, true} {
		c := dial(t, addr)
		c.raw(append(binary.BigEndian.AppendUint32(nil, 100), 1, 2, 3))
		if reset {
			c.c.(*net.TCPConn).SetLinger(0) // close with RST
		}
		c.c.Close()
		m := kmsg.NewPtrMetadataRequest()
		m.SetVersion(12)
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(12)
		good.recv(good.send(m), resp, true)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		obs.mu.Lock()
		conns := obs.conns
		obs.mu.Unlock()
		if conns == 1 {
			break // the server has dropped both
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want the good one only", conns)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	// The over-max size is oversized; the negative size, like the rest,
	// malformed.
	if obs.closed["oversized"] != 1 || obs.closed["malformed"] != len(bad)-1 || obs.requests["Metadata"] != len(bad)+2 {
		t.Errorf("observed closed %v, requests %v; want 1 oversized, %d malformed, %d Metadata", obs.closed, obs.requests, len(bad)-1, len(bad)+2)
	}
	if obs.conns < 1 {
		t.Errorf("observed %d open connections, want the good one at least", obs.conns)
	}
}

// FuzzFrame: any frame body gives an answer, nothing, or an error (the
// connection closes); never a panic.
func FuzzFrame(f *testing.F) {
	fb := &fakeBackend{}
	adm := &fakeAdmin{}
	for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
		c, err := scram.NewCredential(m, "pw", []byte("salt of alice"), scram.MinIterations)
		if err != nil {
			f.Fatal(err)
		}
		adm.scram.put("alice", c)
	}
	s := NewServer(Config{BrokerID: 1, Logger: slog.New(slog.DiscardHandler), SASL: &SASL{
		Mechanisms:      []string{MechanismSCRAMSHA512, MechanismSCRAMSHA256, MechanismPlain},
		Lookup:          adm.scram.lookup,
		PlainWithoutTLS: true,
		// Sessions end, so re-authentication's states are reachable.
		MaxSessionLifetime: time.Minute,
	}}, fb, adm)
	// A seed per API the listener serves (admin, ACL, SCRAM and SASL ones
	// included), at its lowest and highest version, and the start of a
	// SASL exchange, so the mutations start from every request shape.
	frame := func(req kmsg.Request, v int16) []byte {
		req.SetVersion(v)
		b := kmsg.NewRequestFormatter().AppendRequest(nil, req, 7)
		return b[4:]
	}
	for key, a := range s.apis {
		for _, v := range []int16{a.min, a.max} {
			f.Add(conversation(frame(kmsg.RequestForKey(key), v)))
		}
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = MechanismPlain
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00alice\x00pw")
	f.Add(conversation(frame(hs, 1), frame(auth, 2), frame(kmsg.NewPtrMetadataRequest(), 12)))
	f.Add(conversation(frame(hs, 1), frame(auth, 2), frame(hs, 1), frame(auth, 2))) // a re-authentication
	hs.Mechanism = MechanismSCRAMSHA256
	auth.SASLAuthBytes = []byte("n,,n=alice,r=abcdefgh")
	f.Add(conversation(frame(hs, 1), frame(auth, 1), frame(auth, 1)))

	// Each input is one connection: up to 4 frames, admitted and handled
	// in turn with the connection's SASL state, as serveConn does.
	f.Fuzz(func(t *testing.T, in []byte) {
		sc := &saslConn{cfg: s.cfg.SASL, offered: s.cfg.SASL.Mechanisms, deadline: time.Now().Add(time.Minute)}
		for n := 0; n < 4 && len(in) >= 2; n++ {
			size := min(int(binary.BigEndian.Uint16(in)), len(in)-2)
			frame := in[2 : 2+size]
			in = in[2+size:]
			if len(frame) < 8 {
				return // readFrame refuses these
			}
			h, body, closed, _ := s.admit(frame, sc)
			if closed != "" {
				return // serveConn closes the connection
			}
			h.sasl = sc
			finish, err := s.handle(t.Context(), h, body)
			if err != nil {
				return
			}
			if resp := finish(); resp != nil {
				_ = appendResponse(nil, h, resp)
			}
			if sc.closeReason != "" {
				return // serveConn closes the connection
			}
		}
		adm.take() // keep the fake's record small
	})
}

// conversation joins frames as FuzzFrame reads them: each after its
// 2-byte length.
func conversation(frames ...[]byte) []byte {
	var out []byte
	for _, fr := range frames {
		out = binary.BigEndian.AppendUint16(out, uint16(len(fr)))
		out = append(out, fr...)
	}
	return out
}

// blockingBackend's produce waits for its request's context (a produce
// waiting for acks that will not come: the broker is stopping).
type blockingBackend struct {
	fakeBackend
	entered chan struct{}
}

func (b *blockingBackend) StartProduce(*pb.ProduceRequest) func(context.Context) (*pb.ProduceResponse, error) {
	close(b.entered)
	return func(ctx context.Context) (*pb.ProduceResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

// TestCloseEndsRequestsInFlight: Close ends the contexts of the requests
// being handled, so a produce waiting for acks does not hold the broker's
// stop for its timeout (30 s and more).
func TestCloseEndsRequestsInFlight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bb := &blockingBackend{entered: make(chan struct{})}
	s := NewServer(Config{Logger: slog.New(slog.DiscardHandler)}, bb, nil)
	go s.Serve(ln)
	c := dial(t, ln.Addr().String())
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(7)
	p.Acks, p.TimeoutMillis = -1, 60_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pt.Partitions = append(pt.Partitions, kmsg.NewProduceRequestTopicPartition())
	p.Topics = append(p.Topics, pt)
	c.send(p)
	<-bb.entered
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a produce in flight (its 60 s timeout)")
	}
}
