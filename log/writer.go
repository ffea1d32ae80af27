package log

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
)

// ErrInDoubt reports an append whose outcome the log could not learn before
// the caller's context ended (the server did not answer). The record may
// have landed; appending the same *records.Record again resolves it without
// a second copy.
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

	// taken is set by the writer once it has taken the append to send: it
	// may land from then on, whatever ctx says.
	taken atomic.Bool

	// Set by the writer while it owns the append.
	sealed *records.Record
	id     records.ID
	data   []byte
	first  bool   // first record of its thread in its batch
	expect uint64 // when first: the thread's last clock it chains on

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
// records.MaxEncodedSize once chained (its prev set) is refused here.
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

func (l *Log) submit(ctx context.Context, rec *records.Record, cond bool, after uint64) (*Pending, error) {
	if rec == nil {
		return nil, errors.New("spl/log: append: nil record")
	}
	if !rec.Header.Prev.IsZero() {
		return nil, fmt.Errorf("spl/log: append: record already chained (prev %s); submit the unchained record", rec.Header.Prev)
	}
	if err := rec.Validate(); err != nil {
		return nil, err
	}
	if err := fitsChained(rec); err != nil {
		return nil, err
	}
	p := &Pending{rec: rec, ctx: ctx, done: make(chan struct{}), cond: cond, after: after}
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

// chainSlack bounds what an envelope adds to its body, prev included: the
// salt, the header and its longest fields. A body shorter than
// records.MaxEncodedSize by more fits once chained, whatever its header.
const chainSlack = 4 << 10

// placeholderPrev stands for the prev the writer will set: every id
// encodes to the same length.
var placeholderPrev = records.ID{0: 1}

// fitsChained refuses rec, valid unchained, when it would pass
// records.MaxEncodedSize once the writer sets its prev: the writer could
// not encode it, and it is the caller's to fix.
func fitsChained(rec *records.Record) error {
	if len(rec.Body) < records.MaxEncodedSize-chainSlack {
		return nil
	}
	if _, err := rec.WithPrev(placeholderPrev).Marshal(); err != nil {
		return fmt.Errorf("spl/log: append: once chained: %w", err)
	}
	return nil
}

// head is what the writer knows of a thread's last record.
type head struct {
	id      records.ID
	clock   uint64   // the thread's last clock: what the next append expects
	idClock uint64   // the clock of the record id names (0: unknown)
	back    []uint64 // clocks of the records before it, newest first (at most backLen)
}

// doubt is an append that was sent but never answered: sealed with prev
// after clock `after`, at position pos of its thread's run in the batch.
type doubt struct {
	id    records.ID
	after uint64
	pos   int
}

const (
	landedCap     = 1 << 16 // appends remembered for retries
	queueCap      = 4096    // appends waiting for the writer
	maxBatchBytes = 8 << 20 // a batch stops growing past this many body bytes
	// coalesceWait bounds how long a batch waits for the callers the last
	// commit answered to append again.
	coalesceWait = 500 * time.Microsecond
)

// writer is the one goroutine of a Log that sends appends. It gathers what
// is waiting into one atomic batch (group commit), keeps each thread's head
// to chain new records, and resolves appends whose answer was lost.
type writer struct {
	l     *Log
	in    chan *Pending
	gate  sync.RWMutex // held shared by Submit while it queues; see stop
	quit  chan struct{}
	wg    sync.WaitGroup
	heads map[string]head // by thread
	acks  *replies        // answers to pipelined publishes, when the writer fsyncs itself

	mu         sync.Mutex
	landed     map[[32]byte]landedRec // recent appends by body digest, for retries
	landedRing [][32]byte
	landedNext int
	doubts     map[[32]byte]doubt
}

func newWriter(l *Log) (*writer, error) {
	w := &writer{
		l:      l,
		in:     make(chan *Pending, queueCap),
		quit:   make(chan struct{}),
		heads:  make(map[string]head),
		landed: make(map[[32]byte]landedRec),
		doubts: make(map[[32]byte]doubt),
	}
	if l.blocks != nil {
		a, err := newOwnReplies(l.nc, l.opts.MaxBatch)
		if err != nil {
			return nil, err
		}
		w.acks = a
	}
	w.wg.Add(1)
	go w.run()
	return w, nil
}

// stop drains the queue and ends the writer. The Log is closed already:
// once the Submits inside the gate have left it, no append can join the
// queue, and the drain answers every append that did.
func (w *writer) stop() {
	w.gate.Lock()
	close(w.quit)
	w.gate.Unlock()
	w.wg.Wait()
	if w.acks != nil {
		_ = w.acks.sub.Unsubscribe()
	}
}

func (w *writer) run() {
	defer w.wg.Done()
	batch := make([]*Pending, 0, w.l.opts.MaxBatch)
	woke := 0 // callers the last commit answered
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		batch = batch[:0]
		select {
		case p := <-w.in:
			batch = append(batch, p)
		case <-w.quit:
			// Finish what was queued before the close, in batches.
			for {
				if batch = w.gather(batch[:0], 0, nil); len(batch) == 0 {
					return
				}
				w.commit(batch)
			}
		}
		// The callers the last commit answered are likely to append again
		// at once: give them a moment to join this batch, so that under
		// load batches grow instead of alternating half full. A lone
		// caller (woke ≤ 1) is never kept waiting.
		if woke > 1 {
			timer.Reset(coalesceWait)
			batch = w.gather(batch, woke, timer.C)
			timer.Stop()
		} else {
			batch = w.gather(batch, 0, nil)
		}
		woke = len(batch)
		w.commit(batch)
	}
}

// gather adds to batch what waits in the queue, up to the batch limits.
// While the batch holds fewer than want, it also waits for appends still
// to come, until deadline fires.
func (w *writer) gather(batch []*Pending, want int, deadline <-chan time.Time) []*Pending {
	size := 0
	for _, p := range batch {
		size += len(p.rec.Body) + 512
	}
	for len(batch) < w.l.opts.MaxBatch && size < maxBatchBytes {
		var p *Pending
		select {
		case p = <-w.in:
		default:
			if len(batch) >= want || deadline == nil {
				return batch
			}
			select {
			case p = <-w.in:
			case <-deadline:
				return batch
			}
		}
		batch = append(batch, p)
		size += len(p.rec.Body) + 512
	}
	return batch
}

// commit lands every pending append of batch or fails it.
func (w *writer) commit(batch []*Pending) {
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.finish(Entry{}, fmt.Errorf("spl/log: append: %w", err))
			continue
		}
		e, ok, err := w.recall(p.ctx, p.rec)
		if err != nil {
			p.finish(Entry{}, fmt.Errorf("spl/log: append: %w", err))
			continue
		}
		if ok {
			p.finish(e, nil)
			continue
		}
		live = append(live, p)
	}
	w.land(live, 0)
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

const maxAttempts = 64

func backoff(attempt int) {
	ceil := time.Duration(50<<min(attempt, 10)) * time.Microsecond
	time.Sleep(min(ceil, 20*time.Millisecond) * time.Duration(1+rand.IntN(100)) / 100)
}

// admit takes the appends of batch to send, and returns them. Each is
// marked taken before its context is looked at (Pending.Wait relies on
// that order); one whose caller's context has ended is failed alone and
// left out. An append sent before and not stored (a stale chain, a
// refusal, a batch found not landed) may be left out the same way.
func admit(batch []*Pending) []*Pending {
	live := batch[:0:0]
	for _, p := range batch {
		p.taken.Store(true)
		if err := p.ctx.Err(); err != nil {
			p.finish(Entry{}, fmt.Errorf("spl/log: append: %w", err))
			continue
		}
		live = append(live, p)
	}
	return live
}

// land sends batch until it lands, splitting it when the server refuses it
// for a reason other than a stale chain.
func (w *writer) land(batch []*Pending, attempt int) {
	batch = admit(batch)
	if len(batch) == 0 {
		return
	}
	if w.acks != nil {
		w.landEach(batch, attempt)
		return
	}
	batch, err := w.seal(batch)
	if err != nil {
		w.fail(batch, err)
		return
	}
	if len(batch) == 0 {
		return
	}
	sent := time.Now()
	first, err := w.send(batch)
	w.observe(batch, sent, 0, err)
	w.settleAll([]unit{{batch, first, err}}, nil, attempt)
}

// unit is what the server answers for as a whole: an atomic batch, or a
// plain publish of one record.
type unit struct {
	batch []*Pending
	first uint64 // clock of the first record, when it landed
	err   error
}

// settleAll completes the units of one send: landed ones (serr is the
// error of the fsync that was to make them durable, if any), or split,
// failed, resolved when in doubt, and those that lost a race to another
// writer sent again.
func (w *writer) settleAll(units []unit, serr error, attempt int) {
	var retry []*Pending
	for _, u := range units {
		switch err := u.err; {
		case err == nil:
			w.landed1(u.batch, u.first, serr)
		case errors.Is(err, errStale) && attempt < maxAttempts:
			retry = append(retry, u.batch...)
		case errors.Is(err, errRefused) && len(u.batch) > 1:
			mid := len(u.batch) / 2
			w.land(u.batch[:mid], attempt)
			w.land(u.batch[mid:], attempt)
		case errors.Is(err, errRefused), errors.Is(err, errStale):
			w.fail(u.batch, err)
		default:
			w.inDoubt(u.batch, threadRuns(u.batch), err, attempt)
		}
	}
	if len(retry) > 0 {
		// Another writer moved these threads on. Back off a random while,
		// growing with each lost race, so a slower writer (one further
		// from the server) is not starved by a faster one.
		for _, p := range retry {
			delete(w.heads, p.rec.Header.Thread)
		}
		backoff(attempt)
		w.land(retry, attempt+1)
	}
}

// observe reports one group commit to Options.Observe.
func (w *writer) observe(batch []*Pending, sent time.Time, synced time.Duration, err error) {
	if w.l.opts.Observe == nil {
		return
	}
	st := BatchStats{Records: len(batch), Commit: time.Since(sent), Fsync: synced, Err: err}
	for _, p := range batch {
		st.Bytes += len(p.data)
	}
	w.l.opts.Observe(st)
}

// landed1 completes a batch whose first record got clock first. serr is
// the error of the fsync that was to make it durable, if any.
func (w *writer) landed1(batch []*Pending, first uint64, serr error) {
	for i, p := range batch {
		w.settle(p, first+uint64(i), serr)
	}
}

// settle completes an append stored at clock. It is remembered (a retry
// returns it) even when the fsync that was to make it durable failed
// (serr), which the caller is told.
func (w *writer) settle(p *Pending, clock uint64, serr error) {
	e := Entry{Clock: clock, ID: p.id, Record: p.sealed}
	t := p.rec.Header.Thread
	w.heads[t] = w.heads[t].next(p.id, p.sealed.Header.Prev, clock)
	w.remember(e)
	if serr != nil {
		p.finish(Entry{}, fmt.Errorf("spl/log: append: stored at clock %d, but not made durable: %w", clock, serr))
		return
	}
	p.finish(e, nil)
}

// fsync makes durable what the server stored, when the writer is the one
// to (the embedded log); else the server did before it answered.
func (w *writer) fsync() error {
	if w.l.blocks == nil {
		return nil
	}
	return w.l.blocks.sync()
}

// landEach sends batch the embedded way: a record alone of its thread in
// the batch goes out as a plain publish, all of them pipelined; threads
// with several records go out together as one atomic batch, since each of
// their records chains on the one before and must not land without it.
// Once every answer is in, one fsync makes all that landed durable, and
// only then are the callers answered: group commit without the server's
// per-message fsync or its staging of atomic batches.
func (w *writer) landEach(batch []*Pending, attempt int) {
	per := make(map[string]int, len(batch))
	for _, p := range batch {
		per[p.rec.Header.Thread]++
	}
	singles := make([]*Pending, 0, len(batch))
	var chained []*Pending
	for _, p := range batch {
		if per[p.rec.Header.Thread] == 1 {
			singles = append(singles, p)
		} else {
			chained = append(chained, p)
		}
	}
	singles, err := w.seal(singles)
	if err != nil {
		w.fail(append(singles, chained...), err)
		return
	}
	chained, err = w.seal(chained)
	if err != nil {
		w.fail(append(singles, chained...), err)
		return
	}
	batch = append(singles, chained...)
	if len(batch) == 0 {
		return
	}
	sctx, cancel := w.l.untilLost(context.Background(), w.l.opts.Timeout)
	defer cancel()
	sent := time.Now()
	msgs := make([]*nats.Msg, len(singles))
	for i, p := range singles {
		msgs[i] = w.message(p)
	}
	r := w.l.publishEach(w.acks, msgs)
	var (
		first uint64
		cerr  error
	)
	if len(chained) > 0 {
		first, cerr = w.send(chained)
	}
	res := r.wait(sctx)

	units := make([]unit, 0, len(singles)+1)
	for i := range singles {
		units = append(units, unit{singles[i : i+1 : i+1], res[i].seq, res[i].err})
	}
	if len(chained) > 0 {
		units = append(units, unit{chained, first, cerr})
	}
	var (
		firstErr error
		stored   bool
	)
	for _, u := range units {
		if u.err == nil {
			stored = true
		} else if firstErr == nil {
			firstErr = u.err
		}
	}
	var serr error
	var synced time.Duration
	if stored {
		s0 := time.Now()
		serr = w.fsync()
		synced = time.Since(s0)
	}
	if firstErr == nil {
		firstErr = serr
	}
	w.observe(batch, sent, synced, firstErr)
	w.settleAll(units, serr, attempt)
}

func (w *writer) fail(batch []*Pending, err error) {
	for _, p := range batch {
		p.finish(Entry{}, fmt.Errorf("spl/log: append: %w", err))
	}
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

// run is the records of one thread within a batch.
type run struct {
	expect uint64 // the thread's last clock before the batch
	pos    map[*Pending]int
}

func threadRuns(batch []*Pending) map[string]*run {
	runs := make(map[string]*run)
	for _, p := range batch {
		t := p.rec.Header.Thread
		r := runs[t]
		if r == nil {
			r = &run{expect: p.expect, pos: make(map[*Pending]int)}
			runs[t] = r
		}
		r.pos[p] = len(r.pos)
	}
	return runs
}

// seal chains every record of batch to its thread's head (fetched when
// the writer does not know it) and encodes it. It returns the records it
// sealed, in order: a record that does not encode is failed alone, and the
// next of its thread chains on the one before it. When a head cannot be
// read, it fails nothing and returns batch as it was, with the error.
func (w *writer) seal(batch []*Pending) ([]*Pending, error) {
	runs := make(map[string]*sealRun)
	for _, p := range batch {
		t := p.rec.Header.Thread
		if _, ok := runs[t]; !ok {
			h, err := w.head(t)
			if err == nil && p.cond && h.clock != p.after {
				// The head the writer knows may be older than what the
				// caller read: read it again before refusing.
				delete(w.heads, t)
				h, err = w.head(t)
			}
			if err != nil {
				return batch, err
			}
			runs[t] = &sealRun{base: h, last: h.id}
		}
	}
	sealed := batch[:0:0]
	for _, p := range batch {
		i, r := len(sealed), runs[p.rec.Header.Thread]
		if p.cond && (len(r.at) > 0 || r.base.clock != p.after) {
			// Landed ahead of it, or about to: the server's check of the
			// thread's last clock makes a stale head fail as a lost race,
			// and the retry, with the head read again, ends here.
			at := r.base.clock
			if len(r.at) > 0 {
				at = 0 // unknown until the batch lands
			}
			p.finish(Entry{}, movedError(p.rec.Header.Thread, p.after, at))
			continue
		}
		p.sealed = p.rec.WithPrev(r.last)
		data, err := p.sealed.Marshal()
		if err != nil {
			p.finish(Entry{}, fmt.Errorf("spl/log: append: %w", err))
			continue
		}
		p.data = data
		p.id = p.sealed.ID()
		first := len(r.at) == 0
		p.first, p.expect = first, 0
		if first {
			p.expect = r.base.clock
		}
		// Where prev and the records before it are, for readers walking
		// the thread backwards: clocks before the batch, distances back
		// within it.
		p.prevClock, p.prevBack = 0, 0
		if !first {
			p.prevBack = i - r.at[len(r.at)-1]
		} else if !r.base.id.IsZero() {
			p.prevClock = r.base.idClock
		}
		p.back = r.backHeader()
		r.at = append(r.at, i)
		r.last = p.id
		sealed = append(sealed, p)
	}
	return sealed, nil
}

// movedError says that thread is no longer at clock after: it is at clock
// at (0: not known yet).
func movedError(thread string, after, at uint64) error {
	if at == 0 {
		return fmt.Errorf("%w: thread %q has a record after clock %d", ErrMoved, thread, after)
	}
	return fmt.Errorf("%w: thread %q is at clock %d, not %d", ErrMoved, thread, at, after)
}

// head returns the thread's last record as the writer knows it, asking the
// stream leader when it does not. The read is made for every append of
// the thread in the batch: it is bounded by Options.Timeout, not by any
// one caller's context.
func (w *writer) head(thread string) (head, error) {
	if h, ok := w.heads[thread]; ok {
		return h, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.l.opts.Timeout)
	defer cancel()
	h, err := w.l.threadHead(ctx, thread)
	if err != nil {
		return head{}, fmt.Errorf("thread head: %w", err)
	}
	w.heads[thread] = h
	return h, nil
}
