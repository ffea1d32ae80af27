package natsio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrClosed reports a call on a closed Conn.
var ErrClosed = errors.New("spl/natsio: closed")

// Options configures Dial.
type Options struct {
	// Dir is the data directory of the embedded server. Ignored with URL.
	Dir string
	// URL, when set, connects to a NATS server instead of the embedded one.
	URL string
	// NATSOptions are passed to nats.Connect (credentials, TLS, an
	// in-process server, ...).
	NATSOptions []nats.Option
	// Linger is how long Close keeps the embedded server up for other
	// processes that joined it.
	Linger time.Duration
	// Timeout bounds one request to the server.
	Timeout time.Duration
	// Name names the NATS connection.
	Name string
	// KeyFile is the key file the embedded server's store is encrypted at
	// rest with (package storekey); "" takes the one SPL_ENCRYPTION_KEY_FILE
	// names, if any. Every process on the directory needs it, since any of
	// them may run the server. Ignored with URL.
	KeyFile string
	// StoreDir, with URL, is the data directory of the in-process server
	// the URL reaches when that server runs without SyncAlways (spl serve
	// on one node): the log's writer and the blob store then fsync the
	// blocks they write themselves, as on the embedded server.
	StoreDir string
}

// Conn is one connection to the server that holds the log, with its
// JetStream handle and the one subscription for the answers of pipelined
// and batched requests. The layers of one client (its log, its read
// models) share it. It is safe for concurrent use.
type Conn struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Timeout time.Duration // bounds one request

	dir     string
	store   string // Options.StoreDir, with a URL
	emb     *embedded
	replies *replies

	// lost is cancelled when the connection drops; a request in flight
	// then can no longer be answered. It is replaced by a fresh one.
	lostMu   sync.Mutex
	lost     context.Context
	loseConn context.CancelFunc

	denied denials // publishes the server dropped (denied.go)

	once sync.Once
}

// Dial connects: to the embedded server in opts.Dir (started in this
// process, or joined when another process on the same directory runs it),
// or to the server at opts.URL.
func Dial(ctx context.Context, opts Options) (*Conn, error) {
	c := &Conn{Timeout: opts.Timeout, dir: opts.Dir}
	if opts.URL != "" {
		c.store = opts.StoreDir
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	c.lost, c.loseConn = context.WithCancel(context.Background())
	var err error
	if opts.URL != "" {
		c.NC, err = nats.Connect(opts.URL, append([]nats.Option{nats.Name(opts.Name), nats.MaxReconnects(-1)}, opts.NATSOptions...)...)
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", Redact(opts.URL), err)
		}
	} else {
		c.emb, err = newEmbedded(opts.Dir, opts.Linger, opts.KeyFile)
		if err != nil {
			return nil, err
		}
		c.NC, err = c.emb.connect(ctx, opts.Name)
		if err != nil {
			c.emb.close()
			return nil, err
		}
	}
	if c.emb != nil {
		c.emb.onRestart(c.AnswersLost) // when this process serves: see outofspace.go
	}
	c.watch()
	c.watchDenied()
	if c.JS, err = jetstream.New(c.NC); err == nil {
		c.replies, err = newReplies(c.NC)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Redact hides the credentials of a NATS URL (nats://user:pass@host or
// nats://token@host), so that an error or a log line never shows them.
func Redact(url string) string {
	scheme, rest, ok := cutScheme(url)
	if !ok {
		return url
	}
	at := -1
	for i := 0; i < len(rest) && rest[i] != '/'; i++ {
		if rest[i] == '@' {
			at = i
		}
	}
	if at < 0 {
		return url
	}
	return scheme + "***@" + rest[at+1:]
}

func cutScheme(url string) (scheme, rest string, ok bool) {
	for i := 0; i+2 < len(url); i++ {
		if url[i] == ':' && url[i+1] == '/' && url[i+2] == '/' {
			return url[:i+3], url[i+3:], true
		}
	}
	return "", url, false
}

// Embedded reports whether the connection is to the embedded server of a
// data directory (started by this process or joined).
func (c *Conn) Embedded() bool { return c.emb != nil }

// SelfSync reports whether the server fsyncs no message itself, so that
// writers make what they write durable (BlockSyncer): the embedded
// server, or an in-process one (Options.StoreDir).
func (c *Conn) SelfSync() bool { return c.emb != nil || c.store != "" }

// StoreDir is the data directory whose blocks writers fsync (SelfSync),
// or "".
func (c *Conn) StoreDir() string {
	if c.emb != nil {
		return c.dir
	}
	return c.store
}

// Serving reports whether this process runs the embedded server of the
// data directory (false when it joined another's, or with a URL).
func (c *Conn) Serving() bool { return c.emb != nil && c.emb.server() != nil }

// SetLinger changes how long Close keeps the embedded server up for the
// processes that joined it.
func (c *Conn) SetLinger(d time.Duration) {
	if c.emb != nil {
		c.emb.mu.Lock()
		c.emb.linger = d
		c.emb.mu.Unlock()
	}
}

// Dir is the data directory of the embedded server ("" with a URL).
func (c *Conn) Dir() string {
	if c.emb == nil {
		return ""
	}
	return c.dir
}

// watch chains a disconnect handler onto the connection's own, so that
// requests in flight learn at once that their answer is lost.
func (c *Conn) watch() {
	prev := c.NC.Opts.DisconnectedErrCB
	c.NC.SetDisconnectErrHandler(func(nc *nats.Conn, err error) {
		c.AnswersLost()
		if prev != nil {
			prev(nc, err)
		}
	})
}

// AnswersLost ends every request in flight as a dropped connection does
// (Lost, UntilLost): the server will never answer them, because it
// restarted the part of it that owed the answers (spl serve restarts its
// JetStream after the disk filled up). The connection itself stays up.
func (c *Conn) AnswersLost() {
	c.lostMu.Lock()
	c.loseConn()
	c.lost, c.loseConn = context.WithCancel(context.Background())
	c.lostMu.Unlock()
}

// Lost returns a channel closed when the connection next drops.
func (c *Conn) Lost() <-chan struct{} {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	return c.lost.Done()
}

// UntilLost returns a context that ends after timeout (none when timeout
// is 0: parent's alone), or when the connection drops, whichever comes
// first. It costs no goroutine: it is on the path of every read and
// append.
func (c *Conn) UntilLost(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, timeout)
	}
	c.lostMu.Lock()
	lost := c.lost
	c.lostMu.Unlock()
	stop := context.AfterFunc(lost, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// WithTimeout bounds ctx by the connection's Timeout unless it has a
// deadline of its own.
func (c *Conn) WithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.Timeout)
}

// Replies starts a read that expects about capacity answers, on the
// connection's one subscription for them.
func (c *Conn) Replies(capacity int) *Answers { return c.replies.open(capacity) }

// OwnReplies subscribes for the answers of one goroutine's rounds of at
// most capacity requests each, taken straight from the connection: one
// goroutine hand-off less than Replies, for a hot single-goroutine path
// (the log's writer).
func (c *Conn) OwnReplies(capacity int) (*Replies, error) {
	r, err := newOwnReplies(c.NC, capacity)
	if err != nil {
		return nil, err
	}
	return &Replies{r: r}, nil
}

// Replies is a subscription for answers that one goroutine owns.
type Replies struct{ r *replies }

// Open starts a round that expects about capacity answers.
func (r *Replies) Open(capacity int) *Answers { return r.r.open(capacity) }

// Close ends the subscription.
func (r *Replies) Close() { _ = r.r.sub.Unsubscribe() }

// Close drains the connection, then, for the embedded server, leaves it:
// the address is withdrawn, processes that joined get up to the linger
// time to finish, then the server stops. It is safe to call twice.
func (c *Conn) Close() {
	c.once.Do(func() {
		if c.NC != nil {
			_ = c.NC.Drain()
			for c.NC.IsDraining() {
				time.Sleep(5 * time.Millisecond)
			}
			c.NC.Close()
		}
		if c.emb != nil {
			c.emb.close()
		}
	})
}
