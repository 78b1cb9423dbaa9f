package controller

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestHeartbeatOfflinePartitions (issue 13): the offline partitions a
// broker reports in its heartbeats show in ListBrokers (twinctl brokers
// list), bounded, for as long as the broker's registration is live: an
// empty report clears them, and they disappear when its session ends
// (fenced) or it registers again, until a heartbeat of the new session
// reports them again.
func TestHeartbeatOfflinePartitions(t *testing.T) {
	clock := newClock()
	h := startController(t, t.TempDir(), clock, newNet())
	epochs := h.upBrokers(3)
	send := func(id int32, ops []*twinlogv1.OfflinePartition) {
		t.Helper()
		resp, err := h.ctl.BrokerHeartbeat(t.Context(), &twinlogv1.BrokerHeartbeatRequest{
			BrokerId: id, BrokerEpoch: epochs[id], AppliedOffset: h.c.Offset(), OfflinePartitions: ops,
		})
		if err != nil || resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("heartbeat %d: %v, %v", id, resp, err)
		}
	}
	offline := func() map[int32]*twinlogv1.BrokerOfflinePartitions {
		t.Helper()
		lb, err := h.admin.ListBrokers(t.Context(), &twinlogv1.ListBrokersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]*twinlogv1.BrokerOfflinePartitions{}
		for _, bo := range lb.GetOfflinePartitions() {
			out[bo.GetBrokerId()] = bo
		}
		return out
	}

	long := strings.Repeat("é", MaxOfflineReasonBytes) // 2 bytes a character
	send(1, []*twinlogv1.OfflinePartition{
		{Topic: "orders", Partition: 0, Reason: "open segment 00000000000000000000.log: corrupt batch at position 0"},
		{Topic: "orders", Partition: 3, Reason: long},
		{Topic: "bad/name", Partition: 1, Reason: "dropped: not a topic name"},
		{Topic: "orders", Partition: -1, Reason: "dropped: not a partition"},
	})
	got := offline()
	b1 := got[1]
	if len(got) != 1 || b1.GetCount() != 4 || len(b1.GetPartitions()) != 2 {
		t.Fatalf("offline partitions %v, want broker 1's two valid entries of 4 reported", got)
	}
	p0, p3 := b1.GetPartitions()[0], b1.GetPartitions()[1]
	if p0.GetTopic() != "orders" || p0.GetPartition() != 0 || !strings.Contains(p0.GetReason(), "corrupt batch") ||
		p3.GetPartition() != 3 || len(p3.GetReason()) > MaxOfflineReasonBytes || !utf8.ValidString(p3.GetReason()) ||
		!strings.HasPrefix(long, p3.GetReason()) || len(p3.GetReason()) < MaxOfflineReasonBytes-1 {
		t.Fatalf("kept %v", b1.GetPartitions())
	}

	// Far more than the controller keeps: the count is what was reported.
	many := make([]*twinlogv1.OfflinePartition, MaxOfflinePartitionsKept+500)
	for i := range many {
		many[i] = &twinlogv1.OfflinePartition{Topic: "wide", Partition: int32(i), Reason: "x"}
	}
	send(2, many)
	if b2 := offline()[2]; b2.GetCount() != int32(len(many)) || len(b2.GetPartitions()) != MaxOfflinePartitionsKept {
		t.Fatalf("broker 2: count %d with %d partitions, want %d with %d", b2.GetCount(), len(b2.GetPartitions()),
			len(many), MaxOfflinePartitionsKept)
	}
	send(2, nil) // repaired: an empty report clears it
	if _, ok := offline()[2]; ok {
		t.Fatal("broker 2's report outlived its empty heartbeat")
	}

	// Broker 1's session ends: only 2 and 3 keep heartbeating.
	for range 5 {
		clock.Advance(2 * time.Second)
		h.heartbeat(2, epochs[2])
		h.heartbeat(3, epochs[3])
		h.tick()
	}
	if got := offline(); len(got) != 0 {
		t.Fatalf("after broker 1 was fenced: %v", got)
	}
	// Back with the same registration: reported again.
	send(1, []*twinlogv1.OfflinePartition{{Topic: "orders", Partition: 0, Reason: "r"}})
	if got := offline(); got[1].GetCount() != 1 {
		t.Fatalf("after broker 1's heartbeat unfenced it: %v", got)
	}
	// A restart: the new registration has reported nothing yet.
	epochs[1] = h.register(1, -1)
	if got := offline(); len(got) != 0 {
		t.Fatalf("after broker 1 registered again: %v", got)
	}
	send(1, []*twinlogv1.OfflinePartition{{Topic: "orders", Partition: 0, Reason: "r"}})
	if got := offline(); got[1].GetCount() != 1 {
		t.Fatalf("after the new session's heartbeat: %v", got)
	}
}
