package storage

import (
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/twinlog/twinlog"
)

// wbFS records the StartWriteback calls on the files it opens.
type wbFS struct {
	FS
	mu    sync.Mutex
	calls []wbCall
}

type wbCall struct {
	name   string
	off, n int64
}

type wbFile struct {
	File
	fs   *wbFS
	name string
}

func (f *wbFile) StartWriteback(off, n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.calls = append(f.fs.calls, wbCall{f.name, off, n})
	return nil
}

func (w *wbFS) wrap(name string, f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &wbFile{File: f, fs: w, name: name}, nil
}

func (w *wbFS) Create(name string) (File, error) {
	f, err := w.FS.Create(name)
	return w.wrap(name, f, err)
}
func (w *wbFS) Open(name string) (File, error) {
	f, err := w.FS.Open(name)
	return w.wrap(name, f, err)
}
func (w *wbFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := w.FS.OpenFile(name, flag, perm)
	return w.wrap(name, f, err)
}

// logCalls returns the calls on segment data files, and forgets them.
func (w *wbFS) logCalls() []wbCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []wbCall
	for _, c := range w.calls {
		if strings.HasSuffix(c.name, logSuffix) {
			out = append(out, c)
		}
	}
	w.calls = nil
	return out
}

// wbLog is a log on a recording wbFS with 1 MiB segments that starts
// writeback every 1,000 bytes.
func wbLog(t *testing.T) (*wbFS, *Log, Options) {
	w := &wbFS{FS: NewMemFS()}
	o := testOpts(t, newClock())
	o.SegmentMaxBytes = 1 << 20
	o.WritebackBytes = 1000
	l := openLog(t, w, o)
	t.Cleanup(func() { l.Close() })
	return w, l, o
}

// Appends start writeback of each segment's data in ranges of at least
// WritebackBytes that tile the file from 0 without gaps, and leave less
// than WritebackBytes plus one append unstarted.
func TestWritebackTilesAppendedData(t *testing.T) {
	w, l, o := wbLog(t)
	appendN(t, l, 40, 1, 300, 1, 0)
	calls := w.logCalls()
	if len(calls) == 0 {
		t.Fatal("no writeback started")
	}
	end := int64(0)
	for i, c := range calls {
		if c.off != end || c.n < o.WritebackBytes {
			t.Fatalf("call %d: [%d, +%d), want start %d and at least %d bytes (calls %v)", i, c.off, c.n, end, o.WritebackBytes, calls)
		}
		end = c.off + c.n
	}
	size := l.active().size
	batch := int64(len(batchOf(t, 1, 300, 0)))
	if size-end >= o.WritebackBytes+batch || end > size {
		t.Fatalf("writeback started up to %d of %d bytes", end, size)
	}
}

// After a truncation below the last started range, the next range starts
// at or below the new end of the file: the rewritten bytes are written back
// too.
func TestWritebackAfterTruncation(t *testing.T) {
	w, l, _ := wbLog(t)
	appendN(t, l, 20, 1, 300, 1, 0)
	w.logCalls()
	if err := l.TruncateTo(twinlog.Offset(5)); err != nil {
		t.Fatal(err)
	}
	cut := l.active().size
	appendN(t, l, 10, 1, 300, 1, 0)
	calls := w.logCalls()
	if len(calls) == 0 {
		t.Fatal("no writeback started after the truncation")
	}
	if calls[0].off > cut {
		t.Fatalf("first range after truncation to %d bytes starts at %d", cut, calls[0].off)
	}
}

func TestWritebackDisabled(t *testing.T) {
	w := &wbFS{FS: NewMemFS()}
	o := testOpts(t, newClock())
	o.WritebackBytes = -1
	l := openLog(t, w, o)
	defer l.Close()
	appendN(t, l, 20, 1, 300, 1, 0)
	if calls := w.logCalls(); len(calls) != 0 {
		t.Fatalf("writeback started with WritebackBytes < 0: %v", calls)
	}
}
