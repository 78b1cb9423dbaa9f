// Package config loads the daemons' configuration (brokerd, controllerd) with
// Kafka-named keys (SPEC §1.3) from, in increasing precedence:
//
//	defaults (SPEC §1.3)  <  YAML file  <  env TWINLOG_<KEY>  <  command-line flags
//
// Env names upper-case the key and replace '.' with '_':
// log.retention.ms → TWINLOG_LOG_RETENTION_MS. Flags carry the key's name:
// --log.retention.ms. Lists (log.dirs, listeners) are YAML sequences or
// comma-separated strings. Keys ending in .ms are milliseconds on the wire
// and time.Duration in the structs; -1 keeps Kafka's "unlimited" meaning
// where the key allows it.
//
// This is the one package outside cmd/ that imports viper (the lead's choice
// for STYLE's "viper only in cmd/": the daemons' main.go call LoadBroker /
// LoadController and pass plain structs on). It keys viper with "::" as the
// path delimiter so dotted Kafka keys stay flat in YAML.
//
// Validate reports every bad key at once, each error naming the key, the
// value and the allowed values. Nothing here is safe for concurrent use.
package config
