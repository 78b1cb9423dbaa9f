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
	_, err = s.Snapshot()
	return err
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

// FuzzOpenCorrupt overwrites bytes of a valid file: opening and reading it
// must return (an error or data), never panic or crash.
func FuzzOpenCorrupt(f *testing.F) {
	valid := validFile(f)
	f.Add(uint32(0), []byte{0xff})
	f.Add(uint32(4096*2+8), []byte{0x40, 0})
	f.Add(uint32(4096*3+10), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Add(uint32(4096+24), []byte{1})
	f.Fuzz(func(t *testing.T, at uint32, patch []byte) {
		b := append([]byte(nil), valid...)
		if len(b) == 0 {
			t.Skip()
		}
		off := int(at % uint32(len(b)))
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
