package lazyfs

import (
	"context"
	osexec "os/exec"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node whose file data goes through the page caches.
type node struct {
	fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
	_ fs.FileReader         = (*handle)(nil)
	_ fs.FileWriter         = (*handle)(nil)
	_ fs.FileFsyncer        = (*handle)(nil)
	_ fs.FileFlusher        = (*handle)(nil)
	_ fs.FileReleaser       = (*handle)(nil)
)

func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(nil))
}

// Open opens the file through its page cache. O_TRUNC truncates the
// cached file, not the backing one.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	trunc := flags&syscall.O_TRUNC != 0
	lf, _, errno := n.LoopbackNode.Open(ctx, flags&^syscall.O_TRUNC) // checks access
	if errno != 0 {
		return nil, 0, errno
	}
	if r, ok := lf.(fs.FileReleaser); ok {
		r.Release(ctx)
	}
	return n.open(n.StableAttr(), n.backingPath(), flags, trunc)
}

func (n *node) open(id fs.StableAttr, path string, flags uint32, trunc bool) (fs.FileHandle, uint32, syscall.Errno) {
	f, errno := n.fs.file(id, path)
	if errno != 0 {
		return nil, 0, errno
	}
	if trunc {
		if errno := f.truncate(0); errno != 0 {
			return nil, 0, errno
		}
	}
	return &handle{f: f, append: flags&syscall.O_APPEND != 0}, 0, 0
}

// Create creates the name in the backing directory at once (names are
// not cached) and opens the file through its page cache.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	trunc := flags&syscall.O_TRUNC != 0
	ch, lf, _, errno := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if r, ok := lf.(fs.FileReleaser); ok {
		r.Release(ctx)
	}
	h, _, errno := n.open(ch.StableAttr(), filepath.Join(n.backingPath(), name), flags, trunc)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	out.Size = uint64(h.(*handle).f.sizeNow())
	return ch, h, 0, 0
}

// Getattr reports the size as the file reads now.
func (n *node) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f := n.fs.cached(n.StableAttr())
	if f == nil {
		return n.LoopbackNode.Getattr(ctx, nil, out)
	}
	f.mu.Lock()
	var st syscall.Stat_t
	err := syscall.Fstat(int(f.fd.Fd()), &st)
	size := f.size
	f.mu.Unlock()
	if err != nil {
		return fs.ToErrno(err)
	}
	out.FromStat(&st)
	out.Size = uint64(size)
	out.Blocks = (uint64(size) + 511) / 512
	return 0
}

// Setattr truncates through the page cache, and passes the rest on.
func (n *node) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		f, errno := n.fs.file(n.StableAttr(), n.backingPath())
		if errno != 0 {
			return errno
		}
		if errno := f.truncate(int64(size)); errno != 0 {
			return errno
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	if in.Valid&(fuse.FATTR_MODE|fuse.FATTR_UID|fuse.FATTR_GID|fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 {
		if errno := n.LoopbackNode.Setattr(ctx, nil, in, out); errno != 0 {
			return errno
		}
	}
	return n.Getattr(ctx, nil, out)
}

// Statx is left to Getattr, which knows the cached size.
func (n *node) Statx(context.Context, fs.FileHandle, uint32, uint32, *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

// CopyFileRange would copy backing data: the kernel falls back to reads
// and writes.
func (n *node) CopyFileRange(context.Context, fs.FileHandle, uint64, *fs.Inode, fs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Tmpfile (O_TMPFILE) is not modelled.
func (n *node) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// handle is an open file: reads and writes go to its page cache.
type handle struct {
	f      *file
	append bool
}

func (h *handle) Read(_ context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, errno := h.f.read(dest, off)
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Write(_ context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.append {
		off = h.f.sizeNow()
	}
	n, errno := h.f.write(data, off)
	return uint32(n), errno
}

// Fsync (and fdatasync) makes the file durable.
func (h *handle) Fsync(context.Context, uint32) syscall.Errno { return h.f.sync() }

// Flush (close) writes nothing back: only fsync does.
func (h *handle) Flush(context.Context) syscall.Errno { return 0 }

func (h *handle) Release(context.Context) syscall.Errno { return 0 }

func run(name string, args ...string) ([]byte, error) {
	return osexec.Command(name, args...).CombinedOutput()
}
