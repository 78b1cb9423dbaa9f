package brokertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Issue 13, "Refuse what would destroy data": a mirror never erases the
// records of the topic it would write, whether an operator names the wrong
// topic or the source loses it.

// waitReplicasLog waits until every replica of c's topic-0 holds exactly want
// (LogString); it fails the test after 30 s.
func waitReplicasLog(c *Cluster, topic, want string) {
	c.T.Helper()
	c.WaitFor(topic+" replicas hold "+want, func() bool {
		for _, id := range c.IDs() {
			if c.LogString(id, topic, 0) != want {
				return false
			}
		}
		return true
	})
}

// checkReplicas fails the test unless every replica of c's topic-0 holds
// exactly want right now.
func checkReplicas(t *testing.T, c *Cluster, topic, want string) {
	t.Helper()
	for _, id := range c.IDs() {
		if got := c.LogString(id, topic, 0); got != want {
			t.Fatalf("%s broker %d %s-0 holds %q, want %q", c.Name, id, topic, got, want)
		}
	}
}

// TestMirrorCreateRefusesLocalTopic is the first case of issue 13: `mirrors
// create oops --source A orders` where orders is a local topic of B with
// records and A has no such topic. CreateMirror fails with
// UNKNOWN_TOPIC_OR_PARTITION, no mirror (and no __mirror_state) exists
// afterwards, and B's orders keeps every record on every replica and stays
// writable. A local topic that A has under another topic id (a different
// topic of the same name) is refused with INCONSISTENT_TOPIC_ID alike.
func TestMirrorCreateRefusesLocalTopic(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	b.CreateTopic("orders", 1, 3, nil)
	produceN(ctx, b, "orders", 3, "b")
	want := b.LeaderLog("orders", 0)
	waitReplicasLog(b, "orders", want)
	a.CreateTopic("other", 1, 3, nil)
	b.CreateTopic("other", 1, 3, nil)
	produceN(ctx, b, "other", 2, "b")
	wantOther := b.LeaderLog("other", 0)
	waitReplicasLog(b, "other", wantOther)

	for _, tc := range []struct {
		topic string
		want  pb.ErrorCode
	}{
		{"orders", pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
		{"other", pb.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID},
	} {
		resp, err := b.MirrorAdmin().CreateMirror(ctx, &pb.CreateMirrorRequest{Name: "oops", SourceBootstrap: a.BootstrapAddrs(), Topics: []string{tc.topic}})
		if err != nil || resp.GetError() != tc.want || len(resp.GetTopics()) != 1 || resp.GetTopics()[0].GetError() != tc.want {
			t.Fatalf("CreateMirror of local %s = %v, %v; want %v", tc.topic, resp, err, tc.want)
		}
		if _, err := b.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"oops"}}); grpcstatus.Code(err) != codes.NotFound {
			t.Fatalf("refused CreateMirror left mirror oops behind: %v", err)
		}
	}
	md, err := b.FetchClient(b.IDs()[0]).Metadata(ctx, &pb.MetadataRequest{Topics: []string{"__mirror_state"}})
	if err != nil || md.GetTopics()[0].GetError() != pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("refused CreateMirror created __mirror_state: %v %v", md, err)
	}
	checkReplicas(t, b, "orders", want)
	checkReplicas(t, b, "other", wantOther)
	if off := b.MustProduce(ctx, "orders", 0, -1, []byte("b-after")); off != 3 {
		t.Fatalf("produce to orders at %d, want 3", off)
	}
}

// sourceLost mirrors topic t2 (3 records) from A to B, lets lose make A
// lose it, and checks the second case of issue 13: B's partition goes
// FAILED, and over several retries keeps every record on every replica at
// an unchanged leader epoch, read-only, with a lastError (in the runner's
// status and in DescribeMirrors) that says why and contains wantCode; a
// Stop then makes it writable with all its records.
func sourceLost(t *testing.T, lose func(ctx context.Context, a *Cluster), wantCode pb.ErrorCode) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	a.CreateTopic("t2", 1, 3, nil)
	produceN(ctx, a, "t2", 3, "a")
	b.CreateMirror("m", a, "t2")
	b.WaitMirrorState("t2", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	want := a.LeaderLog("t2", 0)
	waitLog(b, "t2", want)
	waitReplicasLog(b, "t2", want)
	_, le, _, _, _ := b.PartitionInfo("t2", 0)

	lose(ctx, a)

	var st *pb.MirrorPartitionStatus
	pollFor(t, "B's t2-0 FAILED with retries", func() bool {
		st = b.MirrorState("t2", 0)
		return st.GetState() == pb.MirrorState_MIRROR_STATE_FAILED && st.GetRetryCount() >= 3 &&
			strings.Contains(st.GetLastError(), wantCode.String())
	})
	if !strings.Contains(st.GetLastError(), "records kept") || !strings.Contains(st.GetLastError(), "stop the mirror topic") {
		t.Fatalf("lastError %q does not say why or what to do", st.GetLastError())
	}
	checkReplicas(t, b, "t2", want)
	if _, now, _, _, _ := b.PartitionInfo("t2", 0); now != le {
		t.Fatalf("leader epoch %d after the source lost the topic, was %d: retries must not bump", now, le)
	}
	pollFor(t, "DescribeMirrors says why", func() bool {
		d, err := b.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"m"}})
		return err == nil && len(d.GetMirrors()) == 1 && len(d.GetMirrors()[0].GetPartitions()) == 1 &&
			strings.Contains(d.GetMirrors()[0].GetPartitions()[0].GetLastError(), "records kept")
	})
	leader, _ := b.Leader("t2", 0)
	if r, err := b.ProduceTo(ctx, leader, "t2", 0, -1, time.Second, []byte("b-x")); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		t.Fatalf("produce to the FAILED mirror partition: %v %v", r, err)
	}
	// More retry cycles: still nothing lost, no epoch ratchet.
	retries := st.GetRetryCount()
	pollFor(t, "two more retries", func() bool { return b.MirrorState("t2", 0).GetRetryCount() >= retries+2 })
	checkReplicas(t, b, "t2", want)
	if _, now, _, _, _ := b.PartitionInfo("t2", 0); now != le {
		t.Fatalf("leader epoch %d after more retries, was %d", now, le)
	}

	// The operator's way out: stop makes it writable with every record.
	mustStop(b, "m", "t2")
	if off := b.MustProduce(ctx, "t2", 0, -1, []byte("b-after-stop")); off != 3 {
		t.Fatalf("first produce after stop at %d, want 3", off)
	}
	recs, _ := b.ConsumeAll(ctx, "t2", 0)
	if len(recs) != 4 || string(recs[0].Value) != "a0" || string(recs[2].Value) != "a2" || string(recs[3].Value) != "b-after-stop" {
		t.Fatalf("B's t2 after stop: %v", recs)
	}
}

// TestMirrorSourceTopicDeletedKeepsRecords: `topics delete t2` on A while B
// mirrors it (issue 13's third case) used to make every retry start over
// with LMLE −1, truncating B's copy to nothing and bumping its epoch.
func TestMirrorSourceTopicDeletedKeepsRecords(t *testing.T) {
	sourceLost(t, func(ctx context.Context, a *Cluster) {
		if resp, err := a.Admin().DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{"t2"}}); err != nil ||
			resp.GetTopics()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("DeleteTopics: %v %v", resp, err)
		}
	}, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION)
}

// TestMirrorSourceTopicRecreatedKeepsRecords: A deletes t2 and creates a new
// t2 (another topic id) with records of its own; B's copy of the old t2 is
// kept (INCONSISTENT_TOPIC_ID), never replaced by the new topic's log.
func TestMirrorSourceTopicRecreatedKeepsRecords(t *testing.T) {
	sourceLost(t, func(ctx context.Context, a *Cluster) {
		if resp, err := a.Admin().DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{"t2"}}); err != nil ||
			resp.GetTopics()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("DeleteTopics: %v %v", resp, err)
		}
		a.CreateTopic("t2", 1, 3, nil)
		produceN(ctx, a, "t2", 5, "n")
	}, pb.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID)
}

// TestMirrorFetchChecksTopicID: a Fetch{MIRROR} naming another topic id than
// the source's (a topic re-created between the requester's Metadata and its
// fetch) is answered INCONSISTENT_TOPIC_ID with no records, not
// OFFSET_OUT_OF_RANGE or a DivergingEpoch from the new topic's log, which
// would make the requester truncate its copy; the right id, or none, is
// served.
func TestMirrorFetchChecksTopicID(t *testing.T) {
	a := NewCluster(t, Options{Cluster: "a"})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	produceN(ctx, a, "t", 2, "a")
	id := topicID(t, a, "t")
	leader, le := a.Leader("t", 0)
	fetch := func(topicID string, offset int64) *pb.FetchPartitionResponse {
		resp, err := a.FetchClient(leader).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_MIRROR,
			MaxBytes: 1 << 20, RequesterClusterId: "b", Partitions: []*pb.FetchPartition{{Topic: "t", Partition: 0, TopicId: topicID,
				FetchOffset: offset, CurrentLeaderEpoch: int32(le), LastFetchedEpoch: -1}}})
		if err != nil || len(resp.GetPartitions()) != 1 {
			t.Fatalf("Fetch{MIRROR}: %v %v", resp, err)
		}
		return resp.GetPartitions()[0]
	}
	for _, tc := range []struct {
		id     string
		offset int64
		want   pb.ErrorCode
	}{
		{id, 0, pb.ErrorCode_ERROR_CODE_NONE},
		{"", 0, pb.ErrorCode_ERROR_CODE_NONE},
		{"old-topic-id", 0, pb.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID},
		{"old-topic-id", 9, pb.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID}, // not OFFSET_OUT_OF_RANGE
	} {
		p := fetch(tc.id, tc.offset)
		if p.GetError() != tc.want || (tc.want != pb.ErrorCode_ERROR_CODE_NONE && len(p.GetRecords()) > 0) {
			t.Fatalf("Fetch{MIRROR} topic id %q offset %d = %v (%d bytes), want %v", tc.id, tc.offset, p.GetError(), len(p.GetRecords()), tc.want)
		}
	}
	// A consumer fetch is not checked (the field is MIRROR's).
	resp, err := a.FetchClient(leader).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
		MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: "t", Partition: 0, TopicId: "old-topic-id", CurrentLeaderEpoch: int32(le), LastFetchedEpoch: -1}}})
	if err != nil || resp.GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("consumer fetch: %v %v", resp, err)
	}
}
