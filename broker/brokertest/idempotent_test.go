package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/storage"
)

// idempotentProduce sends one Kafka Produce (acks=all) of a batch of
// producer pid at epoch from sequence seq, with values, to broker id, and
// returns the partition's error and base offset.
func idempotentProduce(ctx context.Context, t *testing.T, cl *kgo.Client, id twinlog.BrokerID, topic string, pid int64, epoch int16, seq int32, values ...string) (int64, error) {
	t.Helper()
	recs := make([]storage.Record, len(values))
	for i, v := range values {
		recs[i] = storage.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)}
	}
	batch, err := storage.EncodeBatch(recs, storage.BatchOptions{Producer: &storage.Producer{ID: pid, Epoch: epoch, BaseSequence: seq}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, kafkaTopicID(ctx, t, cl, topic) // v13+ sends the id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// A transport error is retried with the same batch, as a producer
	// does: a broker just restarted or elected may not be in the client's
	// metadata yet, or not accept yet.
	var resp *kmsg.ProduceResponse
	for {
		var err error
		if resp, err = req.RequestWith(ctx, cl.Broker(int(id))); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("produce to broker %d: %v", id, err)
		}
		cl.ForceMetadataRefresh()
		time.Sleep(20 * time.Millisecond)
	}
	p := resp.Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}

// TestKafkaIdempotentRetriesAcrossLeaders: an idempotent producer's retry
// is answered with the original offsets and appends nothing, by the
// leader that appended it and, after that leader is killed, by the replica
// that replicated it, and again after a restart (its producer state is
// rebuilt from snapshot and log); a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; a
// bumped epoch restarts at sequence 0 and fences the old one
// (INVALID_PRODUCER_EPOCH). The log ends with each batch exactly once.
func TestKafkaIdempotentRetriesAcrossLeaders(t *testing.T) {
	refusals := &refusalObserver{outcomes: map[string]int{}}
	c := NewCluster(t, Options{MinISR: 2, Observer: func(twinlog.BrokerID) broker.Observer { return refusals }})
	c.CreateTopic("i", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := kafkaClient(t, c)
	const pid = 1<<48 | 77
	leader, _ := c.Leader("i", 0)
	send := func(to twinlog.BrokerID, epoch int16, seq int32, values ...string) (int64, error) {
		t.Helper()
		return idempotentProduce(ctx, t, cl, to, "i", pid, epoch, seq, values...)
	}
	expect := func(what string, to twinlog.BrokerID, epoch int16, seq int32, wantErr error, wantBase int64, values ...string) {
		t.Helper()
		base, err := send(to, epoch, seq, values...)
		if err != wantErr || (wantErr == nil && base != wantBase) {
			t.Fatalf("%s (broker %d, epoch %d, seq %d): %v at %d, want %v at %d", what, to, epoch, seq, err, base, wantErr, wantBase)
		}
	}
	expect("first batch", leader, 0, 0, nil, 0, "a0", "a1", "a2")
	expect("its retry", leader, 0, 0, nil, 0, "a0", "a1", "a2")
	expect("a gap", leader, 0, 5, kerr.OutOfOrderSequenceNumber, 0, "x")
	expect("second batch", leader, 0, 3, nil, 3, "b3", "b4")
	if leo := c.LogEndOffset(leader, "i", 0); leo != 5 {
		t.Fatalf("leader's LEO %d after two batches and their retries, want 5", leo)
	}

	// The acks=all batches are on every ISR member; the next leader
	// answers their retries from the state it replicated.
	c.KillBroker(leader)
	var next twinlog.BrokerID
	c.WaitFor("a new leader", func() bool {
		next, _ = c.Leader("i", 0)
		return next >= 0 && next != leader
	})
	cl.ForceMetadataRefresh()
	expect("retry of the second batch on the new leader", next, 0, 3, nil, 3, "b3", "b4")
	expect("retry of the first", next, 0, 0, nil, 0, "a0", "a1", "a2")
	expect("third batch", next, 0, 5, nil, 5, "c5")

	// The killed broker restarts (unclean: state from a snapshot and the
	// log); whichever replica leads after the next kill answers alike.
	c.RestartBroker(leader)
	c.WaitFor("the restarted broker back in the ISR", func() bool {
		_, _, isr, _, ok := c.PartitionInfo("i", 0)
		return ok && len(isr) == 3
	})
	c.KillBroker(next)
	var third twinlog.BrokerID
	c.WaitFor("a third leader", func() bool {
		third, _ = c.Leader("i", 0)
		return third >= 0 && third != next
	})
	cl.ForceMetadataRefresh()
	expect("retry of the third batch after a restart and a second failover", third, 0, 5, nil, 5, "c5")
	expect("a bumped epoch not at 0", third, 1, 6, kerr.OutOfOrderSequenceNumber, 0, "x")
	expect("a bumped epoch at 0", third, 1, 0, nil, 6, "d6")
	expect("the fenced epoch", third, 0, 6, kerr.InvalidProducerEpoch, 0, "x")

	recs, _ := c.ConsumeAll(ctx, "i", 0)
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	want := []string{"0:a0", "1:a1", "2:a2", "3:b3", "4:b4", "5:c5", "6:d6"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	// The brokers counted them under the outcomes the metric and the
	// alert name (broker.IdempotentRefusalOutcomes).
	refusals.mu.Lock()
	defer refusals.mu.Unlock()
	for o, n := range map[string]int{"duplicate": 4, "out_of_order_sequence": 2, "invalid_producer_epoch": 1} {
		if refusals.outcomes[o] != n {
			t.Errorf("outcome %q counted %d times, want %d (all: %v)", o, refusals.outcomes[o], n, refusals.outcomes)
		}
	}
	for o := range refusals.outcomes {
		if !slices.Contains(broker.IdempotentRefusalOutcomes, o) {
			t.Errorf("outcome %q is not one of %v", o, broker.IdempotentRefusalOutcomes)
		}
	}
}

// refusalObserver counts ObserveIdempotentRefusal by outcome.
type refusalObserver struct {
	nopObs
	mu       sync.Mutex
	outcomes map[string]int
}

func (o *refusalObserver) ObserveIdempotentRefusal(outcome string) {
	o.mu.Lock()
	o.outcomes[outcome]++
	o.mu.Unlock()
}

// TestMirrorCarriesIdempotentProducers: a mirror builds its producer state
// from the batches it copies (producer fields included), so after a
// failover the producer moved from A to B with its id, epoch and next
// sequence continues on B: its retry of the last batch A acknowledged is
// answered with A's offsets, its next batch follows, a gap is refused; and
// B's followers, which replicated the mirrored batches, answer the same
// after B's leader dies.
func TestMirrorCarriesIdempotentProducers(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	const pid = 1<<48 | 5
	clA := kafkaClient(t, a)
	aLeader, _ := a.Leader("t", 0)
	for _, s := range []struct {
		seq    int32
		values []string
		base   int64
	}{{0, []string{"a0", "a1", "a2"}, 0}, {3, []string{"a3", "a4"}, 3}} {
		if base, err := idempotentProduce(ctx, t, clA, aLeader, "t", pid, 0, s.seq, s.values...); err != nil || base != s.base {
			t.Fatalf("produce seq %d on A: %v at %d", s.seq, err, base)
		}
	}
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	want := a.LeaderLog("t", 0)
	waitLog(b, "t", want)
	waitReplicasIdentical(b, "t", want)
	if err := mirrorResults("stop", b.StopMirror("m", true, 10*time.Second, "t")); err != nil {
		t.Fatal(err)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)

	clB := kafkaClient(t, b)
	bLeader, _ := b.Leader("t", 0)
	check := func(what string, to twinlog.BrokerID, seq int32, wantErr error, wantBase int64, values ...string) {
		t.Helper()
		// As a Kafka client, retry what is retriable: a leader that took
		// over after the stop answers NOT_LEADER_OR_FOLLOWER until its
		// mirror runner has made it writable.
		var err error
		var base int64
		for {
			base, err = idempotentProduce(ctx, t, clB, to, "t", pid, 0, seq, values...)
			if !errors.Is(err, kerr.NotLeaderForPartition) || ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != wantErr || (wantErr == nil && base != wantBase) {
			t.Fatalf("%s (B broker %d, seq %d): %v at %d, want %v at %d", what, to, seq, err, base, wantErr, wantBase)
		}
	}
	check("retry on B of the last batch A acknowledged", bLeader, 3, nil, 3, "a3", "a4")
	check("a gap on B", bLeader, 9, kerr.OutOfOrderSequenceNumber, 0, "x")
	check("the next batch on B", bLeader, 5, nil, 5, "b5")
	b.KillBroker(bLeader)
	var next twinlog.BrokerID
	b.WaitFor("a new leader on B", func() bool {
		next, _ = b.Leader("t", 0)
		return next >= 0 && next != bLeader
	})
	clB.ForceMetadataRefresh()
	check("retry on B's next leader", next, 5, nil, 5, "b5")
	check("retry of a mirrored batch on B's next leader", next, 3, nil, 3, "a3", "a4")
	recs, _ := b.ConsumeAll(ctx, "t", 0)
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	if w := []string{"0:a0", "1:a1", "2:a2", "3:a3", "4:a4", "5:b5"}; fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("B's log %v, want %v", got, w)
	}
}

// TestKafkaIdempotentProducerThroughFaults: franz-go's idempotent producer
// (its default: InitProducerId, sequences, retries of everything
// retriable) writes 100,000 records over 8 partitions, acks=all, while one
// broker is killed and restarted and a follower link is cut and healed.
// Every record is acknowledged once and consumed exactly once, at the
// partition and offset its acknowledgement gave: the leaders answered the
// retries of batches they held as duplicates, and the new leaders answered
// the retries of the old ones' batches alike (the test makes sure there
// are some: partition 0's followers hold batches its leader could not
// acknowledge when it is killed).
func TestKafkaIdempotentProducerThroughFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 records through faults")
	}
	c := NewCluster(t, Options{Brokers: 4, MinISR: 2})
	const parts, n = 8, 100_000
	c.CreateTopic("idem", parts, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod := kafkaClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("idem"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.ProduceRequestTimeout(5*time.Second))

	type at struct {
		p   int32
		off int64
	}
	var mu sync.Mutex
	acked := make(map[string]at, n)
	var produceErr error
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(n)
	go func() {
		for i := range n {
			prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%06d", i)}, func(r *kgo.Record, err error) {
				mu.Lock()
				if err != nil && produceErr == nil {
					produceErr = fmt.Errorf("record %s: %w", r.Value, err)
				}
				if _, dup := acked[string(r.Value)]; dup && produceErr == nil {
					produceErr = fmt.Errorf("record %s acknowledged twice", r.Value)
				}
				acked[string(r.Value)] = at{r.Partition, r.Offset}
				mu.Unlock()
				wg.Done()
			})
		}
		wg.Wait()
		close(done)
	}()
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitProgress := func(k int) {
		t.Helper()
		c.WaitForTimeout(fmt.Sprintf("%d records acknowledged", k), 2*time.Minute, func() bool { return progress() >= k })
	}
	// Partition 0's followers take batches its leader never hears they
	// have (so it cannot acknowledge them), then the leader dies: the
	// producer retries those batches on the new leader, which holds them.
	// It comes back; then a follower link is cut under load and healed.
	waitProgress(n / 10)
	victim, _ := c.Leader("idem", 0)
	_, _, _, replicas, _ := c.PartitionInfo("idem", 0)
	limit := c.LogEndOffset(victim, "idem", 0) + 1
	var followers []twinlog.BrokerID
	for _, r := range replicas {
		if id := twinlog.BrokerID(r); id != victim {
			followers = append(followers, id)
			c.FetchesUpTo(id, "idem", 0, limit)
		}
	}
	c.WaitFor("followers holding batches the leader has not acknowledged", func() bool {
		for _, f := range followers {
			if c.LogEndOffset(f, "idem", 0) <= limit {
				return false
			}
		}
		return true
	})
	c.KillBroker(victim)
	for _, f := range followers {
		c.ReleaseFetches(f, "idem", 0)
	}
	waitProgress(n / 3)
	c.RestartBroker(victim)
	a, b := twinlog.BrokerID(1), twinlog.BrokerID(2)
	if victim == a || victim == b {
		a, b = 3, 4
	}
	c.Cut(a, b)
	waitProgress(2 * n / 3)
	c.Heal(a, b)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%d of %d records acknowledged: %v", progress(), n, ctx.Err())
	}
	if produceErr != nil {
		t.Fatal(produceErr)
	}

	offsets := map[int32]kgo.Offset{}
	for p := range int32(parts) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons := kafkaClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"idem": offsets}))
	seen := make(map[string]bool, n)
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if seen[v] {
				t.Fatalf("record %s consumed twice (again at %d/%d)", v, r.Partition, r.Offset)
			}
			seen[v] = true
			if w, ok := acked[v]; !ok || w != (at{r.Partition, r.Offset}) {
				t.Fatalf("record %s at %d/%d, acknowledged at %+v (%v)", v, r.Partition, r.Offset, w, ok)
			}
		})
	}
	// Nothing after the last acknowledged record: each partition's high
	// watermark is its record count.
	perPart := map[int32]int64{}
	for _, w := range acked {
		perPart[w.p]++
	}
	for p := range int32(parts) {
		_, hw := c.ConsumeAll(ctx, "idem", p)
		if int64(hw) != perPart[p] {
			t.Fatalf("partition %d: HW %d with %d records acknowledged there", p, hw, perPart[p])
		}
	}
}
