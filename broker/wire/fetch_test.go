package wire

import (
	"slices"
	"strings"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

var tp = twinlog.TopicPartition{Topic: "t", Partition: 2}

// TestFetchRequestRoundTrip: a follower's request crosses the wire and
// the leader sees it whole; any other fetcher's replica id is dropped.
func TestFetchRequestRoundTrip(t *testing.T) {
	r := replica.FetchRequest{ReplicaID: 3, BrokerEpoch: 17, FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER,
		FetchOffset: 40, CurrentLeaderEpoch: 5, LastFetchedEpoch: 4, Seq: 99}
	fp := FetchPartition(tp, r, 1024)
	if fp.GetTopic() != "t" || fp.GetPartition() != 2 || fp.GetPartitionMaxBytes() != 1024 {
		t.Fatalf("wire partition %v", fp)
	}
	req := &pb.FetchRequest{ReplicaId: 3, ReplicaBrokerEpoch: 17, FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER, Partitions: []*pb.FetchPartition{fp}}
	if got := FetchRequest(req, fp); got != r {
		t.Fatalf("leader sees %+v, want %+v", got, r)
	}
	for _, ft := range []pb.FetcherType{pb.FetcherType_FETCHER_TYPE_CONSUMER, pb.FetcherType_FETCHER_TYPE_MIRROR} {
		req.FetcherType = ft
		if got := FetchRequest(req, fp); got.ReplicaID != twinlog.NoBroker {
			t.Fatalf("%v fetch names replica %d", ft, got.ReplicaID)
		}
	}
}

// TestAnswerRoundTrip: the leader's decision and records cross the wire;
// the follower gets the decision, the records validated and their batch
// metadata; LOG_TRUNCATED carries its offset.
func TestAnswerRoundTrip(t *testing.T) {
	d := replica.FetchDecision{Error: pb.ErrorCode_ERROR_CODE_NONE, TruncationOffset: -1, ReadFrom: 0, ReadUpTo: 2,
		HighWatermark: 2, LogStartOffset: 0, LogEndOffset: 3, LeaderEpoch: 6}
	if !Readable(d) {
		t.Fatal("a NONE decision with records to read is not readable")
	}
	buf, err := storage.EncodeBatch([]storage.Record{{Value: []byte("a")}, {Value: []byte("b")}}, storage.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := &pb.FetchPartitionResponse{Topic: "t", Partition: 2}
	FillAnswer(out, d, 1)
	out.Records = buf
	req := replica.FetchRequest{ReplicaID: 3, FetchOffset: 0, Seq: 7}
	fr, recs, err := Answer(req, out)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Request != req || fr.LeaderEpoch != 6 || fr.HighWatermark != 2 || fr.LogEndOffset != 3 || fr.DivergingEpoch != nil || out.GetLeaderId() != 1 {
		t.Fatalf("answer %+v (leader %d)", fr, out.GetLeaderId())
	}
	if want := []replica.BatchMeta{{BaseOffset: 0, LastOffset: 1, Epoch: 0}}; !slices.Equal(fr.Batches, want) || len(recs.Batches()) != 1 {
		t.Fatalf("batches %v (%d validated), want %v", fr.Batches, len(recs.Batches()), want)
	}

	div := replica.FetchDecision{DivergingEpoch: &replica.EpochEndOffset{Epoch: 4, EndOffset: 30}, TruncationOffset: -1}
	out = &pb.FetchPartitionResponse{}
	FillAnswer(out, div, 1)
	if Readable(div) || out.GetDivergingEpoch().GetEpoch() != 4 || out.GetDivergingEpoch().GetEndOffset() != 30 || out.TruncationOffset != nil {
		t.Fatalf("diverging answer %v", out)
	}
	fr, _, err = Answer(req, out)
	if err != nil || fr.DivergingEpoch == nil || *fr.DivergingEpoch != *div.DivergingEpoch {
		t.Fatalf("follower sees %+v, %v", fr.DivergingEpoch, err)
	}

	out = &pb.FetchPartitionResponse{}
	FillAnswer(out, replica.FetchDecision{Error: pb.ErrorCode_ERROR_CODE_LOG_TRUNCATED, TruncationOffset: 12}, 1)
	if out.TruncationOffset == nil || *out.TruncationOffset != 12 {
		t.Fatalf("LOG_TRUNCATED without its offset: %v", out)
	}
}

// TestAnswerCorrupt: a corrupt record batch is an error, not an append.
func TestAnswerCorrupt(t *testing.T) {
	buf, _ := storage.EncodeBatch([]storage.Record{{Value: []byte("a")}}, storage.BatchOptions{})
	buf[len(buf)-1] ^= 0xff
	_, _, err := Answer(replica.FetchRequest{}, &pb.FetchPartitionResponse{Records: buf})
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("err %v, want a corrupt batch", err)
	}
}
