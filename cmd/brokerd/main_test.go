package main

import (
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/internal/config"
)

// TestBrokerBoundKeysReachTheBroker (issue 13): fetch.max.bytes and
// log.message.timestamp.{before,after}.max.ms reach broker.Config, with
// the defaults the broker has on its own, and Kafka's "no bound" mapped to
// the broker's.
func TestBrokerBoundKeysReachTheBroker(t *testing.T) {
	cfg := config.DefaultBroker()
	cfg.BrokerID = 1
	bc := brokerConfig(cfg)
	if bc.FetchMaxBytes != broker.DefaultFetchMaxBytes || bc.LogMessageTimestampBeforeMax != 0 || bc.LogMessageTimestampAfterMax != time.Hour {
		t.Fatalf("defaults: fetch.max.bytes %d, before %v, after %v; want %d, 0 (no bound), 1h",
			bc.FetchMaxBytes, bc.LogMessageTimestampBeforeMax, bc.LogMessageTimestampAfterMax, broker.DefaultFetchMaxBytes)
	}
	if err := bc.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.FetchMaxBytes = 1 << 20
	cfg.LogMessageTimestampBeforeMax = time.Minute
	cfg.LogMessageTimestampAfterMax = config.NoTimestampBound
	bc = brokerConfig(cfg)
	if bc.FetchMaxBytes != 1<<20 || bc.LogMessageTimestampBeforeMax != time.Minute || bc.LogMessageTimestampAfterMax != config.NoTimestampBound {
		t.Fatalf("set: fetch.max.bytes %d, before %v, after %v", bc.FetchMaxBytes, bc.LogMessageTimestampBeforeMax, bc.LogMessageTimestampAfterMax)
	}
}

// A fetch.max.bytes the transport cannot carry stops brokerd before it
// starts, naming the key (the rule is broker.Config.Validate's).
func TestFetchMaxBytesAboveTransportLimitRefused(t *testing.T) {
	cmd := newRootCmd()
	cmd.SetArgs([]string{"--broker.id=1", "--log.dirs=" + t.TempDir(), "--log.format=text", "--fetch.max.bytes=67108864"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "fetch.max.bytes 67108864") {
		t.Fatalf("brokerd with fetch.max.bytes 64 MiB: %v, want a refusal naming the key", err)
	}
}

// TestMirrorKeysReachTheBroker: brokerd's mirror.pending.timeout.ms and
// mirror.failed.retry.* reach broker.Config (they were parsed, validated
// and then dropped); a value set cluster-wide still overrides them
// (broker.TestMirrorConfigPrecedence).
func TestMirrorKeysReachTheBroker(t *testing.T) {
	cfg := config.DefaultBroker()
	cfg.BrokerID = 1
	cfg.Mirror.PendingTimeout = 42 * time.Second
	cfg.Mirror.FailedRetryInitialBackoff = 250 * time.Millisecond
	cfg.Mirror.FailedRetryMaxBackoff = 9 * time.Second
	cfg.Mirror.FailedRetryMaxAttempts = 3
	bc := brokerConfig(cfg)
	if bc.MirrorPendingTimeout != 42*time.Second || bc.MirrorRetryInitialBackoff != 250*time.Millisecond ||
		bc.MirrorRetryMaxBackoff != 9*time.Second || bc.MirrorRetryMaxAttempts != 3 {
		t.Fatalf("mirror settings %v %v %v %d, want 42s 250ms 9s 3", bc.MirrorPendingTimeout, bc.MirrorRetryInitialBackoff,
			bc.MirrorRetryMaxBackoff, bc.MirrorRetryMaxAttempts)
	}
}
