package vfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Op names a MemFS operation for error injection.
type Op int

// Operations an Injector sees.
const (
	OpCreate Op = iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpStat
	OpSyncDir
)

var opNames = [...]string{"create", "open", "read", "write", "sync", "truncate", "remove", "rename", "mkdir", "list", "stat", "syncdir"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Injector decides whether an operation on a path fails. Returning a non-nil
// error makes the operation fail with it before it has any effect.
type Injector func(op Op, name string) error

// ErrInjected is a convenient error for injectors.
var ErrInjected = errors.New("vfs: injected error")

// MemFS is an in-memory FS that can simulate a crash (see package doc).
// The zero value is not usable; call NewMem.
type MemFS struct {
	mu       sync.Mutex
	root     *memNode
	injector Injector
}

var _ FS = (*MemFS)(nil)

type memNode struct {
	isDir   bool
	modTime time.Time
	// files
	data   []byte
	synced []byte
	// directories
	children       map[string]*memNode
	syncedChildren map[string]*memNode
}

func newDir() *memNode {
	return &memNode{isDir: true, children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}}
}

// NewMem returns an empty MemFS. Its root directory always exists.
func NewMem() *MemFS { return &MemFS{root: newDir()} }

// SetInjector installs (or with nil removes) an error injector.
func (m *MemFS) SetInjector(inj Injector) {
	m.mu.Lock()
	m.injector = inj
	m.mu.Unlock()
}

func (m *MemFS) inject(op Op, name string) error {
	if m.injector == nil {
		return nil
	}
	return m.injector(op, name)
}

// CrashClone returns a copy of m holding only durable state: file contents as
// of their last Sync and directory entries as of their last SyncDir.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if !n.isDir {
			d := slices.Clone(n.synced)
			return &memNode{data: d, synced: slices.Clone(d), modTime: n.modTime}
		}
		c := newDir()
		c.modTime = n.modTime
		for name, child := range n.syncedChildren {
			cc := clone(child)
			c.children[name] = cc
			c.syncedChildren[name] = cc
		}
		return c
	}
	return &MemFS{root: clone(m.root)}
}

func split(name string) []string {
	name = path.Clean("/" + name)
	if name == "/" {
		return nil
	}
	return strings.Split(name[1:], "/")
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// walk returns the node of name (nil if missing).
func (m *MemFS) walk(name string) *memNode {
	n := m.root
	for _, p := range split(name) {
		if !n.isDir {
			return nil
		}
		n = n.children[p]
		if n == nil {
			return nil
		}
	}
	return n
}

// parent returns the directory holding name and the base name.
func (m *MemFS) parent(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", pathErr(op, name, fs.ErrInvalid)
	}
	dir := m.walk(strings.Join(parts[:len(parts)-1], "/"))
	if dir == nil || !dir.isDir {
		return nil, "", pathErr(op, name, fs.ErrNotExist)
	}
	return dir, parts[len(parts)-1], nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, _ fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	op := OpOpen
	if flag&os.O_CREATE != 0 {
		op = OpCreate
	}
	if err := m.inject(op, name); err != nil {
		return nil, pathErr("open", name, err)
	}
	dir, base, err := m.parent("open", name)
	if err != nil {
		if n := m.walk(name); n != nil && n.isDir && flag&(os.O_WRONLY|os.O_RDWR) == 0 {
			return &memFile{fs: m, n: n, name: name, read: true}, nil
		}
		return nil, err
	}
	n := dir.children[base]
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case n == nil:
		n = &memNode{modTime: time.Now()}
		dir.children[base] = n
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case n.isDir && flag&(os.O_WRONLY|os.O_RDWR) != 0:
		return nil, pathErr("open", name, errors.New("is a directory"))
	}
	if flag&os.O_TRUNC != 0 && !n.isDir {
		n.data = nil
	}
	f := &memFile{fs: m, n: n, name: name,
		read:   flag&os.O_WRONLY == 0,
		write:  flag&(os.O_WRONLY|os.O_RDWR) != 0,
		append: flag&os.O_APPEND != 0}
	return f, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.inject(OpRemove, name); err != nil {
		return pathErr("remove", name, err)
	}
	dir, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n := dir.children[base]
	if n == nil {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.isDir && len(n.children) > 0 {
		return pathErr("remove", name, errors.New("directory not empty"))
	}
	delete(dir.children, base)
	return nil
}

// RemoveAll implements FS.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.inject(OpRemove, name); err != nil {
		return pathErr("removeall", name, err)
	}
	dir, base, err := m.parent("removeall", name)
	if err != nil {
		return nil
	}
	delete(dir.children, base)
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.inject(OpRename, oldname); err != nil {
		return pathErr("rename", oldname, err)
	}
	od, ob, err := m.parent("rename", oldname)
	if err != nil {
		return err
	}
	nd, nb, err := m.parent("rename", newname)
	if err != nil {
		return err
	}
	n := od.children[ob]
	if n == nil {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	if t := nd.children[nb]; t != nil && t.isDir {
		return pathErr("rename", newname, errors.New("is a directory"))
	}
	delete(od.children, ob)
	nd.children[nb] = n
	return nil
}

// MkdirAll implements FS. New directories are durable in their parent only
// after SyncDir of the parent, except that MkdirAll syncs the entries it
// creates under the root so tests need not sync "/".
func (m *MemFS) MkdirAll(dir string, _ fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.inject(OpMkdir, dir); err != nil {
		return pathErr("mkdir", dir, err)
	}
	n := m.root
	for i, p := range split(dir) {
		c := n.children[p]
		if c == nil {
			c = newDir()
			c.modTime = time.Now()
			n.children[p] = c
			if i == 0 {
				n.syncedChildren[p] = c
			}
		} else if !c.isDir {
			return pathErr("mkdir", dir, errors.New("not a directory"))
		}
		n = c
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.inject(OpList, dir); err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	n := m.walk(dir)
	if n == nil {
		return nil, pathErr("readdir", dir, fs.ErrNotExist)
	}
	if !n.isDir {
		return nil, pathErr("readdir", dir, errors.New("not a directory"))
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.inject(OpStat, name); err != nil {
		return nil, pathErr("stat", name, err)
	}
	n := m.walk(name)
	if n == nil {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	return n.info(path.Base(name)), nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.inject(OpSyncDir, dir); err != nil {
		return pathErr("syncdir", dir, err)
	}
	n := m.walk(dir)
	if n == nil || !n.isDir {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	n.syncedChildren = maps.Clone(n.children)
	return nil
}

// String renders the tree for debugging: one line per entry with its size
// and synced size.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	var walk func(n *memNode, p string)
	walk = func(n *memNode, p string) {
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			c := n.children[name]
			_, durable := n.syncedChildren[name]
			mark := ""
			if !durable {
				mark = " (entry not synced)"
			}
			if c.isDir {
				b.WriteString(p + name + "/" + mark + "\n")
				walk(c, p+name+"/")
			} else {
				b.WriteString(p + name + " " + itoa(len(c.data)) + "/" + itoa(len(c.synced)) + mark + "\n")
			}
		}
	}
	walk(m.root, "/")
	return b.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}

type memInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (n *memNode) info(name string) memInfo {
	return memInfo{name: name, size: int64(len(n.data)), dir: n.isDir, mod: n.modTime}
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

type memFile struct {
	fs                  *MemFS
	n                   *memNode
	name                string
	pos                 int64
	read, write, append bool
	closed              bool
}

var errClosed = errors.New("file already closed")

func (f *memFile) check(op Op, write bool) error {
	if f.closed {
		return pathErr(op.String(), f.name, errClosed)
	}
	if err := f.fs.inject(op, f.name); err != nil {
		return pathErr(op.String(), f.name, err)
	}
	if f.n.isDir && op != OpSync {
		return pathErr(op.String(), f.name, errors.New("is a directory"))
	}
	if write && !f.write {
		return pathErr(op.String(), f.name, fs.ErrPermission)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(OpRead, false); err != nil {
		return 0, err
	}
	if f.pos >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(OpRead, false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) writeAt(p []byte, off int64) {
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		if end > int64(cap(f.n.data)) {
			nd := make([]byte, end, max(end, 2*int64(cap(f.n.data))))
			copy(nd, f.n.data)
			f.n.data = nd
		} else {
			f.n.data = f.n.data[:end]
		}
	}
	copy(f.n.data[off:], p)
	f.n.modTime = time.Now()
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(OpWrite, true); err != nil {
		return 0, err
	}
	if f.append {
		f.pos = int64(len(f.n.data))
	}
	f.writeAt(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(OpWrite, true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("writeat", f.name, fs.ErrInvalid)
	}
	f.writeAt(p, off)
	return len(p), nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, pathErr("seek", f.name, errClosed)
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += int64(len(f.n.data))
	default:
		return 0, pathErr("seek", f.name, fs.ErrInvalid)
	}
	if offset < 0 {
		return 0, pathErr("seek", f.name, fs.ErrInvalid)
	}
	f.pos = offset
	return offset, nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(OpSync, false); err != nil {
		return err
	}
	if f.n.isDir {
		f.n.syncedChildren = maps.Clone(f.n.children)
		return nil
	}
	// A fresh copy: later in-place writes must not change the synced bytes.
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(OpTruncate, true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	if size <= int64(len(f.n.data)) {
		// Copy so the tail bytes of the backing array, which a later writeAt
		// may expose again, are zero as on a real file system.
		f.n.data = slices.Clone(f.n.data[:size])
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, pathErr("stat", f.name, errClosed)
	}
	return f.n.info(path.Base(f.name)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, errClosed)
	}
	f.closed = true
	return nil
}
