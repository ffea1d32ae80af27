package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spl-dev/spl/records"
)

// An append is in doubt when it was sent and no answer came: the server
// may have stored it, may store it still, or never will. The writer
// settles a doubt by reading the thread from the stream leader, and what
// a read can settle is limited:
//
//   - The record found where it was to land: it landed.
//   - Another record found right after the clock its thread's first
//     record in the unit expected: it never lands. nats-server checks
//     Nats-Expected-Last-Subject-Sequence before it proposes a message,
//     against what the leader has applied and what it has in flight on
//     the same subject (checkMsgHeadersPreClusteredProposal in
//     server/jetstream_batching.go: expectedPerSubjectInProcess,
//     inflight), and an atomic batch is stored whole or not at all, so a
//     message that expects a clock its thread has moved past is never
//     stored, whichever server leads the stream later.
//   - Nothing after that clock: not settled. The leader answers a message
//     get from what it has applied (jsMsgGetRequest in
//     server/jetstream_api.go answers on the stream leader only, and
//     reads wait for a batch being applied to be whole: isolateMu). A
//     newly elected leader has applied every entry of the terms before
//     its own before it answers (raft.go: switchToLeader sets aflr, and
//     only once Processed reaches it does Leader() hold, which
//     isStreamLeader asks), so what the dead leader committed is there.
//     But the publish itself may still be on its way, behind the read: on
//     the network, queued on the leader, proposed and not yet applied.
//     Taking "not found" for "not landed" and sealing the record again on
//     the thread's head, read a moment later with the first copy on it,
//     stored it twice (docs/faults.md, row 5).
//
// So an append whose thread has not moved is sent again exactly as it was
// sent: the same messages, each thread's first record expecting the same
// clock. By the check above at most one of the two copies is stored. The
// answer settles it: stored; or refused because the thread moved on, by
// the first copy or by another writer, which the next read tells apart.
// Until the record is settled the writer never seals it on another head.

// errUnsettled reports an append in doubt whose thread, as the stream
// leader has applied it, has not moved past the clock the append expected:
// it is not stored, and may still be.
var errUnsettled = errors.New("not stored, and may still be")

// doubtRead bounds one read made to settle a doubt. A read sent while the
// stream has no leader, or to one that just died, is never answered: the
// followers still take the dead leader for alive until they call an
// election, and only a leader answers. Asked again a moment later, the
// new leader answers at once; waiting out the log's timeout instead cost
// a whole timeout more per failover.
const doubtRead = 250 * time.Millisecond

// doubt is an append that was sent but never answered, and whose callers
// stopped waiting: unit is what it was sent with, sealed as it was, to be
// settled or sent again as a whole (recall).
type doubt struct {
	unit []*Pending
}

// recall finds an earlier append of the same record: landed, or in doubt
// and now settled. A doubt settled as never landing is forgotten and the
// record appended afresh; one not settled, whose thread has not moved on,
// is sent again as it was. While it cannot be settled (the server does not
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
	runs := threadRuns(d.unit)
	clocks, err := w.check(rctx, d.unit, runs)
	if errors.Is(err, errUnsettled) {
		var first uint64
		if first, err = w.send(d.unit); err == nil {
			for i := range clocks {
				clocks[i] = first + uint64(i)
			}
		} else if errors.Is(err, errStale) {
			// Moved on since: by the first copy, or by another writer.
			clocks, err = w.check(rctx, d.unit, runs)
		}
	}
	if err != nil {
		if errors.Is(err, ErrDiskFull) {
			return Entry{}, false, fmt.Errorf("%w: still unresolved: %w", ErrInDoubt, err)
		}
		return Entry{}, false, fmt.Errorf("%w: still unresolved: %v", ErrInDoubt, err)
	}
	// Settled, for every record of the unit.
	var serr error
	if slices.ContainsFunc(clocks, func(c uint64) bool { return c != 0 }) {
		serr = w.fsync()
	}
	var e Entry
	w.mu.Lock()
	for _, q := range d.unit {
		delete(w.doubts, q.rec.Header.BD)
	}
	w.mu.Unlock()
	for i, q := range d.unit {
		delete(w.heads, q.rec.Header.Thread)
		if clocks[i] == 0 {
			continue
		}
		qe := Entry{Clock: clocks[i], ID: q.id, Record: q.sealed}
		w.remember(qe)
		w.l.mark.saw(qe.Clock, qe.ID)
		if q.rec.Header.BD == rec.Header.BD {
			e = qe
		}
	}
	if e.Clock == 0 {
		return Entry{}, false, nil // it never landed: append it afresh
	}
	if serr != nil {
		return Entry{}, false, fmt.Errorf("stored at clock %d, but not made durable: %w", e.Clock, serr)
	}
	if sealed := rec.WithPrev(e.Record.Header.Prev); sealed.ID() != e.ID {
		return Entry{}, false, nil // another record of the same body: append this one
	}
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
// others. A batch not settled is sent again as it was, until it is, or
// until no caller waits any more.
func (w *writer) inDoubt(batch []*Pending, runs map[string]*run, cause error, attempt int) {
	for {
		ctx, cancel := w.l.c.UntilAnswered(context.Background(), w.l.opts.Timeout)
		clocks, err := w.check(ctx, batch, runs)
		cancel()
		if errors.Is(err, errUnsettled) {
			// Nothing of it is stored, and it may still be: the same
			// messages again, expecting the same clocks.
			var first uint64
			if first, err = w.send(batch); err == nil {
				w.landed1(batch, first, w.fsync())
				return
			}
			if errors.Is(err, ErrDiskFull) {
				// Refused for want of room: this copy is not stored,
				// and no copy will be while the disk is full. Whether
				// the first may still land is not known: the append
				// stays in doubt (a retry settles it first, recall),
				// and the callers are told at once, both things.
				w.keepDoubt(batch, runs)
				w.fail(batch, fmt.Errorf("%w: %w", ErrInDoubt, err))
				return
			}
			// Refused (the thread moved on, maybe with the first copy)
			// or not answered: read again below.
		} else if err == nil {
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
			// Never to land: sealed again on the heads as they are now.
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
		// Not settled: go on while any caller still waits.
		alive := false
		for _, p := range batch {
			if p.ctx.Err() == nil {
				alive = true
			}
		}
		if !alive || w.l.isClosed() {
			w.keepDoubt(batch, runs)
			w.fail(batch, fmt.Errorf("%w: %v", ErrInDoubt, cause))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// keepDoubt remembers batch, not settled, as it was sent, so that a retry
// of any of its records settles it first (recall); the heads of its
// threads are read again before the next append to them.
func (w *writer) keepDoubt(batch []*Pending, runs map[string]*run) {
	unit := slices.Clone(batch)
	w.mu.Lock()
	for _, p := range batch {
		w.doubts[p.rec.Header.BD] = doubt{unit: unit}
	}
	w.mu.Unlock()
	for t := range runs {
		delete(w.heads, t)
	}
}

// check finds out which records of the batch landed: it returns the clock
// of each, 0 for one that never will, or errUnsettled when none is stored
// and the batch may still be.
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
// turn. Once the first is found, what is not found is final: the server
// lets no read see a batch it is storing until it is whole (isolateMu).
func (w *writer) check(ctx context.Context, batch []*Pending, runs map[string]*run) ([]uint64, error) {
	clocks := make([]uint64, len(batch))
	at := func(p *Pending) (uint64, error) {
		r := runs[p.rec.Header.Thread]
		return w.find(ctx, p.rec.Header.Thread, r.expect, r.pos[p], p.id)
	}
	first, err := at(batch[0])
	if errors.Is(err, errUnsettled) {
		// If another thread of the batch moved on without it, the batch
		// never lands (all or nothing); else it may.
		for _, p := range batch[1:] {
			r := runs[p.rec.Header.Thread]
			if r.pos[p] != 0 || p.rec.Header.Thread == batch[0].rec.Header.Thread {
				continue
			}
			if c, err := w.find(ctx, p.rec.Header.Thread, r.expect, 0, p.id); err == nil && c == 0 {
				return clocks, nil
			}
		}
		return clocks, errUnsettled
	}
	if err != nil || first == 0 {
		return clocks, err // none landed: the records are stored in order
	}
	n := len(batch) - 1
	last := first
	if n > 0 {
		if last, err = at(batch[n]); errors.Is(err, errUnsettled) {
			last = 0 // its thread did not move: the batch stopped before it
		} else if err != nil {
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
		m, err := w.read(ctx, getRequest{Seq: seq, NextFor: ThreadSubject(t)})
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

// find looks for the record id at position pos (0-based) among thread's
// records after clock after: its clock, 0 when another record holds
// that position (it never lands there), or errUnsettled when the thread
// has no record after after.
func (w *writer) find(ctx context.Context, thread string, after uint64, pos int, id records.ID) (uint64, error) {
	seq := after + 1
	for i := 0; ; i++ {
		m, err := w.read(ctx, getRequest{Seq: seq, NextFor: ThreadSubject(thread)})
		if errors.Is(err, ErrNotFound) {
			if i == 0 {
				return 0, errUnsettled
			}
			// The thread moved on, and has fewer records since than pos:
			// a batch that landed has all its records (a single server's
			// batch stopped midway aside, whose rest never lands).
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if i == pos {
			if m.hdr.Get(HeaderID) != id.String() {
				return 0, nil
			}
			return m.clock, nil
		}
		seq = m.clock + 1
	}
}

// read is one message get from the stream leader, bounded by doubtRead.
func (w *writer) read(ctx context.Context, req getRequest) (stored, error) {
	rctx, cancel := context.WithTimeout(ctx, min(doubtRead, w.l.opts.Timeout))
	defer cancel()
	return w.l.getLeader(rctx, req)
}
