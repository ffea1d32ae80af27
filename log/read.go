package log

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// Message headers of spl's own. They are log metadata beside the record,
// not part of it: the id covers the record's header only.
const (
	// HeaderID carries a record's content id, so readers can check a
	// message without trusting its position.
	HeaderID = "Spl-Id"
	// HeaderPrevClock carries the clock of the record that prev names, when
	// it was appended before this record's batch.
	HeaderPrevClock = "Spl-Prev-Clock"
	// HeaderPrevBack carries, for a record chained on another of the same
	// batch, how many clocks back that one is.
	HeaderPrevBack = "Spl-Prev-Back"
	// HeaderBack carries the clocks of the records before prev on the
	// thread, newest first, as far as the writer knows them (at most
	// backLen): each item is "=<clock>", or the distance back from the
	// item before it (from prev's clock for the first). A reader that has
	// one record can fetch the next ones back all at once.
	HeaderBack = "Spl-Back"
)

// prevClockOf returns the clock of the record m's prev names, from the
// headers the writer sets, or 0 when m does not say.
func prevClockOf(m stored) uint64 {
	if v := m.hdr.Get(HeaderPrevClock); v != "" {
		c, _ := strconv.ParseUint(v, 10, 64)
		return c
	}
	if v := m.hdr.Get(HeaderPrevBack); v != "" {
		if k, err := strconv.ParseUint(v, 10, 64); err == nil && k < m.clock {
			return m.clock - k
		}
	}
	return 0
}

// Entry is a record as stored: its clock (the stream sequence), its id,
// and the record itself, verified. It is records.Entry, which the pure
// fold of package projections/fold takes without importing log.
type Entry = records.Entry

// getRequest is the JSON body of a direct get.
type getRequest = natsio.GetRequest

// stored is a raw message from a direct get.
type stored struct {
	subject string
	clock   uint64
	hdr     nats.Header
	data    []byte
}

// decode verifies a stored message and returns it as an Entry, its body
// decompressed or fetched when it is kept apart (compress.go, bodies.go). Anything that does not
// verify is a *CorruptError.
func (l *Log) decode(m stored) (Entry, error) {
	corrupt := func(reason string, err error) (Entry, error) {
		return Entry{}, &CorruptError{Clock: m.clock, Subject: m.subject, Reason: reason, Err: err}
	}
	var rec *records.Record
	var err error
	if !records.Packed(m.data) {
		if rec, err = records.Unmarshal(m.data); err != nil {
			return corrupt("undecodable record", err)
		}
	} else if rec, err = l.unpack(context.Background(), m.data); err != nil {
		if !errors.Is(err, records.ErrCorrupt) {
			return Entry{}, fmt.Errorf("clock %d: %w", m.clock, err)
		}
		return corrupt("body kept apart does not verify", err)
	}
	idText := m.hdr.Get(HeaderID)
	if idText == "" {
		return corrupt("no "+HeaderID+" header", nil)
	}
	want, err := records.ParseID(idText)
	if err != nil {
		return corrupt("bad "+HeaderID+" header", err)
	}
	if err := rec.Verify(want); err != nil {
		return corrupt("verification failed", err)
	}
	if got := RecordSubject(rec.Header.Thread, rec.Header.Kind); got != m.subject {
		return corrupt(fmt.Sprintf("stored under %s, record belongs under %s", m.subject, got), nil)
	}
	rec.Sig = signatureOf(m)
	return Entry{Clock: m.clock, ID: want, Record: rec}, nil
}

// DecodeMessage verifies a raw message of the log's stream, as a consumer
// or a direct get delivers it, and returns it as an Entry, its body
// fetched when it is kept outside. A message that does not verify is
// reported as a *CorruptError.
func (l *Log) DecodeMessage(subject string, clock uint64, hdr nats.Header, data []byte) (Entry, error) {
	return l.decode(stored{subject: subject, clock: clock, hdr: hdr, data: data})
}

// storedOf is a direct get's message as the log reads it.
func storedOf(m natsio.Message) stored {
	return stored{subject: m.Subject, clock: m.Seq, hdr: m.Header, data: m.Data}
}

// fromGet maps a direct get's outcome to the log's: no message is
// ErrNotFound.
func fromGet(m natsio.Message, err error) (stored, error) {
	if errors.Is(err, natsio.ErrNoMessage) {
		return stored{}, ErrNotFound
	}
	if err != nil {
		return stored{}, err
	}
	return storedOf(m), nil
}

// closedForReads is the check a direct get makes before each try.
func (l *Log) closedForReads() error {
	if l.readsClosed() {
		return ErrClosed
	}
	return nil
}

// get does a single direct get.
func (l *Log) get(ctx context.Context, req getRequest) (stored, error) {
	return fromGet(l.c.Get(ctx, l.opts.Stream, req, l.closedForReads))
}

// getLast fetches the last message of a literal subject through the
// subject-in-API form, which needs no JSON.
func (l *Log) getLast(ctx context.Context, subject string) (stored, error) {
	return fromGet(l.c.Last(ctx, l.opts.Stream, subject, l.closedForReads))
}

// scan calls fn for each message matching filter from clock from on, in
// order, through batched direct gets of page messages, until fn returns
// false or the stream's end. upTo > 0 stops after that clock.
//
// Each page is in hand before fn sees its first message: the time fn
// takes (a caller's loop body, for Read) never counts against the wait
// for the server's answers.
func (l *Log) scan(ctx context.Context, filter string, from, upTo uint64, page int, fn func(stored) bool) error {
	if from == 0 {
		from = 1
	}
	var buf []stored // reused: fn gets copies
	for {
		if l.readsClosed() {
			return ErrClosed
		}
		ms, more, err := l.getBatch(ctx, getRequest{Seq: from, NextFor: filter, Batch: page}, buf[:0])
		buf = ms
		for _, m := range ms {
			if upTo > 0 && m.clock > upTo || !fn(m) {
				return nil
			}
		}
		if err != nil || len(ms) == 0 || !more {
			return err
		}
		last := ms[len(ms)-1].clock
		if upTo > 0 && last >= upTo {
			return nil
		}
		from = last + 1
	}
}

// getBatch does one batched direct get and appends the messages of its
// answer to ms. It reports whether more may follow. On an error it
// returns the messages that came before it.
//
// The timeout (Options.Timeout, when ctx has no deadline) bounds the wait
// for this one answer only: getBatch calls no code of its caller.
func (l *Log) getBatch(ctx context.Context, req getRequest, ms []stored) (_ []stored, more bool, err error) {
	ctx, cancel := l.c.WithTimeout(ctx)
	defer cancel()
	got, pending, err := l.c.Batch(ctx, l.opts.Stream, req, nil)
	for _, m := range got {
		ms = append(ms, storedOf(m))
	}
	return ms, pending > 0, err
}

// ReadOption narrows a read.
type ReadOption func(*readOpts)

type readOpts struct {
	from  uint64
	kind  string
	act   string
	toEnd bool // ahead.go
}

// From starts a read at clock c (inclusive): records before c are left
// out.
func From(c uint64) ReadOption { return func(o *readOpts) { o.from = c } }

// Kind keeps records of kind k only; the filter runs in the server. k
// must be a valid kind (see [records.Record.Validate]): a read with any
// other k fails with a *records.FieldError.
func Kind(k string) ReadOption { return func(o *readOpts) { o.kind = k } }

// Act keeps records of act a only. a must be a valid act: a read with
// any other a fails with a *records.FieldError.
func Act(a string) ReadOption { return func(o *readOpts) { o.act = a } }

// readOptions applies opts and validates the result.
func readOptions(opts []ReadOption) (readOpts, error) {
	var o readOpts
	for _, opt := range opts {
		opt(&o)
	}
	return o, o.validate()
}

// validate checks the kind and act filters against the rules of the
// record format. The kind becomes tokens of the server's subject filter,
// where "*" or ">" would match other kinds; a kind or act no record can
// have would match nothing, silently.
func (o readOpts) validate() error {
	if o.kind != "" {
		if err := records.CheckKind(o.kind); err != nil {
			return fmt.Errorf("kind filter: %w", err)
		}
	}
	if o.act != "" {
		if err := records.CheckAct(o.act); err != nil {
			return fmt.Errorf("act filter: %w", err)
		}
	}
	return nil
}

func (o readOpts) filter(thread string) string {
	if o.kind != "" {
		return RecordSubject(thread, o.kind)
	}
	return ThreadSubject(thread)
}

func (o readOpts) keep(e Entry) bool {
	return o.act == "" || e.Record.Header.Act == o.act
}

const readPage = 256

// Read yields the records of thread in clock order. A record that fails
// verification is yielded as an error wrapping records.ErrCorrupt, and the
// read goes on with the next one. An invalid Kind or Act filter is
// yielded as the one error, a *records.FieldError.
//
// Options.Timeout (when ctx has no deadline) bounds each wait for the
// server, never the time the caller's loop body takes.
func (l *Log) Read(ctx context.Context, thread string, opts ...ReadOption) iter.Seq2[Entry, error] {
	o, oerr := readOptions(opts)
	return func(yield func(Entry, error) bool) {
		if oerr != nil {
			yield(Entry{}, fmt.Errorf("read %s: %w", thread, oerr))
			return
		}
		cont := true
		if o.toEnd {
			err := l.scanAhead(ctx, o.filter(thread), o.from, readPage, func(ms []stored) bool {
				es, errs := l.decodePage(ms)
				for i := range ms {
					switch {
					case errs[i] != nil:
						cont = yield(Entry{Clock: ms[i].clock}, errs[i])
					case o.keep(es[i]):
						cont = yield(es[i], nil)
					}
					if !cont {
						return false
					}
				}
				return true
			})
			if err != nil && cont {
				yield(Entry{}, err)
			}
			return
		}
		err := l.scan(ctx, o.filter(thread), o.from, 0, readPage, func(m stored) bool {
			e, err := l.decode(m)
			if err != nil {
				cont = yield(Entry{Clock: m.clock}, err)
				return cont
			}
			if o.keep(e) {
				cont = yield(e, nil)
			}
			return cont
		})
		if err != nil && cont {
			yield(Entry{}, err)
		}
	}
}

// Tail returns the last n records of thread (matching opts), in clock
// order: with From(c), the last n of those at clock c or after. Records
// that fail verification are skipped and reported in a joined error next
// to the records that did verify. An invalid Kind or Act filter is a
// *records.FieldError.
func (l *Log) Tail(ctx context.Context, thread string, n int, opts ...ReadOption) ([]Entry, error) {
	o, err := readOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("tail %s: %w", thread, err)
	}
	if n <= 0 {
		return nil, nil
	}
	start := max(o.from, 1) // the first clock the answer may hold
	filter := o.filter(thread)
	lastMsg, err := l.get(ctx, getRequest{LastFor: filter})
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if lastMsg.clock < start {
		return nil, nil
	}
	if o.kind == "" && o.act == "" {
		if es, ok := l.walkBack(ctx, lastMsg, n, start); ok {
			return es, nil
		}
	}
	end := lastMsg.clock
	// Widen a window back from the end until it holds n matches or
	// reaches start: a dense thread needs one round, a sparse one a few
	// doublings.
	window := uint64(4 * n)
	for {
		from := start
		if end-start >= window {
			from = end - window + 1
		}
		ring := make([]stored, 0, n)
		count := 0
		err := l.scan(ctx, filter, from, end, readPage, func(m stored) bool {
			if o.act != "" {
				// Filtering by act needs the decoded header.
				e, err := l.decode(m)
				if err == nil && !o.keep(e) {
					return true
				}
			}
			if len(ring) < n {
				ring = append(ring, m)
			} else {
				ring[count%n] = m
			}
			count++
			return true
		})
		if err != nil {
			return nil, err
		}
		if count >= n || from == start {
			// Unroll the ring into clock order.
			ordered := ring
			if count > n {
				k := count % n
				ordered = append(append([]stored{}, ring[k:]...), ring[:k]...)
			}
			return l.decodeAll(ordered)
		}
		window *= 4
	}
}

// walkBack returns up to n records of a thread at clock start or after,
// ending with last, in clock order, by following the headers that say
// where the records before each one are (HeaderPrevClock, HeaderPrevBack,
// HeaderBack): each round trip fetches every record the newest one
// fetched names, its gets pipelined. The records are decoded and verified
// on another goroutine meanwhile, and the chain checked once all are in.
// When the thread goes back past start, the walk fetches the first record
// before start too, to check that the chain reaches it, and leaves it out
// of the answer. It reports false when the chain cannot be followed (a
// message without the headers, a record erased, replaced or corrupt), and
// the caller scans instead.
func (l *Log) walkBack(ctx context.Context, last stored, n int, start uint64) ([]Entry, bool) {
	ms := make([]stored, n) // newest first
	es := make([]Entry, n)
	bad := make([]bool, n)
	work := make(chan int, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range work {
			e, err := l.decode(ms[i])
			es[i], bad[i] = e, err != nil
		}
	}()
	ms[0] = last
	work <- 0
	got, ok := 1, true
	for got < n && ms[got-1].clock >= start {
		back := ancestorsOf(ms[got-1])
		if len(back) == 0 {
			break // the thread's first record, or no header: checked below
		}
		// Those at start or after, then the one before start, if any.
		k := 0
		for k < len(back) && k < n-got && back[k] >= start {
			k++
		}
		if k < len(back) && k < n-got {
			k++
		}
		back = back[:k]
		err := l.getEach(ctx, back, func(i int, m stored) {
			ms[got+i] = m
			work <- got + i
		})
		if err != nil {
			ok = false
			break
		}
		got += len(back)
	}
	close(work)
	<-done
	if !ok {
		return nil, false
	}
	es = es[:got]
	for i := range es {
		if bad[i] {
			return nil, false
		}
		prev := es[i].Record.Header.Prev
		switch {
		case i+1 < got:
			if es[i+1].ID != prev {
				return nil, false // the message at the prev clock is not prev
			}
		case es[i].Clock < start:
			// The record before start: the chain reached it.
		case got < n && !prev.IsZero():
			return nil, false // the walk stopped before the thread's first record
		}
	}
	if es[got-1].Clock < start {
		es = es[:got-1]
	}
	slices.Reverse(es)
	return es, true
}

// getEach fetches the messages at clocks by direct gets sent all at once,
// each answer on a reply subject of its own, and calls fn with each one
// and its index in clocks, in the order the answers come. It fails when
// a clock holds no message or an answer does not come in time.
func (l *Log) getEach(ctx context.Context, clocks []uint64, fn func(int, stored)) error {
	ctx, cancel := l.untilLost(ctx, l.opts.Timeout)
	defer cancel()
	return l.c.Each(ctx, l.opts.Stream, clocks, func(i int, m natsio.Message) { fn(i, storedOf(m)) })
}

func (l *Log) decodeAll(ms []stored) ([]Entry, error) {
	out := make([]Entry, 0, len(ms))
	var errs []error
	for _, m := range ms {
		e, err := l.decode(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// Latest returns the newest record of kind on thread: one last-by-subject
// get, no scan. It returns ErrNotFound when there is none, and a
// *records.FieldError when kind is not a valid kind.
func (l *Log) Latest(ctx context.Context, thread, kind string) (Entry, error) {
	if err := records.CheckKind(kind); err != nil {
		return Entry{}, fmt.Errorf("latest of %s: %w", thread, err)
	}
	m, err := l.getLast(ctx, RecordSubject(thread, kind))
	if err != nil {
		return Entry{}, err
	}
	return l.decode(m)
}

// LatestValid returns the newest record of kind on thread that verifies,
// passing over the messages there that do not (a message that is no
// record never hides the ones before it): their clocks are in skipped,
// newest first. ErrNotFound when there is none, or none verifies.
func (l *Log) LatestValid(ctx context.Context, thread, kind string) (e Entry, skipped []uint64, err error) {
	e, err = l.Latest(ctx, thread, kind)
	var ce *CorruptError
	if !errors.As(err, &ce) {
		return e, nil, err
	}
	for n := 8; ; n *= 4 {
		es, err := l.Tail(ctx, thread, n, Kind(kind))
		bad, err := corruptClocks(err)
		if err != nil {
			return Entry{}, nil, err
		}
		if len(es) > 0 {
			last := es[len(es)-1]
			for _, b := range bad {
				if b > last.Clock {
					skipped = append(skipped, b)
				}
			}
			slices.SortFunc(skipped, func(a, b uint64) int { return cmp.Compare(b, a) })
			return last, skipped, nil
		}
		if len(bad) < n {
			return Entry{}, nil, fmt.Errorf("latest %s of %s: none of %d verifies: %w", kind, thread, len(bad), ErrNotFound)
		}
	}
}

// corruptClocks returns the clocks of the *CorruptErrors err joins (as
// Tail reports them), or the first error that is none.
func corruptClocks(err error) ([]uint64, error) {
	if err == nil {
		return nil, nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var clocks []uint64
	for _, e := range errs {
		var ce *CorruptError
		if !errors.As(e, &ce) {
			return nil, e
		}
		clocks = append(clocks, ce.Clock)
	}
	return clocks, nil
}

// Head returns the newest record of thread, of any kind.
func (l *Log) Head(ctx context.Context, thread string) (Entry, error) {
	m, err := l.get(ctx, getRequest{LastFor: ThreadSubject(thread)})
	if err != nil {
		return Entry{}, err
	}
	return l.decode(m)
}

// At returns the record at clock c.
func (l *Log) At(ctx context.Context, c uint64) (Entry, error) {
	m, err := l.get(ctx, getRequest{Seq: c})
	if err != nil {
		return Entry{}, err
	}
	return l.decode(m)
}

// Get returns the record with id. With a thread it scans that thread only;
// with thread "" it scans the whole log, which takes time in proportion to
// its size.
func (l *Log) Get(ctx context.Context, id records.ID, thread string) (Entry, error) {
	filter := SubjectPrefix + ".>"
	if thread != "" {
		filter = ThreadSubject(thread)
	}
	want := id.String()
	var found *stored
	err := l.scan(ctx, filter, 1, 0, 1024, func(m stored) bool {
		if m.hdr.Get(HeaderID) == want {
			found = &m
			return false
		}
		return true
	})
	if err != nil {
		return Entry{}, err
	}
	if found == nil {
		return Entry{}, fmt.Errorf("record %s: %w", want, ErrNotFound)
	}
	return l.decode(*found)
}

// IDsEnding returns the distinct ids that end with suffix among the
// messages of thread (every thread when thread is empty), in clock order,
// at most limit of them. It reads the messages' id headers, not their
// bodies: an id is what a message claims; Get and Verify tell whether it
// holds. The whole log is read without a thread, as by Get.
func (l *Log) IDsEnding(ctx context.Context, thread, suffix string, limit int) ([]records.ID, error) {
	filter := SubjectPrefix + ".>"
	if thread != "" {
		filter = ThreadSubject(thread)
	}
	var out []records.ID
	seen := make(map[string]bool)
	err := l.scan(ctx, filter, 1, 0, 1024, func(m stored) bool {
		h := m.hdr.Get(HeaderID)
		if !strings.HasSuffix(h, suffix) || seen[h] {
			return true
		}
		id, err := records.ParseID(h)
		if err != nil {
			return true // a message that claims no id: Verify reports it
		}
		seen[h] = true
		out = append(out, id)
		return len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("ids ending %q: %w", suffix, err)
	}
	return out, nil
}

// ThreadClock is the clock of the newest message of thread (0 when it has
// none), read without decoding it: a message that does not verify has a
// clock too.
func (l *Log) ThreadClock(ctx context.Context, thread string) (uint64, error) {
	m, err := l.get(ctx, getRequest{LastFor: ThreadSubject(thread)})
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last clock of %s: %w", thread, err)
	}
	return m.clock, nil
}

// LastClock is the clock of the newest record in the log (0 when empty).
func (l *Log) LastClock(ctx context.Context) (uint64, error) {
	s, err := l.c.JS.Stream(ctx, l.opts.Stream)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	return s.CachedInfo().State.LastSeq, nil
}
