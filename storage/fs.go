package storage

import "github.com/twinlog/twinlog/storage/vfs"

// FS, File, OSFS and MemFS are re-exported from storage/vfs, which exists as
// a separate package so that storage/epoch can write its checkpoint through
// the same seam without an import cycle.
type (
	// FS is the file-system seam (see vfs.FS).
	FS = vfs.FS
	// File is an open file (see vfs.File).
	File = vfs.File
	// OSFS is the real file system.
	OSFS = vfs.OSFS
	// MemFS is the crashable in-memory file system (see vfs.MemFS).
	MemFS = vfs.MemFS
)

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS { return vfs.NewMem() }
