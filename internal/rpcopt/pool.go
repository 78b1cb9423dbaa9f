package rpcopt

import (
	"sync"

	"google.golang.org/grpc"
)

// Conn is a client connection a Pool keeps: a *grpc.ClientConn, or the
// simulator's connection over its network.
type Conn interface {
	grpc.ClientConnInterface
	Close() error
}

// Pool keeps one client connection per address, dialled on first use and
// shared by every caller (a grpc.ClientConn multiplexes concurrent RPCs).
type Pool struct {
	dial  func(addr string) (Conn, error)
	mu    sync.Mutex
	conns map[string]Conn
}

// NewPool returns an empty pool that dials with dial.
func NewPool[C Conn](dial func(addr string) (C, error)) *Pool {
	return &Pool{dial: Dialer(dial), conns: map[string]Conn{}}
}

// Get returns the connection to addr, dialling it if there is none. A
// failed dial is not remembered.
func (p *Pool) Get(addr string) (Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := p.dial(addr)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Close closes every connection. The pool stays usable: a later Get dials
// anew.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.conns {
		_ = c.Close()
		delete(p.conns, addr)
	}
}

// Dialer turns a dial of a concrete connection type into one of Conn (a
// failed dial is a nil Conn, not a nil C in a non-nil Conn).
func Dialer[C Conn](dial func(addr string) (C, error)) func(addr string) (Conn, error) {
	return func(addr string) (Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}
