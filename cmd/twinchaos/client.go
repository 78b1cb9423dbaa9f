package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage"
)

// event is one line of the client's stdout and of the history file. Cl is
// the cluster ("a", "b") the event happened on.
type event struct {
	Ev     string `json:"ev"`
	At     string `json:"at,omitempty"`
	Cl     string `json:"cl,omitempty"`
	TP     string `json:"tp,omitempty"`
	Off    int64  `json:"off,omitempty"`
	Val    string `json:"val,omitempty"`
	LE     int32  `json:"le,omitempty"`
	Ep     int32  `json:"ep,omitempty"` // record (batch) epoch
	Era    int    `json:"era,omitempty"`
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

// cluster is what the client knows of one cluster: bootstrap brokers, the
// controller, and the chaos topic's leaders from Metadata.
type cluster struct {
	name       string
	brokers    []string
	controller string

	mu      sync.Mutex
	leaders map[int32]leaderInfo
	addrs   map[int32]string

	// metadata observer progress (syncObserver)
	obsMu      sync.Mutex
	obsApplied int64 // last metadata offset applied
	obsHigh    int64 // controller's high offset in the last answer
	obsRounds  int
	// obsCreds, if set, is the metadata observer's identity at this
	// cluster's controller (FetchMetadata as broker -1: with
	// broker.principal.template only that broker's principal may).
	obsCreds credentials.TransportCredentials
}

type leaderInfo struct {
	id, le   int32
	isr, rep int
}

func other(cl string) string {
	if cl == "a" {
		return "b"
	}
	return "a"
}

// producers is the producers' shared state: the writable cluster they
// target and the era (failover count) their values are tagged with; an
// optional straggler (producer 0) keeps writing to the old source after an
// unplanned failover.
type producers struct {
	mu             sync.Mutex
	cond           *sync.Cond
	target         string
	era            int
	paused         bool
	stopped        bool
	inflight       int
	straggler      string
	stragglerEra   int
	stragglerUntil time.Time
	errs           map[string]int64
}

func (ps *producers) pick(id int) (cl string, era int, ok bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for ps.paused && !ps.stopped {
		ps.cond.Wait()
	}
	if ps.stopped {
		return "", 0, false
	}
	cl, era = ps.target, ps.era
	if id == 0 && ps.straggler != "" && time.Now().Before(ps.stragglerUntil) {
		cl, era = ps.straggler, ps.stragglerEra
	}
	ps.inflight++
	return cl, era, true
}

func (ps *producers) done(errKind string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.inflight--
	if errKind != "" {
		ps.errs[errKind]++
	}
	ps.cond.Broadcast()
}

// pause stops new produce requests and waits for the ones in flight.
func (ps *producers) pause() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.paused = true
	for ps.inflight > 0 {
		ps.cond.Wait()
	}
}

func (ps *producers) set(f func()) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	f()
	ps.cond.Broadcast()
}

func (ps *producers) current() (string, int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.target, ps.era
}

// client runs inside a container on both clusters' networks (the brokers
// advertise service names): it creates the topic on A and B and the mirror
// a-to-b, runs acks=all producers against the writable cluster (unique
// values tagged with cluster and era), one consumer per partition and
// cluster, and a metadata observer per cluster (truncation points, unclean
// elections, leader changes from the controller's change log). Commands on
// stdin (one at a time, in order): failover, failback, stop, final. Every
// ack, read, reposition, truncation point, failover, failback, snapshot
// and final record is a JSON line on stdout.
type client struct {
	cls       map[string]*cluster
	topic     string
	parts     int32
	out       *emitter
	ps        *producers
	nProd     int
	snapLimit time.Duration

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn
	creds  credentials.TransportCredentials // plaintext or TLS (--tls-*)
}

func (c *client) conn(addr string) (*grpc.ClientConn, error) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if cc := c.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(c.creds))
	if err != nil {
		return nil, err
	}
	c.conns[addr] = cc
	return cc, nil
}

// observerConn is the metadata observer's connection to cl's controller:
// with its own certificate (cl.obsCreds) when set, else c.conn's.
func (c *client) observerConn(cl *cluster) (*grpc.ClientConn, error) {
	if cl.obsCreds == nil {
		return c.conn(cl.controller)
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	key := "observer " + cl.controller
	if cc := c.conns[key]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(cl.controller, grpc.WithTransportCredentials(cl.obsCreds))
	if err != nil {
		return nil, err
	}
	c.conns[key] = cc
	return cc, nil
}

func (c *client) tp(p int32) string { return fmt.Sprintf("%s-%d", c.topic, p) }

// refresh asks cl's brokers in turn for the topic's metadata.
func (c *client) refresh(ctx context.Context, cl *cluster) error {
	var last error = errors.New("no broker answered")
	for _, b := range cl.brokers {
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
		cl.mu.Lock()
		for _, br := range md.GetBrokers() {
			cl.addrs[br.GetId()] = fmt.Sprintf("%s:%d", br.GetHost(), br.GetPort())
		}
		for _, p := range md.GetTopics()[0].GetPartitions() {
			old, ok := cl.leaders[p.GetIndex()]
			if !ok || p.GetLeaderEpoch() >= old.le {
				cl.leaders[p.GetIndex()] = leaderInfo{id: p.GetLeaderId(), le: p.GetLeaderEpoch(), isr: len(p.GetIsr()), rep: len(p.GetReplicas())}
			}
		}
		cl.mu.Unlock()
		return nil
	}
	return last
}

func (cl *cluster) leader(p int32) (string, leaderInfo, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	l, ok := cl.leaders[p]
	if !ok || l.id < 0 {
		return "", l, false
	}
	a, ok := cl.addrs[l.id]
	return a, l, ok
}

// ---- set-up ----

// topicConfigs: min ISR 2 and no unclean elections, on both clusters (a
// mirror copies only mirror.* configs when it creates its topic).
var topicConfigs = map[string]string{"min.insync.replicas": "2", "unclean.recovery.strategy": "none"}

func (c *client) createTopic(ctx context.Context, cl *cluster) error {
	for {
		cc, err := c.conn(cl.controller)
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var resp *pb.CreateTopicsResponse
			resp, err = pb.NewAdminServiceClient(cc).CreateTopics(rctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{
				Name: c.topic, NumPartitions: c.parts, ReplicationFactor: 3, Configs: topicConfigs}}})
			cancel()
			if err == nil {
				code := resp.GetTopics()[0].GetError()
				if code == pb.ErrorCode_ERROR_CODE_NONE || code == pb.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS {
					return nil
				}
				err = fmt.Errorf("CreateTopics on %s: %v %s", cl.name, code, resp.GetTopics()[0].GetErrorMessage())
			}
		}
		if ctx.Err() != nil {
			return err
		}
		sleepCtx(ctx, time.Second)
	}
}

// setTopicConfigs sets topicConfigs on cl's topic.
func (c *client) setTopicConfigs(ctx context.Context, cl *cluster) error {
	for {
		cc, err := c.conn(cl.controller)
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var resp *pb.AlterConfigsResponse
			resp, err = pb.NewAdminServiceClient(cc).AlterConfigs(rctx, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
				Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: c.topic}, Set: topicConfigs}}})
			cancel()
			if err == nil {
				r := resp.GetResults()[0]
				if r.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
					return nil
				}
				err = fmt.Errorf("AlterConfigs on %s: %v %s", cl.name, r.GetError(), r.GetErrorMessage())
			}
		}
		if ctx.Err() != nil {
			return err
		}
		sleepCtx(ctx, time.Second)
	}
}

// waitTopic waits until every partition of the topic on cl has a leader
// and a full ISR.
func (c *client) waitTopic(ctx context.Context, cl *cluster) error {
	for {
		ok := c.refresh(ctx, cl) == nil
		for p := range c.parts {
			_, l, found := cl.leader(p)
			ok = ok && found && l.isr == l.rep
		}
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// ---- mirror admin (SPEC §6.5, docs/operations.md) ----

func (c *client) mirrorAdmin(cl *cluster) (pb.MirrorServiceClient, error) {
	cc, err := c.conn(cl.controller)
	if err != nil {
		return nil, err
	}
	return pb.NewMirrorServiceClient(cc), nil
}

// describe returns mirror name's partition statuses on cl (nil if the
// mirror does not exist there).
func (c *client) describe(ctx context.Context, cl *cluster, name string) (*pb.MirrorDescription, error) {
	adm, err := c.mirrorAdmin(cl)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := adm.DescribeMirrors(rctx, &pb.DescribeMirrorsRequest{Names: []string{name}})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, m := range resp.GetMirrors() {
		if m.GetName() == name {
			return m, nil
		}
	}
	return nil, nil
}

func shortState(s pb.MirrorState) string {
	return strings.TrimPrefix(s.String(), "MIRROR_STATE_")
}

// statusLine is a compact account of a mirror's partitions.
func statusLine(m *pb.MirrorDescription) string {
	if m == nil {
		return "no mirror"
	}
	var parts []string
	for _, p := range m.GetPartitions() {
		s := fmt.Sprintf("p%d %s/%s lmle %d LE %d LEO %d HW %d srcHW %d lag %d", p.GetPartition(), shortState(p.GetState()), shortState(p.GetDesiredState()),
			p.GetLmle(), p.GetLeaderEpoch(), p.GetLogEndOffset(), p.GetHighWatermark(), p.GetSourceHighWatermark(), p.GetLagRecords())
		if p.GetLastError() != "" {
			s += fmt.Sprintf(" err %q", p.GetLastError())
		}
		if len(p.GetTaints()) > 0 {
			s += fmt.Sprintf(" taints %v", p.GetTaints())
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%s from %s: %s", m.GetName(), m.GetSourceClusterId(), strings.Join(parts, "; "))
}

// emitStatus reports each partition of mirror m on cl: kind "stopped"
// carries the LMLE recorded at the stop, "mirroring" the LMLE the run used
// (SPEC §6.11).
func (c *client) emitStatus(cl *cluster, m *pb.MirrorDescription, era int, kind string) {
	if m == nil {
		return
	}
	for _, p := range m.GetPartitions() {
		if p.GetTopic() == c.topic {
			c.out.emit(event{Ev: "mstatus", Cl: cl.name, TP: c.tp(p.GetPartition()), Era: era, Kind: kind, LE: p.GetLmle(), N: p.GetLogEndOffset(),
				Msg: shortState(p.GetState())})
		}
	}
}

// waitMirror waits until every partition of mirror name on cl reports
// state (runtime, from the destination leaders' heartbeats).
func (c *client) waitMirror(ctx context.Context, cl *cluster, name string, state pb.MirrorState, limit time.Duration) (*pb.MirrorDescription, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last *pb.MirrorDescription
	for {
		m, err := c.describe(ctx, cl, name)
		if err == nil && m != nil {
			last = m
			n := 0
			for _, p := range m.GetPartitions() {
				if p.GetTopic() == c.topic && p.GetState() == state {
					n++
				}
			}
			if n == int(c.parts) {
				return m, nil
			}
		}
		if ctx.Err() != nil {
			return last, fmt.Errorf("mirror %s on %s not %s after %v: %s", name, cl.name, shortState(state), limit, statusLine(last))
		}
		sleepCtx(ctx, 300*time.Millisecond)
	}
}

// desiredIs: every partition of mirror name on cl has desired state st (a
// retried request whose first answer was lost).
func (c *client) desiredIs(ctx context.Context, cl *cluster, name string, st pb.MirrorState) bool {
	m, err := c.describe(ctx, cl, name)
	if err != nil || m == nil {
		return false
	}
	n := 0
	for _, p := range m.GetPartitions() {
		if p.GetTopic() == c.topic && p.GetDesiredState() == st {
			n++
		}
	}
	return n == int(c.parts)
}

func topicError(rs []*pb.MirrorTopicResult) (pb.ErrorCode, string) {
	for _, r := range rs {
		if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			return r.GetError(), r.GetErrorMessage()
		}
	}
	return pb.ErrorCode_ERROR_CODE_NONE, ""
}

// stopMirror asks cl's controller to stop mirror name (SPEC §6.7),
// retrying while the controller is unreachable. timedOut reports a
// waitForCatchUp that ran out (nothing changed).
func (c *client) stopMirror(ctx context.Context, cl *cluster, name string, wait bool, waitLimit time.Duration) (timedOut bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, waitLimit+90*time.Second)
	defer cancel()
	for {
		adm, err := c.mirrorAdmin(cl)
		if err == nil {
			rctx, rcancel := context.WithTimeout(ctx, waitLimit+5*time.Second)
			var resp *pb.StopMirrorTopicsResponse
			resp, err = adm.StopMirrorTopics(rctx, &pb.StopMirrorTopicsRequest{Mirror: name, Topics: []string{c.topic},
				WaitForCatchUp: wait, TimeoutMs: int32(waitLimit.Milliseconds())})
			rcancel()
			if err == nil {
				code, msg := topicError(resp.GetTopics())
				switch {
				case code == pb.ErrorCode_ERROR_CODE_NONE:
					return false, nil
				case code == pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT && wait:
					return true, nil
				case c.desiredIs(ctx, cl, name, pb.MirrorState_MIRROR_STATE_STOPPED):
					return false, nil
				}
				err = fmt.Errorf("StopMirrorTopics %s on %s: %v %s", name, cl.name, code, msg)
			}
		}
		if ctx.Err() != nil {
			return false, err
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// startMirror makes cl mirror the topic from src: CreateMirror the first
// time, StartMirrorTopics (re-pointed at src) after (SPEC §6.6,
// docs/operations.md "Failback").
func (c *client) startMirror(ctx context.Context, cl, src *cluster, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		adm, err := c.mirrorAdmin(cl)
		var m *pb.MirrorDescription
		if err == nil {
			m, err = c.describe(ctx, cl, name)
		}
		if err == nil {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			var code pb.ErrorCode
			var msg string
			if m == nil {
				var resp *pb.CreateMirrorResponse
				resp, err = adm.CreateMirror(rctx, &pb.CreateMirrorRequest{Name: name, SourceBootstrap: src.brokers, Topics: []string{c.topic}})
				if err == nil {
					code, msg = resp.GetError(), resp.GetErrorMessage()
					if code == pb.ErrorCode_ERROR_CODE_NONE {
						code, msg = topicError(resp.GetTopics())
					}
				}
			} else {
				var resp *pb.StartMirrorTopicsResponse
				resp, err = adm.StartMirrorTopics(rctx, &pb.StartMirrorTopicsRequest{Mirror: name, Topics: []string{c.topic}, SourceBootstrap: src.brokers})
				if err == nil {
					code, msg = topicError(resp.GetTopics())
				}
			}
			rcancel()
			if err == nil {
				if code == pb.ErrorCode_ERROR_CODE_NONE || c.desiredIs(ctx, cl, name, pb.MirrorState_MIRROR_STATE_MIRRORING) {
					return nil
				}
				err = fmt.Errorf("start mirror %s on %s: %v %s", name, cl.name, code, msg)
			}
		}
		if ctx.Err() != nil {
			return err
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// ---- data plane ----

type rec struct {
	off int64
	val string
	ep  int32
}

// fetch reads once from p's leader on cl at off with currentLeaderEpoch le.
func (c *client) fetch(ctx context.Context, cl *cluster, p int32, off int64, le int32, wait time.Duration) (*pb.FetchPartitionResponse, []rec, error) {
	addr, _, ok := cl.leader(p)
	if !ok {
		return nil, nil, errors.New("no leader")
	}
	cc, err := c.conn(addr)
	if err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, wait+3*time.Second)
	defer cancel()
	resp, err := pb.NewFetchServiceClient(cc).Fetch(rctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
		MaxWaitMs: int32(wait.Milliseconds()), MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []*pb.FetchPartition{{Topic: c.topic, Partition: p, FetchOffset: off, CurrentLeaderEpoch: le, LastFetchedEpoch: -1}}})
	if err != nil {
		return nil, nil, err
	}
	pr := resp.GetPartitions()[0]
	if pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return pr, nil, nil
	}
	var recs []rec
	for bv, err := range storage.Batches(pr.GetRecords()) {
		if err != nil {
			return nil, nil, err
		}
		rs, err := bv.Records()
		if err != nil {
			return nil, nil, err
		}
		for _, r := range rs {
			recs = append(recs, rec{off: int64(r.Offset), val: string(r.Value), ep: int32(bv.LeaderEpoch())})
		}
	}
	return pr, recs, nil
}

func encodeValue(v string) []byte {
	b, err := storage.EncodeBatch([]storage.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte(v)}}, storage.BatchOptions{})
	if err != nil {
		panic(err)
	}
	return b
}

// produceLoop writes unique values (cluster, era, producer, sequence) with
// acks=all to the cluster the producers target, never retrying a value.
func (c *client) produceLoop(ctx context.Context, id int) {
	for i := 0; ctx.Err() == nil; i++ {
		clName, era, ok := c.ps.pick(id)
		if !ok {
			return
		}
		cl := c.cls[clName]
		p := int32(i % int(c.parts))
		v := fmt.Sprintf("%s%d.p%d.%d", clName, era, id, i)
		errKind := c.produceOne(ctx, cl, p, v, era)
		c.ps.done(errKind)
		if errKind != "" {
			_ = c.refresh(ctx, cl)
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
}

func (c *client) produceOne(ctx context.Context, cl *cluster, p int32, v string, era int) string {
	addr, _, ok := cl.leader(p)
	if !ok {
		return cl.name + ":no-leader"
	}
	cc, err := c.conn(addr)
	if err != nil {
		return cl.name + ":conn"
	}
	rctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	resp, err := pb.NewProduceServiceClient(cc).Produce(rctx, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000,
		Partitions: []*pb.ProducePartitionData{{Topic: c.topic, Partition: p, Records: encodeValue(v)}}})
	cancel()
	if err != nil {
		return cl.name + ":rpc"
	}
	r := resp.GetPartitions()[0]
	if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return cl.name + ":" + strings.TrimPrefix(r.GetError().String(), "ERROR_CODE_")
	}
	c.out.emit(event{Ev: "ack", Cl: cl.name, TP: c.tp(p), Off: r.GetBaseOffset(), Val: v, LE: r.GetLeaderEpoch(), Era: era})
	return ""
}

// consumeLoop reads p on cl from offset 0 as SPEC §4.4 has consumers do:
// it sends the leader epoch it was positioned with, repositions on
// LOG_TRUNCATED{o}, and on FENCED_LEADER_EPOCH adopts the newer epoch only
// after checking its position with OffsetForLeaderEpoch (the epoch of the
// last record it read).
func (c *client) consumeLoop(ctx context.Context, cl *cluster, p int32) {
	name := fmt.Sprintf("c%d", p)
	tp := c.tp(p)
	var next int64
	le, lastEpoch := int32(-1), int32(-1)
	oor := 0
	repos := func(to int64, kind string) {
		c.out.emit(event{Ev: "repos", Cl: cl.name, C: name, TP: tp, Off: to, Kind: kind, N: next})
		next = to
	}
	for ctx.Err() == nil {
		if le < 0 {
			_ = c.refresh(ctx, cl)
			_, l, ok := cl.leader(p)
			if !ok {
				sleepCtx(ctx, 200*time.Millisecond)
				continue
			}
			le = l.le
		}
		pr, recs, err := c.fetch(ctx, cl, p, next, le, 500*time.Millisecond)
		if err != nil {
			_ = c.refresh(ctx, cl)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		switch pr.GetError() {
		case pb.ErrorCode_ERROR_CODE_NONE:
			oor = 0
			hw := pr.GetHighWatermark()
			for _, r := range recs {
				if r.off < next {
					continue
				}
				if r.off >= hw {
					c.out.emit(event{Ev: "violation", Cl: cl.name, TP: tp, Off: r.off, Msg: fmt.Sprintf("read at or above HW %d", hw)})
				}
				c.out.emit(event{Ev: "read", Cl: cl.name, C: name, TP: tp, Off: r.off, Val: r.val, LE: pr.GetLeaderEpoch(), Ep: r.ep})
				next, lastEpoch = r.off+1, r.ep
			}
		case pb.ErrorCode_ERROR_CODE_LOG_TRUNCATED:
			if pr.TruncationOffset != nil && pr.GetTruncationOffset() < next {
				repos(pr.GetTruncationOffset(), "log-truncated")
			}
			lastEpoch = -1 // the epoch below the new position is unknown: nothing to check
		case pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH:
			_ = c.refresh(ctx, cl)
			_, l, ok := cl.leader(p)
			if !ok || l.le <= le {
				sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
			if lastEpoch >= 0 {
				e, o, ok := c.offsetForEpoch(ctx, cl, p, l.le, lastEpoch)
				if !ok {
					sleepCtx(ctx, 100*time.Millisecond)
					continue
				}
				if o < next {
					repos(o, "ofle")
					lastEpoch = -1
				} else if e < lastEpoch {
					lastEpoch = e
				}
			}
			le = l.le
		case pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
			// A new leader's LEO may lag our position for a moment: retry
			// in place, go back to 0 only if it persists.
			if oor++; oor > 50 {
				oor = 0
				c.out.emit(event{Ev: "reset", Cl: cl.name, C: name, TP: tp, Kind: "out-of-range", N: next})
				next, lastEpoch = 0, -1
			}
			_ = c.refresh(ctx, cl)
			sleepCtx(ctx, 100*time.Millisecond)
		default: // NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, ...: find the leader again
			_ = c.refresh(ctx, cl)
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
}

// offsetForEpoch asks p's leader on cl for endOffsetFor(epoch) in
// currentLeaderEpoch le.
func (c *client) offsetForEpoch(ctx context.Context, cl *cluster, p, le, epoch int32) (int32, int64, bool) {
	addr, _, ok := cl.leader(p)
	if !ok {
		return 0, 0, false
	}
	cc, err := c.conn(addr)
	if err != nil {
		return 0, 0, false
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := pb.NewFetchServiceClient(cc).OffsetForLeaderEpoch(rctx, &pb.OffsetForLeaderEpochRequest{Partitions: []*pb.OffsetForLeaderEpochPartition{{
		Topic: c.topic, Partition: p, CurrentLeaderEpoch: le, LeaderEpoch: epoch}}})
	if err != nil || len(resp.GetPartitions()) == 0 || resp.GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return 0, 0, false
	}
	r := resp.GetPartitions()[0]
	return r.GetLeaderEpoch(), r.GetEndOffset(), true
}

// readLog reads p on cl below its HW in one leader epoch, from 0 until
// stop says so or the HW is reached; it starts over when the leader epoch
// changes. It returns the records, the leader epoch, HW and LEO of the
// last answer.
func (c *client) readLog(ctx context.Context, cl *cluster, p int32, stop func(rec) bool) ([]rec, int32, int64, int64, error) {
	for {
		if ctx.Err() != nil {
			return nil, 0, 0, 0, ctx.Err()
		}
		_ = c.refresh(ctx, cl)
		_, l, ok := cl.leader(p)
		if !ok {
			sleepCtx(ctx, 300*time.Millisecond)
			continue
		}
		var out []rec
		var off, hw, leo int64
		restart := false
		for {
			pr, recs, err := c.fetch(ctx, cl, p, off, l.le, 0)
			if err != nil || pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				restart = true
				break
			}
			hw, leo = pr.GetHighWatermark(), pr.GetLogEndOffset()
			if off < pr.GetLogStartOffset() {
				off = pr.GetLogStartOffset()
				continue
			}
			got := false
			for _, r := range recs {
				if r.off < off || r.off >= hw {
					continue
				}
				if stop != nil && stop(r) {
					return out, l.le, r.off, leo, nil
				}
				out = append(out, r)
				off, got = r.off+1, true
			}
			if off >= hw || !got {
				break
			}
		}
		if restart {
			sleepCtx(ctx, 300*time.Millisecond)
			continue
		}
		if off < hw {
			continue // a gap we could not read past: start over
		}
		return out, l.le, hw, leo, nil
	}
}

// ---- metadata observer ----

type partSeen struct {
	le     int32
	points map[int32]bool
}

// observe tails cl's controller change log (FetchMetadata, as brokers do)
// and reports the chaos topic's leader changes, unclean elections and
// truncation points (SPEC §6.2f: every leader truncation of a mirror
// partition is recorded with the leader epoch it installs).
func (c *client) observe(ctx context.Context, cl *cluster) {
	from := int64(1)
	seen := map[int32]*partSeen{}
	note := func(pr *pb.PartitionRecord) {
		if pr.GetTopic() != c.topic {
			return
		}
		s := seen[pr.GetPartition()]
		if s == nil {
			s = &partSeen{le: -1, points: map[int32]bool{}}
			seen[pr.GetPartition()] = s
		}
		tp := c.tp(pr.GetPartition())
		if pr.GetLeaderEpoch() > s.le {
			s.le = pr.GetLeaderEpoch()
			rs := strings.TrimPrefix(pr.GetRecoveryState().String(), "LEADER_RECOVERY_STATE_")
			c.out.emit(event{Ev: "leader", Cl: cl.name, TP: tp, LE: pr.GetLeaderEpoch(), N: int64(pr.GetLeader()), Kind: rs})
			if pr.GetRecoveryState() == pb.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING {
				c.out.emit(event{Ev: "unclean", Cl: cl.name, TP: tp, LE: pr.GetLeaderEpoch(), N: int64(pr.GetLeader())})
			}
		}
		for _, t := range pr.GetTruncationPoints() {
			if !s.points[t.GetLeaderEpoch()] {
				s.points[t.GetLeaderEpoch()] = true
				c.out.emit(event{Ev: "trunc", Cl: cl.name, TP: tp, LE: t.GetLeaderEpoch(), Off: t.GetOffset()})
			}
		}
	}
	// cursor pages through a snapshot (the controller bounds each answer
	// by metadata.fetch.max.bytes). The observer only notes partition
	// records, so it notes each page as it comes instead of gathering the
	// snapshot; from moves past the snapshot only with its last page. A
	// restart on a newer snapshot notes records of two consistent images,
	// which note's per-epoch checks absorb.
	var cursor *pb.SnapshotCursor
	for ctx.Err() == nil {
		cc, err := c.observerConn(cl)
		var resp *pb.FetchMetadataResponse
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			// An answer is up to metadata.fetch.max.bytes (≤ 32 MiB), past
			// gRPC's default 4 MiB receive limit: take what brokers take.
			resp, err = pb.NewControllerServiceClient(cc).FetchMetadata(rctx,
				&pb.FetchMetadataRequest{BrokerId: -1, FromOffset: from, MaxWaitMs: 1000, MaxDeltas: 1000, SnapshotCursor: cursor},
				grpc.MaxCallRecvMsgSize(64<<20))
			cancel()
		}
		if err != nil {
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		if resp.GetError() == pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
			c.out.emit(event{Ev: "note", Cl: cl.name, Msg: fmt.Sprintf("metadata observer: offset %d past the controller's head %d; starting over", from, resp.GetHighOffset())})
			from, cursor = 1, nil
			continue
		}
		if e := resp.GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
			c.out.emit(event{Ev: "note", Cl: cl.name, Msg: fmt.Sprintf("metadata observer: %v (%s); restarting the snapshot", e, resp.GetErrorMessage())})
			cursor = nil
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		if s := resp.GetSnapshot(); s != nil {
			for _, pr := range s.GetPartitions() {
				note(pr)
			}
			cursor = resp.GetNextSnapshotCursor()
			if cursor != nil {
				continue
			}
			from = s.GetOffset() + 1
		} else {
			cursor = nil
		}
		for _, d := range resp.GetDeltas() {
			for _, pr := range d.GetPartitions() {
				note(pr)
			}
			from = d.GetOffset() + 1
		}
		cl.obsMu.Lock()
		cl.obsApplied, cl.obsHigh = from-1, resp.GetHighOffset()
		cl.obsRounds++
		cl.obsMu.Unlock()
	}
}

// syncObserver waits until cl's observer has applied the controller's
// whole change log as of a fresh answer.
func (c *client) syncObserver(ctx context.Context, cl *cluster) error {
	cl.obsMu.Lock()
	start := cl.obsRounds
	cl.obsMu.Unlock()
	for {
		cl.obsMu.Lock()
		ok := cl.obsRounds >= start+2 && cl.obsApplied >= cl.obsHigh
		cl.obsMu.Unlock()
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("metadata observer of %s not caught up: %w", cl.name, ctx.Err())
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// ---- operator ----

// failover stops the mirror on the cluster that is not writable (SPEC
// §6.7): planned — producers paused, then stop with waitForCatchUp (a
// timeout falls back to a plain stop); unplanned — producers move at once,
// producer 0 optionally straggles on the old source, plain stop. Then it
// waits for STOPPED, moves the producers and snapshots the new source's
// log below the first record produced on it in this era.
func (c *client) failover(ctx context.Context, era int, planned bool, straggle time.Duration) error {
	xName, _ := c.ps.current()
	x, y := c.cls[xName], c.cls[other(xName)]
	name := x.name + "-to-" + y.name
	kind := "unplanned"
	if planned {
		kind = "planned"
		c.ps.pause()
		c.out.emit(event{Ev: "paused", Cl: x.name, Era: era - 1})
		timedOut, err := c.stopMirror(ctx, y, name, true, 15*time.Second)
		if err != nil {
			c.ps.set(func() { c.ps.paused = false })
			return err
		}
		if timedOut {
			kind = "planned-timeout"
			m, _ := c.describe(ctx, y, name)
			c.out.emit(event{Ev: "note", Cl: y.name, Era: era, Msg: "stop --wait-for-catch-up timed out; stopping without it: " + statusLine(m)})
			if _, err := c.stopMirror(ctx, y, name, false, 0); err != nil {
				c.ps.set(func() { c.ps.paused = false })
				return err
			}
		}
	} else {
		c.ps.set(func() {
			if straggle > 0 {
				c.ps.straggler, c.ps.stragglerEra, c.ps.stragglerUntil = x.name, era-1, time.Now().Add(straggle)
			}
			c.ps.target, c.ps.era = y.name, era
		})
		if _, err := c.stopMirror(ctx, y, name, false, 0); err != nil {
			return err
		}
	}
	m, err := c.waitMirror(ctx, y, name, pb.MirrorState_MIRROR_STATE_STOPPED, 120*time.Second)
	c.ps.set(func() { c.ps.target, c.ps.era, c.ps.paused = y.name, era, false })
	c.out.emit(event{Ev: "failover", Cl: y.name, Target: x.name, Era: era, Kind: kind, Msg: statusLine(m)})
	if err != nil {
		return err
	}
	c.emitStatus(y, m, era, "stopped")
	return c.snapshot(ctx, y, era)
}

// snapshot reads cl's log of every partition up to the first record
// produced on cl in era (the stop point of the failover that began the
// era), or up to its HW when that equals its LEO and no such record exists.
func (c *client) snapshot(ctx context.Context, cl *cluster, era int) error {
	prefix := fmt.Sprintf("%s%d.", cl.name, era)
	sctx, cancel := context.WithTimeout(ctx, c.snapLimit)
	defer cancel()
	for p := range c.parts {
		for {
			found := false
			recs, le, end, leo, err := c.readLog(sctx, cl, p, func(r rec) bool {
				found = strings.HasPrefix(r.val, prefix)
				return found
			})
			if err != nil {
				c.out.emit(event{Ev: "snapfail", Cl: cl.name, TP: c.tp(p), Era: era, Msg: err.Error()})
				return fmt.Errorf("snapshot of %s %s: %w", cl.name, c.tp(p), err)
			}
			if !found && end != leo {
				sleepCtx(sctx, 300*time.Millisecond) // the stop point may be above the HW still
				continue
			}
			for _, r := range recs {
				c.out.emit(event{Ev: "snap", Cl: cl.name, TP: c.tp(p), Era: era, Off: r.off, Val: r.val, Ep: r.ep, LE: le})
			}
			c.out.emit(event{Ev: "snapend", Cl: cl.name, TP: c.tp(p), Era: era, Off: end, LE: le})
			break
		}
	}
	return nil
}

// failback makes the old source mirror the writable cluster (SPEC §6.6;
// docs/operations.md "Failback"): CreateMirror the first time,
// StartMirrorTopics re-pointed at the new source after; then it waits for
// MIRRORING.
func (c *client) failback(ctx context.Context, era int) error {
	yName, _ := c.ps.current()
	y, x := c.cls[yName], c.cls[other(yName)]
	name := y.name + "-to-" + x.name
	c.ps.set(func() { c.ps.straggler = "" })
	if err := c.startMirror(ctx, x, y, name); err != nil {
		return err
	}
	c.out.emit(event{Ev: "failback", Cl: x.name, Target: y.name, Era: era})
	m, err := c.waitMirror(ctx, x, name, pb.MirrorState_MIRROR_STATE_MIRRORING, 90*time.Second)
	c.out.emit(event{Ev: "mirroring", Cl: x.name, Era: era, Msg: statusLine(m)})
	if err == nil {
		c.emitStatus(x, m, era, "mirroring")
	}
	if err != nil {
		// Not fatal: faults may hold the run in PENDING; the final phase
		// waits for the catch-up.
		c.out.emit(event{Ev: "note", Cl: x.name, Era: era, Msg: err.Error()})
	}
	return nil
}

// finalAll waits until the mirror has caught up on every partition (source
// HW = LEO, destination MIRRORING with the same LEO and HW, full ISRs) and
// streams both clusters' logs below the HW, partition by partition as each
// catches up; one that does not within ctx fails the run, the others are
// still streamed.
func (c *client) finalAll(ctx context.Context) error {
	done := map[int32]bool{}
	why := map[int32]string{}
	for {
		for p := range c.parts {
			if !done[p] {
				done[p], why[p] = c.finalOnce(ctx, p)
			}
		}
		var missing []string
		for p := range c.parts {
			if !done[p] {
				missing = append(missing, fmt.Sprintf("%s: %s", c.tp(p), why[p]))
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			yName, _ := c.ps.current()
			m, _ := c.describe(context.Background(), c.cls[other(yName)], yName+"-to-"+other(yName))
			return fmt.Errorf("not caught up: %s; %s", strings.Join(missing, "; "), statusLine(m))
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// finalOnce streams p's final logs if the mirror has caught up on it, else
// says why not.
func (c *client) finalOnce(ctx context.Context, p int32) (bool, string) {
	yName, _ := c.ps.current()
	y, x := c.cls[yName], c.cls[other(yName)]
	name := y.name + "-to-" + x.name
	_ = c.refresh(ctx, y)
	_ = c.refresh(ctx, x)
	_, ly, oky := y.leader(p)
	_, lx, okx := x.leader(p)
	if !oky || !okx || ly.isr != ly.rep || lx.isr != lx.rep {
		return false, "leaders or full ISRs missing"
	}
	m, err := c.describe(ctx, x, name)
	if err != nil || m == nil {
		return false, fmt.Sprintf("describe %s: %v", name, err)
	}
	i := slices.IndexFunc(m.GetPartitions(), func(s *pb.MirrorPartitionStatus) bool { return s.GetTopic() == c.topic && s.GetPartition() == p })
	if i < 0 || m.GetPartitions()[i].GetState() != pb.MirrorState_MIRROR_STATE_MIRRORING || m.GetPartitions()[i].GetLagRecords() != 0 {
		return false, "mirror not MIRRORING with lag 0"
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ry, ley, hwy, leoy, err := c.readLog(rctx, y, p, nil)
	if err != nil || hwy != leoy {
		return false, fmt.Sprintf("source HW %d LEO %d (%v)", hwy, leoy, err)
	}
	rx, lex, hwx, leox, err := c.readLog(rctx, x, p, nil)
	if err != nil || hwx != leox || hwx != hwy {
		return false, fmt.Sprintf("destination HW %d LEO %d, source HW %d (%v)", hwx, leox, hwy, err)
	}
	for _, r := range ry {
		c.out.emit(event{Ev: "finalrec", Cl: y.name, TP: c.tp(p), Off: r.off, Val: r.val, Ep: r.ep})
	}
	c.out.emit(event{Ev: "final", Cl: y.name, TP: c.tp(p), LE: ley, N: hwy})
	for _, r := range rx {
		c.out.emit(event{Ev: "finalrec", Cl: x.name, TP: c.tp(p), Off: r.off, Val: r.val, Ep: r.ep})
	}
	c.out.emit(event{Ev: "final", Cl: x.name, TP: c.tp(p), LE: lex, N: hwx})
	return true, ""
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
	brokersA := fs.String("brokers-a", "a-broker-1:9091,a-broker-2:9092,a-broker-3:9093", "cluster A brokers")
	brokersB := fs.String("brokers-b", "b-broker-1:9101,b-broker-2:9102,b-broker-3:9103", "cluster B brokers")
	ctlA := fs.String("controller-a", "a-controller:9090", "cluster A controller")
	ctlB := fs.String("controller-b", "b-controller:9100", "cluster B controller")
	topic := fs.String("topic", "chaos", "topic")
	parts := fs.Int("partitions", 3, "partitions")
	nProd := fs.Int("producers", 3, "producer goroutines")
	maxRun := fs.Duration("max-run", 20*time.Minute, "safety cap on the whole client")
	tlsCA := fs.String("tls-ca", "", "PEM bundle of the CAs to trust: turns TLS on")
	tlsCert := fs.String("tls-cert", "", "client certificate, PEM")
	tlsKey := fs.String("tls-key", "", "private key of --tls-cert, PEM")
	obsCert := map[string]*string{}
	obsKey := map[string]*string{}
	for _, n := range []string{"a", "b"} {
		obsCert[n] = fs.String("observer-tls-cert-"+n, "", "certificate of the metadata observer at cluster "+n+"'s controller, which fetches the metadata as broker -1 (with broker.principal.template, that broker's principal; default --tls-cert)")
		obsKey[n] = fs.String("observer-tls-key-"+n, "", "private key of --observer-tls-cert-"+n)
	}
	_ = fs.Parse(args)
	creds, err := transportCredentials(*tlsCA, *tlsCert, *tlsKey)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	mk := func(name, brokers, ctl string) *cluster {
		return &cluster{name: name, brokers: strings.Split(brokers, ","), controller: ctl, leaders: map[int32]leaderInfo{}, addrs: map[int32]string{}}
	}
	c := &client{cls: map[string]*cluster{"a": mk("a", *brokersA, *ctlA), "b": mk("b", *brokersB, *ctlB)},
		topic: *topic, parts: int32(*parts), nProd: *nProd, snapLimit: 2 * time.Minute,
		out: &emitter{enc: json.NewEncoder(os.Stdout)}, conns: map[string]*grpc.ClientConn{}, creds: creds}
	for n, cl := range c.cls {
		if *obsCert[n] != "" || *obsKey[n] != "" {
			if cl.obsCreds, err = transportCredentials(*tlsCA, *obsCert[n], *obsKey[n]); err != nil {
				return fmt.Errorf("tls: observer of %s: %w", n, err)
			}
		}
	}
	c.ps = &producers{target: "a", errs: map[string]int64{}}
	c.ps.cond = sync.NewCond(&c.ps.mu)
	root, cancel := context.WithTimeout(context.Background(), *maxRun)
	defer cancel()

	obsCtx, stopObs := context.WithCancel(root)
	var obsWG sync.WaitGroup
	for _, cl := range c.cls {
		obsWG.Add(1)
		go func() { defer obsWG.Done(); c.observe(obsCtx, cl) }()
	}
	defer func() { stopObs(); obsWG.Wait() }()

	// The topic on A; the mirror creates it on B with A's topic id (SPEC
	// §6.1, docs/operations.md); then B's local configs.
	setup, scancel := context.WithTimeout(root, 3*time.Minute)
	err = c.createTopic(setup, c.cls["a"])
	if err == nil {
		err = c.waitTopic(setup, c.cls["a"])
	}
	if err == nil {
		err = c.startMirror(setup, c.cls["b"], c.cls["a"], "a-to-b")
	}
	if err == nil {
		err = c.setTopicConfigs(setup, c.cls["b"])
	}
	if err == nil {
		err = c.waitTopic(setup, c.cls["b"])
	}
	var m *pb.MirrorDescription
	if err == nil {
		m, err = c.waitMirror(setup, c.cls["b"], "a-to-b", pb.MirrorState_MIRROR_STATE_MIRRORING, 2*time.Minute)
	}
	scancel()
	if err != nil {
		return fmt.Errorf("set-up: %w", err)
	}
	c.out.emit(event{Ev: "ready", Msg: fmt.Sprintf("topic %s, %d partitions on A and B, %d producers; %s", c.topic, c.parts, c.nProd, statusLine(m))})

	work, stopWork := context.WithCancel(root)
	defer stopWork()
	var wg sync.WaitGroup
	for i := range c.nProd {
		wg.Add(1)
		go func() { defer wg.Done(); c.produceLoop(work, i) }()
	}
	for _, cl := range c.cls {
		for p := range c.parts {
			wg.Add(1)
			go func() { defer wg.Done(); c.consumeLoop(work, cl, p) }()
		}
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		c.ps.set(func() { c.ps.stopped = true })
		stopWork()
		wg.Wait()
		c.ps.mu.Lock()
		for k, n := range c.ps.errs {
			c.out.emit(event{Ev: "stats", Kind: "produce-error " + k, N: n})
		}
		c.ps.mu.Unlock()
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		var err error
		switch f[0] {
		case "failover": // failover ERA planned|unplanned STRAGGLE_MS
			if len(f) != 4 {
				return fmt.Errorf("bad command %q", in.Text())
			}
			era, _ := strconv.Atoi(f[1])
			ms, _ := strconv.Atoi(f[3])
			err = c.failover(root, era, f[2] == "planned", time.Duration(ms)*time.Millisecond)
			c.out.emit(event{Ev: "op-done", Kind: "failover", Era: era, Msg: errString(err)})
		case "failback": // failback ERA
			if len(f) != 2 {
				return fmt.Errorf("bad command %q", in.Text())
			}
			era, _ := strconv.Atoi(f[1])
			err = c.failback(root, era)
			c.out.emit(event{Ev: "op-done", Kind: "failback", Era: era, Msg: errString(err)})
		case "stop":
			stop()
			c.out.emit(event{Ev: "stopped"})
		case "final":
			stop()
			fctx, fcancel := context.WithTimeout(root, 4*time.Minute)
			errs := []error{c.finalAll(fctx)}
			fcancel()
			// The change logs up to now, whatever the catch-up did.
			octx, ocancel := context.WithTimeout(root, time.Minute)
			for _, cl := range c.cls {
				errs = append(errs, c.syncObserver(octx, cl))
			}
			ocancel()
			err = errors.Join(errs...)
			if err != nil {
				c.out.emit(event{Ev: "final-failed", Msg: err.Error()})
				return err
			}
			c.out.emit(event{Ev: "done"})
			return nil
		default:
			return fmt.Errorf("unknown command %q", in.Text())
		}
		if err != nil {
			c.out.emit(event{Ev: "op-error", Msg: err.Error()})
		}
	}
	stop()
	return errors.New("stdin closed before \"final\"")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
