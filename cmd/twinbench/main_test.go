package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog/storage"
)

// The re-stamped batch must be byte for byte what encoding the records
// afresh gives, and valid, for every request, not only the first.
func TestStamperMatchesAppendBatch(t *testing.T) {
	for _, p := range []payload{"", "zeros", "random", "text"} {
		for _, tc := range []struct{ n, size int }{{1, 8}, {64, 1024}, {3, 100}, {2, 5}} {
			vals := p.values(tc.n, tc.size, 7)
			st := newStamper(vals, nil)
			for _, now := range []time.Time{time.Unix(1700000000, 123456789), time.Unix(1800000000, 987654321)} {
				got := st.stamp(now)
				want, err := storage.AppendBatch(nil, stampedRecords(vals, now), storage.BatchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s n=%d size=%d at %v: stamped batch differs from AppendBatch", p, tc.n, tc.size, now)
				}
				if err := storage.BatchView(got).Validate(); err != nil {
					t.Fatalf("%s n=%d size=%d: %v", p, tc.n, tc.size, err)
				}
			}
		}
	}
}

// stampedRecords are the records a stamper of vals sends at now.
func stampedRecords(vals [][]byte, now time.Time) []storage.Record {
	recs := make([]storage.Record, len(vals))
	for i := range recs {
		recs[i].Value = bytes.Clone(vals[i])
		if len(vals[i]) >= 8 {
			binary.BigEndian.PutUint64(recs[i].Value, uint64(now.UnixNano()))
		}
		recs[i].Timestamp = now.UnixMilli()
	}
	return recs
}

// With --compression every request's batch carries the codec in its
// attributes, validates as the broker checks it (decompressing), and
// decompresses to the records it would have sent uncompressed; a payload
// the codec cannot shorten goes out uncompressed, as kgo sends it.
func TestStamperCompresses(t *testing.T) {
	codecs := map[compression]storage.Codec{"none": storage.CodecNone, "gzip": storage.CodecGzip,
		"snappy": storage.CodecSnappy, "lz4": storage.CodecLZ4, "zstd": storage.CodecZstd}
	for name, codec := range codecs {
		for _, p := range []payload{"zeros", "text", "random"} {
			vals := p.values(16, 512, 3)
			st := newStamper(vals, name.compressor())
			for _, now := range []time.Time{time.Unix(1700000000, 123456789), time.Unix(1800000000, 987654321)} {
				bv := storage.BatchView(st.stamp(now))
				// Random values leave a codec only the repeated send
				// times and record headers: kgo sends whichever is shorter.
				if bv.Codec() != codec && (p != "random" || bv.Codec() != storage.CodecNone) {
					t.Fatalf("%s %s: batch codec %s, want %s", name, p, bv.Codec(), codec)
				}
				if bv.Codec() != storage.CodecNone && bv.Size() >= len(st.buf) {
					t.Fatalf("%s %s: compressed batch of %d bytes, uncompressed %d", name, p, bv.Size(), len(st.buf))
				}
				recs, err := bv.Records() // validates
				if err != nil {
					t.Fatalf("%s %s: %v", name, p, err)
				}
				exp := stampedRecords(vals, now)
				if len(recs) != len(exp) {
					t.Fatalf("%s %s: %d records, want %d", name, p, len(recs), len(exp))
				}
				for i := range recs {
					if !bytes.Equal(recs[i].Value, exp[i].Value) || recs[i].Timestamp != exp[i].Timestamp {
						t.Fatalf("%s %s: record %d differs", name, p, i)
					}
				}
			}
		}
	}
}

// The text payload compresses about as JSON logs do (2–4x with lz4), not
// to nothing as zeros do; random hardly at all.
func TestPayloadCompressibility(t *testing.T) {
	for _, tc := range []struct {
		p        payload
		min, max float64
	}{{"zeros", 20, math.Inf(1)}, {"text", 2, 4}, {"random", 0, 1.05}} {
		st := newStamper(tc.p.values(64, 1024, 1), compression("lz4").compressor())
		ratio := float64(len(st.buf)) / float64(len(st.stamp(time.Unix(1700000000, 0))))
		t.Logf("%s: lz4 ratio %.2f", tc.p, ratio)
		if ratio < tc.min || ratio > tc.max {
			t.Errorf("%s: lz4 ratio %.2f, want %v..%v", tc.p, ratio, tc.min, tc.max)
		}
	}
}

// --compression and --payload take their choices and refuse anything
// else, naming what they want.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
		comp    string
		payload string
	}{
		{args: nil, comp: "none", payload: "zeros"},
		{args: []string{"--kafka", "--compression", "lz4", "--payload", "text"}, comp: "lz4", payload: "text"},
		{args: []string{"--compression=zstd"}, comp: "zstd", payload: "zeros"},
		{args: []string{"--compression", "none", "--payload", "random"}, comp: "none", payload: "random"},
		{args: []string{"--compression", "LZ4"}, wantErr: `unknown compression "LZ4" (want one of gzip|lz4|none|snappy|zstd)`},
		{args: []string{"--compression", "brotli"}, wantErr: "unknown compression"},
		{args: []string{"--compression", ""}, wantErr: "unknown compression"},
		{args: []string{"--payload", "json"}, wantErr: `unknown payload "json" (want one of random|text|zeros)`},
		{args: []string{"--kafka", "lz4"}, wantErr: "unexpected arguments"},
	} {
		var out bytes.Buffer
		o, err := parseFlags(tc.args, &out)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(out.String(), tc.wantErr) {
				t.Errorf("%q: error %v, printed %q; want %q", tc.args, err, out.String(), tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if o.compression.String() != tc.comp || o.payload.String() != tc.payload {
			t.Errorf("%q: compression %s payload %s, want %s %s", tc.args, o.compression, o.payload, tc.comp, tc.payload)
		}
	}
}

// An in-process --kafka run with --compression lz4 stores lz4 batches: the
// brokers keep a producer's batch as it came, so every batch in each
// replica's segment is read back with franz-go's kmsg.RecordBatch, its
// codec bits checked and its records decompressed with franz-go's
// decompressor.
func TestInProcessKafkaCompression(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	o := options{inprocess: true, kafka: true, brokers: 3, partitions: 1, rf: 3, minISR: 2, acks: -1,
		recordSize: 200, batchRecords: 4, inflight: 1, duration: 500 * time.Millisecond,
		consume: true, dataDir: dir, compression: "lz4", payload: "text", cpuSplit: true}
	res, err := runOnce(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records == 0 || len(res.Errors) != 0 || res.Config["compression"] != "lz4" || res.Config["api"] != "kafka" {
		t.Fatalf("%d records, errors %v, config %v", res.Records, res.Errors, res.Config)
	}
	// The consumers fetch (by topic id at Fetch v13 and later) and read
	// the lz4 batches' send times.
	if res.ConsumedRecords == 0 || res.EndToEndLatencyMs == nil {
		t.Fatalf("%d of %d records consumed", res.ConsumedRecords, res.Records)
	}
	if res.CompressionRatio <= 1 || res.BatchBytes >= res.UncompressedBatchBytes {
		t.Fatalf("compression ratio %.2f (%d of %d bytes)", res.CompressionRatio, res.BatchBytes, res.UncompressedBatchBytes)
	}
	// --cpu-split sampled both sides: the load's goroutines carry its
	// label and the brokers' do not.
	if p := res.Process; p == nil || p.LoadCPUShare <= 0 || p.LoadCPUShare >= 1 || p.BrokersCPUSecondsPerMB <= 0 {
		t.Fatalf("cpu split %+v", p)
	}
	// Every replica's copy: followers store the leader's batches as is.
	segs, err := filepath.Glob(filepath.Join(dir, "broker-*", res.Config["topic"].(string)+"-0", "*.log"))
	if err != nil || len(segs) != 3 {
		t.Fatalf("no segments (%v)", err)
	}
	dec := kgo.DefaultDecompressor()
	for _, seg := range segs {
		var batches, records int
		buf, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		for bv, err := range storage.Batches(buf) {
			if err != nil {
				t.Fatalf("%s: %v", seg, err)
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(bv); err != nil {
				t.Fatal(err)
			}
			if codec := kgo.CompressionCodecType(rb.Attributes & 0x7); codec != kgo.CodecLz4 {
				t.Fatalf("batch at offset %d: codec %d, want lz4 (%d)", rb.FirstOffset, codec, kgo.CodecLz4)
			}
			raw, err := dec.Decompress(rb.Records, kgo.CodecLz4)
			if err != nil {
				t.Fatalf("batch at offset %d: %v", rb.FirstOffset, err)
			}
			if len(raw) <= len(rb.Records) {
				t.Fatalf("batch at offset %d: %d compressed bytes decompress to %d", rb.FirstOffset, len(rb.Records), len(raw))
			}
			batches++
			records += int(rb.NumRecords)
		}
		if batches == 0 || int64(records) < res.Records {
			t.Fatalf("%s: %d batches of %d records, %d acknowledged", seg, batches, records, res.Records)
		}
	}
}

// splitBatches must yield exactly the batches storage.SplitBatches finds,
// and stop (not panic) at a truncated tail, as a max-bytes fetch may end.
func TestSplitBatches(t *testing.T) {
	var buf []byte
	for i := range 3 {
		st := newStamper(payload("").values(i+1, 16, 0), nil)
		buf = append(buf, st.stamp(time.Unix(int64(i), 0))...)
	}
	want, err := storage.SplitBatches(buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []storage.BatchView
	for bv := range splitBatches(buf) {
		got = append(got, bv)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	n := 0
	for range splitBatches(buf[:len(buf)-1]) {
		n++
	}
	if n != len(want)-1 {
		t.Fatalf("truncated: got %d batches, want %d", n, len(want)-1)
	}
}

// --floor echoes requests of the run's size and counts every round trip it
// times.
func TestFloorEchoes(t *testing.T) {
	res, err := floor(t.Context(), options{batchRecords: 4, recordSize: 100, duration: 300 * time.Millisecond, rate: 200})
	if err != nil {
		t.Fatal(err)
	}
	// 200 records/s in batches of 4: one round trip every 20 ms, so at most
	// 16 start in 300 ms however fast the machine is (the pacing bound; the
	// lower bound is only that some ran, since a slow machine runs fewer).
	if res.Requests < 1 || res.Requests > 16 {
		t.Fatalf("%d round trips in 300 ms paced at one per 20 ms", res.Requests)
	}
	if got, want := res.Config["request_bytes"], len(newStamper(payload("").values(4, 100, 0), nil).stamp(time.Now())); got != want {
		t.Fatalf("request of %v bytes, want %d", got, want)
	}
	if p := res.ProduceLatencyMs; p.P50 <= 0 || p.Max < p.P50 {
		t.Fatalf("latencies %+v", p)
	}
}

// BenchmarkStamp is the load generator's CPU per batch of 64 1 KiB records
// (MB/s of payload): re-stamping and, with a codec, compressing it. With
// --inprocess the run's process CPU per MB includes this; subtracting it
// (and BenchmarkConsumeBatch) estimates the brokers' share.
//
//	go test -run '^$' -bench 'Stamp|ConsumeBatch' ./cmd/twinbench/
func BenchmarkStamp(b *testing.B) {
	for _, c := range []compression{"none", "gzip", "snappy", "lz4", "zstd"} {
		for _, p := range []payload{"zeros", "text", "random"} {
			b.Run(string(c)+"/"+string(p), func(b *testing.B) {
				st := newStamper(p.values(64, 1024, 1), c.compressor())
				b.SetBytes(64 * 1024)
				for b.Loop() {
					st.stamp(time.Now())
				}
			})
		}
	}
}

// BenchmarkConsumeBatch is a bench consumer's CPU per batch it reads
// (storage.BatchView.Records, which validates, decompressing, and then
// decodes), MB/s of payload.
func BenchmarkConsumeBatch(b *testing.B) {
	for _, c := range []compression{"none", "gzip", "snappy", "lz4", "zstd"} {
		for _, p := range []payload{"zeros", "text", "random"} {
			b.Run(string(c)+"/"+string(p), func(b *testing.B) {
				bv := storage.BatchView(newStamper(p.values(64, 1024, 1), c.compressor()).stamp(time.Now()))
				b.SetBytes(64 * 1024)
				for b.Loop() {
					if _, err := bv.Records(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// splitProfile attributes a profile's CPU to the goroutines under the
// load's label and to the rest: a labeled goroutine's spin shows up as
// the load's, an unlabeled one's as other.
func TestSplitProfile(t *testing.T) {
	spin := func(d time.Duration) {
		x := 0
		for end := time.Now().Add(d); time.Now().Before(end); {
			x++
		}
		_ = x
	}
	for _, labeled := range []bool{true, false} {
		split, err := startCPUSplit()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		start := func(context.Context) {
			go func() { spin(300 * time.Millisecond); close(done) }()
		}
		if labeled {
			withLoadLabel(t.Context(), start)
		} else {
			start(t.Context())
		}
		<-done
		load, other, err := split.stop()
		if err != nil {
			t.Fatal(err)
		}
		if (labeled && load <= other) || (!labeled && load != 0) || load+other == 0 {
			t.Fatalf("labeled=%v: load %d ns, other %d ns", labeled, load, other)
		}
	}
}
