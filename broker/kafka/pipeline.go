package kafka

import (
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A connection's requests are processed in order, one at a time, as Kafka
// processes them: each starts after the one before it. Two kinds do not
// hold the connection while they wait: a Produce (for its acks) and an
// OffsetCommit (for the coordinator's append). Their start applies them —
// the batches are in the leader's log, the commit is in the coordinator's
// state, in request order, so sequence numbers and a group's commits keep
// the client's order — and the next request starts at once; their answers
// are written by the connection's writer when each outcome arrives, in
// request order. Clients pipeline on a connection (franz-go sends a
// connection's requests without waiting for answers, librdkafka up to
// max.in.flight), so without this a consumer's commits and heartbeats
// would queue behind each other's replication.
//
// Every other request waits until the answers before it are written, then
// runs alone: what it reads or changes (a Fetch, an OffsetFetch, a SASL
// step) sees everything the connection sent before it, as on Kafka.
//
// maxPipelined bounds the answers a connection may have outstanding (the
// reader stops reading past it), so a connection holds at most that many
// requests' answers and waits.
const maxPipelined = 8

// pendingAnswer is a started request whose answer the writer sends.
type pendingAnswer struct {
	h      header
	begin  time.Time
	finish func() kmsg.Response
}

// pipeline is a connection's writer of pipelined answers.
type pipeline struct {
	s   *Server
	c   net.Conn
	log *slog.Logger
	q   chan pendingAnswer // nil until the first pipelined request
	// outstanding counts answers pushed and not yet written (or dropped);
	// only the reader adds and waits.
	outstanding sync.WaitGroup
	done        chan struct{} // closed when the writer has ended

	mu     sync.Mutex
	broken bool // a write failed or a handler panicked: the connection is closed
}

func newPipeline(s *Server, c net.Conn, log *slog.Logger) *pipeline {
	return &pipeline{s: s, c: c, log: log}
}

// push hands a started request to the writer, blocking while maxPipelined
// answers are outstanding.
func (p *pipeline) push(a pendingAnswer) {
	if p.q == nil {
		p.q = make(chan pendingAnswer, maxPipelined-1)
		p.done = make(chan struct{})
		go p.write()
	}
	p.outstanding.Add(1)
	p.q <- a
}

// drain waits until every pushed answer is written; false if the
// connection broke meanwhile.
func (p *pipeline) drain() bool {
	p.outstanding.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.broken
}

// close ends the writer: the connection is closing, so the answers still
// pushed are not written (their waits end with the connection's context).
func (p *pipeline) close() {
	if p.q == nil {
		return
	}
	p.mu.Lock()
	p.broken = true
	p.mu.Unlock()
	close(p.q)
	<-p.done
}

// write sends the answers in the order they were pushed.
func (p *pipeline) write() {
	defer close(p.done)
	var out []byte
	for a := range p.q {
		resp := p.finish(a)
		p.mu.Lock()
		broken := p.broken
		p.mu.Unlock()
		if resp != nil && !broken {
			out = appendResponse(out[:0], a.h, resp)
			if _, err := p.c.Write(out); err != nil {
				p.breakConn()
			}
			if cap(out) > 1<<20 {
				out = nil
			}
		}
		p.outstanding.Done()
	}
}

// finish waits for a's answer. A panic closes the connection, as one in
// the reader does.
func (p *pipeline) finish(a pendingAnswer) (resp kmsg.Response) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("kafka: handler panicked; connection closed", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			p.s.cfg.Observer.ObserveKafkaClosed("panic")
			p.breakConn()
			resp = nil
		}
	}()
	resp = a.finish()
	p.s.cfg.Observer.ObserveKafkaRequest(kmsg.NameForKey(a.h.key), time.Since(a.begin))
	return resp
}

// breakConn closes the connection: the reader's next read fails and the
// connection ends.
func (p *pipeline) breakConn() {
	p.mu.Lock()
	p.broken = true
	p.mu.Unlock()
	p.c.Close()
}
