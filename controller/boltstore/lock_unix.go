//go:build unix

package boltstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockShared takes a shared flock on f, waiting up to timeout. preflight
// holds it while it reads, so it never reads a file another process (a
// second controller) is writing: bbolt's exclusive lock excludes it, and
// the caller reports a timeout, not a torn read as corruption.
func lockShared(f *os.File, timeout time.Duration) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		var lerr error
		if err := rc.Control(func(fd uintptr) {
			lerr = syscall.Flock(int(fd), syscall.LOCK_SH|syscall.LOCK_NB)
		}); err != nil {
			return err
		}
		if !errors.Is(lerr, syscall.EWOULDBLOCK) {
			return lerr
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timeout waiting for the file lock (another process has %s open)", f.Name())
		}
		// bbolt polls its own lock the same way.
		time.Sleep(50 * time.Millisecond)
	}
}

// unlock drops the flock bbolt took on f. Closing f alone does not: bbolt's
// memory map keeps the open file description, and with it the lock, alive.
func unlock(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = syscall.Flock(int(fd), syscall.LOCK_UN) })
}
