// Package config loads the daemons' configuration (brokerd, controllerd) with
// Kafka-named keys (SPEC §1.3) from, in increasing precedence:
//
//	defaults (SPEC §1.3)  <  YAML file  <  env TWINLOG_<KEY>  <  command-line flags
//
// Env names upper-case the key and replace '.' with '_':
// log.retention.ms → TWINLOG_LOG_RETENTION_MS (an empty variable counts as
// unset). Flags carry the key's name: --log.retention.ms. Lists (log.dirs,
// listeners) are YAML sequences or comma-separated strings. Keys ending in
// .ms are milliseconds on the wire and time.Duration in the structs; -1
// keeps Kafka's "unlimited" meaning where the key allows it.
//
// The file is one flat YAML mapping (dotted keys stay flat). It is read as
// yaml.Node, so each scalar keeps the text the operator wrote, and one
// strict rule parses file, env and flag values alike (fields.go):
//
//   - integers and .ms keys: decimal digits with an optional leading '-', no
//     leading zeros, no 0x/0o/0b prefix, no '+', no '_', no fraction or
//     exponent, no boolean; in the type's range; a .ms value must fit a
//     time.Duration (at most 9223372036854 ms). `010` is refused, not 8.
//   - booleans: true or false, in any case; not 1, t, yes or on.
//   - an empty or null value is refused for integers and booleans.
//
// Unknown keys in the file are errors; unknown TWINLOG_* variables are
// warned about at start (UnknownBrokerEnv, UnknownControllerEnv).
//
// Validate reports every bad key at once, each error naming the key, the
// value and the rule. The parse rule, the floors and ceilings and the rules
// between keys live in one table, internal/configdef, which AlterConfigs
// applies at run time too (`twinctl configs set` cannot set what a daemon
// would refuse at start). The floors of the duration keys are:
//
//	broker.heartbeat.interval.ms             ≥ 100
//	broker.session.timeout.ms                ≥ 1000 and > broker.heartbeat.interval.ms
//	replica.lag.time.max.ms                  ≥ 1000 (followers long-poll up to 500 ms)
//	log.roll.ms                              ≥ 1000
//	mirror.pending.timeout.ms                ≥ 1000
//	mirror.failed.retry.initial.backoff.ms   ≥ 10 (and max.backoff ≥ initial)
//	unclean.recovery.timeout.ms              ≥ 1000
//
// and of the controller's limits:
//
//	create.topics.max.partitions.per.request 1 to 1000000 (default 10000), ≤ cluster.max.partitions
//	cluster.max.partitions                   1 to 10000000 (default 100000)
//	metadata.fetch.max.bytes                 65536 to 33554432 (default 16777216)
//	mirror.state.topic.num.partitions        1 to 1000
//	producer.id.space                        1 to 32767, or 0 (unset: derived from cluster.id)
//	log.retention.ms, log.retention.bytes    -1 (unlimited) or ≥ 1; 0 is refused
//	                                         (Kafka deletes at once, storage would keep all)
//	log.message.timestamp.{before,after}.max.ms
//	                                         ≥ 1, or 9223372036854775807 (Kafka's Long.MAX_VALUE)
//	                                         for no bound; 0 is refused
//	fetch.max.bytes                          ≥ 1024; brokerd checks the upper bound
//	                                         (broker.Config.Validate: under the message limit)
//
// listeners takes one entry, host:port or PLAINTEXT://host:port; any other
// scheme (SSL, SASL_*, named listeners) is not implemented and refused, as
// is a listener that disagrees with listen.address. The other address keys
// take host:port without a scheme.
//
// The package does not use viper (STYLE keeps viper in cmd/): precedence
// is four lookups per key (resolve). Nothing here is safe for concurrent
// use.
package config
