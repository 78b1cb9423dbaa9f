// Package brokertest is the in-process cluster harness (like etcd's
// rafttest and franz-go's kfake): a real controller and N real brokers on a
// bufconn network with crashable in-memory disks, plus a small client.
//
//	c := brokertest.NewCluster(t, brokertest.Options{Brokers: 3, Cluster: "a"})
//	c.CreateTopic("orders", 1, 3, nil)
//	off := c.MustProduce(ctx, "orders", 0, -1, []byte("v"))
//	c.KillBroker(1); c.RestartBroker(1)
//	c.Cut(1, 2); c.Heal(1, 2)
//	c.WaitFor("ISR full", func() bool { ... })
//
// WaitFor re-checks its condition whenever any broker reports a state change
// (metadata applied, LEO/HW/role moved); it never sleeps to synchronise.
package brokertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/controller"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/transport"
	"github.com/twinlog/twinlog/storage"
)

// ControllerNode names the controller in Cut/Heal.
const ControllerNode twinlog.BrokerID = -1

// Options configure a Cluster. Zero values take test-friendly defaults.
type Options struct {
	// Brokers is the number of brokers (ids 1..Brokers), default 3.
	Brokers int
	// Cluster names the cluster and prefixes node names, default "a".
	Cluster string
	// MinISR is the cluster's min.insync.replicas, default 1 (SPEC §1.3).
	MinISR int
	// ReplicaLagTimeMax, default 1s.
	ReplicaLagTimeMax time.Duration
	// SessionTimeout is broker.session.timeout.ms, default 1.5s.
	SessionTimeout time.Duration
	// DiskDirs uses t.TempDir() on the OS file system instead of MemFS
	// (KillBroker then cannot drop unsynced data).
	DiskDirs bool
	// FlushPolicy for every broker.
	FlushPolicy broker.FlushPolicy
	// ClusterConfigs are extra cluster configs for the controller.
	ClusterConfigs map[string]string
	// Network to join (TwoClusters shares one); nil creates one.
	Network *Network
	// LogLevel of the test logger, default Warn.
	LogLevel slog.Level
	// LogOutput receives the daemons' logs instead of t.Log (a fuzz target
	// may not log through its F).
	LogOutput io.Writer
	// Configure adjusts each broker's Config before New.
	Configure func(*broker.Config)
	// Observer for every broker (nil: none).
	Observer func(id twinlog.BrokerID) broker.Observer
	// ControllerObserver for the controller (nil: none).
	ControllerObserver controller.Observer
	// Transport gives each node (by node name: "a-controller", "a-1", the
	// test client "a-client") its TLS; nil, or nil for a node: plaintext.
	Transport func(node string) *transport.Transport
	// Authz configures the controller's and brokers' authorizers.
	Authz authz.Config
}

// transport returns node's TLS (nil: plaintext) and registers its client
// credentials with the network.
func (c *Cluster) transport(node string) *transport.Transport {
	if c.opts.Transport == nil {
		return nil
	}
	t := c.opts.Transport(node)
	c.Net.SetTransport(node, t)
	return t
}

// Cluster is one running cluster.
type Cluster struct {
	T    testing.TB
	Name string
	Net  *Network
	opts Options
	log  *slog.Logger

	ctl       *controller.Controller
	ctlAddr   string
	ctlCancel context.CancelFunc
	ctlDone   chan error

	mu      sync.Mutex
	nodes   map[twinlog.BrokerID]*node
	changed chan struct{}

	conns *rpcopt.Pool // from the test client node

	logClosed *atomic.Bool
}

type node struct {
	id     twinlog.BrokerID
	addr   string
	mem    *storage.MemFS
	dir    string
	b      *broker.Broker
	cancel context.CancelFunc
	done   chan error
}

// NewCluster starts a controller and opts.Brokers brokers and waits until
// every broker is registered, unfenced and has applied the metadata.
func NewCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Brokers <= 0 {
		opts.Brokers = 3
	}
	if opts.Cluster == "" {
		opts.Cluster = "a"
	}
	if opts.MinISR <= 0 {
		opts.MinISR = 1
	}
	if opts.ReplicaLagTimeMax <= 0 {
		opts.ReplicaLagTimeMax = time.Second
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 1500 * time.Millisecond
	}
	if opts.LogLevel == 0 {
		opts.LogLevel = slog.LevelWarn
	}
	if opts.Network == nil {
		opts.Network = NewNetwork()
	}
	var closed atomic.Bool
	var logOut io.Writer = testWriter{t, &closed}
	if opts.LogOutput != nil {
		logOut = opts.LogOutput
	}
	c := &Cluster{
		logClosed: &closed,
		T:         t, Name: opts.Cluster, Net: opts.Network, opts: opts,
		log:     slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: opts.LogLevel})).With("cluster", opts.Cluster),
		nodes:   map[twinlog.BrokerID]*node{},
		changed: make(chan struct{}),
	}
	c.transport(c.Name + "-client")
	c.conns = rpcopt.NewPool(c.Net.Dial(c.Name + "-client"))
	c.ctlAddr = c.nodeName(ControllerNode) + ":9090"
	cfgs := map[string]string{
		"min.insync.replicas":          strconv.Itoa(opts.MinISR),
		"broker.session.timeout.ms":    strconv.FormatInt(opts.SessionTimeout.Milliseconds(), 10),
		"broker.heartbeat.interval.ms": "100",
	}
	if n := opts.Cluster; len(n) == 1 && n[0] >= 'a' && n[0] <= 'z' {
		// Distinct, explicit producer id spaces (a 1, b 2, ...), as the
		// deployments set them: clusters that mirror each other must not
		// share one. Other names keep the space derived from the id.
		cfgs["producer.id.space"] = strconv.Itoa(int(n[0]-'a') + 1) // metadata.KeyProducerIDSpace
	}
	for k, v := range opts.ClusterConfigs {
		cfgs[k] = v
	}
	ctl, err := controller.New(controller.Config{
		DataDir:        t.TempDir(),
		ClusterID:      "cluster-" + opts.Cluster,
		TickInterval:   50 * time.Millisecond,
		MaxFetchWait:   2 * time.Second,
		ClusterConfigs: cfgs,
		Authz:          opts.Authz,
	}, controller.Deps{
		// Each cluster draws its own topic ids: two clusters seeded alike
		// would hand the same id to different topics (a mirror then sees
		// INCONSISTENT_TOPIC_ID).
		Rand:      rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(len(opts.Cluster))<<8|uint64(opts.Cluster[0]))),
		Logger:    c.log,
		Dial:      rpcopt.Dialer(c.Net.Dial(c.nodeName(ControllerNode))),
		Listener:  c.Net.Listen(c.ctlAddr),
		Transport: c.transport(c.nodeName(ControllerNode)),
		Observer:  opts.ControllerObserver,
	})
	if err != nil {
		t.Fatalf("controller.New: %v", err)
	}
	c.ctl = ctl
	ctx, cancel := context.WithCancel(context.Background())
	c.ctlCancel, c.ctlDone = cancel, make(chan error, 1)
	go func() { c.ctlDone <- ctl.Run(ctx) }()
	t.Cleanup(c.Close)
	for i := 1; i <= opts.Brokers; i++ {
		id := twinlog.BrokerID(i)
		n := &node{id: id, addr: c.nodeName(id) + ":9092"}
		if opts.DiskDirs {
			n.dir = t.TempDir()
		} else {
			n.mem = storage.NewMemFS()
			n.dir = "/data/" + c.nodeName(id)
		}
		c.nodes[id] = n
		c.start(n)
	}
	c.WaitFor("all brokers registered and unfenced", func() bool { return c.allUnfenced() })
	return c
}

// TwoClusters starts clusters "a" and "b" (3 brokers each, separate
// controllers and ids) on one network, as the mirror tests need.
func TwoClusters(t testing.TB) (a, b *Cluster) {
	nw := NewNetwork()
	a = NewCluster(t, Options{Cluster: "a", Network: nw})
	b = NewCluster(t, Options{Cluster: "b", Network: nw})
	return a, b
}

// testWriter sends logs to the test log until the cluster is closed (a
// late goroutine must not log into a finished test).
type testWriter struct {
	t      testing.TB
	closed *atomic.Bool
}

func (w testWriter) Write(p []byte) (int, error) {
	if !w.closed.Load() {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (c *Cluster) nodeName(id twinlog.BrokerID) string {
	if id == ControllerNode {
		return c.Name + "-controller"
	}
	return fmt.Sprintf("%s-%d", c.Name, id)
}

// KafkaClientNode names the node Kafka clients dial from (KafkaDialer), for
// Cut and Heal with a broker's node name.
const KafkaClientNode = "kafka-client"

// kafkaAddr is broker id's Kafka listener on the network.
func (c *Cluster) kafkaAddr(id twinlog.BrokerID) string { return c.nodeName(id) + ":19092" }

// KafkaAddrs are the brokers' Kafka listeners, for kgo.SeedBrokers.
func (c *Cluster) KafkaAddrs() []string {
	var out []string
	for _, id := range c.IDs() {
		out = append(out, c.kafkaAddr(id))
	}
	return out
}

// KafkaDialer dials a broker's Kafka listener on the network from
// KafkaClientNode, for kgo.Dialer.
func (c *Cluster) KafkaDialer() func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, _, host string) (net.Conn, error) {
		return c.Net.DialConn(ctx, KafkaClientNode, host)
	}
}

// ControllerAddr is the controller's address on the network.
func (c *Cluster) ControllerAddr() string { return c.ctlAddr }

// Controller returns the running controller.
func (c *Cluster) Controller() *controller.Controller { return c.ctl }

// Addr is broker id's address.
func (c *Cluster) Addr(id twinlog.BrokerID) string { return c.node(id).addr }

func (c *Cluster) node(id twinlog.BrokerID) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[id]
	if n == nil {
		c.T.Fatalf("no broker %d", id)
	}
	return n
}

// IDs lists the broker ids.
func (c *Cluster) IDs() []twinlog.BrokerID {
	c.mu.Lock()
	n := c.opts.Brokers
	c.mu.Unlock()
	out := make([]twinlog.BrokerID, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, twinlog.BrokerID(i))
	}
	return out
}

// AddBroker starts a new broker with the next id on a fresh disk (a
// replacement joining the cluster, e.g. the target of a reassignment away
// from a broker lost for good) and waits until the controller lists it
// registered and unfenced. It returns the new id.
func (c *Cluster) AddBroker() twinlog.BrokerID {
	c.T.Helper()
	var dir string
	if c.opts.DiskDirs {
		dir = c.T.TempDir()
	}
	c.mu.Lock()
	id := twinlog.BrokerID(c.opts.Brokers + 1)
	n := &node{id: id, addr: c.nodeName(id) + ":9092", dir: dir}
	if !c.opts.DiskDirs {
		n.mem = storage.NewMemFS()
		n.dir = "/data/" + c.nodeName(id)
	}
	c.nodes[id] = n
	c.opts.Brokers++
	c.mu.Unlock()
	c.start(n)
	c.WaitFor(fmt.Sprintf("broker %d registered and unfenced", id), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		lb, err := c.Admin().ListBrokers(ctx, &pb.ListBrokersRequest{})
		if err != nil {
			return false
		}
		for _, b := range lb.GetBrokers() {
			if b.GetBrokerId() == int32(id) && !b.GetFenced() {
				return c.allUnfenced()
			}
		}
		return false
	})
	return id
}

// Broker returns the running broker id (nil if stopped).
func (c *Cluster) Broker(id twinlog.BrokerID) *broker.Broker {
	n := c.node(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.cancel == nil {
		return nil
	}
	return n.b
}

func (c *Cluster) start(n *node) {
	cfg := broker.Config{
		ID:                        n.id,
		ClusterID:                 "cluster-" + c.Name,
		AdvertisedAddr:            n.addr,
		KafkaAdvertisedAddr:       c.kafkaAddr(n.id),
		ControllerAddr:            c.ctlAddr,
		LogDirs:                   []string{filepath.Join(n.dir, "logs")},
		FlushPolicy:               c.opts.FlushPolicy,
		ReplicaLagTimeMax:         c.opts.ReplicaLagTimeMax,
		HeartbeatInterval:         100 * time.Millisecond,
		TickInterval:              50 * time.Millisecond,
		MetadataMaxWait:           time.Second,
		ReplicaFetchMaxWait:       200 * time.Millisecond,
		RPCTimeout:                2 * time.Second,
		ControlledShutdownTimeout: 3 * time.Second,
		Authz:                     c.opts.Authz,
	}
	if c.opts.Configure != nil {
		c.opts.Configure(&cfg)
	}
	var fs storage.FS = storage.OSFS{}
	if n.mem != nil {
		fs = n.mem
	}
	deps := broker.Deps{
		FS:            fs,
		Dial:          broker.Dialer(c.Net.Dial(c.nodeName(n.id))),
		Listener:      c.Net.Listen(n.addr),
		KafkaListener: c.Net.Listen(c.kafkaAddr(n.id)),
		Logger:        c.log,
		Transport:     c.transport(c.nodeName(n.id)),
	}
	if c.opts.Observer != nil {
		deps.Observer = c.opts.Observer(n.id)
	}
	b, err := broker.New(cfg, deps)
	if err != nil {
		c.T.Fatalf("broker %d: New: %v", n.id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c.mu.Lock()
	n.b, n.cancel, n.done = b, cancel, done
	c.mu.Unlock()
	go func() { done <- b.Run(ctx) }()
	// Relay the broker's change notifications to the cluster's.
	go func() {
		for {
			ch := b.Changed()
			select {
			case <-ch:
				c.notify()
			case <-ctx.Done():
				c.notify()
				return
			}
		}
	}()
	c.notify()
}

func (c *Cluster) notify() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Changed is closed at the next state change of any broker.
func (c *Cluster) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// StopBroker shuts broker id down cleanly (controlled shutdown, flush,
// clean-shutdown file).
func (c *Cluster) StopBroker(id twinlog.BrokerID) {
	c.T.Helper()
	n := c.node(id)
	c.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel = nil
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	if err := <-done; err != nil {
		c.T.Errorf("broker %d Run: %v", id, err)
	}
	c.notify()
}

// KillBroker stops broker id like kill -9: nothing is flushed; with MemFS
// the unsynced data is lost (CrashClone).
func (c *Cluster) KillBroker(id twinlog.BrokerID) {
	c.T.Helper()
	n := c.node(id)
	c.mu.Lock()
	cancel, done, b := n.cancel, n.done, n.b
	n.cancel = nil
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	b.Crash()
	<-done
	cancel()
	if n.mem != nil {
		n.mem = n.mem.CrashClone()
	}
	c.notify()
}

// RestartBroker starts a stopped or killed broker on its (surviving) disk.
func (c *Cluster) RestartBroker(id twinlog.BrokerID) {
	c.T.Helper()
	n := c.node(id)
	c.mu.Lock()
	running := n.cancel != nil
	c.mu.Unlock()
	if running {
		c.T.Fatalf("broker %d is running", id)
	}
	c.start(n)
}

// Running reports whether broker id runs.
func (c *Cluster) Running(id twinlog.BrokerID) bool {
	n := c.node(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.cancel != nil
}

// Cut severs the link between two nodes (ControllerNode for the controller).
func (c *Cluster) Cut(a, b twinlog.BrokerID) { c.Net.Cut(c.nodeName(a), c.nodeName(b)) }

// Heal restores the link between two nodes.
func (c *Cluster) Heal(a, b twinlog.BrokerID) {
	c.Net.Heal(c.nodeName(a), c.nodeName(b))
	c.notify()
}

// Close stops every broker cleanly and then the controller.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, id := range c.IDs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := c.node(id)
			c.mu.Lock()
			cancel, done, b := n.cancel, n.done, n.b
			n.cancel = nil
			c.mu.Unlock()
			if cancel == nil {
				return
			}
			// Tests end with crashes: no controlled shutdown wait.
			b.Crash()
			<-done
			cancel()
		}()
	}
	wg.Wait()
	c.conns.Close()
	if c.ctlCancel != nil {
		c.ctlCancel()
		<-c.ctlDone
		c.ctlCancel = nil
	}
	c.logClosed.Store(true)
}

// WaitFor blocks until cond holds, re-checking at every broker state change;
// it fails the test after 30 s.
func (c *Cluster) WaitFor(what string, cond func() bool) {
	c.T.Helper()
	c.WaitForTimeout(what, 30*time.Second, cond)
}

// WaitForTimeout is WaitFor with an explicit deadline.
func (c *Cluster) WaitForTimeout(what string, d time.Duration, cond func() bool) {
	c.T.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		ch := c.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			c.T.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

func (c *Cluster) allUnfenced() bool {
	for _, id := range c.IDs() {
		b := c.Broker(id)
		if b == nil {
			continue
		}
		md, err := c.metadataFrom(id, nil)
		if err != nil || len(md.GetBrokers()) < c.runningCount() {
			return false
		}
	}
	return true
}

func (c *Cluster) runningCount() int {
	n := 0
	for _, id := range c.IDs() {
		if c.Running(id) {
			n++
		}
	}
	return n
}

// conn returns a client connection from the test client node to addr.
func (c *Cluster) conn(addr string) rpcopt.Conn {
	cc, err := c.conns.Get(addr)
	if err != nil {
		c.T.Fatalf("dial %s: %v", addr, err)
	}
	return cc
}

// Admin is an AdminService client to the controller.
func (c *Cluster) Admin() pb.AdminServiceClient { return pb.NewAdminServiceClient(c.conn(c.ctlAddr)) }

// FetchClient is a FetchService client to broker id.
func (c *Cluster) FetchClient(id twinlog.BrokerID) pb.FetchServiceClient {
	return pb.NewFetchServiceClient(c.conn(c.Addr(id)))
}

// GroupClient is a GroupService client to broker id.
func (c *Cluster) GroupClient(id twinlog.BrokerID) pb.GroupServiceClient {
	return pb.NewGroupServiceClient(c.conn(c.Addr(id)))
}

// ProduceClient is a ProduceService client to broker id.
func (c *Cluster) ProduceClient(id twinlog.BrokerID) pb.ProduceServiceClient {
	return pb.NewProduceServiceClient(c.conn(c.Addr(id)))
}

func (c *Cluster) metadataFrom(id twinlog.BrokerID, topics []string) (*pb.MetadataResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.FetchClient(id).Metadata(ctx, &pb.MetadataRequest{Topics: topics})
}
