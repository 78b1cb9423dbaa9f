// Package metadata is the metadata image of one cluster: the persisted
// records (brokers, topics with configs, partitions, mirrors, cluster
// configs, the producer id allocation) at one metadata offset, as the controller writes them and as
// every broker rebuilds them from FetchMetadata. It is the one package the
// controller (controller/metastate) and the brokers share besides the API:
// the controller's decisions build on an Image, a broker reads one.
//
// # Shape
//
// An Image changes only through Apply (one MetadataDelta, offset+1) and
// Restore (a whole MetadataSnapshot); Snapshot returns it. Apply takes
// ownership of the delta: its records become the image without a copy, so a
// delta must not be modified once applied (it may still be read, marshalled,
// or applied to another Image), and the image never modifies a record in
// place. Readers return records that must not be modified.
//
// The image keeps two indexes, partitions by replica broker and leaderless
// partitions (BrokerPartitions, LeaderlessPartitions), so that the
// controller's fencing of a broker and re-running of elections touch only
// the partitions concerned; CheckConsistency verifies them.
//
// # Configs
//
// The table of known config keys (SPEC §1.3: scope, default, static,
// mirrored) lives here, with the values' syntax and bounds in
// internal/configdef. Effective values are resolved by the Resolve*
// functions over records and the cluster configs (topic value, then
// cluster, then default; m = min(min.insync.replicas, |R|); the unclean
// strategy; broker acceptability): the image's readers call them with its
// records, the controller with the records of a change it is computing, so
// the rule exists once.
//
// # Producer ids
//
// Idempotent producer ids are space<<48 | counter (producerids.go): the
// space is the cluster's (producer.id.space, else derived from the cluster
// id; ProducerIDSpace is the one rule, used by the controller that
// allocates and by the brokers that report it), the counter is allocated
// in blocks by the controller and recorded in the ProducerIdsRecord.
//
// # Concurrency
//
// An Image is not safe for concurrent use: its owner (the controller's
// state machine, a broker's metadata loop under its lock) serialises calls.
// There are no goroutines, clocks or logging.
package metadata
