package storage

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/vfs"
)

// FuzzReadSegment runs recovery over arbitrary segment bytes: it never
// panics, keeps a prefix of the input made of valid batches, and a second
// recovery keeps exactly that prefix (stable).
func FuzzReadSegment(f *testing.F) {
	var seed []byte
	for i := range 4 {
		seed = append(seed, mustBatch(f, testRecords(i+1, 100), BatchOptions{BaseOffset: twinlog.Offset(10 * i), LeaderEpoch: 1})...)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte{})
	f.Add(append(append([]byte(nil), seed...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := vfs.NewMem()
		fsys.MkdirAll(testDir, 0o755)
		p := filepath.Join(testDir, segmentName(0)+logSuffix)
		fl, _ := fsys.Create(p)
		fl.Write(data)
		fl.Close()
		l, err := Open(fsys, testDir, Options{IndexIntervalBytes: 64})
		if err != nil {
			t.Fatalf("recovery from recovery point 0 must cut, not fail: %v", err)
		}
		kept, _ := vfs.ReadFile(fsys, p)
		if !bytes.HasPrefix(data, kept) {
			t.Fatal("recovery changed bytes it kept")
		}
		if _, err := SplitBatches(kept); err != nil {
			t.Fatalf("kept bytes are not valid batches: %v", err)
		}
		var got []byte
		for from := l.LogStartOffset(); from < l.LogEndOffset(); {
			r, err := l.Read(from, 1<<20, l.LogEndOffset())
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Batches) == 0 {
				break
			}
			got = append(got, r.Batches...)
			from = BatchView(r.Batches[len(r.Batches)-len(lastBatch(t, r.Batches)):]).NextOffset()
		}
		if !bytes.Equal(got, kept) {
			t.Fatalf("read %d bytes, segment keeps %d", len(got), len(kept))
		}
		leo := l.LogEndOffset()
		l.Close()
		l, err = Open(fsys, testDir, Options{IndexIntervalBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		again, _ := vfs.ReadFile(fsys, p)
		if !bytes.Equal(again, kept) || l.LogEndOffset() != leo {
			t.Fatal("second recovery is not stable")
		}
		if _, err := l.Read(leo+1, 10, leo+5); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read past LEO: %v", err)
		}
	})
}

func lastBatch(t *testing.T, buf []byte) BatchView {
	bs, err := SplitBatches(buf)
	if err != nil {
		t.Fatal(err)
	}
	return bs[len(bs)-1]
}
