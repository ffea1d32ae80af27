package natsio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrForbidden reports a publish the server dropped because the
// connection's credentials do not allow its subject (a NATS permissions
// violation): nothing of it was stored. spl serve gives its read token no
// publish right on the log, its write token none on the actor key
// bindings (an administrator's), and under --require-signed none on the
// log at all (writes go through its HTTP API, where signatures are
// checked).
var ErrForbidden = errors.New("spl/log: permission denied")

// A server answers a publish it forbids with nothing: it sends the
// client an asynchronous error ("Permissions Violation for Publish to
// <subject>") and drops the message. The connection notes each such
// subject, so that a writer waiting for the answer stops waiting and
// says why.

// maxDenied bounds the subjects a connection remembers as denied.
const maxDenied = 64

// denials is what a connection remembers of its denied publishes.
type denials struct {
	mu       sync.Mutex
	subjects map[string]time.Time
	next     context.Context // cancelled at the next denial, then replaced
	cancel   context.CancelFunc
}

func (d *denials) init() {
	d.subjects = make(map[string]time.Time)
	d.next, d.cancel = context.WithCancel(context.Background())
}

// note records a permissions violation reported by the server, and
// reports whether it was a publish's ("Permissions Violation for Publish
// to "<subject>" on connection [N]").
func (d *denials) note(err error) bool {
	_, rest, ok := strings.Cut(err.Error(), "Publish to \"")
	if !ok {
		return false // a subscribe violation: no publish waits on it
	}
	subject, _, ok := strings.Cut(rest, "\"")
	if !ok || subject == "" {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.subjects) >= maxDenied {
		clear(d.subjects)
	}
	d.subjects[subject] = time.Now()
	d.wakeLocked()
	return true
}

// wake ends the contexts of UntilAnswered given out so far.
func (d *denials) wake() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wakeLocked()
}

func (d *denials) wakeLocked() {
	d.cancel()
	d.next, d.cancel = context.WithCancel(context.Background())
}

// WakeOnLeader makes UntilAnswered end too when stream elects a leader.
// In a cluster, a publish or a read in flight to a stream leader that
// died is never answered; once another leader is elected, waiting on is
// pointless, so the waiter goes on at once instead of waiting out its
// timeout. The advisory comes once the new leader has applied what the
// old one committed and answers reads (it is sent from
// processStreamLeaderChange, after raft's Processed has reached the
// entry the leader appended when it was elected: server/raft.go, aflr).
// A writer woken with an append in doubt settles it by reading, and sends
// again only what cannot land any more, or the same messages again
// (log/doubt.go): waking it early never makes a second copy. Without the
// right to subscribe to JetStream's advisories, it does nothing.
func (c *Conn) WakeOnLeader(stream string) {
	_, _ = c.NC.Subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED."+stream, func(*nats.Msg) { c.denied.wake() })
}

// watchDenied notes the publishes the server denies this connection.
func (c *Conn) watchDenied() {
	c.denied.init()
	prev := c.NC.Opts.AsyncErrorCB
	c.NC.SetErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) && c.denied.note(err) {
			return // the append it failed says so (DeniedSince)
		}
		if prev != nil {
			prev(nc, sub, err)
		}
	})
}

// UntilAnswered is UntilLost that also ends when the server denies one
// of this connection's publishes (a writer waiting for answers then
// learns at once which of them will never come: DeniedSince), or, after
// WakeOnLeader, when the stream elects a new leader.
func (c *Conn) UntilAnswered(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := c.UntilLost(parent, timeout)
	c.denied.mu.Lock()
	next := c.denied.next
	c.denied.mu.Unlock()
	stop := context.AfterFunc(next, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// DeniedSince returns an error wrapping ErrForbidden and ErrRefused when
// the server denied a publish to subject at or after t, else nil.
func (c *Conn) DeniedSince(subject string, t time.Time) error {
	c.denied.mu.Lock()
	at, ok := c.denied.subjects[subject]
	c.denied.mu.Unlock()
	if !ok || at.Before(t) {
		return nil
	}
	return fmt.Errorf("%w: %w: this connection's credentials may not publish to %s (the server dropped it: nothing was stored)", ErrRefused, ErrForbidden, subject)
}
