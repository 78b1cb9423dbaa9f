package configdef

import (
	"math"
	"strings"
	"testing"
)

// TestCheck: the one rule for every reader (table test of the kinds).
func TestCheck(t *testing.T) {
	tests := []struct {
		key, value string
		want       string // "" = accepted
	}{
		{"broker.session.timeout.ms", "1000", ""},
		{"broker.session.timeout.ms", "999", "must be ≥ 1000"},
		{"broker.session.timeout.ms", "+1000", "want a decimal integer"},
		{"broker.session.timeout.ms", "01000", "leading zeros"},
		{"broker.session.timeout.ms", "0o1750", "leading zeros"},
		{"broker.session.timeout.ms", "1000 ", "want a decimal integer"},
		{"broker.session.timeout.ms", "9223372036854", ""},
		{"broker.session.timeout.ms", "9223372036855", "overflows a duration"},
		{"min.insync.replicas", "2147483647", ""},
		{"min.insync.replicas", "2147483648", "must be ≤ 2147483647"},
		{"min.insync.replicas", "-0", "must be ≥ 1"},
		{"min.insync.replicas", "", "empty value"},
		{"mirror.failed.retry.max.attempts", "0", ""},
		{"eligible.leader.replicas.enabled", "TRUE", ""},
		{"eligible.leader.replicas.enabled", "1", "allowed values are true, false"},
		{"unclean.recovery.strategy", "none", ""},
		{"unclean.recovery.strategy", "NONE", "allowed values are none, balanced, aggressive"},
		{"cleanup.policy", "compact", ""},
		{"cleanup.policy", "delete,compact", ""},
		{"cleanup.policy", "compact, delete", "allowed values are"},
		{"min.cleanable.dirty.ratio", "0.5", ""},
		{"min.cleanable.dirty.ratio", "1", ""},
		{"min.cleanable.dirty.ratio", "0", ""},
		{"min.cleanable.dirty.ratio", "1.01", "must be between 0 and 1"},
		{"min.cleanable.dirty.ratio", ".5", "want a decimal number"},
		{"min.cleanable.dirty.ratio", "00.5", "want a decimal number"},
		{"min.cleanable.dirty.ratio", "NaN", "want a decimal number"},
		{"min.cleanable.dirty.ratio", "0x1p-1", "want a decimal number"},
		{"log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", ""},
		{"log.cleaner.io.max.bytes.per.second", "1e6", ""},
		{"log.cleaner.io.max.bytes.per.second", "1e400", "out of range"},
		{"log.cleaner.io.max.bytes.per.second", "0.5", "must be between 1 and"},
		{"max.compaction.lag.ms", "9223372036854775807", ""},
		{"max.compaction.lag.ms", "0", "must be ≥ 1"},
		{"log.cleaner.dedupe.buffer.size", "1048575", "must be ≥ 1048576"},
		{"no.such.key", "1", "unknown config"},
	}
	for _, tt := range tests {
		err := Check(tt.key, tt.value)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Check(%s, %q) = %v, want accepted", tt.key, tt.value, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Check(%s, %q) = %v, want %q", tt.key, tt.value, err, tt.want)
		}
	}
}

func TestOrdersAndCanonical(t *testing.T) {
	if err := CheckOrder(KeyBrokerHeartbeatIntervalMs, 2000, KeyBrokerSessionTimeoutMs, 2000); err == nil {
		t.Error("session = heartbeat accepted")
	}
	if err := CheckOrder(KeyMinCompactionLagMs, 2000, KeyMaxCompactionLagMs, 1000); err == nil {
		t.Error("min.compaction.lag.ms above max.compaction.lag.ms accepted")
	}
	if err := CheckOrder(KeyMirrorFailedRetryInitialBackoffMs, 100, KeyMirrorFailedRetryMaxBackoffMs, 100); err != nil {
		t.Errorf("max backoff = initial refused: %v", err)
	}
	for _, o := range Orders {
		if _, ok := Lookup(o.Lower); !ok {
			t.Errorf("order on %s without a row", o.Lower)
		}
		if _, ok := Lookup(o.Upper); !ok {
			t.Errorf("order on %s without a row", o.Upper)
		}
	}
	if Canonical("unclean.leader.election.enable", " TRUE") != "true" || Canonical("min.insync.replicas", "2") != "2" {
		t.Error("Canonical")
	}
	if MaxMillis != math.MaxInt64/int64(1_000_000) {
		t.Errorf("MaxMillis = %d", MaxMillis)
	}
}
