package serve

import (
	"time"

	"github.com/spl-dev/spl/internal/natsio"
)

// When the store meets a full disk all the same.
//
// The writer's check of the free space (natsio.CheckRoom) and the storage
// limit (storelimit.go) keep spl's own appends off the disk's last bytes,
// but not another program: one that fills the disk after the limit was
// raised leaves nats-server a limit the disk cannot keep, and the next
// write that meets ENOSPC (an append between the check and the write, a
// read model's update, an admin's direct publish) gives its stream or
// consumer a stored write error, after which nats-server answers none of
// its writes until JetStream restarts (setWriteErr in server/filestore.go
// and server/stream.go); or nats-server shuts JetStream down itself
// ("will be DISABLED", handleOutOfSpace in server/jetstream.go). Appends
// then waited out their timeout, and space freed changed nothing until
// spl serve was restarted.
//
// nats-server lowers no limit by reload while JetStream runs, but takes a
// lower one while it is down. So a server on one node restarts its
// JetStream, with a limit the disk can keep (storeLimitTarget of what the
// store holds and what the disk has free now):
//
//   - at once when nats-server logs a write error for want of space
//     (natsLogger, natsio.OutOfSpace),
//   - at the next look at the disk (watchDisk, every storeLimitEvery)
//     when JetStream is not running, or when the disk has less space free
//     than the limit still promises and less than the reserve: another
//     program took it.
//
// On a disk with 0 bytes free the new limit is what the store holds:
// nats-server refuses every write itself (code 10023, ErrDiskFull),
// reads work, and the raise (raiseStoreLimit) takes the space freed
// within storeLimitEvery. A restart loses the answers nats-server owed
// (an append whose write met ENOSPC gets none anyway): the log is told
// (sdk.Client.AnswersLost), and its writer settles the appends in flight
// by reading their threads (log/doubt.go) instead of after its timeout.
// A cluster's node is left to nats-server: there a replica with a write
// error steps down and another leads.

// restartGap is the least time between two restarts of JetStream.
const restartGap = natsio.RestartGap

// diskWatch is the state of watchDisk: its goroutine's alone, but for
// kick.
type diskWatch struct {
	kick    chan struct{} // nats-server logged a write error for want of space
	follow  bool          // the storage limit is spl's (initStoreLimit)
	restart bool          // JetStream may be restarted: one node
	pending bool          // a restart asked for too soon after the last
	last    time.Time     // the last restart
	stored  int64         // what the store held at the last look, by nats-server's count
}

// diskFull is called for each error nats-server logs: one that says it
// met a full disk wakes watchDisk. It never blocks (nats-server may hold
// a lock of its own while it logs).
func (s *Server) diskFull(msg string) {
	if !natsio.OutOfSpace(msg) {
		return
	}
	select {
	case s.disk.kick <- struct{}{}:
	default:
	}
}

// watchDisk looks at the disk every storeLimitEvery, and at once when
// nats-server met a full disk, until the server shuts down: it restarts
// JetStream when it must, and else raises the storage limit when the disk
// allows.
func (s *Server) watchDisk() {
	defer s.bgWG.Done()
	t := time.NewTicker(storeLimitEvery)
	defer t.Stop()
	for {
		kicked := false
		select {
		case <-s.bg.Done():
			return
		case <-t.C:
		case <-s.disk.kick:
			kicked = true
		}
		s.lookAtDisk(kicked)
	}
}

// lookAtDisk restarts JetStream if it must (kicked: nats-server met a
// full disk), or else raises the storage limit if the disk allows.
func (s *Server) lookAtDisk(kicked bool) {
	if s.disk.restart {
		why := s.restartWhy(kicked)
		if why != "" && time.Since(s.disk.last) < restartGap {
			s.disk.pending = true // at the next look
			return
		}
		if why != "" {
			s.restartJetStream(why)
			return
		}
	}
	if s.disk.follow {
		s.raiseStoreLimit()
	}
}

// restartWhy says why JetStream must be restarted, or "".
func (s *Server) restartWhy(kicked bool) string {
	if kicked || s.disk.pending {
		return "nats-server met a full disk"
	}
	if !s.ns.JetStreamEnabled() {
		return "JetStream is not running"
	}
	if !s.disk.follow {
		return ""
	}
	info, err := s.ns.Jsz(nil)
	if err != nil || info.Disabled {
		return ""
	}
	s.disk.stored = int64(info.Store)
	free, size, ok := diskSpace(s.cfg.Dir)
	if !ok {
		return ""
	}
	promised := info.Config.MaxStore - int64(info.Store)
	if free < min(size/4, storeReserveMax) && promised > free+storeLimitSlack {
		return "another program took the space the storage limit promised"
	}
	return ""
}

// restartJetStream shuts JetStream down and starts it again, with a
// storage limit the disk can keep when the limit is spl's, then tells the
// log that the answers owed are lost.
func (s *Server) restartJetStream(why string) {
	if info, err := s.ns.Jsz(nil); err == nil && !info.Disabled {
		s.disk.stored = int64(info.Store)
	}
	// Else nats-server's count went with JetStream: the last one seen.
	// It may be a little short of what the store holds now, which only
	// refuses writes a little early until the next raise. The size of
	// the store's files would not do: they hold more than nats-server
	// counts (initStoreLimit), and a limit made of them leaves room the
	// disk lacks.
	stored := s.disk.stored
	o := s.nopts.Clone()
	free, _, ok := diskSpace(s.cfg.Dir)
	if s.disk.follow && ok {
		// A byte short: nats-server takes a write while what the store
		// holds is not over the limit (processJetStreamMsg in
		// server/stream.go), so a limit of exactly what it holds would
		// let one more write meet the full disk.
		o.JetStreamMaxStore = max(storeLimitTarget(s.cfg.Dir, stored)-1, 1)
	}
	s.logger.Warn("restarting JetStream: the disk is full", "why", why, "stored", stored, "free", free, "limit", o.JetStreamMaxStore)
	if err := s.ns.ShutdownJetStream(); err != nil {
		s.logger.Warn("JetStream shutdown", "err", err)
	}
	// A reload while JetStream is down takes a lower limit, and starts
	// JetStream again with it (diffOptions and restartJetStream in
	// server/reload.go and server/jetstream.go); no stream reads the
	// options meanwhile (raiseStoreLimit).
	if err := s.ns.ReloadOptions(o); err != nil {
		s.logger.Warn("storage limit not lowered for the restart", "limit", o.JetStreamMaxStore, "err", err)
	}
	var err error
	if !s.ns.JetStreamEnabled() {
		err = s.ns.EnableJetStream(natsio.JetStreamConfigOf(o))
	}
	s.disk.last, s.disk.pending = time.Now(), false
	// What the shutdown of a store on the full disk logged asks for no
	// other restart.
	select {
	case <-s.disk.kick:
	default:
	}
	if err != nil {
		s.logger.Error("JetStream not restarted; again at the next look at the disk", "err", err)
		return
	}
	if c := s.c.Load(); c != nil {
		c.AnswersLost()
	}
	s.logger.Warn("JetStream restarted: appends are refused until space is freed, reads go on", "limit", o.JetStreamMaxStore)
}
