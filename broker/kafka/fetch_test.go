package kafka

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
)

// TestFetchByTopicID (KIP-516): from v13 a Fetch names topics by id. A
// known id is fetched as its topic, authorized by its name; an id no topic
// has is UNKNOWN_TOPIC_ID and reaches no backend; the answer names topics
// by id, in the request's order.
func TestFetchByTopicID(t *testing.T) {
	e := startAuthz(t, newFakeAuthorizer(topicGrant(acl.Read, "ok")))
	unknown := idBytes(9)
	for _, v := range []int16{13, 15} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		for _, id := range [][16]byte{idBytes(1), unknown, idBytes(2)} { // ok, none, no
			rt := kmsg.NewFetchRequestTopic()
			rt.TopicID = id
			for p := range int32(2) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := e.c.roundTrip(req).(*kmsg.FetchResponse)
		type answer struct {
			id   [16]byte
			part int32
			code int16
		}
		var got []answer
		for _, rt := range resp.Topics {
			if rt.Topic != "" {
				t.Errorf("v%d: the answer names topic %q (v13+ names ids only)", v, rt.Topic)
			}
			for _, rp := range rt.Partitions {
				got = append(got, answer{rt.TopicID, rp.Partition, rp.ErrorCode})
			}
		}
		want := []answer{
			{idBytes(1), 0, 0}, {idBytes(1), 1, 0},
			{unknown, 0, unknownTopicID}, {unknown, 1, unknownTopicID},
			{idBytes(2), 0, topicAuthorizationFailed}, {idBytes(2), 1, topicAuthorizationFailed},
		}
		if !slices.Equal(got, want) {
			t.Errorf("v%d: answers %v, want %v", v, got, want)
		}
		calls := e.takeAll()
		if len(calls) != 1 {
			t.Fatalf("v%d: backend calls %v, want one Fetch", v, calls)
		}
		var asked []string
		for _, p := range calls[0].(*pb.FetchRequest).GetPartitions() {
			asked = append(asked, p.GetTopic())
		}
		if !slices.Equal(asked, []string{"ok", "ok"}) {
			t.Errorf("v%d: fetched %v, want ok's two partitions", v, asked)
		}
	}
}
