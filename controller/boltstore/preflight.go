package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's on-disk constants (go.etcd.io/bbolt internal/common), read here
// only to check a file before bbolt trusts it.
const (
	pageHeaderBytes = 16 // id u64, flags u16, count u16, overflow u32
	metaMagic       = 0xED0CDAED
	metaVersion     = 2
	metaBytes       = 64 // magic, version, pageSize, flags, root(16), freelist, pgid, txid, checksum
	noFreelist      = ^uint64(0)
	freelistFlag    = 0x10
)

// preflight checks what bbolt reads at Open without bounds: the meta page it
// will use and its freelist page. bbolt allocates the freelist's declared
// count before looking at the file, so a damaged count is an out-of-memory
// crash, which no recover catches. A missing or empty file is bbolt's to
// create; metas that are both invalid are bbolt's to report.
func preflight(path string) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	var best []byte
	var bestTxid uint64
	for i := range 2 {
		// Meta page i starts at i*pageSize; the page size is in meta 0,
		// which bbolt also trusts only when its checksum matches.
		off := int64(0)
		if i == 1 {
			if best == nil {
				break
			}
			off = int64(binary.LittleEndian.Uint32(best[8:]))
		}
		m := make([]byte, metaBytes)
		if _, err := f.ReadAt(m, off+pageHeaderBytes); err != nil && err != io.EOF {
			return err
		}
		if !validMeta(m) {
			continue
		}
		if txid := binary.LittleEndian.Uint64(m[48:]); best == nil || txid > bestTxid {
			best, bestTxid = m, txid
		}
	}
	if best == nil {
		return nil
	}
	pageSize := int64(binary.LittleEndian.Uint32(best[8:]))
	freelist := binary.LittleEndian.Uint64(best[32:])
	if freelist == noFreelist {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: freelist page %d: %s", ErrCorrupt, path, freelist, fmt.Sprintf(format, args...))
	}
	if pageSize < 512 || freelist > uint64(size/pageSize) {
		return bad("outside the file (%d bytes, page size %d)", size, pageSize)
	}
	start := int64(freelist) * pageSize
	h := make([]byte, pageHeaderBytes+8)
	if _, err := f.ReadAt(h, start); err != nil && err != io.EOF {
		return err
	}
	if binary.LittleEndian.Uint16(h[8:])&freelistFlag == 0 {
		return bad("not a freelist page")
	}
	count, overflow := uint64(binary.LittleEndian.Uint16(h[10:])), uint64(binary.LittleEndian.Uint32(h[12:]))
	ids := count
	if count == 0xFFFF {
		// The real count is the first element.
		ids = binary.LittleEndian.Uint64(h[16:]) + 1
	}
	span := (overflow + 1) * uint64(pageSize)
	if overflow >= uint64(size) || start+int64(span) > size {
		return bad("%d overflow pages run past the end of the file", overflow)
	}
	if ids > (span-pageHeaderBytes)/8 {
		return bad("%d ids do not fit in %d bytes", ids, span)
	}
	return nil
}

func validMeta(m []byte) bool {
	if binary.LittleEndian.Uint32(m[0:]) != metaMagic || binary.LittleEndian.Uint32(m[4:]) != metaVersion {
		return false
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	return h.Sum64() == binary.LittleEndian.Uint64(m[56:])
}
