package serve

import (
	"container/list"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spl-dev/spl/wire"
)

// The HTTP API's bounds on slow and many clients: the http.Server's read,
// write and idle timeouts (Config.HTTPReadTimeout, HTTPWriteTimeout,
// HTTPIdleTimeout); a listener that holds at most Config.HTTPMaxConns
// connections open, leaving the log and the embedded NATS server their
// file descriptors, and shares them out so that stalled clients cannot
// starve /healthz or the writers; and streamDeadlines, which lets an SSE
// tail outlive the write timeout.
//
// A connection is pending until its request's headers are read, and
// again while it idles between requests: nobody knows yet who it is. Once
// its request reaches a handler, it counts against the share of the
// credential it presents (the right of its token, certificate or login:
// none, read, write or admin; without authentication, the right the
// request needs), or of /healthz, until it idles or closes. Of the
// HTTPMaxConns connections (N):
//
//   - pending ones are at most N/4 (at least 1): accepting one more closes
//     the one pending longest, a client that sent nothing or half a request,
//     or a keep-alive connection idle the longest;
//   - the rest, N - N/4, are shared out: 3/8 each to the read and the
//     write right, 1/8 to requests without credentials (the page, logins,
//     and refusals), 1/16 each to the admin right and /healthz, each at
//     least 1;
//   - a request over its share is answered 429 at once (Retry-After: 1;
//     the connection is closed), rather than waiting: a flood with one
//     credential takes that credential's share, never another's;
//   - /healthz is answered whether its share is full or not: over it, the
//     connection stays pending.
//
// With the default N of 1024: 256 pending, 288 each for the read and
// the write right, 96 without credentials, 48 each for the admin right
// and /healthz. An SSE tail holds its right's share for as long as it
// lasts.
//
// So the listener never stops accepting, and a new health check or writer
// is read at once however many clients stall: a pending connection is
// closed only once N/4 newer ones arrived, and a client sends its headers
// as soon as it connects. The connections open never exceed N: at N, the
// next one is taken only by closing a pending one (between taking it and
// closing the other, the process holds one descriptor more, for a
// moment). With N under 16 the shares may add up to more than N - N/4;
// when classified connections then hold all N, the listener waits for one
// to close, new connections waiting in the kernel's backlog. The timeouts
// still bound each connection: a pending one holds on for at most
// ReadHeaderTimeout (HTTPReadTimeout, 10 s at most) or HTTPIdleTimeout, a
// request for HTTPReadTimeout and HTTPWriteTimeout, but for an SSE tail,
// which lives as long as its client reads.

// connClass is what a connection counts against: the pending connections,
// or the share of its request's right or route.
type connClass int

const (
	classPending connClass = iota
	classHealth            // GET /healthz
	classNone              // no valid credential: the page, logins, refusals
	classRead
	classWrite
	classAdmin
	numClasses
)

func (k connClass) String() string {
	switch k {
	case classPending:
		return "pending"
	case classHealth:
		return "/healthz"
	case classNone:
		return "no credential"
	case classRead:
		return "read right"
	case classWrite:
		return "write right"
	case classAdmin:
		return "admin right"
	}
	return "class " + strconv.Itoa(int(k))
}

// classOfRight is the class of a request with right r.
func classOfRight(r right) connClass {
	switch r {
	case rightRead:
		return classRead
	case rightWrite:
		return classWrite
	case rightAdmin:
		return classAdmin
	}
	return classNone
}

// slotListener holds at most max connections open, of which at most
// caps[classPending] pending and caps[k] of class k (the comment above).
type slotListener struct {
	net.Listener
	max     int
	caps    [numClasses]int
	evicted func() // called for each pending connection closed to make room

	mu      sync.Mutex
	open    int             // connections accepted and not closed, and one being accepted
	count   [numClasses]int // classified connections by class; pending ones are in pending
	pending list.List       // of *slotConn, the one pending longest first
	freed   chan struct{}   // a connection closed (1 buffered)
	done    chan struct{}   // closed by Close
	once    sync.Once
}

// slotCaps are the caps of max connections (the comment above).
func slotCaps(n int) [numClasses]int {
	var caps [numClasses]int
	caps[classPending] = max(1, n/4)
	rest := n - caps[classPending]
	caps[classHealth] = max(1, rest/16)
	caps[classAdmin] = max(1, rest/16)
	caps[classNone] = max(1, rest/8)
	caps[classRead] = max(1, rest*3/8)
	caps[classWrite] = max(1, rest*3/8)
	return caps
}

func newSlotListener(l net.Listener, n int, evicted func()) *slotListener {
	if evicted == nil {
		evicted = func() {}
	}
	return &slotListener{Listener: l, max: n, caps: slotCaps(n), evicted: evicted,
		freed: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept takes the next connection, then, at the bound or past the
// pending cap, closes the connection pending longest (the new one only
// when no other is pending). At the bound with none pending, it first
// waits for a connection to close.
func (l *slotListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		room := l.open < l.max || l.pending.Len() > 0
		l.mu.Unlock()
		if room {
			break
		}
		select {
		case <-l.freed:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &slotConn{Conn: c, l: l}
	var victims []*slotConn
	l.mu.Lock()
	l.open++
	sc.elem = l.pending.PushBack(sc)
	for l.open > l.max || l.pending.Len() > l.caps[classPending] {
		v := l.evictLocked()
		if v == nil {
			break
		}
		victims = append(victims, v)
	}
	l.mu.Unlock()
	for _, v := range victims {
		v.closeEvicted()
	}
	return sc, nil
}

// evictLocked takes the connection pending longest off the books, and
// returns it for the caller to close once l.mu is unlocked; nil when none
// is pending. l.mu is held.
func (l *slotListener) evictLocked() *slotConn {
	e := l.pending.Front()
	if e == nil {
		return nil
	}
	c := e.Value.(*slotConn)
	c.releaseLocked()
	return c
}

// Close closes the listener and ends an Accept waiting for a connection
// to close.
func (l *slotListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// slotConn is a connection of a slotListener, with the class it counts
// against.
type slotConn struct {
	net.Conn
	l *slotListener
	// Guarded by l.mu:
	class  connClass
	elem   *list.Element // in l.pending while class is classPending
	closed bool          // off the books: closed, or evicted
}

// Close closes the connection and frees its place.
func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.releaseLocked()
	c.l.mu.Unlock()
	return err
}

// closeEvicted closes a connection that evictLocked took off the books
// (nothing when c is nil). The server, whose read then fails, closes it
// again.
func (c *slotConn) closeEvicted() {
	if c == nil {
		return
	}
	c.l.evicted()
	_ = c.Conn.Close() // closing: its error tells nothing
}

// releaseLocked takes c off the books, once. l.mu is held.
func (c *slotConn) releaseLocked() {
	if c.closed {
		return
	}
	c.closed = true
	l := c.l
	if c.class == classPending {
		l.pending.Remove(c.elem)
		c.elem = nil
	} else {
		l.count[c.class]--
	}
	l.open--
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// classify counts c against class k for its request, and reports whether
// k's share had room; if not, c stays pending. A connection already
// closed is let through (its answer goes nowhere).
func (c *slotConn) classify(k connClass) bool {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed || c.class == k {
		return true
	}
	if l.count[k] >= l.caps[k] {
		return false
	}
	if c.class == classPending {
		l.pending.Remove(c.elem)
		c.elem = nil
	} else {
		l.count[c.class]--
	}
	l.count[k]++
	c.class = k
	return true
}

// idle makes c pending again: it waits for its next request.
func (c *slotConn) idle() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed || c.class == classPending {
		return
	}
	l.count[c.class]--
	c.class = classPending
	c.elem = l.pending.PushBack(c)
}

// slotOf is the slotConn under c (under TLS too), or nil.
func slotOf(c net.Conn) *slotConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, _ := c.(*slotConn)
	return sc
}

// slotKey is the context key of a request's slotConn.
type slotKey struct{}

// slotContext is the http.Server's ConnContext: it gives a connection's
// requests its slotConn.
func slotContext(ctx context.Context, c net.Conn) context.Context {
	if sc := slotOf(c); sc != nil {
		return context.WithValue(ctx, slotKey{}, sc)
	}
	return ctx
}

// slotState is the http.Server's ConnState: a connection that idles
// between requests is pending again.
func slotState(c net.Conn, st http.ConnState) {
	if st != http.StateIdle {
		return
	}
	if sc := slotOf(c); sc != nil {
		sc.idle()
	}
}

// classOf is the class a request counts against.
func (s *Server) classOf(r *http.Request) connClass {
	switch {
	case r.URL.Path == "/healthz":
		return classHealth
	case s.cfg.InsecureNoAuth:
		return classOfRight(needed(r)) // no credential tells clients apart
	case public(r):
		return classNone
	}
	c, _ := s.credential(r)
	return classOfRight(c.right)
}

// slots counts each request's connection against its class (classOf), and
// answers 429 at once for one over its share, except /healthz, which is
// answered anyway.
func (s *Server) slots(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(slotKey{}).(*slotConn)
		if c == nil {
			next.ServeHTTP(w, r)
			return
		}
		k := s.classOf(r)
		if c.classify(k) || k == classHealth {
			next.ServeHTTP(w, r)
			return
		}
		n := c.l.caps[k]
		s.logger.Warn("http refused: connection limit", "method", r.Method, "path", r.URL.Path, "class", k.String(), "limit", n, "remote", r.RemoteAddr)
		h := w.Header()
		secureHeaders(h)
		h.Set("Retry-After", "1")
		h.Set("Connection", "close")
		s.refuse(w, http.StatusTooManyRequests, "conn_limit", wire.Error{
			Error: fmt.Sprintf("too many connections: all %d connections for the %s are in use (of the server's %d); try again in a moment", n, k, c.l.max),
			Field: "Authorization", Rule: fmt.Sprintf("at most %d connections at once for the %s", n, k)})
	})
}

// streamDeadlines lets a streamed answer (Content-Type text/event-stream:
// the SSE tail) outlive the server's timeouts, which bound an answer as a
// whole: once the stream starts, its read deadline is cleared (net/http
// would otherwise end the request's context when it passes), and each
// write gets a write deadline of timeout from its start, so that a client
// that stops reading is still cut off.
func streamDeadlines(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&streamWriter{ResponseWriter: w, timeout: timeout}, r)
	})
}

// streamWriter is the ResponseWriter of streamDeadlines.
type streamWriter struct {
	http.ResponseWriter
	timeout time.Duration
	started bool // WriteHeader was called
	stream  bool // and the answer is a stream
}

func (w *streamWriter) WriteHeader(code int) {
	if !w.started {
		w.started = true
		ct := w.Header().Get("Content-Type")
		if w.stream = strings.HasPrefix(ct, "text/event-stream"); w.stream {
			// Best effort: a writer that cannot set deadlines has none.
			_ = http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Time{})
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *streamWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.stream {
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (SSE flushes).
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
