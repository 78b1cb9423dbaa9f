package metastate

import (
	"fmt"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// BenchmarkFenceBroker is the pure part of controller.BenchmarkFence10kLeaders:
// broker 1 leads 10,000 of 30,000 partitions (6 brokers); FenceBroker
// computes the change and Apply installs it (no persistence).
func BenchmarkFenceBroker(b *testing.B) {
	snap := &twinlogv1.MetadataSnapshot{Offset: 1, ClusterId: "a"}
	for id := int32(1); id <= 6; id++ {
		snap.Brokers = append(snap.Brokers, &twinlogv1.BrokerRecord{BrokerId: id, BrokerEpoch: 1})
	}
	for t := range 30 {
		name := fmt.Sprintf("topic-%04d", t)
		snap.Topics = append(snap.Topics, &twinlogv1.TopicRecord{Name: name, TopicId: name, PartitionCount: 1000})
		for p := range 1000 {
			r := []int32{1, int32(2 + p%5), int32(2 + (p+1)%5)}
			if t >= 10 {
				l := int32(2 + (t+p)%5)
				r = []int32{l, 1, 2 + (l-1)%5}
			}
			snap.Partitions = append(snap.Partitions, &twinlogv1.PartitionRecord{Topic: name, TopicId: name, Partition: int32(p),
				Replicas: r, Isr: r, Leader: r[0], LastKnownLeader: -1, RecoveryState: twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERED})
		}
	}
	for b.Loop() {
		b.StopTimer()
		s := FromSnapshot(snap, Config{})
		b.StartTimer()
		d := s.FenceBroker(1)
		if _, err := s.Apply(d); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(d.GetPartitions()) != 30000 {
			b.Fatalf("%d partitions changed", len(d.GetPartitions()))
		}
		b.StartTimer()
	}
}
