package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
)

func testRecords(n int, ts int64) []Record {
	rs := make([]Record, n)
	for i := range rs {
		rs[i] = Record{Offset: twinlog.Offset(i), Timestamp: ts + int64(i), Key: []byte{byte(i)}, Value: []byte("value")}
	}
	return rs
}

func mustBatch(t testing.TB, rs []Record, opt BatchOptions) []byte {
	t.Helper()
	b, err := EncodeBatch(rs, opt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBatchRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		recs []Record
		opt  BatchOptions
	}{
		{"one record", []Record{{Timestamp: 5, Key: []byte("k"), Value: []byte("v")}}, BatchOptions{}},
		{"null key and value", []Record{{Timestamp: 5}}, BatchOptions{}},
		{"empty key and value", []Record{{Timestamp: 5, Key: []byte{}, Value: []byte{}}}, BatchOptions{}},
		{"headers", []Record{{Timestamp: 1, Value: []byte("v"), Headers: []Header{{"a", []byte("1")}, {"", nil}, {"c", []byte{}}}}}, BatchOptions{}},
		{"negative timestamp delta", []Record{{Timestamp: 100}, {Offset: 1, Timestamp: 50}}, BatchOptions{}},
		{"stamped", testRecords(10, 1000), BatchOptions{BaseOffset: 1 << 40, LeaderEpoch: 7}},
		{"offset gaps", []Record{{Offset: 10, Timestamp: 1}, {Offset: 12, Timestamp: 2}, {Offset: 99, Timestamp: 3}}, BatchOptions{BaseOffset: 10, RecordOffsets: true}},
		{"large value", []Record{{Timestamp: 1, Value: make([]byte, 100_000)}}, BatchOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := mustBatch(t, tt.recs, tt.opt)
			b, rest, err := DecodeBatch(buf)
			if err != nil {
				t.Fatal(err)
			}
			if len(rest) != 0 {
				t.Fatalf("%d bytes left", len(rest))
			}
			got, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			want := make([]Record, len(tt.recs))
			maxTs := tt.recs[0].Timestamp
			for i, r := range tt.recs {
				want[i] = r
				if !tt.opt.RecordOffsets {
					want[i].Offset = tt.opt.BaseOffset + twinlog.Offset(i)
				}
				maxTs = max(maxTs, r.Timestamp)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatal(diff)
			}
			if b.BaseOffset() != tt.opt.BaseOffset || b.LeaderEpoch() != tt.opt.LeaderEpoch ||
				b.LastOffset() != want[len(want)-1].Offset || b.RecordCount() != int32(len(want)) ||
				b.MaxTimestamp() != maxTs || b.FirstTimestamp() != tt.recs[0].Timestamp {
				t.Fatalf("header: base %d epoch %d last %d count %d maxTs %d", b.BaseOffset(), b.LeaderEpoch(), b.LastOffset(), b.RecordCount(), b.MaxTimestamp())
			}
			// Stamping is outside the crc.
			b.SetBaseOffset(77)
			b.SetLeaderEpoch(3)
			if err := b.Validate(); err != nil || b.BaseOffset() != 77 || b.LeaderEpoch() != 3 {
				t.Fatalf("after stamping: %v", err)
			}
		})
	}
}

// fixCRC recomputes the crc so a test can reach the checks after it.
func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

func TestBatchCorruption(t *testing.T) {
	good := mustBatch(t, testRecords(3, 1000), BatchOptions{})
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	// Record 0 starts right after the header: length varint, attributes,
	// timestampDelta, offsetDelta, ...
	rec0 := BatchHeaderSize
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short length", good[:8]},
		{"short header", good[:30]},
		{"truncated tail", good[:len(good)-1]},
		{"length too large", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offBatchLength:], 1<<30); return b })},
		{"length below header", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offBatchLength:], 10); return b })},
		{"negative length", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offBatchLength:], 0xffffffff); return b })},
		{"bad magic", mut(func(b []byte) []byte { b[offMagic] = 1; return b })}, // Kafka's v1 message set
		{"crc mismatch", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b })},
		{"bad crc field", mut(func(b []byte) []byte { b[offCRC] ^= 0xff; return b })},
		{"attributes", mut(func(b []byte) []byte { b[offAttributes+1] = 1; return fixCRC(b) })},
		{"zero records", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offRecordCount:], 0); return fixCRC(b) })},
		{"count too high", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offRecordCount:], 4); return fixCRC(b) })},
		{"count huge", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offRecordCount:], 1<<30); return fixCRC(b) })},
		{"count too low", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offRecordCount:], 2); return fixCRC(b) })},
		{"lastOffsetDelta below the last record", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 1); return fixCRC(b) })},
		{"lastOffsetDelta negative", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xffffffff)
			return fixCRC(b)
		})},
		{"record attributes", mut(func(b []byte) []byte { b[rec0+1] = 1; return fixCRC(b) })},
		{"record length too long", mut(func(b []byte) []byte { b[rec0] = 0x7e; return fixCRC(b) })},
		{"offset deltas not increasing", mut(func(b []byte) []byte {
			// record 1's offsetDelta (zigzag 1 = 2) set to 0.
			r1 := rec0 + 1 + int(b[rec0])/2
			b[r1+3] = 0
			return fixCRC(b)
		})},
		{"trailing bytes", fixCRC(append(append([]byte(nil), good...), 0))},
		{"negative base offset", mut(func(b []byte) []byte { binary.BigEndian.PutUint64(b[offBaseOffset:], 1<<63); return b })},
	}
	// The trailing-bytes case also needs a length that covers the extra byte.
	tb := tests[len(tests)-2].in
	binary.BigEndian.PutUint32(tb[offBatchLength:], uint32(len(tb)-logOverhead))
	fixCRC(tb)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeBatch(tt.in)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Reason == "" {
				t.Fatalf("want *CorruptError with a reason, got %#v", err)
			}
		})
	}
	if _, _, err := DecodeBatch(good); err != nil {
		t.Fatalf("good batch: %v", err)
	}
}

func TestBatchesIteration(t *testing.T) {
	var buf []byte
	for i := range 3 {
		buf = append(buf, mustBatch(t, testRecords(i+1, 0), BatchOptions{BaseOffset: twinlog.Offset(i * 10)})...)
	}
	bs, err := SplitBatches(buf)
	if err != nil || len(bs) != 3 || bs[2].BaseOffset() != 20 {
		t.Fatalf("split: %v %d", err, len(bs))
	}
	bad := append(append([]byte(nil), buf...), 1, 2, 3)
	n := 0
	var last error
	for _, err := range Batches(bad) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	var ce *CorruptError
	if n != 3 || !errors.As(last, &ce) || ce.Position != int64(len(buf)) {
		t.Fatalf("n=%d err=%v", n, last)
	}
}

func TestEncodeBatchRejects(t *testing.T) {
	if _, err := EncodeBatch(nil, BatchOptions{}); err == nil {
		t.Fatal("empty batch accepted")
	}
	_, err := EncodeBatch([]Record{{Offset: 5}, {Offset: 5}}, BatchOptions{RecordOffsets: true})
	if !errors.Is(err, ErrInvalidOffset) {
		t.Fatalf("got %v", err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(mustBatch(f, testRecords(3, 1000), BatchOptions{}))
	f.Add(mustBatch(f, []Record{{Timestamp: 1, Headers: []Header{{"h", nil}}}}, BatchOptions{BaseOffset: 9, LeaderEpoch: 2}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for b, err := range Batches(data) {
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatalf("valid batch whose records fail: %v", err)
			}
			if int32(len(recs)) != b.RecordCount() || recs[len(recs)-1].Offset != b.LastOffset() {
				t.Fatalf("records disagree with header")
			}
			// Re-encoding the records gives a batch with the same records.
			enc, err := EncodeBatch(recs, BatchOptions{BaseOffset: b.BaseOffset(), LeaderEpoch: b.LeaderEpoch(), RecordOffsets: true})
			if err != nil {
				t.Fatal(err)
			}
			again, _, err := DecodeBatch(enc)
			if err != nil {
				t.Fatal(err)
			}
			recs2, _ := again.Records()
			if !cmp.Equal(recs, recs2) {
				t.Fatalf("re-encode changed records")
			}
		}
	})
}

// TestValidateReplicatedBatches: a follower checks a compressed batch by
// its header and crc only (as Kafka's followers), so records its leader
// validated are not decompressed again; any change to the bytes fails the
// crc, and uncompressed batches are still walked record by record.
func TestValidateReplicatedBatches(t *testing.T) {
	recs := testRecords(5, 1000)
	lz4 := []byte(encodeWith(t, recs, CodecLZ4, BatchOptions{}))
	plain := mustBatch(t, recs, BatchOptions{})
	both := append(append([]byte(nil), lz4...), plain...)
	for name, buf := range map[string][]byte{"lz4": lz4, "uncompressed": plain, "both": both} {
		full, err := ValidateBatches(buf)
		if err != nil {
			t.Fatalf("%s: ValidateBatches: %v", name, err)
		}
		repl, err := ValidateReplicatedBatches(buf)
		if err != nil {
			t.Fatalf("%s: ValidateReplicatedBatches: %v", name, err)
		}
		if len(full.Batches()) != len(repl.Batches()) {
			t.Errorf("%s: %d batches, want %d", name, len(repl.Batches()), len(full.Batches()))
		}
	}

	// Records the crc vouches for are not decompressed: an lz4 frame that
	// does not decode, under a crc computed over it, passes here (its leader
	// would have refused it) and fails the full check.
	garbled := append([]byte(nil), lz4...)
	for i := BatchHeaderSize; i < len(garbled); i++ {
		garbled[i] = 0xa5
	}
	fixCRC(garbled)
	if _, err := ValidateBatches(garbled); err == nil {
		t.Fatal("ValidateBatches took an lz4 batch that does not decompress")
	}
	if _, err := ValidateReplicatedBatches(garbled); err != nil {
		t.Errorf("ValidateReplicatedBatches decompressed the records: %v", err)
	}

	// Any byte changed without the crc: refused, compressed or not.
	for name, b := range map[string][]byte{"lz4": lz4, "uncompressed": plain} {
		flipped := append([]byte(nil), b...)
		flipped[len(flipped)-1] ^= 1
		if _, err := ValidateReplicatedBatches(flipped); err == nil {
			t.Errorf("%s: a flipped record byte passed", name)
		}
	}
	// An uncompressed batch is walked: a record count above its records,
	// under a good crc, is refused.
	short := append([]byte(nil), plain...)
	binary.BigEndian.PutUint32(short[offRecordCount:], uint32(len(recs)+1))
	fixCRC(short)
	if _, err := ValidateReplicatedBatches(short); err == nil {
		t.Error("an uncompressed batch with a record count above its records passed")
	}
}

// BenchmarkValidateFollower is a follower's check of a fetched lz4 batch
// of 16 compressible 1 KiB records: the full one (ValidateBatches, which
// decompresses) against ValidateReplicatedBatches (header and crc), per
// batch (16 KiB of records; MB/s counts the compressed bytes).
//
//	go test -run '^$' -bench BenchmarkValidateFollower ./storage/
func BenchmarkValidateFollower(b *testing.B) {
	rs := make([]Record, benchRecords)
	for i := range rs {
		v := []byte(strings.Repeat(fmt.Sprintf(`{"seq":%d,"level":"info","msg":"request served","path":"/api/v1/items"},`, i), benchRecordSize/72))
		rs[i] = Record{Timestamp: 1_700_000_000_000, Key: []byte("key-" + strconv.Itoa(i)), Value: v}
	}
	batch := []byte(encodeWith(b, rs, CodecLZ4, BatchOptions{}))
	for _, f := range []struct {
		name     string
		validate func([]byte) (Validated, error)
	}{{"full", ValidateBatches}, {"replicated", ValidateReplicatedBatches}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				if _, err := f.validate(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
