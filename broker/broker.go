package broker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/alter"
	"github.com/twinlog/twinlog/broker/codec"
	"github.com/twinlog/twinlog/broker/coord"
	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/broker/metaloop"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/session"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/transport"
	"github.com/twinlog/twinlog/storage"
)

// Broker is the I/O shell around one replica.Replica per hosted partition
// (see doc.go).
type Broker struct {
	cfg  Config
	fs   storage.FS
	dial Dialer
	// tls is the listeners' and dialler's TLS (nil: plaintext); authz
	// authorizes both listeners' requests, its ACLs following the image
	// (Checker.Follow, under metaMu).
	tls   *transport.Transport
	authz *authz.Checker
	now   func() time.Time
	log   *slog.Logger
	obs   Observer
	lis   net.Listener
	// klis and kafka are the Kafka protocol listener and its server (nil
	// without one).
	klis  net.Listener
	kafka *kafka.Server
	// groups hosts the group coordinators of the __consumer_offsets
	// partitions this broker leads (nil without a Kafka listener).
	groups *coord.Host
	// caughtUp is closed when the metadata image first holds this
	// broker's own registration: only then does the Kafka listener
	// accept, as Kafka's brokers process requests only once caught up
	// with the metadata log. Before it, a restarted broker's empty image
	// answered UNKNOWN_TOPIC_OR_PARTITION, which clients retry only a few
	// times before failing the records.
	caughtUp     chan struct{}
	caughtUpOnce sync.Once

	dirs   []*storage.LogDir
	prevEp twinlog.BrokerEpoch // from the clean-shutdown files (SPEC §2.5)
	// offline are the partitions whose log failed to open at start
	// (storage.ErrLogOffline); fixed for the life of the process.
	offline map[twinlog.TopicPartition]error
	// offlineReport is offline as heartbeats report it to the controller
	// (for ListBrokers, twinctl brokers list); built once, read-only.
	offlineReport []*pb.OfflinePartition
	incarn        string

	grpc   *grpc.Server
	health *health.Server
	codec  *codec.Server

	crashc    chan struct{}
	crashOnce sync.Once
	runOnce   sync.Once

	conns *rpcopt.Pool // to controllers, leaders, other clusters' brokers

	metaMu sync.Mutex
	image  *metadata.Image
	// metaCluster is the cluster id the controller's FetchMetadata names.
	metaCluster string

	partsMu sync.RWMutex
	parts   map[twinlog.TopicPartition]*partition

	fetchMu  sync.Mutex
	fetchers map[twinlog.BrokerID]*fetcher

	changeMu    sync.Mutex
	changed     chan struct{}
	changeTaken bool // Changed handed out changed since it was made

	// keeper keeps the registration and sends the heartbeats
	// (keeper.go); registeredc closes at the first registration.
	keeper      *session.Keeper
	meta        *metaloop.Loop // the metadata loop (metadata.go), from registration
	registeredc chan struct{}
	regFatal    chan error    // a registration the controller refused as invalid
	grantedc    chan struct{} // closed when a controlled shutdown is granted
	grantOnce   sync.Once
	wg          sync.WaitGroup
	// runCtx is Run's inner context (it outlives Run's ctx through the
	// controlled shutdown); the shared loops' goroutines (seam.go) stop
	// with it.
	runCtx  context.Context
	stopRun context.CancelFunc

	// Mirror runners (mirror.go) and what this broker read of
	// __mirror_state (mirrorstate.go).
	mobs     MirrorObserver
	mirrorMu sync.Mutex
	runners  map[twinlog.TopicPartition]*mirrorRunner
	mstate   mirrorStateStore

	// pids hands out idempotent producer ids (producerids.go).
	pids *producerIDs
}

// New validates cfg, opens the log dirs (taking their clean-shutdown files,
// SPEC §2.5) and builds the gRPC server. Run registers and serves.
func New(cfg Config, deps Deps) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	b := &Broker{
		cfg: cfg, fs: deps.FS, dial: deps.Dial, now: deps.Now, log: deps.Logger, obs: deps.Observer,
		lis: deps.Listener, klis: deps.KafkaListener, crashc: make(chan struct{}), caughtUp: make(chan struct{}),
		image: metadata.New(""), parts: map[twinlog.TopicPartition]*partition{},
		fetchers: map[twinlog.BrokerID]*fetcher{}, changed: make(chan struct{}),
		registeredc: make(chan struct{}), regFatal: make(chan error, 1), grantedc: make(chan struct{}),
		tls: deps.Transport,
	}
	b.runCtx, b.stopRun = context.WithCancel(context.Background())
	if b.fs == nil {
		b.fs = storage.OSFS{}
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.log = b.log.With("component", "broker", "broker_id", cfg.ID)
	acfg := cfg.Authz
	acfg.Logger = b.log.With("component", "authorizer")
	acfg.Users = b.scramCredential
	acfg.AwaitACLs = true // from the metadata it loads (broker/metadata.go)
	b.authz = authz.NewChecker(acfg)
	if b.obs == nil {
		b.obs = nopObserver{}
	}
	b.mobs = nopMirrorObserver{}
	if mo, ok := b.obs.(MirrorObserver); ok {
		b.mobs = mo
	}
	b.runners = map[twinlog.TopicPartition]*mirrorRunner{}
	pobs, _ := b.obs.(ProducerIDObserver) // nil: none
	b.pids = newProducerIDs(b.allocateProducerIDs, pobs)
	b.mstate.Store = state.NewStore(stateLog{b}, func(sp int32, off twinlog.Offset, err error) {
		b.log.Warn("skipping unreadable __mirror_state record", "partition", sp, "offset", off, "err", err)
	})
	if b.dial == nil {
		b.dial = func(addr string) (*grpc.ClientConn, error) { return defaultDial(addr, b.tls.ClientCredentials()) }
	}
	b.conns = rpcopt.NewPool(b.dial)
	var id [8]byte
	_, _ = rand.Read(id[:])
	b.incarn = hex.EncodeToString(id[:])

	opts := cfg.Log
	opts.Logger = b.log
	opts.Clock = b.now
	var clean []storage.CleanShutdown
	b.offline = map[twinlog.TopicPartition]error{}
	for _, path := range cfg.LogDirs {
		d, err := storage.OpenLogDir(b.fs, path, opts)
		if err != nil {
			for _, o := range b.dirs {
				_ = o.Close(-1)
			}
			return nil, fmt.Errorf("broker: open log dir %s: %w", path, err)
		}
		b.dirs = append(b.dirs, d)
		clean = append(clean, d.CleanShutdown())
		for tp, err := range d.Offline() {
			b.offline[tp] = err
			b.log.Error("partition offline: its log failed to open; repair or remove the partition dir, then restart",
				"topic", tp.Topic, "partition", tp.Partition, "dir", path, "err", err)
		}
	}
	b.prevEp = storage.PreviousBrokerEpoch(clean)
	if len(b.offline) > 0 {
		// Not every log is intact: register as an unclean restart (SPEC
		// §2.5, as with a dir offline), so the controller takes this broker
		// out of every ISR and ELR. The healthy partitions rejoin by
		// catching up; the offline ones cannot, so no election picks them.
		b.prevEp = -1
	}
	if so, ok := b.obs.(StorageObserver); ok {
		so.ObserveOfflinePartitions(len(b.offline))
	}
	b.offlineReport = offlineReport(b.offline)
	b.keeper = session.NewKeeper(keeperEnv{b}, keeperHost{b}, session.Config{
		HeartbeatInterval: b.cfg.HeartbeatInterval,
		PreviousEpoch:     b.prevEp,
	})

	b.codec = codec.NewServer(BufferPool)
	// releaseProduce first, outside rpcopt's interceptors (panic recovery,
	// the MaxHandlerTime deadline), so the buffer goes back whatever they
	// and the handler do. rpcopt.MaxHandlerTime (6 min) is above every
	// wait a handler makes on purpose: a fetch long-poll (MaxFetchWait), an
	// acks=all produce (timeout_ms, default DefaultProduceTimeout; one
	// asking for more than MaxHandlerTime ends in DeadlineExceeded there)
	// and a GetLastMirroredEpochs read of __mirror_state (RPCTimeout per
	// round trip).
	sopts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(releaseProduce(b.codec))}, rpcopt.ServerOptions(b.log)...)
	sopts = append(sopts,
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		experimental.BufferPool(BufferPool),
		// Record bytes without protobuf copies: produce requests alias a
		// pooled receive buffer (released by releaseProduce), fetch
		// responses send the pooled read buffers and return them once
		// written.
		grpc.ForceServerCodecV2(b.codec),
		// Handlers run on long-lived goroutines with grown stacks instead
		// of a new goroutine per RPC (runtime.morestack was ~6% of the CPU
		// of one-record requests); busy workers fall back to new ones.
		grpc.NumStreamWorkers(streamWorkers),
		// Replication moves MBs per RPC: big socket buffers mean fewer
		// write syscalls per message (the profile's top cost), and a fixed
		// large window keeps flow control from stalling follower fetches.
		grpc.WriteBufferSize(transportBufferSize),
		grpc.ReadBufferSize(transportBufferSize),
		grpc.InitialWindowSize(streamWindowSize),
		grpc.InitialConnWindowSize(connWindowSize),
	)
	sopts = append(sopts, grpc.Creds(b.tls.ServerCredentials()))
	sopts = append(sopts, b.authz.ServerOptions()...)
	b.grpc = grpc.NewServer(append(sopts, deps.ServerOptions...)...)
	b.health = health.NewServer()
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(b.grpc, b.health)
	reflection.Register(b.grpc)
	registerServices(b.grpc, b)
	return b, nil
}

// defaultDial connects to a broker or controller. passthrough: the name is
// resolved at every connection attempt (as grpc.Dial did) instead of by
// grpc's dns resolver, which re-resolves at most every 30 s and kept a
// name that briefly resolved to nothing failing "produced zero addresses".
func defaultDial(addr string, creds credentials.TransportCredentials) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		experimental.WithBufferPool(BufferPool),
		grpc.WithWriteBufferSize(transportBufferSize),
		grpc.WithReadBufferSize(transportBufferSize),
		grpc.WithInitialWindowSize(streamWindowSize),
		grpc.WithInitialConnWindowSize(connWindowSize),
		rpcopt.ClientKeepalive(),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
		}, MinConnectTimeout: time.Second}))
}

// Health is the broker's grpc.health.v1 service (NOT_SERVING until Run
// serves, again from the start of shutdown), for a daemon that also serves
// it on a plaintext probe port (health.listen.address).
func (b *Broker) Health() healthpb.HealthServer { return b.health }

// StorageObserver is an optional Observer extension for log storage
// health; metrics.Broker implements it.
type StorageObserver interface {
	// ObserveOfflinePartitions reports how many partitions' logs failed to
	// open at start and are offline (twinlog_broker_offline_partitions).
	ObserveOfflinePartitions(n int)
}

// OfflinePartitions returns the partitions whose log failed to open at
// start, each with its error (naming the file). They are not hosted: the
// broker answers for them as for any partition it does not hold, and never
// creates an empty log in their place.
func (b *Broker) OfflinePartitions() map[twinlog.TopicPartition]error {
	return maps.Clone(b.offline)
}

// offlineReasonMaxBytes bounds the reason sent for an offline partition
// (the controller keeps at most 256 bytes of it): enough for the error and
// the file it names, small enough for a heartbeat listing many partitions.
const offlineReasonMaxBytes = 256

// offlineReport lists the offline partitions as heartbeats carry them,
// sorted, each with its open error, cut to offlineReasonMaxBytes of valid
// UTF-8 (the error may name a file whose name is not: a proto string must
// be, or the heartbeat would not marshal).
func offlineReport(offline map[twinlog.TopicPartition]error) []*pb.OfflinePartition {
	out := make([]*pb.OfflinePartition, 0, len(offline))
	for _, tp := range slices.SortedFunc(maps.Keys(offline), func(a, b twinlog.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	}) {
		reason := strings.ToValidUTF8(offline[tp].Error(), "?")
		if len(reason) > offlineReasonMaxBytes {
			reason = strings.ToValidUTF8(reason[:offlineReasonMaxBytes], "")
		}
		out = append(out, &pb.OfflinePartition{Topic: strings.ToValidUTF8(tp.Topic, "?"), Partition: tp.Partition, Reason: reason})
	}
	return out
}

// offlineErr is the open error of tp if its log is offline, else nil.
func (b *Broker) offlineErr(tp twinlog.TopicPartition) error { return b.offline[tp] }

// notHosted is the answer of Produce, Fetch, ListOffsets and
// OffsetForLeaderEpoch for a partition this broker does not host, with the
// leader hint to return:
//   - UNKNOWN_TOPIC_OR_PARTITION: the metadata does not know the partition;
//   - KAFKA_STORAGE_ERROR: the metadata names this broker the leader and
//     its log here is offline (OfflinePartitions). Kafka's answer for a
//     replica on an offline log dir; "not the leader" would be false, and
//     a client following the metadata would come straight back;
//   - NOT_LEADER_OR_FOLLOWER with the live leader (−1 if none) otherwise,
//     an offline log here included: Kafka answers KAFKA_STORAGE_ERROR then
//     too, but the hint sends the client to the broker that can serve it
//     without a metadata round trip (docs/spec-deviations.md).
func (b *Broker) notHosted(tp twinlog.TopicPartition) (pb.ErrorCode, int32) {
	b.metaMu.Lock()
	pr := b.image.Partition(tp.Topic, tp.Partition)
	leads := pr != nil && pr.GetLeader() == int32(b.cfg.ID)
	b.metaMu.Unlock()
	if leads && b.offlineErr(tp) != nil {
		return pb.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR, -1
	}
	leader, known := b.leaderHint(tp)
	if !known {
		return pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, leader
	}
	return pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, leader
}

// ID is the broker id.
func (b *Broker) ID() twinlog.BrokerID { return b.cfg.ID }

// BrokerEpoch is the registered broker epoch (0 before registration).
func (b *Broker) BrokerEpoch() twinlog.BrokerEpoch { return twinlog.BrokerEpoch(b.brokerEpoch()) }

// brokerEpoch is the registered broker epoch (the Keeper's), 0 before the
// first registration.
func (b *Broker) brokerEpoch() int64 { return b.keeper.Epoch() }

// PreviousBrokerEpoch is what the clean-shutdown files said at start-up.
func (b *Broker) PreviousBrokerEpoch() twinlog.BrokerEpoch { return b.prevEp }

// Addr is the listener address once Run has started.
func (b *Broker) Addr() net.Addr {
	if b.lis == nil {
		return nil
	}
	return b.lis.Addr()
}

// GRPCServer exposes the server so other services (mirror) can register
// before Run.
func (b *Broker) GRPCServer() *grpc.Server { return b.grpc }

// Changed returns a channel closed at the next observable state change:
// metadata applied, a partition's LEO, HW or role moved. Tests wait on it
// instead of sleeping.
func (b *Broker) Changed() <-chan struct{} {
	b.changeMu.Lock()
	defer b.changeMu.Unlock()
	b.changeTaken = true
	return b.changed
}

// notifyChange closes the channel Changed handed out. Every append and HW
// move calls it; when nobody took the channel since the last close, nobody
// can be waiting on it, so it is kept rather than closed and made again.
func (b *Broker) notifyChange() {
	b.changeMu.Lock()
	if b.changeTaken {
		close(b.changed)
		b.changed = make(chan struct{})
		b.changeTaken = false
	}
	b.changeMu.Unlock()
}

// Crash stops the broker as kill -9 would: Run returns without flushing,
// checkpointing or writing the clean-shutdown file. For tests.
func (b *Broker) Crash() { b.crashOnce.Do(func() { close(b.crashc) }) }

// Run registers with the controller, follows metadata, serves gRPC and
// replicates until ctx ends, then shuts down cleanly (controlled shutdown,
// flush, checkpoints, clean-shutdown file last).
func (b *Broker) Run(ctx context.Context) error {
	started := false
	b.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("broker: Run called twice")
	}
	if b.lis == nil {
		lis, err := net.Listen("tcp", b.cfg.ListenAddr)
		if err != nil {
			return fmt.Errorf("broker: listen %s: %w", b.cfg.ListenAddr, err)
		}
		b.lis = lis
	}
	if b.klis == nil && b.cfg.KafkaListenAddr != "" {
		lis, err := net.Listen("tcp", b.cfg.KafkaListenAddr)
		if err != nil {
			b.lis.Close()
			return fmt.Errorf("broker: kafka.listen.address %s: %w", b.cfg.KafkaListenAddr, err)
		}
		b.klis = lis
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- b.grpc.Serve(b.lis) }()
	if b.klis != nil {
		kobs, _ := b.obs.(kafka.Observer) // metrics.Broker's; nil: none
		gcfg := coord.Config{Group: b.cfg.Groups, ReconcileInterval: 2 * b.cfg.TickInterval, Logger: b.log.With("component", "groups")}
		if gobs, ok := b.obs.(GroupObserver); ok {
			gcfg.Observer = groupObserver{gobs}
		}
		groups, err := coord.New(gcfg, groupsEnv{b})
		if err != nil {
			b.lis.Close()
			b.klis.Close()
			return fmt.Errorf("broker: group coordinator: %w", err)
		}
		b.groups = groups
		b.kafka = kafka.NewServer(kafka.Config{
			BrokerID: int32(b.cfg.ID), MaxRequestBytes: b.cfg.KafkaMaxRequestBytes, IdleTimeout: b.cfg.KafkaIdleTimeout,
			Logger: b.log.With("listener", "kafka"), InvalidRequest: ErrInvalidRequest, Observer: kobs,
			Groups: groups, Authorizer: kafkaAuthorizer{b}, SASL: b.kafkaSASL(),
		}, b, kafkaAdmin{adminServer{b: b}})
		go func() {
			// Connections wait in the listen backlog until the image has
			// caught up; Close closes the listener either way.
			select {
			case <-b.caughtUp:
			case <-b.runCtx.Done():
			}
			if err := b.kafka.Serve(b.kafkaListener()); !errors.Is(err, kafka.ErrServerClosed) {
				b.log.Error("kafka listener stopped", "err", err)
			}
		}()
		defer b.kafka.Close()
		defer b.klis.Close() // Serve may never have taken it
	}

	// inner outlives ctx: the controlled shutdown still needs metadata and
	// heartbeats after ctx is done.
	inner, stop := b.runCtx, b.stopRun
	defer stop()
	go func() {
		select {
		case <-b.crashc:
			stop()
		case <-inner.Done():
		}
	}()
	if err := b.register(inner, ctx); err != nil {
		b.keeper.Stop()
		stop()
		b.grpc.Stop()
		b.closeDirs(false)
		if ctx.Err() != nil || b.crashed() {
			return nil
		}
		return err
	}
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	b.log.Info("broker registered", "broker_epoch", b.brokerEpoch(), "previous_broker_epoch", b.prevEp)

	b.startMetadata()
	if b.groups != nil {
		b.groups.Start()
	}
	b.goLoop(inner, b.tickLoop)
	b.goLoop(inner, b.checkpointLoop)
	b.goLoop(inner, b.cleanerLoop)
	b.goLoop(inner, b.retentionLoop)

	var runErr error
	select {
	case <-ctx.Done():
	case <-b.crashc:
	case err := <-serveErr:
		// nil: the server was stopped, a clean stop.
		if err != nil {
			runErr = fmt.Errorf("broker: grpc serve: %w", err)
		}
	}
	if b.crashed() {
		b.keeper.Stop()
		b.meta.Stop()
		stop()
		b.stopKafka()
		b.grpc.Stop()
		b.wg.Wait()
		b.stopMirrorRunners()
		b.stopFetchers()
		b.closeConns()
		b.log.Info("broker crashed (test)")
		return nil
	}
	b.controlledShutdown(inner)
	b.keeper.Stop()
	b.meta.Stop()
	b.stopMirrorRunners()
	b.health.Shutdown()
	stop()
	b.stopKafka()
	b.stopGRPC()
	b.wg.Wait()
	b.stopFetchers()
	b.closeConns()
	b.closeDirs(true)
	b.log.Info("broker stopped", "broker_epoch", b.brokerEpoch())
	return runErr
}

func (b *Broker) crashed() bool {
	select {
	case <-b.crashc:
		return true
	default:
		return false
	}
}

func (b *Broker) goLoop(ctx context.Context, fn func(context.Context)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn(ctx)
	}()
}

// stopKafka closes the Kafka listener and its connections: clients see
// the broker gone and find the partitions' new leaders in Metadata.
func (b *Broker) stopKafka() {
	if b.kafka != nil {
		b.kafka.Close()
	}
	if b.groups != nil {
		b.groups.Close()
	}
}

func (b *Broker) stopGRPC() {
	done := make(chan struct{})
	go func() { b.grpc.GracefulStop(); close(done) }()
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		b.grpc.Stop()
		<-done
	}
}

// closeDirs closes every partition and then the log dirs; with clean it
// writes the clean-shutdown files last (LogDir.Close).
func (b *Broker) closeDirs(clean bool) {
	b.partsMu.Lock()
	parts := b.parts
	b.parts = map[twinlog.TopicPartition]*partition{}
	b.partsMu.Unlock()
	for _, p := range parts {
		p.close()
	}
	ep := twinlog.BrokerEpoch(b.brokerEpoch())
	for _, d := range b.dirs {
		if !clean || ep <= 0 {
			// No registration: nothing to claim; just close.
			for _, l := range d.Logs() {
				_ = l.Close()
			}
			continue
		}
		if err := d.Close(ep); err != nil {
			b.log.Error("close log dir; next start recovers", "dir", d.Path(), "err", err)
		}
	}
}

// conn returns a cached client connection to addr.
func (b *Broker) conn(addr string) (rpcopt.Conn, error) { return b.conns.Get(addr) }

func (b *Broker) closeConns() { b.conns.Close() }

func (b *Broker) controller() (pb.ControllerServiceClient, error) {
	c, err := b.conn(b.cfg.ControllerAddr)
	if err != nil {
		return nil, err
	}
	return pb.NewControllerServiceClient(c), nil
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (b *Broker) advertised() (string, int32, error) {
	addr := b.cfg.AdvertisedAddr
	if addr == "" {
		addr = b.lis.Addr().String()
	}
	return splitAddr(addr)
}

// kafkaAdvertised is the Kafka listener's host and port for Metadata;
// port 0 without a listener.
func (b *Broker) kafkaAdvertised() (string, int32, error) {
	if b.klis == nil {
		return "", 0, nil
	}
	addr := b.cfg.KafkaAdvertisedAddr
	if addr == "" {
		addr = b.klis.Addr().String()
	}
	return splitAddr(addr)
}

// splitAddr splits an advertised host:port.
func splitAddr(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("broker: advertised address %q: %w", addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("broker: advertised port %q: %w", port, err)
	}
	return host, int32(n), nil
}

// tickLoop turns a ticker into replica Tick (ISR shrink, produce timeouts)
// and reports partition metrics.
func (b *Broker) tickLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.TickInterval)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := b.nowMs()
		n++
		for _, p := range b.partitions() {
			p.mu.Lock()
			if p.usableLocked() == nil {
				p.r.Tick(now)
				p.processReadyLocked()
			}
			p.mu.Unlock()
			if n%5 == 0 {
				b.obs.ObservePartition(p.stats())
			}
		}
		if gobs, ok := b.obs.(GroupObserver); ok && b.groups != nil && n%10 == 0 {
			gobs.ObserveGroups(b.groups.Stats(b.localHW, MaxGroupLagSeries))
		}
	}
}

// localHW is the high watermark of this broker's replica of a partition;
// false when it hosts none.
func (b *Broker) localHW(topic string, partition int32) (int64, bool) {
	p := b.partition(twinlog.TopicPartition{Topic: topic, Partition: partition})
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.usableLocked() != nil {
		return 0, false
	}
	return int64(p.r.HighWatermark()), true
}

// checkpointLoop writes the HW, log-start and recovery-point checkpoints
// every CheckpointInterval (SPEC §2.5).
func (b *Broker) checkpointLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, d := range b.dirs {
			if err := d.Checkpoint(); err != nil {
				b.log.Error("write checkpoints", "dir", d.Path(), "err", err)
			}
		}
	}
}

func (b *Broker) nowMs() int64 { return b.now().UnixMilli() }

func (b *Broker) partitions() []*partition {
	b.partsMu.RLock()
	defer b.partsMu.RUnlock()
	out := make([]*partition, 0, len(b.parts))
	for _, p := range b.parts {
		out = append(out, p)
	}
	return out
}

func (b *Broker) partition(tp twinlog.TopicPartition) *partition {
	b.partsMu.RLock()
	defer b.partsMu.RUnlock()
	return b.parts[tp]
}

func (b *Broker) minISR(topic string) int {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	return b.image.MinISR(topic, 0)
}

// sendAlterPartition sends one ISR change of p (alter.Send: the retry
// rules of SPEC §4.5, shared with the simulator) through alterEnv.
func (b *Broker) sendAlterPartition(p *partition, ap replica.AlterPartitionProposal, isrNow int) {
	if n := len(ap.Request.GetNewIsr()); n != isrNow {
		b.obs.ObserveISRChange(n > isrNow)
	}
	alter.Send(alterEnv{b}, alterPartition{p}, alterLog{logger: p.logger}, ap)
}

// alterEnv sends AlterPartition on a goroutine of its own per attempt,
// bounded by the RPC timeout; the broker's WaitGroup holds it, so a
// stopping broker waits for the attempt in flight and starts no other.
type alterEnv struct{ b *Broker }

func (e alterEnv) NowMs() int64 { return e.b.nowMs() }

func (e alterEnv) Call(ap replica.AlterPartitionProposal, answer func(bool, *pb.AlterPartitionResponse)) {
	callController(e.b, e.b.cfg.RPCTimeout,
		func(ctx context.Context, ctl pb.ControllerServiceClient) (*pb.AlterPartitionResponse, error) {
			return ctl.AlterPartition(ctx, ap.Request)
		},
		func(resp *pb.AlterPartitionResponse, err error) {
			if err != nil {
				resp = nil
			}
			answer(!errors.Is(err, errNoController), resp)
		})
}

// After: the machine goes with a stopping broker.
func (e alterEnv) After(d time.Duration, f func()) { e.b.runAfter(d, f) }

// alterPartition is a partition as alter.Send sees it.
type alterPartition struct{ p *partition }

func (a alterPartition) Lock()                     { a.p.mu.Lock() }
func (a alterPartition) Unlock()                   { a.p.mu.Unlock() }
func (a alterPartition) Usable() bool              { return a.p.usableLocked() == nil }
func (a alterPartition) Replica() *replica.Replica { return a.p.r }
func (a alterPartition) ProcessReady()             { a.p.processReadyLocked() }

// alterLog logs the retries of a partition's proposals.
type alterLog struct {
	alter.NoObserver
	logger *slog.Logger
}

func (l alterLog) Retrying(ap replica.AlterPartitionProposal, n int, sent bool, resp *pb.AlterPartitionResponse, wait time.Duration) {
	l.logger.Debug("alter partition: retrying", "seq", ap.Seq, "sent", sent, "code", resp.GetError(), "attempt", n, "wait", wait)
}

// brokerAddr returns the address of broker id from the metadata image.
func (b *Broker) brokerAddr(id twinlog.BrokerID) (string, bool) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	br := b.image.Broker(int32(id))
	if br == nil {
		return "", false
	}
	return net.JoinHostPort(br.GetHost(), strconv.Itoa(int(br.GetPort()))), true
}

// leaderHint returns the leader of tp per the image, −1 if none or unknown.
func (b *Broker) leaderHint(tp twinlog.TopicPartition) (int32, bool) {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	if b.image.Topic(tp.Topic) == nil {
		return -1, false
	}
	pr := b.image.Partition(tp.Topic, tp.Partition)
	if pr == nil {
		return -1, false
	}
	if !b.image.Alive(pr.GetLeader()) {
		return -1, true
	}
	return pr.GetLeader(), true
}

// PartitionStatus is a hosted replica's local view (for tests, tools and
// the mirror shell).
type PartitionStatus struct {
	TopicID        string // of the hosted partition (a re-created topic has another)
	Role           replica.Role
	Leader         twinlog.BrokerID
	LeaderEpoch    twinlog.Epoch
	HighWatermark  twinlog.Offset
	LogEndOffset   twinlog.Offset
	LogStartOffset twinlog.Offset
	ISR            []twinlog.BrokerID
	MaximalISR     []twinlog.BrokerID
	LESO           twinlog.Offset
}

// PartitionStatus returns tp's local status, false if not hosted.
func (b *Broker) PartitionStatus(tp twinlog.TopicPartition) (PartitionStatus, bool) {
	p := b.partition(tp)
	if p == nil {
		return PartitionStatus{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return PartitionStatus{
		TopicID: p.topicID, Role: p.r.Role(), Leader: p.r.Leader(), LeaderEpoch: p.r.LeaderEpoch(),
		HighWatermark: p.r.HighWatermark(), LogEndOffset: p.r.LogEndOffset(), LogStartOffset: p.r.LogStartOffset(),
		ISR: p.r.ISR(), MaximalISR: p.r.MaximalISR(), LESO: p.r.LeaderEpochStartOffset(),
	}, true
}
