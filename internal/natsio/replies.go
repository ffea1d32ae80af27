package natsio

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// replies receives the answers to requests that get more than one answer
// back (pipelined gets and publishes, batched gets) on one subscription
// that lives as long as the log. A subscription per read would cost the
// server a walk of its subject cache on every subscribe and unsubscribe,
// more than a small read itself.
//
// A shared replies (the log's reads) routes each answer to its read from
// the subscription's goroutine. An owned one (the writer's, one round at a
// time) takes the answers straight from the connection on one channel:
// one goroutine hand-off less on the path of every append.
type replies struct {
	prefix string
	sub    *nats.Subscription
	own    chan *nats.Msg // owned: every answer; nil when shared

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]*waiter // shared: the reads under way
}

// waiter is one read's end of a shared subscription.
type waiter struct {
	ch   chan *nats.Msg
	quit chan struct{} // closed when the read is done
}

// newReplies subscribes for the answers of any number of concurrent
// reads.
func newReplies(nc *nats.Conn) (*replies, error) {
	r := &replies{prefix: nc.NewInbox(), waiting: make(map[uint64]*waiter)}
	sub, err := nc.Subscribe(r.prefix+".*.*", r.route)
	if err != nil {
		return nil, fmt.Errorf("subscribe for replies: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("subscribe for replies: %w", err)
	}
	r.sub = sub
	return r, nil
}

// newOwnReplies subscribes for the answers of one goroutine's rounds,
// one round at a time, of at most capacity requests each.
func newOwnReplies(nc *nats.Conn, capacity int) (*replies, error) {
	r := &replies{prefix: nc.NewInbox(), own: make(chan *nats.Msg, 2*capacity)}
	sub, err := nc.ChanSubscribe(r.prefix+".*.*", r.own)
	if err != nil {
		return nil, fmt.Errorf("subscribe for replies: %w", err)
	}
	r.sub = sub
	return r, nil
}

// Answers is one read's view of a reply subscription: its requests carry
// Reply(i) as their reply subject, Next returns the answers as they come,
// and Done ends the read.
type Answers struct {
	base string // reply subjects of this read: base + index
	ch   <-chan *nats.Msg
	done func()
}

// open starts a read that expects about capacity answers.
func (r *replies) open(capacity int) *Answers {
	r.mu.Lock()
	r.next++
	id := r.next
	var w *waiter
	if r.own == nil {
		w = &waiter{ch: make(chan *nats.Msg, capacity), quit: make(chan struct{})}
		r.waiting[id] = w
	}
	r.mu.Unlock()
	a := &Answers{base: r.prefix + "." + strconv.FormatUint(id, 10) + "."}
	if w == nil {
		a.ch, a.done = r.own, func() {}
		return a
	}
	a.ch = w.ch
	a.done = func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
		close(w.quit)
	}
	return a
}

// Reply is the reply subject of the read's request i.
func (a *Answers) Reply(i int) string { return a.base + strconv.Itoa(i) }

// Done ends the read: answers still to come are dropped.
func (a *Answers) Done() { a.done() }

// Next returns the next answer of the read and the index i of the request
// (Reply(i)) it answers, skipping answers to earlier reads (late ones, on
// an owned subscription), until ctx ends.
func (a *Answers) Next(ctx context.Context) (*nats.Msg, int, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case m := <-a.ch:
			if i, ok := strings.CutPrefix(m.Subject, a.base); ok {
				if n, err := strconv.Atoi(i); err == nil && n >= 0 {
					return m, n, nil
				}
			}
		}
	}
}

// route hands an answer to the read it belongs to, waiting while that
// read's channel is full (more answers than it expected), and drops an
// answer to a read that is done.
func (r *replies) route(m *nats.Msg) {
	rest := m.Subject[len(r.prefix)+1:]
	idText, _, ok := strings.Cut(rest, ".")
	if !ok {
		return
	}
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil {
		return
	}
	r.mu.Lock()
	w := r.waiting[id]
	r.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case w.ch <- m:
	case <-w.quit:
	}
}
