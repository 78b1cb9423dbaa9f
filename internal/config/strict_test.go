package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// loadBrokerFrom loads a broker config from a YAML body (if any), one env
// variable (if any) and flags (if any), as brokerd does.
func loadBrokerFrom(t *testing.T, body, env, envVal string, flags ...string) (BrokerConfig, error) {
	t.Helper()
	file := ""
	if body != "" {
		file = writeFile(t, body)
	}
	if env != "" {
		t.Setenv(env, envVal)
	}
	fs := pflag.NewFlagSet("brokerd", pflag.ContinueOnError)
	RegisterBrokerFlags(fs)
	if err := fs.Parse(flags); err != nil {
		t.Fatal(err)
	}
	return LoadBroker(file, fs)
}

// TestStrictValues: every integer, duration and boolean key parses with one
// strict rule from every source. Each refused row was accepted before
// (viper and cast: "010" octal 8, 0x10, YAML true as 1, 1.9 truncated to 1,
// "1.0" as 1, 1e6, a .ms value that wrapped time.Duration, "1"/"t" as true,
// an empty key as 0).
func TestStrictValues(t *testing.T) {
	tests := []struct {
		name        string
		body        string   // YAML file
		env, envVal string   // one env variable
		flags       []string // command line
		want        string   // error substring; "" = accepted
		check       func(BrokerConfig) bool
	}{
		{name: "octal-looking int in file", body: "broker.id: 010\n", want: "broker.id = 010: want a decimal integer without leading zeros"},
		{name: "octal-looking int in env", env: "TWINLOG_BROKER_ID", envVal: "010", want: "broker.id = 010: want a decimal integer without leading zeros"},
		{name: "octal-looking int in flag", flags: []string{"--broker.id=010"}, want: "broker.id = 010: want a decimal integer without leading zeros"},
		{name: "hex", body: "broker.id: 0x10\n", want: "broker.id = 0x10: want a decimal integer without leading zeros or a 0x/0o/0b prefix"},
		{name: "0o octal", body: "broker.id: 0o10\n", want: "0x/0o/0b prefix"},
		{name: "digit separators", body: "log.segment.bytes: 1_048_576\n", want: "log.segment.bytes = 1_048_576: want a decimal integer"},
		{name: "plus sign", body: "broker.id: +5\n", want: "broker.id = +5: want a decimal integer"},
		{name: "YAML bool as int", body: "broker.id: true\n", want: "broker.id = true: want a decimal integer, not a boolean"},
		{name: "float as int", body: "log.segment.bytes: 1e6\n", want: "log.segment.bytes = 1e6: want a whole decimal integer, not a fraction or exponent"},
		{name: "float ms truncated", body: "log.retention.ms: 1.9\n", want: "log.retention.ms = 1.9: want an integer number of milliseconds: want a whole decimal integer"},
		{name: "float ms in env", env: "TWINLOG_LOG_RETENTION_MS", envVal: "1.0", want: "log.retention.ms = 1.0"},
		{name: "ms overflow", body: "log.retention.ms: 9223372036854775807\n", want: "log.retention.ms = 9223372036854775807: want an integer number of milliseconds: out of range: at most 9223372036854 ms"},
		{name: "ms just past overflow", body: "mirror.pending.timeout.ms: 9223372036855\n", want: "out of range: at most 9223372036854 ms"},
		{name: "ms largest", body: "mirror.pending.timeout.ms: 9223372036854\n",
			check: func(c BrokerConfig) bool { return c.Mirror.PendingTimeout == 9223372036854*time.Millisecond }},
		{name: "int64 overflow", body: "log.segment.bytes: 9223372036854775808\n", want: "log.segment.bytes = 9223372036854775808: out of range"},
		{name: "int32 overflow", body: "broker.id: 2147483648\n", want: "broker.id = 2147483648: out of range: want -2147483648 to 2147483647"},
		{name: "empty int", body: "broker.id:\n", want: "broker.id = null: empty value: want a decimal integer"},
		{name: "empty ms", body: "log.roll.ms: ''\n", want: `log.roll.ms = "": want an integer number of milliseconds: empty value`},
		{name: "list as int", body: "broker.id: [1]\n", want: "broker.id = [1]: want a single value, not a list"},
		{name: "minus one", body: "broker.id: 1\nlog.retention.ms: -1\n",
			check: func(c BrokerConfig) bool { return c.Log.Retention == -time.Millisecond }},
		{name: "padded env", env: "TWINLOG_BROKER_ID", envVal: " 42 ",
			check: func(c BrokerConfig) bool { return c.BrokerID == 42 }},
		{name: "zero", body: "log.flush.interval.ms: 0\n",
			check: func(c BrokerConfig) bool { return c.Log.FlushInterval == 0 }},
		{name: "quoted decimal", body: "broker.id: \"7\"\n",
			check: func(c BrokerConfig) bool { return c.BrokerID == 7 }},
		{name: "string keeps its text", body: "cluster.id: 010\n",
			check: func(c BrokerConfig) bool { return c.ClusterID == "010" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadBrokerFrom(t, tt.body, tt.env, tt.envVal, tt.flags...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !tt.check(c) {
					t.Errorf("loaded %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

// TestStrictBools: booleans are true or false (any case; YAML's True and
// TRUE too), from every source. 1, t, yes and on were accepted before by
// strconv.ParseBool or cast.
func TestStrictBools(t *testing.T) {
	const key, env = "eligible.leader.replicas.enabled", "TWINLOG_ELIGIBLE_LEADER_REPLICAS_ENABLED"
	for _, tt := range []struct {
		body, envVal string
		want         bool
		refused      bool
	}{
		{body: key + ": 1\n", refused: true},
		{body: key + ": 0\n", refused: true},
		{envVal: "1", refused: true},
		{envVal: "t", refused: true},
		{envVal: "F", refused: true},
		{body: key + ": yes\n", refused: true},
		{body: key + ":\n", refused: true},
		{body: key + ": True\n", want: true},
		{body: key + ": FALSE\n", want: false},
		{envVal: "false", want: false},
	} {
		t.Run(tt.body+tt.envVal, func(t *testing.T) {
			file := ""
			if tt.body != "" {
				file = writeFile(t, tt.body)
			}
			if tt.envVal != "" {
				t.Setenv(env, tt.envVal)
			}
			c, err := LoadController(file, nil)
			if tt.refused {
				if err == nil || !strings.Contains(err.Error(), key+" = ") || !strings.Contains(err.Error(), "allowed values are true, false") {
					t.Fatalf("err = %v, want %s refused with the allowed values", err, key)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.EligibleLeaderReplicasEnabled != tt.want {
				t.Errorf("%s = %v, want %v", key, c.EligibleLeaderReplicasEnabled, tt.want)
			}
		})
	}
}

// TestErrorsNameTheSource: an error says where the bad value came from, so
// an operator knows whether to fix the file, the environment or the flags.
func TestErrorsNameTheSource(t *testing.T) {
	_, err := loadBrokerFrom(t, "broker.id: 1\n\nlog.roll.ms: soon\n", "TWINLOG_LOG_SEGMENT_BYTES", "big", "--replica.lag.time.max.ms=0x10")
	for _, want := range []string{
		"config: log.roll.ms = soon: want an integer number of milliseconds: want a decimal integer (from file ",
		"c.yaml:3)",
		"config: log.segment.bytes = big: want a decimal integer (from env TWINLOG_LOG_SEGMENT_BYTES)",
		"config: replica.lag.time.max.ms = 0x10: want an integer number of milliseconds: want a decimal integer without leading zeros or a 0x/0o/0b prefix (write it in plain decimal) (from flag --replica.lag.time.max.ms)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant containing %q", err, want)
		}
	}
}

// TestFileShape: the file is one flat mapping; anything else is an error
// naming the file and line, not a silently ignored value.
func TestFileShape(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{"broker.id: 1\nbroker.id: 2\n", `:2: key "broker.id" is set twice`},
		{"log:\n  dirs: [a]\n", `unknown key "log"`},
		{"broker.id: 1\nlog.dirs: {a: b}\n", ":2: log.dirs: want a value or a list of values, not a mapping"},
		{"log.dirs: [[a]]\n", ":1: log.dirs: a list may hold only plain values"},
		{"- broker.id\n", ":1: want a mapping of key: value lines at the top level"},
		{"broker.id: [unclosed\n", "config: read "},
	} {
		t.Run(tt.body, func(t *testing.T) {
			_, err := LoadBroker(writeFile(t, tt.body), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
	// Comments only, or nothing: every key keeps its default.
	for _, body := range []string{"# nothing here\n", "\n", "---\n", "~\n"} {
		if c, err := LoadBroker(writeFile(t, body), nil); err != nil || c.BrokerID != -1 {
			t.Errorf("%q: %+v, %v; want the defaults", body, c.BrokerID, err)
		}
	}
}

// TestFloors: durations below the floor table (validate.go) are refused
// with the key, the value and the minimum. Each was accepted before, where
// only > 0 (or > heartbeat) was checked; retention 0 silently meant
// "unlimited".
func TestFloors(t *testing.T) {
	tests := []struct {
		name, body string
		want       string
	}{
		{"session 1 ms", "broker.heartbeat.interval.ms: 100\nbroker.session.timeout.ms: 999\n", "broker.session.timeout.ms = 999: must be ≥ 1000"},
		{"heartbeat 1 ms", "broker.heartbeat.interval.ms: 1\nbroker.session.timeout.ms: 1000\n", "broker.heartbeat.interval.ms = 1: must be ≥ 100"},
		{"session at heartbeat", "broker.heartbeat.interval.ms: 2000\nbroker.session.timeout.ms: 2000\n", "broker.session.timeout.ms = 2000: must be > broker.heartbeat.interval.ms (2000)"},
		{"lag under the follower long-poll", "replica.lag.time.max.ms: 400\n", "replica.lag.time.max.ms = 400: must be ≥ 1000"},
		{"roll every ms", "log.roll.ms: 1\n", "log.roll.ms = 1: must be ≥ 1000"},
		{"mirror pending", "mirror.pending.timeout.ms: 5\n", "mirror.pending.timeout.ms = 5: must be ≥ 1000"},
		{"busy retry", "mirror.failed.retry.initial.backoff.ms: 1\n", "mirror.failed.retry.initial.backoff.ms = 1: must be ≥ 10"},
		{"retention 0 ms", "log.retention.ms: 0\n", "log.retention.ms = 0: must be -1 (unlimited) or ≥ 1"},
		{"retention 0 bytes", "log.retention.bytes: 0\n", "log.retention.bytes = 0: must be -1 (unlimited) or ≥ 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadBroker(writeFile(t, "broker.id: 1\n"+tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want containing %q", err, tt.want)
			}
		})
	}
	t.Run("controller", func(t *testing.T) {
		c, err := LoadController(writeFile(t, "cluster.id: a\nbroker.session.timeout.ms: 1\nunclean.recovery.timeout.ms: 1\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		for _, want := range []string{"broker.session.timeout.ms = 1: must be ≥ 1000", "unclean.recovery.timeout.ms = 1: must be ≥ 1000"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Validate() = %v, want containing %q", err, want)
			}
		}
	})
	// The floors themselves are accepted.
	c, err := LoadBroker(writeFile(t, "broker.id: 1\nbroker.heartbeat.interval.ms: 100\nbroker.session.timeout.ms: 1000\nreplica.lag.time.max.ms: 1000\n"+
		"log.roll.ms: 1000\nmirror.pending.timeout.ms: 1000\nmirror.failed.retry.initial.backoff.ms: 10\nlog.retention.ms: 1\nlog.retention.bytes: 1\n"), nil)
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Errorf("floors refused: %v", err)
	}
}

// TestListeners: only host:port and PLAINTEXT://host:port are served; an
// SSL or SASL listener used to become a plaintext listener on its port.
func TestListeners(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // "" = valid; then wantAddr
		wantAddr   string
	}{
		{"plaintext", "listeners: PLAINTEXT://0.0.0.0:9999\n", "", "0.0.0.0:9999"},
		{"lower-case scheme", "listeners: [plaintext://127.0.0.1:9999]\n", "", "127.0.0.1:9999"},
		{"no scheme", "listeners: 127.0.0.1:9999\n", "", "127.0.0.1:9999"},
		{"same as listen.address", "listeners: PLAINTEXT://127.0.0.1:9999\nlisten.address: 127.0.0.1:9999\n", "", "127.0.0.1:9999"},
		{"ssl", "listeners: [SSL://0.0.0.0:9093]\n", "config: listeners = SSL://0.0.0.0:9093: scheme SSL is not implemented", ""},
		{"sasl", "listeners: SASL_PLAINTEXT://0.0.0.0:9093\n", "config: listeners = SASL_PLAINTEXT://0.0.0.0:9093: scheme SASL_PLAINTEXT is not implemented", ""},
		{"named listener", "listeners: INTERNAL://0.0.0.0:9093\n", "scheme INTERNAL is not implemented", ""},
		{"two listeners", "listeners: PLAINTEXT://0.0.0.0:9092,PLAINTEXT://0.0.0.0:9093\n", "only one listener is implemented", ""},
		{"no port", "listeners: PLAINTEXT://somewhere\n", "listeners = PLAINTEXT://somewhere: want [PLAINTEXT://]host:port", ""},
		{"disagrees with listen.address", "listeners: PLAINTEXT://0.0.0.0:9092\nlisten.address: 127.0.0.1:9091\n", "disagrees with listen.address = 127.0.0.1:9091", ""},
		{"scheme in listen.address", "listen.address: SSL://0.0.0.0:9093\n", `listen.address = "SSL://0.0.0.0:9093": want host:port without a scheme (SSL://)`, ""},
		{"scheme in controller.address", "controller.address: PLAINTEXT://c:9090\n", "controller.address", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadBroker(writeFile(t, "broker.id: 1\n"+tt.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.ListenAddress != tt.wantAddr {
					t.Errorf("listen.address = %q, want %q", c.ListenAddress, tt.wantAddr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want containing %q", err, tt.want)
			}
		})
	}
}

// TestUnknownEnv: TWINLOG_* variables that name no key of the daemon are
// listed (sorted, once) for the daemon's start-up warning; known keys and
// other variables are not.
func TestUnknownEnv(t *testing.T) {
	environ := []string{
		"TWINLOG_BROKER_ID=1", "TWINLOG_BROKERID=1", "TWINLOG_DATA_DIR=/x", "PATH=/bin",
		"TWINLOG_LOG_RETENTION_MS=5", "TWINLOG_LOG_LEVEL=debug", "TWINLOG_BROKERID=2", "twinlog_broker_id=3", "TWINLOG_",
	}
	if diff := cmp.Diff([]string{"TWINLOG_", "TWINLOG_BROKERID", "TWINLOG_DATA_DIR", "TWINLOG_LOG_LEVEL"}, UnknownBrokerEnv(environ)); diff != "" {
		t.Errorf("broker (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"TWINLOG_", "TWINLOG_BROKERID", "TWINLOG_BROKER_ID", "TWINLOG_LOG_LEVEL", "TWINLOG_LOG_RETENTION_MS"}, UnknownControllerEnv(environ)); diff != "" {
		t.Errorf("controller (-want +got):\n%s", diff)
	}
	if got := UnknownBrokerEnv([]string{"TWINLOG_BROKER_ID=1", "HOME=/"}); got != nil {
		t.Errorf("all known: %v, want none", got)
	}
}

// FuzzLoadConfig: random bytes as a config file never panic the loader;
// a file either is refused with an error or loads into a config that, when
// Validate passes, holds the invariants the daemons rely on.
func FuzzLoadConfig(f *testing.F) {
	for _, seed := range []string{
		"broker.id: 1\nlog.dirs: [/a, /b]\nlisteners: [PLAINTEXT://0.0.0.0:9092]\n",
		"cluster.id: a\nbroker.session.timeout.ms: 9000\neligible.leader.replicas.enabled: TRUE\n",
		"broker.id: 010\nlog.retention.ms: 9223372036854775807\n",
		"a: &x [*x]\nlog.dirs: *x\n",
		"log.dirs: &d [a]\nlisteners: *d\n",
		"broker.id: !!binary aGVsbG8=\n",
		"? [a]\n: b\n",
		"%YAML 1.2\n---\nbroker.id: 1\n...\n---\nbroker.id: 2\n",
		"broker.id: 1e400\nlog.roll.ms: -0\n",
	} {
		f.Add([]byte(seed))
	}
	if files, err := os.ReadDir("../../configs/cluster-a"); err == nil {
		for _, e := range files {
			if b, err := os.ReadFile("../../configs/cluster-a/" + e.Name()); err == nil {
				f.Add(b)
			}
		}
	}
	noEnv := func(string) (string, bool) { return "", false }
	f.Fuzz(func(t *testing.T, data []byte) {
		var b BrokerConfig
		if err := loadBytes("fuzz.yaml", data, noEnv, nil, brokerFields(&b)); err == nil {
			b.withDefaults()
			if b.Validate() == nil {
				checkDurations(t, b.Log.RollInterval, b.Log.Retention, b.Log.FlushInterval, b.ReplicaLagTimeMax,
					b.Mirror.PendingTimeout, b.Mirror.FailedRetryInitialBackoff, b.Mirror.FailedRetryMaxBackoff)
				if b.BrokerSessionTimeout <= b.BrokerHeartbeatInterval || b.BrokerHeartbeatInterval < 100*time.Millisecond {
					t.Fatalf("valid broker config with heartbeat %v, session %v", b.BrokerHeartbeatInterval, b.BrokerSessionTimeout)
				}
				for _, l := range b.Listeners {
					if addr, err := listenerAddr(l); err != nil || addr != b.ListenAddress {
						t.Fatalf("valid broker config with listeners %q, listen.address %q", b.Listeners, b.ListenAddress)
					}
				}
			}
		}
		var c ControllerConfig
		if err := loadBytes("fuzz.yaml", data, noEnv, nil, controllerFields(&c)); err == nil && c.Validate() == nil {
			checkDurations(t, c.UncleanRecoveryTimeout, c.BrokerSessionTimeout, c.BrokerHeartbeatInterval)
			if c.BrokerSessionTimeout <= c.BrokerHeartbeatInterval {
				t.Fatalf("valid controller config with heartbeat %v, session %v", c.BrokerHeartbeatInterval, c.BrokerSessionTimeout)
			}
		}
	})
}

// checkDurations: every loaded .ms value is a whole number of milliseconds
// and -1 ms or more (no wrapped multiplication).
func checkDurations(t *testing.T, ds ...time.Duration) {
	t.Helper()
	for i, d := range ds {
		if d%time.Millisecond != 0 || d < -time.Millisecond {
			t.Fatalf("duration %d = %v: not a whole, non-wrapped millisecond count", i, d)
		}
	}
}
