package brokertest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/twinlog/twinlog/security/transport"
)

// Network is an in-memory gRPC network (bufconn) shared by every node of one
// or more clusters. Nodes are named by the host part of their "host:port"
// address. Cutting a link makes dials between the two nodes fail and closes
// the connections already open between them (hashicorp raft's Disconnect).
type Network struct {
	mu    sync.Mutex
	lis   map[string]*bufconn.Listener // addr → listener
	cut   map[[2]string]bool           // ordered pair of node names
	conns map[[2]string][]net.Conn     // from, to → conns
	gates gates                        // test hooks on calls (gate.go)
	// creds are the nodes' client credentials (SetTransport); a node
	// without dials plaintext.
	creds map[string]credentials.TransportCredentials
}

// SetTransport makes node's dials use t's client credentials (TLS with
// t's certificate; nil: plaintext).
func (n *Network) SetTransport(node string, t *transport.Transport) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.creds[node] = t.ClientCredentials()
}

func (n *Network) clientCreds(node string) credentials.TransportCredentials {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c := n.creds[node]; c != nil {
		return c
	}
	return insecure.NewCredentials()
}

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{lis: map[string]*bufconn.Listener{}, cut: map[[2]string]bool{}, conns: map[[2]string][]net.Conn{},
		creds: map[string]credentials.TransportCredentials{}}
}

// Listen registers a listener for addr, replacing any previous one.
func (n *Network) Listen(addr string) net.Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.lis[addr]; old != nil {
		_ = old.Close()
	}
	l := bufconn.Listen(4 << 20)
	n.lis[addr] = l
	return l
}

func host(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Cut makes nodes a and b unreachable from each other (both directions).
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	n.cut[pair(a, b)] = true
	var closing []net.Conn
	for _, k := range [][2]string{{a, b}, {b, a}} {
		closing = append(closing, n.conns[k]...)
		delete(n.conns, k)
	}
	n.mu.Unlock()
	for _, c := range closing {
		_ = c.Close()
	}
}

// Heal restores the link between a and b.
func (n *Network) Heal(a, b string) {
	n.mu.Lock()
	delete(n.cut, pair(a, b))
	n.mu.Unlock()
}

// Isolate cuts node a from every node in others.
func (n *Network) Isolate(a string, others ...string) {
	for _, o := range others {
		n.Cut(a, o)
	}
}

// Dial returns a gRPC dialer for node from: every connection it makes is
// subject to cuts.
func (n *Network) Dial(from string) func(addr string) (*grpc.ClientConn, error) {
	return func(addr string) (*grpc.ClientConn, error) {
		to := host(addr)
		return grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(n.clientCreds(from)),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
			grpc.WithChainUnaryInterceptor(n.gates.interceptor(from, to)),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
				BaseDelay: 10 * time.Millisecond, Multiplier: 1.5, MaxDelay: 100 * time.Millisecond,
			}, MinConnectTimeout: time.Second}),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return n.DialConn(ctx, from, addr)
			}))
	}
}

// unreachable is a dial's error across a cut, as a TCP dial to a host
// with no route says.
func unreachable(from, addr string) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("bufnet: %s → %s: %w", from, addr, syscall.EHOSTUNREACH)}
}

// DialConn opens a raw connection from node from to addr, subject to cuts
// (a Kafka client's dialer, kgo.Dialer).
func (n *Network) DialConn(ctx context.Context, from, addr string) (net.Conn, error) {
	to := host(addr)
	n.mu.Lock()
	l, cut := n.lis[addr], n.cut[pair(from, to)]
	n.mu.Unlock()
	if l == nil || cut {
		return nil, unreachable(from, addr)
	}
	c, err := l.DialContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// A stopped node's listener is closed: what a TCP dial to a
		// port nobody listens on says, so that clients treat it as they
		// treat a real one (franz-go retries ECONNREFUSED, and fails a
		// record on an error it does not know).
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("bufnet: %s → %s: %w", from, addr, syscall.ECONNREFUSED)}
	}
	n.mu.Lock()
	if n.cut[pair(from, to)] {
		n.mu.Unlock()
		_ = c.Close()
		return nil, unreachable(from, addr)
	}
	k := [2]string{from, to}
	n.conns[k] = append(n.conns[k], c)
	n.mu.Unlock()
	return c, nil
}
