package config

import (
	"strings"
	"testing"
	"time"
)

// TestBrokerBoundKeys (issue 13): fetch.max.bytes and
// log.message.timestamp.{before,after}.max.ms are brokerd keys with Kafka's
// names and defaults, parsed strictly and validated. Before, none of the
// three existed: a file naming one was refused as an unknown key, and the
// broker always ran with its built-in values.
func TestBrokerBoundKeys(t *testing.T) {
	const base = "broker.id: 1\n"
	tests := []struct {
		name        string
		body        string
		env, envVal string
		want        string // error substring from LoadBroker or Validate; "" = accepted
		check       func(BrokerConfig) bool
	}{
		{name: "defaults", body: base, check: func(c BrokerConfig) bool {
			return c.FetchMaxBytes == 55<<20 && c.LogMessageTimestampBeforeMax == NoTimestampBound &&
				c.LogMessageTimestampAfterMax == time.Hour
		}},
		{name: "fetch.max.bytes", body: base + "fetch.max.bytes: 1048576\n",
			check: func(c BrokerConfig) bool { return c.FetchMaxBytes == 1<<20 }},
		{name: "fetch.max.bytes env", env: "TWINLOG_FETCH_MAX_BYTES", envVal: "2097152", body: base,
			check: func(c BrokerConfig) bool { return c.FetchMaxBytes == 2<<20 }},
		{name: "fetch.max.bytes Kafka minimum", body: base + "fetch.max.bytes: 1024\n",
			check: func(c BrokerConfig) bool { return c.FetchMaxBytes == 1024 }},
		{name: "fetch.max.bytes zero", body: base + "fetch.max.bytes: 0\n", want: "fetch.max.bytes = 0: must be ≥ 1024"},
		{name: "fetch.max.bytes negative", body: base + "fetch.max.bytes: -1\n", want: "fetch.max.bytes = -1: must be ≥ 1024"},
		{name: "fetch.max.bytes octal", body: base + "fetch.max.bytes: 01024\n", want: "fetch.max.bytes = 01024: want a decimal integer without leading zeros"},
		{name: "fetch.max.bytes float", body: base + "fetch.max.bytes: 1e6\n", want: "fetch.max.bytes = 1e6: want a whole decimal integer"},
		{name: "before bounded", body: base + "log.message.timestamp.before.max.ms: 86400000\n",
			check: func(c BrokerConfig) bool { return c.LogMessageTimestampBeforeMax == 24*time.Hour }},
		{name: "after no bound", body: base + "log.message.timestamp.after.max.ms: 9223372036854775807\n",
			check: func(c BrokerConfig) bool { return c.LogMessageTimestampAfterMax == NoTimestampBound }},
		{name: "after env", env: "TWINLOG_LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS", envVal: "60000", body: base,
			check: func(c BrokerConfig) bool { return c.LogMessageTimestampAfterMax == time.Minute }},
		{name: "before zero", body: base + "log.message.timestamp.before.max.ms: 0\n",
			want: "log.message.timestamp.before.max.ms = 0: must be ≥ 1, or 9223372036854775807 for no bound"},
		{name: "after negative", body: base + "log.message.timestamp.after.max.ms: -1\n",
			want: "log.message.timestamp.after.max.ms = -1: must be ≥ 1"},
		{name: "before overflow", body: base + "log.message.timestamp.before.max.ms: 9223372036854775806\n",
			want: "log.message.timestamp.before.max.ms = 9223372036854775806: want an integer number of milliseconds: out of range"},
		{name: "before float", body: base + "log.message.timestamp.before.max.ms: 1.5\n",
			want: "log.message.timestamp.before.max.ms = 1.5: want an integer number of milliseconds"},
		{name: "after null", body: base + "log.message.timestamp.after.max.ms:\n",
			want: "log.message.timestamp.after.max.ms = null: empty value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadBrokerFrom(t, tt.body, tt.env, tt.envVal)
			if err == nil {
				err = c.Validate()
			}
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

// TestKafkaListenerKeys (issue 15): kafka.listen.address defaults to
// Kafka's 127.0.0.1:9092, kafka.advertised.address to it, and a Kafka
// listener on the gRPC listener's port is refused by name instead of
// failing at bind time.
func TestKafkaListenerKeys(t *testing.T) {
	load := func(body string) (BrokerConfig, error) {
		t.Helper()
		c, err := loadBrokerFrom(t, body, "", "")
		if err == nil {
			err = c.Validate()
		}
		return c, err
	}
	c, err := load("broker.id: 1\n")
	if err != nil || c.KafkaListenAddress != "127.0.0.1:9092" || c.KafkaAdvertisedAddress != "127.0.0.1:9092" || c.SocketRequestMaxBytes != 100<<20 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = load("broker.id: 1\nkafka.listen.address: 0.0.0.0:9292\nkafka.advertised.address: k1:9292\n")
	if err != nil || c.KafkaAdvertisedAddress != "k1:9292" {
		t.Fatalf("set: %+v, %v", c, err)
	}
	for _, body := range []string{
		"broker.id: 1\nlisten.address: 0.0.0.0:9092\n",
		"broker.id: 1\nlisten.address: 127.0.0.1:9300\nkafka.listen.address: 127.0.0.1:9300\n",
	} {
		if _, err := load(body); err == nil || !strings.Contains(err.Error(), "kafka.listen.address") || !strings.Contains(err.Error(), "shares its port") {
			t.Errorf("%q: %v, want the port clash named", body, err)
		}
	}
	c, err = load("broker.id: 1\nhealth.listen.address: 0.0.0.0:9490\n")
	if err != nil || c.HealthAddress != "0.0.0.0:9490" {
		t.Fatalf("health.listen.address: %+v, %v", c, err)
	}
	if _, err := load("broker.id: 1\nlisten.address: 127.0.0.1:9091\nhealth.listen.address: 0.0.0.0:9091\n"); err == nil || !strings.Contains(err.Error(), "health.listen.address") || !strings.Contains(err.Error(), "shares its port") {
		t.Errorf("health on the gRPC port: %v, want the clash named", err)
	}
	if _, err := load("broker.id: 1\nkafka.listen.address: \"\"\n"); err != nil {
		t.Errorf("no Kafka listener: %v", err)
	}
	if _, err := load("broker.id: 1\nsocket.request.max.bytes: 10\n"); err == nil || !strings.Contains(err.Error(), "socket.request.max.bytes") {
		t.Errorf("socket.request.max.bytes 10: %v", err)
	}
}
