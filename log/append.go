package log

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spl-dev/spl/records"
)

// ErrInDoubt reports an append whose outcome is not known. Either the
// caller stopped waiting (the context given to Append or Pending.Wait
// ended) while the append could still land: the writer had taken it to
// send, whether or not it was sent yet, or the context it was submitted
// with had not ended. Or the log sent it and could not learn from the
// server whether it landed. The record may have landed or may still land;
// appending the same *records.Record again resolves it without a second
// copy.
var ErrInDoubt = errors.New("spl/log: append outcome unknown")

// Pending is an append on its way to the log.
type Pending struct {
	rec   *records.Record
	ctx   context.Context
	done  chan struct{}
	entry Entry
	err   error

	// cond makes the append conditional: it lands only right after the
	// thread's record at clock after (0: on an empty thread).
	cond  bool
	after uint64
	// once: a lost race fails the append instead of retrying it
	// (SubmitOnce).
	once bool
	// packed: the record is appended as records.MarshalStored writes it
	// with stored (compressed, or its body beside the log: compress.go).
	stored records.Stored
	packed bool

	// taken is set by the writer once it has taken the append to send: it
	// may land from then on, whatever ctx says.
	taken atomic.Bool

	// Set by the writer while it owns the append.
	sealed *records.Record
	id     records.ID
	data   []byte
	first  bool   // first record of its thread in its batch
	expect uint64 // when first: the thread's last clock it chains on

	attempts int       // races lost to other writers so far
	floor    uint64    // the writer's floor when it was first sent
	floored  bool      // floor is set
	due      time.Time // when lost: when it is sent again

	prevClock uint64 // clock of the record prev names, when before the batch
	prevBack  int    // else how many messages back in the batch it is
	back      string // HeaderBack: where the records before prev are
}

// Done is closed when the append has landed or failed.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait blocks until the append has landed or failed, or ctx is done.
//
// When ctx ends first, the error wraps ctx's error, and also ErrInDoubt
// when the append may still land: the writer has taken it, or the context
// it was submitted with has not ended. Appending the same record again
// then resolves it. An append whose own context ended before the writer
// took it is never sent.
func (p *Pending) Wait(ctx context.Context) (Entry, error) {
	select {
	case <-p.done:
		return p.entry, p.err
	case <-ctx.Done():
	}
	select {
	case <-p.done:
		return p.entry, p.err
	default:
	}
	// The writer marks an append taken before it looks at the append's
	// context (admit), so the context is read here before the mark: an
	// append found ended and not taken is one the writer will drop.
	if err := p.ctx.Err(); err != nil && !p.taken.Load() {
		return Entry{}, fmt.Errorf("spl/log: append: %w", err)
	}
	return Entry{}, fmt.Errorf("%w: %w", ErrInDoubt, ctx.Err())
}

func (p *Pending) finish(e Entry, err error) {
	p.entry, p.err = e, err
	close(p.done)
}

// Append appends rec (unchained: its Prev is chosen by the log) to its
// thread and returns once it is durable. Concurrent appends, from any
// goroutine and to any thread, are gathered into group commits.
//
// When ctx ends before the append's outcome is known, the error wraps
// ctx's error, and ErrInDoubt too if the writer had already taken the
// append to send (it may land); without ErrInDoubt it was not sent.
// Appending the same *records.Record again after it landed, or after an
// ErrInDoubt, returns the stored entry (same id and clock) instead of a
// second copy.
func (l *Log) Append(ctx context.Context, rec *records.Record) (Entry, error) {
	p, err := l.Submit(ctx, rec)
	if err != nil {
		return Entry{}, err
	}
	return p.Wait(ctx)
}

// Submit hands rec to the writer and returns at once (or when the writer's
// queue has room, or ctx is done). The append itself is bounded by ctx too:
// if ctx ends before the writer takes it to send, it is never sent; once
// taken, it goes on to its outcome. A record that would pass
// Options.MaxRecord once chained (its prev set) is refused here
// (ErrTooLarge); one over records.MaxEncodedSize that does not compress
// to fit has its body stored beside the log first (bodies.go), so Submit
// returns only once that is done.
func (l *Log) Submit(ctx context.Context, rec *records.Record) (*Pending, error) {
	return l.submit(ctx, rec, false, 0)
}

// AppendAfter appends rec as Append does, but only if the last record of
// its thread is still the one at clock after (0: only if the thread is
// empty); else it appends nothing and returns an error wrapping ErrMoved.
// A caller that decided what to append from what it read of the thread,
// up to clock after, uses it so that no record appended since (by any
// process) goes unseen by that decision.
func (l *Log) AppendAfter(ctx context.Context, rec *records.Record, after uint64) (Entry, error) {
	p, err := l.submit(ctx, rec, true, after)
	if err != nil {
		return Entry{}, err
	}
	return p.Wait(ctx)
}

// SubmitAfter is Submit on AppendAfter's condition: the append lands only
// if the last record of rec's thread is still the one at clock after;
// else its Pending fails with an error wrapping ErrMoved.
func (l *Log) SubmitAfter(ctx context.Context, rec *records.Record, after uint64) (*Pending, error) {
	return l.submit(ctx, rec, true, after)
}

// SubmitOnce is Submit (SubmitAfter when cond) for an append its caller
// retries itself: a race lost to another writer is not retried by the
// log, and the Pending fails with an error wrapping ErrExpectation
// (nothing was stored). spl serve's door uses it, so that a record is
// never sealed again by the server once the client that sent it may have
// stopped waiting and sent it again (log/door.go).
func (l *Log) SubmitOnce(ctx context.Context, rec *records.Record, cond bool, after uint64) (*Pending, error) {
	return l.submitWith(ctx, rec, cond, after, true)
}

func (l *Log) submit(ctx context.Context, rec *records.Record, cond bool, after uint64) (*Pending, error) {
	return l.submitWith(ctx, rec, cond, after, false)
}

func (l *Log) submitWith(ctx context.Context, rec *records.Record, cond bool, after uint64, once bool) (*Pending, error) {
	if rec == nil {
		return nil, errors.New("spl/log: append: nil record")
	}
	if !rec.Header.Prev.IsZero() {
		return nil, fmt.Errorf("spl/log: append: record already chained (prev %s); submit the unchained record", rec.Header.Prev)
	}
	if err := rec.Validate(); err != nil {
		return nil, err
	}
	var st records.Stored
	packed := false
	if len(rec.Body) >= CompressMin { // shorter: stored as is
		var err error
		if st, packed, err = l.pack(ctx, rec, rec.WithPrev(placeholderPrev).EncodedSize()); err != nil {
			return nil, fmt.Errorf("spl/log: append: %w", err)
		}
	}
	p := &Pending{rec: rec, ctx: ctx, done: make(chan struct{}), cond: cond, after: after, once: once, stored: st, packed: packed}
	// Close waits for every Submit inside the gate before it stops the
	// writer, so an append queued here is one the writer's drain answers.
	l.w.gate.RLock()
	defer l.w.gate.RUnlock()
	if l.isClosed() {
		return nil, ErrClosed
	}
	select {
	case l.w.in <- p:
		return p, nil
	case <-l.closed:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("spl/log: append: %w", ctx.Err())
	}
}

// placeholderPrev stands for the prev the writer will set: every id
// encodes to the same length.
var placeholderPrev = records.ID{0: 1}

// checkSize refuses a record of n bytes encoded over Options.MaxRecord.
func (l *Log) checkSize(n int) error { return CheckSize(n, l.opts.MaxRecord) }

// CheckSize is the rule of a record's size: n bytes encoded, at least,
// are over limit, a log's MaxRecord, with an error wrapping ErrTooLarge
// that is a *records.FieldError on body. spl serve's door applies it to a
// body staged ahead of its record.
func CheckSize(n, limit int) error {
	if n <= limit {
		return nil
	}
	fe := &records.FieldError{Field: "body", Rule: fmt.Sprintf("record is %d bytes encoded; the limit is %d", n, limit)}
	return fmt.Errorf("%w (%w)", fe, ErrTooLarge)
}

// movedError says that thread is not at clock after. When known, the
// thread is at clock at (0: it is empty), past after or behind it; else a
// record appended ahead of the caller's in the same batch moves it past
// after, to a clock not known until the batch lands.
func movedError(thread string, after, at uint64, known bool) error {
	switch {
	case !known:
		return fmt.Errorf("%w: thread %q gets a record after clock %d ahead of this one", ErrMoved, thread, after)
	case at == 0:
		return fmt.Errorf("%w: thread %q is empty, not at clock %d", ErrMoved, thread, after)
	case at < after:
		return fmt.Errorf("%w: thread %q is at clock %d, behind clock %d", ErrMoved, thread, at, after)
	default:
		return fmt.Errorf("%w: thread %q is at clock %d, past clock %d", ErrMoved, thread, at, after)
	}
}
