package storage_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog/storage"
)

// compressWith compresses src with codec c as a Kafka producer does;
// xerial selects the Java client's framing for snappy.
func compressWith(t *testing.T, c storage.Codec, src []byte, xerial bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case storage.CodecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(src)
		w.Close()
	case storage.CodecSnappy:
		if !xerial {
			return snappy.Encode(nil, src)
		}
		buf.Write([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1})
		for len(src) > 0 { // two chunks when there is enough
			n := min(len(src), max(len(src)/2, 1))
			block := snappy.Encode(nil, src[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(block))))
			buf.Write(block)
			src = src[n:]
		}
	case storage.CodecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(src)
		w.Close()
	case storage.CodecZstd:
		w, _ := zstd.NewWriter(&buf)
		w.Write(src)
		w.Close()
	}
	return buf.Bytes()
}

// compressed rebuilds an uncompressed batch with its records compressed
// (attributes, length and CRC as a Kafka producer sets them).
func compressed(t *testing.T, plain []byte, c storage.Codec, xerial bool) []byte {
	t.Helper()
	const header = storage.BatchHeaderSize
	out := append([]byte(nil), plain[:header]...)
	out = append(out, compressWith(t, c, plain[header:], xerial)...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint16(out[21:], uint16(c))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// TestCompressedBatches: a batch compressed with each of Kafka's codecs
// (snappy raw and in the Java client's xerial framing) validates, decodes
// to the records it was built from, and is still one kmsg.RecordBatch
// whose attributes name the codec; a corrupted compressed body, a bomb
// above MaxDecompressedBytes, an unknown codec and the transactional,
// control and log-append-time bits are refused as corrupt.
func TestCompressedBatches(t *testing.T) {
	recs := []storage.Record{
		{Offset: 0, Timestamp: 1_700_000_000_000, Key: []byte("k"), Value: bytes.Repeat([]byte("compress me "), 50)},
		{Offset: 1, Timestamp: 1_700_000_000_001, Value: []byte("v1"), Headers: []storage.Header{{Key: "h", Value: []byte("x")}}},
		{Offset: 2, Timestamp: 1_700_000_000_002, Key: []byte("k2")},
	}
	plain, err := storage.EncodeBatch(recs, storage.BatchOptions{LeaderEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c      storage.Codec
		xerial bool
	}{{storage.CodecGzip, false}, {storage.CodecSnappy, false}, {storage.CodecSnappy, true}, {storage.CodecLZ4, false}, {storage.CodecZstd, false}} {
		name := tc.c.String()
		if tc.xerial {
			name += "-xerial"
		}
		t.Run(name, func(t *testing.T) {
			b := compressed(t, plain, tc.c, tc.xerial)
			if len(b) >= len(plain) {
				t.Fatalf("%d compressed bytes, %d plain: the records are not compressed", len(b), len(plain))
			}
			v, rest, err := storage.DecodeBatch(b)
			if err != nil || len(rest) != 0 {
				t.Fatalf("DecodeBatch: %v (%d bytes left)", err, len(rest))
			}
			if v.Codec() != tc.c {
				t.Fatalf("Codec %v, want %v", v.Codec(), tc.c)
			}
			got, err := v.Records()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(recs) {
				t.Fatalf("%d records, want %d", len(got), len(recs))
			}
			for i := range recs {
				if got[i].Offset != recs[i].Offset || got[i].Timestamp != recs[i].Timestamp ||
					!bytes.Equal(got[i].Key, recs[i].Key) || !bytes.Equal(got[i].Value, recs[i].Value) || len(got[i].Headers) != len(recs[i].Headers) {
					t.Fatalf("record %d = %+v, want %+v", i, got[i], recs[i])
				}
			}
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(b); err != nil || kb.Attributes != int16(tc.c) || kb.NumRecords != 3 {
				t.Fatalf("kmsg: %v, attributes %d, %d records", err, kb.Attributes, kb.NumRecords)
			}

			// Cut the compressed records short and fix the length and CRC
			// (so only the codec can tell): refused.
			bad := append([]byte(nil), b[:len(b)-4]...)
			binary.BigEndian.PutUint32(bad[8:], uint32(len(bad)-12))
			binary.BigEndian.PutUint32(bad[17:], crc32.Checksum(bad[21:], crc32.MakeTable(crc32.Castagnoli)))
			if _, _, err := storage.DecodeBatch(bad); !isCorrupt(err) {
				t.Fatalf("corrupted %s records: %v, want corrupt", tc.c, err)
			}
		})
	}

	t.Run("bomb", func(t *testing.T) {
		// One record whose value is 80 MiB of zeros: a few KiB of gzip.
		huge := []storage.Record{{Value: make([]byte, storage.MaxDecompressedBytes+16<<20)}}
		big, err := storage.EncodeBatch(huge, storage.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := compressed(t, big, storage.CodecGzip, false)
		if len(b) > 1<<20 {
			t.Fatalf("bomb is %d bytes", len(b))
		}
		if _, _, err := storage.DecodeBatch(b); !isCorrupt(err) || !strings.Contains(err.Error(), "decompress to more than") {
			t.Fatalf("bomb: %v, want corrupt (too large)", err)
		}
	})

	for _, tc := range []struct {
		name string
		attr uint16
		want string
	}{
		{"unknown codec", 5, "unknown compression codec 5"},
		{"log append time", 1 << 3, "log-append-time"},
		{"transactional", 1 << 4, "transactions are not supported"},
		{"control", 1 << 5, "transactions are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), plain...)
			binary.BigEndian.PutUint16(b[21:], tc.attr)
			binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
			if _, _, err := storage.DecodeBatch(b); !isCorrupt(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("attributes %#x: %v, want corrupt %q", tc.attr, err, tc.want)
			}
		})
	}
}

func isCorrupt(err error) bool {
	var ce *storage.CorruptError
	return errors.As(err, &ce)
}
