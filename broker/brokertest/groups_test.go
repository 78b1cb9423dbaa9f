package brokertest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
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
		pollFor(t, "the group's offsets from its new coordinator", func() bool {
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

// TestGroupServiceAdmin: the gRPC GroupService reaches the coordinators
// the Kafka listener uses. FindCoordinator names the broker kadm finds;
// FetchOffsets answers what a franz-go member committed; an
// administrator's CommitOffsets is refused (UNKNOWN_MEMBER_ID) while the
// member is in the group and changes nothing; DescribeGroups shows the
// member with its decoded assignment; once the member left, the commit
// lands (kadm reads it) and DeleteGroups removes the group (no broker
// lists it). Another broker answers NOT_COORDINATOR.
func TestGroupServiceAdmin(t *testing.T) {
	c := NewCluster(t, groupOptions())
	c.CreateTopic("g", 3, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkaProduceN(ctx, t, c, "g", 90)

	member := kafkaClient(t, c, kgo.ConsumerGroup("adm"), kgo.ConsumeTopics("g"), kgo.DisableAutoCommit())
	read := 0
	for read < 90 {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 90: %v", read, ctx.Err())
		}
		read += fs.NumRecords()
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(kafkaClient(t, c))
	kafkaOffsets := func() map[int32]int64 {
		offs, err := adm.FetchOffsets(ctx, "adm")
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]int64{}
		offs.Each(func(o kadm.OffsetResponse) { m[o.Partition] = o.At })
		return m
	}

	fc, err := c.GroupClient(1).FindCoordinator(ctx, &pb.FindCoordinatorRequest{GroupId: "adm"})
	if err != nil || fc.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("FindCoordinator: %v %v", fc, err)
	}
	coord := twinlog.BrokerID(fc.GetNodeId())
	if want := adm.FindGroupCoordinators(ctx, "adm")["adm"].NodeID; int32(coord) != want {
		t.Fatalf("gRPC FindCoordinator %d, kadm %d", coord, want)
	}
	if got := net.JoinHostPort(fc.GetHost(), strconv.Itoa(int(fc.GetPort()))); got != c.Addr(coord) {
		t.Fatalf("coordinator address %s, broker %d is at %s", got, coord, c.Addr(coord))
	}
	gs := c.GroupClient(coord)
	fetch := func() map[int32]int64 {
		r, err := gs.FetchOffsets(ctx, &pb.FetchOffsetsRequest{GroupId: "adm"})
		if err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("FetchOffsets: %v %v", r, err)
		}
		m := map[int32]int64{}
		for _, o := range r.GetOffsets() {
			m[o.GetPartition()] = o.GetOffset()
		}
		return m
	}
	before := fetch()
	if !maps.Equal(before, kafkaOffsets()) || len(before) != 3 {
		t.Fatalf("gRPC offsets %v, Kafka offsets %v", before, kafkaOffsets())
	}

	commit := func() *pb.CommitOffsetsResponse {
		r, err := gs.CommitOffsets(ctx, &pb.CommitOffsetsRequest{GroupId: "adm", Offsets: []*pb.CommittedOffset{
			{Topic: "g", Partition: 0, Offset: 1, LeaderEpoch: -1}, {Topic: "g", Partition: 1, Offset: 2, LeaderEpoch: -1},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, res := range commit().GetResults() {
		if res.GetError() != pb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID {
			t.Fatalf("commit while the member is in the group: %v, want UNKNOWN_MEMBER_ID", res)
		}
	}
	if got := fetch(); !maps.Equal(got, before) {
		t.Fatalf("a refused commit changed the offsets: %v, were %v", got, before)
	}
	desc, err := gs.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: []string{"adm"}})
	if err != nil {
		t.Fatal(err)
	}
	g := desc.GetGroups()[0]
	if g.GetState() != "Stable" || g.GetProtocolType() != "consumer" || len(g.GetMembers()) != 1 {
		t.Fatalf("described %v", g)
	}
	if a := g.GetMembers()[0].GetAssignment(); len(a) != 1 || a[0].GetTopic() != "g" || len(a[0].GetPartitions()) != 3 {
		t.Fatalf("member assignment %v, want g's 3 partitions", a)
	}

	member.Close() // LeaveGroup: the group is Empty
	for _, res := range commit().GetResults() {
		if res.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("commit to the empty group: %v", res)
		}
	}
	want := maps.Clone(before)
	want[0], want[1] = 1, 2
	if got := kafkaOffsets(); !maps.Equal(got, want) {
		t.Fatalf("after the commit Kafka reads %v, want %v", got, want)
	}

	other := coord%3 + 1
	dr, err := c.GroupClient(other).DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"adm"}})
	if err != nil || dr.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NOT_COORDINATOR {
		t.Fatalf("DeleteGroups on broker %d (not the coordinator): %v %v", other, dr, err)
	}
	dr, err = gs.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{"adm"}})
	if err != nil || dr.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("DeleteGroups: %v %v", dr, err)
	}
	for _, id := range c.IDs() {
		lr, err := c.GroupClient(id).ListGroups(ctx, &pb.ListGroupsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, lg := range lr.GetGroups() {
			if lg.GetGroupId() == "adm" {
				t.Fatalf("broker %d still lists the deleted group: %v", id, lg)
			}
		}
	}
}

// groupMirrorClusters are A and B on one network, both with groupOptions
// and the offset sync interval, and B mirroring A's 3-partition topic g.
func groupMirrorClusters(t *testing.T, syncInterval time.Duration) (a, b *Cluster) {
	nw := NewNetwork()
	opts := func(name string) Options {
		o := groupOptions()
		o.Cluster, o.Network = name, nw
		o.ClusterConfigs[metadata.KeyMirrorOffsetSyncIntervalMs] = strconv.FormatInt(syncInterval.Milliseconds(), 10)
		return o
	}
	a, b = NewCluster(t, opts("a")), NewCluster(t, opts("b"))
	a.CreateTopic("g", 3, 3, map[string]string{metadata.KeyMinInsyncReplicas: "2"})
	b.CreateMirror("m", a, "g")
	for p := range int32(3) {
		b.WaitMirrorState("g", p, pb.MirrorState_MIRROR_STATE_MIRRORING)
	}
	return a, b
}

// consumeAndCommit has one franz-go member of group consume topic from its
// committed offsets (or the start) until it has read exactly want
// records, committing after each poll, then leave; it records every record in seen and fails
// on a record read twice or one below the offset the group had committed.
func consumeAndCommit(ctx context.Context, t *testing.T, c *Cluster, grp string, want int, seen map[string]bool, below map[int32]int64) {
	t.Helper()
	cl := kafkaClient(t, c, kgo.ConsumerGroup(grp), kgo.ConsumeTopics("g"), kgo.DisableAutoCommit(),
		kgo.FetchMaxBytes(2048), kgo.FetchMaxPartitionBytes(512))
	defer cl.Close()
	read := 0
	for read < want && ctx.Err() == nil {
		fs := cl.PollRecords(ctx, want-read) // exactly want: the rest stays for the next reader
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Fatalf("fetch %s-%d: %v", topic, p, err)
			}
		})
		for _, r := range fs.Records() {
			if seen[string(r.Value)] {
				t.Fatalf("%s read %s (%d/%d) again", c.Name, r.Value, r.Partition, r.Offset)
			}
			if r.Offset < below[r.Partition] {
				t.Fatalf("%s: group resumed at %d/%d, below its committed %d", c.Name, r.Partition, r.Offset, below[r.Partition])
			}
			seen[string(r.Value)] = true
			read++
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit on %s: %v", c.Name, err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("%s: read %d of %d: %v", c.Name, read, want, ctx.Err())
	}
}

// groupOffsets are a group's committed offsets on c (kadm, a new client).
func groupOffsets(ctx context.Context, t *testing.T, c *Cluster, grp string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, c))
	var offs kadm.OffsetResponses
	// A cluster's first FindCoordinator creates __consumer_offsets: the
	// coordinator is not available for a moment (a retriable error).
	pollFor(t, "the group's coordinator on "+c.Name, func() bool {
		var err error
		offs, err = adm.FetchOffsets(ctx, grp)
		if err != nil && !kerr.IsRetriable(err) {
			t.Fatalf("offsets of %s on %s: %v", grp, c.Name, err)
		}
		return err == nil
	})
	m := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) { m[o.Partition] = o.At })
	return m
}

// firstOffsetSync waits for the sync a mirror's controller runs as soon as
// it sees the mirror (the interval counts from there).
func firstOffsetSync(ctx context.Context, t *testing.T, c *Cluster, mirror string) {
	t.Helper()
	pollFor(t, "the first offset sync of "+mirror, func() bool {
		d, err := c.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{mirror}})
		return err == nil && len(d.GetMirrors()) == 1 && d.GetMirrors()[0].GetOffsetSync().GetSyncedAtMs() != 0
	})
}

// TestKafkaGroupResumesAfterFailover: a franz-go group consumes part of a
// mirrored topic on A and commits; the periodic sync is off (1 h) and its
// first run, when the mirror appeared, is over before any commit, so only
// the stop's own last sync can carry the offsets: before the planned
// failover B has none, after `mirrors stop --wait-for-catch-up` B's group
// has exactly A's committed offsets, and a member of the same group on B
// reads every remaining record and none that A's members had read.
func TestKafkaGroupResumesAfterFailover(t *testing.T) {
	a, b := groupMirrorClusters(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	firstOffsetSync(ctx, t, b, "m")
	const n = 600
	kafkaProduceN(ctx, t, a, "g", n)
	seen := map[string]bool{}
	consumeAndCommit(ctx, t, a, "app", n/2, seen, nil)
	onA := groupOffsets(ctx, t, a, "app")
	if len(onA) == 0 {
		t.Fatal("no committed offsets on A")
	}
	if got := groupOffsets(ctx, t, b, "app"); len(got) != 0 {
		t.Fatalf("B has offsets %v before the stop, with the periodic sync off", got)
	}
	for _, r := range b.StopMirror("m", true, 30*time.Second, "g") {
		if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("stop: %v", r)
		}
	}
	onB := groupOffsets(ctx, t, b, "app")
	if !maps.Equal(onB, onA) {
		t.Fatalf("after the failover B's group offsets are %v, A committed %v", onB, onA)
	}
	consumeAndCommit(ctx, t, b, "app", n-len(seen), seen, onB)
	if len(seen) != n {
		t.Fatalf("read %d distinct records of %d", len(seen), n)
	}
}

// TestMirrorOffsetSyncPeriodic (conditions on the controller's syncs, which
// no broker change announces, are polled): with a 100 ms sync, a group's offsets
// committed on A reach B while the topic is mirrored, and DescribeMirrors
// reports the sync. A group with a member on B is left alone: its own
// commits on B stay while syncs count it active; once the member left,
// the next sync brings A's offsets.
func TestMirrorOffsetSyncPeriodic(t *testing.T) {
	a, b := groupMirrorClusters(t, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n = 300
	kafkaProduceN(ctx, t, a, "g", n)
	consumeAndCommit(ctx, t, a, "app", n/3, map[string]bool{}, nil)
	onA := groupOffsets(ctx, t, a, "app")
	pollFor(t, "A's offsets of app synced to B", func() bool { return maps.Equal(groupOffsets(ctx, t, b, "app"), onA) })
	desc, err := b.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.GetMirrors()[0].GetOffsetSync(); st.GetGroups() < 1 || st.GetSyncedAtMs() == 0 || st.GetError() != "" {
		t.Fatalf("offset sync status %v", st)
	}

	// "shared" commits a third on A, which the sync brings to B; then a
	// member of "shared" on B reads the rest from there, commits and stays
	// in the group.
	consumeAndCommit(ctx, t, a, "shared", n/3, map[string]bool{}, nil)
	sharedOnA := groupOffsets(ctx, t, a, "shared")
	pollFor(t, "B's copy of g caught up", func() bool {
		for p := range int32(3) {
			if st := b.MirrorState("g", p); st == nil || st.GetLagRecords() != 0 {
				return false
			}
		}
		return true
	})
	pollFor(t, "A's offsets of shared synced to B", func() bool { return maps.Equal(groupOffsets(ctx, t, b, "shared"), sharedOnA) })
	rest := n
	for _, o := range sharedOnA {
		rest -= int(o)
	}
	member := kafkaClient(t, b, kgo.ConsumerGroup("shared"), kgo.ConsumeTopics("g"), kgo.DisableAutoCommit())
	for read := 0; read < rest; {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("member on B read %d of the %d after the synced offsets", read, rest)
		}
		read += fs.NumRecords()
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	ownOnB := groupOffsets(ctx, t, b, "shared")
	if maps.Equal(ownOnB, sharedOnA) {
		t.Fatalf("the member on B committed %v, the same as A's: the test proves nothing", ownOnB)
	}
	// Two syncs that saw the member (the first may have begun before it
	// joined): B's offsets are still the member's.
	activeSyncs := func() int32 {
		d, err := b.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"m"}})
		if err != nil {
			t.Fatal(err)
		}
		return d.GetMirrors()[0].GetOffsetSync().GetGroupsActiveOnDestination()
	}
	var seenAt []int64
	pollFor(t, "two syncs that found shared active on B", func() bool {
		d, _ := b.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"m"}})
		st := d.GetMirrors()[0].GetOffsetSync()
		if st.GetGroupsActiveOnDestination() >= 1 && !slices.Contains(seenAt, st.GetSyncedAtMs()) {
			seenAt = append(seenAt, st.GetSyncedAtMs())
		}
		return len(seenAt) >= 2
	})
	if got := groupOffsets(ctx, t, b, "shared"); !maps.Equal(got, ownOnB) {
		t.Fatalf("a sync overwrote the active group on B: %v, its member committed %v", got, ownOnB)
	}
	member.Close() // LeaveGroup: shared is empty on B
	// A's offsets replace B's; B's offsets of partitions A has none of stay
	// (a sync never deletes).
	want := maps.Clone(ownOnB)
	maps.Copy(want, sharedOnA)
	pollFor(t, "A's offsets of shared synced once B's member left", func() bool {
		return activeSyncs() == 0 && maps.Equal(groupOffsets(ctx, t, b, "shared"), want)
	})
}

// TestGroupOffsetsAfterFailbackTruncation: a group on A committed offset 8
// (with the epoch of the record it read last) of records B never copied:
// A was cut off. B fails over and writes its own offsets 5 and 6; A fails
// back (mirrors B), truncates to 5 and copies B's records. A's offset sync
// asks A's leader, as a KIP-320 consumer would, where the commit's epoch
// ends now (5) and moves the group there: a member then reads B's two
// records at 5 and 6 instead of skipping them. A group committed below the
// truncation point is left as it was. A group ("held") that committed 8
// too but still has a member when the sync passes is left to that member;
// once it leaves without committing, a later sync moves the group as well
// (a pass that left such a group does not count as done).
func TestGroupOffsetsAfterFailbackTruncation(t *testing.T) {
	nw := NewNetwork()
	opts := func(name string) Options {
		o := groupOptions()
		o.Cluster, o.Network, o.MinISR = name, nw, 1
		o.ClusterConfigs[metadata.KeyMirrorOffsetSyncIntervalMs] = "100"
		return o
	}
	a, b := NewCluster(t, opts("a")), NewCluster(t, opts("b"))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("g", 1, 3, nil)
	writes(ctx, a, "g", "a0", "a1", "a2", "a3", "a4")
	b.CreateMirror("m", a, "g")
	b.WaitMirrorState("g", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	pollFor(t, "B caught up", func() bool { return b.LogEndOffset(b.leaderOf("g"), "g", 0) == 5 })
	consumeAndCommit(ctx, t, a, "early", 3, map[string]bool{}, nil)

	a.Unreachable(b)
	writes(ctx, a, "g", "a5", "a6", "a7")
	consumeAndCommit(ctx, t, a, "app", 8, map[string]bool{}, nil)
	if got := groupOffsets(ctx, t, a, "app"); got[0] != 8 {
		t.Fatalf("app committed %v on A, want 8", got)
	}
	consumeAndCommit(ctx, t, a, "held", 8, map[string]bool{}, nil)
	// A member of held joins and stays (it commits nothing).
	holder := kafkaClient(t, a, kgo.ConsumerGroup("held"), kgo.ConsumeTopics("g"), kgo.DisableAutoCommit())
	pctx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			holder.PollFetches(pctx)
		}
	}()
	adm := kadm.NewClient(kafkaClient(t, a))
	pollFor(t, "held has a member on A", func() bool {
		ds, err := adm.DescribeGroups(ctx, "held")
		return err == nil && len(ds["held"].Members) == 1
	})

	mustStop(b, "m", "g")
	writes(ctx, b, "g", "b5", "b6")
	a.Reachable(b)
	a.CreateMirror("back", b, "g")
	a.WaitMirrorState("g", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	pollFor(t, "app moved to the truncation point on A", func() bool { return groupOffsets(ctx, t, a, "app")[0] == 5 })
	if got := groupOffsets(ctx, t, a, "early"); got[0] != 3 {
		t.Fatalf("early (committed at 3, below the truncation point) is at %v on A", got)
	}
	if got := groupOffsets(ctx, t, a, "held"); got[0] != 8 {
		t.Fatalf("held (with a member) is at %v on A, want 8: left to its member", got)
	}
	stopPolling()
	<-polled
	holder.Close() // leaves the group without committing
	pollFor(t, "held moved to the truncation point once its member left", func() bool { return groupOffsets(ctx, t, a, "held")[0] == 5 })
	seen := map[string]bool{}
	consumeAndCommit(ctx, t, a, "app", 2, seen, map[int32]int64{0: 5})
	if !seen["b5"] || !seen["b6"] {
		t.Fatalf("app resumed on A and read %v, want B's b5 and b6", seen)
	}
}

// leaderOf is the current leader of topic's partition 0.
func (c *Cluster) leaderOf(topic string) twinlog.BrokerID {
	l, _ := c.Leader(topic, 0)
	return l
}
