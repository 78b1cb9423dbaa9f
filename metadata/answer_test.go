package metadata

import (
	"errors"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestMetadataAnswer: an image with nothing in it does not answer (a
// restarted broker's "no such topic" would be believed); once loaded it
// lists unfenced brokers, the asked topics (unknown ones with their
// error) and each partition's leader, −1 when that broker is not alive.
func TestMetadataAnswer(t *testing.T) {
	img := New("c")
	if _, err := img.Metadata(&twinlogv1.MetadataRequest{}); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("empty image answered: err %v, want ErrNotLoaded", err)
	}
	if err := img.Apply(&twinlogv1.MetadataDelta{Offset: 1,
		Brokers: []*twinlogv1.BrokerRecord{{BrokerId: 1, BrokerEpoch: 5, Host: "h1", Port: 1}, {BrokerId: 2, BrokerEpoch: 6, Host: "h2", Port: 2, Fenced: true}},
		Topics:  []*twinlogv1.TopicRecord{{Name: "t", TopicId: "T", PartitionCount: 2}},
		Partitions: []*twinlogv1.PartitionRecord{
			{Topic: "t", TopicId: "T", Partition: 0, Replicas: []int32{1, 2}, Isr: []int32{1}, Leader: 1, LeaderEpoch: 3},
			{Topic: "t", TopicId: "T", Partition: 1, Replicas: []int32{1, 2}, Isr: []int32{2}, Leader: 2, LeaderEpoch: 4},
		}}); err != nil {
		t.Fatal(err)
	}
	if err := img.Reached(2); !errors.Is(err, ErrBehind) {
		t.Errorf("image at offset 1 Reached(2) = %v, want ErrBehind", err)
	}
	if err := img.Reached(1); err != nil {
		t.Errorf("image at offset 1 Reached(1) = %v", err)
	}
	resp, err := img.Metadata(&twinlogv1.MetadataRequest{Topics: []string{"t", "nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetBrokers()) != 1 || resp.GetBrokers()[0].GetId() != 1 || resp.GetMetadataOffset() != 1 {
		t.Errorf("brokers %v offset %d, want only unfenced broker 1 at offset 1", resp.GetBrokers(), resp.GetMetadataOffset())
	}
	if len(resp.GetTopics()) != 2 || resp.GetTopics()[1].GetError() != twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("topics %v, want t and nope (unknown)", resp.GetTopics())
	}
	parts := resp.GetTopics()[0].GetPartitions()
	if len(parts) != 2 || parts[0].GetLeaderId() != 1 || parts[0].GetLeaderEpoch() != 3 || parts[1].GetLeaderId() != -1 {
		t.Errorf("partitions %v, want leader 1 in LE 3 and no live leader (fenced 2)", parts)
	}
	if resp, _ := img.Metadata(&twinlogv1.MetadataRequest{NoTopics: true}); len(resp.GetTopics()) != 0 {
		t.Errorf("NoTopics answered topics %v", resp.GetTopics())
	}
}
