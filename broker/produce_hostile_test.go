package broker

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/storage"
)

// withMaxTimestamp rewrites a batch's header maxTimestamp and its crc, as
// a producer lying about it would.
func withMaxTimestamp(t *testing.T, batch []byte, ts int64) []byte {
	t.Helper()
	const offCRC, offAttributes, offMaxTimestamp = 17, 21, 35
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return batch
}

// TestProduceRefusesHostileBatches (issue 13, batches): a client batch
// whose offset deltas leave a gap (lastOffsetDelta 5 for 2 records: the
// leader would assign 6 offsets to 2 records), whose maxTimestamp is not
// its largest record timestamp, or whose record timestamps are outside
// log.message.timestamp.before.max.ms / after.max.ms of the broker's clock,
// is refused and appends nothing. Before, all were appended.
func TestProduceRefusesHostileBatches(t *testing.T) {
	b, err := New(Config{ID: 1, ControllerAddr: "unused:1", LogDirs: []string{t.TempDir()}, LogMessageTimestampBeforeMax: 24 * time.Hour}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.closeDirs(false) })
	p := hostPartition(t, b, twinlog.TopicPartition{Topic: "t", Partition: 0}, 1)
	now := time.Now().UnixMilli()
	enc := func(opt storage.BatchOptions, recs ...storage.Record) []byte {
		batch, err := storage.EncodeBatch(recs, opt)
		if err != nil {
			t.Fatal(err)
		}
		return batch
	}
	at := func(ts ...int64) []byte {
		var recs []storage.Record
		for _, v := range ts {
			recs = append(recs, storage.Record{Timestamp: v, Value: []byte("v")})
		}
		return enc(storage.BatchOptions{}, recs...)
	}
	for _, tc := range []struct {
		name  string
		batch []byte
		want  pb.ErrorCode
	}{
		{"offset gap", enc(storage.BatchOptions{RecordOffsets: true}, storage.Record{Offset: 0, Timestamp: now}, storage.Record{Offset: 5, Timestamp: now}), pb.ErrorCode_ERROR_CODE_INVALID_RECORD},
		{"maxTimestamp above the records'", withMaxTimestamp(t, at(now, now), math.MaxInt64), pb.ErrorCode_ERROR_CODE_INVALID_RECORD},
		{"maxTimestamp below the records'", withMaxTimestamp(t, at(now-10, now), now-10), pb.ErrorCode_ERROR_CODE_INVALID_RECORD},
		{"timestamp 2h ahead", at(now, now+2*time.Hour.Milliseconds()), pb.ErrorCode_ERROR_CODE_INVALID_TIMESTAMP},
		{"timestamp MaxInt64", at(math.MaxInt64), pb.ErrorCode_ERROR_CODE_INVALID_TIMESTAMP},
		{"timestamp 2 days behind", at(now-48*time.Hour.Milliseconds(), now), pb.ErrorCode_ERROR_CODE_INVALID_TIMESTAMP},
		{"timestamp MinInt64", at(math.MinInt64), pb.ErrorCode_ERROR_CODE_INVALID_TIMESTAMP},
		{"valid", at(now-time.Hour.Milliseconds(), now, now+time.Minute.Milliseconds()), pb.ErrorCode_ERROR_CODE_NONE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.mu.Lock()
			leo := p.r.LogEndOffset()
			p.mu.Unlock()
			out := &pb.ProducePartitionResponse{}
			b.producePartition(&pb.ProducePartitionData{Topic: "t", Records: tc.batch}, replica.AcksLeader, time.Second, out)
			if out.Error != tc.want {
				t.Fatalf("produce: %v, want %v", out.Error, tc.want)
			}
			p.mu.Lock()
			after := p.r.LogEndOffset()
			p.mu.Unlock()
			if tc.want != pb.ErrorCode_ERROR_CODE_NONE && after != leo {
				t.Errorf("refused batch moved the LEO %d -> %d", leo, after)
			}
		})
	}
}

// TestTimestampBoundsDefault: with the defaults (before unbounded, after
// 1h, Kafka 3.6+) an old timestamp passes and one 2h ahead does not.
func TestTimestampBoundsDefault(t *testing.T) {
	c := Config{}.withDefaults()
	now := int64(1_700_000_000_000)
	if !serve.TimestampsAllowed(storage.TimestampRange{Min: math.MinInt64, Max: now}, now, c.LogMessageTimestampBeforeMax, c.LogMessageTimestampAfterMax) {
		t.Error("old timestamp refused with before.max.ms unbounded")
	}
	if serve.TimestampsAllowed(storage.TimestampRange{Min: now, Max: now + 2*time.Hour.Milliseconds()}, now, c.LogMessageTimestampBeforeMax, c.LogMessageTimestampAfterMax) {
		t.Error("timestamp 2h ahead allowed with after.max.ms 1h")
	}
}
