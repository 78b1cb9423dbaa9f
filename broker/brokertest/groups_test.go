package brokertest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/group"
	"github.com/twinlog/twinlog/metadata"
)

// groupOptions is a cluster whose __consumer_offsets has few partitions
// (fewer replicas to start) and whose groups wait 100ms for more members.
func groupOptions() Options {
	return Options{
		MinISR:         2,
		ClusterConfigs: map[string]string{metadata.KeyOffsetsTopicNumPartitions: "5"},
		Configure: func(c *broker.Config) {
			c.Groups.InitialRebalanceDelayMs = 100
		},
	}
}

// kafkaProduceN writes n records "v-0".."v-(n-1)" to topic with franz-go.
func kafkaProduceN(ctx context.Context, t *testing.T, c *Cluster, topic string, n int) {
	t.Helper()
	prod := kafkaClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k-%d", i%13), Value: fmt.Appendf(nil, "v-%d", i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestKafkaConsumerGroupCommitsAndResumes: see groupCommitsAndResumes.
func TestKafkaConsumerGroupCommitsAndResumes(t *testing.T) { groupCommitsAndResumes(t, false) }

// TestKafkaConsumerGroupCoordinatorFailover is groupCommitsAndResumes with
// the group's coordinator killed (kill -9: unsynced bytes lost) between
// the two generations: the partition's new leader loads the group from
// the log and answers the same committed offsets, and the new member
// resumes at them.
func TestKafkaConsumerGroupCoordinatorFailover(t *testing.T) { groupCommitsAndResumes(t, true) }

// groupCommitsAndResumes: three franz-go group members
// (range assignor, commits after each poll, before the rebalance the
// poll blocks) consume part of a topic; no record is read twice, and
// the group's committed offsets (kadm) are where each partition's reads
// stopped. A new member of the same group then resumes at exactly those
// offsets: it reads every remaining record and none that was committed.
// The first FindCoordinator creates __consumer_offsets, and the group's
// state goes through its compacted, replicated partition.
func groupCommitsAndResumes(t *testing.T, killCoordinator bool) {
	c := NewCluster(t, groupOptions())
	c.CreateTopic("g", 3, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n = 600
	kafkaProduceN(ctx, t, c, "g", n)

	type pos struct {
		p int32
		o int64
	}
	var (
		mu     sync.Mutex
		polled = map[string]pos{}
		maxOff = map[int32]int64{}
	)
	note := func(r *kgo.Record) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := polled[string(r.Value)]; dup {
			t.Errorf("record %s read twice (at %d/%d and %d/%d)", r.Value, prev.p, prev.o, r.Partition, r.Offset)
		}
		polled[string(r.Value)] = pos{r.Partition, r.Offset}
		maxOff[r.Partition] = max(maxOff[r.Partition], r.Offset)
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(polled)
	}

	member := func() *kgo.Client {
		return kafkaClient(t, c, kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g"),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.Balancers(kgo.RangeBalancer()), kgo.FetchMaxBytes(4096), kgo.FetchMaxPartitionBytes(1024))
	}
	// The members stop once half the records are read: a member whose
	// partition has no more records is blocked in its poll until then.
	enough, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	members := []*kgo.Client{member(), member(), member()}
	for _, cl := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for enough.Err() == nil {
				fs := cl.PollRecords(enough, 10)
				fs.EachError(func(topic string, p int32, err error) {
					if enough.Err() == nil {
						t.Errorf("fetch %s-%d: %v", topic, p, err)
					}
				})
				recs := fs.Records()
				for _, r := range recs {
					note(r)
				}
				if len(recs) > 0 {
					// Committed with the test's context: the records read
					// are committed even once enough were read.
					if err := cl.CommitRecords(ctx, recs...); err != nil {
						t.Errorf("commit: %v", err)
					}
				}
				cl.AllowRebalance()
				if count() >= n/2 {
					stop()
				}
			}
		}()
	}
	wg.Wait()
	for _, cl := range members {
		cl.Close() // LeaveGroup
	}
	if t.Failed() || ctx.Err() != nil {
		t.Fatalf("first generation: %v", ctx.Err())
	}
	read := count()
	if read < n/2 || read >= n {
		t.Fatalf("first members read %d records, want at least %d and not all %d", read, n/2, n)
	}

	adm := kadm.NewClient(kafkaClient(t, c))
	offs, err := adm.FetchOffsets(ctx, "grp")
	if err != nil {
		t.Fatal(err)
	}
	committed := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("committed offset %s-%d: %v", o.Topic, o.Partition, o.Err)
		}
		committed[o.Partition] = o.At
	})
	mu.Lock()
	for p, m := range maxOff {
		if committed[p] != m+1 {
			t.Errorf("partition %d: committed %d, reads stopped after %d", p, committed[p], m)
		}
	}
	mu.Unlock()
	if t.Failed() {
		t.FailNow()
	}
	coordinator := func() int32 {
		fc := adm.FindGroupCoordinators(ctx, "grp")["grp"]
		if fc.Err != nil {
			t.Fatalf("FindCoordinator(grp): %v", fc.Err)
		}
		return fc.NodeID
	}
	if killCoordinator {
		old := coordinator()
		c.KillBroker(twinlog.BrokerID(old))
		c.WaitFor("a new coordinator", func() bool {
			l, _ := c.Leader(metadata.ConsumerOffsetsTopic, group.PartitionFor("grp", 5))
			return l >= 0 && int32(l) != old
		})
		// A client keeps the coordinator it found until a request fails
		// with a coordinator error (kgo does not forget one it cannot
		// dial): ask with a new one.
		adm = kadm.NewClient(kafkaClient(t, c))
		var offs kadm.OffsetResponses
		c.WaitFor("the group's offsets from its new coordinator", func() bool {
			var err error
			offs, err = adm.FetchOffsets(ctx, "grp")
			if err != nil {
				t.Logf("fetch offsets: %v", err)
			}
			return err == nil
		})
		reloaded := map[int32]int64{}
		offs.Each(func(o kadm.OffsetResponse) { reloaded[o.Partition] = o.At })
		if !maps.Equal(reloaded, committed) {
			t.Fatalf("after failover the group's offsets are %v, committed %v", reloaded, committed)
		}
	}

	// A new member resumes at the committed offsets.
	next := member()
	for count() < n && ctx.Err() == nil {
		fs := next.PollRecords(ctx, 100)
		for _, r := range fs.Records() {
			if r.Offset < committed[r.Partition] {
				t.Fatalf("resumed member read %d/%d below the committed offset %d", r.Partition, r.Offset, committed[r.Partition])
			}
			note(r)
		}
		next.AllowRebalance()
	}
	if got := count(); got != n {
		t.Fatalf("read %d distinct records of %d: %v", got, n, ctx.Err())
	}
	info, err := adm.DescribeGroups(ctx, "grp")
	if err != nil {
		t.Fatal(err)
	}
	if g := info["grp"]; g.State != "Stable" || len(g.Members) != 1 {
		t.Fatalf("group %+v, want Stable with the one resumed member", g)
	}
	// The coordinator is the leader of the group's partition, as every
	// Kafka client computes it.
	leader, _ := c.Leader(metadata.ConsumerOffsetsTopic, group.PartitionFor("grp", 5))
	if got := coordinator(); got != int32(leader) {
		t.Fatalf("FindCoordinator(grp) = %d; the leader of its partition is %d", got, leader)
	}
}
