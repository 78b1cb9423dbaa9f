package daemon

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
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
	if log != nil {
		ms := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
		metrics.Read(ms)
		var lim any = ms[1].Value.Uint64()
		if lim == uint64(math.MaxInt64) {
			lim = "none"
		}
		log.Info("go runtime", "gc_percent", ms[0].Value.Uint64(), "gogc_env", gogc,
			"memory_limit_bytes", lim, "gomemlimit_env", gomem)
	}
}
