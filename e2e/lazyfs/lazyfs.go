// Package lazyfs is a FUSE file system for power-loss tests, after
// Jepsen's LazyFS: a passthrough over a backing directory whose file
// data stays in memory, in a page cache of its own per file, until the
// file is fsynced (fsync or fdatasync). CutPower unmounts it without
// writing that cache back, as a power cut loses what the kernel had not
// written to the disk; mounting the backing directory again shows only
// what was made durable.
//
//	fs, err := lazyfs.Mount(mountpoint, backing)
//	... processes write under mountpoint, fsync some of it ...
//	... kill them (the power is cut: nothing runs on) ...
//	fs.CutPower()                        // unsynced data is gone
//	fs, err = lazyfs.Mount(mountpoint, backing)
//
// What it models, and what not:
//   - File contents and sizes (writes, truncation, O_TRUNC) are lost
//     unless the file was fsynced after them. A page written before an
//     fsync of its file is never lost, one written after always is: no
//     torn pages, no reordering within what was not synced.
//   - Names (create, rename, link, unlink, mkdir) are passed through to
//     the backing directory at once: they survive a cut whether or not
//     their directory was fsynced. (LazyFS does the same.) A file created
//     and never fsynced survives the cut empty.
//
// It is test code: only the e2e tests import it, so the spl binary does
// not link it (nor go-fuse).
package lazyfs

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is one mount of a backing directory.
type FS struct {
	Mountpoint, Backing string

	srv *fuse.Server

	mu    sync.Mutex
	files map[fs.StableAttr]*file // page caches by backing inode
	cut   bool
}

// Mount mounts backing at mountpoint (both directories must exist). The
// caller must not touch the mount from its own process while another
// process uses it heavily: let child processes do the I/O.
func Mount(mountpoint, backing string) (*FS, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("lazyfs: backing: %w", err)
	}
	l := &FS{Mountpoint: mountpoint, Backing: backing, files: make(map[fs.StableAttr]*file)}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fs: l}
	}
	rn := &node{LoopbackNode: fs.LoopbackNode{RootData: root}, fs: l}
	root.RootNode = rn
	zero := time.Duration(0)
	srv, err := fs.Mount(mountpoint, rn, &fs.Options{
		MountOptions: fuse.MountOptions{FsName: "lazyfs", Name: "lazyfs", MaxWrite: 1 << 20},
		// Sizes change under the kernel's feet at a cut: cache nothing.
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
	})
	if err != nil {
		return nil, fmt.Errorf("lazyfs: mount %s: %w", mountpoint, err)
	}
	l.srv = srv
	return l, nil
}

// CutPower drops every write not fsynced and unmounts. The processes
// using the mount must be gone (killed) first. Once cut, the mount
// neither writes nor fsyncs anything to the backing directory again.
// Cutting it again does nothing.
func (l *FS) CutPower() error {
	l.mu.Lock()
	if l.cut {
		l.mu.Unlock()
		return nil // cut already
	}
	l.cut = true
	for _, f := range l.files {
		f.drop()
	}
	l.files = nil
	l.mu.Unlock()
	var err error
	for range 50 {
		if err = l.srv.Unmount(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		// Busy still: detach it lazily; it writes nothing any more.
		if out, lerr := run("fusermount3", "-u", "-z", l.Mountpoint); lerr != nil {
			return fmt.Errorf("lazyfs: unmount %s: %v; lazy unmount: %v: %s", l.Mountpoint, err, lerr, out)
		}
	}
	l.srv.Wait()
	return nil
}

// Unmount writes back nothing either: an orderly unmount that the tests
// use at the end is a cut like any other.
func (l *FS) Unmount() error { return l.CutPower() }

// file returns the page cache of the inode whose backing file is at
// path, opening the backing file for it on first use.
func (l *FS) file(id fs.StableAttr, path string) (*file, syscall.Errno) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return nil, syscall.EIO
	}
	if f, ok := l.files[id]; ok {
		return f, 0
	}
	fd, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	fi, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, fs.ToErrno(err)
	}
	f := &file{fd: fd, size: fi.Size(), valid: fi.Size(), durable: fi.Size(), dirty: make(map[int64][]byte)}
	l.files[id] = f
	return f, 0
}

// cached returns the page cache of an inode if it has one.
func (l *FS) cached(id fs.StableAttr) *file {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.files[id]
}
