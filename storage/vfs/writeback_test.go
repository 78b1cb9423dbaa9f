package vfs

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestStartWriteback(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<16)); err != nil {
		t.Fatal(err)
	}
	if got, want := StartWriteback(f, 0, 1<<16), runtime.GOOS == "linux"; got != want {
		t.Fatalf("StartWriteback on an open file = %v, want %v", got, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if StartWriteback(f, 0, 1<<16) {
		t.Fatal("StartWriteback on a closed file reported success")
	}
	m := NewMem()
	mf, err := m.Create("m")
	if err != nil {
		t.Fatal(err)
	}
	if StartWriteback(mf, 0, 1) {
		t.Fatal("StartWriteback on a MemFS file reported success")
	}
}
