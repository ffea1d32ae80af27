package sdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// ErrNotErasable reports an erasure the log refuses: an erasure record
// (erasures are the audit trail and stay) or a record of another thread.
var ErrNotErasable = splog.ErrNotErasable

// MaxErasureTargets is the most records one erasure record names. Erase
// and retention split larger sets into several erasure records; a target
// (id, clock and header) takes at most about 700 bytes, so 1,000 of them
// fit in one record (records.MaxEncodedSize).
const MaxErasureTargets = 1000

// Verification reports, as the log produces them.
type (
	// VerifyReport is what Verify and VerifyAll found: records checked,
	// erased (explained by an erasure record), corrupt and missing.
	VerifyReport = splog.VerifyReport
	// VerifyProblem is one corrupt or missing record of a VerifyReport.
	VerifyProblem = splog.VerifyProblem
	// SigProblem is a record of a VerifyReport whose signature failed, or
	// that is unsigned.
	SigProblem = splog.SigProblem
	// ErasedRecord is one record of a VerifyReport that an erasure removed.
	ErasedRecord = splog.ErasedRecord
)

// EraseResult says what Erase did.
type EraseResult struct {
	// Erasures are the core.erasure records appended, oldest first: one
	// for every MaxErasureTargets records erased, none when every id was
	// already erased.
	Erasures []Receipt
	// Erased are the ids this call erased.
	Erased []records.ID
	// Already are the ids an earlier erasure had erased; for them Erase
	// did nothing.
	Already []records.ID
	// ErasedClocks and AlreadyClocks are the same of EraseMessages.
	ErasedClocks, AlreadyClocks []uint64
}

// EraseMessages erases, as actor (empty: the client's actor) and for
// reason, messages of thread that are no records, by their clocks: a
// message there that does not decode or does not verify (as Verify,
// session list and resume report them), which Erase cannot name, having
// no id. One core.erasure record names each by clock and the digest of
// its bytes, then the messages are deleted securely; Verify then counts
// their clocks as erased.
//
// It refuses, changing nothing, a clock with no message that no erasure
// of the thread names (ErrNotFound), and a message on another thread, an
// erasure record or a record that verifies (ErrNotErasable: Erase takes
// records, by id). A clock erased before is in AlreadyClocks.
func (c *Client) EraseMessages(ctx context.Context, thread, actor string, clocks []uint64, reason string) (EraseResult, error) {
	actor, err := c.actorFor(actor)
	if err != nil {
		return EraseResult{}, err
	}
	if len(clocks) > MaxErasureTargets {
		return EraseResult{}, &records.FieldError{Field: "clocks", Rule: fmt.Sprintf("at most %d messages a call, got %d", MaxErasureTargets, len(clocks))}
	}
	if err := checkErasure(thread, actor, reason); err != nil {
		return EraseResult{}, err
	}
	r, err := c.log.EraseMessages(ctx, thread, clocks, reason, actor, splog.EraseSealed(func(rec *records.Record) (*records.Record, error) {
		return c.admit(ctx, rec)
	}))
	res := EraseResult{ErasedClocks: r.ErasedClocks, AlreadyClocks: r.AlreadyClocks}
	if r.Erasure.Clock != 0 {
		res.Erasures = append(res.Erasures, receipt(r.Erasure))
	}
	return res, err
}

// Erase erases records of thread, as actor (empty: the client's actor),
// for reason: it appends a core.erasure record (act FORGET) that names
// them, with their headers and clocks, then deletes their messages
// securely (the server overwrites the bytes on disk). Later reads never
// return them, and the thread still verifies through the headers the
// erasure record keeps.
//
// Erase refuses, changing nothing, an id that is no record (ErrNotFound),
// an erasure record or a record of another thread (ErrNotErasable), and an
// empty or overlong reason (records.ErrInvalid). An id an earlier erasure
// erased is reported in Already and otherwise ignored. More than
// MaxErasureTargets ids are checked all together first, then erased by
// several erasure records.
func (c *Client) Erase(ctx context.Context, thread, actor string, ids []records.ID, reason string) (EraseResult, error) {
	actor, err := c.actorFor(actor)
	if err != nil {
		return EraseResult{}, err
	}
	if len(ids) == 0 {
		return EraseResult{}, &records.FieldError{Field: "ids", Rule: "must name at least one record"}
	}
	if err := checkErasure(thread, actor, reason); err != nil {
		return EraseResult{}, err
	}
	if len(ids) > MaxErasureTargets {
		if err := c.log.CheckErase(ctx, thread, ids); err != nil {
			return EraseResult{}, err
		}
	}
	if c.log.Door() {
		// spl serve deletes the blobs of what it erases (EraseRecord).
		return c.erase(ctx, thread, actor, ids, reason, MaxErasureTargets)
	}
	blobs := c.runBlobs(ctx, thread, ids) // payloads a run stored beside the log
	res, err := c.erase(ctx, thread, actor, ids, reason, MaxErasureTargets)
	if berr := c.eraseBlobs(ctx, blobs, res.Erased); berr != nil {
		err = errors.Join(err, fmt.Errorf("erase: %w", berr))
	}
	return res, err
}

// erase erases ids, per records an erasure record.
func (c *Client) erase(ctx context.Context, thread, actor string, ids []records.ID, reason string, per int) (EraseResult, error) {
	return c.eraseAfter(ctx, thread, actor, ids, reason, per, false, 0)
}

// eraseAfter is erase, conditional when cond: the first erasure record
// lands only right after the thread's record at after, and each next one
// right after the one before (log.EraseAfter); when the thread has moved,
// it stops with an error wrapping log.ErrMoved.
func (c *Client) eraseAfter(ctx context.Context, thread, actor string, ids []records.ID, reason string, per int, cond bool, after uint64) (EraseResult, error) {
	var res EraseResult
	for chunk := range slices.Chunk(ids, per) {
		var opts []splog.EraseOption
		if cond {
			opts = append(opts, splog.EraseAfter(after))
		}
		// Who may write the thread, and the signature rules (signed
		// with the client's key; refused unsigned under
		// WithRequireSigned), hold for an erasure as for every record.
		opts = append(opts, splog.EraseSealed(func(rec *records.Record) (*records.Record, error) {
			return c.admit(ctx, rec)
		}))
		r, err := c.log.Erase(ctx, thread, chunk, reason, actor, opts...)
		if r.Erasure.Clock != 0 {
			res.Erasures = append(res.Erasures, receipt(r.Erasure))
			after = r.Erasure.Clock
		}
		res.Erased = append(res.Erased, r.Erased...)
		res.Already = append(res.Already, r.Already...)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// checkErasure validates what an erasure record of thread by actor with
// reason would hold, before anything is read or written.
func checkErasure(thread, actor, reason string) error {
	// A stand-in target: the record's rules (thread, actor, reason) are
	// checked by building the erasure record itself.
	h := records.Header{V: records.FormatVersion, Act: records.ActKnow, Kind: "x", Thread: "x", Actor: actor, TS: 1}
	_, err := records.New(records.ActForget, records.KindErasure, thread, actor, time.Now(),
		&records.Erasure{Targets: []records.ErasureTarget{{ID: h.ID(), Header: h}}, Reason: reason})
	return err
}

// Verify walks thread and checks every record's id, body digest and prev
// link, bridging erased records through the headers their erasure records
// keep. Corrupt records and gaps that no erasure explains are in the
// report; VerifyReport.OK says whether there are none.
//
// Then it checks the lineage links of the thread's checkpoints
// (sdk/lineage.go): a fork's forked_from names a checkpoint of its
// source thread at that clock, or one an erasure record there names; a
// parent is a checkpoint of the thread, erased or not, or the fork's
// source. A link that does not hold is in Missing.
func (c *Client) Verify(ctx context.Context, thread string) (VerifyReport, error) {
	rep, err := c.log.Verify(ctx, thread)
	if err != nil {
		return rep, err
	}
	return rep, c.verifyLinks(ctx, thread, &rep)
}

// VerifyAll verifies every thread of the log and accounts for every clock:
// a message gone that no erasure names is missing. progress, when set, is
// called with the number of messages read so far, every 10,000 and at the
// end.
// The lineage links of every thread's checkpoints are checked as Verify
// checks them.
func (c *Client) VerifyAll(ctx context.Context, progress func(read uint64)) (VerifyReport, error) {
	rep, err := c.log.VerifyAll(ctx, progress)
	if err != nil {
		return rep, err
	}
	return rep, c.verifyAllLinks(ctx, &rep)
}

// Tombstone is what is left of an erased record: its header, kept by the
// erasure record, and who erased it, when and why.
type Tombstone struct {
	ID       records.ID
	Clock    uint64         // where the record was; 0 when the erasure did not say
	Header   records.Header // the erased record's header
	ErasedBy Receipt        // the erasure record
	Actor    string         // who erased it (the erasure record's actor)
	Time     time.Time      // when (the erasure record's time)
	Reason   string
}

// Tombstones returns the records of thread that erasures removed, in the
// order of their clocks. Erasure records that do not verify are skipped
// and reported in the error (wrapping records.ErrCorrupt), next to the
// tombstones of the others.
func (c *Client) Tombstones(ctx context.Context, thread string) ([]Tombstone, error) {
	var out []Tombstone
	var errs []error
	seen := make(map[records.ID]bool)
	for e, err := range c.log.Read(ctx, thread, splog.Kind(records.KindErasure)) {
		if err != nil {
			if !errors.Is(err, records.ErrCorrupt) {
				return out, fmt.Errorf("tombstones: %w", err)
			}
			errs = append(errs, err)
			continue
		}
		ts, err := TombstonesOf(Record{ID: e.ID, Clock: e.Clock, Record: e.Record})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, t := range ts {
			if !seen[t.ID] { // the first erasure that names a record erased it
				seen[t.ID] = true
				out = append(out, t)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Tombstone) int { return cmp.Compare(a.Clock, b.Clock) })
	return out, errors.Join(errs...)
}

// TombstonesOf returns the tombstones erasure record r leaves: one for
// each record it names, in its order (a target that names a message that
// is no record leaves none: it has nothing to show). A record of another
// kind leaves none; an erasure whose body does not decode is an error.
func TombstonesOf(r Record) ([]Tombstone, error) {
	if r.Header.Kind != records.KindErasure {
		return nil, nil
	}
	er, err := records.DecodeErasure(r.Body)
	if err != nil {
		return nil, fmt.Errorf("erasure %s at clock %d: %w", r.ID, r.Clock, err)
	}
	var out []Tombstone
	for _, t := range er.Targets {
		if !t.Message() {
			out = append(out, Tombstone{
				ID: t.ID, Clock: t.Clock, Header: t.Header,
				ErasedBy: Receipt{ID: r.ID, Clock: r.Clock}, Actor: r.Header.Actor, Time: r.Time(),
				Reason: er.Reason,
			})
		}
	}
	return out, nil
}

// ErasedError reports that a record looked up by id was erased. It wraps
// ErrNotFound.
type ErasedError struct {
	Tombstone Tombstone
}

// Error implements error.
func (e *ErasedError) Error() string {
	t := e.Tombstone
	return fmt.Sprintf("record %s was erased by %s at %s: %s", t.ID, t.ErasedBy.ID,
		t.Time.Format(time.RFC3339), t.Reason)
}

// Unwrap returns ErrNotFound.
func (e *ErasedError) Unwrap() error { return ErrNotFound }

// Record looks a record up by id, on thread (empty: anywhere in the log,
// which takes time in proportion to the log's size), and verifies it. It
// checks every message of the record's thread that claims the id, so that
// a forged copy beside the original is found too.
//
// When a message claiming id fails verification, Record returns the error
// (wrapping records.ErrCorrupt, a *log.CorruptError naming its clock) and,
// beside it, the Record as stored at that clock: ID and Clock always, and
// the record decoded without verification when its bytes decode. When no
// message holds id, the error is an *ErasedError if one of the thread's
// erasure records names it (only with a thread), else ErrNotFound.
func (c *Client) Record(ctx context.Context, id records.ID, thread string) (Record, error) {
	if thread == "" {
		e, err := c.log.Get(ctx, id, "")
		var ce *splog.CorruptError
		switch {
		case err == nil:
			thread = e.Record.Header.Thread
		case errors.As(err, &ce):
			t, ok := splog.ThreadOfSubject(ce.Subject)
			if !ok {
				return c.unverified(ctx, id, ce), err
			}
			thread = t
		case errors.Is(err, ErrNotFound):
			return Record{}, fmt.Errorf("record %s: %w", id, ErrNotFound)
		default:
			return Record{}, fmt.Errorf("record %s: %w", id, err)
		}
	}
	clocks, err := c.log.Claimants(ctx, splog.ThreadSubject(thread), id)
	if err != nil {
		return Record{}, fmt.Errorf("record %s: %w", id, err)
	}
	var found *Record
	for _, clock := range clocks {
		e, err := c.log.At(ctx, clock)
		var ce *splog.CorruptError
		switch {
		case err == nil && found == nil:
			found = &Record{ID: e.ID, Clock: e.Clock, Record: e.Record}
		case err == nil:
		case errors.As(err, &ce):
			return c.unverified(ctx, id, ce), err
		case errors.Is(err, ErrNotFound):
			// Erased (or deleted) since the scan.
		default:
			return Record{}, fmt.Errorf("record %s: %w", id, err)
		}
	}
	if found != nil {
		return *found, nil
	}
	ts, err := c.Tombstones(ctx, thread)
	for _, t := range ts {
		if t.ID == id {
			return Record{ID: id, Clock: t.Clock}, &ErasedError{Tombstone: t}
		}
	}
	if err != nil {
		return Record{}, fmt.Errorf("record %s: %w", id, err)
	}
	return Record{}, fmt.Errorf("record %s on thread %q: %w", id, thread, ErrNotFound)
}

// unverified returns the message ce names as a Record, decoded without
// verification when it decodes.
func (c *Client) unverified(ctx context.Context, id records.ID, ce *splog.CorruptError) Record {
	r := Record{ID: id, Clock: ce.Clock}
	if rec, err := c.log.Raw(ctx, ce.Clock); err == nil {
		r.Record = rec
	}
	return r
}
