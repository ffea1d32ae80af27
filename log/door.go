package log

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
)

// The door (docs/design.md, "One door"). On spl serve, a client that is
// not the server itself writes only through the server's service layer:
// it hands its records, unchained, to the door, a request/reply service
// the server runs on its NATS listener, and the server seals, checks and
// appends them as its own HTTP API does. Its NATS credentials allow
// nothing else that writes: no publish to the log's subjects, no
// JetStream API that changes a stream, a consumer or a bucket. A log
// opened on a connection where the door answers (Open, On) is a door log:
// its appends and erasures go through the door, it provisions nothing and
// keeps no mark, and it refuses to run on a stream whose configuration
// differs from the log's (CheckStream).
//
// The door's subjects name the right they need, so that the NATS
// server's permissions, an allow-list per right, decide who reaches which:
// DoorSubject(DoorAdmin, op) for the admin right, DoorSubject(DoorWrite,
// op) for the write right. The read right reaches neither.

// DoorPrefix is the first token of the door's subjects.
const DoorPrefix = "spl.door"

// The rights of the door's subjects.
const (
	DoorAdmin = "a" // the admin right: the actor key bindings too
	DoorWrite = "w" // the write right
)

// The door's operations.
const (
	DoorInfo       = "info"        // which stream the door writes, and its limits
	DoorAppend     = "append"      // append records (DoorAppendRequest)
	DoorErase      = "erase"       // erase records (DoorEraseRequest)
	DoorBlobPut    = "blob.put"    // store part of a blob (DoorBlobRequest)
	DoorBlobGet    = "blob.get"    // read part of a blob (DoorBlobRequest)
	DoorBlobDelete = "blob.delete" // delete a blob (DoorBlobRequest)
)

// DoorQueue is the queue group of the door's responders: in a cluster
// every node serves the door, and one answers each request.
const DoorQueue = "spl-door"

// DoorSubject is the subject of operation op for right (DoorAdmin or
// DoorWrite).
func DoorSubject(right, op string) string { return DoorPrefix + "." + right + "." + op }

// DoorInfoReply answers DoorInfo.
type DoorInfoReply struct {
	Stream     string     `cbor:"stream"`      // the log's stream
	MaxRequest int        `cbor:"max_request"` // the largest request the server takes, in bytes
	Loss       *DoorLoss  `cbor:"loss,omitempty"`
	Err        *DoorError `cbor:"err,omitempty"`
}

// DoorLoss is the server's loss behind its high-water mark (MarkLoss),
// which a client of the door cannot see for itself: the mark is in the
// server's data directory.
type DoorLoss struct {
	MarkClock uint64 `cbor:"mark_clock"`
	MarkID    string `cbor:"mark_id"`
	LastClock uint64 `cbor:"last_clock"`
	From      uint64 `cbor:"from"`
	To        uint64 `cbor:"to"`
	Reason    string `cbor:"reason"`
}

// DoorLossOf is the wire form of loss; nil for none.
func DoorLossOf(loss *MarkLoss) *DoorLoss {
	if loss == nil {
		return nil
	}
	return &DoorLoss{MarkClock: loss.Mark.Clock, MarkID: loss.Mark.ID, LastClock: loss.LastClock, From: loss.From, To: loss.To, Reason: loss.Reason}
}

// markLoss is the loss dl says; nil for none.
func (dl *DoorLoss) markLoss() *MarkLoss {
	if dl == nil {
		return nil
	}
	return &MarkLoss{Mark: Mark{Clock: dl.MarkClock, ID: dl.MarkID}, LastClock: dl.LastClock, From: dl.From, To: dl.To, Reason: "the server says: " + dl.Reason}
}

// DoorItem is one record handed to the door: encoded unchained (no
// prev), and conditional on its thread's clock when Cond is set (see
// AppendAfter).
type DoorItem struct {
	Record []byte `cbor:"rec"`
	Sig    string `cbor:"sig,omitempty"` // its signature, stored form (records.Signature), when signed
	Cond   bool   `cbor:"cond,omitempty"`
	After  uint64 `cbor:"after,omitempty"`
}

// DoorAppendRequest is the request of DoorAppend: records appended in
// order, each on its own (one failing fails no other).
type DoorAppendRequest struct {
	Items []DoorItem `cbor:"items"`
	// Budget is how long the client waits for the answer, in
	// milliseconds (0: the server's own timeout). The server stops
	// retrying an append's lost races before it is spent, so that a
	// record the client then sends again cannot land twice.
	Budget int64 `cbor:"budget,omitempty"`
}

// DoorResult is the outcome of one DoorItem: where it landed, or why not.
// Stored is the record as stored when the service layer changed it
// (a redaction), else empty: the record sent, chained on Prev.
type DoorResult struct {
	ID     []byte     `cbor:"id,omitempty"`
	Clock  uint64     `cbor:"clock,omitempty"`
	Prev   []byte     `cbor:"prev,omitempty"`
	Stored []byte     `cbor:"stored,omitempty"`
	Err    *DoorError `cbor:"err,omitempty"`
}

// DoorAppendReply answers DoorAppendRequest: one result per item, in
// order, or Err for the whole request.
type DoorAppendReply struct {
	Results []DoorResult `cbor:"results"`
	Err     *DoorError   `cbor:"err,omitempty"`
}

// DoorEraseRequest is the request of DoorErase: the erasure record the
// client built and sealed (unchained), conditional as a DoorItem is. The
// server checks its targets against the thread before it appends it.
type DoorEraseRequest struct {
	Item DoorItem `cbor:"item"`
}

// DoorEraseReply answers DoorEraseRequest.
type DoorEraseReply struct {
	ID      []byte     `cbor:"id,omitempty"`
	Clock   uint64     `cbor:"clock,omitempty"`
	Prev    []byte     `cbor:"prev,omitempty"`
	Erased  [][]byte   `cbor:"erased,omitempty"`
	Already [][]byte   `cbor:"already,omitempty"`
	Err     *DoorError `cbor:"err,omitempty"`
}

// DoorBlobRequest is the request of the blob operations: a part of the
// blob name of Size bytes at Offset (DoorBlobPut: the part's bytes in
// Data; DoorBlobGet: Data empty), or the whole blob (DoorBlobDelete).
type DoorBlobRequest struct {
	Bucket string `cbor:"bucket"`
	Name   string `cbor:"name"`
	Offset int64  `cbor:"offset,omitempty"`
	Size   int64  `cbor:"size,omitempty"`
	Data   []byte `cbor:"data,omitempty"`
}

// DoorBlobReply answers DoorBlobRequest: for DoorBlobGet the part read and
// the blob's size.
type DoorBlobReply struct {
	Size int64      `cbor:"size,omitempty"`
	Data []byte     `cbor:"data,omitempty"`
	Err  *DoorError `cbor:"err,omitempty"`
}

// DoorError is an error the door answered. Code says which sentinel it
// wraps (errors.Is holds for it on the client as on the server); Field
// and Rule, when set, are those of a *records.FieldError, which
// errors.As finds.
type DoorError struct {
	Code  string `cbor:"code"`
	Msg   string `cbor:"msg"`
	Field string `cbor:"field,omitempty"`
	Rule  string `cbor:"rule,omitempty"`
}

// Error returns the server's message.
func (e *DoorError) Error() string { return e.Msg }

// Unwrap returns the sentinel of Code, and the field error when Field is
// set.
func (e *DoorError) Unwrap() []error {
	var errs []error
	if s := doorSentinel(e.Code); s != nil {
		errs = append(errs, s)
	}
	if e.Field != "" {
		errs = append(errs, &records.FieldError{Field: e.Field, Rule: e.Rule})
	}
	return errs
}

// doorCodes are the sentinels a DoorError carries, by code, in the order
// an error is matched against them.
var (
	doorMu    sync.RWMutex
	doorCodes = []struct {
		code string
		err  error
	}{
		{"moved", ErrMoved},
		{"expectation", ErrExpectation},
		{"conflict", ErrConflict},
		{"in_doubt", ErrInDoubt},
		{"disk_full", ErrDiskFull},
		{"appends_refused", ErrAppendsRefused},
		{"too_large", ErrTooLarge},
		{"forbidden", ErrForbidden},
		{"not_erasable", ErrNotErasable},
		{"not_found", ErrNotFound},
		{"closed", ErrClosed},
		{"corrupt", records.ErrCorrupt},
		{"invalid", records.ErrInvalid},
	}
)

// RegisterDoorError adds a sentinel that the door carries under code, for
// a layer above the log (the sdk's ErrNeedsAdmin). It is matched before
// the log's own.
func RegisterDoorError(code string, sentinel error) {
	doorMu.Lock()
	defer doorMu.Unlock()
	doorCodes = append([]struct {
		code string
		err  error
	}{{code, sentinel}}, doorCodes...)
}

func doorSentinel(code string) error {
	doorMu.RLock()
	defer doorMu.RUnlock()
	for _, c := range doorCodes {
		if c.code == code {
			return c.err
		}
	}
	return nil
}

// NewDoorError is the DoorError that carries err across the door.
func NewDoorError(err error) *DoorError {
	if err == nil {
		return nil
	}
	e := &DoorError{Code: "error", Msg: err.Error()}
	var de *DoorError
	if errors.As(err, &de) {
		e.Code = de.Code
	} else {
		doorMu.RLock()
		for _, c := range doorCodes {
			if errors.Is(err, c.err) {
				e.Code = c.code
				break
			}
		}
		doorMu.RUnlock()
	}
	var fe *records.FieldError
	if errors.As(err, &fe) {
		e.Field, e.Rule = fe.Field, fe.Rule
	}
	return e
}

// ErrNoDoor reports a door operation on a log that has no door.
var ErrNoDoor = errors.New("spl/log: no door")

// door is the client side of the door: the subjects of the right the
// connection holds, what the server said of itself, and the appends whose
// outcome is unknown.
type door struct {
	l     *Log
	right string
	info  DoorInfoReply

	// Owned by the writer's goroutine.
	seen uint64 // the highest clock any answer named
	// doubts are the records whose send got no answer, or one that did
	// not settle them, by body digest: the highest clock an answer had
	// named when each was sent (a copy is after it).
	doubts map[[32]byte]uint64
}

// refusal reports whether err, the door's answer for one record, says
// that nothing was stored; any other error leaves the record in doubt.
func refusal(err error) bool {
	for _, e := range []error{records.ErrInvalid, ErrForbidden, ErrMoved, ErrExpectation, ErrConflict, ErrDiskFull, ErrNotErasable, ErrNotFound, records.ErrCorrupt} {
		if errors.Is(err, e) {
			return !errors.Is(err, ErrInDoubt)
		}
	}
	var de *DoorError
	return errors.As(err, &de) && doorSentinel(de.Code) != nil && de.Code != "in_doubt" && de.Code != "closed"
}

// loss asks the server for its loss behind the high-water mark.
func (d *door) loss(ctx context.Context) (*MarkLoss, error) {
	var info DoorInfoReply
	err := d.l.doorCall(ctx, DoorSubject(d.right, DoorInfo), struct{}{}, &info, d.l.opts.Timeout)
	if err == nil && info.Err != nil {
		err = info.Err
	}
	if err != nil {
		return nil, fmt.Errorf("check mark: door: %w", err)
	}
	return info.Loss.markLoss(), nil
}

// findDoor asks the server for its door, with the admin right first and
// then the write right. It returns nil, nil when no door answers (the
// embedded log, a NATS server that is no spl serve): the log writes to
// its stream itself. A connection allowed neither (the read right) gets a
// door of no right, whose writes fail with ErrForbidden.
func findDoor(ctx context.Context, l *Log) (*door, error) {
	none := 0
	for _, right := range []string{DoorAdmin, DoorWrite} {
		var info DoorInfoReply
		err := l.doorCall(ctx, DoorSubject(right, DoorInfo), struct{}{}, &info, l.opts.Timeout)
		for try := 0; try < 5 && errors.Is(err, context.Canceled) && ctx.Err() == nil; try++ {
			// The wait ended on a wake (a stream leader elected, the
			// embedded server taken over), not on an answer: ask again.
			err = l.doorCall(ctx, DoorSubject(right, DoorInfo), struct{}{}, &info, l.opts.Timeout)
		}
		if err == nil && info.Err != nil {
			err = info.Err
		}
		switch {
		case err == nil:
			if info.Stream != l.opts.Stream {
				return nil, fmt.Errorf("door: the server writes stream %s, not %s", info.Stream, l.opts.Stream)
			}
			return &door{l: l, right: right, info: info, doubts: make(map[[32]byte]uint64)}, nil
		case errors.Is(err, nats.ErrNoResponders):
			none++
		case errors.Is(err, ErrForbidden):
		default:
			return nil, fmt.Errorf("door: %w", err)
		}
	}
	if none == 2 {
		return nil, nil
	}
	return &door{l: l, doubts: make(map[[32]byte]uint64)}, nil
}

// doorCall sends one request to subject and decodes its answer into out.
func (l *Log) doorCall(ctx context.Context, subject string, req, out any, timeout time.Duration) error {
	body, err := cbor.Marshal(req)
	if err != nil {
		return fmt.Errorf("door: encode: %w", err)
	}
	ctx, cancel := l.c.UntilAnswered(ctx, timeout)
	defer cancel()
	sent := time.Now()
	msg, err := l.c.NC.RequestWithContext(ctx, subject, body)
	if err != nil {
		if derr := l.c.DeniedSince(subject, sent); derr != nil {
			return derr
		}
		return err
	}
	if err := cbor.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("door: answer to %s: %w", subject, err)
	}
	return nil
}

// subject is the door's subject of op, or an error wrapping ErrForbidden
// for a connection without a write right.
func (d *door) subject(op string) (string, error) {
	if d.right == "" {
		return "", fmt.Errorf("%w: this connection's credentials may not write (the read right): nothing was stored", ErrForbidden)
	}
	return DoorSubject(d.right, op), nil
}

// timeout is the time a request of n bytes may take: the log's timeout,
// and a second more per MiB it carries.
func (d *door) timeout(n int) time.Duration {
	return d.l.opts.Timeout + time.Duration(n>>20)*time.Second
}

// commit sends batch through the door and settles every append of it.
// The server's writer seals the records (SubmitOnce): a race it loses to
// another writer is this client's to retry, so that nothing seals a copy
// of a record after its client stopped waiting for it.
//
// An answer that never came leaves each append in doubt: the server may
// have stored it, or may still. The caller appends the same record again
// (ErrInDoubt says so), and then commit settles the doubt from the log
// itself, since the server that took the first copy may be gone (killed,
// or another node of a cluster answers now): a record stored after the
// last clock an answer had named when it was sent is the first copy (the
// stream's clocks only grow). Not found, it is sent again on condition
// that its thread is still at the clock just read: a first copy still on
// its way was sealed on that clock or an older one, so it either lands
// first, and the resend is refused and finds it, or meets a moved thread
// and is refused itself, never sealed again (SubmitOnce; and the server
// takes no record of the first send to its writer once half the client's
// wait, counted from when the server received it, is spent). So a record
// lands once, whichever server answers. A request that reached a server
// more than half the client's wait after it was sent (held in the
// client's reconnect buffer while its node died, or on a route), and was
// then taken by that server's writer after the client had sent it again
// and it landed, finds its copy as its thread's head and is answered with
// it (head.copyOf), whichever writer sealed the copy. What is left: such
// a late request whose thread got another record on top of the copy
// first, which a single writer's thread cannot.
func (d *door) commit(w *writer, batch []*Pending) {
	batch = admit(batch)
	if len(batch) == 0 {
		return
	}
	fresh := batch[:0:0]
	for _, p := range batch {
		if seen, ok := d.doubts[p.rec.Header.BD]; ok {
			d.settle(w, p, seen)
			continue
		}
		fresh = append(fresh, p)
	}
	if len(fresh) > 0 {
		d.send(w, fresh, nil)
	}
}

// send sends batch in one request, each record conditional as its
// Pending says or, where after is set, on the clock it names.
func (d *door) send(w *writer, batch []*Pending, after map[*Pending]uint64) {
	d.sendAttempt(w, batch, after, 0)
}

// sendAttempt is send, for the attempt-th time: the records that lost a
// race to another writer on the server (and were not stored) are sent
// again after a backoff, up to maxAttempts.
func (d *door) sendAttempt(w *writer, batch []*Pending, after map[*Pending]uint64, attempt int) {
	subject, err := d.subject(DoorAppend)
	if err != nil {
		for _, p := range batch {
			p.finish(Entry{}, err)
		}
		return
	}
	req := DoorAppendRequest{Items: make([]DoorItem, 0, len(batch)), Budget: d.l.opts.Timeout.Milliseconds()}
	size := 0
	sent := batch[:0:0]
	for _, p := range batch {
		var data []byte
		var err error
		if p.packed {
			data, err = p.rec.MarshalStored(p.stored) // the body went ahead (putBody)
		} else {
			data, err = p.rec.Marshal()
		}
		if err != nil {
			p.finish(Entry{}, fmt.Errorf("spl/log: append: %w", err))
			continue
		}
		size += len(data)
		cond, at := p.cond, p.after
		if a, ok := after[p]; ok {
			cond, at = true, a
		}
		req.Items = append(req.Items, doorItem(p.rec, data, cond, at))
		sent = append(sent, p)
	}
	if len(sent) == 0 {
		return
	}
	start := time.Now()
	doubt := d.seen
	var rep DoorAppendReply
	err = d.l.doorCall(context.Background(), subject, req, &rep, d.timeout(size))
	if err == nil && rep.Err != nil {
		err = rep.Err
	}
	if err == nil && len(rep.Results) != len(sent) {
		err = fmt.Errorf("door: %d results for %d records", len(rep.Results), len(sent))
	}
	d.l.observeDoor(len(sent), size, time.Since(start), err)
	if err != nil {
		refused := refusal(err)
		for _, p := range sent {
			if refused {
				p.finish(Entry{}, fmt.Errorf("spl/log: append: %w", err))
				continue
			}
			d.doubt(p, doubt)
			p.finish(Entry{}, fmt.Errorf("spl/log: append: %w: %w", ErrInDoubt, err))
		}
		return
	}
	var lost []*Pending
	for i, p := range sent {
		r := rep.Results[i]
		e, err := d.l.doorEntry(p.rec, r.ID, r.Clock, r.Prev, r.Stored, r.Err)
		if errors.Is(err, ErrExpectation) && !p.cond && attempt < maxAttempts {
			if _, ok := after[p]; !ok {
				lost = append(lost, p)
				continue
			}
		}
		switch {
		case err == nil:
			d.seen = max(d.seen, e.Clock)
			delete(d.doubts, p.rec.Header.BD)
			w.remember(e)
		case refusal(err):
			if _, resend := after[p]; !resend {
				// Nothing of this send was stored. A resend of a record
				// in doubt keeps its doubt: settle decides.
				delete(d.doubts, p.rec.Header.BD)
			}
		default:
			d.doubt(p, doubt)
			if !errors.Is(err, ErrInDoubt) {
				err = fmt.Errorf("%w: %w", ErrInDoubt, err)
			}
		}
		if err != nil {
			err = fmt.Errorf("spl/log: append: %w", err)
		}
		p.finish(e, err)
	}
	if len(lost) > 0 {
		time.Sleep(backoff(attempt + 1))
		d.sendAttempt(w, lost, nil, attempt+1)
	}
}

// doubt notes p in doubt, a copy of it anywhere after clock seen, unless
// it is already: a record sent again keeps the doubt of its first send,
// whose copy may be anywhere after that send's clock.
func (d *door) doubt(p *Pending, seen uint64) {
	if _, ok := d.doubts[p.rec.Header.BD]; !ok {
		d.doubts[p.rec.Header.BD] = seen
	}
}

// doubtRounds bounds the resends of one record in doubt in one append,
// each after another writer moved its thread.
const doubtRounds = 8

// settle answers p, a record in doubt: its stored copy if one is in the
// log, else the outcome of a conditional resend (see commit).
func (d *door) settle(w *writer, p *Pending, seen uint64) {
	thread := p.rec.Header.Thread
	for range doubtRounds {
		ctx, cancel := context.WithTimeout(context.Background(), d.l.opts.Timeout)
		e, found, err := d.l.findCopy(ctx, p.rec, seen)
		var head uint64
		if err == nil && !found {
			head, err = d.l.leaderClock(ctx, thread)
		}
		cancel()
		if err != nil {
			p.finish(Entry{}, fmt.Errorf("spl/log: append: %w: still unresolved: %w", ErrInDoubt, err))
			return
		}
		if found {
			delete(d.doubts, p.rec.Header.BD)
			d.seen = max(d.seen, e.Clock)
			w.remember(e)
			p.finish(e, nil)
			return
		}
		if p.cond && p.after != head {
			// Its own condition no longer holds, and no copy landed.
			delete(d.doubts, p.rec.Header.BD)
			p.finish(Entry{}, movedError(thread, p.after, head, true))
			return
		}
		q := &Pending{rec: p.rec, ctx: p.ctx, done: make(chan struct{})}
		q.taken.Store(true)
		d.send(w, []*Pending{q}, map[*Pending]uint64{q: head})
		<-q.done
		if !errors.Is(q.err, ErrMoved) && !errors.Is(q.err, ErrExpectation) {
			p.finish(q.entry, q.err)
			return
		}
		// Moved since it was read (by the first copy, or another record),
		// or the head read was a replica's a moment behind: look again.
	}
	p.finish(Entry{}, fmt.Errorf("spl/log: append: %w: its thread kept moving while its doubt was settled", ErrInDoubt))
}

// findCopy looks for rec, stored, among the records of its thread after
// clock from. It reads from the stream leader, one record a request, as
// the writer's own doubts are settled (leader.go): a replica answering a
// direct get may not have applied the first copy yet.
func (l *Log) findCopy(ctx context.Context, rec *records.Record, from uint64) (Entry, bool, error) {
	subject := ThreadSubject(rec.Header.Thread)
	for seq := from + 1; ; {
		m, err := l.askLeader(ctx, getRequest{Seq: seq, NextFor: subject})
		if errors.Is(err, ErrNotFound) {
			return Entry{}, false, nil
		}
		if err != nil {
			return Entry{}, false, err
		}
		seq = m.clock + 1
		e, err := l.decode(m)
		if err != nil || e.Record.Header.BD != rec.Header.BD {
			continue
		}
		if sealed := rec.WithPrev(e.Record.Header.Prev); sealed.ID() == e.ID {
			return Entry{Clock: e.Clock, ID: e.ID, Record: sealed}, true, nil
		}
	}
}

// leaderClock is the clock of thread's last record as the stream leader
// knows it (0: none).
func (l *Log) leaderClock(ctx context.Context, thread string) (uint64, error) {
	m, err := l.askLeader(ctx, getRequest{LastFor: ThreadSubject(thread)})
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last clock of %s: %w", thread, err)
	}
	return m.clock, nil
}

// leaderWait bounds one try of a leader read while a doubt is settled:
// while the stream elects a leader, nobody answers, and the read is asked
// again (as the writer's doubt reads are) until ctx ends.
const leaderWait = 250 * time.Millisecond

// askLeader is getLeader, each try bounded by leaderWait.
func (l *Log) askLeader(ctx context.Context, req getRequest) (stored, error) {
	for {
		tctx, cancel := context.WithTimeout(ctx, leaderWait)
		m, err := l.getLeader(tctx, req)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		return m, err
	}
}

// doorItem is the DoorItem of rec, encoded as data.
func doorItem(rec *records.Record, data []byte, cond bool, after uint64) DoorItem {
	it := DoorItem{Record: data, Cond: cond, After: after}
	if rec.Sig != nil {
		it.Sig = rec.Sig.String()
	}
	return it
}

// doorEntry is the entry of a record the door answered for: rec chained on
// prev, or the record as stored when the server sent it (its body read
// from the log when the server sent it without, kept outside).
func (l *Log) doorEntry(rec *records.Record, id []byte, clock uint64, prev, stored []byte, derr *DoorError) (Entry, error) {
	if derr != nil {
		return Entry{}, derr
	}
	want, err := records.IDFromBytes(id)
	if err != nil {
		return Entry{}, fmt.Errorf("door: answer: id: %w", err)
	}
	var sealed *records.Record
	switch {
	case records.Packed(stored):
		if sealed, err = l.unpack(context.Background(), stored); err != nil {
			return Entry{}, fmt.Errorf("door: answer: stored record: %w", err)
		}
	case len(stored) > 0:
		if sealed, err = records.Unmarshal(stored); err != nil {
			return Entry{}, fmt.Errorf("door: answer: stored record: %w", err)
		}
	default:
		p, err := records.IDFromBytes(prev)
		if err != nil && len(prev) > 0 {
			return Entry{}, fmt.Errorf("door: answer: prev: %w", err)
		}
		sealed = rec.WithPrev(p)
	}
	if err := sealed.Verify(want); err != nil {
		return Entry{}, fmt.Errorf("door: answer does not match the record: %w", err)
	}
	return Entry{Clock: clock, ID: want, Record: sealed}, nil
}

// observeDoor reports one request of the door to Options.Observe.
func (l *Log) observeDoor(n, size int, took time.Duration, err error) {
	if l.opts.Observe != nil {
		l.opts.Observe(BatchStats{Records: n, Bytes: size, Commit: took, Err: err})
	}
}

// erase sends a sealed erasure record through the door.
func (d *door) erase(ctx context.Context, rec *records.Record, o eraseOptions) (EraseResult, error) {
	subject, err := d.subject(DoorErase)
	if err != nil {
		return EraseResult{}, err
	}
	data, err := rec.Marshal()
	if err != nil {
		return EraseResult{}, err
	}
	var rep DoorEraseReply
	if err := d.l.doorCall(ctx, subject, DoorEraseRequest{Item: doorItem(rec, data, o.cond, o.after)}, &rep, d.timeout(len(data))); err != nil {
		return EraseResult{}, fmt.Errorf("erase: %w", err)
	}
	if rep.Err != nil {
		return EraseResult{}, rep.Err
	}
	e, err := d.l.doorEntry(rec, rep.ID, rep.Clock, rep.Prev, nil, nil)
	if err != nil {
		return EraseResult{}, err
	}
	res := EraseResult{Erasure: e}
	for _, b := range rep.Erased {
		id, err := records.IDFromBytes(b)
		if err != nil {
			return res, fmt.Errorf("door: answer: erased: %w", err)
		}
		res.Erased = append(res.Erased, id)
	}
	for _, b := range rep.Already {
		id, err := records.IDFromBytes(b)
		if err != nil {
			return res, fmt.Errorf("door: answer: already: %w", err)
		}
		res.Already = append(res.Already, id)
	}
	return res, nil
}

// Door reports whether the log writes through spl serve's door.
func (l *Log) Door() bool { return l.door != nil }

// DoorAdmin reports whether the log writes through the door with the
// admin right, which may write everything else too (the read models).
func (l *Log) DoorAdmin() bool { return l.door != nil && l.door.right == DoorAdmin }
