package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/log"
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
	// ReadOnly makes a runtime that only reads and waits: it creates no
	// bucket, takes no lease and never applies the log itself. Wait waits
	// for the process that runs the projection (spl serve); Run, CatchUp
	// and Rebuild return ErrReadOnly. For a client whose credentials write
	// no bucket: a door client of spl serve.
	ReadOnly bool
	// Replicas of the buckets when New creates them; 1 when zero.
	Replicas int
	// Timeout bounds one request to the server; 10s when zero.
	Timeout time.Duration
	// Now is the runtime's clock, and the only one it reads: lease
	// renewals, hints and expiry, how long changes are held (MaxHold),
	// positions and status, how long a wait lasted. time.Now when nil,
	// whose readings carry the monotonic clock, so that the durations
	// measured between two of them do not jump with the wall clock. The
	// runtime's timers (renewals every LeaseTTL/3, idle ticks, retries)
	// are the time package's: they pace the work, and read no time.
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
	conn  *natsio.Conn // l's connection: the buckets, the consumer
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
// c is the connection l is open on: the read models live in KV buckets
// beside the log's stream, on the same server.
func New(ctx context.Context, c *natsio.Conn, l *log.Log, f Fold, opts Options) (*Runtime, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	d := direct{c: c, timeout: opts.Timeout}
	r := &Runtime{
		log: l, conn: c, fold: f, opts: opts, d: d,
		store: &kvStore{js: c.JS, nc: c.NC, d: d, stream: l.StreamName(), replicas: opts.Replicas},
		hist:  &logHistory{d: d, stream: l.StreamName(), log: l},
	}
	r.models = r.store
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if opts.ReadOnly {
		return r, r.bindMeta(ctx)
	}
	for _, m := range f.Models() {
		if err := r.store.ensure(ctx, m); err != nil {
			return nil, fmt.Errorf("spl/projections: %s: %w", f.Name(), err)
		}
	}
	name := BucketName(l.StreamName(), MetaModel)
	meta, err := c.JS.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		meta, err = c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "spl projections: positions and leases",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    opts.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			meta, err = c.JS.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("spl/projections: meta bucket: %w", err)
	}
	r.meta = meta
	return r, nil
}

// modelsWait is how long a read-only runtime waits for a starting
// server to create the read models' buckets.
const modelsWait = 2 * time.Second

// bindMeta binds a read-only runtime to the meta bucket, waiting up to
// modelsWait for a server that is starting to create it.
func (r *Runtime) bindMeta(ctx context.Context) error {
	name := BucketName(r.log.StreamName(), MetaModel)
	deadline := time.Now().Add(modelsWait)
	for {
		meta, err := r.conn.JS.KeyValue(ctx, name)
		switch {
		case err == nil:
			r.meta = meta
			return nil
		case !errors.Is(err, jetstream.ErrBucketNotFound):
			return fmt.Errorf("spl/projections: meta bucket: %w", err)
		case time.Now().After(deadline):
			return fmt.Errorf("%w: bucket %s is missing: run spl serve on this log, which keeps the read models", ErrNoModels, name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("spl/projections: meta bucket: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
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
	if r.opts.ReadOnly {
		return ErrReadOnly
	}
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
	sub, err := r.conn.NC.Subscribe("$KV."+BucketName(r.log.StreamName(), MetaModel)+"."+key, func(*nats.Msg) {
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
	if r.opts.ReadOnly {
		return ErrReadOnly
	}
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
	if r.opts.ReadOnly {
		return ErrReadOnly
	}
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
		start := r.opts.Now()
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
		if r.opts.Now().Sub(start) > time.Minute {
			attempt = 0 // it ran well for a while: not the same failure
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(time.Duration(attempt+1)*50*time.Millisecond, 2*time.Second)):
		}
	}
}
