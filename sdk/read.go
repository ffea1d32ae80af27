package sdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// QueryOption narrows QueryThread.
type QueryOption func(*query)

type query struct {
	from uint64
	kind string
	act  string
	last int
}

// FromClock starts the query at clock c (inclusive).
func FromClock(c uint64) QueryOption { return func(q *query) { q.from = c } }

// OfKind keeps records of kind k only.
func OfKind(k string) QueryOption { return func(q *query) { q.kind = k } }

// OfAct keeps records of act a only.
func OfAct(a string) QueryOption { return func(q *query) { q.act = a } }

// Last keeps the last n matching records only (still in clock order).
func Last(n int) QueryOption { return func(q *query) { q.last = n } }

func (q query) readOpts() []splog.ReadOption {
	var ro []splog.ReadOption
	if q.from > 0 {
		ro = append(ro, splog.From(q.from))
	}
	if q.kind != "" {
		ro = append(ro, splog.Kind(q.kind))
	}
	if q.act != "" {
		ro = append(ro, splog.Act(q.act))
	}
	return ro
}

// QueryThread yields the records of thread in clock order, each verified.
// A record that fails verification is yielded as an error wrapping
// records.ErrCorrupt, and the query goes on.
func (c *Client) QueryThread(ctx context.Context, thread string, opts ...QueryOption) iter.Seq2[Record, error] {
	var q query
	for _, o := range opts {
		o(&q)
	}
	return func(yield func(Record, error) bool) {
		if q.last > 0 {
			es, err := c.log.Tail(ctx, thread, q.last, q.readOpts()...)
			for _, e := range es {
				if e.Clock < q.from {
					continue
				}
				if !yield(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, nil) {
					return
				}
			}
			if err != nil {
				yield(Record{}, err)
			}
			return
		}
		for e, err := range c.log.Read(ctx, thread, q.readOpts()...) {
			if !yield(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, err) {
				return
			}
		}
	}
}

func savedCheckpoint(e splog.Entry) (SavedCheckpoint, error) {
	cp, err := records.DecodeCheckpoint(e.Record.Body)
	if err != nil {
		return SavedCheckpoint{}, fmt.Errorf("checkpoint at clock %d: %w", e.Clock, err)
	}
	return SavedCheckpoint{Record: Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, Checkpoint: cp}, nil
}

// LatestCheckpoint returns the newest checkpoint of thread that verifies,
// or ErrNotFound. Newer checkpoints that fail verification are passed over
// and their clocks listed in SavedCheckpoint.Skipped; when none verifies,
// the error wraps records.ErrCorrupt.
func (c *Client) LatestCheckpoint(ctx context.Context, thread string) (SavedCheckpoint, error) {
	e, err := c.log.Latest(ctx, thread, records.KindCheckpoint)
	switch {
	case errors.Is(err, ErrNotFound):
		return SavedCheckpoint{}, fmt.Errorf("no checkpoint on thread %q: %w", thread, err)
	case errors.Is(err, records.ErrCorrupt):
		return c.latestValidCheckpoint(ctx, thread, err)
	case err != nil:
		return SavedCheckpoint{}, err
	}
	return savedCheckpoint(e)
}

// latestValidCheckpoint walks back from the newest checkpoint of thread,
// which failed verification with corrupt, to the newest one that verifies.
func (c *Client) latestValidCheckpoint(ctx context.Context, thread string, corrupt error) (SavedCheckpoint, error) {
	for n := 8; ; n *= 4 {
		es, err := c.log.Tail(ctx, thread, n, splog.Kind(records.KindCheckpoint))
		var bad []uint64
		for _, e := range SplitErrors(err) {
			var ce *splog.CorruptError
			if !errors.As(e, &ce) {
				return SavedCheckpoint{}, err
			}
			bad = append(bad, ce.Clock)
		}
		for i := len(es) - 1; i >= 0; i-- {
			sc, err := savedCheckpoint(es[i])
			if err != nil {
				bad = append(bad, es[i].Clock)
				continue
			}
			for _, b := range bad {
				if b > sc.Clock {
					sc.Skipped = append(sc.Skipped, b)
				}
			}
			slices.SortFunc(sc.Skipped, func(a, b uint64) int { return cmp.Compare(b, a) })
			return sc, nil
		}
		if len(es)+len(bad) < n {
			return SavedCheckpoint{}, fmt.Errorf("no checkpoint on thread %q verifies (%d corrupt): %w", thread, len(bad), corrupt)
		}
	}
}

// SplitErrors returns the errors an errors.Join holds (err itself when it
// is not one; none for nil): the errors of a read that met several corrupt
// records, one each. A *log.CorruptError, which unwraps to several errors
// of its own, is one error.
func SplitErrors(err error) []error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*splog.CorruptError); ok {
		return []error{err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// SkippedError reports the records a read passed over because they do
// not verify (or are no record at all): the read's results are the
// others, returned beside it. It wraps records.ErrCorrupt. A bad record
// stored never blocks the records around it: every face reports the
// clocks and goes on (the CLI on stderr, HTTP in "skipped").
type SkippedError struct {
	Clocks []uint64 // the clocks skipped, in the order met
	Err    error    // why, one error each
}

// Error names the clocks skipped and why.
func (e *SkippedError) Error() string {
	return fmt.Sprintf("skipped %d corrupt records (clocks %v): %v", len(e.Clocks), e.Clocks, e.Err)
}

// Unwrap returns why.
func (e *SkippedError) Unwrap() error { return e.Err }

// Skipped is the clocks err says were skipped (err a *SkippedError, or
// wrapping one), and whether it says nothing else.
func Skipped(err error) ([]uint64, bool) {
	var se *SkippedError
	if !errors.As(err, &se) {
		return nil, err == nil
	}
	return se.Clocks, true
}

// skipCorrupt splits the errors of a read: those of records that do not
// verify become a *SkippedError (nil when none), the rest stay errors.
func skipCorrupt(errs []error) (skipped *SkippedError, rest error) {
	var other, bad []error
	var clocks []uint64
	for _, err := range errs {
		var ce *CorruptError
		if errors.As(err, &ce) {
			clocks, bad = append(clocks, ce.Clock), append(bad, err)
		} else {
			other = append(other, err)
		}
	}
	if len(bad) > 0 {
		skipped = &SkippedError{Clocks: clocks, Err: errors.Join(bad...)}
	}
	return skipped, errors.Join(other...)
}

// ListCheckpoints returns the newest limit checkpoints of thread, oldest
// first (limit ≤ 0: all). Checkpoints that do not verify are passed over:
// the others are returned with a *SkippedError naming them.
func (c *Client) ListCheckpoints(ctx context.Context, thread string, limit int) ([]SavedCheckpoint, error) {
	var out []SavedCheckpoint
	var errs []error
	add := func(e splog.Entry, err error) {
		if err == nil {
			var sc SavedCheckpoint
			if sc, err = savedCheckpoint(e); err == nil {
				out = append(out, sc)
				return
			}
		}
		errs = append(errs, err)
	}
	if limit > 0 {
		es, err := c.log.Tail(ctx, thread, limit, splog.Kind(records.KindCheckpoint))
		for _, e := range es {
			add(e, nil)
		}
		if err != nil {
			errs = append(errs, err)
		}
	} else {
		for e, err := range c.log.Read(ctx, thread, splog.Kind(records.KindCheckpoint)) {
			add(e, err)
		}
	}
	skipped, err := skipCorrupt(errs)
	if err != nil {
		return out, err
	}
	if skipped != nil {
		return out, skipped
	}
	return out, nil
}

// Stats is the state of the log's stream.
type Stats = splog.Stats

// Stats returns the state of the log: records and bytes stored, the
// clocks of the oldest and the newest record.
func (c *Client) Stats(ctx context.Context) (Stats, error) { return c.log.Stats(ctx) }

// LastClock returns the clock of the newest record of the log (0: none).
func (c *Client) LastClock(ctx context.Context) (uint64, error) { return c.log.LastClock(ctx) }

// StreamName is the name of the stream that holds the log.
func (c *Client) StreamName() string { return c.log.StreamName() }

// SelfSync reports whether the client's writer fsyncs what it writes
// before it answers (the embedded log, or WithServerStore), rather than
// the server each record.
func (c *Client) SelfSync() bool { return c.log.SelfSync() }

// Latest returns the newest record of kind on thread, verified: one
// last-by-subject get, no scan. It returns an error wrapping ErrNotFound
// when there is none, and one wrapping records.ErrCorrupt when the newest
// does not verify (LatestCheckpoint passes over those instead).
func (c *Client) Latest(ctx context.Context, thread, kind string) (Record, error) {
	e, err := c.log.Latest(ctx, thread, kind)
	if err != nil {
		return Record{}, err
	}
	return Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, nil
}
