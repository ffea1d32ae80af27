package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spl-dev/spl/records"
)

// doubt is an append that was sent but never answered: sealed with prev
// after clock `after`, at position pos of its thread's run in the batch.
type doubt struct {
	id    records.ID
	after uint64
	pos   int
}

// recall finds an earlier append of the same record: landed, or in doubt
// and now resolved. While a doubt cannot be resolved (the server does not
// answer), it stays, and the retry fails with ErrInDoubt rather than risk
// a second copy.
func (w *writer) recall(ctx context.Context, rec *records.Record) (Entry, bool, error) {
	w.mu.Lock()
	l, ok := w.landed[rec.Header.BD]
	d, doubtful := w.doubts[rec.Header.BD]
	w.mu.Unlock()
	if ok {
		// The same body digest means the same salt and body; the id
		// proves the header is the same too.
		if sealed := rec.WithPrev(l.prev); sealed.ID() == l.id {
			return Entry{Clock: l.clock, ID: l.id, Record: sealed}, true, nil
		}
	}
	if !doubtful {
		return Entry{}, false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, w.l.opts.Timeout)
	defer cancel()
	e, err := w.resolve(rctx, rec.Header.Thread, d)
	if err != nil {
		return Entry{}, false, fmt.Errorf("%w: still unresolved: %v", ErrInDoubt, err)
	}
	w.mu.Lock()
	delete(w.doubts, rec.Header.BD)
	w.mu.Unlock()
	if e.Clock == 0 {
		return Entry{}, false, nil // it never landed: append it afresh
	}
	w.remember(e)
	return e, true, nil
}

func (w *writer) remember(e Entry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	bd := e.Record.Header.BD
	if len(w.landedRing) < landedCap {
		w.landedRing = append(w.landedRing, bd)
	} else {
		delete(w.landed, w.landedRing[w.landedNext])
		w.landedRing[w.landedNext] = bd
		w.landedNext = (w.landedNext + 1) % landedCap
	}
	w.landed[bd] = landedRec{clock: e.Clock, id: e.ID, prev: e.Record.Header.Prev}
}

// landedRec is what the writer remembers of a landed append: enough to
// answer a retry without keeping the record itself alive.
type landedRec struct {
	clock    uint64
	id, prev records.ID
}

// inDoubt handles a batch that was sent but not answered: it finds out
// which of its records landed (check), completes those, and retries the
// others.
func (w *writer) inDoubt(batch []*Pending, runs map[string]*run, cause error, attempt int) {
	for {
		clocks, err := w.check(batch, runs)
		if err == nil {
			var rest []*Pending
			stored := false
			for i, p := range batch {
				if clocks[i] == 0 {
					rest = append(rest, p)
				} else {
					stored = true
				}
			}
			var serr error
			if stored {
				serr = w.fsync()
			}
			for i, p := range batch {
				if clocks[i] != 0 {
					w.settle(p, clocks[i], serr)
				}
			}
			if len(rest) == 0 {
				return
			}
			for _, p := range rest {
				delete(w.heads, p.rec.Header.Thread)
			}
			if attempt < maxAttempts {
				w.land(rest, attempt+1)
			} else {
				w.fail(rest, cause)
			}
			return
		}
		// Still no answer: wait while any caller still waits.
		alive := false
		for _, p := range batch {
			if p.ctx.Err() == nil {
				alive = true
			}
		}
		if !alive || w.l.isClosed() {
			w.mu.Lock()
			for _, p := range batch {
				r := runs[p.rec.Header.Thread]
				w.doubts[p.rec.Header.BD] = doubt{id: p.id, after: r.expect, pos: r.pos[p]}
			}
			w.mu.Unlock()
			for t := range runs {
				delete(w.heads, t)
			}
			w.fail(batch, fmt.Errorf("%w: %v", ErrInDoubt, cause))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check finds out which records of the batch landed: it returns the clock
// of each, 0 for one that did not.
//
// An atomic batch is meant to land whole or not at all, but a single
// nats-server does not keep that promise when it cannot store a record
// midway (its storage limit reached, a full disk): its commit stores the
// records in order, stops at the first it cannot store, and answers
// nothing (processJetStreamAtomicBatchMsg in server/stream.go). Taking
// the batch as landed because its first record did acknowledged records
// that were never stored (faults.md, row 1). So the first record is
// looked for, then the last; when the first landed and the last did not
// land right after the others, each thread's records are looked for in
// turn.
func (w *writer) check(batch []*Pending, runs map[string]*run) ([]uint64, error) {
	clocks := make([]uint64, len(batch))
	ctx, cancel := w.l.c.UntilAnswered(context.Background(), w.l.opts.Timeout)
	defer cancel()
	at := func(p *Pending) (uint64, error) {
		r := runs[p.rec.Header.Thread]
		e, err := w.resolve(ctx, p.rec.Header.Thread, doubt{id: p.id, after: r.expect, pos: r.pos[p]})
		return e.Clock, err
	}
	first, err := at(batch[0])
	if err != nil || first == 0 {
		return clocks, err // none landed: the records are stored in order
	}
	n := len(batch) - 1
	last := first
	if n > 0 {
		if last, err = at(batch[n]); err != nil {
			return clocks, err
		}
	}
	if last == first+uint64(n) {
		for i := range clocks {
			clocks[i] = first + uint64(i)
		}
		return clocks, nil
	}
	// Landed in part: walk each thread from where the batch began.
	next := make(map[string]uint64, len(runs)) // where the thread's next record is looked for
	stop := make(map[string]bool, len(runs))   // the thread's run stopped landing
	for i, p := range batch {
		t := p.rec.Header.Thread
		if stop[t] {
			continue
		}
		seq, ok := next[t]
		if !ok {
			seq = runs[t].expect + 1
		}
		m, err := w.l.getLeader(ctx, getRequest{Seq: seq, NextFor: ThreadSubject(t)})
		if errors.Is(err, ErrNotFound) {
			stop[t] = true
			continue
		}
		if err != nil {
			return clocks, err
		}
		if m.hdr.Get(HeaderID) != p.id.String() {
			stop[t] = true
			continue
		}
		clocks[i] = m.clock
		next[t] = m.clock + 1
	}
	return clocks, nil
}

// resolve finds whether the record d describes landed: it returns its
// entry, or a zero Entry when the thread moved on without it.
func (w *writer) resolve(ctx context.Context, thread string, d doubt) (Entry, error) {
	m, err := w.l.nthAfter(ctx, thread, d.after, d.pos)
	if errors.Is(err, ErrNotFound) {
		return Entry{}, nil
	}
	if err != nil {
		return Entry{}, err
	}
	if m.hdr.Get(HeaderID) != d.id.String() {
		return Entry{}, nil
	}
	return m.decode()
}
