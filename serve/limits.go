package serve

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The HTTP API's bounds on slow and many clients: the http.Server's read,
// write and idle timeouts (Config.HTTPReadTimeout, HTTPWriteTimeout,
// HTTPIdleTimeout), a listener that holds at most Config.HTTPMaxConns
// connections open, and streamDeadlines, which lets an SSE tail outlive
// the write timeout.
//
// /healthz shares the connection limit with every other route: which
// route a connection wants is only known once its request is read, and
// reading it means accepting it, which takes the descriptor the limit is
// there to save. Rather than a bypass, the timeouts guarantee turnover: a
// connection that stalls holds its slot for at most HTTPReadTimeout, an
// idle keep-alive one for at most HTTPIdleTimeout, so a health check
// waiting in the backlog is answered once one of them is cut off, and the
// log keeps its descriptors throughout.

// limitListener accepts at most cap(sem) connections at a time. At the
// limit it stops calling Accept, so that new connections wait in the
// kernel's backlog, holding no descriptor of this process, until an
// accepted one closes.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn frees its listener's slot when it is first closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
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
