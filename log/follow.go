package log

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/records"
)

// followBuffer bounds the bytes a follow buffers ahead of its reader:
// room for one pull of the largest record with its headers (nats.go asks
// for half the buffer a pull).
const followBuffer = 2 * (records.MaxEncodedSize + 128<<10)

// Follow yields the records of thread in clock order as they land, from
// clock from on (from 0: the records appended after the call), until ctx
// is done or the caller stops: it never ends by itself. Records of every
// kind come, erasure records too; erased records that are already deleted
// do not. A message that does not verify is yielded as an error wrapping
// records.ErrCorrupt (with its clock in the Entry), and following goes
// on; any other error ends it.
//
// To follow on from a read, pass the clock after the last record read, so
// that nothing appended in between is missed.
//
// Follow runs an ordered consumer on the thread's subject: the server
// pushes each record as it lands, with no polling. A door log, whose
// credentials create no consumer, reads by direct gets instead, woken by
// each record's publish (followGets).
func (l *Log) Follow(ctx context.Context, thread string, from uint64) iter.Seq2[Entry, error] {
	return l.follow(ctx, ThreadSubject(thread), fmt.Sprintf("%q", thread), from)
}

// FollowAll is Follow of every thread: the records of the whole log in
// clock order as they land.
func (l *Log) FollowAll(ctx context.Context, from uint64) iter.Seq2[Entry, error] {
	return l.follow(ctx, SubjectPrefix+".>", "the log", from)
}

// follow is Follow of the records on subject; name names them in errors.
func (l *Log) follow(ctx context.Context, subject, name string, from uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if l.isClosed() {
			yield(Entry{}, ErrClosed)
			return
		}
		if l.door != nil {
			l.followGets(ctx, subject, name, from, yield)
			return
		}
		cfg := jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject},
			DeliverPolicy:  jetstream.DeliverNewPolicy,
		}
		if from > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
		}
		cons, err := l.c.JS.OrderedConsumer(ctx, l.opts.Stream, cfg)
		if err != nil {
			if ctx.Err() == nil {
				yield(Entry{}, fmt.Errorf("follow %s: %w", name, err))
			}
			return
		}
		// The client's buffer is bounded in bytes, not only in messages
		// (500 by default): a reader that does not keep up (an SSE client
		// that stopped reading) then holds at most followBuffer of the
		// process's memory, however large the records.
		msgs, err := cons.Messages(jetstream.PullMaxBytes(followBuffer))
		if err != nil {
			yield(Entry{}, fmt.Errorf("follow %s: %w", name, err))
			return
		}
		defer msgs.Stop()
		defer context.AfterFunc(ctx, msgs.Stop)()
		for {
			m, err := msgs.Next()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return
				}
				yield(Entry{}, fmt.Errorf("follow %s: %w", name, err))
				return
			}
			md, err := m.Metadata()
			if err != nil {
				yield(Entry{}, fmt.Errorf("follow %s: %w", name, err))
				return
			}
			e, err := l.DecodeMessage(m.Subject(), md.Sequence.Stream, m.Headers(), m.Data())
			if err != nil {
				e = Entry{Clock: md.Sequence.Stream}
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

// followPoll is how often followGets reads the thread again without a
// publish to wake it: a publish missed while the connection was down
// delays a record this long at most.
const followPoll = 2 * time.Second

// followGets is Follow for a door log, whose credentials create no
// consumer: a subscription to the thread's subject (the records as they
// are published) only wakes it, and it reads what landed since by direct
// gets, in clock order, so that nothing is missed or yielded twice.
func (l *Log) followGets(ctx context.Context, subject, name string, from uint64, yield func(Entry, error) bool) {
	wake := make(chan struct{}, 1)
	sub, err := l.c.NC.Subscribe(subject, func(*nats.Msg) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		yield(Entry{}, fmt.Errorf("follow %s: %w", name, err))
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	if from == 0 {
		last, err := l.LastClock(ctx)
		if err != nil {
			if ctx.Err() == nil {
				yield(Entry{}, fmt.Errorf("follow %s: %w", name, err))
			}
			return
		}
		from = last + 1
	}
	t := time.NewTicker(followPoll)
	defer t.Stop()
	for {
		cont := true
		err := l.scan(ctx, subject, from, 0, readPage, func(m stored) bool {
			e, err := l.decode(m)
			if err != nil {
				e = Entry{Clock: m.clock}
			}
			from = m.clock + 1
			cont = yield(e, err)
			return cont
		})
		if !cont || ctx.Err() != nil {
			return
		}
		if err != nil {
			yield(Entry{}, fmt.Errorf("follow %s: %w", name, err))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-l.closed:
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// WatchThread is Watch of every kind of record on thread.
func (l *Log) WatchThread(thread string, fn func()) (stop func(), err error) {
	sub, err := l.c.NC.Subscribe(ThreadSubject(thread), func(*nats.Msg) { fn() })
	if err != nil {
		return nil, fmt.Errorf("watch %q: %w", thread, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Watch calls fn whenever a record of kind lands on thread, from now
// until stop is called: a subscription to the record's subject, no
// consumer (any right that reads may watch). It says only that one
// landed; read it to know what it holds. A record published while the
// connection is down is missed: read once after Watch returns to cover
// what landed before it.
func (l *Log) Watch(thread, kind string, fn func()) (stop func(), err error) {
	sub, err := l.c.NC.Subscribe(RecordSubject(thread, kind), func(*nats.Msg) { fn() })
	if err != nil {
		return nil, fmt.Errorf("watch %q %s: %w", thread, kind, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
