package broker

import (
	"time"

	"github.com/twinlog/twinlog/broker/coord"
)

// PartitionStats is one hosted partition as the broker sees it.
type PartitionStats struct {
	Topic     string
	Partition int32
	Leader    bool
	// HighWatermark and LogEndOffset of the local replica.
	HighWatermark int64
	LogEndOffset  int64
	// ISRSize, UnderReplicated and UnderMinISR are reported by the leader
	// only (false/0 elsewhere).
	ISRSize         int
	UnderReplicated bool
	UnderMinISR     bool
}

// Observer receives broker metrics (franz-go hook style). metrics.Broker
// implements it with Prometheus. Calls may come from many goroutines.
type Observer interface {
	// ObservePartition reports a hosted partition (every tick).
	ObservePartition(PartitionStats)
	// ForgetPartition: the partition left this broker.
	ForgetPartition(topic string, partition int32)
	// ObserveTruncation counts a log truncation; reason is divergence,
	// out_of_range or lmle (SPEC §7), or added_back (a replica re-added to
	// the replica set discarded a log from before).
	ObserveTruncation(reason string)
	// ObserveRequest records the latency of one request; api is produce or
	// fetch (and others).
	ObserveRequest(api string, d time.Duration)
	// ObserveBytesIn counts produced bytes appended by leaders.
	ObserveBytesIn(n int)
	// ObserveIdempotentRefusal counts an idempotent producer's batch a
	// leader did not append: duplicate (answered with the original's
	// offsets), out_of_order_sequence, invalid_producer_epoch or
	// duplicate_sequence.
	ObserveIdempotentRefusal(outcome string)
	// ObserveBytesOut counts record bytes returned by Fetch.
	ObserveBytesOut(n int)
	// ObserveISRChange counts a committed ISR shrink (expand=false) or
	// expansion proposed by this broker as leader.
	ObserveISRChange(expand bool)
}

// GroupObserver is an optional Observer extension for the group
// coordinators (metrics.Broker implements it).
type GroupObserver interface {
	// ObserveGroups reports, every second, the groups this broker
	// coordinates by state and their consumer lag (coord.Host.Stats, at
	// most MaxGroupLagSeries partitions).
	ObserveGroups(GroupStats)
	// ObserveGroupRebalance counts a completed rebalance.
	ObserveGroupRebalance()
	// ObserveOffsetCommits counts partitions committed.
	ObserveOffsetCommits(partitions int)
}

// GroupStats is coord.Stats: groups by state, consumer lag.
type GroupStats = coord.Stats

// MaxGroupLagSeries bounds the consumer lag series one broker reports
// (group × partition): beyond it the rest are counted, not reported.
const MaxGroupLagSeries = 10000

// groupObserver adapts a GroupObserver to coord.Observer.
type groupObserver struct{ o GroupObserver }

func (g groupObserver) Rebalanced()     { g.o.ObserveGroupRebalance() }
func (g groupObserver) Committed(n int) { g.o.ObserveOffsetCommits(n) }

type nopObserver struct{}

func (nopObserver) ObservePartition(PartitionStats)      {}
func (nopObserver) ForgetPartition(string, int32)        {}
func (nopObserver) ObserveTruncation(string)             {}
func (nopObserver) ObserveRequest(string, time.Duration) {}
func (nopObserver) ObserveBytesIn(int)                   {}
func (nopObserver) ObserveIdempotentRefusal(string)      {}
func (nopObserver) ObserveBytesOut(int)                  {}
func (nopObserver) ObserveISRChange(bool)                {}
