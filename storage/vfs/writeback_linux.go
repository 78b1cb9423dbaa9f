package vfs

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// startWriteback issues sync_file_range(SYNC_FILE_RANGE_WRITE) through
// RawConn.Control, which keeps the descriptor from being closed (and its
// number reused) during the call; a closed file fails without a syscall.
func startWriteback(c syscall.Conn, off, n int64) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	}); err != nil {
		return false
	}
	return serr == nil
}
