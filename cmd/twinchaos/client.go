package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage"
)

// event is one line of the client's stdout and of the history file.
type event struct {
	Ev     string `json:"ev"`
	At     string `json:"at,omitempty"`
	TP     string `json:"tp,omitempty"`
	Off    int64  `json:"off,omitempty"`
	Val    string `json:"val,omitempty"`
	LE     int32  `json:"le,omitempty"`
	C      string `json:"c,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Target string `json:"target,omitempty"`
	Msg    string `json:"msg,omitempty"`
	N      int64  `json:"n,omitempty"`
}

type emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *emitter) emit(ev event) {
	ev.At = time.Now().UTC().Format(time.RFC3339Nano)
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(ev)
}

// client runs inside a container on the cluster network: it creates the
// topic, runs acks=all producers (unique values, never retried) and one
// consumer per partition, streaming every ack and read as JSON lines on
// stdout, until "stop" on stdin; on "final" it reads each healed partition
// below its HW and streams that too.
type client struct {
	brokers    []string
	controller string
	topic      string
	parts      int32
	out        *emitter

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn

	metaMu  sync.Mutex
	leaders map[int32]leaderInfo
	addrs   map[int32]string

	maxAckMu sync.Mutex
	maxAck   map[int32]int64
}

type leaderInfo struct {
	id, le   int32
	isr, rep int
}

func (c *client) conn(addr string) (*grpc.ClientConn, error) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if cc := c.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c.conns[addr] = cc
	return cc, nil
}

// refresh asks the brokers in turn for the topic's metadata.
func (c *client) refresh(ctx context.Context) error {
	var last error = errors.New("no broker answered")
	for _, b := range c.brokers {
		cc, err := c.conn(b)
		if err != nil {
			last = err
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		md, err := pb.NewFetchServiceClient(cc).Metadata(rctx, &pb.MetadataRequest{Topics: []string{c.topic}})
		cancel()
		if err != nil {
			last = err
			continue
		}
		if len(md.GetTopics()) == 0 || md.GetTopics()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			last = fmt.Errorf("metadata from %s: topic not known", b)
			continue
		}
		c.metaMu.Lock()
		for _, br := range md.GetBrokers() {
			c.addrs[br.GetId()] = fmt.Sprintf("%s:%d", br.GetHost(), br.GetPort())
		}
		for _, p := range md.GetTopics()[0].GetPartitions() {
			old, ok := c.leaders[p.GetIndex()]
			if !ok || p.GetLeaderEpoch() >= old.le {
				c.leaders[p.GetIndex()] = leaderInfo{id: p.GetLeaderId(), le: p.GetLeaderEpoch(), isr: len(p.GetIsr()), rep: len(p.GetReplicas())}
			}
		}
		c.metaMu.Unlock()
		return nil
	}
	return last
}

func (c *client) leader(p int32) (string, leaderInfo, bool) {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	l, ok := c.leaders[p]
	if !ok || l.id < 0 {
		return "", l, false
	}
	a, ok := c.addrs[l.id]
	return a, l, ok
}

func (c *client) tp(p int32) string { return fmt.Sprintf("%s-%d", c.topic, p) }

func (c *client) createTopic(ctx context.Context) error {
	for {
		cc, err := c.conn(c.controller)
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var resp *pb.CreateTopicsResponse
			resp, err = pb.NewAdminServiceClient(cc).CreateTopics(rctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{
				Name: c.topic, NumPartitions: c.parts, ReplicationFactor: 3,
				Configs: map[string]string{"min.insync.replicas": "2", "unclean.recovery.strategy": "none"},
			}}})
			cancel()
			if err == nil {
				code := resp.GetTopics()[0].GetError()
				if code == pb.ErrorCode_ERROR_CODE_NONE || code == pb.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS {
					break
				}
				err = fmt.Errorf("CreateTopics: %v %s", code, resp.GetTopics()[0].GetErrorMessage())
			}
		}
		if ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
	for {
		ok := c.refresh(ctx) == nil
		for p := range c.parts {
			_, l, found := c.leader(p)
			ok = ok && found && l.isr == l.rep
		}
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func encodeValue(v string) []byte {
	b, err := storage.EncodeBatch([]storage.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte(v)}}, storage.BatchOptions{})
	if err != nil {
		panic(err)
	}
	return b
}

func (c *client) produceLoop(ctx context.Context, id int, errs *int64, mu *sync.Mutex) {
	for i := 0; ctx.Err() == nil; i++ {
		p := int32(i % int(c.parts))
		v := fmt.Sprintf("p%d-%d", id, i) // unique; never retried
		addr, _, ok := c.leader(p)
		fail := func() {
			mu.Lock()
			*errs++
			mu.Unlock()
			_ = c.refresh(ctx)
			sleepCtx(ctx, 100*time.Millisecond)
		}
		if !ok {
			fail()
			continue
		}
		cc, err := c.conn(addr)
		if err != nil {
			fail()
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 6*time.Second)
		resp, err := pb.NewProduceServiceClient(cc).Produce(rctx, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000,
			Partitions: []*pb.ProducePartitionData{{Topic: c.topic, Partition: p, Records: encodeValue(v)}}})
		cancel()
		if err != nil || resp.GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			fail()
			continue
		}
		r := resp.GetPartitions()[0]
		c.maxAckMu.Lock()
		c.maxAck[p] = max(c.maxAck[p], r.GetBaseOffset())
		c.maxAckMu.Unlock()
		c.out.emit(event{Ev: "ack", TP: c.tp(p), Off: r.GetBaseOffset(), Val: v, LE: r.GetLeaderEpoch()})
	}
}

// fetch reads once from p's leader at off.
func (c *client) fetch(ctx context.Context, p int32, off int64, wait time.Duration) (recs []storage.Record, le int32, hw int64, code pb.ErrorCode, err error) {
	addr, l, ok := c.leader(p)
	if !ok {
		return nil, 0, 0, 0, errors.New("no leader")
	}
	cc, err := c.conn(addr)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, wait+3*time.Second)
	defer cancel()
	resp, err := pb.NewFetchServiceClient(cc).Fetch(rctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
		MaxWaitMs: int32(wait.Milliseconds()), MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []*pb.FetchPartition{{Topic: c.topic, Partition: p, FetchOffset: off, CurrentLeaderEpoch: l.le, LastFetchedEpoch: -1}}})
	if err != nil {
		return nil, 0, 0, 0, err
	}
	pr := resp.GetPartitions()[0]
	if pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return nil, 0, 0, pr.GetError(), nil
	}
	for bv, err := range storage.Batches(pr.GetRecords()) {
		if err != nil {
			return nil, 0, 0, 0, err
		}
		rs, err := bv.Records()
		if err != nil {
			return nil, 0, 0, 0, err
		}
		recs = append(recs, rs...)
	}
	return recs, pr.GetLeaderEpoch(), pr.GetHighWatermark(), pb.ErrorCode_ERROR_CODE_NONE, nil
}

func (c *client) consumeLoop(ctx context.Context, p int32) {
	name := fmt.Sprintf("c%d", p)
	var next int64
	bad := 0
	for ctx.Err() == nil {
		recs, le, hw, code, err := c.fetch(ctx, p, next, 500*time.Millisecond)
		if err != nil || code != pb.ErrorCode_ERROR_CODE_NONE {
			if code == pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE || code == pb.ErrorCode_ERROR_CODE_LOG_TRUNCATED {
				// A new leader's HW may lag our position: retry in place,
				// reposition to 0 only if it persists.
				if bad++; bad > 100 {
					next, bad = 0, 0
					c.out.emit(event{Ev: "reset", C: name, TP: c.tp(p)})
				}
			}
			_ = c.refresh(ctx)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		bad = 0
		for _, r := range recs {
			if int64(r.Offset) < next {
				continue
			}
			if int64(r.Offset) >= hw {
				c.out.emit(event{Ev: "violation", TP: c.tp(p), Off: int64(r.Offset), Msg: fmt.Sprintf("read at or above HW %d", hw)})
			}
			c.out.emit(event{Ev: "read", C: name, TP: c.tp(p), Off: int64(r.Offset), Val: string(r.Value), LE: le})
			next = int64(r.Offset) + 1
		}
	}
}

// final waits until p has a full ISR and its leader's HW passes every acked
// offset, then streams the log below the HW.
func (c *client) final(ctx context.Context, p int32) error {
	c.maxAckMu.Lock()
	top, acked := c.maxAck[p]
	c.maxAckMu.Unlock()
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: not healed: %w", c.tp(p), ctx.Err())
		}
		_ = c.refresh(ctx)
		_, l, ok := c.leader(p)
		if !ok || l.isr != l.rep {
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		_, le, hw, code, err := c.fetch(ctx, p, 0, 0)
		if err != nil || code != pb.ErrorCode_ERROR_CODE_NONE || (acked && hw <= top) {
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		var off int64
		var out []event
		for off < hw {
			recs, le2, _, code, err := c.fetch(ctx, p, off, 0)
			if err != nil || code != pb.ErrorCode_ERROR_CODE_NONE || le2 != le {
				break
			}
			for _, r := range recs {
				if int64(r.Offset) >= off && int64(r.Offset) < hw {
					out = append(out, event{Ev: "finalrec", TP: c.tp(p), Off: int64(r.Offset), Val: string(r.Value)})
					off = int64(r.Offset) + 1
				}
			}
			if len(recs) == 0 {
				break
			}
		}
		if off < hw {
			continue // leader changed under us; start over
		}
		for _, e := range out {
			c.out.emit(e)
		}
		c.out.emit(event{Ev: "final", TP: c.tp(p), LE: le, N: hw})
		return nil
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	brokers := fs.String("brokers", "a-broker-1:9091,a-broker-2:9092,a-broker-3:9093", "bootstrap brokers")
	ctl := fs.String("controller", "a-controller:9090", "controller address (CreateTopics)")
	topic := fs.String("topic", "chaos", "topic")
	parts := fs.Int("partitions", 3, "partitions")
	producers := fs.Int("producers", 3, "producer goroutines")
	maxRun := fs.Duration("max-run", 15*time.Minute, "safety cap on the whole client")
	_ = fs.Parse(args)
	c := &client{brokers: strings.Split(*brokers, ","), controller: *ctl, topic: *topic, parts: int32(*parts),
		out:   &emitter{enc: json.NewEncoder(os.Stdout)},
		conns: map[string]*grpc.ClientConn{}, leaders: map[int32]leaderInfo{}, addrs: map[int32]string{}, maxAck: map[int32]int64{}}
	root, cancel := context.WithTimeout(context.Background(), *maxRun)
	defer cancel()
	setup, scancel := context.WithTimeout(root, 2*time.Minute)
	err := c.createTopic(setup)
	scancel()
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	c.out.emit(event{Ev: "ready", Msg: fmt.Sprintf("topic %s, %d partitions, %d producers", c.topic, c.parts, *producers)})

	work, stopWork := context.WithCancel(root)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var produceErrs int64
	for i := range *producers {
		wg.Add(1)
		go func() { defer wg.Done(); c.produceLoop(work, i, &produceErrs, &errMu) }()
	}
	for p := range c.parts {
		wg.Add(1)
		go func() { defer wg.Done(); c.consumeLoop(work, p) }()
	}
	in := bufio.NewScanner(os.Stdin)
	waitFor := func(word string) error {
		for in.Scan() {
			if strings.TrimSpace(in.Text()) == word {
				return nil
			}
		}
		return fmt.Errorf("stdin closed before %q", word)
	}
	err = waitFor("stop")
	stopWork()
	wg.Wait()
	errMu.Lock()
	c.out.emit(event{Ev: "stats", Kind: "produce-errors", N: produceErrs})
	errMu.Unlock()
	if err != nil {
		return err
	}
	if err := waitFor("final"); err != nil {
		return err
	}
	fctx, fcancel := context.WithTimeout(root, 3*time.Minute)
	defer fcancel()
	for p := range c.parts {
		if err := c.final(fctx, p); err != nil {
			return err
		}
	}
	c.out.emit(event{Ev: "done"})
	return nil
}
