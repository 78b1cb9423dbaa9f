package metadata

import (
	"slices"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/internal/configdef"
)

// MirroredTopicConfigs is the documented copy list: the topic config that
// protects the pair, the cleanup policy and retention (docs/operations.md
// lists the same).
func TestMirroredTopicConfigs(t *testing.T) {
	if got := MirroredTopicConfigs(); !slices.Equal(got, []string{KeyCleanupPolicy, KeyMirrorSupportUnclean, KeyRetentionBytes, KeyRetentionMs}) {
		t.Fatalf("MirroredTopicConfigs() = %v", got)
	}
	for _, k := range []string{KeyMinInsyncReplicas, KeyUncleanLeaderElection, KeyUncleanRecoveryStrategy} {
		if d, _ := LookupConfig(k); d.Mirrored {
			t.Fatalf("%s is copied to mirror topics; it must stay local", k)
		}
	}
}

// ResolveUncleanStrategy is SPEC §3.5 for ordinary topics, at topic and
// cluster scope; an internal topic (__mirror_state) is never elected
// uncleanly, whatever the configs say (§6.4).
func TestResolveUncleanStrategy(t *testing.T) {
	topic := func(internal bool, cfg map[string]string) *twinlogv1.TopicRecord {
		return &twinlogv1.TopicRecord{Name: "x", Internal: internal, Configs: cfg}
	}
	for _, tc := range []struct {
		name    string
		tr      *twinlogv1.TopicRecord
		cluster map[string]string
		want    string
	}{
		{"default", topic(false, nil), nil, StrategyBalanced},
		{"cluster unclean", topic(false, nil), map[string]string{KeyUncleanLeaderElection: "true"}, StrategyAggressive},
		{"topic unclean over cluster", topic(false, map[string]string{KeyUncleanLeaderElection: "false"}), map[string]string{KeyUncleanLeaderElection: "true"}, StrategyBalanced},
		{"topic strategy", topic(false, map[string]string{KeyUncleanRecoveryStrategy: StrategyNone}), nil, StrategyNone},
		{"internal, cluster unclean", topic(true, map[string]string{KeyUncleanRecoveryStrategy: StrategyNone}), map[string]string{KeyUncleanLeaderElection: "true"}, StrategyNone},
		{"internal, topic unclean", topic(true, map[string]string{KeyUncleanLeaderElection: "true"}), nil, StrategyNone},
		{"internal, cluster aggressive", topic(true, nil), map[string]string{KeyUncleanRecoveryStrategy: StrategyAggressive}, StrategyNone},
	} {
		if got := ResolveUncleanStrategy(tc.tr, tc.cluster); got != tc.want {
			t.Errorf("%s: ResolveUncleanStrategy = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestConfigDefaults: every default passes its key's own rule, and the
// cleanup policies read as Kafka's lists.
func TestConfigDefaults(t *testing.T) {
	for k, d := range configDefs {
		if d.Default == "" {
			continue
		}
		if err := configdef.Check(k, d.Default); err != nil {
			t.Errorf("%s default %q: %v", k, d.Default, err)
		}
	}
	for _, c := range []struct {
		policy          string
		compact, delete bool
	}{{"delete", false, true}, {"compact", true, false}, {"compact,delete", true, true}, {"delete,compact", true, true}} {
		if IsCompacted(c.policy) != c.compact || HasDeletePolicy(c.policy) != c.delete {
			t.Errorf("%q: compact %v delete %v", c.policy, IsCompacted(c.policy), HasDeletePolicy(c.policy))
		}
	}
}
