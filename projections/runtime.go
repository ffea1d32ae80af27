package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/projections/fold"
	"github.com/spl-dev/spl/records"
)

// Options configures a Runtime. The zero value is usable.
type Options struct {
	// Holder names this process in leases and status; "<host>-<pid>-<random>"
	// when empty.
	Holder string
	// LeaseTTL is how long a projector that stopped renewing its lease
	// keeps it; 5s when zero. It renews every LeaseTTL/3.
	LeaseTTL time.Duration
	// MaxBatch bounds the entries verified and applied together (and 32
	// MiB of messages); 10,000 when zero. Batches are what is waiting, so
	// they grow only when the projector is behind; then the changes of
	// several batches are stored together.
	MaxBatch int
	// CacheSize bounds the values kept in memory after each store of the
	// changes; 100,000 when zero. Between two stores the cache keeps
	// every value the batches in between read or changed, so while
	// changes are held (see MaxBatch) it can grow past CacheSize by
	// those of the held batches, until the hold ends (MaxHeld, MaxHold).
	CacheSize int
	// MaxHeld bounds the values changed and not yet stored while the log
	// has more waiting: past it the runtime stores them, and its position
	// (and a rebuild's progress) moves; 50,000 when zero. Lower holds
	// less in memory and moves the position more often; higher writes a
	// value that many batches change fewer times.
	MaxHeld int
	// MaxHold bounds how long changes are held while the log has more
	// waiting, from the first batch held; 1s when zero. Readers see
	// changes only once they are stored.
	MaxHold time.Duration
	// Replicas of the buckets when New creates them; 1 when zero.
	Replicas int
	// Timeout bounds one request to the server; 10s when zero.
	Timeout time.Duration
	// Now is the wall clock, for lease hints and status; time.Now when nil.
	Now func() time.Time
	// Logf reports errors the runtime retries; silent when nil.
	Logf func(format string, args ...any)
}

func (o *Options) withDefaults() error {
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), nuid.Next()[16:])
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 5 * time.Second
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 10_000
	}
	if o.CacheSize == 0 {
		o.CacheSize = 100_000
	}
	if o.MaxHeld == 0 {
		o.MaxHeld = 50_000
	}
	if o.MaxHold == 0 {
		o.MaxHold = time.Second
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	switch {
	case o.LeaseTTL < 100*time.Millisecond:
		return fmt.Errorf("spl/projections: options: LeaseTTL: must be at least 100ms, got %v", o.LeaseTTL)
	case o.MaxBatch < 1 || o.MaxBatch > 100_000:
		return fmt.Errorf("spl/projections: options: MaxBatch: must be 1 to 100000, got %d", o.MaxBatch)
	case o.CacheSize < 0:
		return fmt.Errorf("spl/projections: options: CacheSize: must not be negative, got %d", o.CacheSize)
	case o.MaxHeld < 0:
		return fmt.Errorf("spl/projections: options: MaxHeld: must not be negative, got %d", o.MaxHeld)
	case o.MaxHold < 0:
		return fmt.Errorf("spl/projections: options: MaxHold: must not be negative, got %v", o.MaxHold)
	case o.Replicas < 1 || o.Replicas > 5:
		return fmt.Errorf("spl/projections: options: Replicas: must be 1 to 5, got %d", o.Replicas)
	}
	return nil
}

// position is the value of "pos.<name>" in the meta bucket.
type position struct {
	Clock       uint64 `json:"clock"`                  // every message up to it is applied
	Corrupt     uint64 `json:"corrupt,omitempty"`      // messages skipped: they did not verify
	LastCorrupt uint64 `json:"last_corrupt,omitempty"` // clock of the last of them
	RebuildTo   uint64 `json:"rebuild_to,omitempty"`   // a rebuild runs until Clock reaches it
	Reset       bool   `json:"reset,omitempty"`        // the models are to be emptied first
	Holder      string `json:"holder,omitempty"`       // who stored it
	Updated     int64  `json:"updated,omitempty"`      // when (Unix ms, the holder's clock)
}

// Runtime runs one projection against a log: it consumes the stream from
// the stored position, folds, and stores read models and position in
// JetStream KV buckets, while it holds the projection's lease. Several
// runtimes, in one process or many, may run the same projection: one
// applies, the others stand by.
type Runtime struct {
	log   *log.Log
	fold  Fold
	opts  Options
	store *kvStore // the models' buckets: created, purged
	// models is the Store the fold's state loads and commits through:
	// store, or a wrapper of it that injects faults in tests.
	models Store
	meta   jetstream.KeyValue
	hist   *logHistory
	d      direct

	sessions atomic.Uint64 // numbers the leases this runtime takes
	position atomic.Uint64 // the last stored position this runtime wrote or read
}

// New returns a runtime for f on l, creating its buckets when missing.
func New(ctx context.Context, l *log.Log, f Fold, opts Options) (*Runtime, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	d := direct{log: l, timeout: opts.Timeout}
	r := &Runtime{
		log: l, fold: f, opts: opts, d: d,
		store: &kvStore{js: l.JetStream(), nc: l.Conn(), d: d, stream: l.StreamName(), replicas: opts.Replicas},
		hist:  &logHistory{d: d, stream: l.StreamName()},
	}
	r.models = r.store
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	for _, m := range f.Models() {
		if err := r.store.ensure(ctx, m); err != nil {
			return nil, fmt.Errorf("spl/projections: %s: %w", f.Name(), err)
		}
	}
	name := BucketName(l.StreamName(), MetaModel)
	meta, err := l.JetStream().KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		meta, err = l.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "spl projections: positions and leases",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    opts.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			meta, err = l.JetStream().KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("spl/projections: meta bucket: %w", err)
	}
	r.meta = meta
	return r, nil
}

// Name is the projection's name.
func (r *Runtime) Name() string { return r.fold.Name() }

// Position is the clock of the position this runtime last stored or read.
// A leader stores it with its changes, which while the log has more
// waiting may be held up to a second past applying them; a standby reads
// it every LeaseTTL/3, and Status and Wait read it too, so reads that
// race may leave it a little behind the stored position. It is for
// reports: serve's projection lag metric, and its log when a projector
// stops. A read that must see a clock waits for it (Wait, WaitApplied).
func (r *Runtime) Position() uint64 { return r.position.Load() }

// Holder is the name of this runtime in leases.
func (r *Runtime) Holder() string { return r.opts.Holder }

func (r *Runtime) posKey() string   { return "pos." + r.fold.Name() }
func (r *Runtime) leaseKey() string { return "lease." + r.fold.Name() }

// newLease returns a lease under a holder name of its own, so that two
// uses of one runtime (Run and Rebuild) hand it over like two processes.
func (r *Runtime) newLease() *lease {
	return &lease{
		kv: r.meta, key: r.leaseKey(), ttl: r.opts.LeaseTTL, now: r.opts.Now,
		holder: fmt.Sprintf("%s#%d", r.opts.Holder, r.sessions.Add(1)),
	}
}

func (r *Runtime) readPosition(ctx context.Context) (position, uint64, error) {
	e, err := r.meta.Get(ctx, r.posKey())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return position{}, 0, nil
	}
	if err != nil {
		return position{}, 0, fmt.Errorf("read position: %w", err)
	}
	var p position
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return position{}, 0, fmt.Errorf("read position: %w", err)
	}
	r.position.Store(p.Clock)
	return p, e.Revision(), nil
}

// writePosition stores p if the position is still at revision rev.
func (r *Runtime) writePosition(ctx context.Context, p position, rev uint64, holder string) (uint64, error) {
	p.Holder, p.Updated = holder, r.opts.Now().UnixMilli()
	b, _ := json.Marshal(p)
	var err error
	if rev == 0 {
		rev, err = r.meta.Create(ctx, r.posKey(), b)
	} else {
		rev, err = r.meta.Update(ctx, r.posKey(), b, rev)
	}
	if isConflict(err) {
		return 0, fmt.Errorf("store position: %w", ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("store position: %w", err)
	}
	r.position.Store(p.Clock)
	return rev, nil
}

// Run runs the projection until ctx is done: it applies while it holds the
// lease, and stands by, ready to take over, while another process does.
// It returns nil when ctx ends.
func (r *Runtime) Run(ctx context.Context) error {
	ls := r.newLease()
	wake, unsub := r.notify(r.leaseKey())
	defer unsub()
	for ctx.Err() == nil {
		ok, _, err := ls.acquire(ctx)
		if err != nil && ctx.Err() == nil {
			r.opts.Logf("spl/projections: %s: %v", r.Name(), err)
		}
		if ok {
			if err := r.lead(ctx, ls, nil, nil); err != nil && ctx.Err() == nil {
				r.opts.Logf("spl/projections: %s: %v", r.Name(), err)
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
			ls.release(rctx)
			cancel()
			continue
		}
		// Stand by: look again a third of a lease later, or as soon as the
		// lease changes.
		_, _, _ = r.readPosition(ctx)
		t := time.NewTimer(r.opts.LeaseTTL / 3)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-wake:
		}
		t.Stop()
	}
	return nil
}

// notify returns a channel that receives when key of the meta bucket is
// written, and the function that stops it.
func (r *Runtime) notify(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	sub, err := r.log.Conn().Subscribe("$KV."+BucketName(r.log.StreamName(), MetaModel)+"."+key, func(*nats.Msg) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return ch, func() {}
	}
	return ch, func() { _ = sub.Unsubscribe() }
}

// CatchUp applies the projection up to clock (or the end of the log, when
// that is lower) in this process, if no other process runs it: it takes
// the lease, applies, and gives the lease back. It returns ErrBusy when
// another process holds the lease.
func (r *Runtime) CatchUp(ctx context.Context, clock uint64) error {
	ls := r.newLease()
	ok, v, err := ls.acquire(ctx)
	if err != nil {
		return fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
	}
	if !ok {
		return fmt.Errorf("%w: %s held by %s", ErrBusy, r.Name(), v.Holder)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
		ls.release(rctx)
		cancel()
	}()
	end, err := r.log.LastClock(ctx)
	if err != nil {
		return fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
	}
	target := min(clock, end)
	return r.lead(ctx, ls, func(p position) bool { return !p.Reset && p.Clock >= target }, nil)
}

// Rebuild empties the projection's read models and applies the log again
// from its start, calling progress (when not nil) with the clock reached
// and the clock the rebuild runs to. It takes the lease, asking a process
// that holds it to hand it over, and gives it back when done. A rebuild
// interrupted (ctx, a crash) is resumed, not restarted, by the next
// Rebuild, and by any projector of the projection meanwhile.
func (r *Runtime) Rebuild(ctx context.Context, progress func(done, total uint64)) error {
	ls := r.newLease()
	for {
		ok, _, err := ls.acquire(ctx)
		if err != nil {
			return fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
		}
		if ok {
			break
		}
		if err := ls.ask(ctx); err != nil {
			return fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
		}
		select {
		case <-ctx.Done():
			v, _, _ := ls.read(context.WithoutCancel(ctx))
			return fmt.Errorf("%w: %s held by %s, which did not hand it over: %w", ErrBusy, r.Name(), v.Holder, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
		ls.release(rctx)
		cancel()
	}()
	pos, rev, err := r.readPosition(ctx)
	if err != nil {
		return fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
	}
	if pos.RebuildTo == 0 && !pos.Reset {
		end, err := r.log.LastClock(ctx)
		if err != nil {
			return fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
		}
		if _, err := r.writePosition(ctx, position{Reset: true, RebuildTo: end}, rev, ls.holder); err != nil {
			return fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
		}
	}
	var report func(position)
	if progress != nil {
		report = func(p position) {
			if p.RebuildTo > 0 {
				progress(p.Clock, p.RebuildTo)
			}
		}
	}
	err = r.lead(ctx, ls, func(p position) bool { return !p.Reset && p.RebuildTo == 0 }, report)
	if err != nil {
		return err
	}
	if progress != nil {
		p, _, err := r.readPosition(ctx)
		if err == nil {
			progress(p.Clock, p.Clock)
		}
	}
	return nil
}

// lead applies the projection while ls is held, from the stored position,
// until done (when not nil) says so, ctx ends, the lease is lost, or
// another process asked for it (then handed over). It calls progress
// after every stored batch.
func (r *Runtime) lead(ctx context.Context, ls *lease, done func(position) bool, progress func(position)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var renewer sync.WaitGroup
	renewer.Add(1)
	changed, unsub := r.notify(r.leaseKey())
	defer unsub()
	go func() {
		defer renewer.Done()
		t := time.NewTicker(r.opts.LeaseTTL / 3)
		defer t.Stop()
		for {
			renew := ls.renew
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-changed:
				// Written by this renewer, or by a process asking for the
				// lease: look, without writing.
				renew = ls.check
			}
			if err := renew(ctx); errors.Is(err, errLost) {
				cancel(fmt.Errorf("spl/projections: %s: %w", r.Name(), errLost))
				return
			} else if err != nil && ctx.Err() == nil {
				r.opts.Logf("spl/projections: %s: %v", r.Name(), err)
			}
		}
	}()
	defer renewer.Wait()
	defer cancel(nil)
	for attempt := 0; ; attempt++ {
		start := time.Now()
		handed, err := r.follow(ctx, ls, done, progress)
		switch {
		case err == nil:
			if handed {
				gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
				defer gcancel()
				return ls.grant(gctx)
			}
			return nil
		case ctx.Err() != nil:
			if cause := context.Cause(ctx); errors.Is(cause, errLost) {
				return cause
			}
			return ctx.Err()
		}
		r.opts.Logf("spl/projections: %s: %v (starting again from the stored position)", r.Name(), err)
		if time.Since(start) > time.Minute {
			attempt = 0 // it ran well for a while: not the same failure
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(time.Duration(attempt+1)*50*time.Millisecond, 2*time.Second)):
		}
	}
}

// idleTick is how often an idle projector looks for work beyond messages:
// a handover asked for, a log whose last messages were deleted.
const idleTick = 100 * time.Millisecond

// follow consumes the log from the stored position and applies it, batch
// by batch. It returns handed true when another process asked for the
// lease, with the lease still to grant.
func (r *Runtime) follow(ctx context.Context, ls *lease, done func(position) bool, progress func(position)) (handed bool, err error) {
	pos, rev, err := r.readPosition(ctx)
	if err != nil {
		return false, err
	}
	if !pos.Reset && pos.Clock > 0 {
		last, err := r.log.LastClock(ctx)
		if err != nil {
			return false, fmt.Errorf("end of the log: %w", err)
		}
		if pos.Clock > last {
			// The read models are ahead of their log: the log lost its
			// tail (on the embedded log, a power loss before the writer's
			// fsync; KV is written without one) or was replaced. They may
			// hold what the log no longer has: rebuild them.
			r.opts.Logf("spl/projections: %s: position %d is past the end of the log (%d); rebuilding", r.Name(), pos.Clock, last)
			pos.Reset = true
		}
	}
	st := fold.NewState(r.fold, r.models, r.hist, r.opts.CacheSize)
	if pos.Reset {
		for _, m := range r.fold.Models() {
			if err := r.store.purge(ctx, m); err != nil {
				return false, err
			}
		}
		pos.Reset, pos.Clock, pos.Corrupt, pos.LastCorrupt = false, 0, 0, 0
		if rev, err = r.writePosition(ctx, pos, rev, ls.holder); err != nil {
			return false, err
		}
		st.Emptied()
	}
	st.SetBase(pos.Clock)
	if done != nil && done(pos) {
		return false, nil
	}
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	cons, err := r.log.JetStream().OrderedConsumer(fctx, r.log.StreamName(), jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   pos.Clock + 1,
	})
	if err != nil {
		return false, fmt.Errorf("consumer: %w", err)
	}
	msgs := make(chan jetstream.Msg, min(r.opts.MaxBatch, 4096))
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-fctx.Done():
		}
	}, jetstream.PullMaxMessagesWithBytesLimit(min(r.opts.MaxBatch, 4096), maxBatchBytes))
	if err != nil {
		return false, fmt.Errorf("consume: %w", err)
	}
	defer cc.Stop()
	// Decoding (verifying every message) runs beside applying and
	// storing: the next batch is decoded while the last one is stored.
	decoded := make(chan decodedBatch, 1)
	go r.decodeLoop(fctx, msgs, decoded)
	tick := time.NewTimer(idleTick)
	defer tick.Stop()
	idle := 0
	// Batches applied but not yet stored: while the log has more waiting,
	// the changes of several batches are stored together, so that a value
	// changed by many of them is written once (a rebuild, a projector far
	// behind). held is the clock they reach, 0 when nothing is held.
	var held uint64
	var heldSince time.Time
	store := func() error {
		if held == 0 {
			return nil
		}
		last := held
		held = 0
		if pos, rev, err = r.save(ctx, st, ls, pos, rev, last); err != nil {
			return err
		}
		if progress != nil {
			progress(pos)
		}
		return nil
	}
	for {
		tick.Reset(idleTick)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case b := <-decoded:
			if b.err != nil {
				return false, b.err
			}
			if err := r.absorb(ctx, st, b, &pos); err != nil {
				return false, err
			}
			if held == 0 {
				heldSince = time.Now()
			}
			held = b.last
			if b.pending == 0 || st.Held() >= r.opts.MaxHeld || time.Since(heldSince) >= r.opts.MaxHold ||
				(done != nil && done(pos.after(held))) {
				if err := store(); err != nil {
					return false, err
				}
			}
		case <-tick.C:
			if err := store(); err != nil {
				return false, err
			}
			// Idle: messages deleted at the end of the log are passed
			// over, so that a wait for their clocks ends. (The log never
			// deletes its last message itself: an erasure comes after
			// the records it deletes.) A catch-up looks at once, a
			// projector that runs every second.
			if idle++; done != nil || idle%10 == 0 {
				if pos, rev, err = r.passDeleted(ctx, pos, rev, ls); err != nil {
					return false, err
				}
			}
		}
		if done != nil && done(pos) {
			return false, nil
		}
		if ls.asked() != "" {
			if err := store(); err != nil {
				return false, err
			}
			return true, nil
		}
	}
}

// maxBatchBytes bounds the messages of one batch, and those the consumer
// holds.
const maxBatchBytes = 32 << 20

// decodedBatch is a batch of messages, verified.
type decodedBatch struct {
	entries []log.Entry
	corrupt []uint64 // clocks of the messages that do not verify
	last    uint64   // clock of the last message
	pending uint64   // messages the consumer has still to deliver after it
	err     error
}

// decodeLoop gathers the messages waiting (at most MaxBatch), decodes
// them and hands them on, until ctx ends.
func (r *Runtime) decodeLoop(ctx context.Context, msgs <-chan jetstream.Msg, out chan<- decodedBatch) {
	batch := make([]jetstream.Msg, 0, r.opts.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case m := <-msgs:
			batch = append(batch, m)
		}
		size := len(batch[0].Data())
	drain:
		for len(batch) < r.opts.MaxBatch && size < maxBatchBytes {
			select {
			case m := <-msgs:
				batch = append(batch, m)
				size += len(m.Data())
			default:
				break drain
			}
		}
		var b decodedBatch
		b.entries, b.corrupt, b.last, b.pending, b.err = decodeBatch(batch)
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
		if b.err != nil {
			return
		}
	}
}

// absorb applies one batch of messages to st, and counts in pos the
// messages that did not verify.
func (r *Runtime) absorb(ctx context.Context, st *fold.State, b decodedBatch, pos *position) error {
	if len(b.corrupt) > 0 {
		pos.Corrupt += uint64(len(b.corrupt))
		pos.LastCorrupt = b.corrupt[len(b.corrupt)-1]
		r.opts.Logf("spl/projections: %s: skipped %d messages that do not verify (last at clock %d)", r.Name(), len(b.corrupt), pos.LastCorrupt)
	}
	return st.Apply(ctx, b.entries)
}

// save stores the changes st holds, then the position after clock last.
func (r *Runtime) save(ctx context.Context, st *fold.State, ls *lease, pos position, rev, last uint64) (position, uint64, error) {
	ws, err := st.Changes()
	if err != nil {
		return pos, rev, err
	}
	if !ls.valid() {
		return pos, rev, fmt.Errorf("lease not renewed in time: %w", ErrConflict)
	}
	revs, err := r.models.Commit(ctx, ws)
	if err != nil {
		return pos, rev, err
	}
	st.Committed(ws, revs)
	pos = pos.after(last)
	if rev, err = r.writePosition(ctx, pos, rev, ls.holder); err != nil {
		return pos, rev, err
	}
	st.SetBase(pos.Clock)
	return pos, rev, nil
}

// after returns p moved to clock: a rebuild that reached its end is done.
func (p position) after(clock uint64) position {
	p.Clock = clock
	if p.RebuildTo != 0 && p.Clock >= p.RebuildTo {
		p.RebuildTo = 0
	}
	return p
}

// passDeleted moves the position to the end of the log when every message
// after it is deleted (erased records at the end of the log): the consumer
// delivers nothing for them.
func (r *Runtime) passDeleted(ctx context.Context, pos position, rev uint64, ls *lease) (position, uint64, error) {
	end, err := r.log.LastClock(ctx)
	if err != nil || end <= pos.Clock {
		return pos, rev, err
	}
	ms, _, err := r.d.batch(ctx, r.log.StreamName(), getRequest{Seq: pos.Clock + 1, Batch: 1})
	if err != nil || len(ms) > 0 {
		return pos, rev, err // a message to come: the consumer delivers it
	}
	pos = pos.after(end)
	rev, err = r.writePosition(ctx, pos, rev, ls.holder)
	return pos, rev, err
}

// decodeBatch verifies the messages of a batch, on every core, and returns
// the entries, the clocks of the messages that do not verify, the last
// clock, and the messages pending after it.
func decodeBatch(batch []jetstream.Msg) ([]log.Entry, []uint64, uint64, uint64, error) {
	entries := make([]log.Entry, len(batch))
	errs := make([]error, len(batch))
	clocks := make([]uint64, len(batch))
	var pending uint64 // after the last message
	decode := func(i int) {
		m := batch[i]
		md, err := m.Metadata()
		if err != nil {
			errs[i] = fmt.Errorf("message metadata: %w", err)
			return
		}
		clocks[i] = md.Sequence.Stream
		if i == len(batch)-1 { // decoded by one goroutine, read after them all
			pending = md.NumPending
		}
		entries[i], errs[i] = log.DecodeMessage(m.Subject(), md.Sequence.Stream, m.Headers(), m.Data())
	}
	workers := runtime.GOMAXPROCS(0)
	if len(batch) < 64 || workers == 1 {
		for i := range batch {
			decode(i)
		}
	} else {
		var wg sync.WaitGroup
		per := (len(batch) + workers - 1) / workers
		for w := 0; w < len(batch); w += per {
			wg.Add(1)
			go func(lo, hi int) {
				defer wg.Done()
				for i := lo; i < hi; i++ {
					decode(i)
				}
			}(w, min(w+per, len(batch)))
		}
		wg.Wait()
	}
	out := entries[:0]
	var corrupt []uint64
	for i, err := range errs {
		switch {
		case err == nil:
			out = append(out, entries[i])
		case errors.Is(err, records.ErrCorrupt):
			corrupt = append(corrupt, clocks[i])
		default:
			return nil, nil, 0, 0, err
		}
	}
	return out, corrupt, clocks[len(clocks)-1], pending, nil
}
