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
// whether it landed (atomic: all or none), and retries it if it did not.
func (w *writer) inDoubt(batch []*Pending, runs map[string]*run, cause error, attempt int) {
	for {
		landed, first, err := w.check(batch, runs)
		if err == nil {
			if landed {
				w.landed1(batch, first, w.fsync())
				return
			}
			for t := range runs {
				delete(w.heads, t)
			}
			if attempt < maxAttempts {
				w.land(batch, attempt+1)
			} else {
				w.fail(batch, cause)
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

// check looks for the batch's first thread run on the log: the record after
// the run's expected last clock is either the run's first record, or the
// batch did not land.
func (w *writer) check(batch []*Pending, runs map[string]*run) (bool, uint64, error) {
	p := batch[0]
	r := runs[p.rec.Header.Thread]
	ctx, cancel := context.WithTimeout(context.Background(), w.l.opts.Timeout)
	defer cancel()
	e, err := w.resolve(ctx, p.rec.Header.Thread, doubt{id: p.id, after: r.expect, pos: 0})
	if err != nil {
		return false, 0, err
	}
	if e.Clock == 0 {
		return false, 0, nil
	}
	return true, e.Clock, nil
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
