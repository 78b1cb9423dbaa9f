package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/twinlog/twinlog/internal/configdef"
)

// EnvPrefix prefixes every environment override.
const EnvPrefix = "TWINLOG"

// UncleanRecoveryStrategies are the allowed unclean.recovery.strategy values (SPEC §3.5).
var UncleanRecoveryStrategies = []string{"none", "balanced", "aggressive"}

// LogConfig holds the segment and retention settings of a broker (SPEC §2).
type LogConfig struct {
	Dirs                   []string      // log.dirs
	SegmentBytes           int64         // log.segment.bytes
	RollInterval           time.Duration // log.roll.ms
	RetentionBytes         int64         // log.retention.bytes (-1 unlimited)
	Retention              time.Duration // log.retention.ms (-1 unlimited)
	RetentionCheckInterval time.Duration // log.retention.check.interval.ms
	FlushIntervalMessages  int64         // log.flush.interval.messages
	FlushInterval          time.Duration // log.flush.interval.ms (0: only when replication needs it)
}

// MirrorConfig holds the broker-side mirror settings (SPEC §1.3, §6.5).
type MirrorConfig struct {
	PendingTimeout            time.Duration // mirror.pending.timeout.ms
	FailedRetryInitialBackoff time.Duration // mirror.failed.retry.initial.backoff.ms
	FailedRetryMaxBackoff     time.Duration // mirror.failed.retry.max.backoff.ms
	FailedRetryMaxAttempts    int           // mirror.failed.retry.max.attempts
}

// SASLMechanisms are the allowed sasl.enabled.mechanisms values.
var SASLMechanisms = []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}

// TLSClientAuths are the allowed tls.client.auth values: whether a
// server asks its clients for a certificate (Kafka's ssl.client.auth).
var TLSClientAuths = []string{"required", "requested", "none"}

// SecurityConfig is what both daemons share about transport security and
// authorization (issue 17). Without tls.cert.file every listener is
// plaintext and every caller is User:ANONYMOUS.
type SecurityConfig struct {
	TLSCertFile string // tls.cert.file: this daemon's certificate (PEM), presented as server and as client
	TLSKeyFile  string // tls.key.file: its private key (PEM)
	TLSCAFile   string // tls.ca.file: the certificates trusted for peers and clients (PEM bundle)
	// TLSClientAuth is tls.client.auth: required (every caller presents a
	// certificate), requested (a caller without one is User:ANONYMOUS) or
	// none.
	TLSClientAuth string
	// PrincipalMappingRules is ssl.principal.mapping.rules (Kafka's syntax):
	// how a certificate's subject becomes a principal.
	PrincipalMappingRules string
	AuthorizerEnabled     bool     // authorizer.enabled: check ACLs on every RPC
	SuperUsers            []string // super.users: principals allowed everything (';'-separated)
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found.
	AllowEveryoneIfNoACLFound bool
	// BrokerPrincipalTemplate is broker.principal.template: broker N's
	// principal, {id} standing for N ("User:broker-{id}"); empty: requests
	// acting as a broker are not tied to a principal.
	BrokerPrincipalTemplate string
}

// TLSEnabled reports whether the daemon's listeners use TLS.
func (s SecurityConfig) TLSEnabled() bool { return s.TLSCertFile != "" }

func securityFields(s *SecurityConfig) []field {
	return []field{
		strField("tls.cert.file", "", "this daemon's TLS certificate, PEM (empty: plaintext listeners)", &s.TLSCertFile),
		strField("tls.key.file", "", "private key of tls.cert.file, PEM", &s.TLSKeyFile),
		strField("tls.ca.file", "", "PEM bundle of the CAs trusted for peers and clients", &s.TLSCAFile),
		strField("tls.client.auth", "required", "required, requested or none: whether callers must present a certificate", &s.TLSClientAuth),
		strField("ssl.principal.mapping.rules", "DEFAULT", "Kafka's rules turning a certificate subject into a principal name", &s.PrincipalMappingRules),
		boolField("authorizer.enabled", "false", "check every request against the cluster's ACLs", &s.AuthorizerEnabled),
		sepListField("super.users", "", "principals allowed everything, ';'-separated (User:admin;User:broker-1)", ";", &s.SuperUsers),
		boolField("allow.everyone.if.no.acl.found", "false", "allow a request when no ACL names its resource", &s.AllowEveryoneIfNoACLFound),
		strField("broker.principal.template", "", "broker N's principal with {id} for N, e.g. User:broker-{id}: only it may act as broker N (empty: not checked)", &s.BrokerPrincipalTemplate),
	}
}

func (s SecurityConfig) validate(errs *[]error) {
	bad := func(key string, val any, want string) {
		*errs = append(*errs, fmt.Errorf("config: %s = %v: %s", key, val, want))
	}
	if s.TLSCertFile != "" || s.TLSKeyFile != "" || s.TLSCAFile != "" {
		for _, kv := range [][2]string{{"tls.cert.file", s.TLSCertFile}, {"tls.key.file", s.TLSKeyFile}, {"tls.ca.file", s.TLSCAFile}} {
			if kv[1] == "" {
				bad(kv[0], `""`, "tls.cert.file, tls.key.file and tls.ca.file are set together")
			}
		}
	}
	if !slices.Contains(TLSClientAuths, s.TLSClientAuth) {
		bad("tls.client.auth", s.TLSClientAuth, "allowed values are "+strings.Join(TLSClientAuths, ", "))
	}
	if t := s.BrokerPrincipalTemplate; t != "" && (!strings.Contains(t, "{id}") || strings.IndexByte(t, ':') <= 0) {
		bad("broker.principal.template", t, `a principal "Type:name" containing {id}, e.g. User:broker-{id}`)
	}
	for _, u := range s.SuperUsers {
		if i := strings.IndexByte(u, ':'); i <= 0 || i == len(u)-1 {
			bad("super.users", u, `each principal is "Type:name", e.g. User:admin`)
		}
	}
}

// BrokerConfig configures brokerd.
type BrokerConfig struct {
	BrokerID          int32    // broker.id
	ClusterID         string   // cluster.id (empty: take the controller's)
	Listeners         []string // listeners (Kafka form; first one used if listen.address is unset)
	ListenAddress     string   // listen.address host:port for gRPC
	AdvertisedAddress string   // advertised.address registered with the controller (default listen.address)
	ControllerAddress string   // controller.address
	MetricsAddress    string   // metrics.address (empty: no metrics endpoint)
	HealthAddress     string   // health.listen.address (empty: no plaintext health listener)

	KafkaListenAddress     string // kafka.listen.address: the Kafka protocol listener (empty: none)
	KafkaAdvertisedAddress string // kafka.advertised.address: what Metadata tells Kafka clients (default kafka.listen.address)
	SocketRequestMaxBytes  int32  // socket.request.max.bytes: largest Kafka request frame
	// ConnectionsMaxIdle is connections.max.idle.ms: a Kafka connection
	// that sends nothing for that long is closed.
	ConnectionsMaxIdle time.Duration
	// SASLEnabledMechanisms is sasl.enabled.mechanisms: SCRAM-SHA-512,
	// SCRAM-SHA-256, PLAIN on the Kafka listener (empty: no SASL).
	SASLEnabledMechanisms []string
	// ConnectionsMaxReauth is connections.max.reauth.ms: how long a SASL
	// session lasts before the client must re-authenticate (KIP-368; 0:
	// forever).
	ConnectionsMaxReauth time.Duration

	Log    LogConfig
	Mirror MirrorConfig

	ReplicaLagTimeMax            time.Duration // replica.lag.time.max.ms
	MaxRequestPartitionSizeLimit int32         // max.request.partition.size.limit
	BrokerHeartbeatInterval      time.Duration // broker.heartbeat.interval.ms
	BrokerSessionTimeout         time.Duration // broker.session.timeout.ms (for sanity checks only)

	FetchMaxBytes int // fetch.max.bytes: record bytes of one Fetch response
	// log.message.timestamp.{before,after}.max.ms: how far a produced
	// record's timestamp may lie before / after the broker's clock;
	// NoTimestampBound when set to Kafka's "no bound" (Long.MAX_VALUE).
	LogMessageTimestampBeforeMax time.Duration
	LogMessageTimestampAfterMax  time.Duration

	GCPercent        int   // runtime.gc.percent (GOGC, which wins when set)
	MemoryLimitBytes int64 // runtime.memory.limit.bytes (GOMEMLIMIT, which wins when set; 0: none)

	Security SecurityConfig
}

// ControllerConfig configures controllerd.
type ControllerConfig struct {
	ClusterID      string // cluster.id
	ListenAddress  string // listen.address
	MetricsAddress string // metrics.address
	HealthAddress  string // health.listen.address (empty: none)
	DataDir        string // data.dir, holds the bbolt file

	MinInsyncReplicas                 int           // min.insync.replicas
	EligibleLeaderReplicasEnabled     bool          // eligible.leader.replicas.enabled
	UncleanRecoveryStrategy           string        // unclean.recovery.strategy
	UncleanLeaderElectionEnable       bool          // unclean.leader.election.enable
	UncleanRecoveryTimeout            time.Duration // unclean.recovery.timeout.ms
	BrokerSessionTimeout              time.Duration // broker.session.timeout.ms
	BrokerHeartbeatInterval           time.Duration // broker.heartbeat.interval.ms
	MirrorStateTopicReplicationFactor int           // mirror.state.topic.replication.factor (static)
	MirrorStateTopicNumPartitions     int           // mirror.state.topic.num.partitions (static)
	ProducerIDSpace                   int           // producer.id.space (static; 0: unset, derived from cluster.id)
	MaxRequestPartitionSizeLimit      int32         // max.request.partition.size.limit

	CreateTopicsMaxPartitionsPerRequest int // create.topics.max.partitions.per.request
	MaxClusterPartitions                int // cluster.max.partitions
	MetadataFetchMaxBytes               int // metadata.fetch.max.bytes

	Security SecurityConfig
}

// field is one config key: its default (in input syntax) and how to parse
// a value as written (file, env, flag or default) into the struct.
type field struct {
	key   string
	def   string
	usage string
	set   func(v value) error
}

func brokerFields(c *BrokerConfig) []field {
	return append([]field{
		intField("broker.id", "-1", "this broker's id (required, ≥ 0)", &c.BrokerID),
		strField("cluster.id", "", "cluster id (empty: accept the controller's)", &c.ClusterID),
		listField("listeners", "", "Kafka-style listeners, e.g. PLAINTEXT://0.0.0.0:9091 (first is used when listen.address is unset)", &c.Listeners),
		strField("listen.address", "", "gRPC listen address host:port (default from listeners, else 127.0.0.1:9091)", &c.ListenAddress),
		strField("advertised.address", "", "address other nodes use to reach this broker (default listen.address)", &c.AdvertisedAddress),
		strField("controller.address", "127.0.0.1:9090", "controller host:port", &c.ControllerAddress),
		strField("metrics.address", "", "Prometheus /metrics listen address (empty: disabled)", &c.MetricsAddress),
		strField("health.listen.address", "", "plaintext gRPC listener serving only grpc.health.v1, for probes that cannot do TLS (empty: disabled)", &c.HealthAddress),
		strField("kafka.listen.address", "127.0.0.1:9092", "Kafka protocol listen address host:port (empty: no Kafka listener)", &c.KafkaListenAddress),
		strField("kafka.advertised.address", "", "address Kafka clients are told to reach this broker at (default kafka.listen.address)", &c.KafkaAdvertisedAddress),
		intField("socket.request.max.bytes", "104857600", "largest Kafka request frame; a larger one closes its connection", &c.SocketRequestMaxBytes),
		msField("connections.max.idle.ms", "600000", "a Kafka connection that sends nothing for this long is closed (also the time a connection has to authenticate)", &c.ConnectionsMaxIdle),
		listField("sasl.enabled.mechanisms", "", "SASL mechanisms of the Kafka listener: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN (TLS only); clients without a certificate must then authenticate (empty: no SASL)", &c.SASLEnabledMechanisms),
		msField("connections.max.reauth.ms", "0", "how long a SASL session on the Kafka listener lasts: clients re-authenticate on the connection before it ends, or it is closed, so deleted or changed credentials lose their connections (0: sessions do not expire)", &c.ConnectionsMaxReauth),
		listField("log.dirs", "./run/broker", "partition log directories", &c.Log.Dirs),
		intField("log.segment.bytes", "1073741824", "segment size before rolling", &c.Log.SegmentBytes),
		msField("log.roll.ms", "604800000", "segment age before rolling", &c.Log.RollInterval),
		intField("log.retention.bytes", "-1", "partition size kept (-1 unlimited)", &c.Log.RetentionBytes),
		msField("log.retention.ms", "604800000", "record age kept (-1 unlimited)", &c.Log.Retention),
		msField("log.retention.check.interval.ms", "300000", "how often retention looks at every log", &c.Log.RetentionCheckInterval),
		intField("log.flush.interval.messages", strconv.FormatInt(math.MaxInt64, 10), "fsync after this many messages", &c.Log.FlushIntervalMessages),
		msField("log.flush.interval.ms", "0", "fsync at least this often (0: only when replication requires)", &c.Log.FlushInterval),
		msField("replica.lag.time.max.ms", "30000", "ISR shrink threshold (SPEC §4.5)", &c.ReplicaLagTimeMax),
		intField("max.request.partition.size.limit", "1000", "DescribeTopicPartitions page limit (SPEC §5)", &c.MaxRequestPartitionSizeLimit),
		msField("mirror.pending.timeout.ms", "300000", "PENDING/PREPARING timeout before FAILED (SPEC §6.6)", &c.Mirror.PendingTimeout),
		msField("mirror.failed.retry.initial.backoff.ms", "100", "first FAILED retry backoff", &c.Mirror.FailedRetryInitialBackoff),
		msField("mirror.failed.retry.max.backoff.ms", "300000", "largest FAILED retry backoff", &c.Mirror.FailedRetryMaxBackoff),
		intField("mirror.failed.retry.max.attempts", "20", "automatic FAILED retries", &c.Mirror.FailedRetryMaxAttempts),
		msField("broker.heartbeat.interval.ms", "2000", "heartbeat period (SPEC §3.2)", &c.BrokerHeartbeatInterval),
		msField("broker.session.timeout.ms", "9000", "controller's fencing timeout, used to check the heartbeat interval", &c.BrokerSessionTimeout),
		intField("fetch.max.bytes", "57671680", "record bytes one Fetch response carries at most, whatever the request asks (Kafka's 55 MiB; at most about 62 MiB, under the 64 MiB message limit)", &c.FetchMaxBytes),
		timestampBoundField("log.message.timestamp.before.max.ms", kafkaLongMax, "how far before the broker's clock a produced record's timestamp may be (9223372036854775807: no bound)", &c.LogMessageTimestampBeforeMax),
		timestampBoundField("log.message.timestamp.after.max.ms", "3600000", "how far after the broker's clock a produced record's timestamp may be (9223372036854775807: no bound)", &c.LogMessageTimestampAfterMax),
		intField("runtime.gc.percent", strconv.Itoa(DefaultBrokerGCPercent), "Go GC target: heap growth % between collections (the GOGC variable wins; -1: only at runtime.memory.limit.bytes)", &c.GCPercent),
		intField("runtime.memory.limit.bytes", "0", "Go soft memory limit (the GOMEMLIMIT variable wins; 0: none)", &c.MemoryLimitBytes),
	}, securityFields(&c.Security)...)
}

// DefaultBrokerGCPercent is runtime.gc.percent's default. A broker's live
// heap is small (records live in the page cache and pooled buffers), so
// Go's default of 100 collects every few MB allocated: with a 30 MB heap
// at 2,000 one-record produces/s, the in-process bench spent ~15% more
// CPU and one synchronous producer got 3,317 instead of 3,941 acks/s (p99
// 1.5 instead of 0.7 ms). It costs memory: RSS 80 → 170 MB at full
// acks=all load in that bench, 155 → 650 MB with acks=1, where lagging
// fetchers hold 1-10 MiB buffers (docs/operations.md, Performance).
const DefaultBrokerGCPercent = 400

func controllerFields(c *ControllerConfig) []field {
	return append([]field{
		strField("cluster.id", "", "cluster id (required)", &c.ClusterID),
		strField("listen.address", "127.0.0.1:9090", "gRPC listen address host:port", &c.ListenAddress),
		strField("metrics.address", "", "Prometheus /metrics listen address (empty: disabled)", &c.MetricsAddress),
		strField("health.listen.address", "", "plaintext gRPC listener serving only grpc.health.v1, for probes that cannot do TLS (empty: disabled)", &c.HealthAddress),
		strField("data.dir", "./run/controller", "directory of the bbolt metadata file", &c.DataDir),
		intField("min.insync.replicas", "1", "cluster default m (SPEC §1.3)", &c.MinInsyncReplicas),
		boolField("eligible.leader.replicas.enabled", "true", "keep ELR (KIP-966)", &c.EligibleLeaderReplicasEnabled),
		strField("unclean.recovery.strategy", "balanced", "none, balanced or aggressive (SPEC §3.5)", &c.UncleanRecoveryStrategy),
		boolField("unclean.leader.election.enable", "false", "true implies aggressive", &c.UncleanLeaderElectionEnable),
		msField("unclean.recovery.timeout.ms", "300000", "balanced round timeout", &c.UncleanRecoveryTimeout),
		msField("broker.session.timeout.ms", "9000", "fence a broker without heartbeats this long", &c.BrokerSessionTimeout),
		msField("broker.heartbeat.interval.ms", "2000", "expected broker heartbeat period", &c.BrokerHeartbeatInterval),
		intField("mirror.state.topic.replication.factor", "3", "__mirror_state RF (static)", &c.MirrorStateTopicReplicationFactor),
		intField("mirror.state.topic.num.partitions", "1", "__mirror_state partitions (static)", &c.MirrorStateTopicNumPartitions),
		intField(configdef.KeyProducerIDSpace, "0", "idempotent producer id space, 1 to 32767: ids are space<<48 | counter "+
			"(static, fixed at the cluster's first start; 0: derived from cluster.id). Two clusters that mirror each other "+
			"must have different spaces: mirror creation refuses a source in this cluster's space", &c.ProducerIDSpace),
		intField("max.request.partition.size.limit", "1000", "DescribeTopicPartitions page limit (SPEC §5)", &c.MaxRequestPartitionSizeLimit),
		intField(configdef.KeyCreateTopicsMaxPartitionsPerRequest, "10000", "partitions one CreateTopics request may create", &c.CreateTopicsMaxPartitionsPerRequest),
		intField(configdef.KeyClusterMaxPartitions, "100000", "partitions the cluster may hold (CreateTopics refuses more)", &c.MaxClusterPartitions),
		intField(configdef.KeyMetadataFetchMaxBytes, "16777216", "encoded size of one FetchMetadata answer, snapshot pages included (brokers far behind page through the log and the snapshot)", &c.MetadataFetchMaxBytes),
	}, securityFields(&c.Security)...)
}

// EnvName returns the environment variable overriding key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// RegisterBrokerFlags defines one flag per broker key on fs (--log.dirs, ...).
func RegisterBrokerFlags(fs *pflag.FlagSet) { registerFlags(fs, brokerFields(&BrokerConfig{})) }

// RegisterControllerFlags defines one flag per controller key on fs.
func RegisterControllerFlags(fs *pflag.FlagSet) {
	registerFlags(fs, controllerFields(&ControllerConfig{}))
}

func registerFlags(fs *pflag.FlagSet, fields []field) {
	for _, f := range fields {
		if fs.Lookup(f.key) == nil {
			fs.String(f.key, f.def, f.usage+" (env "+EnvName(f.key)+")")
		}
	}
}

// DefaultBroker returns the broker defaults (broker.id still unset, -1).
func DefaultBroker() BrokerConfig {
	c, _ := LoadBroker("", nil)
	return c
}

// DefaultController returns the controller defaults.
func DefaultController() ControllerConfig {
	c, _ := LoadController("", nil)
	return c
}

// LoadBroker reads file (empty: none), env and the flags registered by
// RegisterBrokerFlags on fs (nil: none), then applies derived defaults. It
// does not call Validate.
func LoadBroker(file string, fs *pflag.FlagSet) (BrokerConfig, error) {
	var c BrokerConfig
	if err := load(file, fs, brokerFields(&c)); err != nil {
		return c, err
	}
	c.withDefaults()
	return c, nil
}

// LoadController is LoadBroker for the controller.
func LoadController(file string, fs *pflag.FlagSet) (ControllerConfig, error) {
	var c ControllerConfig
	err := load(file, fs, controllerFields(&c))
	return c, err
}

func (c *BrokerConfig) withDefaults() {
	if c.ListenAddress == "" && len(c.Listeners) > 0 {
		// A listener Validate refuses leaves the default in place; the
		// error names the listener, not a derived address.
		if addr, err := listenerAddr(c.Listeners[0]); err == nil {
			c.ListenAddress = addr
		}
	}
	if c.ListenAddress == "" {
		c.ListenAddress = "127.0.0.1:9091"
	}
	if c.AdvertisedAddress == "" {
		c.AdvertisedAddress = c.ListenAddress
	}
	if c.KafkaAdvertisedAddress == "" {
		c.KafkaAdvertisedAddress = c.KafkaListenAddress
	}
}

// Validate checks every key and reports all problems, each naming the key
// and its allowed values.
func (c BrokerConfig) Validate() error {
	var errs []error
	bad := func(key string, val any, want string) {
		errs = append(errs, fmt.Errorf("config: %s = %v: %s", key, val, want))
	}
	if c.BrokerID < 0 {
		bad("broker.id", c.BrokerID, "must be set to an integer ≥ 0 (unique in the cluster)")
	}
	for _, m := range c.SASLEnabledMechanisms {
		switch {
		case !slices.Contains(SASLMechanisms, m):
			bad("sasl.enabled.mechanisms", m, "allowed values are "+strings.Join(SASLMechanisms, ", "))
		case m == "PLAIN" && !c.Security.TLSEnabled():
			bad("sasl.enabled.mechanisms", m, "PLAIN sends the password: it needs TLS (tls.cert.file)")
		}
	}
	if c.ConnectionsMaxReauth < 0 {
		bad("connections.max.reauth.ms", c.ConnectionsMaxReauth.Milliseconds(), "must be ≥ 0 (0: sessions do not expire)")
	}
	checkAddr(&errs, "listen.address", c.ListenAddress, false)
	checkAddr(&errs, "advertised.address", c.AdvertisedAddress, false)
	checkAddr(&errs, "controller.address", c.ControllerAddress, false)
	checkAddr(&errs, "metrics.address", c.MetricsAddress, true)
	checkAddr(&errs, "health.listen.address", c.HealthAddress, true)
	if clash(c.ListenAddress, c.HealthAddress) {
		bad("health.listen.address", c.HealthAddress, "shares its port with listen.address "+c.ListenAddress+"; give the health listener its own")
	}
	checkAddr(&errs, "kafka.listen.address", c.KafkaListenAddress, true)
	checkAddr(&errs, "kafka.advertised.address", c.KafkaAdvertisedAddress, true)
	if clash(c.ListenAddress, c.KafkaListenAddress) {
		bad("kafka.listen.address", c.KafkaListenAddress, fmt.Sprintf("shares its port with listen.address %s; give the Kafka listener its own (default 127.0.0.1:9092)", c.ListenAddress))
	}
	if c.ConnectionsMaxIdle < time.Second {
		bad("connections.max.idle.ms", c.ConnectionsMaxIdle.Milliseconds(), "must be ≥ 1000")
	}
	if c.SocketRequestMaxBytes < 1024 {
		bad("socket.request.max.bytes", c.SocketRequestMaxBytes, "must be ≥ 1024")
	}
	checkListeners(&errs, c.Listeners, c.ListenAddress)
	if len(c.Log.Dirs) == 0 {
		bad("log.dirs", "[]", "needs at least one directory")
	}
	if c.Log.SegmentBytes < 1024 {
		bad("log.segment.bytes", c.Log.SegmentBytes, "must be ≥ 1024")
	}
	checkFloor(&errs, "log.roll.ms", c.Log.RollInterval)
	checkFloor(&errs, "log.retention.check.interval.ms", c.Log.RetentionCheckInterval)
	if c.Log.RetentionBytes < -1 || c.Log.RetentionBytes == 0 {
		bad("log.retention.bytes", c.Log.RetentionBytes, retentionRule)
	}
	if c.Log.Retention < -time.Millisecond || (c.Log.Retention >= 0 && c.Log.Retention < time.Millisecond) {
		bad("log.retention.ms", c.Log.Retention.Milliseconds(), retentionRule)
	}
	if c.Log.FlushIntervalMessages < 1 {
		bad("log.flush.interval.messages", c.Log.FlushIntervalMessages, "must be ≥ 1")
	}
	if c.Log.FlushInterval < 0 {
		bad("log.flush.interval.ms", c.Log.FlushInterval.Milliseconds(), "must be ≥ 0 (0: only when replication requires)")
	}
	checkFloor(&errs, "replica.lag.time.max.ms", c.ReplicaLagTimeMax)
	if c.MaxRequestPartitionSizeLimit < 1 {
		bad("max.request.partition.size.limit", c.MaxRequestPartitionSizeLimit, "must be ≥ 1")
	}
	if c.MemoryLimitBytes < 0 {
		bad("runtime.memory.limit.bytes", c.MemoryLimitBytes, "must be ≥ 0 (0: none)")
	}
	switch {
	case c.GCPercent == -1 && c.MemoryLimitBytes == 0:
		bad("runtime.gc.percent", c.GCPercent, "-1 (no GC but at the memory limit) needs runtime.memory.limit.bytes > 0")
	case c.GCPercent < -1 || c.GCPercent == 0:
		bad("runtime.gc.percent", c.GCPercent, "must be ≥ 1, or -1 with runtime.memory.limit.bytes")
	}
	checkFloor(&errs, "mirror.pending.timeout.ms", c.Mirror.PendingTimeout)
	checkFloor(&errs, "mirror.failed.retry.initial.backoff.ms", c.Mirror.FailedRetryInitialBackoff)
	checkOrder(&errs, configdef.KeyMirrorFailedRetryInitialBackoffMs, c.Mirror.FailedRetryInitialBackoff.Milliseconds(),
		configdef.KeyMirrorFailedRetryMaxBackoffMs, c.Mirror.FailedRetryMaxBackoff.Milliseconds())
	if c.Mirror.FailedRetryMaxAttempts < 1 {
		// broker.Config reads 0 as "unset" (the cluster's value applies).
		bad("mirror.failed.retry.max.attempts", c.Mirror.FailedRetryMaxAttempts,
			"must be ≥ 1 here; to turn automatic retries off, set it cluster-wide: twinctl configs set --cluster mirror.failed.retry.max.attempts=0")
	}
	checkHeartbeat(&errs, c.BrokerHeartbeatInterval, c.BrokerSessionTimeout)
	// The upper bound (the answer must fit the transport's message limit
	// with one more batch) is broker.Config.Validate's, which brokerd runs
	// next.
	if c.FetchMaxBytes < 1024 {
		bad("fetch.max.bytes", c.FetchMaxBytes, "must be ≥ 1024 (Kafka's minimum)")
	}
	checkTimestampBound(&errs, "log.message.timestamp.before.max.ms", c.LogMessageTimestampBeforeMax)
	checkTimestampBound(&errs, "log.message.timestamp.after.max.ms", c.LogMessageTimestampAfterMax)
	c.Security.validate(&errs)
	return errors.Join(errs...)
}

// Validate checks every key and reports all problems.
func (c ControllerConfig) Validate() error {
	var errs []error
	bad := func(key string, val any, want string) {
		errs = append(errs, fmt.Errorf("config: %s = %v: %s", key, val, want))
	}
	if c.ClusterID == "" {
		bad("cluster.id", `""`, "must be set (e.g. cluster-a)")
	}
	checkAddr(&errs, "listen.address", c.ListenAddress, false)
	checkAddr(&errs, "metrics.address", c.MetricsAddress, true)
	checkAddr(&errs, "health.listen.address", c.HealthAddress, true)
	if clash(c.ListenAddress, c.HealthAddress) {
		bad("health.listen.address", c.HealthAddress, "shares its port with listen.address "+c.ListenAddress+"; give the health listener its own")
	}
	if c.DataDir == "" {
		bad("data.dir", `""`, "must name the directory for the bbolt file")
	}
	checkRange(&errs, "min.insync.replicas", int64(c.MinInsyncReplicas))
	if !slices.Contains(UncleanRecoveryStrategies, c.UncleanRecoveryStrategy) {
		bad("unclean.recovery.strategy", strconv.Quote(c.UncleanRecoveryStrategy), "allowed values are "+strings.Join(UncleanRecoveryStrategies, ", "))
	}
	checkFloor(&errs, "unclean.recovery.timeout.ms", c.UncleanRecoveryTimeout)
	checkHeartbeat(&errs, c.BrokerHeartbeatInterval, c.BrokerSessionTimeout)
	// The same bounds AlterConfigs applies at run time (configdef).
	checkRange(&errs, "mirror.state.topic.replication.factor", int64(c.MirrorStateTopicReplicationFactor))
	checkRange(&errs, "mirror.state.topic.num.partitions", int64(c.MirrorStateTopicNumPartitions))
	if c.ProducerIDSpace != 0 {
		// 0 is unset: the space is derived from cluster.id.
		checkRange(&errs, configdef.KeyProducerIDSpace, int64(c.ProducerIDSpace))
	}
	checkRange(&errs, "max.request.partition.size.limit", int64(c.MaxRequestPartitionSizeLimit))
	checkRange(&errs, configdef.KeyCreateTopicsMaxPartitionsPerRequest, int64(c.CreateTopicsMaxPartitionsPerRequest))
	checkRange(&errs, configdef.KeyClusterMaxPartitions, int64(c.MaxClusterPartitions))
	checkOrder(&errs, configdef.KeyCreateTopicsMaxPartitionsPerRequest, int64(c.CreateTopicsMaxPartitionsPerRequest),
		configdef.KeyClusterMaxPartitions, int64(c.MaxClusterPartitions))
	checkRange(&errs, configdef.KeyMetadataFetchMaxBytes, int64(c.MetadataFetchMaxBytes))
	c.Security.validate(&errs)
	return errors.Join(errs...)
}

func checkHeartbeat(errs *[]error, hb, session time.Duration) {
	checkFloor(errs, "broker.heartbeat.interval.ms", hb)
	checkFloor(errs, "broker.session.timeout.ms", session)
	checkOrder(errs, configdef.KeyBrokerHeartbeatIntervalMs, hb.Milliseconds(), configdef.KeyBrokerSessionTimeoutMs, session.Milliseconds())
}

func checkAddr(errs *[]error, key, addr string, optional bool) {
	if addr == "" && optional {
		return
	}
	if scheme, _, ok := strings.Cut(addr, "://"); ok {
		*errs = append(*errs, fmt.Errorf("config: %s = %q: want host:port without a scheme (%s://); schemes belong in listeners", key, addr, scheme))
		return
	}
	host, port, err := net.SplitHostPort(addr)
	_ = host
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = errors.New("port out of range")
		}
	}
	if err != nil {
		want := "must be host:port"
		if optional {
			want += " or empty"
		}
		*errs = append(*errs, fmt.Errorf("config: %s = %q: %s", key, addr, want))
	}
}

// clash reports whether two listen addresses would bind the same port:
// the same port on the same host, or on a wildcard host.
func clash(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}
