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

func (d *denials) wakeLocked() {
	d.cancel()
	d.next, d.cancel = context.WithCancel(context.Background())
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
// of this connection's publishes: a writer waiting for answers then
// learns at once which of them will never come (DeniedSince).
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
