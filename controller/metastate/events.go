package metastate

import (
	"fmt"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// EventKind names a transition an operator cares about. State never logs;
// Apply returns events and the shell logs and counts them.
type EventKind uint8

// Event kinds.
const (
	// EventLeaderElected: a partition got a new leader (clean election).
	EventLeaderElected EventKind = iota + 1
	// EventUncleanLeaderElected: a new leader was installed by an unclean
	// election (the partition is RECOVERING).
	EventUncleanLeaderElected
	// EventLeaderLost: the partition became leaderless.
	EventLeaderLost
	// EventISRChanged: ISR or ELR changed with the leader kept.
	EventISRChanged
	// EventBrokerRegistered: a broker registered (Clean says how).
	EventBrokerRegistered
	// EventBrokerFenced, EventBrokerUnfenced: fencing transitions.
	EventBrokerFenced
	EventBrokerUnfenced
	// EventBrokerShuttingDown: a broker entered controlled shutdown.
	EventBrokerShuttingDown
	// EventEpochExhausted: a change of the partition was refused because its
	// leader or partition epoch is at MaxInt32 (State.DrainEpochExhausted).
	EventEpochExhausted
)

func (k EventKind) String() string {
	switch k {
	case EventLeaderElected:
		return "leader_elected"
	case EventUncleanLeaderElected:
		return "unclean_leader_elected"
	case EventLeaderLost:
		return "leader_lost"
	case EventISRChanged:
		return "isr_changed"
	case EventBrokerRegistered:
		return "broker_registered"
	case EventBrokerFenced:
		return "broker_fenced"
	case EventBrokerUnfenced:
		return "broker_unfenced"
	case EventBrokerShuttingDown:
		return "broker_shutting_down"
	case EventEpochExhausted:
		return "epoch_exhausted"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one notable transition made by a delta.
type Event struct {
	Kind        EventKind
	Topic       string
	Partition   int32
	Broker      int32 // the broker concerned, or the new leader
	OldLeader   int32
	LeaderEpoch int32
	BrokerEpoch int64
	ISR, ELR    []int32
}

func (s *State) events(d *twinlogv1.MetadataDelta) []Event {
	var out []Event
	for _, b := range d.GetBrokers() {
		old := s.Broker(b.GetBrokerId())
		id := b.GetBrokerId()
		if old == nil || old.GetBrokerEpoch() != b.GetBrokerEpoch() {
			out = append(out, Event{Kind: EventBrokerRegistered, Broker: id, BrokerEpoch: b.GetBrokerEpoch()})
		}
		if old != nil && !old.GetFenced() && b.GetFenced() {
			out = append(out, Event{Kind: EventBrokerFenced, Broker: id, BrokerEpoch: b.GetBrokerEpoch()})
		}
		if (old == nil || old.GetFenced()) && !b.GetFenced() {
			out = append(out, Event{Kind: EventBrokerUnfenced, Broker: id, BrokerEpoch: b.GetBrokerEpoch()})
		}
		if !old.GetInControlledShutdown() && b.GetInControlledShutdown() {
			out = append(out, Event{Kind: EventBrokerShuttingDown, Broker: id, BrokerEpoch: b.GetBrokerEpoch()})
		}
	}
	for _, p := range d.GetPartitions() {
		old := s.Partition(p.GetTopic(), p.GetPartition())
		if old == nil || old.GetTopicId() != p.GetTopicId() {
			continue
		}
		ev := Event{Topic: p.GetTopic(), Partition: p.GetPartition(), Broker: p.GetLeader(),
			OldLeader: old.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(), ISR: p.GetIsr(), ELR: p.GetElr()}
		switch {
		case p.GetLeader() == old.GetLeader():
			if !sameSet(p.GetIsr(), old.GetIsr()) || !sameSet(p.GetElr(), old.GetElr()) {
				ev.Kind = EventISRChanged
			}
		case p.GetLeader() == noBroker:
			ev.Kind = EventLeaderLost
		case p.GetRecoveryState() == twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING:
			ev.Kind = EventUncleanLeaderElected
		default:
			ev.Kind = EventLeaderElected
		}
		if ev.Kind != 0 {
			out = append(out, ev)
		}
	}
	return out
}
