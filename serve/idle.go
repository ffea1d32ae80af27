package serve

import (
	"sync"
	"sync/atomic"
	"time"
)

// Exiting when nobody uses the server (Config.IdleExit).
//
// The spl serve an SDK starts for the local data directory serves whoever
// comes next, but should not outlive its users by hours. With IdleExit
// set, the server counts as used while an HTTP request (an SSE tail
// included) is in flight, and while NATS clients beyond its own are
// connected (a CLI command that joined the directory's server, a Go
// program, a projector); once it has gone unused for IdleExit, Idle()
// closes, and spl serve shuts down as on SIGTERM.

// idleWatch is the state of that count.
type idleWatch struct {
	inflight atomic.Int64 // HTTP requests in flight
	last     atomic.Int64 // when the server was last used, Unix nanoseconds
	once     sync.Once
	idle     chan struct{} // closed once unused for IdleExit
}

// used notes a request's start; done, returned, its end.
func (w *idleWatch) used() (done func()) {
	w.inflight.Add(1)
	w.last.Store(time.Now().UnixNano())
	return func() {
		w.last.Store(time.Now().UnixNano())
		w.inflight.Add(-1)
	}
}

// Idle is closed once the server went unused for Config.IdleExit; never
// when IdleExit is 0.
func (s *Server) Idle() <-chan struct{} { return s.idle.idle }

// watchIdle closes Idle once the server went unused for IdleExit. The
// NATS clients the server had once its log was open are its own.
func (s *Server) watchIdle() {
	own := s.ns.NumClients()
	s.idle.last.Store(time.Now().UnixNano())
	check := min(s.cfg.IdleExit/4, 5*time.Second)
	s.every(check, func() {
		if s.idle.inflight.Load() > 0 || s.ns.NumClients() > own {
			s.idle.last.Store(time.Now().UnixNano())
			return
		}
		if unused := time.Since(time.Unix(0, s.idle.last.Load())); unused >= s.cfg.IdleExit {
			s.idle.once.Do(func() {
				s.logger.Info("unused: exiting", "idle_exit", s.cfg.IdleExit, "unused_for", unused.Round(time.Second))
				close(s.idle.idle)
			})
		}
	})
}
