package kafka

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
)

// TestProduceByTopicID (KIP-516): from v13 a Produce names topics by id. A
// known id is produced to as its topic, authorized by its name; an id no
// topic has is UNKNOWN_TOPIC_ID and reaches no backend; the answer names
// topics by id, in the request's order, with the offsets the broker gave.
// v11 and v12 name topics as v10 does.
func TestProduceByTopicID(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(topicGrant(acl.Write, "ok")))
	type answer struct {
		id     [16]byte
		topic  string
		part   int32
		code   int16
		offset int64
	}
	unknown := idBytes(9)
	for _, v := range []int16{11, 12, 13} {
		byID := v >= 13
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks, req.TimeoutMillis = -1, 1000
		for i, id := range [][16]byte{idBytes(1), unknown, idBytes(2)} { // ok, none, no
			rt := kmsg.NewProduceRequestTopic()
			if byID {
				rt.TopicID = id
			} else {
				rt.Topic = []string{"ok", "none", "no"}[i]
			}
			for p := range int32(2) {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = p, []byte{}
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := e.c.roundTrip(req).(*kmsg.ProduceResponse)
		var got []answer
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				got = append(got, answer{rt.TopicID, rt.Topic, rp.Partition, rp.ErrorCode, rp.BaseOffset})
			}
		}
		want := []answer{
			{idBytes(1), "", 0, 0, 7}, {idBytes(1), "", 1, 0, 7},
			{unknown, "", 0, unknownTopicID, -1}, {unknown, "", 1, unknownTopicID, -1},
			{idBytes(2), "", 0, topicAuthorizationFailed, -1}, {idBytes(2), "", 1, topicAuthorizationFailed, -1},
		}
		asked := []string{"ok", "ok"}
		if !byID {
			// The backend answers the unknown name (recBackend: offset 7).
			want = []answer{
				{[16]byte{}, "ok", 0, 0, 7}, {[16]byte{}, "ok", 1, 0, 7},
				{[16]byte{}, "none", 0, topicAuthorizationFailed, -1}, {[16]byte{}, "none", 1, topicAuthorizationFailed, -1},
				{[16]byte{}, "no", 0, topicAuthorizationFailed, -1}, {[16]byte{}, "no", 1, topicAuthorizationFailed, -1},
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("v%d: answers %v, want %v", v, got, want)
		}
		calls := e.takeAll()
		if len(calls) != 1 {
			t.Fatalf("v%d: backend calls %v, want one Produce", v, calls)
		}
		var produced []string
		for _, p := range calls[0].(*pb.ProduceRequest).GetPartitions() {
			produced = append(produced, p.GetTopic())
		}
		if !slices.Equal(produced, asked) {
			t.Errorf("v%d: produced to %v, want %v", v, produced, asked)
		}
	}
}
