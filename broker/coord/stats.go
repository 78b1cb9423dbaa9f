package coord

import (
	"cmp"
	"slices"

	"github.com/twinlog/twinlog/group"
)

// Observer receives the coordinators' events, for metrics; its methods may
// be called from many goroutines.
type Observer interface {
	// Rebalanced counts a completed rebalance: a generation's leader got
	// its JoinGroup answer.
	Rebalanced()
	// Committed counts partitions of an OffsetCommit that became durable.
	Committed(partitions int)
}

type nopObserver struct{}

func (nopObserver) Rebalanced()   {}
func (nopObserver) Committed(int) {}

// Stats is what this broker's coordinators hold, for metrics.
type Stats struct {
	// Groups counts the groups by state (Kafka's names: Empty, Stable,
	// PreparingRebalance, CompletingRebalance, Dead).
	Groups map[string]int
	// Lag is each committed partition's consumer lag, sorted by group,
	// topic and partition: at most maxLag of them.
	Lag []Lag
	// LagDropped counts the committed partitions beyond maxLag, and those
	// whose high watermark this broker does not know.
	LagDropped int
}

// Lag is one group's consumer lag on one partition: the partition's high
// watermark minus the committed offset (0 when the commit is ahead).
type Lag struct {
	Group, Topic string
	Partition    int32
	Lag          int64
}

// Stats gathers the loaded coordinators' groups by state and the lag of
// their committed offsets, against hw (the partition's high watermark as
// this broker knows it; false when it hosts no replica of it). At most
// maxLag lags are kept (a cardinality guard for metrics); the others are
// counted.
func (h *Host) Stats(hw func(topic string, partition int32) (int64, bool), maxLag int) Stats {
	st := Stats{Groups: map[string]int{}}
	for _, s := range h.allShards() {
		var gs group.ListGroupsResponse
		offsets := map[string]group.OffsetFetchResponse{}
		s.read(func(c *group.Coordinator) {
			gs = c.ListGroups(group.ListGroupsRequest{})
			if gs.ErrorCode != group.None {
				return // loading: nothing to count yet
			}
			for _, g := range gs.Groups {
				offsets[g.GroupID] = c.OffsetFetch(group.OffsetFetchRequest{GroupID: g.GroupID})
			}
		})
		if gs.ErrorCode != group.None {
			continue
		}
		for _, g := range gs.Groups {
			st.Groups[g.GroupState]++
			for _, t := range offsets[g.GroupID].Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != group.None || p.Offset < 0 {
						continue
					}
					end, ok := hw(t.Name, p.Partition)
					if !ok {
						st.LagDropped++
						continue
					}
					st.Lag = append(st.Lag, Lag{Group: g.GroupID, Topic: t.Name, Partition: p.Partition, Lag: max(end-p.Offset, 0)})
				}
			}
		}
	}
	slices.SortFunc(st.Lag, func(a, b Lag) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if len(st.Lag) > maxLag {
		st.LagDropped += len(st.Lag) - maxLag
		st.Lag = st.Lag[:maxLag]
	}
	return st
}
