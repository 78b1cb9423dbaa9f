package boltstore

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// validFile writes a store with a few deltas and a snapshot and returns its
// bytes.
func validFile(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "valid.db")
	s, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InitClusterID("c1"); err != nil {
		t.Fatal(err)
	}
	for off := int64(1); off <= 20; off++ {
		if err := s.Append(delta(off)); err != nil {
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

// exercise opens path and reads everything a controller reads; it returns
// the first error.
func exercise(path string) error {
	s, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Info(); err != nil {
		return err
	}
	if _, err := s.Load(); err != nil {
		return err
	}
	if _, err := s.ReadDeltas(1, 100); err != nil {
		return err
	}
	if _, err := s.Snapshot(); err != nil {
		return err
	}
	// A write rewrites (and frees) pages: bbolt's commit is where a
	// damaged size or overflow count turns into an allocation.
	in, err := s.Info()
	if err != nil {
		return err
	}
	return s.Append(delta(in.NextOffset))
}

const (
	pageHeaderSize = 16 // id u64, flags u16, count u16, overflow u32
	leafPageFlag   = 0x02
)

// A leaf page whose flags were damaged makes bbolt panic ("invalid page
// type"); the store reports ErrCorrupt naming the file instead.
func TestOpenDamagedLeafPage(t *testing.T) {
	b := validFile(t)
	pageSize := int(binary.LittleEndian.Uint32(b[pageHeaderSize+8:]))
	if pageSize < 512 || len(b)%pageSize != 0 {
		t.Fatalf("page size %d, file %d bytes", pageSize, len(b))
	}
	damaged := 0
	for off := 2 * pageSize; off+pageHeaderSize <= len(b); off += pageSize {
		if binary.LittleEndian.Uint16(b[off+8:]) == leafPageFlag {
			binary.LittleEndian.PutUint16(b[off+8:], 0x40)
			damaged++
		}
	}
	if damaged == 0 {
		t.Fatal("no leaf page found")
	}
	path := filepath.Join(t.TempDir(), "controller.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	err := exercise(path)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("damaged leaf pages: err = %v, want ErrCorrupt naming %s", err, path)
	}
}

// FuzzOpenCorrupt overwrites bytes of a valid file: opening, reading and
// appending to it must return (an error or data), never panic or crash. The
// high bit of at picks the file: without it, a small one whose buckets are
// all inline; with it, one whose log bucket is a branch page over leaves.
func FuzzOpenCorrupt(f *testing.F) {
	small, tree := validFile(f), bigFile(f, 400)
	f.Add(uint32(0), []byte{0xff})
	f.Add(uint32(4096*2+8), []byte{0x40, 0})
	f.Add(uint32(4096*3+10), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Add(uint32(4096+24), []byte{1})
	fp := parsePages(f, tree)
	if id := fp.buckets["log"]; id != 0 {
		at := uint32(1<<31) + uint32(int(id)*fp.pageSize)
		f.Add(at+pageHeaderBytes+8, []byte{byte(id)})   // a child pointing at its parent
		f.Add(at+10, []byte{0xff, 0xff})                // element count
		f.Add(at+12, []byte{0xff, 0xff, 0xff, 0x7f})    // overflow
		f.Add(at+pageHeaderBytes+4, []byte{0xff, 0xff}) // key size
	}
	f.Fuzz(func(t *testing.T, at uint32, patch []byte) {
		valid := small
		if at >= 1<<31 {
			valid = tree
		}
		b := append([]byte(nil), valid...)
		off := int((at &^ (1 << 31)) % uint32(len(b)))
		copy(b[off:], patch)
		path := filepath.Join(t.TempDir(), "controller.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := exercise(path); err != nil && errors.Is(err, ErrCorrupt) && !strings.Contains(err.Error(), path) {
			t.Fatalf("corrupt-file error does not name the file: %v", err)
		}
	})
}
