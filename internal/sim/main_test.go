package sim

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain raises the GC target unless GOGC is set: a seed allocates
// ~15 MB and keeps only a few MB live, so the default GOGC=100 collects
// every few MB and GC takes about a quarter of the CPU. 400 costs only a
// few tens of MB more (the reports keep no Sim alive; see Run).
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}
