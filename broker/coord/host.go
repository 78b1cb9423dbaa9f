package coord

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/group"
)

// Env is what the host needs of its broker. The partitions are those of
// __consumer_offsets.
type Env interface {
	// NowMs is the broker's clock in Unix milliseconds.
	NowMs() int64
	// AfterFunc calls f after d on a goroutine of the broker's run, unless
	// the run ends first; stop cancels a call that has not started.
	AfterFunc(d time.Duration, f func()) (stop func())
	// Go runs f on a goroutine of the broker's run; ctx ends with the run.
	Go(f func(ctx context.Context))
	// Partitions is __consumer_offsets' partition count; false while the
	// topic does not exist.
	Partitions() (int32, bool)
	// Leads reports whether this broker leads partition p and may write
	// it, with the leader epoch it leads it in.
	Leads(p int32) (epoch int32, ok bool)
	// Read reads the records of partition p from offset from while this
	// broker leads it in epoch and its high watermark covers its log end:
	// the records, the offset to read from next, and whether that is the
	// log end. ErrNotReady while the high watermark trails the log end.
	Read(p, epoch int32, from int64) (recs []group.Record, next int64, end bool, err error)
	// Append appends recs to partition p as one batch with acks=all, if
	// this broker leads it in epoch. It appends before it returns, in call
	// order: a code other than None is a refusal before anything was
	// written, and done is never called. Otherwise done is called once,
	// later and never from within Append, with the outcome: None once the
	// batch is committed, another code when it is unknown (a timeout, lost
	// leadership, the run's end).
	Append(p, epoch int32, recs []group.Record, done func(group.ErrorCode)) group.ErrorCode
	// Coordinator is the leader of partition p and its Kafka listener;
	// false when it has none, or no listener.
	Coordinator(p int32) (kafka.Coordinator, bool)
	// CreateTopic asks the controller to create __consumer_offsets.
	CreateTopic(ctx context.Context) error
	// PartitionExists reports whether a topic partition exists (an offset
	// commit for one that does not is refused).
	PartitionExists(topic string, partition int32) bool
}

// ErrNotReady is Env.Read's answer while the partition's high watermark
// trails its log end.
var ErrNotReady = errors.New("coord: high watermark below the log end")

// Config configures a Host.
type Config struct {
	// Group configures every coordinator.
	Group group.Config
	// ReconcileInterval is how often the host compares the partitions it
	// leads with its shards (besides Reconcile calls on metadata changes),
	// and how often a loading shard whose HW trails retries. Default
	// 250ms.
	ReconcileInterval time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Observer receives rebalances and commits (nil: none).
	Observer Observer
	// Rand is each new coordinator's random source (member ids); nil: a
	// fresh generator seeded at random. A simulator passes a seeded one.
	Rand func() group.Rand
}

// Host hosts the coordinators of the partitions this broker leads. It
// implements kafka.Groups. Safe for concurrent use.
type Host struct {
	cfg Config
	env Env
	log *slog.Logger

	mu     sync.Mutex
	shards map[int32]*shard
	closed bool
	stop   func()
}

var _ kafka.Groups = (*Host)(nil)

// New returns a Host; Start begins its reconcile loop.
func New(cfg Config, env Env) (*Host, error) {
	if err := cfg.Group.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Rand == nil {
		cfg.Rand = func() group.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }
	}
	return &Host{cfg: cfg, env: env, log: cfg.Logger, shards: map[int32]*shard{}}, nil
}

// Start reconciles now and every ReconcileInterval until Close.
func (h *Host) Start() {
	var tick func()
	tick = func() {
		h.Reconcile()
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.closed {
			h.stop = h.env.AfterFunc(h.cfg.ReconcileInterval, tick)
		}
	}
	tick()
}

// Close unloads every shard, by partition (the simulator replays its
// answers): parked requests are answered NOT_COORDINATOR.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	if h.stop != nil {
		h.stop()
	}
	shards := h.shards
	h.shards = map[int32]*shard{}
	h.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(shards)) {
		shards[p].unload()
	}
}

// Reconcile loads the partitions this broker has come to lead (or leads
// in a new epoch) and unloads those it no longer leads.
func (h *Host) Reconcile() {
	n, ok := h.env.Partitions()
	if !ok {
		n = 0
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	var unload, load []*shard
	for p := range n {
		epoch, leads := h.env.Leads(p)
		s := h.shards[p]
		if s != nil && (!leads || s.epoch != epoch || s.isDead()) {
			unload = append(unload, s)
			delete(h.shards, p)
			s = nil
		}
		if leads && s == nil {
			s = h.newShard(p, epoch)
			h.shards[p] = s
			load = append(load, s)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(h.shards)) {
		if p >= n {
			unload = append(unload, h.shards[p])
			delete(h.shards, p)
		}
	}
	h.mu.Unlock()
	for _, s := range unload {
		s.unload()
		h.log.Info("group coordinator unloaded", "partition", s.p, "leader_epoch", s.epoch)
	}
	for _, s := range load {
		h.env.Go(s.load)
	}
}

func (h *Host) newShard(p, epoch int32) *shard {
	c, err := group.New(h.cfg.Group, group.Deps{Rand: h.cfg.Rand()})
	if err != nil {
		panic(err) // the config was validated by New
	}
	return &shard{h: h, p: p, epoch: epoch, c: c, waiters: map[group.Ref]func(group.ResponseBody){}, tickAt: group.NoTick}
}

// shardFor is the shard of a group's partition, nil when this broker does
// not coordinate it.
func (h *Host) shardFor(groupID string) *shard {
	n, ok := h.env.Partitions()
	if !ok {
		return nil
	}
	p := group.PartitionFor(groupID, n)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.shards[p]
}

// allShards are the shards held now, by partition.
func (h *Host) allShards() []*shard {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*shard, 0, len(h.shards))
	for _, p := range slices.Sorted(maps.Keys(h.shards)) {
		out = append(out, h.shards[p])
	}
	return out
}

// Group returns a group's state from its coordinator on this broker, for
// tests and tools.
func (h *Host) Group(id string) (group.GroupInfo, error) {
	s := h.shardFor(id)
	if s == nil {
		return group.GroupInfo{}, group.ErrNoGroup
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Group(id)
}
