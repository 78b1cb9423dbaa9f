package brokertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
)

// TestRetention: retention.bytes trims the leader's and the followers'
// logs, each below its own HW, retention.ms=0 keeps only the active
// segment, and a topic without either keeps everything
// (the brokers' log.retention.* are unbounded here). A consumer below the
// new log start gets OFFSET_OUT_OF_RANGE with it; a follower that was down
// while the leader's log start passed its log end restarts its log at the
// leader's log start, catches up and rejoins the ISR, and holds the same
// batches as the leader from there.
func TestRetention(t *testing.T) {
	c := NewCluster(t, Options{MinISR: 2, Configure: func(cfg *broker.Config) {
		cfg.Log.SegmentMaxBytes = 2048
		cfg.LogRetentionCheckInterval = 20 * time.Millisecond
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const trimmed, kept = "trimmed", "kept"
	const limit = 6000
	c.CreateTopic(trimmed, 1, 3, map[string]string{"retention.bytes": fmt.Sprint(limit)})
	c.CreateTopic(kept, 1, 3, nil)
	c.CreateTopic("nothing-kept", 1, 3, map[string]string{"retention.ms": "0"})
	tpT, tpK := twinlog.TopicPartition{Topic: trimmed}, twinlog.TopicPartition{Topic: kept}

	produce := func(topic string, batches int) {
		for i := range batches {
			produceKeyed(ctx, t, c, topic, []keyed{{value: fmt.Appendf(nil, "%d-%s", i, strings.Repeat("x", 300))}})
		}
	}
	leader, _ := c.Leader(trimmed, 0)
	follower := twinlog.BrokerID(1)
	if follower == leader {
		follower = 2
	}
	produce(trimmed, 5)
	produce(kept, 60)
	c.StopBroker(follower)
	produce(trimmed, 60)

	status := func(id twinlog.BrokerID, tp twinlog.TopicPartition) broker.PartitionStatus {
		st, _ := c.Broker(id).PartitionStatus(tp)
		return st
	}
	size := func(id twinlog.BrokerID) int64 {
		bs, err := c.Broker(id).LocalBatches(tpT)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, b := range bs {
			n += int64(b.Size())
		}
		return n
	}
	// What stays is the limit plus at most a segment: a segment goes only
	// if the rest still holds retention.bytes.
	for _, id := range c.IDs() {
		if id == follower {
			continue
		}
		c.WaitFor(fmt.Sprintf("broker %d trimmed its log to retention.bytes", id), func() bool {
			return status(id, tpT).LogStartOffset > 5 && size(id) <= limit+2048
		})
	}
	// retention.ms=0 (Kafka's "keep nothing"): every closed segment goes.
	produce("nothing-kept", 20)
	zl, _ := c.Leader("nothing-kept", 0)
	c.WaitFor("retention.ms=0 deleted every closed segment", func() bool {
		st := status(zl, twinlog.TopicPartition{Topic: "nothing-kept"})
		bs, err := c.Broker(zl).LocalBatches(twinlog.TopicPartition{Topic: "nothing-kept"})
		var n int
		for _, b := range bs {
			n += b.Size()
		}
		return err == nil && st.LogStartOffset > 0 && n <= 2048
	})
	start := status(leader, tpT).LogStartOffset
	for _, id := range c.IDs() {
		if id != follower {
			if s := status(id, tpK).LogStartOffset; s != 0 {
				t.Fatalf("broker %d: the topic without retention.bytes starts at %d", id, s)
			}
		}
	}

	_, le := c.Leader(trimmed, 0)
	resp, err := c.FetchClient(leader).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
		MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: trimmed, FetchOffset: 0, CurrentLeaderEpoch: int32(le), LastFetchedEpoch: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if pr := resp.GetPartitions()[0]; pr.GetError() != pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE || twinlog.Offset(pr.GetLogStartOffset()) < start {
		t.Fatalf("consumer fetch at 0: %v, log start %d; want OFFSET_OUT_OF_RANGE, log start ≥ %d", pr.GetError(), pr.GetLogStartOffset(), start)
	}

	c.RestartBroker(follower)
	c.WaitFor("the restarted follower back in the ISR", func() bool {
		_, _, isr, _, ok := c.PartitionInfo(trimmed, 0)
		return ok && len(isr) == 3
	})
	produce(trimmed, 1)
	c.WaitFor("the follower caught up", func() bool {
		return status(follower, tpT).LogEndOffset == status(leader, tpT).LogEndOffset
	})
	if s := status(follower, tpT).LogStartOffset; s < start {
		t.Fatalf("restarted follower starts at %d, below the leader's log start %d when it was down", s, start)
	}
	lb, err := c.Broker(leader).LocalBatches(tpT)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := c.Broker(follower).LocalBatches(tpT)
	if err != nil {
		t.Fatal(err)
	}
	byBase := map[twinlog.Offset]string{}
	for _, b := range lb {
		byBase[b.BaseOffset()] = string(b)
	}
	for _, b := range fb {
		if w, ok := byBase[b.BaseOffset()]; ok && w != string(b) {
			t.Fatalf("batch %d differs between leader and follower", b.BaseOffset())
		}
	}
	if len(fb) == 0 || fb[len(fb)-1].BaseOffset() != lb[len(lb)-1].BaseOffset() {
		t.Fatalf("follower batches end at %v, leader at %v", fb[len(fb)-1].BaseOffset(), lb[len(lb)-1].BaseOffset())
	}
}

// TestMirrorOfTrimmedSource: a mirror of a source whose retention already
// deleted its first segments starts its copy at the source's log start
// (the source answers the destination's fetch at 0 with
// OFFSET_OUT_OF_RANGE, SPEC §6.3): the destination's leader and followers
// then hold exactly the source's batches, at the same offsets, and new
// records follow.
func TestMirrorOfTrimmedSource(t *testing.T) {
	a, b, _, _ := twoObservedClusters(t, Options{Configure: func(cfg *broker.Config) {
		cfg.Log.SegmentMaxBytes = 2048
		cfg.LogRetentionCheckInterval = 20 * time.Millisecond
	}}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, map[string]string{"retention.bytes": "4000"})
	for i := range 40 {
		produceKeyed(ctx, t, a, "t", []keyed{{value: fmt.Appendf(nil, "%d-%s", i, strings.Repeat("x", 300))}})
	}
	leader, _ := a.Leader("t", 0)
	a.WaitFor("the source trimmed its log", func() bool {
		st, _ := a.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: "t"})
		return st.LogStartOffset > 0
	})
	// Retention off from here: the source's log start stays put while the
	// destination copies (the mirror copies retention.bytes=-1 with it).
	resp, err := a.Admin().AlterConfigs(ctx, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
		Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"},
		Set:      map[string]string{"retention.bytes": "-1"},
	}}})
	if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("AlterConfigs: %v %v", resp, err)
	}
	a.WaitFor("every source broker saw retention.bytes=-1", func() bool {
		for _, id := range a.IDs() {
			if a.Broker(id).MetadataOffset() < a.Controller().Offset() {
				return false
			}
		}
		return true
	})
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	produceKeyed(ctx, t, a, "t", []keyed{{value: []byte("after")}})
	want := a.LeaderLog("t", 0)
	waitLog(b, "t", want)
	waitReplicasIdentical(b, "t", want)
	srcStart := func() twinlog.Offset {
		st, _ := a.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: "t"})
		return st.LogStartOffset
	}()
	bl, _ := b.Leader("t", 0)
	if st, _ := b.Broker(bl).PartitionStatus(twinlog.TopicPartition{Topic: "t"}); st.LogStartOffset != srcStart || srcStart == 0 {
		t.Fatalf("destination log starts at %d, source at %d", st.LogStartOffset, srcStart)
	}
}

// TestTopicSegmentBytes: a topic's segment.bytes rolls its segments on
// brokers whose log.segment.bytes is the 1 GiB default, seen through
// retention.bytes, which deletes whole segments only.
func TestTopicSegmentBytes(t *testing.T) {
	c := NewCluster(t, Options{Configure: func(cfg *broker.Config) { cfg.LogRetentionCheckInterval = 20 * time.Millisecond }})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic("small-segments", 1, 3, map[string]string{"segment.bytes": "2048", "retention.bytes": "4000"})
	for i := range 40 {
		produceKeyed(ctx, t, c, "small-segments", []keyed{{value: fmt.Appendf(nil, "%d-%s", i, strings.Repeat("x", 300))}})
	}
	leader, _ := c.Leader("small-segments", 0)
	c.WaitFor("the leader deleted 2 KiB segments", func() bool {
		st, _ := c.Broker(leader).PartitionStatus(twinlog.TopicPartition{Topic: "small-segments"})
		return st.LogStartOffset > 0
	})
}
