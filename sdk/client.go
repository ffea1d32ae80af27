// Package sdk is the Go client agents use to write to and read from an spl
// log: Emit and EmitAsync append records, QueryThread reads a thread in
// clock order, and SaveCheckpoint / LatestCheckpoint / ListCheckpoints are
// the session-checkpoint face of the same log.
//
// A Client opens the embedded log in a data directory by default (Open), or
// connects to a NATS server (Connect).
package sdk

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/internal/natsio"
	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
)

// Errors callers test with errors.Is.
var (
	// ErrNotFound reports that no record matched (for example a thread with
	// no checkpoint).
	ErrNotFound = splog.ErrNotFound
	// ErrNoActor reports that an emit named no actor and the client has no
	// default (WithActor or SPL_ACTOR).
	ErrNoActor = errors.New("spl/sdk: no actor: the write names no actor (a DID such as did:sync:agent:dev) and the client has none (WithActor, SPL_ACTOR)")
	// ErrClosed reports a call on a closed Client. It is the log's
	// sentinel (log.ErrClosed), so that errors.Is(err, ErrClosed) holds
	// whether the client or its log noticed the close.
	ErrClosed = splog.ErrClosed
	// ErrConflict reports an append that lost the race for its thread on
	// every retry (the log's sentinel, log.ErrConflict).
	ErrConflict = splog.ErrConflict
	// ErrInDoubt reports an append whose outcome is unknown: the answer
	// was lost (log.ErrInDoubt). Emit it again: a retry of a record that
	// landed is recognised and not stored twice (through spl serve's door
	// after a cluster leader's death, rarely still twice: docs/faults.md).
	ErrInDoubt = splog.ErrInDoubt
	// ErrForbidden reports an append the server dropped because the
	// client's NATS credentials may not write there (log.ErrForbidden):
	// nothing was appended.
	ErrForbidden = splog.ErrForbidden
	// ErrDiskFull reports an append refused because the disk that holds
	// the log is full, its server's or the embedded one's
	// (log.ErrDiskFull): nothing was appended, unless the error also
	// wraps ErrInDoubt. Free space and append again.
	ErrDiskFull = splog.ErrDiskFull
	// ErrTooLarge reports a record larger than the log takes
	// (WithMaxRecord; log.ErrTooLarge): nothing was appended. The error
	// is a *records.FieldError on "body" too, naming the sizes.
	ErrTooLarge = splog.ErrTooLarge
	// ErrProjectionBusy reports that another process holds a projection's
	// lease and did not hand it over (projections.ErrBusy).
	ErrProjectionBusy = projections.ErrBusy
)

// BatchStats describes one group commit of the client's writer (see
// WithBatchObserver).
type BatchStats = splog.BatchStats

// CorruptError describes a stored message that failed verification
// (log.CorruptError): its clock, its subject and what did not verify. It
// wraps records.ErrCorrupt.
type CorruptError = splog.CorruptError

// Option configures a Client.
type Option func(*config)

type config struct {
	replicas        int
	dir             string
	actor           string
	queueSize       int
	closeTimeout    time.Duration
	timeout         time.Duration
	name            string
	observe         func(splog.BatchStats)
	natsOpts        []nats.Option
	markDir         string
	storeDir        string
	signKey         ed25519.PrivateKey // actor.go
	requireSigned   bool
	bindingsByAdmin bool // WithBindingsByAdmin (rights.go)
	noSigning       bool
	noDoor          bool // WithoutDoor
	maxRecord       int  // WithMaxRecord
}

// DefaultMaxRecord is the largest record a client appends unless
// WithMaxRecord says otherwise: 64 MiB of envelope (log.DefaultMaxRecord).
const DefaultMaxRecord = splog.DefaultMaxRecord

// WithMaxRecord sets the largest record the client appends, in bytes of
// its envelope (log.Options.MaxRecord): 64 MiB by default, at least
// 1 MiB. A record over 1 MiB keeps its body beside the log, with the same
// id; one over the limit is refused with ErrTooLarge.
func WithMaxRecord(n int) Option { return func(c *config) { c.maxRecord = n } }

// WithoutDoor makes the client write the log's stream itself even where
// spl serve's door answers (log.Options.NoDoor): the option of the
// server's own client, which serves the door.
func WithoutDoor() Option { return func(c *config) { c.noDoor = true } }

// WithDir sets the data directory of the embedded log. The default is
// $SPL_HOME, else ~/.spl.
func WithDir(dir string) Option { return func(c *config) { c.dir = dir } }

// WithReplicas sets the replicas of the stream when the client creates it
// on a server that has none yet (3 in a typical cluster). Default 1.
func WithReplicas(n int) Option { return func(c *config) { c.replicas = n } }

// WithActor sets the actor (a DID) of records emitted without one. The
// default is $SPL_ACTOR.
func WithActor(did string) Option { return func(c *config) { c.actor = did } }

// WithQueueSize bounds the number of EmitAsync records queued and not yet
// durable; EmitAsync blocks while the queue is full. The default is 8192.
func WithQueueSize(n int) Option { return func(c *config) { c.queueSize = n } }

// WithCloseTimeout bounds how long Close waits for queued records to land.
// The default is 10 seconds.
func WithCloseTimeout(d time.Duration) Option { return func(c *config) { c.closeTimeout = d } }

// WithTimeout bounds one request to the server (an append's answer, a
// read). The default is 10 seconds.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithName names the client's NATS connection, as the server's monitoring
// shows it. The default is "spl".
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithBatchObserver calls fn after every group commit the client's writer
// sends (for metrics); fn must return quickly.
func WithBatchObserver(fn func(BatchStats)) Option {
	return func(c *config) { c.observe = fn }
}

// WithMarkDir keeps the log's high-water mark in dir (log.Options.MarkDir):
// for a server's own client (spl serve), whose log is not embedded. The
// embedded log keeps it in its data directory without this option.
func WithMarkDir(dir string) Option { return func(c *config) { c.markDir = dir } }

// WithServerStore says that the server Connect reaches is in this
// process, keeps its store in dir and fsyncs no message itself: the
// client's writes then fsync the blocks they write (spl serve on one
// node: one fsync a group commit, and no staging of atomic batches).
func WithServerStore(dir string) Option { return func(c *config) { c.storeDir = dir } }

// WithNATSOptions passes options to nats.Connect when the client connects
// to a server (credentials, token, nkey, TLS).
func WithNATSOptions(opts ...nats.Option) Option {
	return func(c *config) { c.natsOpts = append(c.natsOpts, opts...) }
}

// Event is a record to emit.
type Event struct {
	Act    string    // upper-case verb, e.g. records.ActKnow
	Kind   string    // lower-case dotted kind, e.g. "agent.step"
	Thread string    // the thread it belongs to
	Body   any       // a map, a struct with cbor tags, or records.RawBody
	Actor  string    // a DID; defaults to the client's actor
	Time   time.Time // defaults to now

	// A record its author signed (spl serve's POST /v1/records with a
	// signature): the salt the author drew, and the signature over the
	// record's signing id (see actor.go). Salt, Time and Signature come
	// together; Signature.Key, when nil, is the actor's key.
	Salt      []byte
	Signature *records.Signature
}

// Receipt says where an emitted record landed.
type Receipt struct {
	ID    records.ID // content id
	Clock uint64     // position in the log
}

// Record is a stored record with its id and clock, verified on read.
type Record struct {
	ID    records.ID
	Clock uint64
	*records.Record

	// after is, for a checkpoint whose retention erased older ones, the
	// clock of the last erasure record when those followed it directly:
	// the thread's last clock once this append and what it caused were
	// done (0: Clock is).
	after uint64
}

// headClock is the thread's last clock once r's append was done.
func (r Record) headClock() uint64 { return max(r.Clock, r.after) }

// SavedCheckpoint is a stored session checkpoint.
type SavedCheckpoint struct {
	Record
	Checkpoint *records.Checkpoint
	// Skipped are the clocks of newer checkpoints that failed verification
	// and were passed over (LatestCheckpoint), newest first.
	Skipped []uint64
}

// Client is a handle on an spl log. It is safe for concurrent use.
type Client struct {
	conn *natsio.Conn // shared by the log and the read models
	log  *splog.Log
	cfg  config

	heads headCache // the checkpoint saved last per thread (lineage.go)

	// Write-behind state of EmitAsync.
	life     context.Context // bounds queued appends; cancelled by Close
	cancel   context.CancelFunc
	slots    chan struct{}  // one token per queued record
	turn     chan struct{}  // held while handing a record to the log; Close keeps it
	closing  chan struct{}  // closed when Close begins
	queue    chan submitted // FIFO handed to the reaper, in the log's order
	reaped   chan struct{}  // closed when the reaper exits
	mu       sync.Mutex
	cond     *sync.Cond
	queued   uint64 // records handed to the queue
	finished uint64 // records the reaper saw finish
	failed   []error
	retain   map[string]string // threads whose queued checkpoints landed since the last Flush → actor
	closed   bool

	policies policyCache // retention and redaction policies the save and seal paths last read (policy.go)
	keys     keyCache    // actor key bindings the sign path last read (actor.go)

	blobOnce  sync.Once
	blobStore blobStore     // payloads of runs too large for a record (run_write.go)
	effects   effectIndexes // the runs' effects RecordEffect read (run_remote.go)
	gates     runGates      // the runs found writable (run_gate.go)

	proj clientProjections // the read models' runtime and reader, made on first use (projections.go)
}

func newConfig(opts []Option) config {
	c := config{actor: env.Actor(), queueSize: 8192, closeTimeout: 10 * time.Second, timeout: 10 * time.Second, name: "spl"}
	for _, o := range opts {
		o(&c)
	}
	if c.queueSize < 1 {
		c.queueSize = 1
	}
	return c
}

// Open opens the log: the server named by $SPL_SERVER when it is set and
// no WithDir is given (with the token of $SPL_TOKEN_FILE or $SPL_TOKEN,
// see NATSToken), else the embedded log in the data directory
// (WithDir, $SPL_HOME or ~/.spl), starting an in-process server or joining
// the one another process on the same directory already runs.
func Open(ctx context.Context, opts ...Option) (*Client, error) {
	cfg := newConfig(opts)
	if url := env.Server(); url != "" && cfg.dir == "" {
		tok, err := NATSToken(env.TokenFile())
		if err != nil {
			return nil, fmt.Errorf("spl/sdk: %s: %w", env.TokenFileVar, err)
		}
		opts := cfg.natsOpts
		if tok != "" { // before the caller's options, which may name others
			opts = append([]nats.Option{nats.Token(tok)}, opts...)
		}
		return open(ctx, cfg, natsio.Options{URL: url, NATSOptions: opts})
	}
	dir := cfg.dir
	if dir == "" {
		d, err := env.Home()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	return open(ctx, cfg, natsio.Options{Dir: dir})
}

// Connect connects to the spl log on the NATS server at url (several
// servers of a cluster: comma-separated). Credentials, nkeys and TLS come
// as nats.go options through WithNATSOptions.
func Connect(ctx context.Context, url string, opts ...Option) (*Client, error) {
	cfg := newConfig(opts)
	return open(ctx, cfg, natsio.Options{URL: url, NATSOptions: cfg.natsOpts, StoreDir: cfg.storeDir})
}

// RedactURL is url with any credentials in it replaced, for messages.
func RedactURL(url string) string { return natsio.Redact(url) }

// linger is how long the client's Close keeps the embedded server up for
// the processes that joined it (log.Options.Linger's default).
const linger = 5 * time.Second

func open(ctx context.Context, cfg config, co natsio.Options) (*Client, error) {
	co.Name, co.Linger, co.Timeout = cfg.name, linger, cfg.timeout
	key, err := signingKey(cfg)
	if err != nil {
		return nil, err
	}
	cfg.signKey = key
	conn, err := natsio.Dial(ctx, co)
	if err != nil {
		return nil, fmt.Errorf("spl/log: %w", err)
	}
	l, err := splog.On(ctx, conn, splog.Options{Replicas: cfg.replicas, Timeout: cfg.timeout, Observe: cfg.observe, MarkDir: cfg.markDir, NoDoor: cfg.noDoor, MaxRecord: cfg.maxRecord})
	if err != nil {
		conn.Close()
		return nil, err
	}
	c := &Client{
		conn:    conn,
		log:     l,
		cfg:     cfg,
		slots:   make(chan struct{}, cfg.queueSize),
		turn:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		queue:   make(chan submitted, cfg.queueSize),
		reaped:  make(chan struct{}),
	}
	c.cond = sync.NewCond(&c.mu)
	c.policies.watch(conn.NC)
	c.life, c.cancel = context.WithCancel(context.Background())
	go c.reap()
	return c, nil
}

// record builds the record of ev, applying the client's defaults. The
// record is not appended as it is: Append and EmitAsync redact it first.
func (c *Client) record(ev Event) (*records.Record, error) {
	if ev.Actor == "" {
		ev.Actor = c.cfg.actor
	}
	if ev.Actor == "" {
		return nil, ErrNoActor
	}
	if ev.Salt != nil || ev.Signature != nil {
		return c.signedRecord(ev)
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	return records.New(ev.Act, ev.Kind, ev.Thread, ev.Actor, ev.Time, ev.Body)
}

func receipt(e splog.Entry) Receipt { return Receipt{ID: e.ID, Clock: e.Clock} }

// Emit appends one record and returns once it is durable, then applies
// the rules that follow an append (Append).
func (c *Client) Emit(ctx context.Context, ev Event) (Receipt, error) {
	r, err := c.AppendEvent(ctx, ev)
	return Receipt{ID: r.ID, Clock: r.Clock}, err
}

// AppendEvent is Emit returning the record as stored: the path of a face
// that hands the service layer an event not yet sealed (spl serve's POST
// /v1/records). The event's body is redacted (see RedactionPolicy)
// before the record is sealed, then it is appended as Append does.
func (c *Client) AppendEvent(ctx context.Context, ev Event) (Record, error) {
	rec, err := c.record(ev)
	if err != nil {
		return Record{}, err
	}
	return c.Append(ctx, rec)
}

// Append appends a record built by the caller (records.New) and returns
// it as stored (chained to its thread: prev set) once it is durable. It is the one write path of every face (Emit,
// SaveCheckpoint, the CLI, spl serve's HTTP API), so the rules that
// follow an append hold whichever face wrote it: first, before anything is
// appended, the thread's redaction policies (see RedactionPolicy) take
// covered values out of the body, sealing the record anew; then a session checkpoint
// enforces its thread's retention policy (see SetRetention). When the
// record is stored but retention fails, Append returns the receipt and a
// *RetentionError; the next checkpoint or ApplyRetention tries again.
func (c *Client) Append(ctx context.Context, rec *records.Record) (Record, error) {
	return c.append(ctx, rec, false, 0)
}

// append is Append, conditional when cond: then only if rec's thread is
// still at clock after (log.AppendAfter; else an error wrapping
// log.ErrMoved, nothing appended).
func (c *Client) append(ctx context.Context, rec *records.Record, cond bool, after uint64) (Record, error) {
	var at *uint64
	if cond {
		at = &after
	}
	out, errs := c.appendAll(ctx, []*records.Record{rec}, []error{nil}, at)
	return out[0], errs[0]
}

// Pending is an EmitAsync record on its way to the log.
type Pending struct {
	p *splog.Pending
}

// Done is closed once the record is durable or has failed.
func (p *Pending) Done() <-chan struct{} { return p.p.Done() }

// Wait blocks until the record is durable or has failed, or ctx is done.
func (p *Pending) Wait(ctx context.Context) (Receipt, error) {
	e, err := p.p.Wait(ctx)
	if err != nil {
		return Receipt{}, err
	}
	return receipt(e), nil
}

// EmitAsync validates ev and queues it (write-behind). It blocks while the
// queue is full (back-pressure), and while the log's own queue is, until
// there is room or ctx is done. The append itself is bounded by the
// client's life, not by ctx: Close waits for it, up to the close timeout.
// Only when ctx ends just as the record is handed over may the append
// fail for it; the Pending says so.
func (c *Client) EmitAsync(ctx context.Context, ev Event) (*Pending, error) {
	rec, err := c.record(ev)
	if err != nil {
		return nil, err
	}
	if rec, err = c.seal(ctx, rec); err != nil {
		return nil, err
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("spl/sdk: emit: queue full: %w", ctx.Err())
	case <-c.closing:
		return nil, ErrClosed
	}
	// One record at a time is handed to the log, in turn, so that the
	// reaper's queue is in the log's order. The turn is not c.mu: waiting
	// for it, like the hand-over, ends with ctx, and Flush and the reaper
	// never wait behind a hand-over.
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		<-c.slots
		return nil, fmt.Errorf("spl/sdk: emit: queue full: %w", ctx.Err())
	case <-c.closing:
		<-c.slots
		return nil, ErrClosed
	}
	s, err := c.submit(ctx, rec)
	if err != nil {
		<-c.turn
		<-c.slots
		return nil, err
	}
	if rec.Header.Kind == records.KindCheckpoint {
		s.checkpoint = &rec.Header
	}
	c.mu.Lock()
	c.queued++
	c.queue <- s // never blocks: the queue has a slot per token
	c.mu.Unlock()
	<-c.turn
	return &Pending{p: s.p}, nil
}

// submitted is a record handed to the log, as the reaper sees it.
type submitted struct {
	p          *splog.Pending
	checkpoint *records.Header    // a checkpoint's header, for retention once it landed
	release    context.CancelFunc // frees the append's context once it is done; may be nil
}

// submit hands rec to the log, waiting while the log's queue is full until
// ctx or the client's life ends. The append is bounded by the client's
// life only: its context ends with ctx while the hand-over waits, and not
// after.
func (c *Client) submit(ctx context.Context, rec *records.Record) (submitted, error) {
	if c.isClosing() {
		return submitted{}, ErrClosed
	}
	if ctx.Done() == nil {
		p, err := c.log.Submit(c.life, rec)
		if err != nil && c.life.Err() != nil {
			return submitted{}, ErrClosed
		}
		return submitted{p: p}, err
	}
	actx, cancel := context.WithCancelCause(c.life)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	p, err := c.log.Submit(actx, rec)
	if stop() || err != nil {
		if err != nil {
			cancel(nil)
			switch {
			case c.life.Err() != nil:
				return submitted{}, ErrClosed
			case ctx.Err() != nil:
				return submitted{}, fmt.Errorf("spl/sdk: emit: log queue full: %w", ctx.Err())
			}
			return submitted{}, err
		}
		return submitted{p: p, release: func() { cancel(nil) }}, nil
	}
	// ctx ended just as the record was handed over, and ended the
	// append's context with it. Hand the same record over again, bound
	// by the client's life only: the log appends it once (the writer
	// fails the first copy before sending it, or answers the second
	// with the first's entry).
	cancel(nil)
	p, err = c.log.Submit(c.life, rec)
	if err != nil && c.life.Err() != nil {
		return submitted{}, ErrClosed
	}
	return submitted{p: p}, err
}

func (c *Client) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// reap waits for queued records in order, freeing their queue slots and
// noting failures for Close.
func (c *Client) reap() {
	defer close(c.reaped)
	for s := range c.queue {
		<-s.p.Done()
		_, err := s.p.Wait(context.Background())
		if s.release != nil {
			s.release()
		}
		<-c.slots
		c.mu.Lock()
		c.finished++
		if err != nil {
			c.failed = append(c.failed, err)
		} else if s.checkpoint != nil {
			// Retention of a queued checkpoint is for Flush to apply:
			// the reaper does no I/O.
			if c.retain == nil {
				c.retain = make(map[string]string)
			}
			c.retain[s.checkpoint.Thread] = s.checkpoint.Actor
		}
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// Flush waits until every record queued so far is durable or has failed,
// or ctx is done. It reports (as an *UnlandedError) the queued records that
// failed since the last Flush.
//
// Checkpoints queued by EmitAsync follow the rules of Append once they
// have landed: Flush enforces the retention policy of each thread they
// were saved to, and reports a failure as a *RetentionError.
func (c *Client) Flush(ctx context.Context) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	ue := failedError(c.failed)
	c.failed = nil
	retain := c.retain
	c.retain = nil
	c.mu.Unlock()
	if ue != nil {
		return ue
	}
	for _, thread := range slices.Sorted(maps.Keys(retain)) {
		if _, err := c.enforceRetention(ctx, thread, retain[thread], 0); err != nil {
			return &RetentionError{Thread: thread, Err: err}
		}
	}
	return nil
}

// wait blocks until the reaper has seen every record queued before the
// call finish, or ctx is done.
func (c *Client) wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	target := c.queued
	for c.finished < target {
		if ctx.Err() != nil {
			return fmt.Errorf("spl/sdk: flush: %d records not yet durable: %w", target-c.finished, ctx.Err())
		}
		c.cond.Wait()
	}
	return nil
}

// reapBound bounds how long Close waits, after the log closed, for the
// reaper to count the records that were queued: bookkeeping only, since
// the closed log has answered every one of them.
const reapBound = 30 * time.Second

// UnlandedError reports queued records that did not land.
type UnlandedError struct {
	Count int   // how many records did not land
	First error // why the first of them did not
	// Timeout, from Close only, is why Close stopped waiting for the
	// records (its close timeout) and failed those still queued.
	Timeout error
}

// Error implements error.
func (e *UnlandedError) Error() string {
	if e.Timeout != nil {
		return fmt.Sprintf("spl/sdk: %d queued records did not land (%v); first: %v", e.Count, e.Timeout, e.First)
	}
	return fmt.Sprintf("spl/sdk: %d queued records did not land; first: %v", e.Count, e.First)
}

// Unwrap returns the first failure and, from Close, the timeout.
func (e *UnlandedError) Unwrap() []error {
	if e.Timeout != nil {
		return []error{e.First, e.Timeout}
	}
	return []error{e.First}
}

func failedError(failed []error) *UnlandedError {
	if len(failed) == 0 {
		return nil
	}
	return &UnlandedError{Count: len(failed), First: failed[0]}
}

// AnswersLost tells the client that its server will never answer the
// requests in flight: the server restarted its JetStream (spl serve does
// when the disk filled up). They end at once, as when the connection
// drops, and an append among them is settled by reading its thread
// instead of after its timeout.
func (c *Client) AnswersLost() { c.conn.AnswersLost() }

// Close flushes within the close timeout and releases the log. Records that
// did not land are reported in the error, an *UnlandedError; an error
// closing the log is joined to it.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.closeTimeout)
	defer cancel()
	// Take the turn for good, so that nothing is queued from now on: a
	// hand-over under way ends when it gets room, or when the timeout
	// fails it.
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		c.cancel()
		c.turn <- struct{}{}
	}
	close(c.queue)
	werr := c.wait(ctx)
	c.cancel() // what is still queued fails now, and is counted below
	// The log's writer finishes every record handed to it before its
	// Close returns (failing those whose context the cancel ended), so
	// the reaper has only bookkeeping left after it.
	lerr := c.log.Close()
	c.conn.Close()
	if lerr != nil {
		lerr = fmt.Errorf("spl/sdk: close log: %w", lerr)
	}
	// Not bounded by the close timeout: the count Close reports must be
	// exact, and with a short timeout the reaper may still be counting.
	reaped := time.NewTimer(reapBound)
	defer reaped.Stop()
	select {
	case <-c.reaped:
	case <-reaped.C:
		lerr = errors.Join(lerr, errors.New("spl/sdk: close: queued records still unaccounted for after the log closed"))
	}
	c.mu.Lock()
	ue := failedError(c.failed)
	c.failed = nil
	c.mu.Unlock()
	if ue == nil {
		return lerr
	}
	ue.Timeout = werr
	if lerr != nil {
		return errors.Join(ue, lerr)
	}
	return ue
}

// SaveCheckpoint appends a session checkpoint (kind agent.session.checkpoint,
// act LEARN) to thread, as actor (empty: the client's actor).
//
// Then it enforces the thread's retention policy (see SetRetention), if
// there is one: the checkpoints the policy does not keep are erased, by
// an erasure record of the same actor with reason "retention". Without a
// policy this costs two lookups. When the checkpoint is saved but
// retention fails, SaveCheckpoint returns the receipt and a
// *RetentionError; the next save or ApplyRetention tries again.
//
// A checkpoint whose Parent and ForkedFrom are zero gets as Parent the
// checkpoint it descends from, by the one rule (rules.Parent): the one
// the thread's newest resume record names when that is newer than the
// newest checkpoint, else the newest checkpoint; two last-by-subject
// gets, sent together (branchHead), or none while the checkpoint this
// client saved last is still the thread's last record (saveAfterOwn).
func (c *Client) SaveCheckpoint(ctx context.Context, thread, actor string, cp records.Checkpoint) (Receipt, error) {
	ev := Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: thread, Actor: actor, Body: &cp}
	if !cp.Parent.IsZero() || cp.ForkedFrom != nil {
		return c.Emit(ctx, ev)
	}
	r, err := c.saveAfterOwn(ctx, ev, &cp)
	if err == nil || !errors.Is(err, splog.ErrMoved) {
		return Receipt{ID: r.ID, Clock: r.Clock}, err
	}
	p, err := c.branchHead(ctx, thread)
	if err != nil {
		return Receipt{}, err
	}
	cp.Parent = p
	r, err = c.AppendEvent(ctx, ev)
	if err == nil || errors.As(err, new(*RetentionError)) {
		c.heads.saved(thread, r.ID, r.headClock())
	}
	return Receipt{ID: r.ID, Clock: r.Clock}, err
}

// actorOr is actor, or the client's when empty.
func (c *Client) actorOr(actor string) string {
	if actor == "" {
		return c.cfg.actor
	}
	return actor
}

// actorFor is the actor a write names: actor, else the client's
// (WithActor); ErrNoActor when neither is set. The one rule of "a write
// names its actor".
func (c *Client) actorFor(actor string) (string, error) {
	if actor = c.actorOr(actor); actor == "" {
		return "", ErrNoActor
	}
	return actor, nil
}
