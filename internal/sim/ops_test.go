package sim

import (
	"errors"
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
	cfg := twoClusterRegression(seed)
	if *flagTrace && *flagSeed != 0 {
		cfg.Trace = t.Output()
	}
	rep, err := Run(cfg)
	if err != nil {
		var f *Failure
		if errors.As(err, &f) {
			t.Fatalf("%v\nreport: %v", f, rep)
		}
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Logf("%v", rep)
	}
	return rep
}
