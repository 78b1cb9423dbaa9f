package storage_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage"
)

// TestBatchIsKafkaRecordBatchV2 decodes what EncodeBatch writes with
// franz-go's kmsg (a parser nobody here wrote): the header fields, the CRC
// as Kafka computes it (CRC-32C of the bytes after the crc field), and
// every record, byte for byte; and a batch kmsg encodes decodes here to the
// same records (SPEC §2.2).
func TestBatchIsKafkaRecordBatchV2(t *testing.T) {
	recs := []storage.Record{
		{Offset: 40, Timestamp: 1_700_000_000_123, Key: []byte("k0"), Value: []byte("v0")},
		{Offset: 41, Timestamp: 1_700_000_000_100, Key: nil, Value: []byte{}},
		{Offset: 43, Timestamp: 1_700_000_000_999, Key: []byte{}, Value: nil,
			Headers: []storage.Header{{Key: "h", Value: []byte("x")}, {Key: "null", Value: nil}}},
	}
	for _, tc := range []struct {
		name string
		opt  storage.BatchOptions
	}{
		{"no producer", storage.BatchOptions{BaseOffset: 40, LeaderEpoch: 7, RecordOffsets: true}},
		{"idempotent", storage.BatchOptions{BaseOffset: 40, LeaderEpoch: 7, RecordOffsets: true,
			Producer: &storage.Producer{ID: 1<<40 + 5, Epoch: 3, BaseSequence: 1_000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf, err := storage.EncodeBatch(recs, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(buf); err != nil {
				t.Fatalf("kmsg cannot read the batch: %v", err)
			}
			wantProducer := storage.Producer{ID: -1, Epoch: -1, BaseSequence: -1}
			if tc.opt.Producer != nil {
				wantProducer = *tc.opt.Producer
			}
			switch {
			case kb.FirstOffset != 40, kb.PartitionLeaderEpoch != 7, kb.Magic != 2, kb.Attributes != 0,
				kb.LastOffsetDelta != 3, kb.FirstTimestamp != 1_700_000_000_123, kb.MaxTimestamp != 1_700_000_000_999,
				kb.NumRecords != 3, int(kb.Length) != len(buf)-12:
				t.Fatalf("kmsg header %+v", kb)
			case kb.ProducerID != wantProducer.ID, kb.ProducerEpoch != wantProducer.Epoch, kb.FirstSequence != wantProducer.BaseSequence:
				t.Fatalf("kmsg producer fields %d/%d/%d, want %+v", kb.ProducerID, kb.ProducerEpoch, kb.FirstSequence, wantProducer)
			}
			if crc := crc32.Checksum(buf[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(kb.CRC) != crc {
				t.Fatalf("crc field %08x, Kafka's CRC-32C of the rest %08x", uint32(kb.CRC), crc)
			}
			// The records, as kmsg reads them one by one.
			rest := kb.Records
			for i, want := range recs {
				l, n := binary.Varint(rest)
				if n <= 0 || int(l)+n > len(rest) {
					t.Fatalf("record %d: bad length varint", i)
				}
				var kr kmsg.Record
				if err := kr.ReadFrom(rest[:n+int(l)]); err != nil {
					t.Fatalf("record %d: kmsg: %v", i, err)
				}
				rest = rest[n+int(l):]
				if int64(kr.OffsetDelta) != int64(want.Offset-40) || kr.TimestampDelta64 != want.Timestamp-1_700_000_000_123 ||
					!sameBytes(kr.Key, want.Key) || !sameBytes(kr.Value, want.Value) || len(kr.Headers) != len(want.Headers) {
					t.Fatalf("record %d: kmsg read %+v, wrote %+v", i, kr, want)
				}
				for j, h := range want.Headers {
					if kr.Headers[j].Key != h.Key || !sameBytes(kr.Headers[j].Value, h.Value) {
						t.Fatalf("record %d header %d: kmsg read %+v, wrote %+v", i, j, kr.Headers[j], h)
					}
				}
			}
			if len(rest) != 0 {
				t.Fatalf("%d bytes after the records", len(rest))
			}
			// And back: kmsg's encoding of the same batch is byte for byte ours.
			if again := kb.AppendTo(nil); !bytes.Equal(again, buf) {
				t.Fatalf("kmsg re-encodes the batch differently:\n%x\n%x", again, buf)
			}
			v, _, err := storage.DecodeBatch(buf)
			if err != nil {
				t.Fatal(err)
			}
			if v.ProducerID() != wantProducer.ID || v.ProducerEpoch() != wantProducer.Epoch || v.BaseSequence() != wantProducer.BaseSequence ||
				v.LastOffset() != twinlog.Offset(43) {
				t.Fatalf("view: producer %d/%d/%d last %d", v.ProducerID(), v.ProducerEpoch(), v.BaseSequence(), v.LastOffset())
			}
		})
	}
}

// sameBytes tells nil (Kafka's null) from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
