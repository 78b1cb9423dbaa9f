package metastate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func describeState(t *testing.T, topics map[string]int) *State {
	h := newHarness(t)
	for _, b := range ids(1, 2) {
		h.register(b, false)
		h.unfence(b)
	}
	req := &twinlogv1.CreateTopicsRequest{}
	for n, c := range topics {
		req.Topics = append(req.Topics, &twinlogv1.CreatableTopic{Name: n, NumPartitions: int32(c), ReplicationFactor: 2})
	}
	d, _ := h.s.CreateTopics(req)
	h.apply(d, false)
	return h.s
}

// page renders a response as "a0 a1 next(a,2) REQUEST_LIMIT_REACHED".
func page(r *twinlogv1.DescribeTopicPartitionsResponse) string {
	var parts []string
	for _, tr := range r.GetTopics() {
		if tr.GetError() != ecNone {
			parts = append(parts, tr.GetName()+"!"+tr.GetError().String())
		}
		for _, p := range tr.GetPartitions() {
			s := fmt.Sprintf("%s%d", tr.GetName(), p.GetPartitionIndex())
			if p.GetError() != ecNone {
				s += "!"
			}
			parts = append(parts, s)
		}
	}
	if c := r.GetNextCursor(); c != nil {
		parts = append(parts, fmt.Sprintf("next(%s,%d)", c.GetTopicName(), c.GetPartitionIndex()))
	}
	parts = append(parts, strings.TrimPrefix(r.GetError().String(), "ERROR_CODE_"))
	return strings.Join(parts, " ")
}

// S16 Paging.
func TestS16Paging(t *testing.T) {
	s := describeState(t, map[string]int{"a": 3, "b": 2, "c": 1})
	run := func(req *twinlogv1.DescribeTopicPartitionsRequest) []string {
		var out []string
		for range 10 {
			r := s.DescribeTopicPartitions(req, 1000)
			out = append(out, page(r))
			if r.GetNextCursor() == nil {
				break
			}
			req.Cursor = r.GetNextCursor()
		}
		return out
	}
	want := []string{"a0 a1 next(a,2) REQUEST_LIMIT_REACHED", "a2 b0 next(b,1) REQUEST_LIMIT_REACHED", "b1 c0 NONE"}
	if diff := cmp.Diff(want, run(&twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 2})); diff != "" {
		t.Fatal(diff)
	}
	s4 := describeState(t, map[string]int{"a": 3, "b": 2, "c": 1, "d": 1})
	r := s4.DescribeTopicPartitions(&twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 2, Cursor: &twinlogv1.Cursor{TopicName: "b", PartitionIndex: 1}}, 1000)
	if got := page(r); got != "b1 c0 next(d,0) REQUEST_LIMIT_REACHED" {
		t.Fatal(got)
	}
	mixed := &twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 2, Topics: []*twinlogv1.DescribeTopicPartitionsTopic{
		{Name: "a", Partitions: []int32{2, 0}}, {Name: "b"}}}
	if diff := cmp.Diff([]string{"a0 a2 next(b,0) REQUEST_LIMIT_REACHED", "b0 b1 NONE"}, run(mixed)); diff != "" {
		t.Fatal(diff)
	}
	for _, c := range []struct {
		req  *twinlogv1.DescribeTopicPartitionsRequest
		want string
	}{
		{&twinlogv1.DescribeTopicPartitionsRequest{Topics: []*twinlogv1.DescribeTopicPartitionsTopic{{Name: "b"}}, Cursor: &twinlogv1.Cursor{TopicName: "a"}}, "INVALID_REQUEST"},
		{&twinlogv1.DescribeTopicPartitionsRequest{Cursor: &twinlogv1.Cursor{TopicName: "a", PartitionIndex: -1}}, "INVALID_REQUEST"},
		{&twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 0}, "a0 next(a,1) REQUEST_LIMIT_REACHED"},
		{&twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 100, Topics: []*twinlogv1.DescribeTopicPartitionsTopic{
			{Name: "zz"}, {Name: "a", Partitions: []int32{7, 1, 1}}}}, "a1 a7! zz!ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION NONE"},
	} {
		if got := page(s.DescribeTopicPartitions(c.req, 1000)); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
	// limit 5000 → pages of 1000.
	big := describeState(t, map[string]int{"x": 2500})
	r = big.DescribeTopicPartitions(&twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 5000}, 1000)
	if n := len(r.GetTopics()[0].GetPartitions()); n != 1000 || r.GetNextCursor().GetPartitionIndex() != 1000 {
		t.Fatalf("%d partitions, cursor %v", n, r.GetNextCursor())
	}
}

// leaderId −1 if the leader is not alive; offlineReplicas = fenced replicas.
func TestDescribeLeaderAndOffline(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), ids(3), m2, part(ids(1, 2, 3), 1, ids(1, 2), nil, nil, -1, 2, 2))
	// A broker's copy may lag: here broker 1 is fenced in the image but still
	// recorded as leader (built directly, as a broker's metadata could be).
	snap := h.s.Snapshot()
	snap.Brokers[0].Fenced = true
	b := FromSnapshot(snap, Config{})
	r := b.DescribeTopicPartitions(&twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 10}, 0)
	p := r.GetTopics()[0].GetPartitions()[0]
	if p.GetLeaderId() != -1 || !cmp.Equal(p.GetOfflineReplicas(), ids(1, 3)) || p.GetLeaderEpoch() != 2 {
		t.Fatal(p)
	}
}

// TestDescribeAuthorized (SPEC §5 with authorization): topics the caller
// may not describe are skipped when all are asked for — before paging, so
// the cursor names the next describable topic and the limit counts only
// describable partitions — and a listed one is a TOPIC_AUTHORIZATION_FAILED
// entry whether it exists or not.
func TestDescribeAuthorized(t *testing.T) {
	s := describeState(t, map[string]int{"a": 2, "b": 2, "c": 1, "d": 1})
	notB := func(topic string) bool { return topic != "b" && topic != "zz" }
	var pages []string
	req := &twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 2}
	for range 10 {
		r := s.DescribeTopicPartitionsFor(req, 1000, notB)
		pages = append(pages, page(r))
		if r.GetNextCursor() == nil {
			break
		}
		req.Cursor = r.GetNextCursor()
	}
	if diff := cmp.Diff([]string{"a0 a1 next(c,0) REQUEST_LIMIT_REACHED", "c0 d0 NONE"}, pages); diff != "" {
		t.Fatal(diff)
	}
	listed := &twinlogv1.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 100, Topics: []*twinlogv1.DescribeTopicPartitionsTopic{
		{Name: "b"}, {Name: "zz"}, {Name: "c"}}}
	if got := page(s.DescribeTopicPartitionsFor(listed, 1000, notB)); got != "b!ERROR_CODE_TOPIC_AUTHORIZATION_FAILED c0 zz!ERROR_CODE_TOPIC_AUTHORIZATION_FAILED NONE" {
		t.Fatal(got)
	}
	if got := page(s.DescribeTopicPartitionsFor(listed, 1000, nil)); got != "b0 b1 c0 zz!ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION NONE" {
		t.Fatal(got)
	}
}
