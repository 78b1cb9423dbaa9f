package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func TestProduceConsumeRF3(t *testing.T) {
	c := NewCluster(t, Options{Brokers: 3, MinISR: 2})
	c.CreateTopic("orders", 2, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	want := map[int64]string{}
	for i := range 20 {
		v := fmt.Sprintf("v%d", i)
		off := c.MustProduce(ctx, "orders", 0, -1, []byte(v))
		want[int64(off)] = v
	}
	recs, hw := c.ConsumeAll(ctx, "orders", 0)
	if hw != 20 || len(recs) != 20 {
		t.Fatalf("hw %d, %d records", hw, len(recs))
	}
	for _, r := range recs {
		if want[int64(r.Offset)] != string(r.Value) {
			t.Fatalf("offset %d: %q want %q", r.Offset, r.Value, want[int64(r.Offset)])
		}
	}
	// Every replica reaches the HW (followers replicate).
	c.WaitFor("followers caught up", func() bool {
		for _, id := range c.IDs() {
			if c.LogEndOffset(id, "orders", 0) != 20 {
				return false
			}
		}
		return true
	})
	// Produce to a follower: NOT_LEADER_OR_FOLLOWER with the leader hint.
	leader, _ := c.Leader("orders", 0)
	follower := c.IDs()[0]
	if follower == leader {
		follower = c.IDs()[1]
	}
	r, err := c.ProduceTo(ctx, follower, "orders", 0, 1, time.Second, []byte("x"))
	if err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER || r.GetLeaderId() != int32(leader) {
		t.Fatalf("produce to follower: %v %v", r, err)
	}
}
