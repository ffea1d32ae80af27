package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

const actor = "did:sync:agent:test"

// start runs a server on loopback with free ports in a fresh directory,
// and shuts it down when the test ends.
func start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Listen, cfg.HTTP = "127.0.0.1:0", "127.0.0.1:0"
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if s.HTTPAddr() != "" && !s.cfg.InsecureNoAuth {
		testTokens.Store(s.HTTPAddr(), s.cfg.HTTPToken)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	select {
	case <-s.Ready():
	case <-time.After(30 * time.Second):
		t.Fatalf("log not ready within 30s")
	}
	return s
}

// call does one HTTP request and decodes the JSON answer into out (when
// not nil); it returns the status code.
func call(t testing.TB, method, u, body string, out any) int {
	t.Helper()
	code, _ := callWith(t, http.DefaultClient, method, u, body, out)
	return code
}

// noRedirect is a client that answers with a redirect rather than follow
// it.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// callWith is call through c, and returns the answer's header too.
func callWith(t testing.TB, c *http.Client, method, u, body string, out any) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return callReq(t, c, req, out)
}

// callReq sends req through c, with the write token of its server unless
// it has an Authorization header, and decodes the JSON answer into out
// (when not nil).
func callReq(t testing.TB, c *http.Client, req *http.Request, out any) (int, http.Header) {
	t.Helper()
	authorize(req)
	method, u := req.Method, req.URL.String()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, u, err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, u, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func base(s *Server) string { return "http://" + s.HTTPAddr() }

func emitBody(thread, act, kind, body string) string {
	return fmt.Sprintf(`{"thread":%q,"act":%q,"kind":%q,"actor":%q,"body":%s}`, thread, act, kind, actor, body)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no dir", Config{}, "Dir"},
		{"remote listen", Config{Dir: "d", Listen: "0.0.0.0:4222"}, "Listen"},
		{"remote http", Config{Dir: "d", HTTP: "10.0.0.1:80"}, "HTTP"},
		{"bad listen", Config{Dir: "d", Listen: "4222"}, "Listen"},
		{"cluster without listen", Config{Dir: "d", ClusterName: "c", ServerName: "n"}, "ClusterListen"},
		{"cluster without name", Config{Dir: "d", ClusterName: "c", ClusterListen: "127.0.0.1:6222"}, "ServerName"},
		{"routes without cluster", Config{Dir: "d", Routes: []string{"nats://127.0.0.1:6222"}}, "ClusterName"},
		{"bad route", Config{Dir: "d", ClusterName: "c", ServerName: "n", ClusterListen: "127.0.0.1:6222", Routes: []string{"127.0.0.1:6223"}}, "Routes[0]"},
		{"replicas alone", Config{Dir: "d", Replicas: 3}, "Replicas"},
		{"replicas too many", Config{Dir: "d", Replicas: 7}, "Replicas"},
		{"token and user", Config{Dir: "d", Token: "t", User: "u", Password: "p"}, "Token"},
		{"user without password", Config{Dir: "d", User: "u"}, "Password"},
		{"cert without key", Config{Dir: "d", TLSCert: "c.pem"}, "TLSKey"},
		{"bad nkey", Config{Dir: "d", NKeys: []string{"abc"}}, "NKeys[0]"},
	}
	for _, tt := range tests {
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
	if _, err := New(Config{Dir: "d", Listen: "0.0.0.0:4222", HTTP: "0.0.0.0:7475", AllowRemote: true}, nil); err != nil {
		t.Fatalf("New with AllowRemote: %v", err)
	}
	cfg := Config{Dir: "d", ClusterName: "c", ServerName: "n", ClusterListen: "127.0.0.1:6222"}.withDefaults()
	if got, want := cfg.Replicas, 3; got != want {
		t.Fatalf("Replicas in a cluster=%d, want %d", got, want)
	}
}

func TestAPI(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	const thread = "research/vector-db" // a '/' travels as %2F
	tp := url.PathEscape(thread)

	var got []wire.Record
	for i := range 5 {
		var r wire.Record
		if code := call(t, "POST", b+"/v1/records", emitBody(thread, "DO", "agent.step", fmt.Sprintf(`{"step":%d}`, i)), &r); code != http.StatusCreated {
			t.Fatalf("emit %d: code=%d, want 201", i, code)
		}
		got = append(got, r)
	}
	if got, want := got[1].Prev, got[0].ID; got == nil || *got != want {
		t.Fatalf("second record's prev=%v, want %s", got, want)
	}
	var cp wire.Checkpoint
	if code := call(t, "POST", b+"/v1/records", emitBody(thread, "LEARN", records.KindCheckpoint,
		`{"summary":"scanned","learnings":["grep is enough"],"next_steps":["refactor"]}`), &cp); code != http.StatusCreated {
		t.Fatalf("emit checkpoint: code=%d, want 201", code)
	}
	call(t, "POST", b+"/v1/records", emitBody("other", "KNOW", "agent.fact", `{}`), nil)

	t.Run("query", func(t *testing.T) {
		var q queryResponse
		if code := call(t, "GET", b+"/v1/threads/"+tp+"/records", "", &q); code != http.StatusOK {
			t.Fatalf("code=%d, want 200", code)
		}
		if got, want := len(q.Records), 6; got != want {
			t.Fatalf("records=%d, want %d", got, want)
		}
		if got, want := q.Records[0].ID, got[0].ID; got != want {
			t.Fatalf("first id=%s, want %s", got, want)
		}
		if got, want := string(q.Records[2].Body), `{"step":2}`; got != want {
			t.Fatalf("body=%s, want %s", got, want)
		}
		if q.Next != nil {
			t.Fatalf("next=%d, want null", *q.Next)
		}
	})
	t.Run("page", func(t *testing.T) {
		var q queryResponse
		call(t, "GET", b+"/v1/threads/"+tp+"/records?limit=2&kind=agent.step", "", &q)
		if got, want := len(q.Records), 2; got != want {
			t.Fatalf("records=%d, want %d", got, want)
		}
		if q.Next == nil {
			t.Fatalf("next=null, want the third record's clock")
		}
		var q2 queryResponse
		call(t, "GET", fmt.Sprintf("%s/v1/threads/%s/records?limit=10&kind=agent.step&from=%d", b, tp, *q.Next), "", &q2)
		if got, want := len(q2.Records), 3; got != want {
			t.Fatalf("second page records=%d, want %d", got, want)
		}
	})
	t.Run("last", func(t *testing.T) {
		var q queryResponse
		call(t, "GET", b+"/v1/threads/"+tp+"/records?last=2", "", &q)
		if got, want := len(q.Records), 2; got != want {
			t.Fatalf("records=%d, want %d", got, want)
		}
		if got, want := q.Records[1].ID, cp.ID; got != want {
			t.Fatalf("last id=%s, want %s", got, want)
		}
	})
	t.Run("checkpoint", func(t *testing.T) {
		var c wire.Checkpoint
		if code := call(t, "GET", b+"/v1/threads/"+tp+"/checkpoint", "", &c); code != http.StatusOK {
			t.Fatalf("code=%d, want 200", code)
		}
		if got, want := c.Summary, "scanned"; got != want {
			t.Fatalf("summary=%q, want %q", got, want)
		}
		if got, want := c.ID, cp.ID; got != want {
			t.Fatalf("id=%s, want %s", got, want)
		}
		var e wire.Error
		if code := call(t, "GET", b+"/v1/threads/other/checkpoint", "", &e); code != http.StatusNotFound {
			t.Fatalf("no checkpoint: code=%d, want 404 (%s)", code, e.Error)
		}
	})
	t.Run("threads", func(t *testing.T) {
		// No projector runs in this server: the request catches the
		// index up itself before it reads.
		var l threadsResponse
		if code := call(t, "GET", b+"/v1/threads", "", &l); code != http.StatusOK {
			t.Fatalf("code=%d, want 200", code)
		}
		if got, want := threadNames(l.Threads), "other research/vector-db"; got != want {
			t.Fatalf("threads=%s, want %s (newest activity first)", got, want)
		}
		if got, want := [3]uint64{l.Total, l.LogClock, l.AsOf}, [3]uint64{2, 7, 7}; got != want {
			t.Fatalf("total, log_clock, as_of=%v, want %v", got, want)
		}
		th := l.Threads[1]
		if got, want := [3]uint64{th.Records, th.Checkpoints, th.LastClock}, [3]uint64{6, 1, cp.Clock}; got != want {
			t.Fatalf("records, checkpoints, last_clock=%v, want %v", got, want)
		}
		if th.FirstID == nil || *th.FirstID != got[0].ID || th.LastID == nil || *th.LastID != cp.ID {
			t.Fatalf("first_id=%v last_id=%v, want %s and %s", th.FirstID, th.LastID, got[0].ID, cp.ID)
		}
		if got, want := [3]any{th.LastTime, th.LastTS, th.LastActor}, [3]any{cp.Time, cp.TS, actor}; got != want {
			t.Fatalf("last_time, last_ts, last_actor=%v, want %v", got, want)
		}
		if got, want := fmt.Sprint(th.Kinds, th.Actors), fmt.Sprintf("map[agent.session.checkpoint:1 agent.step:5] map[%s:6]", actor); got != want {
			t.Fatalf("kinds, actors=%s, want %s", got, want)
		}
	})
	t.Run("healthz", func(t *testing.T) {
		var h healthJSON
		if code := call(t, "GET", b+"/healthz", "", &h); code != http.StatusOK {
			t.Fatalf("code=%d, want 200", code)
		}
		if got, want := h.LastClock, uint64(7); got != want {
			t.Fatalf("last_clock=%d, want %d", got, want)
		}
	})
}

// TestRefused checks the error answers of requests refused before the
// log: each is JSON, as docs/http-api.yaml says every error answer is,
// even those of the router itself (no route, wrong method, a path it
// would redirect), with Allow on a 405 and on no other.
func TestRefused(t *testing.T) {
	s := start(t, Config{MaxBody: 64 << 10})
	b := base(s)
	tests := []struct {
		name, method, path, body string
		code                     int
		field, rule              string
	}{
		{"not json", "POST", "/v1/records", `{"thread":`, 400, "", "request must be one JSON object"},
		{"two objects", "POST", "/v1/records", `{} {}`, 400, "", "request must be one JSON object"},
		{"unknown field", "POST", "/v1/records", `{"thread":"t","colour":1}`, 400, "colour", "unknown field"},
		{"wrong type", "POST", "/v1/records", `{"thread":7}`, 400, "thread", "must be a string"},
		{"no body", "POST", "/v1/records", `{"thread":"t","act":"DO","kind":"k","actor":"` + actor + `"}`, 400, "body", "required: a JSON object"},
		{"body not object", "POST", "/v1/records", emitBody("t", "DO", "k", `[1]`), 400, "body", "must be a JSON object: got an array"},
		{"bad act", "POST", "/v1/records", emitBody("t", "do", "k", `{}`), 400, "act", ""},
		{"bad kind", "POST", "/v1/records", emitBody("t", "DO", "K!", `{}`), 400, "kind", ""},
		{"no thread", "POST", "/v1/records", emitBody("", "DO", "k", `{}`), 400, "thread", ""},
		{"bad checkpoint", "POST", "/v1/records", emitBody("t", "LEARN", records.KindCheckpoint, `{"summary":""}`), 400, "body.summary", ""},
		{"too large", "POST", "/v1/records", emitBody("t", "DO", "k", `{"x":"`+strings.Repeat("a", 70<<10)+`"}`), 413, "body", ""},
		{"bad last", "GET", "/v1/threads/t/records?last=x", "", 400, "last", ""},
		{"bad limit", "GET", "/v1/threads/t/records?limit=100000", "", 400, "limit", ""},
		{"bad from", "GET", "/v1/threads/t/events?from=-1", "", 400, "from", ""},
		{"from past int64", "GET", "/v1/threads/t/records?from=9223372036854775808", "", 400, "from", `must be an integer from 0 to 9223372036854775807, got "9223372036854775808"`},
		{"limit 0", "GET", "/v1/threads/t/records?limit=0", "", 400, "limit", `must be an integer from 1 to 10000, got "0"`},
		{"kind wildcard", "GET", "/v1/threads/t/records?kind=%3E", "", 400, "kind", ""},
		{"kind token wildcard", "GET", "/v1/threads/t/records?kind=agent.*", "", 400, "kind", ""},
		{"kind upper-case", "GET", "/v1/threads/t/records?kind=Agent.Step&last=5", "", 400, "kind", ""},
		{"act lower-case", "GET", "/v1/threads/t/records?act=do", "", 400, "act", ""},
		{"thread too long", "GET", "/v1/threads/" + strings.Repeat("a", 257) + "/records", "", 400, "thread", "must be 1-256 bytes of UTF-8, got 257 bytes"},
		{"thread control", "GET", "/v1/threads/a%01b/records", "", 400, "thread", ""},
		{"checkpoint thread", "GET", "/v1/threads/a%00b/checkpoint", "", 400, "thread", ""},
		{"threads limit", "GET", "/v1/threads?limit=10001", "", 400, "limit", `must be an integer from 0 to 10000, got "10001"`},
		{"threads empty actor", "GET", "/v1/threads?actor=", "", 400, "actor", "must not be empty when given"},
		{"threads kind wildcard", "GET", "/v1/threads?kind=agent.*", "", 400, "kind", ""},
		{"threads empty kind", "GET", "/v1/threads?kind=", "", 400, "kind", "must not be empty when given"},
		{"threads since not a time", "GET", "/v1/threads?since=7d", "", 400, "since", `must be an RFC 3339 time such as 2026-11-21T23:46:52Z, got "7d"`},
		{"threads since without zone", "GET", "/v1/threads?since=2026-11-21T23:46:52", "", 400, "since", ""},
		{"threads empty since", "GET", "/v1/threads?since=", "", 400, "since", "must not be empty when given"},
		{"unknown route", "GET", "/v1/nothing", "", 404, "", ""},
		{"empty thread", "GET", "/v1/threads//records", "", 404, "", ""},
		{"wrong method", "DELETE", "/v1/records", "", 405, "", ""},
		{"get on emit", "GET", "/v1/records", "", 405, "", ""},
		{"delete on records", "DELETE", "/v1/threads/t/records", "", 405, "", ""},
	}
	// The Allow header of the 405 answers, by test name.
	allow := map[string]string{
		"wrong method":      "POST",
		"get on emit":       "POST",
		"delete on records": "GET, HEAD",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e wire.Error
			code, h := callWith(t, noRedirect, tt.method, b+tt.path, tt.body, &e)
			if got, want := code, tt.code; got != want {
				t.Fatalf("code=%d, want %d (%+v)", got, want, e)
			}
			if got, want := h.Get("Content-Type"), "application/json"; got != want {
				t.Fatalf("Content-Type=%q, want %q", got, want)
			}
			if got, want := h.Get("Allow"), allow[tt.name]; got != want {
				t.Fatalf("Allow=%q, want %q", got, want)
			}
			if got, want := e.Field, tt.field; got != want {
				t.Fatalf("field=%q, want %q (%+v)", got, want, e)
			}
			if tt.rule != "" && e.Rule != tt.rule {
				t.Fatalf("rule=%q, want %q", e.Rule, tt.rule)
			}
			if e.Error == "" || (tt.field != "" && e.Rule == "") {
				t.Fatalf("error answer %+v lacks error or rule", e)
			}
		})
	}
	// Nothing refused reached the log.
	var h healthJSON
	call(t, "GET", b+"/healthz", "", &h)
	if got, want := h.LastClock, uint64(0); got != want {
		t.Fatalf("last_clock=%d, want %d", got, want)
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ id, event, data string }

// readEvents parses events (comments skipped, unless comments is set) from
// r onto a channel.
func readEvents(r io.Reader, comments bool) <-chan sseEvent {
	ch := make(chan sseEvent, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				if comments {
					ev.event = "comment" + line
				}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan sseEvent, skipComments bool) sseEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("tail ended")
			}
			if skipComments && strings.HasPrefix(ev.event, "comment") {
				continue
			}
			return ev
		case <-timeout:
			t.Fatalf("no event within 10s")
		}
	}
}

func TestTail(t *testing.T) {
	s := start(t, Config{Heartbeat: 200 * time.Millisecond})
	b := base(s)
	call(t, "POST", b+"/v1/records", emitBody("th", "DO", "agent.step", `{"step":0}`), nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b+"/v1/threads/th/events", nil)
	resp, err := authClient.Do(req)
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	defer resp.Body.Close()
	if got, want := resp.Header.Get("Content-Type"), "text/event-stream"; got != want {
		t.Fatalf("Content-Type=%q, want %q", got, want)
	}
	events := readEvents(resp.Body, true)

	// Appended after the answer started: delivered; the record before is not.
	var r wire.Record
	call(t, "POST", b+"/v1/records", emitBody("th", "DO", "agent.step", `{"step":1}`), &r)
	call(t, "POST", b+"/v1/records", emitBody("elsewhere", "DO", "agent.step", `{}`), nil)
	ev := next(t, events, true)
	if got, want := ev.event, "record"; got != want {
		t.Fatalf("event=%q, want %q", got, want)
	}
	if got, want := ev.id, fmt.Sprint(r.Clock); got != want {
		t.Fatalf("id=%s, want %s", got, want)
	}
	var got wire.Record
	if err := json.Unmarshal([]byte(ev.data), &got); err != nil {
		t.Fatalf("data: %v", err)
	}
	if got.ID != r.ID {
		t.Fatalf("record id=%s, want %s", got.ID, r.ID)
	}
	if ev := next(t, events, false); ev.event != "comment: heartbeat" {
		t.Fatalf("after the record: %+v, want a heartbeat", ev)
	}

	// A reconnecting client resumes after its Last-Event-ID.
	req2, _ := http.NewRequestWithContext(ctx, "GET", b+"/v1/threads/th/events", nil)
	req2.Header.Set("Last-Event-ID", "0")
	resp2, err := authClient.Do(req2)
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	defer resp2.Body.Close()
	events2 := readEvents(resp2.Body, false)
	for step := range 2 {
		var rj wire.Record
		ev := next(t, events2, true)
		_ = json.Unmarshal([]byte(ev.data), &rj)
		if got, want := string(rj.Body), fmt.Sprintf(`{"step":%d}`, step); got != want {
			t.Fatalf("resumed event %d body=%s, want %s", step, got, want)
		}
	}

	// Client disconnects end their tails.
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for s.m.tails != nil && gaugeValue(t, s, "spl_sse_tails") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("spl_sse_tails still %v after the clients left", gaugeValue(t, s, "spl_sse_tails"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gaugeValue reads one unlabelled metric from the server's registry.
func gaugeValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.Gauge != nil {
				return m.Gauge.GetValue()
			}
			return m.Counter.GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestMetrics(t *testing.T) {
	s := start(t, Config{})
	b := base(s)
	for i := range 3 {
		call(t, "POST", b+"/v1/records", emitBody("m", "DO", "agent.step", fmt.Sprintf(`{"i":%d}`, i)), nil)
	}
	call(t, "POST", b+"/v1/records", `nope`, nil)
	resp, err := authClient.Get(b + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	text := string(data)
	for _, want := range []string{
		`spl_appends_total{result="ok"} 3`,
		`spl_http_refused_total{reason="bad_json"} 1`,
		`spl_http_requests_total{code="201",route="POST /v1/records"} 3`,
		`spl_append_duration_seconds_count 3`,
		`spl_log_last_clock 3`,
		`spl_log_records 3`,
		`spl_log_ready 1`,
		`spl_log_batch_records_count 3`, // three lone appends: three commits
		`spl_log_batch_commit_seconds_count 3`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestShutdownKeepsAcknowledged shuts down while writers append over HTTP:
// every record acknowledged (201) is in the log afterwards, and the log
// verifies.
func TestShutdownKeepsAcknowledged(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Config{Dir: dir})
	b := base(s)
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := authClient.Post(b+"/v1/records", "application/json",
					strings.NewReader(emitBody(fmt.Sprintf("w%d", w), "DO", "agent.step", fmt.Sprintf(`{"i":%d}`, i))))
				if err != nil {
					return // the listener is closed
				}
				var r wire.Record
				_ = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated {
					mu.Lock()
					acked[r.ID] = true
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatalf("no append acknowledged before shutdown")
	}

	l, err := log.Open(context.Background(), log.Options{Dir: dir, Linger: time.Millisecond})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer l.Close()
	found := 0
	for w := range 4 {
		for e, err := range l.Read(context.Background(), fmt.Sprintf("w%d", w)) {
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if acked[e.ID.String()] {
				found++
			}
		}
	}
	if got, want := found, len(acked); got != want {
		t.Fatalf("acknowledged records found=%d, want %d", got, want)
	}
	rep, err := l.VerifyAll(context.Background(), nil)
	if err != nil || !rep.OK() {
		t.Fatalf("VerifyAll: ok=%v err=%v %+v", rep.OK(), err, rep)
	}
}

// TestClients reaches the server over NATS: the SDK with Connect, a raw
// client with the token, and an embedded log of the same directory, which
// joins the server instead of starting its own.
func TestClients(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Config{Dir: dir})
	ctx := context.Background()

	c, err := sdk.Connect(ctx, s.NATSURL(), sdk.WithActor(actor), sdk.WithNATSOptions(nats.Token(s.cfg.Token)))
	if err != nil {
		t.Fatalf("sdk.Connect: %v", err)
	}
	r, err := c.Emit(ctx, sdk.Event{Act: records.ActDo, Kind: "agent.step", Thread: "sdk", Body: map[string]any{"n": 1}})
	if err != nil {
		t.Fatalf("Emit: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	l, err := log.Open(ctx, log.Options{Dir: dir, Linger: time.Millisecond})
	if err != nil {
		t.Fatalf("embedded open on the served directory: %v", err)
	}
	e, err := l.Head(ctx, "sdk")
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if got, want := e.ID, r.ID; got != want {
		t.Fatalf("head=%s, want %s", got, want)
	}
	l.Close()

	var q queryResponse
	call(t, "GET", base(s)+"/v1/threads/sdk/records", "", &q)
	if got, want := len(q.Records), 1; got != want {
		t.Fatalf("records over HTTP=%d, want %d", got, want)
	}

	// A second server on the same directory is refused, naming the holder.
	_, err = func() (*Server, error) {
		s2, err := New(Config{Dir: dir, Listen: "127.0.0.1:0", NoHTTP: true}, nil)
		if err != nil {
			return nil, err
		}
		return s2, s2.Start(ctx)
	}()
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second server: err=%v, want the directory in use", err)
	}
}

func TestTokenAuth(t *testing.T) {
	s := start(t, Config{Token: "s3cret-token"})
	ctx := context.Background()
	if _, err := sdk.Connect(ctx, s.NATSURL()); err == nil {
		t.Fatalf("Connect without the token: err=nil, want refused")
	}
	c, err := sdk.Connect(ctx, s.NATSURL(), sdk.WithActor(actor), sdk.WithNATSOptions(nats.Token("s3cret-token")))
	if err != nil {
		t.Fatalf("Connect with the token: %v", err)
	}
	defer c.Close()
	if _, err := c.Emit(ctx, sdk.Event{Act: records.ActDo, Kind: "agent.step", Thread: "t", Body: map[string]any{}}); err != nil {
		t.Fatalf("Emit: %v", err)
	}
}

func TestUserAuth(t *testing.T) {
	s := start(t, Config{User: "agent", Password: "pw-123456"})
	c, err := sdk.Connect(context.Background(), s.NATSURL(), sdk.WithActor(actor), sdk.WithNATSOptions(nats.UserInfo("agent", "pw-123456")))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	var h healthJSON
	if code := call(t, "GET", base(s)+"/healthz", "", &h); code != http.StatusOK {
		t.Fatalf("healthz=%d (%+v), want 200: the server's own connection logs in", code, h)
	}
}

// TestAPIDocumented checks that docs/http-api.yaml documents every route.
func TestAPIDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/http-api.yaml")
	if err != nil {
		t.Fatalf("read the OpenAPI file: %v", err)
	}
	var documented []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "  /") && strings.HasSuffix(line, ":") {
			documented = append(documented, strings.TrimSuffix(strings.TrimSpace(line), ":"))
		}
	}
	routes := []string{"/v1/records", "/v1/records/batch", "/v1/threads", "/v1/threads/{thread}/records", "/v1/threads/{thread}/checkpoint", "/v1/threads/{thread}/events", "/v1/events",
		"/v1/threads/{thread}/checkpoints", "/v1/threads/{thread}/lineage", "/v1/threads/{thread}/diff",
		"/v1/threads/{thread}/fork", "/v1/threads/{thread}/pause", "/v1/threads/{thread}/resume", "/v1/sessions",
		"/v1/threads/{thread}/session", "/v1/threads/{thread}/prune", "/v1/runs", "/v1/runs/{run}", "/v1/runs/{run}/cancel", "/v1/runs/{run}/signal",
		"/v1/runs/{run}/open", "/v1/runs/{run}/checkpoints", "/v1/runs/{run}/effects", "/v1/runs/{run}/finish",
		"/v1/records/{id}", "/v1/threads/{thread}/erase", "/v1/threads/{thread}/pins", "/v1/retention", "/v1/checkpoints/latest",
		"/", "/v1/login",
		"/healthz", "/mcp", "/metrics"}
	if got, want := strings.Join(documented, " "), strings.Join(routes, " "); got != want {
		t.Fatalf("documented paths=%s, want %s", got, want)
	}
}
