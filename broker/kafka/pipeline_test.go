package kafka

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// pipeBackend holds each produce's answer until the test releases its
// topic, and logs starts, ends and Metadata calls in the order they
// happen.
type pipeBackend struct {
	fakeBackend
	mu      sync.Mutex
	log     []string
	started chan string
	release map[string]chan struct{}
}

func (b *pipeBackend) note(e string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, e)
}

func (b *pipeBackend) StartProduce(req *pb.ProduceRequest) func(context.Context) (*pb.ProduceResponse, error) {
	topic := req.GetPartitions()[0].GetTopic()
	b.note("start " + topic)
	b.started <- topic
	return func(ctx context.Context) (*pb.ProduceResponse, error) {
		select {
		case <-b.release[topic]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		b.note("end " + topic)
		return &pb.ProduceResponse{Partitions: []*pb.ProducePartitionResponse{{Topic: topic, BaseOffset: int64(len(topic))}}}, nil
	}
}

func (b *pipeBackend) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	b.note("metadata")
	return b.fakeBackend.Metadata(ctx, req)
}

func produceTo(topic string) *kmsg.ProduceRequest {
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(7)
	p.Acks, p.TimeoutMillis = -1, 10_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pt.Partitions = append(pt.Partitions, kmsg.NewProduceRequestTopicPartition())
	p.Topics = append(p.Topics, pt)
	return p
}

// TestPipelinedProduce: a connection's second produce starts while the
// first still waits for its acks (the connection is not held by a wait);
// the answers go out in request order although the second's outcome came
// first; and a Metadata request sent behind them runs only after both
// produces have finished, as on Kafka.
func TestPipelinedProduce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	be := &pipeBackend{started: make(chan string, 4), release: map[string]chan struct{}{"a": make(chan struct{}), "bb": make(chan struct{})}}
	s := NewServer(Config{Logger: slog.New(slog.DiscardHandler)}, be, nil)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	c := dial(t, ln.Addr().String())

	ca := c.send(produceTo("a"))
	cb := c.send(produceTo("bb"))
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(1)
	cm := c.send(md)
	// Both produces start although "a" has no outcome: with one request
	// at a time, "bb" would wait for "a"'s answer.
	var got []string
	for len(got) < 2 {
		select {
		case topic := <-be.started:
			got = append(got, topic)
		case <-time.After(10 * time.Second):
			t.Fatalf("produces started %v: the second waits for the first's answer", got)
		}
	}
	if !slices.Equal(got, []string{"a", "bb"}) {
		t.Fatalf("produces started %v, want a then bb", got)
	}
	close(be.release["bb"]) // the second's outcome comes first
	close(be.release["a"])

	ra := kmsg.NewPtrProduceResponse()
	ra.SetVersion(7)
	c.recv(ca, ra, false) // recv checks the correlation id: a's answer first
	rb := kmsg.NewPtrProduceResponse()
	rb.SetVersion(7)
	c.recv(cb, rb, false)
	if ra.Topics[0].Partitions[0].BaseOffset != 1 || rb.Topics[0].Partitions[0].BaseOffset != 2 {
		t.Fatalf("answers %+v %+v: each must be its own request's", ra.Topics, rb.Topics)
	}
	rm := kmsg.NewPtrMetadataResponse()
	rm.SetVersion(1)
	c.recv(cm, rm, false)

	be.mu.Lock()
	log := slices.Clone(be.log)
	be.mu.Unlock()
	if i := slices.Index(log, "metadata"); i != len(log)-1 || !slices.Contains(log[:i], "end a") || !slices.Contains(log[:i], "end bb") {
		t.Fatalf("events %v: Metadata must run after both produces ended", log)
	}
}

// TestPipelineClosesWithConnection: a client that goes away with produces
// still waiting ends their waits (the connection's context), so the
// connection's goroutines do not outlive it by the produce timeout.
func TestPipelineClosesWithConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	be := &pipeBackend{started: make(chan string, 4), release: map[string]chan struct{}{"a": make(chan struct{})}}
	s := NewServer(Config{Logger: slog.New(slog.DiscardHandler)}, be, nil)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	c := dial(t, ln.Addr().String())
	c.send(produceTo("a"))
	<-be.started
	c.c.Close()
	// Close waits for the connection's goroutines; the produce's own
	// timeout is 10 s and more, the dial deadline of the test 10 s.
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the connection's goroutines outlived it, waiting for the produce's 40 s")
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if slices.Contains(be.log, "end a") {
		t.Fatalf("events %v: the wait ended by its release, not by the connection's end", be.log)
	}
}
