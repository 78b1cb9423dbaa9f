package main

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twinlog/twinlog/storage"
)

// The re-stamped batch must be byte for byte what encoding the records
// afresh gives, and valid, for every request, not only the first.
func TestStamperMatchesAppendBatch(t *testing.T) {
	for _, tc := range []struct{ n, size int }{{1, 8}, {64, 1024}, {3, 100}, {2, 5}} {
		st := newStamper(tc.n, tc.size)
		for _, now := range []time.Time{time.Unix(1700000000, 123456789), time.Unix(1800000000, 987654321)} {
			got := st.stamp(now)
			recs := make([]storage.Record, tc.n)
			for i := range recs {
				recs[i].Value = make([]byte, tc.size)
				if tc.size >= 8 {
					binary.BigEndian.PutUint64(recs[i].Value, uint64(now.UnixNano()))
				}
				recs[i].Timestamp = now.UnixMilli()
			}
			want, err := storage.AppendBatch(nil, recs, storage.BatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("n=%d size=%d at %v: stamped batch differs from AppendBatch", tc.n, tc.size, now)
			}
			if err := storage.BatchView(got).Validate(); err != nil {
				t.Fatalf("n=%d size=%d: %v", tc.n, tc.size, err)
			}
		}
	}
}

// splitBatches must yield exactly the batches storage.SplitBatches finds,
// and stop (not panic) at a truncated tail, as a max-bytes fetch may end.
func TestSplitBatches(t *testing.T) {
	var buf []byte
	for i := range 3 {
		st := newStamper(i+1, 16)
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
	if got, want := res.Config["request_bytes"], len(newStamper(4, 100).stamp(time.Now())); got != want {
		t.Fatalf("request of %v bytes, want %d", got, want)
	}
	if p := res.ProduceLatencyMs; p.P50 <= 0 || p.Max < p.P50 {
		t.Fatalf("latencies %+v", p)
	}
}
