package broker

import (
	"errors"
	"fmt"
	"github.com/twinlog/twinlog/group"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/transport"
	"github.com/twinlog/twinlog/storage"
)

// FlushPolicy says when partition data is fsynced.
type FlushPolicy int8

const (
	// FlushDefault leaves fsync to the storage options (log.flush.*) and the
	// OS: durability comes from replication (Kafka's default).
	FlushDefault FlushPolicy = iota
	// FlushEveryBatch makes every append durable before it is acknowledged
	// or reported to the leader: leader acks wait for a group-committed
	// fsync, followers fsync each fetch response before fetching again.
	FlushEveryBatch
)

const (
	// MaxMessageBytes is the gRPC message limit of the broker's server
	// (both directions) and of its clients to peers.
	MaxMessageBytes = 64 << 20
	// DefaultFetchMaxBytes is Kafka's fetch.max.bytes default (55 MiB).
	DefaultFetchMaxBytes = 55 << 20
	// MaxFetchWait caps a Fetch's max_wait_ms (besides the request's
	// deadline): a long poll holds the request's resources that long.
	MaxFetchWait = 30 * time.Second
	// minFetchResponseHeadroom is the least room Validate leaves under
	// MaxMessageBytes for a fetch response's per-partition fields beyond
	// FetchMaxBytes + one batch: about 10,000 partitions' worth
	// (fetchPartitionOverhead each, plus the topic name).
	minFetchResponseHeadroom = 1 << 20
)

// Config configures a Broker. Durations are wall-clock; the replica state
// machines see milliseconds.
type Config struct {
	// ID is broker.id.
	ID twinlog.BrokerID
	// ClusterID, if set, must match the controller's.
	ClusterID string
	// ListenAddr is the gRPC listen address (used when Deps.Listener is nil).
	ListenAddr string
	// AdvertisedAddr is the host:port registered with the controller
	// (default: the listener's address).
	AdvertisedAddr string
	// KafkaListenAddr is the Kafka protocol listen address
	// (kafka.listen.address); empty and no Deps.KafkaListener: no Kafka
	// listener.
	KafkaListenAddr string
	// KafkaAdvertisedAddr is the host:port Kafka clients are told in
	// Metadata (kafka.advertised.address; default: the listener's).
	KafkaAdvertisedAddr string
	// KafkaMaxRequestBytes is socket.request.max.bytes (default
	// kafka.DefaultMaxRequestBytes).
	KafkaMaxRequestBytes int32
	// KafkaIdleTimeout is connections.max.idle.ms (default
	// kafka.DefaultIdleTimeout).
	KafkaIdleTimeout time.Duration
	// SASLMechanisms are the Kafka listener's SASL mechanisms
	// (sasl.enabled.mechanisms; empty: no SASL). With them, the listener
	// asks for a client certificate without requiring one, and a client
	// without one must authenticate with SASL.
	SASLMechanisms []string
	// SASLMaxSessionLifetime is connections.max.reauth.ms
	// (kafka.SASL.MaxSessionLifetime; 0: sessions do not expire).
	SASLMaxSessionLifetime time.Duration
	// Authz configures authorization of both listeners (authorizer.enabled,
	// super.users, ...; security/authz); the ACLs come from the metadata.
	Authz authz.Config
	// ControllerAddr is the controller's host:port.
	ControllerAddr string
	// LogDirs are the partition log directories (at least one).
	LogDirs []string
	// Log is the template for every partition log (segment size, flush
	// options, max batch size). Recovery fields are set per log.
	Log storage.Options
	// FlushPolicy selects group-committed fsyncs (FlushEveryBatch).
	FlushPolicy FlushPolicy
	// LogRetention and LogRetentionBytes are log.retention.ms and
	// log.retention.bytes: what a topic without its own retention.ms or
	// retention.bytes keeps (<= 0: no bound; zero values: unbounded).
	LogRetention      time.Duration
	LogRetentionBytes int64
	// LogRetentionCheckInterval is log.retention.check.interval.ms, how
	// often retention looks at every log (default 5 min, Kafka's).
	LogRetentionCheckInterval time.Duration

	// ReplicaLagTimeMax is replica.lag.time.max.ms (SPEC §4.5), default 30s.
	ReplicaLagTimeMax time.Duration
	// HeartbeatInterval is broker.heartbeat.interval.ms, default 2s.
	HeartbeatInterval time.Duration
	// TickInterval drives replica Tick (ISR shrink, produce timeouts),
	// default 100ms.
	TickInterval time.Duration
	// CheckpointInterval is the HW checkpoint period (SPEC §2.5), default 5s.
	CheckpointInterval time.Duration
	// MetadataMaxWait is the FetchMetadata long-poll wait, default 5s.
	MetadataMaxWait time.Duration
	// ReplicaFetchMaxWait is the follower fetch long-poll wait, default 500ms.
	ReplicaFetchMaxWait time.Duration
	// ReplicaFetchMaxBytes bounds one follower fetch response, default
	// 10 MiB (Kafka's replica.fetch.response.max.bytes).
	ReplicaFetchMaxBytes int
	// ReplicaFetchPartitionMaxBytes bounds one partition of a follower
	// fetch response (at least one batch is always sent), default 1 MiB
	// (Kafka's replica.fetch.max.bytes). A lagging follower of many
	// partitions otherwise reads the whole response budget for each: with
	// acks=1 and followers behind, 16 MiB per partition kept ~600 MB of
	// read and receive buffers live in a 3-broker twinbench process.
	ReplicaFetchPartitionMaxBytes int
	// FetchMaxBytes is fetch.max.bytes: the record bytes one Fetch response
	// carries at most, whatever the request's max_bytes or partition max
	// bytes ask (0 or more: clamped), default DefaultFetchMaxBytes
	// (Kafka's 55 MiB). A response may pass it by one batch (the first
	// batch of a partition is always whole, Kafka semantics), so
	// FetchMaxBytes + Log.MaxBatchBytes must leave room under
	// MaxMessageBytes for the per-partition fields (Validate).
	FetchMaxBytes int
	// LogMessageTimestampBeforeMax and LogMessageTimestampAfterMax are
	// log.message.timestamp.before.max.ms / after.max.ms (Kafka 3.6+): a
	// produced record's timestamp may be at most this much before / after
	// the broker's clock, else INVALID_TIMESTAMP. Broker-wide (no topic
	// override yet). Before: zero is Kafka's default, unbounded; after:
	// zero is the default, 1h (Kafka 4.0's), and math.MaxInt64 (what
	// Kafka's Long.MAX_VALUE maps to) is unbounded.
	LogMessageTimestampBeforeMax time.Duration
	LogMessageTimestampAfterMax  time.Duration
	// RPCTimeout bounds controller and peer RPCs, default 5s.
	RPCTimeout time.Duration
	// ControlledShutdownTimeout bounds waiting for the controller to grant a
	// controlled shutdown, default 10s.
	ControlledShutdownTimeout time.Duration
	// DefaultProduceTimeout applies to produce requests with timeoutMs ≤ 0,
	// default 30s.
	DefaultProduceTimeout time.Duration
	// MaxRequestPartitionSizeLimit is max.request.partition.size.limit
	// (SPEC §5), default 1000.
	MaxRequestPartitionSizeLimit int

	// MirrorPendingTimeout is mirror.pending.timeout.ms (SPEC §1.3), the
	// broker's static setting: a value set cluster-wide (AlterConfigs)
	// overrides it, as Kafka's dynamic cluster default overrides
	// server.properties; zero takes the cluster's value or default (300s).
	MirrorPendingTimeout time.Duration
	// MirrorRetryInitialBackoff, MirrorRetryMaxBackoff and
	// MirrorRetryMaxAttempts are mirror.failed.retry.*, likewise (zero: the
	// cluster's value or default, 100ms, 300s, 20).
	MirrorRetryInitialBackoff time.Duration
	MirrorRetryMaxBackoff     time.Duration
	MirrorRetryMaxAttempts    int

	// Groups configures the group coordinators (group.initial.rebalance.
	// delay.ms, group.min/max.session.timeout.ms, group.max.size,
	// offsets.retention.minutes ...; zero fields take Kafka's defaults).
	// They serve on the Kafka listener: without one, no coordinator runs.
	Groups group.Config
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ReplicaLagTimeMax, 30*time.Second)
	def(&c.HeartbeatInterval, 2*time.Second)
	def(&c.TickInterval, 100*time.Millisecond)
	def(&c.CheckpointInterval, 5*time.Second)
	def(&c.MetadataMaxWait, 5*time.Second)
	def(&c.ReplicaFetchMaxWait, 500*time.Millisecond)
	def(&c.RPCTimeout, 5*time.Second)
	def(&c.ControlledShutdownTimeout, 10*time.Second)
	def(&c.DefaultProduceTimeout, 30*time.Second)
	def(&c.LogMessageTimestampAfterMax, time.Hour)
	def(&c.LogRetentionCheckInterval, 5*time.Minute)
	if c.ReplicaFetchMaxBytes <= 0 {
		c.ReplicaFetchMaxBytes = 10 << 20
	}
	if c.ReplicaFetchPartitionMaxBytes <= 0 {
		c.ReplicaFetchPartitionMaxBytes = 1 << 20
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if c.MaxRequestPartitionSizeLimit <= 0 {
		c.MaxRequestPartitionSizeLimit = 1000
	}
	if c.Log.MaxBatchBytes <= 0 {
		c.Log.MaxBatchBytes = storage.DefaultMaxBatchBytes
	}
	return c
}

// Validate reports a malformed configuration.
func (c Config) Validate() error {
	var errs []error
	if c.ID < 0 {
		errs = append(errs, fmt.Errorf("broker: ID %d must be >= 0", c.ID))
	}
	if c.ControllerAddr == "" {
		errs = append(errs, errors.New("broker: ControllerAddr is required"))
	}
	if len(c.LogDirs) == 0 {
		errs = append(errs, errors.New("broker: at least one log dir is required"))
	}
	if c.ReplicaLagTimeMax < 0 || c.HeartbeatInterval < 0 || c.TickInterval < 0 || c.RPCTimeout < 0 ||
		c.LogMessageTimestampBeforeMax < 0 || c.LogMessageTimestampAfterMax < 0 {
		errs = append(errs, errors.New("broker: durations must not be negative"))
	}
	if err := c.Log.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("broker: log options: %w", err))
	}
	if d := c.withDefaults(); d.FetchMaxBytes > MaxMessageBytes-d.Log.MaxBatchBytes-minFetchResponseHeadroom {
		errs = append(errs, fmt.Errorf("broker: fetch.max.bytes %d plus one batch (%d) must leave %d bytes under the %d-byte message limit",
			d.FetchMaxBytes, d.Log.MaxBatchBytes, minFetchResponseHeadroom, MaxMessageBytes))
	}
	return errors.Join(errs...)
}

// Dialer opens a client connection to a peer ("host:port"): the controller
// or another broker. Tests inject bufconn and cut links with it.
type Dialer func(addr string) (*grpc.ClientConn, error)

// Deps are the broker's injected collaborators.
type Deps struct {
	// FS is the file system of the log dirs; nil means the OS.
	FS storage.FS
	// Dial reaches the controller and peers; nil dials plain gRPC over TCP.
	Dial Dialer
	// Listener overrides Config.ListenAddr (tests pass bufconn).
	Listener net.Listener
	// KafkaListener overrides Config.KafkaListenAddr.
	KafkaListener net.Listener
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
	// Observer receives metrics; nil means none.
	Observer Observer
	// ServerOptions are added to the gRPC server.
	ServerOptions []grpc.ServerOption
	// Transport is TLS for both listeners and for dialling the controller
	// and peers (nil: plaintext).
	Transport *transport.Transport
}
