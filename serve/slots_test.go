package serve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spl-dev/spl/wire"
)

// watchOpen samples the connections s holds open until the test ends,
// and fails it if they ever exceed HTTPMaxConns; the function it returns
// gives the most seen so far.
func watchOpen(t *testing.T, s *Server) func() int {
	t.Helper()
	var mu sync.Mutex
	most := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			open, _ := slotsOpen(s.slotLn)
			mu.Lock()
			most = max(most, open)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		if n := s.cfg.HTTPMaxConns; most > n {
			t.Errorf("%d connections open at once, over HTTPMaxConns (%d)", most, n)
		}
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

// stallWith opens a connection to s that sends head, then nothing; the
// test closes it when it ends.
func stallWith(t *testing.T, s *Server, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if head != "" {
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	return c
}

// stalledBody is a request with the token tok whose headers are whole and
// whose body stops half way.
func stalledBody(method, path, tok string) string {
	return method + " " + path + " HTTP/1.1\r\nHost: spl\r\nContent-Type: application/json\r\nAuthorization: Bearer " + tok + "\r\n" +
		"Content-Length: 200\r\n\r\n" + `{"thread":"th",`
}

// answeredSoon checks that /healthz and an append with the write token
// are both answered within limit, on fresh connections, and returns how
// long each took.
func answeredSoon(t *testing.T, s *Server, limit time.Duration) (health, write time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 15 * time.Second, Transport: authTransport{&http.Transport{DisableKeepAlives: true}}}
	begin := time.Now()
	var h healthJSON
	code, _ := callWith(t, client, "GET", base(s)+"/healthz", "", &h)
	health = time.Since(begin)
	if code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("healthz: code %d, %+v", code, h)
	}
	begin = time.Now()
	code, _ = callWith(t, client, "POST", base(s)+"/v1/records", emitBody("th_slots", "DO", "agent.step", `{"n":1}`), nil)
	write = time.Since(begin)
	if code != http.StatusCreated {
		t.Fatalf("append: code %d", code)
	}
	t.Logf("healthz answered in %v, the append in %v", health, write)
	if health > limit || write > limit {
		t.Fatalf("healthz took %v, the append %v, want both within %v", health, write, limit)
	}
	return health, write
}

// Three times HTTPMaxConns stalled connections, some that send nothing
// and some half a request line or header, do not keep /healthz and a
// writer waiting: the oldest of them are closed to serve the new ones.
func TestSlotsStalledConnections(t *testing.T) {
	const maxConns = 16
	s := start(t, Config{HTTPMaxConns: maxConns, HTTPReadTimeout: 30 * time.Second})
	most := watchOpen(t, s)
	for i := range 3 * maxConns {
		switch i % 3 {
		case 0:
			stallWith(t, s, "")
		case 1:
			stallWith(t, s, "G")
		default:
			stallWith(t, s, "GET /healthz HTTP/1.1\r\nHost: sp")
		}
	}
	time.Sleep(200 * time.Millisecond) // the server takes them in
	answeredSoon(t, s, 2*time.Second)
	t.Logf("at most %d connections open at once", most())
}

// fill opens connections that send head and stall until the share of k
// is full, each once the one before it holds its place (or 2 s passed).
func fill(t *testing.T, s *Server, k connClass, head string) {
	t.Helper()
	l := s.slotLn
	held := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.count[k]
	}
	for range 3 * l.caps[k] {
		n := held()
		if n == l.caps[k] {
			return
		}
		stallWith(t, s, head)
		for deadline := time.Now().Add(2 * time.Second); held() == n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	if n := held(); n != l.caps[k] {
		t.Fatalf("%s: %d connections held, could not fill its share (%d)", k, n, l.caps[k])
	}
}

// A flood of requests with the read token that stall in their bodies
// takes the read right's share of the connections, not the write
// token's, nor /healthz's; a request over the share is refused at once,
// naming the limit.
func TestSlotsReadFloodSparesWrites(t *testing.T) {
	const maxConns = 16
	s := start(t, Config{HTTPMaxConns: maxConns, HTTPReadTimeout: 30 * time.Second})
	most := watchOpen(t, s)
	fill(t, s, classRead, stalledBody("POST", "/v1/records", s.cfg.HTTPReadToken))
	for i := range 3 * maxConns {
		if i%2 == 0 {
			stallWith(t, s, stalledBody("POST", "/v1/records", s.cfg.HTTPReadToken))
		} else {
			stallWith(t, s, stalledBody("GET", fmt.Sprintf("/v1/threads/th%d/records", i), s.cfg.HTTPReadToken))
		}
	}
	time.Sleep(200 * time.Millisecond)
	answeredSoon(t, s, 2*time.Second)
	t.Logf("at most %d connections open at once", most())

	// One more is over the read right's share: answered 429 at once.
	c := stallWith(t, s, stalledBody("GET", "/v1/threads/th/records", s.cfg.HTTPReadToken))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("one more stalled reader: %v, want a 429", err)
	}
	defer resp.Body.Close()
	var e wire.Error
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("decode the refusal: %v", err)
	}
	share := slotCaps(maxConns)[classRead]
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(e.Error, fmt.Sprintf("all %d connections for the read right", share)) || e.Field != "Authorization" {
		t.Fatalf("refusal: %d %v %+v", resp.StatusCode, resp.Header, e)
	}
	if m := scrape(t, s); !strings.Contains(m, `spl_http_refused_total{reason="conn_limit"}`) {
		t.Errorf("conn_limit refusals not counted:\n%s", grepLines(m, "spl_http_refused_total"))
	}
}

// With every share held by stalled requests (the read and write rights,
// requests without credentials, health checks themselves) and the
// pending connections at their cap, /healthz is still answered.
func TestSlotsHealthWhenSharesFull(t *testing.T) {
	const maxConns = 16
	s := start(t, Config{HTTPMaxConns: maxConns, HTTPReadTimeout: 30 * time.Second})
	watchOpen(t, s)
	fill(t, s, classRead, stalledBody("POST", "/v1/records", s.cfg.HTTPReadToken))
	fill(t, s, classWrite, stalledBody("POST", "/v1/records", s.cfg.HTTPToken))
	fill(t, s, classNone, stalledBody("POST", "/v1/login", "nothing"))
	fill(t, s, classHealth, stalledBody("GET", "/healthz", ""))
	for i := range 2 * maxConns {
		if i%2 == 0 {
			stallWith(t, s, "GET /v1/threads HTTP/1.1\r\n")
		} else {
			stallWith(t, s, "")
		}
	}
	time.Sleep(200 * time.Millisecond)
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	begin := time.Now()
	var h healthJSON
	code, _ := callWith(t, client, "GET", base(s)+"/healthz", "", &h)
	if d := time.Since(begin); code != http.StatusOK || d > 2*time.Second {
		t.Fatalf("healthz: code %d after %v, want 200 within 2s", code, d)
	}
	s.slotLn.mu.Lock()
	count, caps := s.slotLn.count, s.slotLn.caps
	s.slotLn.mu.Unlock()
	for _, k := range []connClass{classRead, classWrite, classNone, classHealth} {
		if count[k] != caps[k] {
			t.Errorf("%s: %d connections, want its share still full (%d)", k, count[k], caps[k])
		}
	}
}

// Below 16 connections the shares may overlap; from there on they and
// the pending cap never add up to more than the bound, so that at the
// bound there is always a pending connection to close.
func TestSlotCaps(t *testing.T) {
	for n := 16; n <= 1<<16; n++ {
		caps := slotCaps(n)
		sum := 0
		for _, c := range caps {
			sum += c
		}
		if sum > n {
			t.Fatalf("HTTPMaxConns %d: caps %v add up to %d", n, caps, sum)
		}
	}
	if caps := slotCaps(DefaultHTTPMaxConns); caps[classPending] != 256 || caps[classRead] != 288 || caps[classHealth] != 48 {
		t.Fatalf("caps of %d: %v", DefaultHTTPMaxConns, caps)
	}
}
