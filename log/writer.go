package log

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// head is what the writer knows of a thread's last record.
type head struct {
	id      records.ID
	clock   uint64   // the thread's last clock: what the next append expects
	idClock uint64   // the clock of the record id names (0: unknown)
	back    []uint64 // clocks of the records before it, newest first (at most backLen)
	// prev and bd are the record id names, when known: its prev and its
	// body digest, by which a record sent again finds itself (copyOf).
	prev records.ID
	bd   [32]byte
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
	acks  *natsio.Replies // answers to pipelined publishes, when the writer fsyncs itself
	later []*Pending      // appends that lost a race, waiting out their backoff (settleAll)
	// betweenLayers, when set (tests), runs after each layer of landEach
	// is answered and before the next is sealed.
	betweenLayers func(k int)
	// floor is the highest clock known acknowledged (at open, the
	// stream's last): an append sent after it must land past it, or the
	// stream went back behind the log's back. lost, once set, fails every
	// append (ErrAppendsRefused).
	floor uint64
	lost  error

	mu         sync.Mutex
	landed     map[[32]byte]landedRec // recent appends by body digest, for retries
	landedRing [][32]byte
	landedNext int
	doubts     map[[32]byte]doubt
}

// newWriter starts the writer of l, with the highest clock known
// acknowledged (floor) and, when not nil, the error that refuses every
// append (lost).
func newWriter(l *Log, floor uint64, lost error) (*writer, error) {
	w := &writer{
		l:      l,
		floor:  floor,
		lost:   lost,
		in:     make(chan *Pending, queueCap),
		quit:   make(chan struct{}),
		heads:  make(map[string]head),
		landed: make(map[[32]byte]landedRec),
		doubts: make(map[[32]byte]doubt),
	}
	if l.blocks != nil {
		own, err := l.c.OwnReplies(l.opts.MaxBatch)
		if err != nil {
			return nil, err
		}
		w.acks = own
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
		w.acks.Close()
	}
}

func (w *writer) run() {
	defer w.wg.Done()
	batch := make([]*Pending, 0, w.l.opts.MaxBatch)
	woke := 0 // callers the last commit answered
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	retry := time.NewTimer(time.Hour) // the next of later is due
	retry.Stop()
	for {
		batch = w.due(batch[:0], false)
		if len(batch) == 0 {
			var wake <-chan time.Time
			if next, ok := w.nextDue(); ok {
				retry.Reset(time.Until(next))
				wake = retry.C
			}
			select {
			case p := <-w.in:
				batch = append(batch, p)
			case <-wake:
				continue
			case <-w.quit:
				// Finish what was queued before the close, in batches,
				// and the retries without their backoff.
				for {
					batch = w.gather(w.due(batch[:0], true), 0, nil)
					if len(batch) == 0 {
						return
					}
					w.commit(batch)
				}
			}
			retry.Stop()
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

// due adds to batch the retries whose backoff is over (all of them with
// all set), in the order they lost their race.
func (w *writer) due(batch []*Pending, all bool) []*Pending {
	if len(w.later) == 0 {
		return batch
	}
	now := time.Now()
	keep := w.later[:0]
	for _, p := range w.later {
		if all || !p.due.After(now) {
			batch = append(batch, p)
		} else {
			keep = append(keep, p)
		}
	}
	clear(w.later[len(keep):])
	w.later = keep
	return batch
}

// nextDue is when the first retry is due.
func (w *writer) nextDue() (time.Time, bool) {
	if len(w.later) == 0 {
		return time.Time{}, false
	}
	next := w.later[0].due
	for _, p := range w.later[1:] {
		if p.due.Before(next) {
			next = p.due
		}
	}
	return next, true
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
	if w.l.door != nil {
		w.l.door.commit(w, live)
		return
	}
	if w.lost != nil {
		w.fail(live, w.lost)
		return
	}
	for _, p := range live {
		if !p.floored { // the first send's: any copy of it lands past that
			p.floor, p.floored = w.floor, true
		}
	}
	w.land(live, 0)
}

const maxAttempts = 64

// backoff is how long an append that lost its race attempt times waits
// before it is sent again: a random while, growing with each lost race,
// so that a slower writer (one further from the server) is not starved
// by a faster one.
func backoff(attempt int) time.Duration {
	ceil := time.Duration(50<<min(attempt, 10)) * time.Microsecond
	return min(ceil, 20*time.Millisecond) * time.Duration(1+rand.IntN(100)) / 100
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
	need := 0
	for _, p := range batch {
		need += len(p.rec.Body) + 1024 // the body, and about what a header and the envelope take
	}
	if err := w.l.c.CheckRoom(need); err != nil {
		w.fail(batch, err)
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
	w.settleRound(batch, []unit{{batch, first, err}}, sent, attempt)
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
	var retry, apart []*Pending
	var lost error // why the retries lost their race
	for _, u := range units {
		switch err := u.err; {
		case err == nil:
			w.landed1(u.batch, u.first, serr)
		case errors.Is(err, ErrDiskFull):
			w.fail(u.batch, err) // no half of it would fit better
		case errors.Is(err, errStale) && len(threadRuns(u.batch)) > 1:
			// One thread of the batch lost a race, and the batch with
			// it: the others are not to share its fate (nor its
			// retries). Each thread goes again on its own.
			apart = append(apart, u.batch...)
		case errors.Is(err, errStale):
			retry, lost = append(retry, u.batch...), err
		case errors.Is(err, errRefused) && len(u.batch) > 1:
			mid := len(u.batch) / 2
			w.land(u.batch[:mid], attempt)
			w.land(u.batch[mid:], attempt)
		case errors.Is(err, errRefused):
			w.fail(u.batch, err)
		default:
			w.inDoubt(u.batch, threadRuns(u.batch), err, attempt)
		}
	}
	if len(apart) > 0 {
		w.landApart(apart, attempt)
	}
	if len(retry) > 0 {
		// Another writer moved these threads on: their heads are read
		// again, and the appends wait out a backoff in later, while the
		// writer goes on with the others' appends (run). Waiting here
		// instead would make every caller of this writer wait for the
		// race of one thread.
		for _, p := range retry {
			delete(w.heads, p.rec.Header.Thread)
		}
		now := time.Now()
		due := make(map[string]time.Time) // one a thread: its records go again in their order
		for _, p := range retry {
			if p.once {
				p.finish(Entry{}, fmt.Errorf("spl/log: append: lost its race: %w", lost))
				continue
			}
			if p.attempts >= maxAttempts {
				// Every attempt lost the race for its thread: final.
				p.finish(Entry{}, fmt.Errorf("spl/log: append: %w after %d attempts: %w", ErrConflict, p.attempts+1, lost))
				continue
			}
			p.attempts++
			t := p.rec.Header.Thread
			d, ok := due[t]
			if !ok {
				d = now.Add(backoff(p.attempts))
				due[t] = d
			}
			p.due = d
			w.later = append(w.later, p)
		}
	}
}

// landApart sends each thread's appends of batch as a unit of its own,
// all at once, so that a thread that lost a race to another writer fails
// alone: the others land, and only it is retried (settleAll).
func (w *writer) landApart(batch []*Pending, attempt int) {
	batch = admit(batch)
	var groups [][]*Pending
	at := map[string]int{}
	for _, p := range batch {
		t := p.rec.Header.Thread
		i, ok := at[t]
		if !ok {
			i = len(groups)
			at[t] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], p)
	}
	units := make([]unit, 0, len(groups))
	for _, g := range groups {
		sealed, err := w.seal(g)
		if err != nil {
			w.fail(sealed, err)
			continue
		}
		if len(sealed) > 0 {
			units = append(units, unit{batch: sealed})
		}
	}
	if len(units) == 0 {
		return
	}
	sent := time.Now()
	var wg sync.WaitGroup
	for i := range units {
		wg.Go(func() { units[i].first, units[i].err = w.send(units[i].batch) })
	}
	wg.Wait()
	w.settleRound(batch, units, sent, attempt)
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
	if clock <= p.floor {
		// Stored in a stream that went back: the record is not to be
		// chained on, nor is any after it (lost).
		if w.lost == nil {
			w.lost = w.l.refusedFor(w.l.wentBack(clock, p.floor))
		}
		p.finish(Entry{}, fmt.Errorf("spl/log: append: stored at clock %d of a stream that went back: %w", clock, w.lost))
		return
	}
	w.floor = max(w.floor, clock)
	e := Entry{Clock: clock, ID: p.id, Record: p.sealed}
	t := p.rec.Header.Thread
	if h := w.heads[t]; clock > h.clock { // landEach moves heads past its records before they settle
		w.heads[t] = h.next(p.id, p.sealed.Header, clock)
	}
	w.remember(e)
	if serr != nil {
		p.finish(Entry{}, fmt.Errorf("spl/log: append: stored at clock %d, but not made durable: %w", clock, serr))
		return
	}
	w.l.mark.saw(clock, p.id) // durable: the mark may name it
	p.finish(e, nil)
}

// fsync makes durable what the server stored, when the writer is the one
// to (the embedded log); else the server did before it answered.
func (w *writer) fsync() error {
	if w.l.blocks == nil {
		return nil
	}
	return w.l.blocks.Sync()
}

// landEach sends batch the embedded way, in layers of plain publishes:
// the first record of every thread of the batch, all pipelined, then,
// once they are answered, the second of every thread whose first landed,
// chained on it, and so on. A record goes out only once the one it chains
// on is stored, so none lands without its predecessor, and each carries
// its thread's expected last clock. Once every answer is in, one fsync
// makes all that landed durable, and only then are the callers answered:
// group commit without the server's per-message fsync.
//
// A thread with more than maxLayers records in the batch goes out as one
// atomic batch instead, beside the layers: nats-server stages an atomic
// batch of a single-replica stream in a store of its own on disk (a few
// milliseconds, the cost of several layers' round trips in process).
//
// The records of a thread behind one that did not land are not sent: they
// go again, after it is settled, on the thread's head read anew.
func (w *writer) landEach(batch []*Pending, attempt int) {
	per := make(map[string]int, len(batch))
	for _, p := range batch {
		per[p.rec.Header.Thread]++
	}
	// Every head first, so that no layer waits on a read.
	for t := range per {
		if _, err := w.head(t); err != nil {
			w.fail(batch, err)
			return
		}
	}
	var layered, chained []*Pending
	for _, p := range batch {
		if per[p.rec.Header.Thread] > maxLayers {
			chained = append(chained, p)
		} else {
			layered = append(layered, p)
		}
	}
	chained, err := w.seal(chained)
	if err != nil {
		w.fail(append(layered, chained...), err)
		return
	}
	// Until answered, the connection dropped, or the server denied one
	// of these publishes (its answer then never comes: forbidden below).
	sctx, cancel := w.l.c.UntilAnswered(context.Background(), w.l.opts.Timeout)
	defer cancel()
	sent := time.Now()
	var (
		first uint64
		cerr  error
		cdone = make(chan struct{})
	)
	if len(chained) > 0 {
		go func() {
			defer close(cdone)
			first, cerr = w.send(chained)
		}()
	} else {
		close(cdone)
	}
	all := slices.Clone(chained)
	var units []unit
	behind := make(map[string][]*Pending) // threads a record of which did not land: their records after it
	ls := layers(layered)
	for k, layer := range ls {
		if k > 0 && w.betweenLayers != nil {
			w.betweenLayers(k)
		}
		send := layer[:0:0]
		for _, p := range layer {
			if rest, ok := behind[p.rec.Header.Thread]; ok {
				behind[p.rec.Header.Thread] = append(rest, p)
			} else {
				send = append(send, p)
			}
		}
		// The heads are known, so seal reads none, unless a conditional
		// append's clock is past the head it holds: that read may fail.
		// Then this layer and the ones after it fail, unsent.
		sealed, err := w.seal(send)
		if err != nil {
			for _, later := range ls[k+1:] {
				sealed = append(sealed, later...)
			}
			w.fail(sealed, err)
			break
		}
		if len(sealed) == 0 {
			continue
		}
		msgs := make([]*nats.Msg, len(sealed))
		for i, p := range sealed {
			msgs[i] = w.message(p)
		}
		res := natsio.SendEach(w.l.c.NC, w.acks.Open(len(msgs)), msgs).Wait(sctx)
		for i, p := range sealed {
			units = append(units, unit{sealed[i : i+1 : i+1], res[i].Seq, res[i].Err})
			t := p.rec.Header.Thread
			if res[i].Err == nil {
				// Stored: the next layer chains on it (settle, after
				// the fsync, finds the head moved already).
				w.heads[t] = w.heads[t].next(p.id, p.sealed.Header, res[i].Seq)
			} else {
				behind[t] = nil
			}
		}
		all = append(all, sealed...)
	}
	<-cdone
	if len(chained) > 0 {
		units = append(units, unit{chained, first, cerr})
	}
	for t, rest := range behind {
		if len(rest) > 0 {
			units = append(units, unit{rest, 0, fmt.Errorf("%w: a record before it on thread %q did not land", errStale, t)})
			all = append(all, rest...)
		}
	}
	w.settleRound(all, units, sent, attempt)
}

// maxLayers bounds the records of one thread that landEach sends in
// layers, one round trip each; a thread with more goes as an atomic batch.
const maxLayers = 16

// layers splits batch by rank within its thread: layer k holds the k-th
// record of every thread that has one, in the order of batch.
func layers(batch []*Pending) [][]*Pending {
	rank := make(map[string]int)
	var out [][]*Pending
	for _, p := range batch {
		t := p.rec.Header.Thread
		k := rank[t]
		rank[t] = k + 1
		if k == len(out) {
			out = append(out, nil)
		}
		out[k] = append(out[k], p)
	}
	return out
}

// settleRound ends one round of sends, sent at sent: the units the server
// denied fail as forbidden (denied), one fsync makes durable all that
// landed, the round is observed, and each unit is settled (settleAll).
func (w *writer) settleRound(batch []*Pending, units []unit, sent time.Time, attempt int) {
	w.denied(units, sent)
	stored := false
	var firstErr error
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
	w.observe(batch, sent, synced, cmp.Or(firstErr, serr))
	w.settleAll(units, serr, attempt)
}

// denied gives the units sent at sent that the server denied their
// error: dropped (ErrForbidden), not in doubt.
func (w *writer) denied(units []unit, sent time.Time) {
	for i, u := range units {
		if u.err != nil && !errors.Is(u.err, errRefused) {
			units[i].err = cmp.Or(w.forbidden(u.batch, sent), u.err)
		}
	}
}

// forbidden returns the error of a publish of batch that the server
// denied since sent (natsio.ErrForbidden), or nil: such a publish is
// dropped, not in doubt.
func (w *writer) forbidden(batch []*Pending, sent time.Time) error {
	for _, p := range batch {
		if err := w.l.c.DeniedSince(RecordSubject(p.rec.Header.Thread, p.rec.Header.Kind), sent); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) fail(batch []*Pending, err error) {
	for _, p := range batch {
		p.finish(Entry{}, fmt.Errorf("spl/log: append: %w", err))
	}
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
// sealed, in order; the others it finishes itself, each alone: a record
// that does not encode fails, and a conditional append whose thread is not
// at its clock (or that another record of the batch lands ahead of) fails
// with ErrMoved. The next record of the thread chains on the last one
// sealed before it. When a head cannot be read, it fails nothing and
// returns batch as it was, with the error.
func (w *writer) seal(batch []*Pending) ([]*Pending, error) {
	runs := make(map[string]*sealRun)
	for _, p := range batch {
		t := p.rec.Header.Thread
		if _, ok := runs[t]; !ok {
			_, cached := w.heads[t]
			h, err := w.head(t)
			if err == nil && cached && p.cond && h.clock < p.after {
				// The head the writer holds is older than what the caller
				// read: read it again before refusing. (One just read from
				// the leader is as new as it gets; one newer than the
				// caller's clock stays so, clocks only grow.)
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
		if len(r.at) == 0 {
			if e, ok := r.base.copyOf(p.rec); ok {
				// Stored already, as the thread's head: its copy is the
				// answer, made durable here as its own append would be.
				w.remember(e)
				if err := w.fsync(); err != nil {
					p.finish(Entry{}, fmt.Errorf("spl/log: append: stored at clock %d, but not made durable: %w", e.Clock, err))
					continue
				}
				p.finish(e, nil)
				continue
			}
		}
		if p.cond && (len(r.at) > 0 || r.base.clock != p.after) {
			// Landed ahead of it, or about to: the server's check of the
			// thread's last clock makes a stale head fail as a lost race,
			// and the retry, with the head read again, ends here.
			if r.base.clock != p.after {
				p.finish(Entry{}, movedError(p.rec.Header.Thread, p.after, r.base.clock, true))
			} else {
				// At its clock now, but a record of this batch goes first:
				// where the thread will be is unknown until it lands.
				p.finish(Entry{}, movedError(p.rec.Header.Thread, p.after, 0, false))
			}
			continue
		}
		p.sealed = p.rec.WithPrev(r.last)
		var data []byte
		var err error
		if p.packed {
			data, err = p.sealed.MarshalStored(p.stored)
		} else if data, err = p.sealed.Marshal(); err == nil && len(data) > records.MaxEncodedSize {
			// Submit stores such a record packed (pack); one queued
			// behind its back does not fit a message.
			err = &records.FieldError{Field: "body", Rule: fmt.Sprintf("record is %d bytes encoded; a message holds at most %d", len(data), records.MaxEncodedSize)}
		}
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
