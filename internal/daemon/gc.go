package daemon

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
)

// TuneGC applies a daemon's configured GC target and soft memory limit
// unless the operator set GOGC or GOMEMLIMIT, which the Go runtime has
// already applied and which win. limit 0 leaves the limit alone. It logs
// what is in force.
func TuneGC(log *slog.Logger, percent int, limit int64) {
	gogc, gomem := os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT")
	if gogc == "" {
		debug.SetGCPercent(percent)
	}
	if gomem == "" && limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	// SetGCPercent returns the old value: read both back without a change.
	cur := debug.SetGCPercent(-1)
	debug.SetGCPercent(cur)
	if log != nil {
		var lim any = debug.SetMemoryLimit(-1)
		if lim == int64(math.MaxInt64) {
			lim = "none"
		}
		log.Info("go runtime", "gc_percent", cur, "gogc_env", gogc,
			"memory_limit_bytes", lim, "gomemlimit_env", gomem)
	}
}
