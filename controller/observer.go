package controller

import "time"

// Observer receives the controller's metrics (SPEC §7). metrics.Controller
// implements it with Prometheus; nil in Deps means no metrics. Calls come from
// the goroutine that applies metadata changes, one at a time; implementations
// must not block.
type Observer interface {
	// ObservePartition reports a partition's current sizes after a change.
	ObservePartition(p PartitionStats)
	// ForgetPartition drops the series of a deleted partition.
	ForgetPartition(topic string, partition int32)
	// ObserveCluster reports the cluster-wide gauges after a change.
	ObserveCluster(c ClusterStats)
	// ObserveElections adds leader elections; unclean ones are counted in
	// both arguments (unclean ≤ total).
	ObserveElections(total, unclean int)
	// ObserveCommit reports one bbolt commit of a change set.
	ObserveCommit(d time.Duration)
}

// OffsetSyncObserver is an optional Observer extension for the mirrors'
// offset sync (offsetsync.go); metrics.Controller implements it. Called
// after each sync, from the sync's goroutine.
type OffsetSyncObserver interface {
	ObserveOffsetSync(mirror string, st OffsetSyncStats)
}

// ACLSyncObserver is an optional Observer extension for the mirrors' ACL
// sync (aclsync.go); metrics.Controller implements it. Called after each
// sync, from the sync's goroutine.
type ACLSyncObserver interface {
	ObserveACLSync(ACLSyncResult)
}

// OffsetSyncStats is one offset sync of a mirror.
type OffsetSyncStats struct {
	At                        time.Time
	Groups                    int
	OffsetsCommitted          int
	OffsetsClamped            int
	GroupsActiveOnDestination int
	// Failed: the sync did not reach everything (its status has the
	// error).
	Failed bool
}

// PartitionStats are the per-partition gauges of SPEC §7.
type PartitionStats struct {
	Topic     string
	Partition int32
	ISR       int
	ELR       int
}

// ClusterStats are the cluster-wide gauges of SPEC §7.
type ClusterStats struct {
	// ElectableLeaders is Σ (|ISR| + |ELR|) over all partitions.
	ElectableLeaders int
	// UnderMinISR counts partitions with |ISR| < m.
	UnderMinISR int
	// Offline counts partitions with no leader (L = −1).
	Offline int
	// FencedBrokers counts registered, fenced brokers.
	FencedBrokers int
	// MetadataOffset is the offset of the last applied delta.
	MetadataOffset int64
}

type nopObserver struct{}

func (nopObserver) ObservePartition(PartitionStats) {}
func (nopObserver) ForgetPartition(string, int32)   {}
func (nopObserver) ObserveCluster(ClusterStats)     {}
func (nopObserver) ObserveElections(int, int)       {}
func (nopObserver) ObserveCommit(time.Duration)     {}
