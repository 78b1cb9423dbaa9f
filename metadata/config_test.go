package metadata

import (
	"slices"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// MirroredTopicConfigs is the documented copy list: the one topic config
// that protects the pair (docs/operations.md lists the same).
func TestMirroredTopicConfigs(t *testing.T) {
	if got := MirroredTopicConfigs(); !slices.Equal(got, []string{KeyMirrorSupportUnclean}) {
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
