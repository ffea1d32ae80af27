package log

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/records"
)

// DefaultStream is the name of the stream that holds the log.
const DefaultStream = "SPL"

// Options configures Open. The zero value opens the embedded log in
// DefaultDir() with fsync before every ack.
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

// DefaultDir is the data directory of the embedded log: $SPL_HOME, else
// ~/.spl ([env.Home]).
func DefaultDir() (string, error) { return env.Home() }

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
	switch {
	case o.Replicas < 1 || o.Replicas > 5:
		return fmt.Errorf("spl/log: options: Replicas: must be 1 to 5, got %d", o.Replicas)
	case o.MaxBatch < 1 || o.MaxBatch > 1000:
		return fmt.Errorf("spl/log: options: MaxBatch: must be 1 to 1000, got %d", o.MaxBatch)
	case o.URL == "" && o.Dir == "":
		d, err := DefaultDir()
		if err != nil {
			return err
		}
		o.Dir = d
	}
	return nil
}

// Log is the append-only record log on a JetStream stream. It is safe for
// concurrent use; all appends of a process go through one writer that
// gathers them into group commits.
type Log struct {
	opts    Options
	nc      *nats.Conn
	js      jetstream.JetStream
	emb     *embedded
	api     string   // direct get subject prefix of the stream
	multi   *replies // answers to pipelined and batched gets
	w       *writer
	blocks  *blockSyncer  // the embedded log's fsync, done by the writer; nil with URL or NoSync
	closed  chan struct{} // Close began: no more appends
	drained chan struct{} // the writer has drained its queue: no more reads
	once    sync.Once

	// lost is cancelled when the connection drops; a request in flight
	// then can no longer be answered. It is replaced by a fresh one.
	lostMu   sync.Mutex
	lost     context.Context
	loseConn context.CancelFunc

	metaMu sync.Mutex
	metaKV jetstream.KeyValue // the meta bucket, once bound

	// afterEraseAppend, when set (by tests), runs between an erasure's
	// append and its deletes; an error stops Erase there, as a crash would.
	afterEraseAppend func() error
}

// Open opens the log: the embedded server in opts.Dir (started in this
// process, or joined when another process on the same directory runs it),
// or the server at opts.URL. It creates the stream when missing and
// checks the settings the log depends on.
func Open(ctx context.Context, opts Options) (*Log, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	l := &Log{opts: opts, closed: make(chan struct{}), drained: make(chan struct{})}
	l.lost, l.loseConn = context.WithCancel(context.Background())
	var err error
	if opts.URL != "" {
		l.nc, err = nats.Connect(opts.URL, append([]nats.Option{nats.Name(opts.Name), nats.MaxReconnects(-1)}, opts.NATSOptions...)...)
		if err != nil {
			return nil, fmt.Errorf("spl/log: connect %s: %w", opts.URL, err)
		}
	} else {
		l.emb, err = newEmbedded(opts.Dir, opts.Linger)
		if err != nil {
			return nil, fmt.Errorf("spl/log: %w", err)
		}
		l.nc, err = l.emb.connect(ctx, opts.Name)
		if err != nil {
			l.emb.close()
			return nil, fmt.Errorf("spl/log: %w", err)
		}
	}
	l.watchConn()
	l.js, err = jetstream.New(l.nc)
	if err == nil {
		err = l.provision(ctx)
	}
	if err != nil {
		l.shutdown()
		return nil, err
	}
	l.api = "$JS.API.DIRECT.GET." + opts.Stream
	if l.multi, err = newReplies(l.nc); err != nil {
		l.shutdown()
		return nil, fmt.Errorf("spl/log: %w", err)
	}
	if l.emb != nil && !opts.NoSync {
		l.blocks = newBlockSyncer(opts.Dir, opts.Stream)
		if err := l.blocks.check(); err != nil {
			l.shutdown()
			return nil, fmt.Errorf("spl/log: %w", err)
		}
	}
	if l.w, err = newWriter(l); err != nil {
		l.shutdown()
		return nil, fmt.Errorf("spl/log: %w", err)
	}
	// Finish erasures a crashed process left half done.
	if err := l.finishErasures(ctx); err != nil {
		l.Close()
		return nil, fmt.Errorf("spl/log: finish pending erasures: %w", err)
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
// the log needs. It never turns on DenyDelete or DenyPurge: erasure needs
// both operations.
func (l *Log) provision(ctx context.Context) error {
	want := StreamConfig(l.opts.Stream, l.opts.Replicas)
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	s, err := l.js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := l.js.CreateStream(ctx, want); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("spl/log: create stream %s: %w", want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("spl/log: stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
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
	if _, err := l.js.UpdateStream(ctx, have); err != nil {
		return fmt.Errorf("spl/log: update stream %s: %w", want.Name, err)
	}
	return nil
}

// watchConn chains a disconnect handler onto the connection's own, so that
// requests in flight learn at once that their answer is lost.
func (l *Log) watchConn() {
	prev := l.nc.Opts.DisconnectedErrCB
	l.nc.SetDisconnectErrHandler(func(nc *nats.Conn, err error) {
		l.lostMu.Lock()
		l.loseConn()
		l.lost, l.loseConn = context.WithCancel(context.Background())
		l.lostMu.Unlock()
		if prev != nil {
			prev(nc, err)
		}
	})
}

// connLost returns a channel closed when the connection next drops.
func (l *Log) connLost() <-chan struct{} {
	l.lostMu.Lock()
	defer l.lostMu.Unlock()
	return l.lost.Done()
}

// untilLost returns a context that ends after timeout, or when the
// connection drops, whichever comes first. It costs no goroutine: it is on
// the path of every read and append.
func (l *Log) untilLost(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	l.lostMu.Lock()
	lost := l.lost
	l.lostMu.Unlock()
	stop := context.AfterFunc(lost, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// Conn is the log's NATS connection, for code at the edge (projections,
// servers) that needs JetStream beyond the log.
func (l *Log) Conn() *nats.Conn { return l.nc }

// JetStream is the log's JetStream handle.
func (l *Log) JetStream() jetstream.JetStream { return l.js }

// Embedded reports whether the log runs on the embedded server (started
// by this process or joined). There the log's writer fsyncs the log's
// blocks itself, and the server fsyncs no other stream: a write to one is
// durable only once the page cache is written back.
func (l *Log) Embedded() bool { return l.emb != nil }

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
		close(l.drained)
		if l.blocks != nil {
			l.blocks.close()
		}
		l.shutdown()
	})
	return nil
}

func (l *Log) shutdown() {
	if l.nc != nil {
		_ = l.nc.Drain()
		for l.nc.IsDraining() {
			time.Sleep(5 * time.Millisecond)
		}
		l.nc.Close()
	}
	if l.emb != nil {
		l.emb.close()
	}
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
