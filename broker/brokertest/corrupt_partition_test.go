package brokertest

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/vfs"
)

// offlineObs records what a broker reports through broker.StorageObserver.
type offlineObs struct {
	nopObs
	offline atomic.Int64
}

func (o *offlineObs) ObserveOfflinePartitions(n int) { o.offline.Store(int64(n)) }

// TestCorruptPartitionOffline (issue 13): a partition whose segment is
// corrupt below its recovery point takes only itself offline. The broker
// starts (it used to refuse: OpenLogDir failed the whole dir), reports the
// partition offline (log naming the file, metric, ListBrokers through its
// heartbeats, unclean registration so the controller keeps it out of the
// partition's ISR and ELR) and serves the healthy partition: it rejoins its
// ISR, leads it, and every acked record is read from it.
func TestCorruptPartitionOffline(t *testing.T) {
	obs := map[twinlog.BrokerID]*offlineObs{}
	for id := twinlog.BrokerID(1); id <= 3; id++ {
		obs[id] = &offlineObs{}
	}
	c := NewCluster(t, Options{Brokers: 3, Observer: func(id twinlog.BrokerID) broker.Observer { return obs[id] }})
	ctx := t.Context()
	c.CreateTopic("good", 1, 3, nil)
	c.CreateTopic("bad", 1, 3, nil)
	good, bad := acked{}, acked{}
	good.produce(t, ctx, c, "good", 10, "g")
	bad.produce(t, ctx, c, "bad", 10, "b")
	waitReplicasCaughtUp(c, "good")
	waitReplicasCaughtUp(c, "bad")

	const victim = twinlog.BrokerID(1)
	c.StopBroker(victim) // clean: everything flushed, recovery point at the LEO
	n := c.node(victim)
	seg := filepath.Join(n.dir, "logs", "bad-0", "00000000000000000000.log")
	data, err := vfs.ReadFile(n.mem, seg)
	if err != nil || len(data) < storage.BatchHeaderSize {
		t.Fatalf("read %s: %d bytes, %v", seg, len(data), err)
	}
	data[16]++ // magic of the first batch, far below the recovery point
	if err := vfs.WriteFileAtomic(n.mem, seg, data); err != nil {
		t.Fatal(err)
	}
	good.produce(t, ctx, c, "good", 5, "g-while-down")

	c.RestartBroker(victim)
	b := c.Broker(victim)
	badTP := twinlog.TopicPartition{Topic: "bad", Partition: 0}
	off := b.OfflinePartitions()
	if len(off) != 1 || !errors.Is(off[badTP], storage.ErrLogOffline) || !strings.Contains(off[badTP].Error(), seg) {
		t.Fatalf("offline partitions %v, want bad-0 naming %s", off, seg)
	}
	if got := obs[victim].offline.Load(); got != 1 {
		t.Fatalf("offline partitions metric %d, want 1", got)
	}
	if b.PreviousBrokerEpoch() != -1 {
		t.Fatalf("registered with previous broker epoch %d: a broker with an offline partition restarts uncleanly", b.PreviousBrokerEpoch())
	}

	c.WaitFor("the healthy partition back in sync on the restarted broker", func() bool {
		leader, _, isr, _, ok := c.PartitionInfo("good", 0)
		return ok && leader > 0 && c.Running(leader) && slices.Contains(isr, int32(victim)) &&
			c.LogEndOffset(victim, "good", 0) == c.LogEndOffset(leader, "good", 0)
	})
	// The operator sees it in `twinctl brokers list` (OFFLINE): the
	// heartbeat that unfenced the broker (it is in an ISR again) carried
	// the report, and the controller's ListBrokers answers with it.
	lb, err := c.Admin().ListBrokers(ctx, &pb.ListBrokersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rs := lb.GetOfflinePartitions(); len(rs) != 1 || rs[0].GetBrokerId() != int32(victim) || rs[0].GetCount() != 1 ||
		len(rs[0].GetPartitions()) != 1 || rs[0].GetPartitions()[0].GetTopic() != "bad" ||
		rs[0].GetPartitions()[0].GetPartition() != 0 || !strings.Contains(rs[0].GetPartitions()[0].GetReason(), "bad-0") {
		t.Fatalf("ListBrokers offline partitions %v, want bad-0 on broker %d with its open error", rs, victim)
	}
	// An unclean recovery round asking the broker about its copy learns
	// that it exists but cannot be read.
	li, err := pb.NewReplicationServiceClient(c.conn(c.Addr(victim))).GetReplicaLogInfo(ctx, &pb.GetReplicaLogInfoRequest{
		Topics: []*pb.GetReplicaLogInfoTopic{{Topic: "bad", Partitions: []int32{0}}}})
	if err != nil || len(li.GetTopics()) != 1 || len(li.GetTopics()[0].GetPartitions()) != 1 ||
		li.GetTopics()[0].GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR {
		t.Fatalf("GetReplicaLogInfo of the offline copy: %v %v, want KAFKA_STORAGE_ERROR", li, err)
	}
	// The corrupt replica stays out of the partition's ISR (the controller
	// knows it cannot lead), and the broker neither hosts it nor rebuilt
	// an empty log in its place.
	if _, _, isr, _, ok := c.PartitionInfo("bad", 0); !ok || slices.Contains(isr, int32(victim)) {
		t.Fatalf("bad-0 ISR %v holds the broker whose copy is corrupt", isr)
	}
	if _, hosted := b.PartitionStatus(badTP); hosted {
		t.Fatal("the offline partition is hosted")
	}
	if now, _ := vfs.ReadFile(n.mem, seg); string(now) != string(data) {
		t.Fatal("the corrupt segment was changed or replaced")
	}
	bad.produce(t, ctx, c, "bad", 3, "b-after") // the other replicas still serve it
	// A client asking the broker with the offline copy is sent to the
	// leader (Broker.notHosted).
	if leader, _, _, _, ok := c.PartitionInfo("bad", 0); !ok || leader == victim {
		t.Fatalf("bad-0 led by %d", leader)
	} else if pr, err := c.ProduceTo(ctx, victim, "bad", 0, -1, time.Second, []byte("x")); err != nil ||
		pr.GetError() != pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER || pr.GetLeaderId() != int32(leader) {
		t.Fatalf("produce of bad-0 to the broker with the offline copy: %v %v, want NOT_LEADER_OR_FOLLOWER with leader %d", pr, err, leader)
	}

	// Only the restarted broker left: it leads the healthy partition and
	// serves every acked record of it.
	for _, id := range c.IDs() {
		if id != victim {
			c.StopBroker(id)
		}
	}
	c.WaitFor("the restarted broker leads the healthy partition", func() bool {
		leader, _, _, _, ok := c.PartitionInfo("good", 0)
		return ok && leader == victim && c.leaderReady("good", 0)
	})
	good.produce(t, ctx, c, "good", 3, "g-after")
	good.check(t, ctx, c, "good")
	_, le, _, _, _ := c.PartitionInfo("bad", 0)
	// Leaderless: the controller does not elect the replica it knows is
	// not intact, so the broker does not lead it and says so.
	if _, _, code, err := c.ReadFrom(ctx, victim, "bad", 0, le, 0, 0); err != nil || code != pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER {
		t.Fatalf("fetch of the offline partition from the broker: %v %v, want NOT_LEADER_OR_FOLLOWER", code, err)
	}
}
