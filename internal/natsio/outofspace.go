package natsio

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A server that met a full disk.
//
// spl keeps its own appends off a full disk (CheckRoom), but another
// write can still meet ENOSPC in the server: one made between the check
// and the write, a read model's update, or a publish of any program with
// the directory's token. The store then keeps the write error and
// nats-server answers no more writes to that stream until JetStream
// restarts (setWriteErr in server/filestore.go and server/stream.go), or
// it shuts JetStream down itself ("will be DISABLED", handleOutOfSpace in
// server/jetstream.go). Appends then waited out their timeout, and space
// freed changed nothing until the process serving the directory restarted.
// So the server that logs such an error restarts its JetStream: spl
// serve's (serve/diskfull.go, which also lowers its storage limit), and
// the embedded log's (embedded.watchSpace).

// OutOfSpace reports whether a message nats-server logged says that it
// met a full disk: a store or a stream keeps the write error and takes no
// more writes, or JetStream shuts down.
func OutOfSpace(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "no space left on device") && strings.Contains(m, "critical write error") ||
		strings.Contains(m, "will be disabled") && strings.Contains(m, "out of")
}

// JetStreamConfigOf is the JetStream config nats-server starts with from
// o (Server.Start in server/server.go), for EnableJetStream.
func JetStreamConfigOf(o *server.Options) *server.JetStreamConfig {
	return &server.JetStreamConfig{
		StoreDir:     o.StoreDir,
		SyncInterval: o.SyncInterval,
		SyncAlways:   o.SyncAlways,
		Strict:       !o.NoJetStreamStrict,
		MaxMemory:    o.JetStreamMaxMemory,
		MaxStore:     o.JetStreamMaxStore,
		Domain:       o.JetStreamDomain,
		CompressOK:   true,
		UniqueTag:    o.JetStreamUniqueTag,
	}
}

// RestartGap is the least time between two restarts of JetStream: the
// shutdown of a store on a full disk may log the errors that ask for one.
const RestartGap = 2 * time.Second

// spaceLogger hands the errors an embedded server logs to full, which
// never blocks (nats-server may hold a lock of its own while it logs).
type spaceLogger struct{ full func() }

func (spaceLogger) Noticef(string, ...any) {}
func (spaceLogger) Warnf(string, ...any)   {}
func (spaceLogger) Fatalf(string, ...any)  {}
func (spaceLogger) Debugf(string, ...any)  {}
func (spaceLogger) Tracef(string, ...any)  {}

func (l spaceLogger) Errorf(format string, v ...any) {
	if OutOfSpace(fmt.Sprintf(format, v...)) {
		l.full()
	}
}

// spaceWatch restarts the JetStream of an embedded server (run) when it
// met a full disk (kicked), or when JetStream is not running at a look
// every RestartGap, until stop. After a restart it calls lost: the
// answers the server owed are gone.
type spaceWatch struct {
	kick chan struct{}
	quit chan struct{}
	done chan struct{}
	lost func()
}

func newSpaceWatch(lost func()) *spaceWatch {
	return &spaceWatch{kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), lost: lost}
}

func (w *spaceWatch) full() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *spaceWatch) run(srv *server.Server, opts *server.Options) {
	defer close(w.done)
	t := time.NewTicker(RestartGap)
	defer t.Stop()
	var last time.Time
	for {
		kicked := false
		select {
		case <-w.quit:
			return
		case <-w.kick:
			kicked = true
		case <-t.C:
		}
		if !kicked && srv.JetStreamEnabled() {
			continue
		}
		if wait := RestartGap - time.Since(last); wait > 0 {
			select {
			case <-w.quit:
				return
			case <-time.After(wait):
			}
		}
		_ = srv.ShutdownJetStream() // then started again, whatever it said
		err := srv.EnableJetStream(JetStreamConfigOf(opts))
		last = time.Now()
		select { // what the shutdown on the full disk logged asks for no other restart
		case <-w.kick:
		default:
		}
		if err == nil {
			w.lost()
		} // else again at the next look
	}
}

// stop ends run and waits for it.
func (w *spaceWatch) stop() {
	close(w.quit)
	<-w.done
}
