package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/twinlog/twinlog/controller/metastate"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsFollowSpec(t *testing.T) {
	c := DefaultController()
	want := ControllerConfig{
		ListenAddress: "127.0.0.1:9090", DataDir: "./run/controller",
		MinInsyncReplicas: 1, EligibleLeaderReplicasEnabled: true, UncleanRecoveryStrategy: "balanced",
		UncleanRecoveryTimeout: 300 * time.Second, BrokerSessionTimeout: 9 * time.Second, BrokerHeartbeatInterval: 2 * time.Second,
		MirrorStateTopicReplicationFactor: 3, MirrorStateTopicNumPartitions: 1, MaxRequestPartitionSizeLimit: 1000,
		// The controller's own defaults (controller.Config, metastate).
		CreateTopicsMaxPartitionsPerRequest: metastate.DefaultMaxCreatePartitionsPerRequest,
		MaxClusterPartitions:                metastate.DefaultMaxClusterPartitions,
		MetadataFetchMaxBytes:               16 << 20,
		// Kafka's ssl.client.auth is none by default; twinlog asks for a
		// certificate whenever TLS is on (no effect without tls.cert.file).
		Security: SecurityConfig{TLSClientAuth: "required", PrincipalMappingRules: "DEFAULT"},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("controller defaults (-want +got):\n%s", diff)
	}
	b := DefaultBroker()
	if b.ReplicaLagTimeMax != 30*time.Second || b.Mirror.PendingTimeout != 300*time.Second || b.GCPercent != 400 || b.MemoryLimitBytes != 0 ||
		b.Mirror.FailedRetryInitialBackoff != 100*time.Millisecond || b.Mirror.FailedRetryMaxBackoff != 300*time.Second ||
		b.Mirror.FailedRetryMaxAttempts != 20 || b.MaxRequestPartitionSizeLimit != 1000 || b.ListenAddress != "127.0.0.1:9091" {
		t.Errorf("broker defaults off SPEC §1.3: %+v", b)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
broker.id: 1
log.dirs: [/data/a, /data/b]
replica.lag.time.max.ms: 1000
log.retention.ms: 5000
listeners: ["PLAINTEXT://0.0.0.0:9999"]
`)
	t.Setenv("TWINLOG_LOG_RETENTION_MS", "6000")
	t.Setenv("TWINLOG_MIRROR_FAILED_RETRY_MAX_ATTEMPTS", "7")
	t.Setenv("TWINLOG_REPLICA_LAG_TIME_MAX_MS", "2000")
	fs := pflag.NewFlagSet("brokerd", pflag.ContinueOnError)
	RegisterBrokerFlags(fs)
	if err := fs.Parse([]string{"--replica.lag.time.max.ms=3000"}); err != nil {
		t.Fatal(err)
	}
	c, err := LoadBroker(file, fs)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.BrokerID != 1 {
		t.Errorf("broker.id from file = %d", c.BrokerID)
	}
	if diff := cmp.Diff([]string{"/data/a", "/data/b"}, c.Log.Dirs); diff != "" {
		t.Errorf("log.dirs: %s", diff)
	}
	if c.Log.Retention != 6*time.Second {
		t.Errorf("env should beat file: log.retention.ms = %v", c.Log.Retention)
	}
	if c.ReplicaLagTimeMax != 3*time.Second {
		t.Errorf("flag should beat env: replica.lag.time.max.ms = %v", c.ReplicaLagTimeMax)
	}
	if c.Mirror.FailedRetryMaxAttempts != 7 {
		t.Errorf("env only: mirror.failed.retry.max.attempts = %d", c.Mirror.FailedRetryMaxAttempts)
	}
	if c.ListenAddress != "0.0.0.0:9999" || c.AdvertisedAddress != "0.0.0.0:9999" {
		t.Errorf("listen from listeners: %q / %q", c.ListenAddress, c.AdvertisedAddress)
	}
}

// TestEnvOverridesEveryKey sets each key only through its env variable.
func TestEnvOverridesEveryKey(t *testing.T) {
	for _, f := range controllerFields(&ControllerConfig{}) {
		t.Run(f.key, func(t *testing.T) {
			val := "7"
			switch {
			case strings.HasSuffix(f.key, ".enabled"), strings.HasSuffix(f.key, ".enable"), f.key == "allow.everyone.if.no.acl.found":
				val = "true"
			case f.key == "unclean.recovery.strategy":
				val = "aggressive"
			case strings.HasSuffix(f.key, "address"):
				val = "10.1.1.1:7"
			}
			t.Setenv(EnvName(f.key), val)
			c, err := LoadController("", nil)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch f.key {
			case "cluster.id":
				got = c.ClusterID
			case "listen.address":
				got = c.ListenAddress
			case "metrics.address":
				got = c.MetricsAddress
			case "health.listen.address":
				got = c.HealthAddress
			case "data.dir":
				got = c.DataDir
			case "unclean.recovery.strategy":
				got = c.UncleanRecoveryStrategy
			default:
				got = rawString(c, f.key)
			}
			if got != val {
				t.Errorf("%s via %s = %q, want %q", f.key, EnvName(f.key), got, val)
			}
		})
	}
}

func rawString(c ControllerConfig, key string) string {
	ms := func(d time.Duration) string { return strconvI(d.Milliseconds()) }
	switch key {
	case "min.insync.replicas":
		return strconvI(int64(c.MinInsyncReplicas))
	case "eligible.leader.replicas.enabled":
		return boolS(c.EligibleLeaderReplicasEnabled)
	case "unclean.leader.election.enable":
		return boolS(c.UncleanLeaderElectionEnable)
	case "unclean.recovery.timeout.ms":
		return ms(c.UncleanRecoveryTimeout)
	case "broker.session.timeout.ms":
		return ms(c.BrokerSessionTimeout)
	case "broker.heartbeat.interval.ms":
		return ms(c.BrokerHeartbeatInterval)
	case "mirror.state.topic.replication.factor":
		return strconvI(int64(c.MirrorStateTopicReplicationFactor))
	case "mirror.state.topic.num.partitions":
		return strconvI(int64(c.MirrorStateTopicNumPartitions))
	case "producer.id.space":
		return strconvI(int64(c.ProducerIDSpace))
	case "max.request.partition.size.limit":
		return strconvI(int64(c.MaxRequestPartitionSizeLimit))
	case "create.topics.max.partitions.per.request":
		return strconvI(int64(c.CreateTopicsMaxPartitionsPerRequest))
	case "cluster.max.partitions":
		return strconvI(int64(c.MaxClusterPartitions))
	case "metadata.fetch.max.bytes":
		return strconvI(int64(c.MetadataFetchMaxBytes))
	case "tls.cert.file":
		return c.Security.TLSCertFile
	case "tls.key.file":
		return c.Security.TLSKeyFile
	case "tls.ca.file":
		return c.Security.TLSCAFile
	case "tls.client.auth":
		return c.Security.TLSClientAuth
	case "ssl.principal.mapping.rules":
		return c.Security.PrincipalMappingRules
	case "authorizer.enabled":
		return boolS(c.Security.AuthorizerEnabled)
	case "super.users":
		return strings.Join(c.Security.SuperUsers, ";")
	case "allow.everyone.if.no.acl.found":
		return boolS(c.Security.AllowEveryoneIfNoACLFound)
	case "broker.principal.template":
		return c.Security.BrokerPrincipalTemplate
	}
	return "?" + key
}

func TestEnvName(t *testing.T) {
	if got := EnvName("log.flush.interval.ms"); got != "TWINLOG_LOG_FLUSH_INTERVAL_MS" {
		t.Fatal(got)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, file, env, envVal, want string
	}{
		{"unknown key", "brokerid: 1\n", "", "", `unknown key "brokerid"`},
		{"not an int", "", "TWINLOG_LOG_SEGMENT_BYTES", "big", "log.segment.bytes = big: want a decimal integer"},
		{"not ms", "log.roll.ms: soon\n", "", "", "log.roll.ms = soon: want an integer number of milliseconds"},
		{"out of range", "broker.id: 9999999999\n", "", "", "broker.id = 9999999999: out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := ""
			if tt.file != "" {
				file = writeFile(t, tt.file)
			}
			if tt.env != "" {
				t.Setenv(tt.env, tt.envVal)
			}
			_, err := LoadBroker(file, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
	if _, err := LoadController("", nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TWINLOG_ELIGIBLE_LEADER_REPLICAS_ENABLED", "maybe")
	if _, err := LoadController("", nil); err == nil || !strings.Contains(err.Error(), "eligible.leader.replicas.enabled = maybe: allowed values are true, false") {
		t.Fatalf("bool error = %v", err)
	}
}

func TestBrokerValidate(t *testing.T) {
	ok := DefaultBroker()
	ok.BrokerID = 1
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*BrokerConfig)
		want   string
	}{
		{"broker id unset", func(c *BrokerConfig) { c.BrokerID = -1 }, "broker.id = -1: must be set"},
		{"no log dirs", func(c *BrokerConfig) { c.Log.Dirs = nil }, "log.dirs"},
		{"bad listen", func(c *BrokerConfig) { c.ListenAddress = "nope" }, `listen.address = "nope": must be host:port`},
		{"bad port", func(c *BrokerConfig) { c.ControllerAddress = "h:99999" }, "controller.address"},
		{"metrics optional but well-formed", func(c *BrokerConfig) { c.MetricsAddress = "x" }, `metrics.address = "x": must be host:port or empty`},
		{"tiny segments", func(c *BrokerConfig) { c.Log.SegmentBytes = 10 }, "log.segment.bytes = 10: must be ≥ 1024"},
		{"retention below -1", func(c *BrokerConfig) { c.Log.Retention = -2 * time.Millisecond }, "log.retention.ms = -2"},
		{"retention bytes below -1", func(c *BrokerConfig) { c.Log.RetentionBytes = -5 }, "log.retention.bytes = -5"},
		{"lag zero", func(c *BrokerConfig) { c.ReplicaLagTimeMax = 0 }, "replica.lag.time.max.ms"},
		{"page limit zero", func(c *BrokerConfig) { c.MaxRequestPartitionSizeLimit = 0 }, "max.request.partition.size.limit = 0"},
		{"backoff inverted", func(c *BrokerConfig) { c.Mirror.FailedRetryMaxBackoff = time.Millisecond }, "mirror.failed.retry.max.backoff.ms = 1: must be ≥ mirror.failed.retry.initial.backoff.ms"},
		{"attempts negative", func(c *BrokerConfig) { c.Mirror.FailedRetryMaxAttempts = -1 }, "mirror.failed.retry.max.attempts"},
		{"heartbeat ≥ session", func(c *BrokerConfig) { c.BrokerHeartbeatInterval = 10 * time.Second }, "broker.session.timeout.ms = 9000: must be > broker.heartbeat.interval.ms"},
		{"gc percent zero", func(c *BrokerConfig) { c.GCPercent = 0 }, "runtime.gc.percent = 0: must be ≥ 1"},
		{"gc off without limit", func(c *BrokerConfig) { c.GCPercent = -1 }, "runtime.gc.percent = -1: -1 (no GC but at the memory limit) needs runtime.memory.limit.bytes > 0"},
		{"negative memory limit", func(c *BrokerConfig) { c.MemoryLimitBytes = -1 }, "runtime.memory.limit.bytes = -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			c.Log.Dirs = append([]string(nil), ok.Log.Dirs...)
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func TestControllerValidate(t *testing.T) {
	ok := DefaultController()
	ok.ClusterID = "cluster-a"
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*ControllerConfig)
		want   string
	}{
		{"no cluster id", func(c *ControllerConfig) { c.ClusterID = "" }, "cluster.id"},
		{"strategy", func(c *ControllerConfig) { c.UncleanRecoveryStrategy = "yolo" }, `unclean.recovery.strategy = "yolo": allowed values are none, balanced, aggressive`},
		{"min isr", func(c *ControllerConfig) { c.MinInsyncReplicas = 0 }, "min.insync.replicas = 0: must be ≥ 1"},
		{"data dir", func(c *ControllerConfig) { c.DataDir = "" }, "data.dir"},
		{"recovery timeout", func(c *ControllerConfig) { c.UncleanRecoveryTimeout = 0 }, "unclean.recovery.timeout.ms"},
		{"mirror state rf", func(c *ControllerConfig) { c.MirrorStateTopicReplicationFactor = 0 }, "mirror.state.topic.replication.factor"},
		{"mirror state partitions", func(c *ControllerConfig) { c.MirrorStateTopicNumPartitions = 0 }, "mirror.state.topic.num.partitions"},
		{"producer id space negative", func(c *ControllerConfig) { c.ProducerIDSpace = -1 }, "producer.id.space = -1: must be ≥ 1"},
		{"producer id space too large", func(c *ControllerConfig) { c.ProducerIDSpace = 32768 }, "producer.id.space = 32768: must be ≤ 32767"},
		{"session", func(c *ControllerConfig) { c.BrokerSessionTimeout = time.Second }, "broker.session.timeout.ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigsDirectoryLoads(t *testing.T) {
	root := filepath.Join("..", "..", "configs")
	files, _ := filepath.Glob(filepath.Join(root, "*", "*.yaml"))
	docker, _ := filepath.Glob(filepath.Join(root, "docker", "*", "*.yaml"))
	files = append(files, docker...)
	if len(files) == 0 {
		t.Skip("no configs/ yet")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			var err error
			if strings.HasPrefix(filepath.Base(f), "controller") {
				var c ControllerConfig
				if c, err = LoadController(f, nil); err == nil {
					err = c.Validate()
				}
			} else {
				var c BrokerConfig
				if c, err = LoadBroker(f, nil); err == nil {
					err = c.Validate()
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
