package kafka

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
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

// TestPipelineOrderUnderRandomOutcomes: for seeded random mixes of up to
// 20 produces (more than maxPipelined outstanding) and Metadata requests
// on one connection, whose produces' outcomes arrive in a random order,
// every answer comes back in request order and is its own request's, and
// each Metadata runs only after every produce sent before it has ended.
func TestPipelineOrderUnderRandomOutcomes(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 2 + rng.IntN(19)
		var kinds []string // a produce's topic (its length is its index + 1), or "" for Metadata
		be := &pipeBackend{started: make(chan string, n), release: map[string]chan struct{}{}}
		for i := range n {
			if rng.IntN(4) == 0 {
				kinds = append(kinds, "")
				continue
			}
			topic := strings.Repeat("t", i+1)
			kinds = append(kinds, topic)
			be.release[topic] = make(chan struct{})
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := NewServer(Config{Logger: slog.New(slog.DiscardHandler)}, be, nil)
		go s.Serve(ln)
		c := dial(t, ln.Addr().String())
		corrs := make([]int32, n)
		for i, k := range kinds {
			if k == "" {
				md := kmsg.NewPtrMetadataRequest()
				md.SetVersion(1)
				corrs[i] = c.send(md)
			} else {
				corrs[i] = c.send(produceTo(k))
			}
		}
		// The outcomes arrive in a random order, while the answers are
		// being read.
		var topics []string
		for _, k := range kinds {
			if k != "" {
				topics = append(topics, k)
			}
		}
		rng.Shuffle(len(topics), func(i, j int) { topics[i], topics[j] = topics[j], topics[i] })
		go func() {
			for _, k := range topics {
				close(be.release[k])
			}
		}()
		for i, k := range kinds {
			if k == "" {
				c.recv(corrs[i], kmsg.NewPtrMetadataResponse(), false) // recv checks the correlation id
				continue
			}
			r := kmsg.NewPtrProduceResponse()
			r.SetVersion(7)
			c.recv(corrs[i], r, false)
			if got := r.Topics[0].Partitions[0].BaseOffset; got != int64(len(k)) {
				t.Fatalf("seed %d: answer %d carries base offset %d, want %d (another request's)", seed, i, got, len(k))
			}
		}
		// The k-th Metadata run is the k-th Metadata request (requests
		// start in order): every produce sent before it must have ended.
		var before [][]string
		var sent []string
		for _, k := range kinds {
			if k == "" {
				before = append(before, slices.Clone(sent))
			} else {
				sent = append(sent, k)
			}
		}
		be.mu.Lock()
		log := slices.Clone(be.log)
		be.mu.Unlock()
		ended, m := map[string]bool{}, 0
		for _, e := range log {
			if topic, ok := strings.CutPrefix(e, "end "); ok {
				ended[topic] = true
			}
			if e != "metadata" {
				continue
			}
			for _, k := range before[m] {
				if !ended[k] {
					t.Fatalf("seed %d: events %v: Metadata %d ran before produce %q ended", seed, log, m, k)
				}
			}
			m++
		}
		if m != len(before) {
			t.Fatalf("seed %d: %d Metadata runs, want %d", seed, m, len(before))
		}
		s.Close()
	}
}
