package metadata

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twinlog/twinlog/internal/configdef"
)

// Config keys of SPEC §1.3.
const (
	KeyMinInsyncReplicas         = "min.insync.replicas"
	KeyEligibleLeaderReplicas    = "eligible.leader.replicas.enabled"
	KeyUncleanRecoveryStrategy   = "unclean.recovery.strategy"
	KeyUncleanLeaderElection     = "unclean.leader.election.enable"
	KeyUncleanRecoveryTimeoutMs  = "unclean.recovery.timeout.ms"
	KeyReplicaLagTimeMaxMs       = "replica.lag.time.max.ms"
	KeyBrokerSessionTimeoutMs    = "broker.session.timeout.ms"
	KeyBrokerHeartbeatIntervalMs = "broker.heartbeat.interval.ms"
	KeyMaxRequestPartitionLimit  = "max.request.partition.size.limit"
	KeyMirrorSupportUnclean      = "mirror.support.unclean.leader.election"
	KeyMirrorPendingTimeoutMs    = "mirror.pending.timeout.ms"
	KeyMirrorRetryInitialBackoff = "mirror.failed.retry.initial.backoff.ms"
	KeyMirrorRetryMaxBackoff     = "mirror.failed.retry.max.backoff.ms"
	KeyMirrorRetryMaxAttempts    = "mirror.failed.retry.max.attempts"
	KeyMirrorStateReplication    = "mirror.state.topic.replication.factor"
	KeyMirrorStateNumPartitions  = "mirror.state.topic.num.partitions"
	// __consumer_offsets (ConsumerOffsetsTopic): Kafka's names and
	// defaults, read once, when the first FindCoordinator creates it.
	KeyOffsetsTopicReplication   = "offsets.topic.replication.factor"
	KeyOffsetsTopicNumPartitions = "offsets.topic.num.partitions"
	// A mirror's offset sync (mirror/offsetsync): every interval, the
	// committed offsets of the source groups whose id matches include and
	// not exclude are copied to the destination's groups.
	KeyMirrorOffsetSyncIntervalMs = "mirror.offset.sync.interval.ms"
	KeyMirrorOffsetSyncInclude    = "mirror.offset.sync.groups.include"
	KeyMirrorOffsetSyncExclude    = "mirror.offset.sync.groups.exclude"
	KeyMirrorACLSyncEnable        = "mirror.acl.sync.enable"
	KeyMirrorACLSyncFilters       = "mirror.acl.sync.filters"
	KeyMirrorACLSyncIntervalMs    = "mirror.acl.sync.interval.ms"
	// Log compaction (storage/doc.go "Compaction"): topic configs with a
	// cluster default, and the cleaner's broker settings.
	KeyCleanupPolicy = "cleanup.policy"
	// Retention (cleanup.policy=delete; broker/retention.go): per topic,
	// Kafka's names; unset, each broker's log.retention.ms/bytes apply.
	KeyRetentionMs    = "retention.ms"
	KeyRetentionBytes = "retention.bytes"
	// KeySegmentBytes is a topic's segment size (unset: each broker's
	// log.segment.bytes).
	KeySegmentBytes                  = "segment.bytes"
	KeyMinCleanableDirtyRatio        = "min.cleanable.dirty.ratio"
	KeyDeleteRetentionMs             = "delete.retention.ms"
	KeyMinCompactionLagMs            = "min.compaction.lag.ms"
	KeyMaxCompactionLagMs            = "max.compaction.lag.ms"
	KeyLogCleanerThreads             = "log.cleaner.threads"
	KeyLogCleanerIOMaxBytesPerSecond = "log.cleaner.io.max.bytes.per.second"
	KeyLogCleanerDedupeBufferSize    = "log.cleaner.dedupe.buffer.size"
	KeyLogCleanerBackoffMs           = "log.cleaner.backoff.ms"
	CleanupPolicyDelete              = "delete"
	CleanupPolicyCompact             = "compact"
	StrategyNone                     = "none"
	StrategyBalanced                 = "balanced"
	StrategyAggressive               = "aggressive"
	defaultServerPartitionLimit      = 1000
)

// KeyProducerIDSpace is the cluster's producer id space, 1 to
// MaxProducerIDSpace; static: written at the controller's first start only,
// and fixed for the cluster's life. Every idempotent producer id the
// cluster allocates is space<<48 | counter (producerids.go), so two clusters
// with different spaces never hand out the same id. Unset, the space is
// derived from the cluster id (ProducerIDSpace), as fixed as the id.
//
// Two clusters that mirror each other must have different spaces: a mirror
// copies the source's batches with their producer ids, and an id the
// destination also gave one of its own producers would mix two producers'
// sequences in one partition. CreateMirror (and StartMirrorTopics with new
// source addresses) refuses a source whose space is this cluster's, or that
// does not report one.
const KeyProducerIDSpace = "producer.id.space"

// InternalTopicPrefix starts the names reserved for internal topics
// (Kafka's "__consumer_offsets", our "__mirror_state").
const InternalTopicPrefix = "__"

// ConsumerOffsetsTopic is Kafka's internal topic of consumer groups and
// their committed offsets (package group): compacted, written by the
// group coordinators only, created on the first FindCoordinator.
const ConsumerOffsetsTopic = "__consumer_offsets"

// IsReservedTopicName reports a name clients may not create: internal topics
// are created by the cluster's own code only.
func IsReservedTopicName(name string) bool { return strings.HasPrefix(name, InternalTopicPrefix) }

// Scope is where a config key may be set (SPEC §1.3 "scope").
type Scope uint8

// Scopes. A key may have several.
const (
	ScopeTopic Scope = 1 << iota
	ScopeCluster
	ScopeBroker
)

// ConfigDef describes one known config key.
type ConfigDef struct {
	Name    string
	Scopes  Scope
	Default string
	// Static keys cannot be altered at run time.
	Static bool
	// Mirrored topic-scope keys are copied from the source topic when a
	// mirror creates its local topic (see MirroredTopicConfigs); the others
	// stay local to each cluster.
	Mirrored bool
}

// parseBool reads a stored boolean by configdef's rule ("true"/"false" in
// any case, as Kafka).
func parseBool(v string) (bool, bool) {
	b, err := configdef.ParseBool(v)
	return b, err == nil
}

// ConfigInt reads a stored integer value, def if it does not parse.
func ConfigInt(v string, def int64) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def
	}
	return n
}

// configDefs is the table of SPEC §1.3. Unknown keys are rejected.
var configDefs = map[string]ConfigDef{
	KeyMinInsyncReplicas:         {Scopes: ScopeTopic | ScopeCluster, Default: "1"},
	KeyEligibleLeaderReplicas:    {Scopes: ScopeCluster, Default: "true"},
	KeyUncleanRecoveryStrategy:   {Scopes: ScopeTopic | ScopeCluster, Default: StrategyBalanced},
	KeyUncleanLeaderElection:     {Scopes: ScopeTopic | ScopeCluster, Default: "false"},
	KeyUncleanRecoveryTimeoutMs:  {Scopes: ScopeCluster, Default: "300000"},
	KeyReplicaLagTimeMaxMs:       {Scopes: ScopeBroker, Default: "30000"},
	KeyBrokerSessionTimeoutMs:    {Scopes: ScopeCluster, Default: "9000"},
	KeyBrokerHeartbeatIntervalMs: {Scopes: ScopeCluster, Default: "2000"},
	KeyMaxRequestPartitionLimit:  {Scopes: ScopeBroker, Default: "1000"},
	KeyMirrorSupportUnclean:      {Scopes: ScopeTopic, Default: "false", Mirrored: true},
	KeyMirrorPendingTimeoutMs:    {Scopes: ScopeBroker, Default: "300000"},
	KeyMirrorRetryInitialBackoff: {Scopes: ScopeBroker, Default: "100"},
	KeyMirrorRetryMaxBackoff:     {Scopes: ScopeBroker, Default: "300000"},
	KeyMirrorRetryMaxAttempts:    {Scopes: ScopeBroker, Default: "20"},
	KeyMirrorStateReplication:    {Scopes: ScopeCluster, Default: "3", Static: true},
	KeyMirrorStateNumPartitions:  {Scopes: ScopeCluster, Default: "1", Static: true},
	KeyOffsetsTopicReplication:   {Scopes: ScopeCluster, Default: "3", Static: true},
	KeyOffsetsTopicNumPartitions: {Scopes: ScopeCluster, Default: "50", Static: true},
	// Cluster Linking syncs every 30 s (consumer.offset.sync.ms).
	KeyMirrorOffsetSyncIntervalMs: {Scopes: ScopeCluster, Default: "30000"},
	KeyMirrorOffsetSyncInclude:    {Scopes: ScopeCluster, Default: ".*"},
	KeyMirrorOffsetSyncExclude:    {Scopes: ScopeCluster, Default: ""},
	// Cluster Linking's ACL sync: off, no filters, every 5 s (acl.sync.ms).
	KeyMirrorACLSyncEnable:     {Scopes: ScopeCluster, Default: "false"},
	KeyMirrorACLSyncFilters:    {Scopes: ScopeCluster, Default: ""},
	KeyMirrorACLSyncIntervalMs: {Scopes: ScopeCluster, Default: "5000"},
	// No default: unset means derived from the cluster id
	// (ProducerIDSpace), which DescribeConfigs shows.
	KeyProducerIDSpace: {Scopes: ScopeCluster, Static: true},
	// Log compaction, Kafka's names and defaults. The log.cleaner.* keys
	// are broker settings set cluster-wide, as in Kafka (on the cluster or
	// the default broker: one value either way). cleanup.policy is copied
	// to a mirror topic (MirroredTopicConfigs).
	KeyCleanupPolicy:          {Scopes: ScopeTopic | ScopeCluster, Default: CleanupPolicyDelete, Mirrored: true},
	KeyMinCleanableDirtyRatio: {Scopes: ScopeTopic | ScopeCluster, Default: "0.5"},
	// Retention of cleanup.policy=delete topics. Unset on a topic, each
	// broker applies its log.retention.ms/bytes, whose defaults these are
	// (Kafka shows the broker's value as the default). Copied to a mirror
	// topic, as Cluster Linking syncs them: a DR copy keeps what the
	// source keeps unless changed there.
	KeyRetentionMs:    {Scopes: ScopeTopic, Default: "604800000", Mirrored: true},
	KeyRetentionBytes: {Scopes: ScopeTopic, Default: "-1", Mirrored: true},
	// Each cluster's storage layout: not copied.
	KeySegmentBytes:                  {Scopes: ScopeTopic, Default: "1073741824"},
	KeyDeleteRetentionMs:             {Scopes: ScopeTopic | ScopeCluster, Default: "86400000"},
	KeyMinCompactionLagMs:            {Scopes: ScopeTopic | ScopeCluster, Default: "0"},
	KeyMaxCompactionLagMs:            {Scopes: ScopeTopic | ScopeCluster, Default: "9223372036854775807"},
	KeyLogCleanerThreads:             {Scopes: ScopeBroker | ScopeCluster, Default: "1"},
	KeyLogCleanerIOMaxBytesPerSecond: {Scopes: ScopeBroker | ScopeCluster, Default: "1.7976931348623157E308"},
	KeyLogCleanerDedupeBufferSize:    {Scopes: ScopeBroker | ScopeCluster, Default: "134217728"},
	KeyLogCleanerBackoffMs:           {Scopes: ScopeBroker | ScopeCluster, Default: "15000"},
}

// IsCompacted reports whether a cleanup.policy value includes compact.
func IsCompacted(policy string) bool {
	for p := range strings.SplitSeq(policy, ",") {
		if p == CleanupPolicyCompact {
			return true
		}
	}
	return false
}

// HasDeletePolicy reports whether a cleanup.policy value includes delete
// (size and age retention apply).
func HasDeletePolicy(policy string) bool {
	for p := range strings.SplitSeq(policy, ",") {
		if p == CleanupPolicyDelete {
			return true
		}
	}
	return false
}

func init() {
	for k, d := range configDefs {
		// How a value is written and its bounds are configdef's, shared
		// with the daemons' start-up config.
		configdef.MustLookup(k)
		if d.Mirrored && (d.Scopes&ScopeTopic == 0 || d.Static) {
			panic(fmt.Sprintf("metadata: mirrored config %q must be a dynamic topic config", k))
		}
		d.Name = k
		configDefs[k] = d
	}
}

// MirroredTopicConfigs lists, sorted, the topic configs a mirror copies from
// the source topic's own settings (not its defaults) when it creates the
// local topic (SPEC §6.1); later changes on either side are not propagated.
//
// Copied: mirror.support.unclean.leader.election. It protects the pair, not
// one cluster (SPEC §6.8: with it, later unclean elections on either side
// are repaired), and its only effect on the destination is that a Start
// waits for every replica (PENDING, SPEC §6.6 step 3) instead of tainting
// the absent ones — the safe direction. Copying it keeps the protection when
// the roles swap at failover. And cleanup.policy, so a compacted source's
// mirror is compacted too (Cluster Linking and MirrorMaker 2 copy it): the
// mirror copies the source's batches with their offset gaps either way,
// and each cluster's replicas clean their own logs. The compaction
// settings (min.cleanable.dirty.ratio, delete.retention.ms, the lags) stay
// local, each cluster's cost and space trade-off.
//
// Local (never copied), as Kafka's MirrorMaker 2 excludes them by default
// (config.properties.exclude) and Confluent Cluster Linking leaves
// min.insync.replicas to the destination: min.insync.replicas (durability
// sized to the local brokers and replication factor),
// unclean.leader.election.enable and unclean.recovery.strategy (each
// cluster's availability-versus-loss choice; copying an unclean election
// into the destination would make the tainted-replica divergence of SPEC
// §6.8/§6.10 reachable where the operator never enabled it). Set them on the
// mirror topic with AlterConfigs.
func MirroredTopicConfigs() []string {
	var out []string
	for k, d := range configDefs {
		if d.Mirrored {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// LookupConfig returns the definition of a known key.
func LookupConfig(key string) (ConfigDef, bool) {
	d, ok := configDefs[key]
	return d, ok
}

// ValidateConfig checks that key is known, settable at scope and that value
// is written and bounded as internal/configdef says (SPEC §1.3): the same
// rule, floor and ceiling a daemon applies to the key at start.
func ValidateConfig(scope Scope, key, value string) error {
	d, ok := configDefs[key]
	if !ok {
		return fmt.Errorf("unknown config %q", key)
	}
	if d.Scopes&scope == 0 {
		return fmt.Errorf("config %q cannot be set on this resource", key)
	}
	if err := configdef.Check(key, value); err != nil {
		return fmt.Errorf("config %q = %q: %v", key, value, err)
	}
	return nil
}

// CheckOrders applies configdef's rules between keys (a session longer than
// the heartbeat interval, ...) to the configs next that a change of the keys
// in touched would leave. Only rules with a touched key are checked: a
// stored pair that breaks a rule (written before the rule existed) does not
// block changes of unrelated keys. Values absent from next are the
// defaults.
func CheckOrders(next map[string]string, touched func(key string) bool) error {
	for _, o := range configdef.Orders {
		lo, lok := configDefs[o.Lower]
		up, uok := configDefs[o.Upper]
		if !lok || !uok || !(touched(o.Lower) || touched(o.Upper)) {
			continue
		}
		get := func(k string, d ConfigDef) int64 {
			if v, ok := next[k]; ok {
				return ConfigInt(v, ConfigInt(d.Default, 0))
			}
			return ConfigInt(d.Default, 0)
		}
		if err := o.Check(get(o.Lower, lo), get(o.Upper, up)); err != nil {
			return fmt.Errorf("config %q = %d: %v", o.Upper, get(o.Upper, up), err)
		}
	}
	return nil
}

// KeysWithScope lists, sorted, the known keys settable at scope.
func KeysWithScope(scope Scope) []string {
	var out []string
	for k, d := range configDefs {
		if d.Scopes&scope != 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
