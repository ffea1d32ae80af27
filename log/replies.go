package log

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// replies receives the answers to the log's multi-message reads (pipelined
// gets, batched gets) on one subscription that lives as long as the log.
// A subscription per read would cost the server a walk of its subject
// cache on every subscribe and unsubscribe, more than the read itself.
type replies struct {
	prefix string
	sub    *nats.Subscription

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]*waiter
}

// waiter is one read's end of the subscription.
type waiter struct {
	ch   chan *nats.Msg
	quit chan struct{} // closed when the read is done
}

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

// open starts a read that expects about capacity answers. Its requests
// carry reply(i) as their reply subject; the answers come on the channel
// until done is called.
func (r *replies) open(capacity int) (reply func(i int) string, ch <-chan *nats.Msg, done func()) {
	w := &waiter{ch: make(chan *nats.Msg, capacity), quit: make(chan struct{})}
	r.mu.Lock()
	r.next++
	id := r.next
	r.waiting[id] = w
	r.mu.Unlock()
	base := r.prefix + "." + strconv.FormatUint(id, 10) + "."
	reply = func(i int) string { return base + strconv.Itoa(i) }
	done = func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
		close(w.quit)
	}
	return reply, w.ch, done
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
	return l.multi.open(capacity)
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
