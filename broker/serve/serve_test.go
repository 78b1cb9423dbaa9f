package serve_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/epoch"
	"github.com/twinlog/twinlog/storage/producer"
)

const batchBytes = 50

// part is a partition whose log holds batches of batchBytes.
type part struct {
	sync.Mutex
	r        *replica.Replica
	unusable pb.ErrorCode
	events   *[]string
	name     string
}

func (p *part) Replica() *replica.Replica { return p.r }
func (p *part) Unusable() pb.ErrorCode    { return p.unusable }
func (p *part) ProcessReady()             { *p.events = append(*p.events, p.name+" ready") }

// Read returns whole batches up to maxBytes, at least one.
func (p *part) OffsetForTimestamp(int64) (twinlog.Offset, pb.ErrorCode) {
	return twinlog.NoOffset, pb.ErrorCode_ERROR_CODE_NONE
}

func (p *part) Read(from twinlog.Offset, maxBytes int, upTo twinlog.Offset) ([]byte, pb.ErrorCode) {
	*p.events = append(*p.events, p.name+" read")
	n := max(1, maxBytes/batchBytes)
	n = min(n, int(upTo-from))
	return make([]byte, n*batchBytes), pb.ErrorCode_ERROR_CODE_NONE
}

// newPart is a replica of broker 1 holding [0, 10), committed, led by
// leader in LE 1.
func newPart(t *testing.T, name string, leader twinlog.BrokerID, events *[]string) *part {
	t.Helper()
	r, err := replica.New(replica.Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}},
		replica.LogState{LogEndOffset: 10, HighWatermark: 10, Epochs: []epoch.Entry{{Epoch: 0, StartOffset: 0}}, AlignedEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(replica.PartitionState{Leader: leader, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []twinlog.BrokerID{1}, ISR: []twinlog.BrokerID{1},
		MinISR: 1, Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 1, 2: 1}}, 0)
	return &part{r: r, events: events, name: name}
}

func consumerFetch(caps ...int32) *pb.FetchRequest {
	req := &pb.FetchRequest{ReplicaId: -1, ReplicaBrokerEpoch: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER}
	for i, c := range caps {
		req.Partitions = append(req.Partitions, &pb.FetchPartition{Topic: "t", Partition: int32(i), FetchOffset: 0, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1, PartitionMaxBytes: c})
	}
	return req
}

// TestOnce: one budget across the partitions in request order, each
// partition's own cap, at least one batch for the first partition a
// budget reaches; refused targets, closed partitions and replica errors
// answered and marked stop, without a read; each decision heard before
// its Ready is processed.
func TestOnce(t *testing.T) {
	var events []string
	p0, p1 := newPart(t, "p0", 1, &events), newPart(t, "p1", 1, &events)
	follower := newPart(t, "p3", 2, &events)
	closed := newPart(t, "p4", 1, &events)
	closed.unusable = pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
	targets := []serve.Target{{P: p0}, {P: p1}, {Error: pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, LeaderID: 3}, {P: follower}, {P: closed}}
	req := consumerFetch(120, 0, 0, 0, 0)
	var heard []int
	resp, total, stop := serve.Once(req, targets, 300, 1, func(i int, _ replica.FetchDecision) {
		heard = append(heard, i)
		events = append(events, "heard")
	})
	if !stop || total != 300 {
		t.Fatalf("stop %t, total %d: want stop (errors) and 300 bytes", stop, total)
	}
	ps := resp.GetPartitions()
	if len(ps[0].GetRecords()) != 100 || len(ps[1].GetRecords()) != 200 {
		t.Fatalf("records %d and %d, want 100 (its cap, whole batches) and 200 (the rest of the budget)", len(ps[0].GetRecords()), len(ps[1].GetRecords()))
	}
	if ps[0].GetHighWatermark() != 10 || ps[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("p0 answer %v", ps[0])
	}
	if ps[2].GetError() != pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION || ps[2].GetLeaderId() != 3 {
		t.Fatalf("refused target answered %v", ps[2])
	}
	if ps[3].GetError() != pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER || len(ps[3].GetRecords()) != 0 {
		t.Fatalf("follower answered %v", ps[3])
	}
	if ps[4].GetError() != pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER || ps[4].GetHighWatermark() != -1 {
		t.Fatalf("closed partition answered %v", ps[4])
	}
	if !slices.Equal(heard, []int{0, 1, 3}) {
		t.Fatalf("decisions heard for %v, want 0, 1, 3", heard)
	}
	want := []string{"heard", "p0 ready", "p0 read", "heard", "p1 ready", "p1 read", "heard", "p3 ready"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}

	// A budget below one batch still reads one; nothing is left for the
	// next partition, which is answered without records.
	events = nil
	resp, total, stop = serve.Once(consumerFetch(0, 0), targets[:2], 30, 1, nil)
	if stop || total != batchBytes || len(resp.GetPartitions()[0].GetRecords()) != batchBytes || len(resp.GetPartitions()[1].GetRecords()) != 0 ||
		resp.GetPartitions()[1].GetHighWatermark() != 10 {
		t.Fatalf("small budget: stop %t total %d, answers %v", stop, total, resp.GetPartitions())
	}
}

// TestBudget: the request's wish clamped to the broker's limit; no wish is
// the limit.
func TestBudget(t *testing.T) {
	for _, c := range []struct {
		max   int32
		limit int
		want  int
	}{{0, 1000, 1000}, {-1, 1000, 1000}, {500, 1000, 500}, {5000, 1000, 1000}} {
		if got := serve.Budget(c.max, c.limit); got != c.want {
			t.Errorf("Budget(%d, %d) = %d, want %d", c.max, c.limit, got, c.want)
		}
	}
}

// verdict is a log's producer check that answers v for any batches.
type verdict producer.Verdict

func (v verdict) CheckProducers(storage.Validated) (producer.Verdict, int) {
	return producer.Verdict(v), 0
}

// TestPropose: an accepted proposal answers its base offset and LE; a
// refused one its error, with the leader for NOT_LEADER_OR_FOLLOWER. The
// log's producer state decides first on a leader: a duplicate is answered
// with the original's offsets and nothing to append, a batch out of
// sequence or of a fenced epoch is refused with its code and why.
func TestPropose(t *testing.T) {
	var events []string
	lead := newPart(t, "p0", 1, &events)
	b, err := storage.EncodeBatch([]storage.Record{{Value: []byte("v")}}, storage.BatchOptions{Producer: &storage.Producer{ID: 9, Epoch: 2, BaseSequence: 5}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := storage.ValidateBatches(b)
	if err != nil {
		t.Fatal(err)
	}
	appendIt := verdict{Outcome: producer.Append}
	var out pb.ProducePartitionResponse
	d, dup := serve.Propose(lead.r, appendIt, v, replica.Proposal{ID: 1, Acks: replica.AcksLeader, TimeoutMs: 1000, NumRecords: 3}, 1, &out)
	if dup || d.Error != pb.ErrorCode_ERROR_CODE_NONE || out.GetError() != pb.ErrorCode_ERROR_CODE_NONE || out.GetBaseOffset() != 10 || out.GetLeaderEpoch() != 1 {
		t.Fatalf("accepted: decision %+v, duplicate %v, answer %v", d, dup, &out)
	}
	leo := lead.r.LogEndOffset()
	out = pb.ProducePartitionResponse{}
	d, dup = serve.Propose(lead.r, verdict{Outcome: producer.Duplicate, Original: producer.Batch{FirstOffset: 4, LastOffset: 6}}, v,
		replica.Proposal{ID: 2, Acks: replica.AcksLeader, TimeoutMs: 1000, NumRecords: 3}, 1, &out)
	if !dup || d.Error != pb.ErrorCode_ERROR_CODE_NONE || out.GetBaseOffset() != 4 || lead.r.LogEndOffset() != leo {
		t.Fatalf("duplicate: decision %+v, duplicate %v, answer %v, LEO %d (was %d)", d, dup, &out, lead.r.LogEndOffset(), leo)
	}
	for _, c := range []struct {
		v    verdict
		code pb.ErrorCode
		msg  string
	}{
		{verdict{Outcome: producer.OutOfOrder, Expected: 3}, pb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER, "producer 9 epoch 2: sequence 5..5, expected 3"},
		{verdict{Outcome: producer.StaleEpoch, CurrentEpoch: 4}, pb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH, "producer 9 epoch 2 is fenced: the partition has epoch 4"},
		{verdict{Outcome: producer.DuplicateAmongOthers, Original: producer.Batch{FirstOffset: 1, LastOffset: 1}}, pb.ErrorCode_ERROR_CODE_DUPLICATE_SEQUENCE_NUMBER, "offsets 1..1 already"},
	} {
		out = pb.ProducePartitionResponse{}
		d, dup = serve.Propose(lead.r, c.v, v, replica.Proposal{ID: 3, Acks: replica.AcksAll, TimeoutMs: 1000, NumRecords: 1}, 1, &out)
		if dup || d.Error != c.code || out.GetError() != c.code || !strings.Contains(out.GetErrorMessage(), c.msg) || lead.r.LogEndOffset() != leo {
			t.Fatalf("%v: decision %+v, answer %v, LEO %d; want %v with %q", c.v.Outcome, d, &out, lead.r.LogEndOffset(), c.code, c.msg)
		}
	}
	follower := newPart(t, "p1", 2, &events)
	out = pb.ProducePartitionResponse{}
	// A follower refuses as NOT_LEADER_OR_FOLLOWER whatever its producer
	// state says: the producer must find the leader.
	serve.Propose(follower.r, verdict{Outcome: producer.OutOfOrder}, v, replica.Proposal{ID: 1, Acks: replica.AcksLeader, TimeoutMs: 1000, NumRecords: 1}, 1, &out)
	if out.GetError() != pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER || out.GetLeaderId() != 2 {
		t.Fatalf("refused: %v", &out)
	}
}

// TestReadOnlyRefusal: a mirror topic's produce refusal is READ_ONLY_TOPIC
// while the mirror runs, NOT_LEADER_OR_FOLLOWER (retriable) once it was
// stopped and the leader is not writable yet.
func TestReadOnlyRefusal(t *testing.T) {
	for state, want := range map[pb.MirrorState]pb.ErrorCode{
		pb.MirrorState_MIRROR_STATE_MIRRORING:   pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC,
		pb.MirrorState_MIRROR_STATE_PAUSED:      pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC,
		pb.MirrorState_MIRROR_STATE_FAILED:      pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC,
		pb.MirrorState_MIRROR_STATE_UNSPECIFIED: pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC,
		pb.MirrorState_MIRROR_STATE_STOPPED:     pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER,
	} {
		if got, msg := serve.ReadOnlyRefusal(state); got != want || msg == "" {
			t.Errorf("%v: %v %q, want %v with a message", state, got, msg, want)
		}
	}
}

// TestValidateProduce: nothing, garbage and batches over the size limit or
// outside the timestamp bounds are refused with their codes; a good batch
// passes with its record count.
func TestValidateProduce(t *testing.T) {
	now := int64(1_700_000_000_000)
	batch := func(ts int64, n int) []byte {
		recs := make([]storage.Record, n)
		for i := range recs {
			recs[i] = storage.Record{Timestamp: ts, Value: []byte("v")}
		}
		b, err := storage.EncodeBatch(recs, storage.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	l := serve.ProduceLimits{MaxBatchBytes: 1 << 20, TimestampAfterMax: time.Hour}
	for _, c := range []struct {
		name string
		recs []byte
		l    serve.ProduceLimits
		want pb.ErrorCode
		n    int
	}{
		{"empty", nil, l, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, 0},
		{"garbage", []byte("not a batch at all, not even close to one"), l, pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, 0},
		{"good", batch(now, 3), l, pb.ErrorCode_ERROR_CODE_NONE, 3},
		{"too large", batch(now, 3), serve.ProduceLimits{MaxBatchBytes: 10, TimestampAfterMax: time.Hour}, pb.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE, 0},
		{"future", batch(now+2*time.Hour.Milliseconds(), 1), l, pb.ErrorCode_ERROR_CODE_INVALID_TIMESTAMP, 0},
		{"old, before bounded", batch(now-2*time.Hour.Milliseconds(), 1), serve.ProduceLimits{MaxBatchBytes: 1 << 20, TimestampBeforeMax: time.Hour, TimestampAfterMax: time.Hour}, pb.ErrorCode_ERROR_CODE_INVALID_TIMESTAMP, 0},
		{"old, before unbounded", batch(now-2*time.Hour.Milliseconds(), 1), l, pb.ErrorCode_ERROR_CODE_NONE, 1},
	} {
		_, n, code := serve.ValidateProduce(c.recs, now, c.l)
		if code != c.want || n != c.n {
			t.Errorf("%s: %v, %d offsets; want %v, %d", c.name, code, n, c.want, c.n)
		}
	}
}

// TestValidateProduceCompacted: a compacted topic (RequireKeys) refuses a
// batch with a keyless record as INVALID_RECORD with Kafka's message,
// whatever its codec; keyed batches pass, and other topics take keyless
// records.
func TestValidateProduceCompacted(t *testing.T) {
	now := int64(1_700_000_000_000)
	batch := func(keys ...string) []byte {
		recs := make([]storage.Record, len(keys))
		for i, k := range keys {
			recs[i] = storage.Record{Timestamp: now, Value: []byte("v")}
			if k != "" {
				recs[i].Key = []byte(k)
			}
		}
		b, err := storage.EncodeBatch(recs, storage.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	compacted := serve.ProduceLimits{MaxBatchBytes: 1 << 20, TimestampAfterMax: time.Hour, RequireKeys: true}
	plain := compacted
	plain.RequireKeys = false
	keyless := append(batch("a", "b"), batch("c", "")...)
	if _, n, code, msg := serve.ValidateProduceMessage(keyless, now, compacted); code != pb.ErrorCode_ERROR_CODE_INVALID_RECORD || msg != serve.KeylessRecordMessage || n != 0 {
		t.Errorf("keyless to a compacted topic: %v %q %d", code, msg, n)
	}
	if _, n, code, msg := serve.ValidateProduceMessage(batch("a", "b"), now, compacted); code != pb.ErrorCode_ERROR_CODE_NONE || msg != "" || n != 2 {
		t.Errorf("keyed to a compacted topic: %v %q %d", code, msg, n)
	}
	if _, n, code := serve.ValidateProduce(keyless, now, plain); code != pb.ErrorCode_ERROR_CODE_NONE || n != 4 {
		t.Errorf("keyless to a plain topic: %v %d", code, n)
	}
}
