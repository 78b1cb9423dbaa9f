package sim

import (
	"testing"
)

// twoClusterRegression is the two-cluster run of a "two: N" line of
// testdata/regression-seeds.txt: the long fault phase of the known-bug
// replays (twoClusterKnownBug), known bugs counted rather than failed, as
// runSeed does for one cluster.
func twoClusterRegression(seed uint64) Config {
	cfg := twoClusterKnownBug(seed)
	cfg.FailOnKnownBugs = false
	return cfg
}

func runTwoRegression(t *testing.T, seed uint64) *Report {
	t.Helper()
	return runConfig(t, twoClusterRegression(seed))
}
