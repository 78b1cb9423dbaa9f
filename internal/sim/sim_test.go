package sim

import (
	"bufio"
	"errors"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	flagSeed  = flag.Uint64("sim.seed", 0, "replay one seed (0: run -sim.seeds seeds)")
	flagSeeds = flag.Int("sim.seeds", 50, "number of seeds to run")
	flagFirst = flag.Uint64("sim.first", 1, "first seed of the range")
	flagTrace = flag.Bool("sim.trace", false, "print every trace line of a replayed seed")
)

// seeds returns the seeds to run: one with -sim.seed, else a range.
func seeds(t *testing.T) []uint64 { return seedList(*flagSeeds, 10) }

// seedList is -sim.seed alone, else n seeds from -sim.first (at most short
// with -short).
func seedList(n, short int) []uint64 {
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	if testing.Short() {
		n = min(n, short)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = *flagFirst + uint64(i)
	}
	return out
}

func runSeed(t *testing.T, seed uint64) *Report {
	t.Helper()
	return runConfig(t, Config{Seed: seed})
}

// runParallel runs config(seed) for each seed of list in parallel
// subtests "seed/<n>" of t (seeds are independent single-goroutine runs,
// each still deterministic) and returns their reports in list's order;
// the caller sums them unless t failed.
func runParallel(t *testing.T, list []uint64, config func(uint64) Config) []*Report {
	t.Helper()
	reps := make([]*Report, len(list))
	t.Run("seed", func(t *testing.T) {
		for i, seed := range list {
			t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
				t.Parallel()
				reps[i] = runConfig(t, config(seed))
			})
		}
	})
	return reps
}

// runConfig runs one simulation (traced with -sim.trace when replaying one
// seed) and fails the test with the failure and the report.
func runConfig(t *testing.T, cfg Config) *Report {
	t.Helper()
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

// TestSimSeeds runs -sim.seeds seeds (or replays -sim.seed) and asserts
// that together they exercise what the simulator claims.
func TestSimSeeds(t *testing.T) {
	start := time.Now()
	var total Report
	total.Faults, total.Checks = map[string]int{}, map[string]int{}
	list := seeds(t)
	reps := runParallel(t, list, func(seed uint64) Config { return Config{Seed: seed} })
	if t.Failed() {
		return
	}
	for _, rep := range reps {
		add(&total, rep)
	}
	el := time.Since(start)
	t.Logf("%d seeds in %v (%.0f seeds/min, %.0f faults/min): faults %v, elections %d clean %d unclean, fences %d, rounds %d, truncations %d, lossy crashes %d, acked all %d one %d, consumed %d, checks %d",
		len(list), el.Round(time.Millisecond), float64(len(list))/el.Minutes(), float64(total.FaultCount())/el.Minutes(),
		total.Faults, total.Elections, total.UncleanElections, total.Fences, total.RecoveryRounds, total.Truncations, total.LossyCrashes,
		total.AckedAll, total.AckedOne, total.Consumed, total.CheckCount())
	if len(list) < 20 {
		return
	}
	// Coverage: over many seeds the simulator must really do these things.
	want := map[string][2]int{
		"crashes":                 {total.Faults["crash"], len(list)},
		"clean restarts":          {total.Faults["clean-restart"], len(list) / 4},
		"link cuts":               {total.Faults["link-cut"], len(list)},
		"config flips":            {total.Faults["config-flip"], len(list) / 4},
		"clean elections":         {total.Elections, 2 * len(list)},
		"unclean elections":       {total.UncleanElections, 1},
		"truncations":             {total.Truncations, len(list) / 2},
		"lossy crashes":           {total.LossyCrashes, len(list) / 4},
		"acks=all records":        {total.AckedAll, 100 * len(list)},
		"consumed records":        {total.Consumed, 100 * len(list)},
		"controller compactions":  {total.Faults["controller-compact"], len(list) / 4},
		"snapshot pages gathered": {total.Checks["metadata snapshot page gathered"], len(list) / 4},
	}
	checkExercised(t, len(list), want)
}

func add(total, r *Report) {
	for k, v := range r.Faults {
		total.Faults[k] += v
	}
	for k, v := range r.Checks {
		total.Checks[k] += v
	}
	total.Elections += r.Elections
	total.UncleanElections += r.UncleanElections
	total.Fences += r.Fences
	total.RecoveryRounds += r.RecoveryRounds
	total.Truncations += r.Truncations
	total.LossyCrashes += r.LossyCrashes
	total.AckedAll += r.AckedAll
	total.AckedOne += r.AckedOne
	total.Consumed += r.Consumed
}

// TestDeterminism: the same seed gives the same trace.
func TestDeterminism(t *testing.T) {
	for _, seed := range []uint64{7, 12345} {
		a, errA := Run(Config{Seed: seed, FaultMs: 8000, HealMs: 8000})
		b, errB := Run(Config{Seed: seed, FaultMs: 8000, HealMs: 8000})
		if (errA == nil) != (errB == nil) {
			t.Fatalf("seed %d: errors differ: %v / %v", seed, errA, errB)
		}
		if a.TraceHash != b.TraceHash || a.Steps != b.Steps || a.Messages != b.Messages {
			t.Fatalf("seed %d: trace hash %x vs %x, steps %d vs %d, messages %d vs %d", seed, a.TraceHash, b.TraceHash, a.Steps, b.Steps, a.Messages, b.Messages)
		}
	}
}

// TestRegressionSeeds replays every seed that once failed: a line "N"
// as a single-cluster run (runSeed), a line "two: N" as a two-cluster run
// with the long fault phase of the known-bug replays (twoClusterRegression),
// a line "groups: N" as a run with consumer groups (groupConfig).
func TestRegressionSeeds(t *testing.T) {
	f, err := os.Open("testdata/regression-seeds.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		two, groups := fields[0] == "two:", fields[0] == "groups:"
		if (two || groups) && len(fields) > 1 {
			fields = fields[1:]
		}
		field := fields[0]
		seed, err := strconv.ParseUint(field, 10, 64)
		if err != nil {
			t.Fatalf("regression-seeds.txt: %q: %v", line, err)
		}
		if two {
			t.Run("two-"+field, func(t *testing.T) { runTwoRegression(t, seed) })
			continue
		}
		if groups {
			t.Run("groups-"+field, func(t *testing.T) { runConfig(t, groupConfig(seed)) })
			continue
		}
		t.Run(field, func(t *testing.T) { runSeed(t, seed) })
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestChecksBite breaks the shell on purpose and expects the checks to
// notice within a few seeds: a simulator whose checks never fail proves
// nothing.
func TestChecksBite(t *testing.T) {
	for _, m := range []string{"acks1-as-all", "ignore-divergence"} {
		t.Run(m, func(t *testing.T) {
			for seed := uint64(1); seed <= 30; seed++ {
				_, err := Run(Config{Seed: seed, FaultMs: 10_000, HealMs: 10_000, mutation: m})
				if err != nil {
					t.Logf("seed %d caught it: %s", seed, firstLine(err.Error()))
					return
				}
			}
			t.Fatalf("mutation %s went unnoticed over 30 seeds", m)
		})
	}
}

// checkExercised fails t for each of want's counts (got, least) over
// seeds seeds below its least: a sweep that did not reach what it checks.
func checkExercised(t *testing.T, seeds int, want map[string][2]int) {
	t.Helper()
	for what, v := range want {
		if v[0] < v[1] {
			t.Errorf("%d seeds exercised only %d %s, want ≥ %d", seeds, v[0], what, v[1])
		}
	}
}
