package metadata

import (
	"slices"
	"testing"
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
