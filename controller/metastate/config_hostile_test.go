package metastate

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

const invalidConfig = twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG

// alter sends one AlterConfigs resource and returns its delta and result.
func (h *harness) alter(typ twinlogv1.ConfigResourceType, name string, set map[string]string, del ...string) (*twinlogv1.MetadataDelta, *twinlogv1.AlterConfigsResult) {
	h.t.Helper()
	d, resp := h.s.AlterConfigs(&twinlogv1.AlterConfigsRequest{Resources: []*twinlogv1.AlterConfigsResource{{
		Resource: &twinlogv1.ConfigResource{Type: typ, Name: name}, Set: set, Delete: del}}})
	if len(resp.GetResults()) != 1 {
		h.t.Fatalf("AlterConfigs: %d results, want 1", len(resp.GetResults()))
	}
	return d, resp.GetResults()[0]
}

// TestAlterConfigsRefusesWhatStartUpRefuses: AlterConfigs (twinctl configs
// set) applies the table the daemons apply at start (internal/configdef):
// strict decimals, the floors, the ceilings, and session > heartbeat on the
// resulting config. Before, it checked ParseInt ≥ 1 (or ≥ 0), so
// `configs set --cluster broker.session.timeout.ms=1` fenced every broker,
// "+5000" and "010000" were taken as numbers, and a timeout of MaxInt64
// wrapped recovery deadlines.
func TestAlterConfigsRefusesWhatStartUpRefuses(t *testing.T) {
	bad := []struct {
		typ        twinlogv1.ConfigResourceType
		key, value string
		want       string
	}{
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "1", "must be ≥ 1000"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "999", "must be ≥ 1000"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "+12000", "want a decimal integer"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "012000", "leading zeros"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "0x2ee0", "leading zeros or a 0x"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, " 12000", "want a decimal integer"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "1.2e4", "not a fraction or exponent"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "1_2000", "want a decimal integer"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "9223372036854775807", "overflows a duration"},
		{clusterRes, metadata.KeyBrokerSessionTimeoutMs, "9223372036854775808", "out of range"},
		{clusterRes, metadata.KeyBrokerHeartbeatIntervalMs, "1", "must be ≥ 100"},
		{clusterRes, metadata.KeyBrokerHeartbeatIntervalMs, "9000", "must be > broker.heartbeat.interval.ms (9000)"}, // = default session
		{clusterRes, metadata.KeyUncleanRecoveryTimeoutMs, "1", "must be ≥ 1000"},
		{clusterRes, metadata.KeyUncleanRecoveryTimeoutMs, "9223372036854775807", "overflows a duration"},
		{clusterRes, metadata.KeyUncleanRecoveryTimeoutMs, "-1", "must be ≥ 1000"},
		{clusterRes, metadata.KeyMinInsyncReplicas, "0", "must be ≥ 1"},
		{clusterRes, metadata.KeyMinInsyncReplicas, "+2", "want a decimal integer"},
		{clusterRes, metadata.KeyMinInsyncReplicas, "02", "leading zeros"},
		{clusterRes, metadata.KeyMinInsyncReplicas, "2147483648", "must be ≤ 2147483647"},
		{clusterRes, metadata.KeyMinInsyncReplicas, "true", "not a boolean"},
		{clusterRes, metadata.KeyEligibleLeaderReplicas, "1", "allowed values are true, false"},
		{clusterRes, metadata.KeyUncleanRecoveryStrategy, "Balanced", "allowed values are none, balanced, aggressive"},
		{brokerRes, metadata.KeyReplicaLagTimeMaxMs, "400", "must be ≥ 1000"},
		{brokerRes, metadata.KeyMirrorPendingTimeoutMs, "5", "must be ≥ 1000"},
		{brokerRes, metadata.KeyMirrorRetryInitialBackoff, "1", "must be ≥ 10"},
		{brokerRes, metadata.KeyMirrorRetryInitialBackoff, "400000", "must be ≥ mirror.failed.retry.initial.backoff.ms (400000)"}, // > default max
		{brokerRes, metadata.KeyMirrorRetryMaxBackoff, "50", "must be ≥ mirror.failed.retry.initial.backoff.ms (100)"},
		{brokerRes, metadata.KeyMirrorRetryMaxAttempts, "-1", "must be ≥ 0"},
		{brokerRes, metadata.KeyMirrorRetryMaxAttempts, "2147483648", "must be ≤ 2147483647"},
		{brokerRes, metadata.KeyMaxRequestPartitionLimit, "0", "must be ≥ 1"},
		{topicRes, metadata.KeyMinInsyncReplicas, "010", "leading zeros"},
		{topicRes, metadata.KeyUncleanLeaderElection, "yes", "allowed values are true, false"},
		{topicRes, metadata.KeyMirrorSupportUnclean, "1", "allowed values are true, false"},
	}
	for _, tt := range bad {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
			before := h.s.Snapshot()
			name := ""
			if tt.typ == topicRes {
				name = "t"
			}
			d, res := h.alter(tt.typ, name, map[string]string{tt.key: tt.value})
			refused(t, "AlterConfigs", d, res.GetError(), invalidConfig, res.GetErrorMessage())
			if !strings.Contains(res.GetErrorMessage(), tt.want) || !strings.Contains(res.GetErrorMessage(), tt.key) {
				t.Errorf("message %q: want the key and %q", res.GetErrorMessage(), tt.want)
			}
			if !proto.Equal(h.s.Snapshot(), before) {
				t.Errorf("image changed by a refused request")
			}
			// validate_only answers the same.
			_, resp := h.s.AlterConfigs(&twinlogv1.AlterConfigsRequest{ValidateOnly: true, Resources: []*twinlogv1.AlterConfigsResource{{
				Resource: &twinlogv1.ConfigResource{Type: tt.typ, Name: name}, Set: map[string]string{tt.key: tt.value}}}})
			if got := resp.GetResults()[0].GetError(); got != invalidConfig {
				t.Errorf("validate_only: %v, want INVALID_CONFIG", got)
			}
		})
	}
}

// TestAlterConfigsSessionAboveHeartbeat: the rule between the two keys is
// checked on the config a request leaves, including deletions back to the
// defaults, and both keys may move past each other in one request.
func TestAlterConfigsSessionAboveHeartbeat(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	ok := func(set map[string]string, del ...string) {
		t.Helper()
		d, res := h.alter(clusterRes, "", set, del...)
		if res.GetError() != ecNone {
			t.Fatalf("AlterConfigs %v -%v: %v %s", set, del, res.GetError(), res.GetErrorMessage())
		}
		h.apply(d, false)
	}
	no := func(set map[string]string, del ...string) {
		t.Helper()
		d, res := h.alter(clusterRes, "", set, del...)
		refused(t, "AlterConfigs", d, res.GetError(), invalidConfig, res.GetErrorMessage())
	}
	// The floors themselves, together (a session of 1000 over the default
	// heartbeat of 2000 alone would be refused).
	no(map[string]string{metadata.KeyBrokerSessionTimeoutMs: "1000"})
	ok(map[string]string{metadata.KeyBrokerSessionTimeoutMs: "1000", metadata.KeyBrokerHeartbeatIntervalMs: "100"})
	no(map[string]string{metadata.KeyBrokerHeartbeatIntervalMs: "1000"})
	// Moving both past each other in one request.
	ok(map[string]string{metadata.KeyBrokerSessionTimeoutMs: "30000", metadata.KeyBrokerHeartbeatIntervalMs: "10000"})
	// Deleting the session returns it to 9000, under the heartbeat.
	no(nil, metadata.KeyBrokerSessionTimeoutMs)
	ok(nil, metadata.KeyBrokerSessionTimeoutMs, metadata.KeyBrokerHeartbeatIntervalMs)
	if got := h.s.ClusterConfigs(); len(got) != 0 {
		t.Fatalf("cluster configs %v, want the defaults", got)
	}
	// Booleans are stored in canonical form: a reader comparing with
	// "true" must not take "TRUE" for false.
	ok(map[string]string{metadata.KeyUncleanLeaderElection: "TRUE"})
	if got := h.s.ClusterConfig(metadata.KeyUncleanLeaderElection); got != "true" {
		t.Errorf("stored %q, want true", got)
	}
}

// TestAlterConfigsLegacyPairDoesNotBlock: an image written before the rule
// may hold a session under the heartbeat; changes of other keys still go
// through, and a change of either key must repair the pair.
func TestAlterConfigsLegacyPairDoesNotBlock(t *testing.T) {
	h := seededCluster(t, ids(1, 2, 3), nil, map[string]string{metadata.KeyBrokerSessionTimeoutMs: "1", metadata.KeyBrokerHeartbeatIntervalMs: "2000"}, nil,
		part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	if d, res := h.alter(clusterRes, "", map[string]string{metadata.KeyMinInsyncReplicas: "2"}); res.GetError() != ecNone {
		t.Fatalf("unrelated key refused: %s", res.GetErrorMessage())
	} else {
		h.apply(d, false)
	}
	d, res := h.alter(clusterRes, "", map[string]string{metadata.KeyBrokerHeartbeatIntervalMs: "1500"})
	refused(t, "heartbeat over a 1 ms session", d, res.GetError(), invalidConfig, res.GetErrorMessage())
	if _, res := h.alter(clusterRes, "", nil, metadata.KeyBrokerSessionTimeoutMs); res.GetError() != ecNone {
		t.Fatalf("repair by deleting the session refused: %s", res.GetErrorMessage())
	}
}

// TestInitialClusterConfigsFloors: the first-start configs (controllerd's
// keys) are held to the same table and rule.
func TestInitialClusterConfigsFloors(t *testing.T) {
	for _, cfg := range []map[string]string{
		{metadata.KeyBrokerSessionTimeoutMs: "1"},
		{metadata.KeyBrokerSessionTimeoutMs: "2000", metadata.KeyBrokerHeartbeatIntervalMs: "2000"},
		{metadata.KeyUncleanRecoveryTimeoutMs: "010000"},
		{metadata.KeyMirrorStateNumPartitions: "1000001"},
	} {
		if _, err := New(Config{ClusterID: "a"}).InitialClusterConfigs(cfg); err == nil {
			t.Errorf("InitialClusterConfigs(%v) accepted", cfg)
		}
	}
	d, err := New(Config{ClusterID: "a"}).InitialClusterConfigs(map[string]string{metadata.KeyEligibleLeaderReplicas: "FALSE", metadata.KeyBrokerSessionTimeoutMs: "1000", metadata.KeyBrokerHeartbeatIntervalMs: "100"})
	if err != nil || d.GetClusterConfig().GetConfigs()[metadata.KeyEligibleLeaderReplicas] != "false" {
		t.Fatalf("InitialClusterConfigs = %v, %v; want the floors accepted and false stored", d, err)
	}
}

// TestRecoveryDeadlineSaturates: an image written before the ceiling may
// hold unclean.recovery.timeout.ms near MaxInt64; nowMs + timeout wrapped
// to a deadline in the past and the round ended at its first Tick.
func TestRecoveryDeadlineSaturates(t *testing.T) {
	for _, timeout := range []string{"9223372036854775807", strconv.FormatInt(math.MaxInt64-500, 10)} {
		h := seededCluster(t, ids(1, 2, 3), nil, map[string]string{metadata.KeyUncleanRecoveryTimeoutMs: timeout}, nil,
			part(ids(1, 2, 3), -1, nil, nil, nil, -1, 4, 4))
		const now = 1_700_000_000_000
		d, res := h.s.ElectLeaders(&twinlogv1.ElectLeadersRequest{Type: twinlogv1.ElectionType_ELECTION_TYPE_UNCLEAN}, now)
		h.apply(d, false)
		if len(res.StartRounds) != 1 {
			t.Fatalf("timeout %s: %d rounds started (%v), want 1", timeout, len(res.StartRounds), res.Response)
		}
		if got := res.StartRounds[0].DeadlineMs; got != math.MaxInt64 {
			t.Errorf("timeout %s: deadline %d, want MaxInt64 (saturated)", timeout, got)
		}
		if _, tick := h.s.Tick(now + 1); len(tick.EndedRounds) != 0 {
			t.Errorf("timeout %s: round ended at the next tick: %v", timeout, tick.EndedRounds)
		}
	}
	if addSat(math.MinInt64+5, -10) != math.MinInt64 || addSat(1, 2) != 3 || addSat(-3, 1) != -2 {
		t.Error("addSat")
	}
}
