package config

import (
	"fmt"
	"strings"
	"time"
)

// floor is the smallest value a duration key accepts, and why.
type floor struct {
	ms  int64
	why string
}

// floors are the minimums of the duration keys (doc.go has the table).
// Each lies far below any sane setting and above the values that make a
// daemon spin, flood its peers or flap: a session of 1 ms fences every
// broker at once, a lag limit under the 500 ms follower long-poll shrinks
// every ISR between two fetches.
var floors = map[string]floor{
	"broker.heartbeat.interval.ms":           {100, "a broker heartbeats at most 10 times a second"},
	"broker.session.timeout.ms":              {1000, "shorter sessions fence brokers on a scheduling hiccup"},
	"replica.lag.time.max.ms":                {1000, "followers long-poll for up to 500 ms; a shorter limit shrinks the ISR between fetches"},
	"log.roll.ms":                            {1000, "rolling more often makes a segment file per batch"},
	"mirror.pending.timeout.ms":              {1000, "a mirror partition needs round trips to both clusters before it leaves PENDING"},
	"mirror.failed.retry.initial.backoff.ms": {10, "shorter backoffs retry a failed mirror in a busy loop"},
	"unclean.recovery.timeout.ms":            {1000, "a balanced recovery round waits for replicas to answer"},
}

func checkFloor(errs *[]error, key string, d time.Duration) {
	f, ok := floors[key]
	if !ok {
		panic("config: no floor for " + key) // a programming error: add the row
	}
	if d < time.Duration(f.ms)*time.Millisecond {
		*errs = append(*errs, fmt.Errorf("config: %s = %d: must be ≥ %d (%s)", key, d.Milliseconds(), f.ms, f.why))
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
