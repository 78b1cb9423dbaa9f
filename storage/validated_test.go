package storage

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twinlog/twinlog/storage/vfs"
)

// The Append*Validated paths skip crc checks only for what ValidateBatches
// accepted: corrupt input never becomes a Validated, and the append's own
// rules (empty, MaxBatchBytes) still apply.
func TestAppendValidated(t *testing.T) {
	good := append(batchOf(t, 3, 10, 1), batchOf(t, 2, 10, 1)...)
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	var ce *CorruptError
	if _, err := ValidateBatches(bad); !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ValidateBatches(corrupt) = %v, want a *CorruptError", err)
	}

	l := openLog(t, vfs.NewMem(), testOpts(t, newClock()))
	defer l.Close()
	if _, err := l.AppendValidatedAsLeader(Validated{}, 1); !errors.Is(err, ErrEmptyAppend) {
		t.Fatalf("empty append: %v", err)
	}
	v, err := ValidateBatches(good)
	if err != nil {
		t.Fatal(err)
	}
	if v.Bytes() != len(good) || len(v.Batches()) != 2 {
		t.Fatalf("Validated holds %d bytes in %d batches", v.Bytes(), len(v.Batches()))
	}
	info, err := l.AppendValidatedAsLeader(v, 1)
	if err != nil || info.FirstOffset != 0 || info.LastOffset != 4 || info.Bytes != len(good) {
		t.Fatalf("AppendValidatedAsLeader = %+v, %v", info, err)
	}
	rr, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil || !bytes.Equal(rr.Batches, good) {
		t.Fatalf("read back %d bytes, %v", len(rr.Batches), err)
	}

	// Follower: a copy of what the leader stamped, appended to a second log.
	f := openLog(t, vfs.NewMem(), testOpts(t, newClock()))
	defer f.Close()
	fv, err := ValidateBatches(bytes.Clone(rr.Batches))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.AppendValidatedAsFollower(fv.Slice(0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AppendValidatedAsFollower(fv.Slice(0, 1)); !errors.Is(err, ErrInvalidOffset) {
		t.Fatalf("overlapping follower append: %v", err)
	}
	if _, err := f.AppendValidatedAsFollower(fv.Slice(1, 2)); err != nil || f.LogEndOffset() != 5 {
		t.Fatalf("follower append: %v, LEO %d", err, f.LogEndOffset())
	}

	small := testOpts(t, newClock())
	small.MaxBatchBytes = BatchHeaderSize + 8
	s := openLog(t, vfs.NewMem(), small)
	defer s.Close()
	if _, err := s.AppendValidatedAsLeader(v, 1); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("oversize validated append: %v", err)
	}
}

// ReadInto reads into the caller's buffer, overwriting whatever it held.
func TestReadInto(t *testing.T) {
	l := openLog(t, vfs.NewMem(), testOpts(t, newClock()))
	defer l.Close()
	appendN(t, l, 3, 2, 10, 1, 1)
	want, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	dirty := bytes.Repeat([]byte{0xee}, 1<<12)
	got, err := l.ReadInto(0, 1<<20, l.LogEndOffset(), func(n int) []byte { return dirty[:n] })
	if err != nil || !bytes.Equal(got.Batches, want.Batches) || &got.Batches[0] != &dirty[0] {
		t.Fatalf("ReadInto = %d bytes, %v; want the %d bytes Read returns, in the given buffer", len(got.Batches), err, len(want.Batches))
	}
}
