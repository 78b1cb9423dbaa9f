package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/internal/rpcopt"
)

// fakeClock is the injected clock: tests move it and call Tick.
type fakeClock struct{ ms atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(1_700_000_000_000)
	return c
}
func (c *fakeClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// netw is a bufconn address registry shared by the controller and fake
// brokers ("host:port" → listener).
type netw struct {
	mu   sync.Mutex
	lis  map[string]*bufconn.Listener
	down map[string]bool
}

func newNet() *netw { return &netw{lis: map[string]*bufconn.Listener{}, down: map[string]bool{}} }

func (n *netw) listen(addr string) *bufconn.Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := bufconn.Listen(1 << 20)
	n.lis[addr] = l
	return l
}

func (n *netw) dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			n.mu.Lock()
			l, down := n.lis[addr], n.down[addr]
			n.mu.Unlock()
			if l == nil || down {
				return nil, fmt.Errorf("bufnet: %s unreachable", addr)
			}
			return l.DialContext(ctx)
		}))
}

type harness struct {
	t      *testing.T
	dir    string
	clock  *fakeClock
	net    *netw
	addr   string
	c      *Controller
	conn   *grpc.ClientConn
	ctl    twinlogv1.ControllerServiceClient
	admin  twinlogv1.AdminServiceClient
	mirror twinlogv1.MirrorServiceClient
	cancel context.CancelFunc
	done   chan error
}

type hopt func(*Config)

func startController(t *testing.T, dir string, clock *fakeClock, nw *netw, opts ...hopt) *harness {
	t.Helper()
	return startWith(t, dir, nil, clock, nw, opts...)
}

// startOnStore starts a controller on store instead of a bbolt file; the
// controller owns (and closes) it.
func startOnStore(t *testing.T, store Store, clock *fakeClock, nw *netw, opts ...hopt) *harness {
	t.Helper()
	return startWith(t, "", store, clock, nw, opts...)
}

func startWith(t *testing.T, dir string, store Store, clock *fakeClock, nw *netw, opts ...hopt) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, clock: clock, net: nw, addr: "controller:9093"}
	cfg := Config{
		DataDir:   dir,
		ClusterID: "test-cluster",
		// Run's ticker never fires: tests drive Tick with the fake clock.
		TickInterval:       time.Hour,
		RecoveryRPCTimeout: 2 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := New(cfg, Deps{
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
		Now:      clock.Now,
		Dial:     rpcopt.Dialer(nw.dial),
		Listener: nw.listen(h.addr),
		Store:    store,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- c.Run(ctx) }()
	h.conn, err = nw.dial(h.addr)
	if err != nil {
		t.Fatal(err)
	}
	h.ctl = twinlogv1.NewControllerServiceClient(h.conn)
	h.admin = twinlogv1.NewAdminServiceClient(h.conn)
	h.mirror = twinlogv1.NewMirrorServiceClient(h.conn)
	t.Cleanup(h.stop)
	return h
}

// stop shuts the controller down cleanly (idempotent).
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	_ = h.conn.Close()
	if err := <-h.done; err != nil {
		h.t.Errorf("Run: %v", err)
	}
}

func (h *harness) tick() {
	h.t.Helper()
	if err := h.c.Tick(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
}

// register registers broker id and returns its epoch.
func (h *harness) register(id int32, prevEpoch int64) int64 {
	h.t.Helper()
	resp, err := h.ctl.RegisterBroker(h.t.Context(), &twinlogv1.RegisterBrokerRequest{
		BrokerId: id, IncarnationId: fmt.Sprintf("inc-%d", id), Host: fmt.Sprintf("b%d", id), Port: 9092,
		LogDirs: []string{"/data"}, PreviousBrokerEpoch: prevEpoch,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		h.t.Fatalf("register %d: %v %s", id, resp.GetError(), resp.GetErrorMessage())
	}
	return resp.GetBrokerEpoch()
}

// heartbeat sends a heartbeat claiming the controller's current offset as
// applied (so a registered broker unfences).
func (h *harness) heartbeat(id int32, epoch int64) *twinlogv1.BrokerHeartbeatResponse {
	h.t.Helper()
	resp, err := h.ctl.BrokerHeartbeat(h.t.Context(), &twinlogv1.BrokerHeartbeatRequest{
		BrokerId: id, BrokerEpoch: epoch, AppliedOffset: h.c.Offset(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// upBrokers registers and unfences brokers 1..n, returning their epochs.
func (h *harness) upBrokers(n int) map[int32]int64 {
	h.t.Helper()
	epochs := map[int32]int64{}
	for id := int32(1); id <= int32(n); id++ {
		epochs[id] = h.register(id, -1)
	}
	for id := int32(1); id <= int32(n); id++ {
		if r := h.heartbeat(id, epochs[id]); r.GetIsFenced() {
			h.t.Fatalf("broker %d still fenced after heartbeat: %v", id, r)
		}
	}
	return epochs
}

func (h *harness) createTopic(name string, parts, rf int32, configs map[string]string) {
	h.t.Helper()
	resp, err := h.admin.CreateTopics(h.t.Context(), &twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{{
		Name: name, NumPartitions: parts, ReplicationFactor: rf, Configs: configs,
	}}})
	if err != nil {
		h.t.Fatal(err)
	}
	if e := resp.GetTopics()[0].GetError(); e != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		h.t.Fatalf("create %s: %v %s", name, e, resp.GetTopics()[0].GetErrorMessage())
	}
}

func (h *harness) partition(topic string, p int32) *twinlogv1.PartitionRecord {
	h.c.mu.RLock()
	defer h.c.mu.RUnlock()
	return h.c.state.Partition(topic, p)
}

// fakeBroker serves ReplicationService.GetReplicaLogInfo with fixed answers.
type fakeBroker struct {
	twinlogv1.UnimplementedReplicationServiceServer
	epoch  atomic.Int64
	lwe    int32
	leo    int64
	calls  atomic.Int32
	block  chan struct{} // if non-nil, answers wait for it
	server *grpc.Server
}

func startFakeBroker(t *testing.T, nw *netw, addr string, epoch int64, lwe int32, leo int64) *fakeBroker {
	fb := &fakeBroker{lwe: lwe, leo: leo}
	fb.epoch.Store(epoch)
	fb.server = grpc.NewServer()
	twinlogv1.RegisterReplicationServiceServer(fb.server, fb)
	lis := nw.listen(addr)
	go func() { _ = fb.server.Serve(lis) }()
	t.Cleanup(fb.server.Stop)
	return fb
}

func (fb *fakeBroker) GetReplicaLogInfo(ctx context.Context, req *twinlogv1.GetReplicaLogInfoRequest) (*twinlogv1.GetReplicaLogInfoResponse, error) {
	fb.calls.Add(1)
	if fb.block != nil {
		select {
		case <-fb.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp := &twinlogv1.GetReplicaLogInfoResponse{BrokerEpoch: fb.epoch.Load()}
	for _, t := range req.GetTopics() {
		tr := &twinlogv1.GetReplicaLogInfoTopicResponse{Topic: t.GetTopic()}
		for _, p := range t.GetPartitions() {
			tr.Partitions = append(tr.Partitions, &twinlogv1.ReplicaLogInfo{
				Partition: p, LastWrittenLeaderEpoch: fb.lwe, LogEndOffset: fb.leo,
			})
		}
		resp.Topics = append(resp.Topics, tr)
	}
	return resp, nil
}
