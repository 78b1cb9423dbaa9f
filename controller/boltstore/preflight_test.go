package boltstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// filePages describes the pages of a valid file, found by a test-only walk
// that trusts the file (it only ever reads files the store just wrote).
type filePages struct {
	b        []byte
	pageSize int
	metaOff  int // offset of the meta in force (after its page header)
	hwm      uint64
	freelist uint64
	root     uint64 // root bucket page
	// buckets maps a top-level bucket name to its root page id (0 if inline).
	buckets map[string]uint64
	// inline maps an inline top-level bucket name to the offset of its
	// inline page in b.
	inline map[string]int
}

func parsePages(t testing.TB, b []byte) *filePages {
	t.Helper()
	ps := int(native.Uint32(b[pageHeaderBytes+8:]))
	metaOff := pageHeaderBytes
	if native.Uint64(b[ps+pageHeaderBytes+48:]) > native.Uint64(b[metaOff+48:]) {
		metaOff += ps
	}
	m := b[metaOff:]
	fp := &filePages{
		b: b, pageSize: ps, metaOff: metaOff,
		root: native.Uint64(m[16:]), freelist: native.Uint64(m[32:]), hwm: native.Uint64(m[40:]),
		buckets: map[string]uint64{}, inline: map[string]int{},
	}
	off := int(fp.root) * ps
	if native.Uint16(b[off+8:]) != leafFlag {
		t.Fatalf("root bucket page %d is not a leaf", fp.root)
	}
	for i := range int(native.Uint16(b[off+10:])) {
		e := off + pageHeaderBytes + i*elementBytes
		pos, ks, vs := int(native.Uint32(b[e+4:])), int(native.Uint32(b[e+8:])), int(native.Uint32(b[e+12:]))
		key, val := string(b[e+pos:e+pos+ks]), e+pos+ks
		if native.Uint32(b[e:])&bucketFlag == 0 || vs < bucketHeader {
			continue
		}
		fp.buckets[key] = native.Uint64(b[val:])
		if fp.buckets[key] == 0 {
			fp.inline[key] = val + bucketHeader
		}
	}
	return fp
}

// setMeta changes the meta in force and reseals its checksum, as only a
// crafted file (not a torn write) can.
func (fp *filePages) setMeta(change func(m []byte)) {
	m := fp.b[fp.metaOff : fp.metaOff+metaBytes]
	change(m)
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	native.PutUint64(m[56:], h.Sum64())
}

func (fp *filePages) page(id uint64) []byte {
	return fp.b[int(id)*fp.pageSize : int(id+1)*fp.pageSize]
}

// element returns the bytes of element i of the page starting at p.
func element(p []byte, i int) []byte {
	return p[pageHeaderBytes+i*elementBytes : pageHeaderBytes+(i+1)*elementBytes]
}

// logBranch returns the log bucket's root page, which must be a branch.
func (fp *filePages) logBranch(t testing.TB) (uint64, []byte) {
	t.Helper()
	id := fp.buckets["log"]
	if id == 0 || native.Uint16(fp.page(id)[8:]) != branchFlag {
		t.Fatalf("log bucket root %d is not a branch page", id)
	}
	return id, fp.page(id)
}

// bigFile writes a store whose log bucket is a two-level tree (a branch
// root over leaf pages) and returns its bytes.
func bigFile(t testing.TB, deltas int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.db")
	s, err := Open(path, Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InitClusterID("c1"); err != nil {
		t.Fatal(err)
	}
	for off := int64(1); off <= int64(deltas); off += 100 {
		batch := make([]*twinlogv1.MetadataDelta, 0, 100)
		for o := off; o < off+100 && o <= int64(deltas); o++ {
			batch = append(batch, delta(o))
		}
		if err := s.Append(batch...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// isolated runs body in a child process (the test binary re-executed with
// an environment variable, as Go's own tests do) so a crash the test is
// about (stack overflow, out of memory: fatal errors no recover catches)
// fails the test instead of killing the test binary. The child runs with a
// 2 GiB address-space limit, a 64 MiB file-size limit and a 64 MiB maximum
// stack, so the crash comes quickly and cannot fill memory or disk.
func isolated(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	const env = "BOLTSTORE_ISOLATED"
	if os.Getenv(env) == t.Name() {
		limitChild()
		debug.SetMaxStack(64 << 20)
		body(t)
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+strings.ReplaceAll(t.Name(), "/", "$/^")+"$", "-test.v")
	// The race detector's exit pause (1s by default) would dominate.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), env+"="+t.Name(), "GORACE="+gorace)
	out, err := cmd.CombinedOutput()
	if err != nil {
		s := string(out)
		if len(s) > 3000 {
			s = s[:3000] + "\n..."
		}
		t.Fatalf("child process failed (%v):\n%s", err, s)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child process ran no test:\n%s", out)
	}
}

// TestOpenCorruptPages plants one damaged page per class bbolt cannot
// survive and checks that opening, reading and appending report ErrCorrupt
// naming the file and the page. Before preflight walked the tree, each of
// these killed the process (see the comment of each case) or, at best,
// panicked inside bbolt.
func TestOpenCorruptPages(t *testing.T) {
	cases := []struct {
		name string
		// big selects a file whose log bucket is a branch page over
		// leaves; otherwise every bucket is inline.
		big    bool
		damage func(t testing.TB, fp *filePages)
		want   string
	}{{
		// bbolt's cursor (search, first, last) and its spill follow
		// child page ids without a visited set: a branch that names itself
		// is infinite recursion ("fatal error: stack overflow") or an
		// ever-growing cursor stack ("out of memory").
		name: "branch page referencing itself",
		big:  true,
		damage: func(t testing.TB, fp *filePages) {
			id, p := fp.logBranch(t)
			for i := range int(native.Uint16(p[10:])) {
				native.PutUint64(element(p, i)[8:], id)
			}
		},
		want: "reached twice",
	}, {
		// A cycle through a nested bucket: the log tree's branch points
		// back at the root bucket's page, which holds the log bucket.
		name: "branch page referencing an ancestor",
		big:  true,
		damage: func(t testing.TB, fp *filePages) {
			_, p := fp.logBranch(t)
			for i := range int(native.Uint16(p[10:])) {
				native.PutUint64(element(p, i)[8:], fp.root)
			}
		},
		want: "reached twice",
	}, {
		// Without a freelist page bbolt rebuilds the freelist at Open by
		// walking the tree in a goroutine: a panic there cannot be
		// recovered at all, and a cycle overflows its stack.
		name: "no freelist and a branch page referencing itself",
		big:  true,
		damage: func(t testing.TB, fp *filePages) {
			id, p := fp.logBranch(t)
			native.PutUint64(element(p, 0)[8:], id)
			fp.setMeta(func(m []byte) { native.PutUint64(m[32:], noFreelist) })
		},
		want: "reached twice",
	}, {
		// A high-water mark past the end of the file.
		name: "high-water mark past the file",
		damage: func(t testing.TB, fp *filePages) {
			fp.setMeta(func(m []byte) { native.PutUint64(m[40:], 1<<40) })
		},
		want: "high-water mark page",
	}, {
		// A root bucket page id past the high-water mark.
		name: "root bucket past the high-water mark",
		damage: func(t testing.TB, fp *filePages) {
			fp.setMeta(func(m []byte) { native.PutUint64(m[16:], fp.hwm+3) })
		},
		want: "outside [2,",
	}, {
		// An inline bucket whose page claims to be a branch: bbolt's
		// cursor looks up child page 0, which in an inline bucket is the
		// inline page itself, and recurses until the stack overflows.
		name: "inline bucket page flagged as a branch",
		damage: func(t testing.TB, fp *filePages) {
			off, ok := fp.inline["meta"]
			if !ok {
				t.Fatal("meta bucket is not inline")
			}
			p := fp.b[off:]
			native.PutUint16(p[8:], branchFlag)
			for i := range int(native.Uint16(p[10:])) {
				e := element(p, i)
				// Leaf element (flags, pos, ksize, vsize) rewritten
				// as a branch element (pos, ksize, child page 0); pos
				// moves 0 bytes since both count from the element.
				pos, ks := native.Uint32(e[4:]), native.Uint32(e[8:])
				native.PutUint32(e[0:], pos)
				native.PutUint32(e[4:], ks)
				native.PutUint64(e[8:], 0)
			}
		},
		want: "inline bucket): flags 0x1",
	}, {
		// A value size past the page (the fuzzer's first crasher): bbolt
		// slices the mapping beyond the page, and the next commit that
		// rewrites the page copies the "value" into a node allocated at
		// that size: 2 GiB here, "fatal error: out of memory" (and a file
		// grown to match, where memory allows).
		name: "leaf value past the page",
		damage: func(t testing.TB, fp *filePages) {
			p := fp.page(fp.root)
			native.PutUint32(element(p, int(native.Uint16(p[10:]))-1)[12:], 0x7FFF0000)
		},
		want: "runs past the page",
	}, {
		// A key position past the page, in the root bucket's page.
		name: "leaf key position past the page",
		damage: func(t testing.TB, fp *filePages) {
			p := fp.page(fp.root)
			native.PutUint32(element(p, 0)[4:], 0x7FFF0000)
		},
		want: "runs past the page",
	}, {
		// An element count larger than the page holds: bbolt reads
		// elements (and their positions) from the pages after it.
		name: "element count past the page",
		big:  true,
		damage: func(t testing.TB, fp *filePages) {
			_, br := fp.logBranch(t)
			native.PutUint16(br[10:], 0xFFFF)
		},
		want: "elements do not fit",
	}, {
		// A leaf page's overflow count in the billions: freeing the page
		// at the next commit adds every one of those page ids to the
		// freelist ("out of memory").
		name: "overflow count past the file",
		big:  true,
		damage: func(t testing.TB, fp *filePages) {
			_, br := fp.logBranch(t)
			last := native.Uint64(element(br, int(native.Uint16(br[10:]))-1)[8:])
			native.PutUint32(fp.page(last)[12:], 0x7FFFFFFF)
		},
		want: "overflow pages run past",
	}, {
		// A branch child outside the high-water mark: bbolt reads a
		// "page" past the file.
		name: "branch child past the high-water mark",
		big:  true,
		damage: func(t testing.TB, fp *filePages) {
			_, br := fp.logBranch(t)
			native.PutUint64(element(br, 0)[8:], fp.hwm+1000)
		},
		want: "outside [2,",
	}, {
		// An empty branch page: bbolt's cursor reads element 0 anyway.
		name: "branch page without elements",
		big:  true,
		damage: func(t testing.TB, fp *filePages) {
			_, br := fp.logBranch(t)
			native.PutUint16(br[10:], 0)
		},
		want: "branch page without elements",
	}, {
		// A freelist that lists a page in use: the next commit would
		// allocate it and overwrite live data, possibly into a cycle.
		name: "free page in use",
		big:  true,
		damage: func(t testing.TB, fp *filePages) {
			p := fp.page(fp.freelist)
			native.PutUint16(p[10:], 1)
			native.PutUint64(p[pageHeaderBytes:], fp.root)
		},
		want: "is in use or listed twice",
	}, {
		// A freelist count in the trillions (bbolt allocates and sorts
		// that many ids at Open).
		name: "freelist count past the page",
		damage: func(t testing.TB, fp *filePages) {
			p := fp.page(fp.freelist)
			native.PutUint16(p[10:], 0xFFFF)
			native.PutUint64(p[pageHeaderBytes:], 1<<40)
		},
		want: "ids do not fit",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			isolated(t, func(t *testing.T) {
				var b []byte
				if tc.big {
					b = bigFile(t, 400)
				} else {
					b = validFile(t)
				}
				fp := parsePages(t, b)
				tc.damage(t, fp)
				path := filepath.Join(t.TempDir(), "controller.db")
				if err := os.WriteFile(path, fp.b, 0o600); err != nil {
					t.Fatal(err)
				}
				err := exercise(path)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) ||
					!strings.Contains(err.Error(), "page") || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want ErrCorrupt naming %s and %q", err, path, tc.want)
				}
				t.Log(err)
			})
		})
	}
}

// TestFailedOpenClosesFile makes bbolt panic after it opened, locked and
// mapped the file: the failed Open must close the file (no fd left behind,
// the flock dropped so the next Open does not time out).
func TestFailedOpenClosesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "controller.db")
	if err := os.WriteFile(path, validFile(t), 0o600); err != nil {
		t.Fatal(err)
	}
	defer func(orig func(string, os.FileMode, *bolt.Options) (*bolt.DB, error)) { boltOpen = orig }(boltOpen)
	boltOpen = func(path string, mode os.FileMode, opts *bolt.Options) (*bolt.DB, error) {
		if _, err := bolt.Open(path, mode, opts); err != nil {
			return nil, err
		}
		panic("damaged page")
	}
	before := openFDs(t)
	for range 20 {
		if _, err := Open(path, Options{Timeout: 50 * time.Millisecond}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open after a panic in bbolt: err = %v, want ErrCorrupt", err)
		}
	}
	if after := openFDs(t); after > before {
		t.Fatalf("%d file descriptors open after 20 failed Opens, %d before", after, before)
	}
	boltOpen = bolt.Open
	s, err := Open(path, Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open after failed Opens: %v (lock left behind?)", err)
	}
	_ = s.Close()
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(fds)
}

// TestPreflightAcceptsValidFiles: every file the store writes passes,
// across growth, compaction (freed pages on the freelist) and reopen.
func TestPreflightAcceptsValidFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "controller.db")
	next := int64(1)
	for round := range 6 {
		s, err := Open(path, Options{Timeout: time.Second, NoSync: true})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for ; next <= int64(round+1)*500; next++ {
			if err := s.Append(delta(next)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Compact(&twinlogv1.MetadataSnapshot{Offset: next - 1, ClusterId: "c1"}, 100); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := preflight(path, time.Second); err != nil {
			t.Fatalf("after %d deltas: %v", next-1, err)
		}
	}
	s := open(t, path)
	defer s.Close()
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
}

// TestPreflightWaitsForWriter: while another Store (another controller)
// holds the file, preflight does not read it: what it would read may be
// half-written, and a torn read must be a lock timeout, not "corrupt".
func TestPreflightWaitsForWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "controller.db")
	s := open(t, path)
	defer s.Close()
	// Stand in for a write in progress: a leaf page not yet consistent.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fp := parsePages(t, b)
	native.PutUint16(fp.page(fp.root)[10:], 0xFFFF)
	if err := os.WriteFile(path, fp.b, 0o600); err != nil {
		t.Fatal(err)
	}
	err = preflight(path, 20*time.Millisecond)
	if err == nil || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("preflight of a file another Store holds: %v, want a lock timeout", err)
	}
}

// BenchmarkPreflight measures the walk at Open over a file of 100,000
// deltas.
func BenchmarkPreflight(b *testing.B) {
	path := filepath.Join(b.TempDir(), "controller.db")
	if err := os.WriteFile(path, bigFile(b, 100000), 0o600); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := preflight(path, time.Second); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Size())/(1<<20), "file-MiB")
}

// TestOpenCorruptNoLeak opens hundreds of damaged files in one process: no
// Open or read may allocate without bound, and none may leave a file
// descriptor or a mapping of the file behind (over the thousands of inputs
// a fuzzer tries, either would exhaust the process).
func TestOpenCorruptNoLeak(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 60
	}
	files := [][]byte{validFile(t), bigFile(t, 400)}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(13, 13))
	before := openFDs(t)
	var worst uint64
	for i := range n {
		b := append([]byte(nil), files[i%2]...)
		// Damage one page header or element area, where bbolt's
		// trust does harm.
		ps := int(native.Uint32(b[pageHeaderBytes+8:]))
		at := 2*ps + rng.IntN(len(b)-2*ps)
		if rng.IntN(2) == 0 {
			at -= at % ps
			at += rng.IntN(pageHeaderBytes + 4*elementBytes)
		}
		for j := range 1 + rng.IntN(8) {
			if at+j < len(b) {
				b[at+j] = byte(rng.Uint32())
			}
		}
		path := filepath.Join(dir, fmt.Sprintf("controller-%d.db", i))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err := exercise(path)
		runtime.ReadMemStats(&m1)
		if err != nil && errors.Is(err, ErrCorrupt) && !strings.Contains(err.Error(), path) {
			t.Fatalf("corrupt-file error does not name the file: %v", err)
		}
		worst = max(worst, m1.TotalAlloc-m0.TotalAlloc)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	if worst > 64<<20 {
		t.Errorf("one damaged file made Open and a few reads allocate %d MiB", worst>>20)
	}
	if after := openFDs(t); after > before {
		t.Errorf("%d file descriptors open after %d damaged files, %d before", after, n, before)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	if strings.Contains(string(maps), dir) {
		t.Errorf("damaged files still mapped:\n%s", maps)
	}
	t.Logf("worst allocation %d KiB", worst>>10)
}
