package sdk_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// stallProxy passes TCP connections through to a server until stall is
// called; from then on it reads what either side sends and passes nothing
// on, so that to the client the server has stopped answering.
type stallProxy struct {
	ln      net.Listener
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t *testing.T, addr string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln}
	go func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", addr)
			if err != nil {
				cc.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, cc, sc)
			p.mu.Unlock()
			go p.pipe(sc, cc)
			go p.pipe(cc, sc)
		}
	}()
	t.Cleanup(p.cut)
	return p
}

func (p *stallProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *stallProxy) stall() { p.stalled.Store(true) }

func (p *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stalled.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes the proxy and its connections: what it held back is lost.
func (p *stallProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// stallableClient connects a client to a fresh server through a
// stallProxy. The client does not reconnect: once the proxy is cut, its
// connection is closed for good.
func stallableClient(t *testing.T, opts ...sdk.Option) (*sdk.Client, *stallProxy, string) {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	proxy := newStallProxy(t, srv.Addr().String())
	opts = append([]sdk.Option{sdk.WithActor(actor), sdk.WithNATSOptions(nats.NoReconnect())}, opts...)
	c, err := sdk.Connect(ctxT(t), proxy.url(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { within(t, 30*time.Second, "Close", func() { c.Close() }) })
	return c, proxy, srv.ClientURL()
}

// within runs fn and fails the test if it has not returned after d.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s had not returned after %v", what, d)
	}
}

// While the server does not answer, the log's writer takes no more
// records and its queue fills up (4096, below the client's 8192). Then
// EmitAsync pushes back until the caller's context ends, Flush returns
// when its context ends although an EmitAsync waits for the log, and
// Close gives up after its timeout and reports each queued record that
// did not land, with the first failure and the timeout both testable.
func TestEmitAsyncFlushAndCloseWhenTheLogStalls(t *testing.T) {
	c, proxy, srvURL := stallableClient(t, sdk.WithCloseTimeout(200*time.Millisecond))
	ctx := ctxT(t)
	ev := sdk.Event{Act: records.ActKnow, Kind: "agent.step", Thread: "th_stall", Body: map[string]any{}}
	if _, err := c.Emit(ctx, ev); err != nil {
		t.Fatal(err)
	}
	proxy.stall()

	// Until the server answers again, nothing leaves the log's queue: an
	// EmitAsync that ignored its context would not return at all.
	accepted := 0
	var eerr error
	within(t, 30*time.Second, "EmitAsync with a full log queue", func() {
		for accepted < 8000 { // below the client's own queue of 8192
			ectx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, eerr = c.EmitAsync(ectx, ev)
			cancel()
			if eerr != nil {
				return
			}
			accepted++
		}
	})
	if !errors.Is(eerr, context.DeadlineExceeded) {
		t.Fatalf("EmitAsync after %d accepted: err=%v, want context.DeadlineExceeded", accepted, eerr)
	}

	waiting := make(chan error, 1)
	go func() {
		_, err := c.EmitAsync(context.Background(), ev)
		waiting <- err
	}()
	var ferr error
	within(t, 30*time.Second, "Flush while an EmitAsync waits for the log", func() {
		fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		ferr = c.Flush(fctx)
	})
	if !errors.Is(ferr, context.DeadlineExceeded) {
		t.Fatalf("Flush: err=%v, want context.DeadlineExceeded", ferr)
	}

	// Close gives up on the stalled records after its timeout. Only well
	// after that is the proxy cut, so that the record in flight fails
	// (the server never sees what the proxy held back): cut before, the
	// writer could fail every queued record on the closed connection
	// before the timeout, and Close would have none to report.
	cut := time.AfterFunc(800*time.Millisecond, proxy.cut)
	defer cut.Stop()
	var cerr error
	within(t, 30*time.Second, "Close", func() { cerr = c.Close() })
	var ue *sdk.UnlandedError
	if !errors.As(cerr, &ue) || ue.Count != accepted {
		t.Fatalf("Close: err=%v, want *UnlandedError counting the %d accepted records", cerr, accepted)
	}
	if !errors.Is(cerr, context.DeadlineExceeded) || ue.Timeout == nil {
		t.Fatalf("Close: err=%v, want its timeout (context.DeadlineExceeded) reported", cerr)
	}
	// The first record was sent and never answered: its outcome was in
	// doubt, which the timeout must not hide.
	if !errors.Is(cerr, splog.ErrInDoubt) || !errors.Is(ue.First, splog.ErrInDoubt) {
		t.Fatalf("Close: err=%v, want the first failure, log.ErrInDoubt, kept", cerr)
	}
	if err := <-waiting; !errors.Is(err, sdk.ErrClosed) {
		t.Fatalf("EmitAsync waiting for the log when Close began: err=%v, want ErrClosed", err)
	}

	c2, err := sdk.Connect(ctx, srvURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, want := len(count(t, c2, "th_stall")), 1; got != want {
		t.Fatalf("thread holds %d records, want %d (the one emitted before the stall)", got, want)
	}
}

// Every call on a closed Client fails with ErrClosed, whether the client
// or its log notices.
func TestCallsAfterCloseReportErrClosed(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	ev := sdk.Event{Act: records.ActKnow, Kind: "agent.step", Thread: "th_closed", Body: map[string]any{}}
	r, err := c.Emit(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	query := func() error {
		for _, err := range c.QueryThread(ctx, "th_closed") {
			return err
		}
		return nil
	}
	for name, call := range map[string]func() error{
		"Emit":        func() error { _, err := c.Emit(ctx, ev); return err },
		"EmitAsync":   func() error { _, err := c.EmitAsync(ctx, ev); return err },
		"QueryThread": query,
		"SaveCheckpoint": func() error {
			_, err := c.SaveCheckpoint(ctx, "th_closed", "", records.Checkpoint{Summary: "s", Learnings: []string{"l"}})
			return err
		},
		"LatestCheckpoint": func() error { _, err := c.LatestCheckpoint(ctx, "th_closed"); return err },
		"ListCheckpoints":  func() error { _, err := c.ListCheckpoints(ctx, "th_closed", 0); return err },
		"Record":           func() error { _, err := c.Record(ctx, r.ID, "th_closed"); return err },
		"Tombstones":       func() error { _, err := c.Tombstones(ctx, "th_closed"); return err },
		"Verify":           func() error { _, err := c.Verify(ctx, "th_closed"); return err },
		"Retention":        func() error { _, err := c.Retention(ctx); return err },
		"ApplyRetention":   func() error { _, err := c.ApplyRetention(ctx, ""); return err },
		"SetRetention": func() error {
			_, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_closed", KeepLast: 1})
			return err
		},
		"ClearRetention": func() error {
			_, err := c.ClearRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_closed"})
			return err
		},
		"Pin":     func() error { _, err := c.Pin(ctx, "th_closed", "", r.ID, ""); return err },
		"Erase":   func() error { _, err := c.Erase(ctx, "th_closed", "", []records.ID{r.ID}, "gone"); return err },
		"Threads": func() error { _, err := c.Threads(ctx, sdk.ThreadFilter{}); return err },
	} {
		if err := call(); !errors.Is(err, sdk.ErrClosed) {
			t.Errorf("%s after Close: err=%v, want ErrClosed", name, err)
		}
	}
}
