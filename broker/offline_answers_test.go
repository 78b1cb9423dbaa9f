package broker

import (
	"fmt"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// TestOfflinePartitionAnswers (issue 13): Produce, Fetch, ListOffsets and
// OffsetForLeaderEpoch to broker 1 for t-0, which it does not host, answer
// by notHosted's rule. Its log of t-0 is offline and the metadata names it
// the leader: KAFKA_STORAGE_ERROR (Kafka's answer for a replica on an
// offline log dir). Before, NOT_LEADER_OR_FOLLOWER naming broker 1 itself
// as the leader: clients came back for ever, told nothing of the broken
// log. Another live leader: NOT_LEADER_OR_FOLLOWER with that leader as
// the hint; none: −1; a partition the metadata does not know:
// UNKNOWN_TOPIC_OR_PARTITION.
func TestOfflinePartitionAnswers(t *testing.T) {
	const storageErr, notLeader, unknown = pb.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR,
		pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
	tp := twinlog.TopicPartition{Topic: "t", Partition: 0}
	for _, tc := range []struct {
		name    string
		offline bool
		leader  int32 // per metadata; −2: the topic is unknown
		want    pb.ErrorCode
		hint    int32
	}{
		{"offline, this broker leads", true, 1, storageErr, -1},
		{"offline, another broker leads", true, 2, notLeader, 2},
		{"offline, no leader", true, -1, notLeader, -1},
		{"offline, leader fenced", true, 3, notLeader, -1},
		{"offline, unknown topic", true, -2, unknown, -1},
		{"not opened yet, this broker leads", false, 1, notLeader, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Config{ID: 1, ControllerAddr: "unused:1", LogDirs: []string{t.TempDir()}}, Deps{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.closeDirs(false) })
			if tc.offline {
				b.offline[tp] = fmt.Errorf("%w: open log t-0: corrupt", storage.ErrLogOffline)
			}
			snap := &pb.MetadataSnapshot{Offset: 10, Brokers: []*pb.BrokerRecord{
				{BrokerId: 1, BrokerEpoch: 1}, {BrokerId: 2, BrokerEpoch: 2}, {BrokerId: 3, BrokerEpoch: 3, Fenced: true},
			}}
			if tc.leader != -2 {
				snap.Topics = []*pb.TopicRecord{{Name: "t", TopicId: "id", PartitionCount: 1}}
				snap.Partitions = []*pb.PartitionRecord{{Topic: "t", TopicId: "id", Partition: 0, Replicas: []int32{1, 2, 3},
					Isr: []int32{1, 2, 3}, Leader: tc.leader, LeaderEpoch: 1, PartitionEpoch: 1}}
			}
			b.image.Restore(snap)
			ctx := t.Context()

			pr, err := b.Produce(ctx, &pb.ProduceRequest{Acks: int32(replica.AcksAll), Partitions: []*pb.ProducePartitionData{{
				Topic: "t", Records: validBatch(t),
			}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := pr.GetPartitions()[0]; got.GetError() != tc.want || got.GetLeaderId() != tc.hint {
				t.Errorf("produce: %v leader %d, want %v leader %d", got.GetError(), got.GetLeaderId(), tc.want, tc.hint)
			}
			fr, err := b.Fetch(ctx, consumerFetch(&pb.FetchPartition{Topic: "t", CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}))
			if err != nil {
				t.Fatal(err)
			}
			if got := fr.GetPartitions()[0]; got.GetError() != tc.want || got.GetLeaderId() != tc.hint {
				t.Errorf("fetch: %v leader %d, want %v leader %d", got.GetError(), got.GetLeaderId(), tc.want, tc.hint)
			}
			lr, err := b.ListOffsets(ctx, &pb.ListOffsetsRequest{Topics: []*pb.ListOffsetsTopic{{Name: "t", Partitions: []*pb.ListOffsetsPartition{
				{Index: 0, CurrentLeaderEpoch: -1, Spec: pb.OffsetSpec_OFFSET_SPEC_LATEST},
			}}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := lr.GetTopics()[0].GetPartitions()[0].GetError(); got != tc.want {
				t.Errorf("list offsets: %v, want %v", got, tc.want)
			}
			or, err := b.OffsetForLeaderEpoch(ctx, &pb.OffsetForLeaderEpochRequest{Partitions: []*pb.OffsetForLeaderEpochPartition{
				{Topic: "t", CurrentLeaderEpoch: -1, LeaderEpoch: 1},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := or.GetPartitions()[0].GetError(); got != tc.want {
				t.Errorf("offset for leader epoch: %v, want %v", got, tc.want)
			}
		})
	}
}

func validBatch(t *testing.T) []byte {
	t.Helper()
	batch, err := storage.EncodeBatch([]storage.Record{{Value: []byte("v")}}, storage.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return batch
}
