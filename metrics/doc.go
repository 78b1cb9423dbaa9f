// Package metrics implements the Observer interfaces of the core packages
// (controller, broker, mirror) with Prometheus collectors registered on an
// injected *prometheus.Registry (SPEC §7). It is the only package besides cmd/
// that imports Prometheus; cmd/ serves the registry with promhttp.HandlerFor.
//
// Observers are called from the core packages' own goroutines and never
// block: every method only updates collectors.
package metrics
