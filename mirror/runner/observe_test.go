package runner

import (
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/plan"
)

// TestViewOf: a mirror topic's view names its mirror, the mirror's
// bootstrap and source cluster, the topic's own desired state and
// generation (not another topic's of the mirror), and the topic's configs;
// a topic in no mirror and an unknown topic give what they have.
func TestViewOf(t *testing.T) {
	img := metadata.New("b")
	if err := img.Apply(&pb.MetadataDelta{Offset: 1,
		Topics: []*pb.TopicRecord{
			{Name: "t", TopicId: "x", PartitionCount: 1, MirrorName: "link",
				Configs: map[string]string{metadata.KeyMinInsyncReplicas: "3", metadata.KeyMirrorSupportUnclean: "true"}},
			{Name: "plain", TopicId: "y", PartitionCount: 1},
		},
		Mirrors: []*pb.MirrorRecord{{Name: "link", SourceBootstrap: []string{"a1:9092", "a2:9092"}, SourceClusterId: "A",
			Topics: []*pb.MirrorTopicRecord{
				{Topic: "other", DesiredState: pb.MirrorState_MIRROR_STATE_PAUSED, Generation: 9},
				{Topic: "t", DesiredState: pb.MirrorState_MIRROR_STATE_STOPPED, Generation: 4},
			}}},
	}); err != nil {
		t.Fatal(err)
	}
	v := ViewOf(img, "t")
	want := plan.Desired{SourceClusterID: "A", State: pb.MirrorState_MIRROR_STATE_STOPPED, Generation: 4}
	if v.Mirror != "link" || !slices.Equal(v.Bootstrap, []string{"a1:9092", "a2:9092"}) || v.Desired != want || v.MinISR != 3 || !v.SupportUnclean {
		t.Fatalf("view %+v", v)
	}
	st := v.Status(plan.ReplicaStatus{ISR: []twinlog.BrokerID{1}})
	if st.MinInsyncReplicas != 3 || !st.SupportUncleanLeaderElection || !slices.Equal(st.ISR, []twinlog.BrokerID{1}) {
		t.Fatalf("status %+v", st)
	}
	if p := ViewOf(img, "plain"); p.Mirror != "" || p.Desired != (plan.Desired{}) || p.SupportUnclean {
		t.Fatalf("plain topic: %+v", p)
	}
	if u := ViewOf(img, "unknown"); u.Mirror != "" || u.MinISR != 0 {
		t.Fatalf("unknown topic: %+v", u)
	}
}

// TestLeaderStatus: the leader's ISR and maximal ISR, the replicas, and an
// aligned epoch only for followers that have one (never the leader itself).
func TestLeaderStatus(t *testing.T) {
	r, err := replica.New(replica.Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}}, replica.LogState{AlignedEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	ids := []twinlog.BrokerID{1, 2, 3}
	r.ApplyPartitionState(replica.PartitionState{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 1, Replicas: ids, ISR: []twinlog.BrokerID{1, 2},
		MinISR: 1, Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1, 3: 1}}, 0)
	st := LeaderStatus(r, ids, 1)
	if !slices.Equal(st.ISR, []twinlog.BrokerID{1, 2}) || !slices.Equal(st.Replicas, ids) || len(st.FollowerAlignedEpoch) != 0 {
		t.Fatalf("status %+v, want ISR [1 2], replicas [1 2 3], no aligned followers yet", st)
	}
}

// TestTruncationPointsOf: every point, in order; none for no record.
func TestTruncationPointsOf(t *testing.T) {
	rec := &pb.PartitionRecord{TruncationPoints: []*pb.TruncationPoint{{LeaderEpoch: 3, Offset: 10}, {LeaderEpoch: 5, Offset: 7}}}
	want := []plan.TruncationPoint{{LeaderEpoch: 3, Offset: 10}, {LeaderEpoch: 5, Offset: 7}}
	if got := TruncationPointsOf(rec); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := TruncationPointsOf(nil); got != nil {
		t.Fatalf("nil record: %v", got)
	}
}
