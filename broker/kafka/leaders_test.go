package kafka

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// movedBackend answers partition 1 of every topic NOT_LEADER_OR_FOLLOWER
// and partition 2 FENCED_LEADER_EPOCH, and its metadata says topic t's
// partitions 1 and 2 are led by broker 2 (epoch 5) and 3 (epoch 6), which
// has no Kafka listener, and partition 0 by broker 1 (this one).
type movedBackend struct{ fakeBackend }

func movedCodeOf(p int32) pb.ErrorCode {
	switch p {
	case 1:
		return pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
	case 2:
		return pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH
	}
	return pb.ErrorCode_ERROR_CODE_NONE
}

func (b *movedBackend) StartProduce(req *pb.ProduceRequest) func(context.Context) (*pb.ProduceResponse, error) {
	resp := &pb.ProduceResponse{}
	for _, p := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, &pb.ProducePartitionResponse{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: movedCodeOf(p.GetPartition())})
	}
	return func(context.Context) (*pb.ProduceResponse, error) { return resp, nil }
}

func (b *movedBackend) Fetch(_ context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	resp := &pb.FetchResponse{}
	for _, p := range req.GetPartitions() {
		resp.Partitions = append(resp.Partitions, &pb.FetchPartitionResponse{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: movedCodeOf(p.GetPartition())})
	}
	return resp, nil
}

// TopicName knows t as topic id 7 (Fetch v13+ names topics by id).
func (b *movedBackend) TopicName(id string) (string, bool) { return "t", id == idString(7) }

func (b *movedBackend) Metadata(_ context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	resp := &pb.MetadataResponse{ClusterId: "c", Brokers: []*pb.MetadataBroker{
		{Id: 1, KafkaHost: "h1", KafkaPort: 9092}, {Id: 2, KafkaHost: "h2", KafkaPort: 9093}, {Id: 3}}}
	if slices.Contains(req.GetTopics(), "t") {
		resp.Topics = append(resp.Topics, &pb.MetadataTopic{Name: "t", Partitions: []*pb.MetadataPartition{
			{Index: 0, LeaderId: 1, LeaderEpoch: 4}, {Index: 1, LeaderId: 2, LeaderEpoch: 5}, {Index: 2, LeaderId: 3, LeaderEpoch: 6}}})
	}
	return resp, nil
}

func fmtBroker(id int32, host string, port int32) string {
	return fmt.Sprintf("%d %s:%d", id, host, port)
}

// hinted is one partition's answer as a client reads it.
type hinted struct {
	part                  int32
	code                  int16
	leaderID, leaderEpoch int32
}

// TestLeaderHints (KIP-951): Produce v10+ and Fetch v16 answer
// NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH with the partition's
// current leader and epoch, and the leaders' Kafka endpoints; a leader
// without a Kafka listener is not named; older versions carry no hints.
func TestLeaderHints(t *testing.T) {
	_, addr := serveBackend(t, Config{BrokerID: 1}, &movedBackend{})
	c := dial(t, addr)
	hintedWant := []hinted{{0, 0, -1, -1}, {1, notLeaderOrFollower, 2, 5}, {2, fencedLeaderEpoch, -1, -1}}
	noHints := []hinted{{0, 0, -1, -1}, {1, notLeaderOrFollower, -1, -1}, {2, fencedLeaderEpoch, -1, -1}}
	wantBrokers := []string{"2 h2:9093"}
	check := func(what string, got []hinted, brokers []string, hints bool) {
		t.Helper()
		want, wantB := noHints, []string(nil)
		if hints {
			want, wantB = hintedWant, wantBrokers
		}
		if !slices.Equal(got, want) || !slices.Equal(brokers, wantB) {
			t.Errorf("%s: partitions %v, brokers %v; want %v, %v", what, got, brokers, want, wantB)
		}
	}

	for _, v := range []int16{9, 10, 13} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks, req.TimeoutMillis = -1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "t", idBytes(7) // each version sends one
		for p := range int32(3) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, []byte{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.ProduceResponse)
		var got []hinted
		for _, rp := range resp.Topics[0].Partitions {
			got = append(got, hinted{rp.Partition, rp.ErrorCode, rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch})
		}
		var brokers []string
		for _, b := range resp.Brokers {
			brokers = append(brokers, fmtBroker(b.NodeID, b.Host, b.Port))
		}
		check(fmt.Sprintf("Produce v%d", v), got, brokers, v >= 10)
	}

	for _, v := range []int16{15, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = idBytes(7)
		for p := range int32(3) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.FetchResponse)
		var got []hinted
		for _, rp := range resp.Topics[0].Partitions {
			got = append(got, hinted{rp.Partition, rp.ErrorCode, rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch})
		}
		var brokers []string
		for _, b := range resp.Brokers {
			brokers = append(brokers, fmtBroker(b.NodeID, b.Host, b.Port))
		}
		check(fmt.Sprintf("Fetch v%d", v), got, brokers, v >= 16)
	}
}
