package serve

import (
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// The JetStream storage limit follows the disk.
//
// Left unset, nats-server's limit (max_file_store) is 75% of the space
// free when it starts plus 75% of what its store holds, frozen until the
// next start: a server started on a nearly full disk refuses every append
// ("insufficient resources") even after space is freed, until it is
// restarted (faults.md, "disk full"). spl serve's admin may publish to its
// NATS listener directly, so the embedded log's policy (no limit of the
// server's own, a free-space check before each write) cannot hold here:
// nothing stands between a client and the store, and a server that meets
// ENOSPC takes no more writes to the stream until it restarts. So when
// the config leaves the limit unset, the server starts with a limit of
// its own, set explicitly (initStoreLimit), raises it at once to what the
// store holds, and every
// storeLimitEvery, once the store has used three quarters of it, raises
// it (nats-server can raise a limit while it runs, never lower it) to
//
//	min(stored + 75% of free, disk size - reserve)
//
// where reserve is a quarter of the file system, at most storeReserveMax:
// space freed is usable within storeLimitEvery, and the store never grows
// to the last bytes of the disk, which its indexes and metadata need. A
// limit the operator configured (max_file_store in --nats-config) is
// left as it is.

// storeLimitEvery is how often the server looks at the disk.
const storeLimitEvery = 2 * time.Second

// storeReserveMax bounds the space the limit leaves free on a large disk.
const storeReserveMax = 1 << 30

// storeLimitSlack is the least raise worth a reload of the server's
// options: free space moves by small amounts all the time.
const storeLimitSlack = 1 << 20

// initStoreLimit sets the server's storage limit explicitly, to three
// quarters of the disk's free space, unless the config sets one. It
// reports whether the limit is spl's to follow. The store's own bytes are
// not counted in: its files hold more than nats-server counts as used
// (superseded revisions of the read models' buckets, metadata), so a
// limit made of them could leave room the disk does not have, and a write
// into it meets ENOSPC, after which nats-server takes no more writes to
// the stream until it restarts. A limit below what the store holds only
// refuses writes cleanly, and the server raises it at once from its own
// count of used bytes (raiseStoreLimit, before watchDisk).
func initStoreLimit(o *server.Options, dir string) bool {
	if o.JetStreamMaxStore != 0 {
		return false // configured (or -1 asked for explicitly: nats-server's own)
	}
	free, _, ok := diskSpace(dir)
	if !ok {
		return false // cannot tell: nats-server's own limit
	}
	o.JetStreamMaxStore = max(free/4*3, 1) // never more than the disk holds
	return true
}

// storeLimitTarget is the limit the disk allows a store holding stored
// bytes, or 0 when the disk cannot be read.
func storeLimitTarget(dir string, stored int64) int64 {
	free, size, ok := diskSpace(dir)
	if !ok {
		return 0
	}
	reserve := min(size/4, storeReserveMax)
	return min(stored+free/4*3, size-reserve)
}

// diskSpace returns the space free to this user and the size of the file
// system that holds dir.
func diskSpace(dir string) (free, size int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), true
}

// raiseStoreLimit raises the server's storage limit to what the disk
// allows now, when the store has used three quarters of its limit and the
// disk allows storeLimitSlack more or better.
func (s *Server) raiseStoreLimit() {
	info, err := s.ns.Jsz(nil)
	if err != nil || info.Disabled {
		return
	}
	s.disk.stored = int64(info.Store)
	cur := info.Config.MaxStore
	if int64(info.Store) < cur/4*3 {
		// Far from the limit: nothing to raise yet. A raise reloads the
		// server's options, which nats-server reads in places without
		// their lock (getDirectRequest in server/stream.go reads
		// s.opts.MaxPending, a data race with every reload): reloads
		// are kept to when the store needs one.
		return
	}
	want := storeLimitTarget(s.cfg.Dir, int64(info.Store))
	if want < cur+storeLimitSlack {
		return
	}
	if err := s.setStoreLimit(want); err != nil {
		s.logger.Warn("storage limit not raised", "from", cur, "to", want, "err", err)
		return
	}
	s.logger.Info("storage limit raised: the disk has room", "from", cur, "to", want)
}

// setStoreLimit sets the running server's storage limit to n bytes, more
// than it is: the server's options reloaded with that one change.
func (s *Server) setStoreLimit(n int64) error {
	o := s.nopts.Clone()
	o.JetStreamMaxStore = n
	return s.ns.ReloadOptions(o)
}
