package rpcopt

import (
	"sync"

	"google.golang.org/grpc"
)

// Pool keeps one client connection per address, dialled on first use and
// shared by every caller (a grpc.ClientConn multiplexes concurrent RPCs).
type Pool struct {
	dial  func(addr string) (*grpc.ClientConn, error)
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// NewPool returns an empty pool that dials with dial.
func NewPool(dial func(addr string) (*grpc.ClientConn, error)) *Pool {
	return &Pool{dial: dial, conns: map[string]*grpc.ClientConn{}}
}

// Get returns the connection to addr, dialling it if there is none. A
// failed dial is not remembered.
func (p *Pool) Get(addr string) (*grpc.ClientConn, error) {
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
