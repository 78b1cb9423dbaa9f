package rpcopt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog/internal/rpcopt"
)

// These tests wait for real keepalive pings: grpc-go raises a client's
// keepalive Time below 10 s to 10 s, so they cannot be sped up. They run in
// parallel (about 23 s together) and are skipped with -short.

// startServer serves the gRPC health service with rpcopt's server options
// on a loopback port.
func startServer(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(rpcopt.ServerKeepalive())
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// silentProxy forwards TCP connections to target. freeze makes the links
// open so far drop every byte in both directions while their sockets stay
// open: a peer that vanished without FIN or RST, which only keepalive
// notices. Links accepted after freeze forward normally.
type silentProxy struct {
	lis    net.Listener
	target string
	wg     sync.WaitGroup

	mu       sync.Mutex
	links    []*link
	accepted int
}

type link struct {
	frozen atomic.Bool
	a, b   net.Conn
}

func (l *link) close() { _ = l.a.Close(); _ = l.b.Close() }

func startProxy(t *testing.T, target string) *silentProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{lis: lis, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = lis.Close()
		p.mu.Lock()
		for _, l := range p.links {
			l.close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *silentProxy) addr() string { return p.lis.Addr().String() }

func (p *silentProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{a: c, b: s}
		p.mu.Lock()
		p.links = append(p.links, l)
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, s, c)
		go p.pipe(l, c, s)
	}
}

// pipe copies src to dst until either fails, dropping what it reads while
// the link is frozen.
func (p *silentProxy) pipe(l *link, dst, src net.Conn) {
	defer p.wg.Done()
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if l.frozen.Load() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (p *silentProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.frozen.Store(true)
	}
}

func (p *silentProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func check(ctx context.Context, c healthpb.HealthClient, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// TestClientKeepaliveDetectsSilentPeer: when the peer stops answering but
// the socket stays open, ClientKeepalive's ping goes unanswered and the
// transport is closed, both on a connection with an RPC waiting (which then
// fails with Unavailable long before its deadline) and on an idle one
// (PermitWithoutStream); either way the next RPC reconnects. The two
// connections share the wait.
func TestClientKeepaliveDetectsSilentPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a keepalive ping and its timeout (about 15 s)")
	}
	t.Parallel()
	proxy := startProxy(t, startServer(t))
	busy, idle := dialThrough(t, proxy), dialThrough(t, proxy)
	proxy.freeze()

	// Detection takes KeepaliveTime+KeepaliveTimeout (15 s) after the last
	// read; bound is far beyond that, so only a missing keepalive reaches it.
	const bound = 40 * time.Second
	inFlight := make(chan error, 1)
	go func() { inFlight <- check(t.Context(), healthpb.NewHealthClient(busy), bound) }()
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	if !idle.WaitForStateChange(ctx, connectivity.Ready) {
		t.Errorf("idle connection to a silent peer still READY after %v", bound)
	}
	if err := <-inFlight; status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "keepalive") {
		t.Errorf("RPC on the silent connection: %v; want Unavailable from the keepalive ping timing out before the %v deadline", err, bound)
	}

	for name, c := range map[string]*grpc.ClientConn{"busy": busy, "idle": idle} {
		if err := check(t.Context(), healthpb.NewHealthClient(c), 10*time.Second); err != nil {
			t.Errorf("%s connection: RPC after the dead transport was detected: %v (state %v); want it to reconnect", name, err, c.GetState())
		}
	}
	if n := proxy.connections(); n != 4 {
		t.Errorf("proxy saw %d connections, want 4 (two silenced, two reconnects)", n)
	}
}

// dialThrough returns a ClientKeepalive connection to the proxy whose first
// RPC succeeded.
func dialThrough(t *testing.T, proxy *silentProxy) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+proxy.addr(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), rpcopt.ClientKeepalive())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	if err := check(t.Context(), healthpb.NewHealthClient(cc), 10*time.Second); err != nil {
		t.Fatalf("RPC through the proxy: %v", err)
	}
	return cc
}

// TestServerPermitsClientPingRate: a ServerKeepalive server must not answer
// a client that pings as ClientKeepalive does (also with no RPC open) with
// GOAWAY "too_many_pings". grpc-go sends that GOAWAY at the third ping that
// breaks its policy, i.e. the fourth ping of an idle connection, which a real
// client sends only after 40 s; so this test speaks HTTP/2 itself and sends
// the pings at ¾ of KeepaliveTime, a little faster than the client ever does
// (passing thus implies the client's rate is accepted) yet far enough above
// the policy's MinTime that scheduling delays cannot turn a ping into a
// strike.
func TestServerPermitsClientPingRate(t *testing.T) {
	if testing.Short() {
		t.Skip("sends pings seconds apart (about 23 s)")
	}
	t.Parallel()
	conn, err := net.Dial("tcp", startServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h := newH2Conn(t, conn)

	spacing := rpcopt.KeepaliveTime * 3 / 4
	for i := range 4 {
		if i > 0 {
			// The interval between pings is what the server's policy judges,
			// so the test has to let it pass.
			time.Sleep(spacing)
		}
		h.ping(uint64(i))
	}
	// The server queues a GOAWAY right behind the answer to the ping that
	// broke its policy. One more ping at once (a single strike, which is
	// tolerated) flushes that queue: its answer arriving first proves no
	// GOAWAY was sent.
	h.ping(4)
}

// h2Conn is the smallest HTTP/2 client that can ping a gRPC server.
type h2Conn struct {
	t    *testing.T
	mu   sync.Mutex // serialises frame writes
	conn net.Conn
	acks chan uint64
	errc chan error
}

const (
	frameSettings = 0x4
	framePing     = 0x6
	frameGoAway   = 0x7
	flagAck       = 0x1
)

func newH2Conn(t *testing.T, conn net.Conn) *h2Conn {
	h := &h2Conn{t: t, conn: conn, acks: make(chan uint64, 8), errc: make(chan error, 1)}
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := h.write(frameSettings, 0, nil); err != nil {
		t.Fatal(err)
	}
	go h.read()
	return h
}

func (h *h2Conn) write(typ, flags byte, payload []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	hdr := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
	_, err := h.conn.Write(append(hdr, payload...))
	return err
}

// fail hands the reader's first error to ping.
func (h *h2Conn) fail(err error) {
	select {
	case h.errc <- err:
	default:
	}
}

// read acknowledges the server's SETTINGS, delivers PING acks and turns a
// GOAWAY or a closed connection into an error.
func (h *h2Conn) read() {
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(h.conn, hdr); err != nil {
			h.fail(err)
			return
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(h.conn, payload); err != nil {
			h.fail(err)
			return
		}
		switch typ, flags := hdr[3], hdr[4]; {
		case typ == frameSettings && flags&flagAck == 0:
			if err := h.write(frameSettings, flagAck, nil); err != nil {
				h.fail(err)
				return
			}
		case typ == framePing && flags&flagAck != 0 && len(payload) == 8:
			h.acks <- binary.BigEndian.Uint64(payload)
		case typ == frameGoAway && len(payload) >= 8:
			h.fail(errors.New("GOAWAY " + string(bytes.ToValidUTF8(payload[8:], nil))))
			return
		}
	}
}

// ping sends PING id and fails the test unless its ACK comes back first.
func (h *h2Conn) ping(id uint64) {
	h.t.Helper()
	if err := h.write(framePing, 0, binary.BigEndian.AppendUint64(nil, id)); err != nil {
		h.t.Fatalf("ping %d: %v", id, err)
	}
	select {
	case got := <-h.acks:
		if got != id {
			h.t.Fatalf("ping %d answered with ack %d", id, got)
		}
	case err := <-h.errc:
		h.t.Fatalf("ping %d: server answered %v", id, err)
	case <-time.After(10 * time.Second):
		h.t.Fatalf("ping %d: no ack in 10 s", id)
	}
}
