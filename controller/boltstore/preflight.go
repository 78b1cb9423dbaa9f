package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"time"
)

// bbolt v1.5.0's on-disk format (go.etcd.io/bbolt internal/common), read
// here only to check a file before bbolt trusts it. bbolt writes its structs
// in native byte order.
//
//	page:    id u64 | flags u16 | count u16 | overflow u32 | elements... | key/value bytes
//	         a page spans overflow+1 consecutive pages of pageSize bytes
//	meta:    (after a page header) magic u32 | version u32 | pageSize u32 | flags u32 |
//	         root bucket (root pgid u64, sequence u64) | freelist pgid u64 |
//	         pgid (high-water mark) u64 | txid u64 | checksum u64 (FNV-64a of the bytes before it)
//	branch element: pos u32 | ksize u32 | child pgid u64
//	leaf element:   flags u32 | pos u32 | ksize u32 | vsize u32
//	         pos counts from the element's own first byte
//	bucket value (leaf element with flags&1): root pgid u64 | sequence u64 |
//	         if root == 0, an inline leaf page (header and elements) follows
//	freelist: count pgids u64 after the header; a count of 0xFFFF means the
//	         real count is the first u64 and the ids follow it
const (
	pageHeaderBytes = 16
	elementBytes    = 16 // branch and leaf elements have the same size
	bucketHeader    = 16
	metaMagic       = 0xED0CDAED
	metaVersion     = 2
	metaBytes       = 64
	noFreelist      = ^uint64(0)

	branchFlag   = 0x01
	leafFlag     = 0x02
	freelistFlag = 0x10
	bucketFlag   = 0x01

	// maxTreeDepth bounds bucket nesting plus B+tree depth along any path.
	// A B+tree with fan-out of at least 2 over any file bbolt can map is
	// far shallower; the bound makes the walk's cost and bbolt's recursion
	// (cursor, spill, rebalance, Check) finite on a crafted file.
	maxTreeDepth = 256
)

var native = binary.NativeEndian

// preflight checks the whole structure of the bbolt file at path before
// bbolt reads any of it: bbolt trusts its pages, and a damaged one is not an
// error there but a panic, an out-of-bounds read, an allocation of gigabytes
// (an element size past its page is copied at the next commit), or a
// self-referencing branch page that bbolt's recursive traversal follows
// until the stack overflows. The last two kill the process; no recover
// catches them. So every page bbolt may touch is checked here, iteratively:
//
//   - the meta page bbolt will use (the same choice as bbolt's: the valid
//     one with the higher txid) and the page size bbolt will use;
//   - every branch and leaf page reachable from the root bucket, through
//     every nested bucket (inline ones included): page ids inside the
//     high-water mark and the file, header id and flags, element counts,
//     every key and value inside its page, keys non-empty, ordered and inside
//     the range their parent gives them (bbolt's own tx.Check rules), and
//     depth bounded;
//   - the freelist page and its ids;
//   - no page reached twice, as a tree page, the freelist page or a free id.
//
// A missing or empty file is bbolt's to create. The controller's file is a
// few MB, so reading it once at Open is cheap (see BenchmarkPreflight).
//
// It reads under a shared flock (waiting up to timeout), so a file another
// process is writing is a lock timeout, not a torn read reported as corrupt.
func preflight(path string, timeout time.Duration) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // drops the lock
	if err := lockShared(f, timeout); err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return nil
	}
	c := &checker{r: f, size: uint64(st.Size())}
	return c.check()
}

// checker walks one file. It is used once.
type checker struct {
	r        io.ReaderAt
	size     uint64 // file size in bytes
	pageSize uint64
	hwm      uint64   // meta.pgid: pages [0, hwm) exist
	used     []uint64 // bitset over page ids: reached as a tree, freelist or free page
}

// walkItem is one page still to check: a page id, or an inline bucket's
// page (inline != nil, at is the page holding it). lo and hi bound its keys
// (lo ≤ key < hi; nil means unbounded).
type walkItem struct {
	id     uint64
	inline []byte
	at     uint64
	depth  int
	lo, hi []byte
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func (c *checker) check() error {
	meta, err := c.meta()
	if err != nil {
		return err
	}
	root := native.Uint64(meta[16:])
	freelist := native.Uint64(meta[32:])
	c.hwm = native.Uint64(meta[40:])
	// bbolt grows the file before it writes a meta page naming a higher
	// high-water mark, so every page below it is inside the file.
	if c.hwm < 3 || c.hwm > c.size/c.pageSize {
		return corrupt("meta: high-water mark page %d outside the file (%d pages of %d bytes)", c.hwm, c.size/c.pageSize, c.pageSize)
	}
	c.used = make([]uint64, (c.hwm+63)/64)
	c.mark(0)
	c.mark(1)
	if err := c.walk(walkItem{id: root, at: root}); err != nil {
		return err
	}
	if freelist != noFreelist {
		return c.checkFreelist(freelist)
	}
	return nil
}

// meta returns the meta bbolt will use and sets c.pageSize, following
// bbolt's Open: the page size comes from meta 0 if it is valid, else from a
// valid meta 1 found at 1 KiB << i; then of the metas at pages 0 and 1 the
// valid one with the higher txid wins (meta 0 on a tie).
func (c *checker) meta() ([]byte, error) {
	var buf [4096]byte
	n, err := c.r.ReadAt(buf[:], 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if n == len(buf) && validMeta(buf[pageHeaderBytes:]) {
		c.pageSize = uint64(native.Uint32(buf[pageHeaderBytes+8:]))
	} else {
		for i := range 15 {
			pos := uint64(1024) << i
			if pos+1024 >= c.size {
				break
			}
			clear(buf[:])
			if _, err := c.r.ReadAt(buf[:], int64(pos)); err != nil && err != io.EOF {
				return nil, err
			}
			if validMeta(buf[pageHeaderBytes:]) {
				c.pageSize = uint64(native.Uint32(buf[pageHeaderBytes+8:]))
				break
			}
		}
	}
	if c.pageSize == 0 {
		return nil, corrupt("no valid meta page")
	}
	if c.pageSize < 512 || c.pageSize > 1<<24 || c.pageSize&(c.pageSize-1) != 0 {
		return nil, corrupt("meta: page size %d", c.pageSize)
	}
	if c.size < 2*c.pageSize {
		return nil, corrupt("file of %d bytes is smaller than two %d-byte pages", c.size, c.pageSize)
	}
	var best []byte
	for i := range uint64(2) {
		m := make([]byte, metaBytes)
		if _, err := c.r.ReadAt(m, int64(i*c.pageSize+pageHeaderBytes)); err != nil {
			return nil, err
		}
		if validMeta(m) && (best == nil || native.Uint64(m[48:]) > native.Uint64(best[48:])) {
			best = m
		}
	}
	if best == nil {
		return nil, corrupt("no valid meta page at page size %d", c.pageSize)
	}
	if ps := uint64(native.Uint32(best[8:])); ps != c.pageSize {
		return nil, corrupt("meta: page size %d, but bbolt would use %d", ps, c.pageSize)
	}
	return best, nil
}

func validMeta(m []byte) bool {
	if native.Uint32(m[0:]) != metaMagic || native.Uint32(m[4:]) != metaVersion {
		return false
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	return h.Sum64() == native.Uint64(m[56:])
}

// mark records page id as reached; false if it already was.
func (c *checker) mark(id uint64) bool {
	w, b := id/64, uint64(1)<<(id%64)
	if c.used[w]&b != 0 {
		return false
	}
	c.used[w] |= b
	return true
}

// readPage reads page id with its overflow pages, checks its header and
// marks every page it spans.
func (c *checker) readPage(id uint64, what string) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, corrupt("%s page %d outside [2, %d) (the high-water mark)", what, id, c.hwm)
	}
	h := make([]byte, pageHeaderBytes)
	if _, err := c.r.ReadAt(h, int64(id*c.pageSize)); err != nil {
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	if got := native.Uint64(h); got != id {
		return nil, corrupt("page %d: header says page %d", id, got)
	}
	overflow := uint64(native.Uint32(h[12:]))
	if id+overflow >= c.hwm {
		return nil, corrupt("page %d: %d overflow pages run past the high-water mark %d", id, overflow, c.hwm)
	}
	for i := range overflow + 1 {
		if !c.mark(id + i) {
			return nil, corrupt("page %d (of %s page %d) reached twice", id+i, what, id)
		}
	}
	p := make([]byte, (overflow+1)*c.pageSize)
	if _, err := c.r.ReadAt(p, int64(id*c.pageSize)); err != nil {
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	return p, nil
}

// walk checks the tree under the root bucket with an explicit stack: a
// damaged file may be arbitrarily deep or cyclic, and must not be able to
// exhaust this goroutine's stack either.
func (c *checker) walk(root walkItem) error {
	stack := []walkItem{root}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.depth > maxTreeDepth {
			return corrupt("page %d: tree deeper than %d", it.at, maxTreeDepth)
		}
		p, where := it.inline, fmt.Sprintf("page %d (inline bucket)", it.at)
		if p == nil {
			var err error
			if p, err = c.readPage(it.id, "tree"); err != nil {
				return err
			}
			where = fmt.Sprintf("page %d", it.id)
		}
		if len(p) < pageHeaderBytes {
			return corrupt("%s: %d bytes, shorter than a page header", where, len(p))
		}
		flags, count := native.Uint16(p[8:]), uint64(native.Uint16(p[10:]))
		switch {
		case flags == leafFlag:
		case flags == branchFlag && it.inline == nil:
			// bbolt never writes an empty branch page, and a cursor on
			// one reads element 0 regardless of the count.
			if count == 0 {
				return corrupt("%s: branch page without elements", where)
			}
		default:
			return corrupt("%s: flags %#x where a branch or leaf page belongs", where, flags)
		}
		if pageHeaderBytes+count*elementBytes > uint64(len(p)) {
			return corrupt("%s: %d elements do not fit in %d bytes", where, count, len(p))
		}
		prev := it.lo
		for i := range count {
			e := pageHeaderBytes + i*elementBytes
			var key, val []byte
			var child uint64
			var isBucket bool
			if flags == branchFlag {
				pos, ksize := uint64(native.Uint32(p[e:])), uint64(native.Uint32(p[e+4:]))
				child = native.Uint64(p[e+8:])
				if e+pos+ksize > uint64(len(p)) {
					return corrupt("%s: element %d (pos %d, key %d bytes) runs past the page's %d bytes", where, i, pos, ksize, len(p))
				}
				key = p[e+pos : e+pos+ksize]
			} else {
				eflags := native.Uint32(p[e:])
				pos, ksize, vsize := uint64(native.Uint32(p[e+4:])), uint64(native.Uint32(p[e+8:])), uint64(native.Uint32(p[e+12:]))
				if eflags&^bucketFlag != 0 {
					return corrupt("%s: element %d: flags %#x", where, i, eflags)
				}
				if e+pos+ksize+vsize > uint64(len(p)) {
					return corrupt("%s: element %d (pos %d, key %d bytes, value %d bytes) runs past the page's %d bytes", where, i, pos, ksize, vsize, len(p))
				}
				key, val = p[e+pos:e+pos+ksize], p[e+pos+ksize:e+pos+ksize+vsize]
				isBucket = eflags&bucketFlag != 0
			}
			if len(key) == 0 {
				return corrupt("%s: element %d: empty key", where, i)
			}
			// Keys ascend within a page and stay inside the range the
			// parent's separators give the page (bbolt's tx.Check rules).
			if prev != nil && bytes.Compare(key, prev) < 0 || i > 0 && bytes.Equal(key, prev) {
				return corrupt("%s: element %d: key out of order", where, i)
			}
			if it.hi != nil && bytes.Compare(key, it.hi) >= 0 {
				return corrupt("%s: element %d: key not below its parent's next separator", where, i)
			}
			prev = key
			switch {
			case flags == branchFlag:
				hi := it.hi
				if i+1 < count {
					// The next separator, read once the loop reaches it;
					// its bounds are checked then.
					hi = c.branchKey(p, i+1)
				}
				stack = append(stack, walkItem{id: child, at: child, depth: it.depth + 1, lo: key, hi: hi})
			case isBucket:
				if len(val) < bucketHeader {
					return corrupt("%s: element %d: bucket value of %d bytes", where, i, len(val))
				}
				if r := native.Uint64(val); r != 0 {
					stack = append(stack, walkItem{id: r, at: r, depth: it.depth + 1})
					break
				}
				if len(val) < bucketHeader+pageHeaderBytes {
					return corrupt("%s: element %d: inline bucket of %d bytes", where, i, len(val))
				}
				at := it.at
				stack = append(stack, walkItem{inline: val[bucketHeader:], at: at, depth: it.depth + 1})
			}
		}
	}
	return nil
}

// branchKey returns element i's key of branch page p, or nil if it lies
// outside p (the caller reports that when it reaches element i).
func (c *checker) branchKey(p []byte, i uint64) []byte {
	e := pageHeaderBytes + i*elementBytes
	pos, ksize := uint64(native.Uint32(p[e:])), uint64(native.Uint32(p[e+4:]))
	if e+pos+ksize > uint64(len(p)) {
		return nil
	}
	return p[e+pos : e+pos+ksize]
}

// checkFreelist checks the freelist page: bbolt allocates its declared
// count and sorts the ids at Open, and a free id that is also in use would
// be handed out and overwritten by the next commit.
func (c *checker) checkFreelist(id uint64) error {
	p, err := c.readPage(id, "freelist")
	if err != nil {
		return err
	}
	if flags := native.Uint16(p[8:]); flags != freelistFlag {
		return corrupt("freelist page %d: flags %#x", id, flags)
	}
	first, count := uint64(0), uint64(native.Uint16(p[10:]))
	if count == 0xFFFF {
		first, count = 1, native.Uint64(p[pageHeaderBytes:])
	}
	room := (uint64(len(p)) - pageHeaderBytes) / 8
	if first+count > room || count > room {
		return corrupt("freelist page %d: %d ids do not fit in %d bytes", id, count, len(p))
	}
	for i := range count {
		free := native.Uint64(p[pageHeaderBytes+(first+i)*8:])
		if free < 2 || free >= c.hwm {
			return corrupt("freelist page %d: free page %d outside [2, %d)", id, free, c.hwm)
		}
		if !c.mark(free) {
			return corrupt("freelist page %d: free page %d is in use or listed twice", id, free)
		}
	}
	return nil
}
