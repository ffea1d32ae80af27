package log

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// DefaultStream is the name of the stream that holds the log.
const DefaultStream = "SPL"

// Options configures Open: Dir (the embedded log, fsync before every ack)
// or URL. The log reads no environment; the sdk's Open chooses the
// directory ($SPL_HOME, else ~/.spl).
type Options struct {
	// Dir is the data directory of the embedded log. Ignored with URL.
	Dir string
	// URL, when set, connects to a NATS server instead of the embedded one.
	URL string
	// NATSOptions are passed to nats.Connect (credentials, TLS, ...).
	NATSOptions []nats.Option
	// Stream is the stream name; DefaultStream when empty.
	Stream string
	// Replicas of the stream when Open creates it; 1 when zero.
	Replicas int
	// NoSync turns off fsync before ack in the embedded log. It trades
	// durability on power loss for speed; never the default. (With URL,
	// durability is the server's: SyncAlways, or a majority of replicas.)
	NoSync bool
	// MaxBatch bounds the records of one group commit; 1000 when zero
	// (the server's default limit of an atomic batch).
	MaxBatch int
	// Linger is how long Close keeps the embedded server up for other
	// processes that joined it; 5s when zero. A joined process that is
	// still connected after that takes the server over itself.
	Linger time.Duration
	// Timeout bounds one request to the server; 10s when zero.
	Timeout time.Duration
	// Name names the NATS connection.
	Name string
	// Now is the clock of records the log writes itself (erasures);
	// time.Now when nil.
	Now func() time.Time
	// MarkDir is the data directory that keeps the log's high-water mark
	// (mark.go): the embedded log's own directory when empty. spl serve
	// sets it to its directory; a client of a remote server keeps none
	// (the server does).
	MarkDir string
	// NoMark keeps no high-water mark (benchmarks, to measure its cost).
	NoMark bool
	// MarkEvery is how often at most the writer writes the mark;
	// DefaultMarkEvery when zero. Close always writes it.
	MarkEvery time.Duration
	// NoDoor makes the log write its stream itself even where spl serve's
	// door answers (door.go): the log of the server that runs the door.
	NoDoor bool
	// MaxRecord is the largest record the log takes, in bytes of its
	// envelope; DefaultMaxRecord (64 MiB) when zero, at most
	// records.MaxRecordSize. A record over records.MaxEncodedSize keeps
	// its body outside the log's messages (bodies.go).
	MaxRecord int
	// Observe, when set, is called by the writer after every group commit
	// it sent (for metrics). It must return quickly.
	Observe func(BatchStats)
}

// BatchStats describes one group commit.
type BatchStats struct {
	Records int           // records in the batch
	Bytes   int           // encoded bytes of those records
	Commit  time.Duration // from the first message sent to the last answer, fsync included
	Fsync   time.Duration // of Commit, the writer's own fsync (embedded log; 0 when the server fsyncs)
	Err     error         // nil when the batch landed
}

func (o *Options) withDefaults() error {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1000
	}
	if o.Linger == 0 {
		o.Linger = 5 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Name == "" {
		o.Name = "spl"
	}
	if o.MarkEvery == 0 {
		o.MarkEvery = DefaultMarkEvery
	}
	if o.MaxRecord == 0 {
		o.MaxRecord = DefaultMaxRecord
	}
	switch {
	case o.MaxRecord < records.MaxEncodedSize || o.MaxRecord > records.MaxRecordSize:
		return fmt.Errorf("spl/log: options: MaxRecord: must be %d to %d bytes, got %d", records.MaxEncodedSize, records.MaxRecordSize, o.MaxRecord)
	case o.Replicas < 1 || o.Replicas > 5:
		return fmt.Errorf("spl/log: options: Replicas: must be 1 to 5, got %d", o.Replicas)
	case o.MaxBatch < 1 || o.MaxBatch > 1000:
		return fmt.Errorf("spl/log: options: MaxBatch: must be 1 to 1000, got %d", o.MaxBatch)
	}
	return nil
}

// Log is the append-only record log on a JetStream stream. It is safe for
// concurrent use; all appends of a process go through one writer that
// gathers them into group commits.
type Log struct {
	opts    Options
	c       *natsio.Conn
	ownConn bool                // Close closes c: Open dialled it
	blocks  *natsio.BlockSyncer // the embedded log's fsync, done by the writer; nil with URL or NoSync
	mark    *marker             // the high-water mark (mark.go); nil when none is kept
	door    *door               // spl serve's door, when its appends go there (door.go)
	w       *writer
	bodies  bodyStore     // bodies too large for a message (bodies.go)
	closed  chan struct{} // Close began: no more appends
	drained chan struct{} // the writer has drained its queue: no more reads
	once    sync.Once

	metaMu sync.Mutex
	metaKV jetstream.KeyValue // the meta bucket, once bound

	// openStats is the stream as the log found it at open (provision).
	openStats Stats
}

// Open opens the log: the embedded server in opts.Dir (started in this
// process, or joined when another process on the same directory runs it),
// or the server at opts.URL. It creates the stream when missing and
// checks the settings the log depends on.
func Open(ctx context.Context, opts Options) (*Log, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	if opts.URL == "" && opts.Dir == "" {
		return nil, errors.New("spl/log: options: Dir or URL is required")
	}
	c, err := natsio.Dial(ctx, natsio.Options{
		Dir: opts.Dir, URL: opts.URL, NATSOptions: opts.NATSOptions,
		Linger: opts.Linger, Timeout: opts.Timeout, Name: opts.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("spl/log: %w", err)
	}
	l, err := open(ctx, c, opts)
	if err != nil {
		c.Close()
		return nil, err
	}
	l.ownConn = true
	return l, nil
}

// On opens the log on a connection the caller dialled and keeps: Close
// leaves it open. The module's own layers (the sdk, spl serve) use it to
// share one connection between the log and the read models; programs use
// Open. opts.Dir, URL, NATSOptions, Linger and Name are the connection's
// and are ignored here.
func On(ctx context.Context, c *natsio.Conn, opts Options) (*Log, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	return open(ctx, c, opts)
}

func open(ctx context.Context, c *natsio.Conn, opts Options) (*Log, error) {
	l := &Log{opts: opts, c: c, closed: make(chan struct{}), drained: make(chan struct{})}
	l.bodies.l = l
	// A process that runs the embedded server itself has no door to ask
	// for: spl serve holds the directory's lock when it serves it.
	if !opts.NoDoor && !c.Serving() {
		if err := l.retryLost(ctx, func(ctx context.Context) (err error) {
			l.door, err = findDoor(ctx, l)
			return err
		}); err != nil {
			return nil, fmt.Errorf("spl/log: %w", err)
		}
	}
	if l.door != nil {
		return l.openDoor(ctx)
	}
	var err error
	if dir := opts.MarkDir; !opts.NoMark && (dir != "" || c.Embedded()) {
		if dir == "" {
			dir = c.Dir()
		}
		if l.mark, err = newMarker(l, dir); err != nil {
			return nil, fmt.Errorf("spl/log: %w", err)
		}
	}
	// The mark is read before the stream is looked at: the stream's last
	// clock then cannot be behind it unless records were lost (a mark
	// read after could name a clock another process acknowledged since).
	var mk Mark
	if l.mark != nil {
		if k, ok, err := l.mark.read(); err == nil && ok {
			mk = k
		}
	}
	if err := l.retryLost(ctx, l.provision); err != nil {
		_ = l.mark.stop()
		return nil, err
	}
	// A new leader answers what the dead one took with it: see
	// natsio.Conn.WakeOnLeader.
	c.WakeOnLeader(opts.Stream)
	if c.SelfSync() && !opts.NoSync {
		l.blocks = natsio.NewBlockSyncer(c.StoreDir(), opts.Stream)
		if err := l.blocks.Check(); err != nil {
			_ = l.mark.stop()
			return nil, fmt.Errorf("spl/log: %w", err)
		}
	}
	// A stream behind the mark, or holding another record at its clock,
	// takes no appends (ErrAppendsRefused); one read, when there is a mark.
	var lost error
	if mk.Clock > 0 {
		var loss *MarkLoss
		if err := l.retryLost(ctx, func(ctx context.Context) (err error) {
			loss, err = l.checkMark(ctx, mk, l.openStats)
			return err
		}); err != nil {
			_ = l.mark.stop()
			return nil, fmt.Errorf("spl/log: %w", err)
		}
		lost = l.refusedFor(loss)
	}
	if l.w, err = newWriter(l, l.openStats.LastClock, lost); err != nil {
		_ = l.mark.stop()
		return nil, fmt.Errorf("spl/log: %w", err)
	}
	// Finish erasures a crashed process left half done: as many secure
	// deletes as it left (a block rewrite each, seconds apiece on a loaded
	// disk), so bounded by ctx, not by the timeout of one request, which
	// bounds each of them (secureDelete, and the connection's timeout on
	// every read when ctx has no deadline).
	if err := l.retryLostWithin(ctx, 0, func(ctx context.Context) error { return l.finishErasures(ctx, nil) }); err != nil {
		l.Close()
		return nil, fmt.Errorf("spl/log: finish pending erasures: %w", err)
	}
	return l, nil
}

// openDoor opens a door log: the server provisions the stream, keeps
// the mark and finishes erasures; the client checks the stream is the
// log's and sends its writes through the door.
func (l *Log) openDoor(ctx context.Context) (*Log, error) {
	if err := l.retryLost(ctx, l.checkStream); err != nil {
		if loss := l.door.info.Loss.markLoss(); loss != nil && streamGone(err) {
			// The server's mark says what the missing stream held.
			return nil, fmt.Errorf("%w (%w)", err, loss)
		}
		return nil, err
	}
	l.c.WakeOnLeader(l.opts.Stream)
	var err error
	if l.w, err = newWriter(l, 0, nil); err != nil {
		return nil, fmt.Errorf("spl/log: %w", err)
	}
	return l, nil
}

// DuplicateWindow is the log stream's de-duplication window: the
// smallest nats-server accepts. The log does not use JetStream's
// Nats-Msg-Id de-duplication (see "Appends and group commit" in
// docs/design.md), but the server keeps the window anyway, and when it
// recovers a stream it loads every message stored within the window to
// rebuild the map. Under the server's default of two minutes, opening a
// store that took a million appends in its last two minutes reads them
// all, about a second here, before the first read is answered.
const DuplicateWindow = 100 * time.Millisecond

// StreamConfig is the configuration of the log's stream: what Open
// provisions. Exported so that a benchmark's raw JetStream peer runs the
// very same stream.
func StreamConfig(name string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               name,
		Subjects:           []string{SubjectPrefix + ".>"},
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Discard:            jetstream.DiscardOld,
		Replicas:           replicas,
		MaxMsgSize:         records.MaxEncodedSize + 64<<10,
		Duplicates:         DuplicateWindow,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
}

// provision creates the stream, or brings an existing one to the settings
// the log needs; it refuses one changed behind the log's back
// (StreamChanges). It never turns on DenyDelete or DenyPurge: erasure
// needs both operations.
func (l *Log) provision(ctx context.Context) error {
	want := StreamConfig(l.opts.Stream, l.opts.Replicas)
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	s, err := l.c.JS.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s, err := l.c.JS.CreateStream(ctx, want)
		switch {
		case err == nil:
			l.openStats = statsOf(s.CachedInfo())
		case !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
			return fmt.Errorf("spl/log: create stream %s: %w", want.Name, err)
		}
		return nil // created by another process meanwhile: empty, as it would be here
	case err != nil:
		return fmt.Errorf("spl/log: stream %s: %w", want.Name, err)
	}
	l.openStats = statsOf(s.CachedInfo())
	have := s.CachedInfo().Config
	if ch := StreamChanges(have, want); len(ch) > 0 {
		return streamChanged(want.Name, ch)
	}
	if have.AllowDirect && have.AllowAtomicPublish && !have.DenyDelete && !have.DenyPurge &&
		len(have.Subjects) == 1 && have.Subjects[0] == want.Subjects[0] && have.MaxMsgSize >= want.MaxMsgSize &&
		have.Duplicates <= want.Duplicates {
		return nil
	}
	have.AllowDirect, have.AllowAtomicPublish = true, true
	have.Duplicates = min(have.Duplicates, want.Duplicates)
	have.DenyDelete, have.DenyPurge = false, false
	have.Subjects = want.Subjects
	have.MaxMsgSize = max(have.MaxMsgSize, want.MaxMsgSize)
	if _, err := l.c.JS.UpdateStream(ctx, have); err != nil {
		return fmt.Errorf("spl/log: update stream %s: %w", want.Name, err)
	}
	return nil
}

// retryLost runs step, an idempotent step of opening the log, with a
// context that also ends when the connection drops, and runs it again
// when it did, until ctx ends. On the embedded log the server belongs to
// whichever process came first: when that process dies, the connection
// moves to the next owner (natsio's dialer takes the server over), and
// an answer the old one owed never comes. Without this, a command
// opening the log at that moment waited out its whole timeout.
func (l *Log) retryLost(ctx context.Context, step func(context.Context) error) error {
	return l.retryLostWithin(ctx, l.opts.Timeout, step)
}

// retryLostWithin is retryLost with each run of step bounded by timeout
// (0: by ctx alone, for a step of many requests, each bounded itself).
func (l *Log) retryLostWithin(ctx context.Context, timeout time.Duration, step func(context.Context) error) error {
	for {
		sctx, cancel := l.c.UntilLost(ctx, timeout)
		err := step(sctx)
		lost := err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.Canceled)
		cancel()
		if !lost {
			return err
		}
	}
}

// untilLost returns a context that ends after timeout, or when the
// connection drops, whichever comes first.
func (l *Log) untilLost(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return l.c.UntilLost(parent, timeout)
}

// Embedded reports whether the log runs on the embedded server (started
// by this process or joined). There the log's writer fsyncs the log's
// blocks itself, and the server fsyncs no other stream: a write to one is
// durable only once the page cache is written back.
func (l *Log) Embedded() bool { return l.c.Embedded() }

// SelfSync reports whether the log's writer fsyncs the stream's blocks
// itself before it answers a group commit (the embedded log, or a server
// in this process without SyncAlways: natsio.Options.StoreDir), rather
// than the server each message.
func (l *Log) SelfSync() bool { return l.blocks != nil }

// StreamName is the name of the log's stream.
func (l *Log) StreamName() string { return l.opts.Stream }

// Close waits for appends in flight, then releases the connection and, in
// embedded mode, the server (after joined processes leave, bounded by
// Options.Linger).
func (l *Log) Close() error {
	l.once.Do(func() {
		close(l.closed)
		if l.w != nil {
			l.w.stop() // its reads (heads, doubts) go on while it drains
		}
		_ = l.mark.stop() // the last mark, while reads still go
		close(l.drained)
		if l.blocks != nil {
			l.blocks.Close()
		}
		if l.ownConn {
			l.c.Close()
		}
	})
	return nil
}

// readsClosed reports whether reads are over: Close has begun and the
// writer has landed what was queued before it.
func (l *Log) readsClosed() bool { return isDone(l.drained) }

// isClosed reports whether Close has begun: appends are refused.
func (l *Log) isClosed() bool { return isDone(l.closed) }

// isDone reports whether ch is closed, without waiting.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
