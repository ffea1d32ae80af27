package lazyfs

import (
	"io"
	"os"
	"sync"
	"syscall"
)

const pageSize = 4096

// file is the page cache of one backing inode. The backing file holds
// what is durable; dirty holds the pages written since the last fsync,
// whole, as the file reads now.
type file struct {
	mu      sync.Mutex
	fd      *os.File // the backing file, read-write
	size    int64    // the size as the file reads now
	valid   int64    // bytes of the backing file still part of the file (a truncation since the last fsync lowers it)
	durable int64    // the backing file's size
	dirty   map[int64][]byte
	dropped bool
}

// readBacking reads the page at index i as the backing file holds it,
// with what lies at or past valid zeroed.
func (f *file) readBacking(i int64) ([]byte, error) {
	p := make([]byte, pageSize)
	off := i * pageSize
	if off >= f.valid {
		return p, nil
	}
	n, err := f.fd.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if end := f.valid - off; end < int64(n) {
		n = int(end)
	}
	clear(p[n:])
	return p, nil
}

func (f *file) page(i int64) ([]byte, error) {
	if p, ok := f.dirty[i]; ok {
		return p, nil
	}
	return f.readBacking(i)
}

func (f *file) read(dest []byte, off int64) (int, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off >= f.size {
		return 0, 0
	}
	n := min(int64(len(dest)), f.size-off)
	done := int64(0)
	for done < n {
		at := off + done
		i, in := at/pageSize, at%pageSize
		p, err := f.page(i)
		if err != nil {
			return 0, errno(err)
		}
		done += int64(copy(dest[done:n], p[in:]))
	}
	return int(n), 0
}

func (f *file) write(data []byte, off int64) (int, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropped {
		return 0, syscall.EIO
	}
	done := 0
	for done < len(data) {
		at := off + int64(done)
		i, in := at/pageSize, at%pageSize
		p, err := f.page(i)
		if err != nil {
			return done, errno(err)
		}
		done += copy(p[in:], data[done:])
		f.dirty[i] = p
	}
	f.size = max(f.size, off+int64(len(data)))
	return done, 0
}

func (f *file) truncate(size int64) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropped {
		return syscall.EIO
	}
	if size < f.size {
		last := size / pageSize
		for i := range f.dirty {
			if i > last || i == last && size%pageSize == 0 {
				delete(f.dirty, i)
			}
		}
		if p, ok := f.dirty[last]; ok {
			clear(p[size%pageSize:])
		}
		f.valid = min(f.valid, size)
	}
	f.size = size
	return 0
}

// sync makes the file durable as it reads now: the backing file gets the
// dirty pages and the size, and is fsynced (so that the test's own
// backing disk keeps it too).
func (f *file) sync() syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropped {
		return syscall.EIO
	}
	if f.valid < f.durable {
		if err := f.fd.Truncate(f.valid); err != nil {
			return errno(err)
		}
	}
	for i, p := range f.dirty {
		off := i * pageSize
		if off >= f.size {
			continue
		}
		if _, err := f.fd.WriteAt(p[:min(int64(pageSize), f.size-off)], off); err != nil {
			return errno(err)
		}
	}
	if err := f.fd.Truncate(f.size); err != nil {
		return errno(err)
	}
	if err := f.fd.Sync(); err != nil {
		return errno(err)
	}
	clear(f.dirty)
	f.valid, f.durable = f.size, f.size
	return 0
}

// drop forgets what was not synced: the power is cut.
func (f *file) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped = true
	f.dirty = nil
	f.fd.Close()
}

func (f *file) sizeNow() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

func errno(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	if pe, ok := err.(*os.PathError); ok {
		if e, ok := pe.Err.(syscall.Errno); ok {
			return e
		}
	}
	return syscall.EIO
}
