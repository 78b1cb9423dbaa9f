// Package chartcheck validates the twinlog Helm chart (deploy/helm/twinlog)
// without a Kubernetes cluster: it lints and renders the chart with Helm's
// own SDK (as `helm lint --strict` and `helm template` do), decodes every
// rendered object strictly into its k8s.io/api type, and checks what the
// API server would not: that probes reach the health listener the daemon's
// config opens, that Services and the PodDisruptionBudget select the pods,
// that every rendered daemon config loads through twinlog's own config
// loader, and that TLS files named in the config are mounted from Secrets.
//
// It is a module of its own so that the main module's go.mod stays free of
// Kubernetes and Helm; `make helm-check` runs it (deploy/deploy.mk).
//
// Concurrency: Check and Effective set TWINLOG_* variables of the process
// while they load a config (internal/config reads the environment), so
// they must not run in parallel with each other or with anything that
// reads those variables; the tests do not use t.Parallel.
//
// cmd/chartcerts writes test certificates with the names the chart gives
// the pods (WriteCerts), so that TLS can be tried without cert-manager.
package chartcheck
