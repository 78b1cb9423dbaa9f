package vfs

import "syscall"

// WritebackStarter is a File that can start writing a range of its dirty
// pages to the device without waiting for them (Linux sync_file_range with
// SYNC_FILE_RANGE_WRITE). Files without it (MemFS, other systems) need no
// such hint.
type WritebackStarter interface {
	StartWriteback(off, n int64) error
}

// StartWriteback starts writeback of [off, off+n) of f when f supports it
// and reports whether it did. It never waits for the data to reach the
// device, and it is not a durability point: Sync still is.
//
// Why a log wants it: appends dirty the page cache far faster than the
// kernel's flusher drains it, and once a device's dirty share passes its
// threshold every write to it blocks until writeback catches up. Seen on
// the development VM: one pwrite of 64 KiB blocked for 752 ms, and all
// partitions' produce requests waited ~640 ms together every ~5 s.
// Starting writeback every few MiB keeps the dirty pages of each log near
// zero (RocksDB's bytes_per_sync does the same).
func StartWriteback(f File, off, n int64) bool {
	switch w := f.(type) {
	case WritebackStarter:
		return w.StartWriteback(off, n) == nil
	case syscall.Conn:
		return startWriteback(w, off, n)
	}
	return false
}
