package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestConfigValidateHTTPLimits(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"negative read timeout", Config{Dir: "d", HTTPReadTimeout: -time.Second}, "HTTPReadTimeout"},
		{"write timeout under heartbeat", Config{Dir: "d", HTTPWriteTimeout: 10 * time.Second}, "HTTPWriteTimeout"},
		{"write timeout equal to heartbeat", Config{Dir: "d", Heartbeat: time.Second, HTTPWriteTimeout: time.Second}, "HTTPWriteTimeout"},
		{"negative idle timeout", Config{Dir: "d", HTTPIdleTimeout: -1}, "HTTPIdleTimeout"},
		{"negative max conns", Config{Dir: "d", HTTPMaxConns: -1}, "HTTPMaxConns"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, nil)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("New: err=%v, want a *ConfigError", err)
			}
			if got, want := ce.Field, tt.field; got != want {
				t.Fatalf("Field=%q, want %q (%v)", got, want, err)
			}
		})
	}
	cfg := Config{Dir: "d"}.withDefaults()
	if cfg.HTTPReadTimeout != DefaultHTTPReadTimeout || cfg.HTTPWriteTimeout != DefaultHTTPWriteTimeout ||
		cfg.HTTPIdleTimeout != DefaultHTTPIdleTimeout || cfg.HTTPMaxConns != DefaultHTTPMaxConns {
		t.Fatalf("defaults: %+v", cfg)
	}
}

// stall opens a connection to s that sends the headers of an emit and half
// its body, then nothing.
func stall(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, "POST /v1/records HTTP/1.1\r\nHost: spl\r\nContent-Type: application/json\r\nAuthorization: Bearer "+s.cfg.HTTPToken+"\r\n"+
		"Content-Length: 200\r\n\r\n"+`{"thread":"th","act":"DO",`)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return c
}

// A client that sends half a body and stalls is cut off after the read
// timeout, and learns why.
func TestSlowBodyCutOff(t *testing.T) {
	s := start(t, Config{HTTPReadTimeout: 500 * time.Millisecond})
	c := stall(t, s)
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, err := io.ReadAll(c) // until the server closes the connection
	if err != nil {
		t.Fatalf("read after %v: %v (the server did not close the stalled connection)", time.Since(start), err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cut off after %v, want about 500ms", d)
	}
	if !strings.HasPrefix(string(answer), "HTTP/1.1 400") {
		t.Fatalf("answer %q, want a 400", answer)
	}
}

// With HTTPMaxConns connections held by stalled writers, /healthz is
// answered at once, not after the read timeout: a writer over its share
// is refused, and health is answered whatever the shares hold.
func TestHealthAtConnLimit(t *testing.T) {
	const timeout = 10 * time.Second
	s := start(t, Config{HTTPReadTimeout: timeout, HTTPMaxConns: 2})
	stall(t, s)
	stall(t, s)
	time.Sleep(100 * time.Millisecond) // both accepted

	client := &http.Client{Timeout: 10 * time.Second, Transport: authTransport{&http.Transport{DisableKeepAlives: true}}}
	start := time.Now()
	var h healthJSON
	code, _ := callWith(t, client, "GET", base(s)+"/healthz", "", &h)
	d := time.Since(start)
	if code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("healthz: code %d, %+v", code, h)
	}
	if d > 2*time.Second {
		t.Fatalf("healthz answered after %v, want at once, not after the read timeout (%v)", d, timeout)
	}
	if open, _ := slotsOpen(s.slotLn); open > 2 {
		t.Fatalf("%d connections open, want at most HTTPMaxConns (2)", open)
	}
}

// An SSE tail lives past the read and write timeouts, which bound one
// request and one answer, and still gets records.
func TestTailOutlivesTimeouts(t *testing.T) {
	s := start(t, Config{Heartbeat: 100 * time.Millisecond, HTTPReadTimeout: 300 * time.Millisecond, HTTPWriteTimeout: 300 * time.Millisecond})
	b := base(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b+"/v1/threads/th/events", nil)
	resp, err := authClient.Do(req)
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	defer resp.Body.Close()
	events := readEvents(resp.Body, false)
	time.Sleep(time.Second) // past both timeouts
	if code := call(t, "POST", b+"/v1/records", emitBody("th", "DO", "agent.step", `{"step":1}`), nil); code != 201 {
		t.Fatalf("emit: code %d", code)
	}
	if ev := next(t, events, true); ev.event != "record" || !strings.Contains(ev.data, `"step":1`) {
		t.Fatalf("event %+v, want the record", ev)
	}
}

// The slot listener never holds more than its bound: at it, a new
// connection is taken by closing the one pending longest, and when every
// connection is classified it waits for one to close; Close ends that
// wait.
func TestSlotListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newSlotListener(inner, 1, nil)
	defer l.Close()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := l.Accept() // closes the first, pending
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = clients[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := clients[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read on the first connection: %v, want EOF (closed to make room)", err)
	}
	if open, _ := slotsOpen(l); open != 1 {
		t.Fatalf("%d connections open, want 1", open)
	}
	first.Close() // closed already: frees nothing more
	if open, _ := slotsOpen(l); open != 1 {
		t.Fatalf("%d connections open after closing the evicted one again, want 1", open)
	}
	// A classified connection is not closed to make room: Accept waits.
	if !slotOf(second).classify(classRead) {
		t.Fatal("classify: no room in an empty share")
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	select {
	case <-accepted:
		t.Fatalf("a connection was accepted while the bound was held by a classified one")
	case <-time.After(200 * time.Millisecond):
	}
	second.Close()
	second.Close() // a second Close frees nothing more
	var third net.Conn
	select {
	case c, ok := <-accepted:
		if !ok {
			t.Fatalf("third Accept failed")
		}
		third = c
	case <-time.After(5 * time.Second):
		t.Fatalf("the third connection was not accepted once the second closed")
	}
	defer third.Close()
	if !slotOf(third).classify(classWrite) {
		t.Fatal("classify: no room in an empty share")
	}
	// Close ends an Accept waiting for a connection to close.
	ended := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		ended <- err
	}()
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Close did not end an Accept waiting for a slot")
	}
}

// slotsOpen returns the connections l holds open, and how many of them
// are pending.
func slotsOpen(l *slotListener) (open, pending int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.pending.Len()
}

// A reader that stops reading while records keep coming is cut off, not
// kept (with the records held for it) forever, and resumes from the
// Last-Event-ID of the last record it took.
func TestTailCutsOffAStalledReader(t *testing.T) {
	s := start(t, Config{Heartbeat: 500 * time.Millisecond, HTTPWriteTimeout: time.Second})
	b := base(s)
	conn, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/threads/th_stall/events?from=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", s.cfg.HTTPToken)
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("tail: %q, %v", line, err)
	}
	gauge := func() string {
		for _, l := range strings.Split(scrape(t, s), "\n") {
			if strings.HasPrefix(l, "spl_sse_tails ") {
				return strings.TrimPrefix(l, "spl_sse_tails ")
			}
		}
		return ""
	}
	if g := gauge(); g != "1" {
		t.Fatalf("tails open: %s, want 1", g)
	}
	// It reads nothing more while 64 records of 64 KiB land.
	pad := strings.Repeat("x", 64<<10)
	for i := range 64 {
		if code := call(t, "POST", b+"/v1/records", emitBody("th_stall", "DO", "agent.step", fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, pad)), nil); code != 201 {
			t.Fatalf("emit %d: %d", i, code)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for gauge() != "0" {
		if time.Now().After(deadline) {
			t.Fatal("the stalled reader's tail is still open 20 s after it stopped reading")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Reconnecting with the last id it took resumes after it.
	req, _ := http.NewRequest("GET", b+"/v1/threads/th_stall/events", nil)
	req.Header.Set("Last-Event-ID", "10")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := authClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb := bufio.NewReader(resp.Body) // lines past a Scanner's 64 KiB
	for {
		line, err := rb.ReadString('\n')
		if err != nil {
			t.Fatalf("resumed tail: %v", err)
		}
		if strings.HasPrefix(line, "id: ") {
			if id := strings.TrimSpace(line[4:]); id != "11" {
				t.Fatalf("resumed tail starts at clock %s, want 11", id)
			}
			break
		}
	}
}

// GET /v1/events tails every thread, in clock order, and resumes from the
// Last-Event-ID a reconnecting client sends.
func TestTailAllThreads(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	for i, th := range []string{"th_a", "th_b", "th_a"} {
		if code := call(t, "POST", b+"/v1/records", emitBody(th, "DO", "agent.step", fmt.Sprintf(`{"i":%d}`, i)), nil); code != 201 {
			t.Fatalf("emit: %d", code)
		}
	}
	tail := func(h http.Header, q string) <-chan sseEvent {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", b+"/v1/events"+q, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := authClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /v1/events: %v %v", resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return readEvents(resp.Body, false)
	}
	ev := tail(nil, "?from=1")
	for i, want := range []string{`"thread":"th_a"`, `"thread":"th_b"`, `"thread":"th_a"`} {
		if e := next(t, ev, true); e.id != fmt.Sprint(i+1) || !strings.Contains(e.data, want) {
			t.Fatalf("event %d: %+v, want clock %d on %s", i, e, i+1, want)
		}
	}
	// A record appended now reaches the open tail.
	if code := call(t, "POST", b+"/v1/records", emitBody("th_c", "DO", "agent.step", `{}`), nil); code != 201 {
		t.Fatalf("emit: %d", code)
	}
	if e := next(t, ev, true); e.id != "4" || !strings.Contains(e.data, `"thread":"th_c"`) {
		t.Fatalf("live event: %+v", e)
	}
	if e := next(t, tail(http.Header{"Last-Event-ID": {"2"}}, ""), true); e.id != "3" {
		t.Fatalf("resumed after 2: %+v, want clock 3", e)
	}
}

// With IdleExit, the server says it is unused once no request was in
// flight for that long, and not while a client holds a tail open.
func TestIdleExit(t *testing.T) {
	s := start(t, Config{IdleExit: time.Second})
	b := base(s)
	// A tail in flight keeps it in use.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", b+"/v1/threads/th/events", nil)
	resp, err := authClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Idle():
		t.Fatal("idle with a tail open")
	case <-time.After(3 * time.Second):
	}
	cancel()
	resp.Body.Close()
	start := time.Now()
	select {
	case <-s.Idle():
	case <-time.After(15 * time.Second):
		t.Fatal("not idle 15 s after the last request ended")
	}
	if d := time.Since(start); d < time.Second/2 {
		t.Fatalf("idle %v after the last request, want about IdleExit (1s)", d)
	}
}
