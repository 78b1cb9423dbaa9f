package daemon

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	t.Cleanup(func() {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(int64(^uint64(0) >> 1))
	})
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	TuneGC(nil, 400, 1<<30)
	if got := debug.SetGCPercent(100); got != 400 {
		t.Fatalf("GC percent %d, want 400", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("memory limit %d, want %d", got, 1<<30)
	}
	// The variables win: the runtime applied them at start-up, TuneGC
	// leaves them.
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	TuneGC(nil, 400, 0)
	if got := debug.SetGCPercent(100); got != 150 {
		t.Fatalf("GC percent %d with GOGC=150 set, want 150", got)
	}
}
