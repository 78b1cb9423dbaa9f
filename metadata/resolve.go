package metadata

import twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"

// Config resolution (SPEC §1.3) over records: the Image's readers call these
// with the image's own records, and the controller's pending changes with
// the records they are about to write, so that both resolve a value by the
// same rule. A nil topic record has no settings of its own; cluster is the
// cluster-level configs as stored (a key absent has its default).

// ResolveClusterConfig returns the effective cluster-level value of key: the
// set value, else the default.
func ResolveClusterConfig(cluster map[string]string, key string) string {
	if v, ok := cluster[key]; ok {
		return v
	}
	return configDefs[key].Default
}

// ResolveTopicConfig returns the effective value of key for topic tr: the
// topic's, then the cluster's, then the default.
func ResolveTopicConfig(tr *twinlogv1.TopicRecord, cluster map[string]string, key string) string {
	if v, ok := tr.GetConfigs()[key]; ok {
		return v
	}
	return ResolveClusterConfig(cluster, key)
}

// ResolveMinInsync returns the configured min.insync.replicas of topic tr.
func ResolveMinInsync(tr *twinlogv1.TopicRecord, cluster map[string]string) int {
	return int(ConfigInt(ResolveTopicConfig(tr, cluster, KeyMinInsyncReplicas), 1))
}

// ResolveMinISR is SPEC §1.2's m = min(min.insync.replicas, |R|) for a
// partition of topic tr with replication factor rf.
func ResolveMinISR(tr *twinlogv1.TopicRecord, cluster map[string]string, rf int) int {
	return min(ResolveMinInsync(tr, cluster), rf)
}

// ResolveELREnabled reports eligible.leader.replicas.enabled.
func ResolveELREnabled(cluster map[string]string) bool {
	v, _ := parseBool(ResolveClusterConfig(cluster, KeyEligibleLeaderReplicas))
	return v
}

// ResolveUncleanStrategy is SPEC §3.5: aggressive if
// unclean.leader.election.enable, else unclean.recovery.strategy. An
// internal topic is never elected uncleanly (SPEC §6.4: __mirror_state has
// unclean.recovery.strategy=none): a cluster-wide
// unclean.leader.election.enable must not let a stale replica lead it and
// drop committed LMLE, taint and run records (simulator seed 41 of the
// two-cluster range, once __mirror_state was a real topic there).
func ResolveUncleanStrategy(tr *twinlogv1.TopicRecord, cluster map[string]string) string {
	if tr.GetInternal() {
		return StrategyNone
	}
	if v, _ := parseBool(ResolveTopicConfig(tr, cluster, KeyUncleanLeaderElection)); v {
		return StrategyAggressive
	}
	return ResolveTopicConfig(tr, cluster, KeyUncleanRecoveryStrategy)
}

// BrokerAcceptable reports SPEC §1.2 acceptability of registration br:
// registered, unfenced, not in controlled shutdown, no offline log dir.
// (Replica-to-dir placement is not in the metadata, so any offline dir makes
// all the broker's replicas unacceptable; this is conservative.)
func BrokerAcceptable(br *twinlogv1.BrokerRecord) bool {
	return br != nil && !br.GetFenced() && !br.GetInControlledShutdown() && len(br.GetOfflineLogDirs()) == 0
}

// BrokerAlive reports a registered, unfenced broker.
func BrokerAlive(br *twinlogv1.BrokerRecord) bool { return br != nil && !br.GetFenced() }
