package storage

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/vfs"
)

// FuzzPartitionMetadata: ParsePartitionMetadata never panics, refuses with
// ErrBadCheckpoint, and what it accepts marshals and parses back to the same
// value.
func FuzzPartitionMetadata(f *testing.F) {
	f.Add(MarshalPartitionMetadata(PartitionMetadata{TopicID: "Zq3v0x8cQ2Ki0P5ayqAfyQ", AlignedEpoch: NoAlignedEpoch}))
	f.Add(MarshalPartitionMetadata(PartitionMetadata{TopicID: "t", AlignedEpoch: 2147483647}))
	f.Add([]byte("version: 0\ntopic_id: x\naligned_epoch: 7"))
	f.Add([]byte("version: 0\r\ntopic_id:  x \r\naligned_epoch: +7\r\n"))
	f.Add([]byte("version: 0\ntopic_id: \naligned_epoch: -2\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := ParsePartitionMetadata(data)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v is not ErrBadCheckpoint", err)
			}
			return
		}
		if md.TopicID == "" || md.AlignedEpoch < NoAlignedEpoch {
			t.Fatalf("accepted %+v from %q", md, data)
		}
		again, err := ParsePartitionMetadata(MarshalPartitionMetadata(md))
		if err != nil {
			t.Fatalf("re-parse of %+v (from %q): %v", md, data, err)
		}
		if again != md {
			t.Fatalf("round trip: %+v became %+v", md, again)
		}
	})
}

// FuzzCleanShutdown: ParseCleanShutdown never panics, refuses with
// ErrBadCheckpoint, and an accepted epoch survives a marshal and re-parse.
func FuzzCleanShutdown(f *testing.F) {
	f.Add(MarshalCleanShutdown(0))
	f.Add(MarshalCleanShutdown(42))
	f.Add(MarshalCleanShutdown(9223372036854775807))
	f.Add([]byte(`{"brokerEpoch":3,"version":0}`))
	f.Add([]byte(`{"version":0,"brokerEpoch":-1}`))
	f.Add([]byte(`{"version":0,"brokerEpoch":1e3}`))
	f.Add([]byte(`{"version":0,"brokerEpoch":3} x`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseCleanShutdown(data)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v is not ErrBadCheckpoint", err)
			}
			if e != -1 {
				t.Fatalf("refused file gave epoch %d", e)
			}
			return
		}
		if e < 0 {
			t.Fatalf("accepted negative epoch %d from %q", e, data)
		}
		again, err := ParseCleanShutdown(MarshalCleanShutdown(e))
		if err != nil || again != e {
			t.Fatalf("round trip of %d (from %q): %d, %v", e, data, again, err)
		}
	})
}

// indexFuzzLog is the valid log FuzzIndexBesideValidLog damages: several
// segments, many index and time-index entries, timestamps that go back and
// forth.
type indexFuzzLog struct {
	fsys    *vfs.MemFS
	batches [][]byte // as stored, in offset order
	bases   []twinlog.Offset
	leo     twinlog.Offset
}

func indexFuzzOpts() Options {
	return Options{SegmentMaxBytes: 1500, IndexIntervalBytes: 64}
}

func buildIndexFuzzLog(t testing.TB) indexFuzzLog {
	t.Helper()
	fsys := vfs.NewMem()
	l, err := Open(fsys, testDir, indexFuzzOpts())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		ts := int64(1000 + 10*i)
		if i%5 == 3 {
			ts -= 35 // an older batch: the time index must skip it
		}
		if _, err := l.AppendAsLeader(mustBatch(t, testRecords(1+i%4, ts), BatchOptions{}), twinlog.Epoch(1+i/10)); err != nil {
			t.Fatal(err)
		}
	}
	out := indexFuzzLog{fsys: fsys, leo: l.LogEndOffset()}
	for _, s := range l.segs {
		out.bases = append(out.bases, s.base)
	}
	r, err := l.Read(0, 1<<20, out.leo)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := SplitBatches(r.Batches)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		out.batches = append(out.batches, bytes.Clone(b))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(out.bases) < 3 || out.batches[len(out.batches)-1] == nil {
		t.Fatalf("want several segments, got %d", len(out.bases))
	}
	return out
}

// FuzzIndexBesideValidLog writes arbitrary bytes as the .index and
// .timeindex of one segment of a valid log and opens it, after a clean
// shutdown (indexes trusted if they look sane) or not (recovery point at
// the LEO: the segments below it keep their indexes too). Indexes are a
// cache (SPEC §2.1 "rebuilt if bad"): the open never fails or panics, and
// every batch is still read, whole and unchanged, at each of its offsets.
func FuzzIndexBesideValidLog(f *testing.F) {
	base := buildIndexFuzzLog(f)
	for i, b := range base.bases {
		stem := filepath.Join(testDir, segmentName(b))
		idx, _ := vfs.ReadFile(base.fsys, stem+indexSuffix)
		tidx, _ := vfs.ReadFile(base.fsys, stem+timeIndexSuffix)
		f.Add(uint8(i), true, idx, tidx)
		f.Add(uint8(i), false, idx, tidx)
		if len(idx) >= 2*indexEntrySize {
			// The middle entries moved by one byte: still increasing.
			bad := bytes.Clone(idx)
			bad[len(bad)-indexEntrySize-1]++
			f.Add(uint8(i), true, bad, tidx)
		}
	}
	f.Add(uint8(0), true, []byte{}, []byte{})
	f.Add(uint8(1), true, []byte{0, 0, 0, 1, 0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, seg uint8, clean bool, idx, tidx []byte) {
		lg := buildIndexFuzzLog(t)
		stem := filepath.Join(testDir, segmentName(lg.bases[int(seg)%len(lg.bases)]))
		for p, data := range map[string][]byte{stem + indexSuffix: idx, stem + timeIndexSuffix: tidx} {
			if err := vfs.WriteFileAtomic(lg.fsys, p, data); err != nil {
				t.Fatal(err)
			}
		}
		o := indexFuzzOpts()
		o.CleanShutdown, o.RecoveryPoint = clean, lg.leo
		l, err := Open(lg.fsys, testDir, o)
		if err != nil {
			t.Fatalf("open beside a bad index: %v", err)
		}
		defer l.Close()
		if l.LogEndOffset() != lg.leo || l.LogStartOffset() != 0 {
			t.Fatalf("log [%d, %d), want [0, %d)", l.LogStartOffset(), l.LogEndOffset(), lg.leo)
		}
		for _, want := range lg.batches {
			bv := BatchView(want)
			for _, o := range []twinlog.Offset{bv.BaseOffset(), bv.LastOffset()} {
				r, err := l.Read(o, 1, lg.leo)
				if err != nil {
					t.Fatalf("read %d: %v", o, err)
				}
				if !bytes.Equal(r.Batches, want) {
					t.Fatalf("read %d: got %d bytes (base %d), want the batch at %d", o, len(r.Batches), baseOf(r.Batches), bv.BaseOffset())
				}
			}
		}
		// The time index is a hint; a lookup must still answer.
		for _, ts := range []int64{0, 1000, 1200, 1395, 1500} {
			if _, err := l.OffsetForTimestamp(ts); err != nil {
				t.Fatalf("offset for timestamp %d: %v", ts, err)
			}
		}
	})
}

func baseOf(b []byte) twinlog.Offset {
	if len(b) < BatchHeaderSize {
		return -1
	}
	return BatchView(b).BaseOffset()
}
