package brokertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker"
)

// fetchCounter counts the fetch requests a broker answered.
type fetchCounter struct {
	nopObs
	n *atomic.Int64
}

func (o fetchCounter) ObserveRequest(api string, _ time.Duration) {
	if api == "fetch" {
		o.n.Add(1)
	}
}

// Each acks=all produce costs each follower one fetch, whatever the number
// of leaders a follower fetches from. A follower's fetcher for one leader
// used to number the fetches of partitions led by another, making that
// fetcher's answer in flight stale: every record was fetched again, 3.8
// follower fetches per produce with three leaders instead of 2. Counted,
// not timed: long polls that expire (500 ms) add a few.
func TestFollowerFetchesPerProduce(t *testing.T) {
	var fetches atomic.Int64
	c := NewCluster(t, Options{Brokers: 3, MinISR: 2,
		Observer: func(twinlog.BrokerID) broker.Observer { return fetchCounter{n: &fetches} }})
	const parts = 3
	c.CreateTopic("t", parts, 3, nil)
	leaders := map[twinlog.BrokerID]bool{}
	for p := range int32(parts) {
		l, _ := c.Leader("t", p)
		leaders[l] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("all %d partitions led by one broker: the test needs several leaders", parts)
	}
	c.WaitFor("every partition's ISR is all replicas", func() bool {
		for p := range int32(parts) {
			if _, _, isr, rs, ok := c.PartitionInfo("t", p); !ok || len(isr) != len(rs) {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const n = 150
	before := fetches.Load()
	start := time.Now()
	for i := range n {
		if _, err := c.Produce(ctx, "t", int32(i%parts), -1, fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	got := fetches.Load() - before
	// Two followers per partition: 2n, plus at most one expired long poll
	// per fetcher (6 of them) per 500 ms of the run.
	limit := 2*n + 6*(int64(time.Since(start)/(500*time.Millisecond))+1)
	t.Logf("%d fetches for %d acks=all produces over %d leaders (%.2f per produce, limit %d)", got, n, len(leaders), float64(got)/n, limit)
	if got > limit {
		t.Fatalf("%d fetches for %d produces, more than %d", got, n, limit)
	}
}
