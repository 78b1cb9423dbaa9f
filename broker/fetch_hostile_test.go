package broker

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// boundsBroker is broker 1 leading t-0 (R {1,2,3}, ISR all, min ISR 2)
// with fetch.max.bytes fetchMax and n one-record batches of about 1 KiB,
// copied by follower 2 and 3 so the HW is at the LEO.
func boundsBroker(t *testing.T, fetchMax, n int) (*Broker, *partition) {
	t.Helper()
	b, err := New(Config{ID: 1, ControllerAddr: "unused:1", LogDirs: []string{t.TempDir()}, FetchMaxBytes: fetchMax}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.closeDirs(false) })
	p := hostPartition(t, b, twinlog.TopicPartition{Topic: "t", Partition: 0}, 1)
	for range n {
		batch, err := storage.EncodeBatch([]storage.Record{{Value: make([]byte, 1000)}}, storage.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := &pb.ProducePartitionResponse{}
		if b.producePartition(&pb.ProducePartitionData{Topic: "t", Records: batch}, replica.AcksLeader, time.Second, out); out.Error != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("produce: %v", out.Error)
		}
	}
	for _, id := range []twinlog.BrokerID{2, 3} {
		followerFetch(t, b, p, id, 0, nil)
		followerFetch(t, b, p, id, int64(n), nil)
	}
	if hw := p.r.HighWatermark(); hw != twinlog.Offset(n) {
		t.Fatalf("HW %d, want %d", hw, n)
	}
	return b, p
}

func consumerFetch(parts ...*pb.FetchPartition) *pb.FetchRequest {
	return &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, Partitions: parts}
}

func fetchRecordBytes(resp *pb.FetchResponse) int {
	n := 0
	for _, pr := range resp.GetPartitions() {
		n += len(pr.GetRecords())
	}
	return n
}

// TestFetchMaxBytesClamped (issue 13, fetch bounds): a response carries at
// most fetch.max.bytes of records plus one batch (the first batch of a
// partition is always whole), whatever max_bytes and partition_max_bytes
// ask: 0 (a default-valued request), MaxInt32, or a partition limit above
// the total. Before, max_bytes 0 meant 64 MiB and MaxInt32 meant 2 GiB,
// past the transport's message limit: the answer was read and then
// dropped by gRPC, every time.
func TestFetchMaxBytesClamped(t *testing.T) {
	const fetchMax = 4 << 10
	b, _ := boundsBroker(t, fetchMax, 20) // ~20 KiB of records
	oneBatch := 1100
	for _, tc := range []struct {
		name     string
		maxBytes int32
		partMax  int32
	}{
		{"zero", 0, 0},
		{"MaxInt32", math.MaxInt32, 0},
		{"partition MaxInt32", 0, math.MaxInt32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := consumerFetch(&pb.FetchPartition{Topic: "t", CurrentLeaderEpoch: 1, LastFetchedEpoch: -1, PartitionMaxBytes: tc.partMax})
			req.MaxBytes = tc.maxBytes
			resp, err := b.Fetch(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := fetchRecordBytes(resp); got == 0 || got > fetchMax+oneBatch {
				t.Errorf("consumer fetch returned %d record bytes, want 1..%d", got, fetchMax+oneBatch)
			}
			// The follower path has the same bound.
			freq := &pb.FetchRequest{ReplicaId: 2, ReplicaBrokerEpoch: 1, FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER, MaxBytes: tc.maxBytes,
				Partitions: []*pb.FetchPartition{{Topic: "t", CurrentLeaderEpoch: 1, LastFetchedEpoch: -1, PartitionMaxBytes: tc.partMax, FetchSeq: nextFetchSeq()}}}
			// A follower fetching from 0 again has truncated its log: the
			// leader answers it as any follower at offset 0.
			resp, err = b.Fetch(t.Context(), freq)
			if err != nil {
				t.Fatal(err)
			}
			if got := fetchRecordBytes(resp); got == 0 || got > fetchMax+oneBatch {
				t.Errorf("follower fetch returned %d record bytes (%v), want 1..%d", got, resp.GetPartitions()[0].GetError(), fetchMax+oneBatch)
			}
		})
	}
}

func nextFetchSeq() int64 {
	fetchSeq++
	return fetchSeq
}

// TestFetchRefusesMalformedBounds (issue 13, fetch bounds): min_bytes above
// max_bytes, the same partition twice, and more partitions than an answer
// can describe under the message limit are INVALID_REQUEST before anything
// is read; before, all three were served.
func TestFetchRefusesMalformedBounds(t *testing.T) {
	b, _ := boundsBroker(t, DefaultFetchMaxBytes, 1)
	part := func(i int32) *pb.FetchPartition {
		return &pb.FetchPartition{Topic: "t", Partition: i, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}
	}
	many := consumerFetch()
	long := strings.Repeat("x", 249)
	for i := range 40000 {
		many.Partitions = append(many.Partitions, &pb.FetchPartition{Topic: long, Partition: int32(i), CurrentLeaderEpoch: 1, LastFetchedEpoch: -1})
	}
	minAboveMax := consumerFetch(part(0))
	minAboveMax.MinBytes, minAboveMax.MaxBytes = 2000, 1000
	for _, tc := range []struct {
		name string
		req  *pb.FetchRequest
	}{
		{"min bytes above max bytes", minAboveMax},
		{"duplicate partition", consumerFetch(part(0), part(1), part(0))},
		{"more partitions than an answer can hold", many},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := b.Fetch(t.Context(), tc.req)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("fetch: %v (%d partitions answered), want ErrInvalidRequest", err, len(resp.GetPartitions()))
			}
		})
	}
}

// TestFetchMaxWaitCapped (issue 13, fetch bounds): a long poll with
// max_wait_ms MaxInt32 (24 days) and no deadline returns after
// MaxFetchWait. Before, it held the request for the full 24 days.
func TestFetchMaxWaitCapped(t *testing.T) {
	// The broker (and its gRPC server's workers) outside the bubble; the
	// long poll's timer and channels are made inside it, by Fetch.
	b, _ := boundsBroker(t, DefaultFetchMaxBytes, 1)
	synctest.Test(t, func(t *testing.T) {
		req := consumerFetch(&pb.FetchPartition{Topic: "t", FetchOffset: 1, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1})
		req.MaxWaitMs, req.MinBytes = math.MaxInt32, 1
		start := time.Now()
		if _, err := b.Fetch(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > MaxFetchWait {
			t.Fatalf("long poll held %v, want at most %v", d, MaxFetchWait)
		}
	})
}

// TestFetchMaxBytesValidated: fetch.max.bytes plus one batch must leave
// room under the transport's message limit.
func TestFetchMaxBytesValidated(t *testing.T) {
	base := Config{ID: 1, ControllerAddr: "c:1", LogDirs: []string{"d"}}
	if err := base.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, v := range []int{MaxMessageBytes, MaxMessageBytes - storage.DefaultMaxBatchBytes} {
		c := base
		c.FetchMaxBytes = v
		if err := c.Validate(); err == nil {
			t.Errorf("fetch.max.bytes %d accepted with a %d-byte message limit", v, MaxMessageBytes)
		}
	}
}

// TestFetchPartitionOverhead: fetchPartitionOverhead bounds one partition's
// answer without topic name and records, every field at its largest, plus
// the records' and the repeated field's framing.
func TestFetchPartitionOverhead(t *testing.T) {
	trunc := int64(math.MaxInt64)
	pr := &pb.FetchPartitionResponse{
		Topic: "", Partition: math.MinInt32, Error: pb.ErrorCode(math.MaxInt32), LeaderEpoch: math.MinInt32,
		HighWatermark: math.MinInt64, LogStartOffset: math.MinInt64, LogEndOffset: math.MinInt64, LeaderId: math.MinInt32,
		DivergingEpoch:   &pb.EpochEndOffset{Epoch: math.MinInt32, EndOffset: math.MinInt64},
		TruncationOffset: &trunc,
	}
	// Records: tag and a length varint up to MaxMessageBytes; the entry in
	// FetchResponse.partitions: tag and a length varint.
	n := proto.Size(pr) + 1 + 4 + 1 + 4
	if n > fetchPartitionOverhead {
		t.Fatalf("a partition's answer takes %d bytes beside topic and records, fetchPartitionOverhead is %d", n, fetchPartitionOverhead)
	}
}
