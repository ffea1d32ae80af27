package sdk

import (
	"context"
	"fmt"
	"io"

	"github.com/spl-dev/spl/archive"
	"github.com/spl-dev/spl/records"
)

// ImportedThread is one thread of an import.
type ImportedThread struct {
	Thread   string
	Records  int        // records of the thread in the archive, erased ones included
	Present  int        // of them, those the log held already (its first Present)
	Appended int        // records appended (an erased record is not: its erasure explains it)
	Head     records.ID // the thread's last record in the archive
}

// ImportResult says what Import did.
type ImportResult struct {
	Root     string // the CID of the archive's index block
	Threads  []ImportedThread
	Records  int
	Appended int
}

// ImportConflictError refuses an import that would fork a thread: the log
// holds another record than the archive at a position of the thread.
// Nothing was written. It wraps ErrConflict and records.ErrInvalid.
type ImportConflictError struct {
	Thread   string
	Position int        // 0 is the thread's first record
	Clock    uint64     // the log's record's clock (0: not known)
	Log      records.ID // the record the log holds there
	Archive  records.ID // the record the archive holds there
	Reason   string     // set when the ids agree but the import still cannot keep the thread as it is
}

func (e *ImportConflictError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("refused, nothing written: thread %q, record %d (%s): %s", e.Thread, e.Position, e.Archive, e.Reason)
	}
	return fmt.Sprintf("refused, nothing written: thread %q diverges at record %d: the log holds %s (clock %d), the archive %s; appending the archive's would fork the thread",
		e.Thread, e.Position, e.Log, e.Clock, e.Archive)
}

// Unwrap returns ErrConflict and records.ErrInvalid.
func (e *ImportConflictError) Unwrap() []error { return []error{ErrConflict, records.ErrInvalid} }

// importPlan is what Import appends to one thread.
type importPlan struct {
	t       archive.Thread
	from    int    // the first record of t to append
	after   uint64 // the thread's last clock when planned: the appends land only right after it
	clocks  map[records.ID]uint64
	present int
}

// Import reads an archive (package archive) from r and appends its
// threads' records to the log with the ids they have: the same header,
// body, salt and signature, chained as they were. Everything is checked
// before anything is written: the whole archive (archive.Read: an error
// wraps records.ErrCorrupt and says which block or record, where), and
// every thread against the log:
//
//   - a thread the log does not hold is appended whole;
//   - a thread whose first records the log holds, the archive's ids at
//     the same positions, gets the rest appended (a thread that holds
//     them all gets nothing: importing twice changes nothing);
//   - a thread whose records differ at a position is refused, with an
//     *ImportConflictError naming the thread, the position, the clock
//     and both ids, and so is the whole import;
//   - a record erased in the archive but whole in the log refuses the
//     import too: its erasure would not take its body out of this log.
//
// A record erased in the archive is not appended (its body is gone); the
// erasure records that name it are, so the thread verifies (spl verify)
// as it did where it was exported. A record erased here that the archive
// holds whole stays erased. The thread's redaction policies are not
// applied: the records were sealed where they were written, and their ids
// hold them. Who may write each thread (WithBindingsByAdmin) and, under
// WithRequireSigned, that every record appended is signed, hold as for
// any append; the client's own key signs nothing.
//
// The records go to the stream as stored, each conditional on its thread
// being at the clock it was at when planned: an append by another
// process meanwhile stops the import of that thread with an error
// (wrapping ErrConflict); the threads imported before it stay, and the
// import can be run again. A door client (spl serve's, which takes only
// unchained records) cannot import: its server's data directory can.
func (c *Client) Import(ctx context.Context, r io.Reader) (ImportResult, error) {
	var res ImportResult
	if c.isClosing() {
		return res, ErrClosed
	}
	a, err := archive.Read(r)
	if err != nil {
		return res, err
	}
	res.Root = archive.CIDString(a.Root)
	if c.log.Door() {
		return res, fmt.Errorf("%w: records are imported chained as they were, which spl serve's door does not take; import on the server's data directory", ErrForbidden)
	}
	plans := make([]importPlan, 0, len(a.Threads))
	for _, t := range a.Threads {
		p, err := c.planImport(ctx, t)
		if err != nil {
			return res, err
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		n, err := c.importThread(ctx, p)
		res.Threads = append(res.Threads, ImportedThread{Thread: p.t.Name, Records: len(p.t.Records), Present: p.present,
			Appended: n, Head: p.t.Records[len(p.t.Records)-1].ID})
		res.Records += len(p.t.Records)
		res.Appended += n
		if err != nil {
			return res, err
		}
	}
	if res.Appended > 0 {
		if err := c.syncImported(ctx); err != nil {
			return res, fmt.Errorf("%d records appended, not made durable: %w", res.Appended, err)
		}
	}
	return res, nil
}

// planImport compares t with its thread in the log.
func (c *Client) planImport(ctx context.Context, t archive.Thread) (importPlan, error) {
	p := importPlan{t: t, clocks: make(map[records.ID]uint64)}
	if err := c.mayWrite(ctx, t.Name); err != nil {
		return p, fmt.Errorf("thread %q: %w", t.Name, err)
	}
	after, err := c.log.ThreadClock(ctx, t.Name)
	if err != nil {
		return p, err
	}
	chain, err := c.threadChain(ctx, t.Name)
	if err != nil {
		return p, fmt.Errorf("this log's %w", err)
	}
	for i, it := range chain {
		if i >= len(t.Records) {
			break // the log is ahead of the archive: nothing to append
		}
		ar := t.Records[i]
		if it.rec.ID != ar.ID {
			return p, &ImportConflictError{Thread: t.Name, Position: i, Clock: it.clock, Log: it.rec.ID, Archive: ar.ID}
		}
		if ar.Erased() && !it.rec.Erased() {
			return p, &ImportConflictError{Thread: t.Name, Position: i, Clock: it.clock, Log: it.rec.ID, Archive: ar.ID,
				Reason: fmt.Sprintf("erased in the archive but whole in this log (clock %d), where the archive's erasure would not remove it: erase it here first, or import into a log without it", it.clock)}
		}
		if !it.rec.Erased() {
			p.clocks[it.rec.ID] = it.clock
		}
	}
	p.present = min(len(chain), len(t.Records))
	p.from = p.present
	p.after = after
	for _, r := range t.Records[p.from:] {
		if !r.Erased() && r.Sig == nil && c.cfg.requireSigned {
			return p, &records.FieldError{Field: "actor", Rule: fmt.Sprintf("this log requires signed records, and record %s of thread %q in the archive is unsigned", r.ID, t.Name)}
		}
	}
	return p, nil
}

// importThread appends p's records, each as the archive has it (prev
// included: the log's writer would chain it on the thread's last record,
// which differs after an erased one), conditional on the thread's last
// clock, and returns how many it appended.
func (c *Client) importThread(ctx context.Context, p importPlan) (int, error) {
	n := 0
	after := p.after
	var prevClock uint64
	if p.from > 0 {
		prevClock = p.clocks[p.t.Records[p.from-1].ID]
	}
	for i := p.from; i < len(p.t.Records); i++ {
		r := p.t.Records[i]
		if r.Erased() {
			prevClock = 0
			continue
		}
		e, err := c.log.AppendChained(ctx, r.Record(), after, prevClock)
		if err != nil {
			return n, fmt.Errorf("thread %q, record %d (%s): %d of its records appended, then: %w (another append to the thread meanwhile? import again to append the rest)",
				p.t.Name, i, r.ID, n, err)
		}
		after, prevClock = e.Clock, e.Clock
		n++
	}
	return n, nil
}

// syncImported makes the imported records durable, as the log's writer
// does for its own appends: the embedded log's server leaves the fsync
// to its client. Then the high-water mark is raised over them.
func (c *Client) syncImported(ctx context.Context) error {
	if err := c.log.SyncStore(); err != nil {
		return err
	}
	return c.log.MarkNow(ctx)
}
