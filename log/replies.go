package log

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

// answers is one read's view of its replies.
type answers struct {
	base string // reply subjects of this read: base + index
	ch   <-chan *nats.Msg
	done func()
}

// open starts a read that expects about capacity answers. Its requests
// carry a.reply(i) as their reply subject; a.done ends it.
func (r *replies) open(capacity int) *answers {
	r.mu.Lock()
	r.next++
	id := r.next
	var w *waiter
	if r.own == nil {
		w = &waiter{ch: make(chan *nats.Msg, capacity), quit: make(chan struct{})}
		r.waiting[id] = w
	}
	r.mu.Unlock()
	a := &answers{base: r.prefix + "." + strconv.FormatUint(id, 10) + "."}
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

func (a *answers) reply(i int) string { return a.base + strconv.Itoa(i) }

// next returns the next answer of the read and the index of the request it
// answers, skipping answers to earlier reads (late ones, on an owned
// subscription), until ctx ends.
func (a *answers) next(ctx context.Context) (*nats.Msg, int, error) {
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

// Replies starts a read that expects up to capacity answers, on the log's
// one subscription for them: its requests carry reply(i) as their reply
// subject, and the answers come on the channel until done is called
// (ReplyIndex tells which request an answer is to). For code at the edge
// (projections) that sends pipelined or batched direct gets.
func (l *Log) Replies(capacity int) (reply func(i int) string, answers <-chan *nats.Msg, done func()) {
	a := l.multi.open(capacity)
	return a.reply, a.ch, a.done
}

// ReplyIndex returns the i of the reply(i) an answer from Replies came
// on.
func ReplyIndex(subject string) (int, bool) {
	k := strings.LastIndexByte(subject, '.')
	if k < 0 {
		return 0, false
	}
	i, err := strconv.Atoi(subject[k+1:])
	return i, err == nil && i >= 0
}
