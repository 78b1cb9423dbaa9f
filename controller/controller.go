package controller

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/boltstore"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/controller/metastore"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/scram"
	"github.com/twinlog/twinlog/security/transport"
)

// ErrUnavailable reports a controller that cannot accept changes: its store
// failed or it is shutting down. gRPC maps it to codes.Unavailable.
var ErrUnavailable = errors.New("controller: unavailable")

// Config configures a Controller. Durations are wall-clock; the pure state
// machine sees them as milliseconds.
type Config struct {
	// DataDir holds the bbolt file controller.db. Unused (and not
	// required) when Deps.Store gives the store.
	DataDir string
	// ClusterID is stored at the first start; a later start with another
	// non-empty id fails (wrong data dir). Empty generates a random id at
	// the first start and accepts the stored one later.
	ClusterID string
	// ListenAddr is the gRPC address, used when Deps.Listener is nil.
	ListenAddr string
	// TickInterval is how often Tick runs (session timeouts, leaderless
	// re-elections, recovery rounds). SPEC §3.2 wants ≤ 30 s; default 250ms.
	TickInterval time.Duration
	// RecoveryRPCTimeout bounds each GetReplicaLogInfo call of an unclean
	// recovery round (also bounded by the round's own deadline).
	RecoveryRPCTimeout time.Duration
	// RecoveryRetryBackoff is the wait before a partition's next recovery
	// round after one failed, doubled per further failure up to
	// RecoveryRetryMaxBackoff; defaults 500ms and 30s (rounds.go).
	RecoveryRetryBackoff    time.Duration
	RecoveryRetryMaxBackoff time.Duration
	// MaxRequestPartitionSizeLimit is max.request.partition.size.limit
	// (SPEC §5), default 1000.
	MaxRequestPartitionSizeLimit int
	// MaxFetchWait caps the long-poll wait of FetchMetadata.
	MaxFetchWait time.Duration
	// MaxFetchDeltas caps deltas per FetchMetadata response.
	MaxFetchDeltas int
	// MaxFetchBytes caps the encoded size of one FetchMetadata response,
	// snapshot pages included (at least one delta or snapshot item is
	// always sent): a follower far behind pages through the log by
	// from_offset, and through a snapshot by cursor, instead of asking for
	// a response larger than its transport accepts. Default 16 MiB, a
	// quarter of the brokers' 64 MiB message limit (controllerd:
	// metadata.fetch.max.bytes).
	MaxFetchBytes int
	// CompactEveryDeltas triggers a snapshot after this many new deltas.
	CompactEveryDeltas int
	// RetainDeltas is how many deltas compaction keeps behind the snapshot.
	RetainDeltas int
	// BoltTimeout bounds waiting for the bbolt file lock (unused with
	// Deps.Store).
	BoltTimeout time.Duration
	// GracefulStopTimeout bounds draining RPCs at shutdown.
	GracefulStopTimeout time.Duration
	// CreateTopicsMaxPartitionsPerRequest caps the partitions one
	// CreateTopics request may create (create.topics.max.partitions.per.request),
	// default metastate.DefaultMaxCreatePartitionsPerRequest.
	CreateTopicsMaxPartitionsPerRequest int
	// MaxClusterPartitions caps the partitions of the cluster
	// (cluster.max.partitions), default metastate.DefaultMaxClusterPartitions.
	MaxClusterPartitions int
	// Authz configures authorization (authorizer.enabled, super.users,
	// allow.everyone.if.no.acl.found; security/authz). The ACLs are the
	// cluster's own, from the metadata.
	Authz authz.Config
	// ClusterConfigs are the initial cluster-level configs (SPEC §1.3 keys
	// of cluster scope, e.g. min.insync.replicas). They are written once, as
	// the first metadata change of an empty store; afterwards the dynamic
	// values (AlterConfigs) win and this field is ignored.
	ClusterConfigs map[string]string
}

func (c Config) withDefaults() Config {
	if c.TickInterval <= 0 {
		c.TickInterval = 250 * time.Millisecond
	}
	if c.RecoveryRPCTimeout <= 0 {
		c.RecoveryRPCTimeout = 5 * time.Second
	}
	if c.RecoveryRetryBackoff <= 0 {
		c.RecoveryRetryBackoff = roundRetryInitialBackoff
	}
	if c.RecoveryRetryMaxBackoff <= 0 {
		c.RecoveryRetryMaxBackoff = roundRetryMaxBackoff
	}
	c.RecoveryRetryMaxBackoff = max(c.RecoveryRetryMaxBackoff, c.RecoveryRetryBackoff)
	if c.MaxRequestPartitionSizeLimit <= 0 {
		c.MaxRequestPartitionSizeLimit = 1000
	}
	if c.MaxFetchWait <= 0 {
		c.MaxFetchWait = 30 * time.Second
	}
	if c.MaxFetchDeltas <= 0 {
		c.MaxFetchDeltas = 1000
	}
	if c.MaxFetchBytes <= 0 {
		c.MaxFetchBytes = 16 << 20
	}
	if c.CompactEveryDeltas <= 0 {
		c.CompactEveryDeltas = 10000
	}
	if c.RetainDeltas <= 0 {
		c.RetainDeltas = metastore.DefaultRetainDeltas
	}
	if c.BoltTimeout <= 0 {
		c.BoltTimeout = 5 * time.Second
	}
	if c.GracefulStopTimeout <= 0 {
		c.GracefulStopTimeout = 5 * time.Second
	}
	return c
}

// Validate checks the config.
func (c Config) Validate() error { return c.validate(true) }

// validate checks the config; DataDir is required only of a controller
// that opens its own store (New without Deps.Store).
func (c Config) validate(needDataDir bool) error {
	if needDataDir && c.DataDir == "" {
		return errors.New("controller: DataDir is required")
	}
	if c.TickInterval < 0 || c.RecoveryRPCTimeout < 0 || c.MaxFetchWait < 0 || c.RecoveryRetryBackoff < 0 || c.RecoveryRetryMaxBackoff < 0 {
		return errors.New("controller: durations must not be negative")
	}
	if c.MaxRequestPartitionSizeLimit < 0 || c.MaxFetchDeltas < 0 || c.MaxFetchBytes < 0 || c.CompactEveryDeltas < 0 || c.RetainDeltas < 0 ||
		c.CreateTopicsMaxPartitionsPerRequest < 0 || c.MaxClusterPartitions < 0 {
		return errors.New("controller: limits must not be negative")
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(c.ClusterConfigs)) {
		if err := metadata.ValidateConfig(metadata.ScopeCluster, k, c.ClusterConfigs[k]); err != nil {
			errs = append(errs, fmt.Errorf("controller: cluster config: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Dialer opens a client connection to a broker's listener address
// ("host:port"). Tests inject bufconn, the simulator its network.
type Dialer func(addr string) (rpcopt.Conn, error)

// Deps are the controller's injected collaborators.
type Deps struct {
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Sleep waits d, or until ctx ends (false): the wait between a mirror
	// offset sync's attempts. nil: a timer; the simulator's is its clock.
	Sleep func(ctx context.Context, d time.Duration) bool
	// Dial reaches brokers for unclean recovery; nil dials plain gRPC.
	Dial Dialer
	// Listener overrides Config.ListenAddr (tests pass a bufconn listener).
	Listener net.Listener
	// Observer receives metrics; nil means none.
	Observer Observer
	// Rand seeds topic ids and placement; nil uses metastate's default.
	Rand metastate.Rand
	// ServerOptions are added to the gRPC server.
	ServerOptions []grpc.ServerOption
	// Transport is TLS for the listener and for dialling (nil: plaintext).
	Transport *transport.Transport
	// Store, when not nil, is the metadata store to run on instead of the
	// bbolt file in Config.DataDir (tests and the simulator pass a
	// controller/memstore). The controller owns it from New on: it closes
	// it when it stops, and when New fails.
	Store Store
	// Rounds carries unclean recovery rounds' questions to brokers; nil
	// asks over gRPC through Dial. The simulator passes its network.
	Rounds RoundTransport
	// Committed, when not nil, sees every metadata change right after it
	// is persisted and applied, under the controller's lock: the state,
	// the delta and the events Apply returned. It must not call back into
	// the controller. The simulator checks its invariants here.
	Committed func(st *metastate.State, d *twinlogv1.MetadataDelta, events []metastate.Event)
}

// Controller is the I/O shell around metastate.State: it persists every
// delta in its Store (bbolt unless Deps.Store says otherwise) before
// applying it, serves the gRPC services, turns time into Tick and runs
// unclean recovery rounds.
//
// Concurrency: mu guards the state, the change notification channel and the
// soft state kept beside it; every command computes its delta, persists it
// and applies it while holding mu, so deltas are applied in offset order.
// Read-only RPCs take mu for reading.
type Controller struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool
	dial  Dialer
	obs   Observer
	store Store
	lis   net.Listener

	roundsT   RoundTransport
	committed func(st *metastate.State, d *twinlogv1.MetadataDelta, events []metastate.Event)

	// authz authorizes every RPC; its ACLs follow the metadata (refreshACLs).
	authz     *authz.Checker
	aclOffset int64 // the image's ACLOffset that authz was last built from

	mu          sync.RWMutex
	state       *metastate.State
	notify      chan struct{} // closed and replaced after every applied delta
	failed      error         // sticky: store or apply failure
	stats       statsTracker
	mirrorStats map[int32][]*twinlogv1.MirrorPartitionStatus // by reporting broker
	// offsetSync is each mirror's last offset sync (offsetsync.go);
	// truncFixed the truncation points each mirror's fixTruncated pass
	// covered.
	offsetSync map[string]*twinlogv1.MirrorOffsetSyncStatus
	// lastACLSync is the last ACL sync's outcome (aclsync.go), nil before
	// the first or once mirror.acl.sync.enable is off.
	lastACLSync *ACLSyncResult
	truncFixed  map[string]string
	mirrorNames map[string]bool         // mirrors in the image
	offline     map[int32]offlineReport // by reporting broker (server.go Heartbeat)
	roundRetry  roundBackoff            // recovery round retry backoff (rounds.go)
	compactedAt int64
	closing     bool // Run is shutting down: long-polls stop waiting
	rounds      map[uint64]context.CancelFunc
	roundCtx    context.Context // nil until Run starts

	compactc  chan struct{}
	wg        sync.WaitGroup
	health    *health.Server
	grpc      *grpc.Server
	closeOnce sync.Once
	runOnce   sync.Once
}

// New opens the store (or takes Deps.Store), replays it into a fresh State
// and builds the gRPC server. Run starts serving.
func New(cfg Config, deps Deps) (*Controller, error) {
	if err := cfg.validate(deps.Store == nil); err != nil {
		if deps.Store != nil {
			_ = deps.Store.Close()
		}
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Controller{
		cfg:         cfg,
		log:         deps.Logger,
		now:         deps.Now,
		sleep:       deps.Sleep,
		dial:        deps.Dial,
		obs:         deps.Observer,
		lis:         deps.Listener,
		notify:      make(chan struct{}),
		mirrorStats: map[int32][]*twinlogv1.MirrorPartitionStatus{},
		offsetSync:  map[string]*twinlogv1.MirrorOffsetSyncStatus{},
		truncFixed:  map[string]string{},
		mirrorNames: map[string]bool{},
		rounds:      map[uint64]context.CancelFunc{},
		roundRetry:  roundBackoff{initial: cfg.RecoveryRetryBackoff, max: cfg.RecoveryRetryMaxBackoff},
		compactc:    make(chan struct{}, 1),
		aclOffset:   -1,
		roundsT:     deps.Rounds,
		committed:   deps.Committed,
	}
	if c.roundsT == nil {
		c.roundsT = grpcRounds{c}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("component", "controller")
	acfg := cfg.Authz
	acfg.Logger = c.log.With("component", "authorizer")
	acfg.Users = c.scramCredential
	c.authz = authz.NewChecker(acfg)
	if c.now == nil {
		c.now = time.Now
	}
	if c.sleep == nil {
		c.sleep = sleep
	}
	if c.dial == nil {
		c.dial = rpcopt.Dialer(func(addr string) (*grpc.ClientConn, error) {
			// passthrough: resolve at every attempt (see broker's defaultDial).
			return grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(deps.Transport.ClientCredentials()), rpcopt.ClientKeepalive())
		})
	}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	c.store = deps.Store
	if c.store == nil {
		store, err := openBolt(cfg)
		if err != nil {
			return nil, err
		}
		c.store = store
	}
	if err := c.load(cfg.ClusterID, deps.Rand); err != nil {
		_ = c.store.Close()
		return nil, err
	}
	c.health = health.NewServer()
	sopts := append(rpcopt.ServerOptions(c.log), grpc.Creds(deps.Transport.ServerCredentials()))
	sopts = append(sopts, c.authz.ServerOptions()...)
	c.grpc = grpc.NewServer(append(sopts, deps.ServerOptions...)...)
	registerServices(c.grpc, c)
	healthpb.RegisterHealthServer(c.grpc, c.health)
	reflection.Register(c.grpc)
	c.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return c, nil
}

// openBolt opens the bbolt file in cfg.DataDir, the store controllerd runs
// on.
func openBolt(cfg Config) (*boltstore.Store, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: create data dir: %w", err)
	}
	return boltstore.Open(filepath.Join(cfg.DataDir, "controller.db"), boltstore.Options{Timeout: cfg.BoltTimeout})
}

// load restores the snapshot and replays the deltas after it.
func (c *Controller) load(clusterID string, rnd metastate.Rand) error {
	if clusterID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		clusterID = "twinlog-" + hex.EncodeToString(b[:])
	}
	id, err := c.store.InitClusterID(clusterID)
	if err != nil {
		return err
	}
	if c.cfg.ClusterID != "" && id != c.cfg.ClusterID {
		// A data dir of another cluster: refuse rather than serve its metadata.
		return fmt.Errorf("controller: data dir %s belongs to cluster %q, configured %q", c.cfg.DataDir, id, c.cfg.ClusterID)
	}
	epoch, err := c.store.BumpControllerEpoch()
	if err != nil {
		return err
	}
	l, err := c.store.Load()
	if err != nil {
		return err
	}
	if rnd == nil {
		// Topic ids must differ between clusters (a mirror topic takes its
		// source's id, SPEC §6.1, §6.3): metastate's default is a fixed
		// sequence, for tests.
		var seed [16]byte
		_, _ = rand.Read(seed[:])
		rnd = mrand.New(mrand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	st := metastate.New(metastate.Config{ClusterID: id, Rand: rnd,
		MaxCreatePartitionsPerRequest: c.cfg.CreateTopicsMaxPartitionsPerRequest, MaxClusterPartitions: c.cfg.MaxClusterPartitions})
	if l.Snapshot != nil {
		st.Restore(l.Snapshot)
		for _, m := range l.Snapshot.GetMirrors() {
			c.mirrorNames[m.GetName()] = true
		}
	}
	for _, d := range l.Deltas {
		if _, err := st.Apply(d); err != nil {
			return fmt.Errorf("controller: replay delta %d: %w", d.GetOffset(), err)
		}
		c.trackMirrors(d)
	}
	if st.Offset() == 0 {
		if err := c.bootstrap(st); err != nil {
			return err
		}
		l.NextOffset = st.Offset() + 1
	}
	if v, ok := c.cfg.ClusterConfigs[metadata.KeyProducerIDSpace]; ok && metadata.ConfigInt(v, 0) != int64(st.ProducerIDSpace()) {
		// Static: the space was fixed at the first start, and changing it
		// could hand out ids another cluster allocates.
		c.log.Warn("configured producer.id.space ignored: the cluster's space is fixed at its first start",
			"configured", v, "producer_id_space", st.ProducerIDSpace())
	}
	if st.Offset()+1 != l.NextOffset {
		return fmt.Errorf("controller: replayed to offset %d but the store's next offset is %d: %w",
			st.Offset(), l.NextOffset, metastore.ErrCorrupt)
	}
	c.state = st
	c.refreshACLs()
	c.compactedAt = l.Snapshot.GetOffset()
	c.stats.reset(st, c.obs)
	c.log.Info("metadata loaded", "cluster_id", id, "controller_epoch", epoch,
		"offset", st.Offset(), "snapshot_offset", l.Snapshot.GetOffset(), "replayed", len(l.Deltas), "producer_id_space", st.ProducerIDSpace())
	return nil
}

// scramCredential looks a user's SCRAM credential up in the metadata, for
// gRPC callers that authenticate with a password (security/authz).
func (c *Controller) scramCredential(user string, m scram.Mechanism) (scram.Credential, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		return scram.Credential{}, false
	}
	return metadata.ScramLookup(c.state.Image)(user, m)
}

// refreshACLs rebuilds the authorizer when the image's bindings changed.
// Called under c.mu (or before the controller serves).
func (c *Controller) refreshACLs() {
	if off := c.state.ACLOffset(); off != c.aclOffset {
		c.aclOffset = off
		c.authz.Update(c.state.Authorizer(c.authz.ACLConfig()))
	}
}

// bootstrap writes the initial cluster configs as the first change of an
// empty store. Only values that differ from the SPEC §1.3 defaults are
// written, so an all-default config writes nothing.
func (c *Controller) bootstrap(st *metastate.State) error {
	d, err := st.InitialClusterConfigs(c.cfg.ClusterConfigs)
	if err != nil || d == nil {
		return err
	}
	cfgs := d.GetClusterConfig().GetConfigs()
	if err := c.store.Append(d); err != nil {
		return err
	}
	if _, err := st.Apply(d); err != nil {
		return fmt.Errorf("controller: apply bootstrap configs: %w", err)
	}
	c.log.Info("cluster configs bootstrapped", "configs", cfgs)
	return nil
}

// Health is the controller's grpc.health.v1 service (NOT_SERVING until Run
// serves, again from the start of shutdown), for a daemon that also serves
// it on a plaintext probe port (health.listen.address).
func (c *Controller) Health() healthpb.HealthServer { return c.health }

// ClusterID returns the cluster id.
func (c *Controller) ClusterID() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state.ClusterID()
}

// Offset returns the offset of the last applied change.
func (c *Controller) Offset() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state.Offset()
}

// Addr returns the listener address once Run has started listening.
func (c *Controller) Addr() net.Addr {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.lis == nil {
		return nil
	}
	return c.lis.Addr()
}

// GRPCServer exposes the server, e.g. to register more services before Run.
func (c *Controller) GRPCServer() *grpc.Server { return c.grpc }

// Run serves gRPC and drives the ticker until ctx is done, then shuts down:
// health NOT_SERVING, in-flight RPCs drained (bounded), rounds cancelled,
// store closed. It returns the first fatal error (store failure) or nil.
func (c *Controller) Run(ctx context.Context) error {
	started := false
	c.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("controller: Run called twice")
	}
	c.mu.Lock()
	if c.lis == nil {
		lis, err := net.Listen("tcp", c.cfg.ListenAddr)
		if err != nil {
			c.mu.Unlock()
			c.Close()
			return fmt.Errorf("controller: listen %s: %w", c.cfg.ListenAddr, err)
		}
		c.lis = lis
	}
	lis := c.lis
	runCtx, cancelRounds := context.WithCancel(ctx)
	defer cancelRounds()
	c.roundCtx = runCtx
	c.mu.Unlock()

	serveErr := make(chan error, 1)
	go func() { serveErr <- c.grpc.Serve(lis) }()
	// The offset and ACL sync loops are not c.wg's round goroutines
	// (tests wait for those to finish): Run waits for them on its own.
	syncDone := make(chan struct{})
	go func() {
		defer close(syncDone)
		var wg sync.WaitGroup
		wg.Go(func() { c.offsetSyncLoop(runCtx) })
		wg.Go(func() { c.aclSyncLoop(runCtx) })
		wg.Wait()
	}()
	c.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	c.log.Info("controller serving", "addr", lis.Addr().String())

	ticker := time.NewTicker(c.cfg.TickInterval)
	defer ticker.Stop()
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-serveErr:
			// Serve returns nil once Close stopped the server: a clean stop.
			if err != nil {
				runErr = fmt.Errorf("controller: grpc serve: %w", err)
			}
			break loop
		case <-ticker.C:
			if err := c.Tick(ctx); err != nil && !errors.Is(err, ErrUnavailable) {
				runErr = err
				break loop
			}
			if err := c.fatalErr(); err != nil {
				runErr = err
				break loop
			}
		case <-c.compactc:
			if err := c.Compact(); err != nil {
				c.log.Error("metadata compaction", "err", err)
			}
		}
	}
	c.health.Shutdown()
	c.mu.Lock()
	c.closing = true
	close(c.notify) // long-polls return at once instead of holding up GracefulStop
	c.notify = make(chan struct{})
	c.mu.Unlock()
	c.stopGRPC()
	cancelRounds()
	<-syncDone
	c.wg.Wait()
	c.Close()
	c.log.Info("controller stopped", "offset", c.Offset())
	return runErr
}

func (c *Controller) stopGRPC() {
	done := make(chan struct{})
	go func() { c.grpc.GracefulStop(); close(done) }()
	t := time.NewTimer(c.cfg.GracefulStopTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.grpc.Stop()
		<-done
	}
}

// Close releases the store and stops the gRPC server. Run calls it; call it
// directly only when Run was never started.
func (c *Controller) Close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.failed == nil {
			c.failed = fmt.Errorf("%w: closed", ErrUnavailable)
		}
		close(c.notify) // wake long-polls
		c.notify = make(chan struct{})
		c.mu.Unlock()
		c.grpc.Stop()
		if err := c.store.Close(); err != nil {
			c.log.Error("close metadata store", "err", err)
		}
	})
}

func (c *Controller) fatalErr() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.failed != nil && !errors.Is(c.failed, ErrUnavailable) {
		return c.failed
	}
	return nil
}

func (c *Controller) nowMs() int64 { return c.now().UnixMilli() }

// commitLocked persists d, applies it and wakes followers. c.mu is held.
// A store failure leaves the image unchanged and is returned as
// ErrUnavailable; an apply failure after a durable write means the image and
// the file disagree, so the controller stops accepting changes (a restart
// replays the file).
func (c *Controller) commitLocked(d *twinlogv1.MetadataDelta) error {
	// Every command ends here: report the changes it could not make.
	c.logEvents(c.state.DrainEpochExhausted())
	if d == nil {
		return nil
	}
	if c.failed != nil {
		return c.failed
	}
	start := time.Now()
	if err := c.store.Append(d); err != nil {
		c.log.Error("persist metadata change", "offset", d.GetOffset(), "err", err)
		return fmt.Errorf("%w: persist: %v", ErrUnavailable, err)
	}
	c.obs.ObserveCommit(time.Since(start))
	events, err := c.state.Apply(d)
	if err != nil {
		c.failed = fmt.Errorf("controller: apply persisted delta %d: %w", d.GetOffset(), err)
		c.log.Error("apply metadata change", "offset", d.GetOffset(), "err", err)
		return c.failed
	}
	c.logEvents(events)
	c.refreshACLs()
	if c.committed != nil {
		c.committed(c.state, d, events)
	}
	c.trackMirrors(d)
	c.stats.apply(c.state, d, c.obs)
	close(c.notify)
	c.notify = make(chan struct{})
	if c.state.Offset()-c.compactedAt >= int64(c.cfg.CompactEveryDeltas) {
		select {
		case c.compactc <- struct{}{}:
		default:
		}
	}
	return nil
}

// trackMirrors keeps the set of mirror names (State has no listing).
func (c *Controller) trackMirrors(d *twinlogv1.MetadataDelta) {
	for _, n := range d.GetRemovedMirrors() {
		delete(c.mirrorNames, n)
	}
	for _, m := range d.GetMirrors() {
		c.mirrorNames[m.GetName()] = true
	}
}

// Propose runs one command under the lock: fn computes a delta on the
// current state (nil for none), which is persisted and applied. Every
// mutating RPC ends here; drivers without a network (the simulator's
// operator, tests) call it directly with the same metastate command.
func (c *Controller) Propose(fn func(s *metastate.State) *twinlogv1.MetadataDelta) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return c.failed
	}
	return c.commitLocked(fn(c.state))
}

func (c *Controller) logEvents(events []metastate.Event) {
	total, unclean := 0, 0
	for _, e := range events {
		switch e.Kind {
		case metastate.EventLeaderElected:
			total++
			c.log.Debug("leader elected", "topic", e.Topic, "partition", e.Partition, "leader", e.Broker,
				"old_leader", e.OldLeader, "leader_epoch", e.LeaderEpoch)
		case metastate.EventUncleanLeaderElected:
			total++
			unclean++
			c.log.Warn("unclean leader elected", "topic", e.Topic, "partition", e.Partition, "leader", e.Broker,
				"old_leader", e.OldLeader, "leader_epoch", e.LeaderEpoch)
		case metastate.EventLeaderLost:
			c.log.Warn("partition offline", "topic", e.Topic, "partition", e.Partition, "old_leader", e.OldLeader,
				"leader_epoch", e.LeaderEpoch, "elr", e.ELR)
		case metastate.EventISRChanged:
			c.log.Debug("isr changed", "topic", e.Topic, "partition", e.Partition, "isr", e.ISR, "elr", e.ELR)
		case metastate.EventBrokerRegistered:
			c.log.Info("broker registered", "broker_id", e.Broker, "broker_epoch", e.BrokerEpoch)
		case metastate.EventBrokerFenced:
			c.log.Warn("broker fenced", "broker_id", e.Broker, "broker_epoch", e.BrokerEpoch)
		case metastate.EventBrokerUnfenced:
			c.log.Info("broker unfenced", "broker_id", e.Broker, "broker_epoch", e.BrokerEpoch)
		case metastate.EventEpochExhausted:
			c.log.Error("partition change refused: its leader or partition epoch is at MaxInt32; recreate the topic",
				"topic", e.Topic, "partition", e.Partition, "leader", e.Broker, "leader_epoch", e.LeaderEpoch, "isr", e.ISR)
		case metastate.EventBrokerShuttingDown:
			c.log.Info("broker in controlled shutdown", "broker_id", e.Broker, "broker_epoch", e.BrokerEpoch)
		}
	}
	if total > 0 {
		c.obs.ObserveElections(total, unclean)
	}
}

// Compact writes a snapshot of the current image and drops deltas older
// than the retained window.
func (c *Controller) Compact() error {
	c.mu.RLock()
	if c.failed != nil {
		c.mu.RUnlock()
		return c.failed
	}
	snap := c.state.Snapshot()
	c.mu.RUnlock()
	start := time.Now()
	n, err := c.store.Compact(snap, c.cfg.RetainDeltas)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.compactedAt = max(c.compactedAt, snap.GetOffset())
	c.mu.Unlock()
	c.log.Info("metadata compacted", "offset", snap.GetOffset(), "deleted_deltas", n,
		"duration", time.Since(start).String())
	return nil
}

// Tick turns the clock into one State.Tick: session timeouts fence brokers,
// leaderless partitions are re-elected and recovery rounds start or end.
// Run calls it on every TickInterval; tests may call it directly.
func (c *Controller) Tick(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return c.failed
	}
	d, res := c.state.Tick(c.nowMs())
	err := c.commitLocked(d)
	for _, r := range res.EndedRounds {
		if cancel := c.rounds[r.ID]; cancel != nil {
			cancel()
			delete(c.rounds, r.ID)
		}
	}
	if err != nil {
		// The rounds were planned on a view that was not persisted.
		c.state.AbortRounds(roundIDs(res.StartRounds))
		return err
	}
	for _, r := range res.StartRounds {
		c.startRoundLocked(r)
	}
	return nil
}

func roundIDs(rs []metastate.Round) []uint64 {
	ids := make([]uint64, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}
