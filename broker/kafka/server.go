package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Backend is the broker behind the listener: the methods its gRPC services
// call, with the same requests and answers (Produce in its start form).
type Backend interface {
	// StartProduce validates and appends req's batches before it returns
	// (a connection's produce requests are appended in order) and returns
	// the wait for the answer (acks=all: until replicated, refused or
	// timed out; ctx's end ends the wait, not the produce).
	StartProduce(req *pb.ProduceRequest) (wait func(ctx context.Context) (*pb.ProduceResponse, error))
	Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error)
	ListOffsets(ctx context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error)
	OffsetForLeaderEpoch(ctx context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error)
	Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error)
	InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error)
	// TopicName is the name of the topic whose id is id (twinlog's string
	// form), false if no topic has it: Fetch v13+ names topics by id.
	TopicName(id string) (string, bool)
}

// Defaults, as Kafka's.
const (
	// DefaultMaxRequestBytes is socket.request.max.bytes (100 MiB).
	DefaultMaxRequestBytes = 100 << 20
	// DefaultIdleTimeout is connections.max.idle.ms (10 minutes).
	DefaultIdleTimeout = 10 * time.Minute
	// requestTimeout bounds a request whose message carries no timeout.
	requestTimeout = 30 * time.Second
	// frameHeaderBytes is the size prefix of every frame.
	frameHeaderBytes = 4
)

// Config configures a Server.
type Config struct {
	// BrokerID is this broker's id, returned as Metadata's controller id:
	// the broker forwards admin requests to the controller, as a KRaft
	// broker does.
	BrokerID int32
	// MaxRequestBytes bounds a request frame (socket.request.max.bytes); a
	// larger size prefix closes the connection. Default
	// DefaultMaxRequestBytes.
	MaxRequestBytes int32
	// IdleTimeout closes a connection that sends nothing for that long
	// (connections.max.idle.ms). Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Logger receives connection-level events (default slog.Default()).
	Logger *slog.Logger
	// InvalidRequest is the Backend's sentinel for a request it refuses
	// as malformed (errors.Is): answered INVALID_REQUEST, other errors
	// UNKNOWN_SERVER_ERROR.
	InvalidRequest error
	// Observer receives the listener's metrics (nil: none).
	Observer Observer
	// Groups is the group coordinator behind the consumer-group APIs
	// (groups.go). nil: the group APIs are not served.
	Groups Groups
	// Authorizer decides what a connection's principal may do (authz.go;
	// nil: everything is allowed, every connection is User:ANONYMOUS).
	Authorizer Authorizer
	// SASL configures SASL authentication on the listener (sasl.go; nil:
	// none, the TLS or anonymous principal stands).
	SASL *SASL
}

// Observer receives the listener's metrics (metrics.Broker implements it).
type Observer interface {
	// ObserveKafkaConnections reports the number of open connections.
	ObserveKafkaConnections(n int)
	// ObserveKafkaRequest records one answered (or, for acks=0, handled)
	// request by API name, with its handling time.
	ObserveKafkaRequest(api string, d time.Duration)
	// ObserveKafkaClosed counts a connection the server closed on bad
	// input or inactivity: reason is oversized, malformed, idle, panic,
	// authentication (Authorizer.Principal failed; with SASL, a request
	// before authenticating, a failed or out-of-order exchange or
	// re-authentication, or no success within the idle timeout), or
	// expired (a request after the SASL session's end, KIP-368).
	ObserveKafkaClosed(reason string)
}

type nopObserver struct{}

func (nopObserver) ObserveKafkaConnections(int)               {}
func (nopObserver) ObserveKafkaRequest(string, time.Duration) {}
func (nopObserver) ObserveKafkaClosed(string)                 {}

// Server serves the Kafka protocol on the listeners given to Serve.
type Server struct {
	cfg     Config
	backend Backend
	admin   Admin
	apis    map[int16]api

	// ctx ends at Close: requests in flight (a produce waiting for its
	// acks, a long-poll fetch) end with it instead of holding Close up.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewServer returns a Server for backend; with admin nil the admin APIs
// (CreateTopics, DeleteTopics, DescribeConfigs, IncrementalAlterConfigs,
// DescribeTopicPartitions, CreateAcls, DescribeAcls, DeleteAcls,
// DescribeUserScramCredentials, AlterUserScramCredentials) are not served,
// with Config.Groups nil the group APIs, with Config.SASL nil SaslHandshake
// and SaslAuthenticate.
func NewServer(cfg Config, backend Backend, admin Admin) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.SASL != nil {
		cfg.SASL = cfg.SASL.normalize()
	}
	s := &Server{cfg: cfg, backend: backend, admin: admin, lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.apis = s.table()
	return s
}

// ErrServerClosed is Serve's answer once Close was called.
var ErrServerClosed = errors.New("kafka: server closed")

// Serve accepts connections on ln until Close, serving each on its own
// goroutine. It returns ErrServerClosed after Close, else the accept error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of file descriptors and the like: back off as
				// net/http does instead of spinning.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.cfg.Observer.ObserveKafkaConnections(len(s.conns))
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Close stops the listeners, closes every connection (a request in
// flight loses its response, as when a broker stops; its context ends)
// and waits for the connection goroutines.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// errOversized: a frame's size prefix exceeds MaxRequestBytes.
var errOversized = errors.New("frame too large")

// header is a request header (v1, or v2 with tagged fields), with the
// connection's client host, which Kafka's request context carries too.
type header struct {
	key, version  int16
	correlationID int32
	clientID      string
	// clientHost is the peer's address as Kafka reports it
	// (kafkaClientHost); serveConn sets it, it is not on the wire.
	clientHost string
	// peer is the connection's principal and IP address, for
	// authorization (authz.go); serveConn sets it.
	peer peer
	// sasl is the connection's SASL state (sasl.go), nil without
	// Config.SASL; serveConn sets it.
	sasl *saslConn
}

// headerKey is the context key of the header of the request a handler
// answers.
type headerKey struct{}

// requestHeader is the header of the request whose handler got ctx (the
// zero header outside one): JoinGroup takes its client id and host.
func requestHeader(ctx context.Context) header {
	h, _ := ctx.Value(headerKey{}).(header)
	return h
}

// serveConn reads, handles and answers frames in order until the peer
// closes, sends something it cannot parse, idles too long or the server
// closes. Requests start one at a time, in order, as Kafka processes a
// connection's requests; Produce and OffsetCommit are pipelined
// (pipeline.go): the next request starts once one of them is applied, not
// once it is replicated, and the answers still go out in order.
func (s *Server) serveConn(c net.Conn) {
	start := time.Now()
	log := s.cfg.Logger.With("remote", c.RemoteAddr().String())
	clientHost := kafkaClientHost(c.RemoteAddr())
	defer func() {
		if p := recover(); p != nil {
			// No input may panic the broker: a bug met on one connection
			// closes that connection and is logged loudly.
			log.Error("kafka: handler panicked; connection closed", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			s.cfg.Observer.ObserveKafkaClosed("panic")
		}
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.cfg.Observer.ObserveKafkaConnections(len(s.conns))
		s.mu.Unlock()
		s.wg.Done()
	}()
	p, ok := s.authenticate(c, log)
	if !ok {
		return
	}
	var sc *saslConn
	if s.cfg.SASL != nil {
		sc = s.newSASLConn(c, start)
		if p.principal != anonymousPrincipal {
			// A verified client certificate authenticates the connection
			// as SASL would: no SASL exchange is needed (a SaslAuthenticate
			// is then ILLEGAL_SASL_STATE, as after a SASL login). Kafka
			// ties each listener to one of the two; twinlog's one Kafka
			// listener accepts either (docs/spec-deviations.md).
			sc.principal = p.principal
		}
	}
	// The connection's requests end with it: an answer nobody will read
	// is neither waited for nor written.
	ctx, cancel := context.WithCancel(s.ctx)
	pipe := newPipeline(s, c, log)
	defer func() {
		cancel()
		pipe.close()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	var out []byte
	for {
		deadline, maxBytes := time.Now().Add(s.cfg.IdleTimeout), s.cfg.MaxRequestBytes
		if sc.pending() {
			// Until it authenticates, a connection has the idle timeout
			// from its start in all, and small frames.
			deadline, maxBytes = sc.deadline, min(maxBytes, maxUnauthenticatedRequestBytes)
		}
		frame, err := s.readFrame(c, r, deadline, maxBytes)
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
			case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
				// The peer went away, mid-frame or by a reset (a client
				// closing with unread data does): not its input's fault.
			case errors.Is(err, errOversized):
				s.cfg.Observer.ObserveKafkaClosed("oversized")
				log.Info("kafka: connection closed", "reason", err)
			case errors.As(err, &ne) && ne.Timeout() && sc.pending():
				s.cfg.Observer.ObserveKafkaClosed("authentication")
				log.Info("kafka: connection closed", "reason", "SASL authentication not completed within the idle timeout")
			case errors.As(err, &ne) && ne.Timeout():
				s.cfg.Observer.ObserveKafkaClosed("idle")
			default:
				s.cfg.Observer.ObserveKafkaClosed("malformed")
				log.Info("kafka: connection closed", "reason", err)
			}
			return
		}
		begin := time.Now()
		h, body, closed, why := s.admit(frame, sc)
		if closed != "" {
			s.cfg.Observer.ObserveKafkaClosed(closed)
			if closed == "malformed" {
				log.Info("kafka: connection closed", "reason", why)
			} else {
				log.Info("kafka: connection closed", "reason", why, "principal", p.principal, "api", kmsg.NameForKey(h.key), "client", h.clientID)
			}
			return
		}
		h.clientHost, h.peer, h.sasl = clientHost, p, sc
		pipelined := s.apis[h.key].start != nil
		if !pipelined && !pipe.drain() {
			return // an earlier answer could not be written
		}
		finish, err := s.handle(ctx, h, body)
		if err != nil {
			s.cfg.Observer.ObserveKafkaClosed("malformed")
			log.Info("kafka: connection closed", "reason", err, "api", kmsg.NameForKey(h.key), "version", h.version, "client", h.clientID)
			return
		}
		if pipelined {
			pipe.push(pendingAnswer{h: h, begin: begin, finish: finish})
			continue
		}
		resp := finish()
		s.cfg.Observer.ObserveKafkaRequest(kmsg.NameForKey(h.key), time.Since(begin))
		if sc != nil && sc.principal != "" && p.principal != sc.principal {
			p.principal = sc.principal // authenticated: later requests are its
			log.Debug("kafka: SASL authenticated", "principal", p.principal, "mechanism", sc.mechanism)
		}
		if resp == nil {
			continue // acks=0, a superseded JoinGroup or SyncGroup
		}
		out = appendResponse(out[:0], h, resp)
		if _, err := c.Write(out); err != nil {
			return
		}
		if sc != nil && sc.closeReason != "" {
			// A failed or out-of-order SASL exchange: answered, then closed.
			s.cfg.Observer.ObserveKafkaClosed("authentication")
			attrs := []any{"reason", sc.closeReason, "api", kmsg.NameForKey(h.key), "client", h.clientID}
			if sc.closeErr != nil {
				attrs = append(attrs, "err", sc.closeErr) // the internal reason, never sent
			}
			log.Info("kafka: connection closed", attrs...)
			return
		}
		if cap(out) > 1<<20 {
			out = nil // do not pin a large fetch's buffer on an idle connection
		}
	}
}

// admit parses a request frame's header and applies the connection's
// gates, in order: until SASL authentication completes only the APIs
// allowed before it (beforeAuthentication); a malformed header; a SASL
// session that refuses the request (saslConn.refuses: re-authenticating,
// expired). A request it does not admit closes the connection: closed is
// the reason counted (Observer.ObserveKafkaClosed), why the one logged.
func (s *Server) admit(frame []byte, sc *saslConn) (h header, body []byte, closed string, why any) {
	h, body, err := parseHeader(frame, s.apis)
	if sc.pending() && !beforeAuthentication(h.key) {
		return h, nil, "authentication", "request before SASL authentication"
	}
	if err != nil {
		return h, nil, "malformed", err
	}
	if reason, why := sc.refuses(h.key); reason != "" {
		return h, nil, reason, why
	}
	return h, body, "", nil
}

// authenticate finds the connection's peer before its first request: its
// principal (Authorizer.Principal, within the idle timeout; without an
// Authorizer, User:ANONYMOUS) and its IP address. A failure closes the
// connection, counted and logged (without a principal: there is none).
func (s *Server) authenticate(c net.Conn, log *slog.Logger) (peer, bool) {
	p := peer{principal: anonymousPrincipal, host: peerHost(c.RemoteAddr())}
	if s.cfg.Authorizer == nil {
		return p, true
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.IdleTimeout)
	defer cancel()
	principal, err := s.cfg.Authorizer.Principal(ctx, c)
	if err != nil {
		if s.ctx.Err() == nil { // not the server closing
			s.cfg.Observer.ObserveKafkaClosed("authentication")
			log.Info("kafka: connection closed", "reason", "authentication failed", "err", err)
		}
		return p, false
	}
	p.principal = principal
	return p, true
}

// readFrame reads one size-prefixed frame of at most maxBytes by deadline
// (the idle timeout from now, once authenticated): the deadline applies to
// the whole frame, so a peer that trickles bytes cannot hold the
// connection.
func (s *Server) readFrame(c net.Conn, r *bufio.Reader, deadline time.Time, maxBytes int32) ([]byte, error) {
	if err := c.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	var size [frameHeaderBytes]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	switch {
	case n < 8: // key, version, correlation id, client id length
		return nil, fmt.Errorf("frame of %d bytes is shorter than a request header", n)
	case n > maxBytes && maxBytes < s.cfg.MaxRequestBytes:
		return nil, fmt.Errorf("%w: %d bytes before SASL authentication, the most is %d", errOversized, n, maxBytes)
	case n > maxBytes:
		return nil, fmt.Errorf("%w: %d bytes, socket.request.max.bytes is %d", errOversized, n, maxBytes)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, fmt.Errorf("reading a %d-byte frame: %w", n, err)
	}
	return frame, nil
}

// parseHeader splits a frame into its request header and body. The
// header's form depends on whether the request is flexible at its version,
// which only the API's own message knows: an API outside apis, or a
// version kmsg cannot decode, is an error (the connection closes).
func parseHeader(frame []byte, apis map[int16]api) (header, []byte, error) {
	be := binary.BigEndian
	h := header{key: int16(be.Uint16(frame)), version: int16(be.Uint16(frame[2:])), correlationID: int32(be.Uint32(frame[4:]))}
	rest := frame[8:]
	if len(rest) < 2 {
		return h, nil, errors.New("request header without a client id")
	}
	n := int16(be.Uint16(rest))
	rest = rest[2:]
	if n > 0 {
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("client id of %d bytes in a %d-byte header", n, len(rest))
		}
		h.clientID, rest = string(rest[:n]), rest[n:]
	} else if n < -1 {
		return h, nil, fmt.Errorf("client id length %d", n)
	}
	if _, ok := apis[h.key]; !ok {
		return h, nil, fmt.Errorf("API key %d (%s) is not served", h.key, kmsg.NameForKey(h.key))
	}
	req := kmsg.RequestForKey(h.key)
	if h.version < 0 || h.version > req.MaxVersion() {
		if h.key == apiVersionsKey {
			return h, rest, nil // answered UNSUPPORTED_VERSION in v0 (KIP-511)
		}
		return h, nil, fmt.Errorf("%s version %d cannot be decoded", kmsg.NameForKey(h.key), h.version)
	}
	req.SetVersion(h.version)
	// ApiVersions v3+ is flexible but its header stays v1 only in the
	// response; the request header is v2 like every flexible request.
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return h, nil, fmt.Errorf("request header tags: %w", err)
		}
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section (KIP-482).
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errors.New("bad tag key")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errors.New("bad tag size")
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// appendResponse frames resp for h: size, correlation id, the v1 header's
// empty tag section for a flexible response (never for ApiVersions, whose
// response header is always v0 so that any client can read it), body.
func appendResponse(dst []byte, h header, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.correlationID))
	if resp.IsFlexible() && h.key != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-frameHeaderBytes))
	return dst
}

// handle decodes the body at the header's version and runs the API's
// handler, or answers UNSUPPORTED_VERSION for a version outside the
// advertised range; ctx is the connection's. The answer is finish's: an
// API with a start form (api.start: Produce, OffsetCommit) has been applied
// when handle returns, and finish waits for its outcome; any other API is
// done. A nil answer sends nothing.
func (s *Server) handle(ctx context.Context, h header, body []byte) (finish func() kmsg.Response, err error) {
	a := s.apis[h.key]
	if h.key == apiVersionsKey && (h.version < a.min || h.version > a.max) {
		return answered(s.unsupportedAPIVersions()), nil
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	if h.version < a.min || h.version > a.max {
		if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			return answered(nil), nil // acks=0 expects no answer, even a refusal
		}
		return answered(a.fail(req, unsupportedVersion)), nil
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, headerKey{}, h), a.timeout(req))
	if a.start != nil {
		wait := a.start(ctx, req)
		return func() kmsg.Response {
			defer cancel()
			return wait()
		}, nil
	}
	defer cancel()
	resp, err := a.handle(ctx, req)
	return answered(resp), err
}

// answered is the finish of an answer already made.
func answered(resp kmsg.Response) func() kmsg.Response {
	return func() kmsg.Response { return resp }
}
