// Package vfs is the file-system seam of the storage engine: an FS interface
// with a real implementation (OSFS) and an in-memory one (MemFS) that can
// simulate a machine crash, after pebble's vfs/mem_fs.go.
//
// # Crash semantics of MemFS
//
// Every file keeps two versions of its contents: the current bytes and the
// bytes as of its last File.Sync. Every directory keeps two versions of its
// entries: the current names and the names as of its last FS.SyncDir. CrashClone
// returns a new MemFS built only from the synced versions, which is what a
// POSIX file system guarantees to survive a power cut:
//
//	file contents  ──Write──▶ current ──Sync────▶ synced   (survives)
//	dir entries    ──Create/Rename/Remove──▶ current ──SyncDir──▶ synced
//
// A file created and synced but whose directory was never synced is therefore
// lost by CrashClone, exactly like on ext4 without a directory fsync.
//
// # Concurrency
//
// OSFS is as safe as the OS. MemFS is safe for concurrent use: one mutex guards
// the whole tree. A File handle must not be used from two goroutines at once
// for Read/Write/Seek (the offset is shared); ReadAt and WriteAt may be.
//
// # Atomic writes
//
// WriteFileAtomic writes name.tmp, fsyncs it, renames it over name and fsyncs
// the directory (hashicorp/raft file_snapshot.go), so a reader sees either the
// old or the new contents, never a mix.
package vfs
