package natsio

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrDiskFull reports an append refused because the disk that holds the
// log is full: nothing of it was stored. Free space and append again.
var ErrDiskFull = errors.New("spl/log: disk full")

// DiskReserve is the free space the embedded log keeps on the disk of its
// data directory: a group commit that would leave less is refused with
// ErrDiskFull before it is sent. The embedded server must never meet
// ENOSPC itself: nats-server then neither answers the publish nor
// accepts another write to the stream until it restarts (a stored write
// error), so every append would wait out its timeout.
const DiskReserve = 4 << 20

// errInsufficientResources is JetStream's JSInsufficientResourcesErr: the
// server's storage limit (max_file_store) or its disk is full.
const errInsufficientResources = 10023

// CheckRoom refuses, with an error wrapping ErrDiskFull, a write of n
// bytes to the log that would leave less than DiskReserve free on the
// disk of its data directory: the embedded server's, or that of the
// in-process server a URL reaches (Options.StoreDir, spl serve on one
// node). With another URL it checks nothing: the server answers for its
// own disk.
func (c *Conn) CheckRoom(n int) error {
	dir := c.StoreDir()
	if dir == "" {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // cannot tell: let the server try
	}
	free := st.Bavail * uint64(st.Bsize)
	if free >= uint64(n)+DiskReserve {
		return nil
	}
	return fmt.Errorf("%w: %s has %s free; spl keeps %s free and needs %s more for this append: free disk space",
		ErrDiskFull, dir, size(free), size(DiskReserve), size(uint64(n)))
}

func size(n uint64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
