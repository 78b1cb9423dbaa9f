// Package history is twinlog's Jepsen-style history checker: it records what
// clients saw of one cluster's partitions (acknowledged writes, consumed
// records, recorded truncations, lossy unclean shutdowns, consumer
// repositionings) and checks it against SPEC §8 invariants 12 (no acks=all
// write lost without a recorded truncation or m lossy shutdowns) and 13 (no
// offset with two values, no value at two offsets, monotonic reads).
//
// It knows nothing of how the history was produced, so three drivers feed
// the same checker: the deterministic simulator (internal/sim, after every
// step), the in-process soak (broker/brokertest) and the docker chaos run
// (cmd/twinchaos, one History per cluster).
//
// A History is not safe for concurrent use: drivers that record from
// several goroutines serialise their calls.
package history
