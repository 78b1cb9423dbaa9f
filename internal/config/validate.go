package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/twinlog/twinlog/internal/configdef"
)

// checkFloor checks a duration key against its floor and ceiling in
// internal/configdef's table (doc.go lists the floors), the table
// AlterConfigs applies at run time too. A key without a row there is a
// programming error: add the row.
func checkFloor(errs *[]error, key string, d time.Duration) {
	if err := configdef.MustLookup(key).CheckRange(d.Milliseconds()); err != nil {
		*errs = append(*errs, fmt.Errorf("config: %s = %d: %w", key, d.Milliseconds(), err))
	}
}

// checkRange checks an integer key against its bounds in configdef's
// table.
func checkRange(errs *[]error, key string, n int64) {
	if err := configdef.MustLookup(key).CheckRange(n); err != nil {
		*errs = append(*errs, fmt.Errorf("config: %s = %d: %w", key, n, err))
	}
}

// checkOrder checks configdef's rule between two keys (Orders), reported
// on the upper key.
func checkOrder(errs *[]error, lowerKey string, lower int64, upperKey string, upper int64) {
	if err := configdef.CheckOrder(lowerKey, lower, upperKey, upper); err != nil {
		*errs = append(*errs, fmt.Errorf("config: %s = %d: %w", upperKey, upper, err))
	}
}

// checkTimestampBound checks a log.message.timestamp.*.max.ms key: ≥ 1 ms
// or NoTimestampBound. Kafka allows 0, but the broker reads a zero bound
// as its default, and 0 would refuse a record stamped a millisecond off
// the broker's clock anyway.
func checkTimestampBound(errs *[]error, key string, d time.Duration) {
	if d < time.Millisecond {
		*errs = append(*errs, fmt.Errorf("config: %s = %d: must be ≥ 1, or %s for no bound", key, d.Milliseconds(), kafkaLongMax))
	}
}

// retentionRule explains the retention keys' rule: storage reads 0 as "no
// limit", where Kafka reads it as "delete at once", so 0 is refused rather
// than meaning the opposite of what a Kafka operator expects.
const retentionRule = "must be -1 (unlimited) or ≥ 1 (0 is refused: Kafka deletes at once, this broker would keep everything)"

// listenerAddr returns the host:port of a listeners entry. Only plain
// host:port and PLAINTEXT://host:port are implemented; any other scheme
// (SSL, SASL_PLAINTEXT, SASL_SSL, a named listener such as INTERNAL) is an
// error, never a plaintext listener the operator did not ask for.
func listenerAddr(l string) (string, error) {
	scheme, addr, ok := strings.Cut(l, "://")
	if !ok {
		return l, nil
	}
	if !strings.EqualFold(scheme, "PLAINTEXT") {
		return "", fmt.Errorf("scheme %s is not implemented: use PLAINTEXT://host:port or host:port (TLS and SASL are not supported yet)", scheme)
	}
	return addr, nil
}

// checkListeners checks listeners: at most one (the broker serves one
// address), a scheme that is implemented, host:port, and no disagreement
// with listen.address (which would win silently).
func checkListeners(errs *[]error, listeners []string, listenAddress string) {
	if len(listeners) > 1 {
		*errs = append(*errs, fmt.Errorf("config: listeners = [%s]: only one listener is implemented", strings.Join(listeners, ", ")))
	}
	for _, l := range listeners {
		addr, err := listenerAddr(l)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("config: listeners = %s: %w", l, err))
			continue
		}
		var sub []error
		checkAddr(&sub, "listeners", addr, false)
		if len(sub) > 0 {
			*errs = append(*errs, fmt.Errorf("config: listeners = %s: want [PLAINTEXT://]host:port", l))
			continue
		}
		if len(listeners) == 1 && addr != listenAddress {
			*errs = append(*errs, fmt.Errorf("config: listeners = %s: disagrees with listen.address = %s; set one of them", l, listenAddress))
		}
	}
}
