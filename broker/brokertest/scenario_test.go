package brokertest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
)

func status(c *Cluster, id twinlog.BrokerID, topic string) (st struct {
	Role replica.Role
	LEO  twinlog.Offset
	ISR  []twinlog.BrokerID
}, ok bool) {
	b := c.Broker(id)
	if b == nil {
		return st, false
	}
	s, ok := b.PartitionStatus(twinlog.TopicPartition{Topic: topic, Partition: 0})
	st.Role, st.LEO, st.ISR = s.Role, s.LogEndOffset, s.ISR
	return st, ok
}

// TestS2NoTruncationToHW drives SPEC S2: R [A,B], m 2. A shuts down
// cleanly (ISR {B}, ELR {A}), restarts cleanly but cannot reach B, so it
// stays out of the ISR; B is then killed and fenced, and A is elected from
// the ELR — with offset 1 still in its log although its HW may be 1.
func TestS2NoTruncationToHW(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 2, MinISR: 2})
	c.CreateTopic("t", 1, 2, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := acked{}
	a.produce(t, ctx, c, "t", 2, "v")
	waitReplicasCaughtUp(c, "t")
	leader, le := c.Leader("t", 0)
	follower := twinlog.BrokerID(3) - leader
	c.StopBroker(follower)
	c.Cut(follower, leader)
	c.RestartBroker(follower)
	c.KillBroker(leader)
	c.WaitFor("former follower elected from the ELR", func() bool {
		l, e, _, _, ok := c.PartitionInfo("t", 0)
		return ok && l == follower && e > le
	})
	c.WaitFor("new leader serving", func() bool {
		st, ok := status(c, follower, "t")
		return ok && st.Role == replica.RoleLeader
	})
	if got := c.LogEndOffset(follower, "t", 0); got != 2 {
		t.Fatalf("new leader LEO %d, want 2: offset 1 must not be truncated to the HW", got)
	}
}

// TestS10UncleanRestartRejoins: a follower killed without flushing restarts
// with PreviousBrokerEpoch −1, registers a new epoch, and rejoins the ISR
// only after fetching with it (the leader proposes its new epoch).
func TestS10UncleanRestartRejoins(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 3, MinISR: 2})
	c.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := acked{}
	a.produce(t, ctx, c, "t", 10, "v")
	leader, _ := c.Leader("t", 0)
	f := c.IDs()[0]
	if f == leader {
		f = c.IDs()[1]
	}
	oldEpoch := c.Broker(f).BrokerEpoch()
	c.KillBroker(f)
	c.RestartBroker(f)
	if got := c.Broker(f).PreviousBrokerEpoch(); got != -1 {
		t.Fatalf("unclean restart: previous broker epoch %d, want -1", got)
	}
	c.WaitFor("registered with a new epoch", func() bool { return c.Broker(f).BrokerEpoch() > oldEpoch })
	a.produce(t, ctx, c, "t", 10, "after")
	c.WaitFor("follower back in ISR", func() bool {
		_, _, isr, _, ok := c.PartitionInfo("t", 0)
		return ok && slices.Contains(isr, int32(f))
	})
	waitReplicasCaughtUp(c, "t")
	a.check(t, ctx, c, "t")
}

// TestBadInput: precise error codes, no panics.
func TestBadInput(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 1})
	c.CreateTopic("t", 1, 1, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	leader, le := c.Leader("t", 0)
	pc := c.ProduceClient(leader)
	produce := func(topic string, p int32, acks int32, recs []byte) pb.ErrorCode {
		t.Helper()
		resp, err := pc.Produce(ctx, &pb.ProduceRequest{Acks: acks, TimeoutMs: 1000,
			Partitions: []*pb.ProducePartitionData{{Topic: topic, Partition: p, Records: recs}}})
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		return resp.GetPartitions()[0].GetError()
	}
	good := EncodeValues([]byte("x"))
	bad := slices.Clone(good)
	bad[len(bad)-1] ^= 0xff
	cases := []struct {
		name string
		got  pb.ErrorCode
		want pb.ErrorCode
	}{
		{"unknown topic", produce("nope", 0, 1, good), pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
		{"unknown partition", produce("t", 7, 1, good), pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
		{"negative partition", produce("t", -1, 1, good), pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
		{"bad crc", produce("t", 0, 1, bad), pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE},
		{"truncated", produce("t", 0, 1, good[:20]), pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE},
		{"empty", produce("t", 0, 1, nil), pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE},
		{"bad acks", produce("t", 0, 5, good), pb.ErrorCode_ERROR_CODE_INVALID_REQUIRED_ACKS},
		{"too large", produce("t", 0, 1, EncodeValues(make([]byte, 2<<20))), pb.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE},
		{"ok", produce("t", 0, 1, good), pb.ErrorCode_ERROR_CODE_NONE},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	fc := c.FetchClient(leader)
	fetch := func(cur int32, off int64) pb.ErrorCode {
		t.Helper()
		resp, err := fc.Fetch(ctx, &pb.FetchRequest{FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, ReplicaId: -1,
			Partitions: []*pb.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: off, CurrentLeaderEpoch: cur, LastFetchedEpoch: -1}}})
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		return resp.GetPartitions()[0].GetError()
	}
	if le > 0 {
		if got := fetch(int32(le)-1, 0); got != pb.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH {
			t.Errorf("old epoch: %v", got)
		}
	}
	if got := fetch(int32(le)+1, 0); got != pb.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH {
		t.Errorf("newer epoch: %v", got)
	}
	if got := fetch(-1, 0); got != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Errorf("consumer without epoch: %v", got)
	}
	if got := fetch(int32(le), 99); got != pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
		t.Errorf("beyond LEO: %v", got)
	}
	if _, err := fc.Fetch(ctx, &pb.FetchRequest{}); err == nil {
		t.Errorf("empty fetch accepted")
	}
	if _, err := fc.Fetch(ctx, &pb.FetchRequest{FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, MaxWaitMs: -5,
		Partitions: []*pb.FetchPartition{{Topic: "t"}}}); err == nil {
		t.Errorf("negative wait accepted")
	}
	// Long poll: a consumer at the HW waits and is woken by a produce.
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		recs, _, _, err := c.ReadFrom(ctx, leader, "t", 0, le, 1, 5*time.Second)
		if err != nil || len(recs) == 0 {
			t.Errorf("long poll: %v %d", err, len(recs))
		}
		done <- time.Since(start)
	}()
	c.WaitFor("long poll registered", func() bool { return true })
	if code := produce("t", 0, 1, good); code != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatal(code)
	}
	if d := <-done; d > 4*time.Second {
		t.Errorf("long poll not woken by the append: %v", d)
	}
}

// pause is the chaos schedule's think time (not synchronisation).
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
