package vfs

import (
	"errors"
	"io/fs"
	"testing"
)

func TestMemFSCrashClone(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	f, _ := m.Create("/d/a")
	f.Write([]byte("hello"))
	// Neither data nor entry synced: gone.
	if ok, _ := Exists(m.CrashClone(), "/d/a"); ok {
		t.Fatal("unsynced entry survived")
	}
	m.SyncDir("/d")
	c := m.CrashClone()
	if data, _ := ReadFile(c, "/d/a"); len(data) != 0 {
		t.Fatalf("unsynced data survived: %q", data)
	}
	f.Sync()
	f.Write([]byte(" world"))
	if data, _ := ReadFile(m.CrashClone(), "/d/a"); string(data) != "hello" {
		t.Fatalf("got %q", data)
	}
	if data, _ := ReadFile(m, "/d/a"); string(data) != "hello world" {
		t.Fatalf("live: %q", data)
	}
	// Rename is durable only after SyncDir.
	m.Rename("/d/a", "/d/b")
	c = m.CrashClone()
	if ok, _ := Exists(c, "/d/a"); !ok {
		t.Fatal("old name lost before SyncDir")
	}
	m.SyncDir("/d")
	c = m.CrashClone()
	if ok, _ := Exists(c, "/d/a"); ok {
		t.Fatal("old name survived SyncDir")
	}
	// Injection.
	m.SetInjector(func(op Op, name string) error {
		if op == OpSync {
			return ErrInjected
		}
		return nil
	})
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatal(err)
	}
	m.SetInjector(nil)
	if _, err := m.Open("/d/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	// Truncate then extend reads zeros.
	f.Truncate(2)
	f.WriteAt([]byte("x"), 5)
	if data, _ := ReadFile(m, "/d/b"); string(data) != "he\x00\x00\x00x" {
		t.Fatalf("%q", data)
	}
}
