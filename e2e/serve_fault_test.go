package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
)

// TestServeKill9 kills spl serve with SIGKILL while 4 writers append over
// TCP, 5 times. After each restart the writers carry on (retrying the
// record they were appending); at the end every acknowledged record is in
// the log exactly once and the whole log verifies.
func TestServeKill9(t *testing.T) {
	needFaults(t)
	if testing.Short() {
		t.Skip("fault test")
	}
	port := freePort(t)
	srv := newNode(t, "serve", "--home", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--request-timeout", "2s")
	srv.start()
	srv.wait(30 * time.Second)

	const writers = 4
	var as []*appender
	for w := range writers {
		as = append(as, newAppender(t, natsURL(port), fmt.Sprintf("kill9-w%d", w), 1))
	}
	total := func() int {
		n := 0
		for _, a := range as {
			n += a.acks()
		}
		return n
	}
	halt := startWriters(as)
	defer halt()

	deadline := time.Now().Add(50 * time.Second)
	for cycle := range 5 {
		before := total()
		waitFor(t, 10*time.Second, fmt.Sprintf("cycle %d: appends before the kill", cycle), func() bool { return total() >= before+40 })
		srv.kill()
		down := 100 * time.Millisecond
		if cycle == 2 {
			// Down for longer than the clients' timeout: appends fail
			// with an error, and are retried once the server is back.
			down = 4 * time.Second
		}
		time.Sleep(down)
		srv.start()
		srv.wait(30 * time.Second)
		after := total()
		waitFor(t, 15*time.Second, fmt.Sprintf("cycle %d: appends after the restart", cycle), func() bool { return total() >= after+40 })
		if time.Now().After(deadline) {
			t.Fatalf("cycle %d: over the time budget", cycle)
		}
	}
	halt()

	checker := newAppender(t, natsURL(port), "kill9-check", 1)
	l := checker.l
	for _, a := range as {
		a.check(t, l)
	}
	rep := verifyAll(t, l)
	if !rep.OK() {
		t.Fatalf("VerifyAll: corrupt %v, missing %v", rep.Corrupt, rep.Missing)
	}
	failed := 0
	for _, a := range as {
		failed += a.fails
	}
	t.Logf("acknowledged %d records over 5 kills (%d failed attempts retried, first: %v); verified %d", total(), failed, as[0].firstErr, rep.Checked)
	if failed == 0 {
		t.Fatalf("no append failed while the server was down for 4s")
	}
	// The server's projector catches up with everything acknowledged,
	// across the kills, with nothing corrupt.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := projections.New(ctx, checker.conn, l, projections.Index(), projections.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var st projections.Status
	waitFor(t, 20*time.Second, "projections caught up", func() bool {
		st, err = r.Status(ctx)
		return err == nil && st.Lag == 0 && st.Clock > 0
	})
	if st.Corrupt != 0 || st.Holder == "" {
		t.Fatalf("projection status after the kills: %+v", st)
	}
	threads, err := projections.NewReader(checker.conn, l).Threads(ctx, projections.ThreadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, th := range threads {
		if strings.HasPrefix(th.Thread, "kill9-w") {
			got += int(th.Records)
		}
	}
	// The index holds what the log holds: every acknowledged record, and
	// a record whose writer stopped before its retry learned it landed.
	inLog := 0
	for _, a := range as {
		for _, err := range l.Read(ctx, a.thread) {
			if err != nil {
				t.Fatal(err)
			}
			inLog++
		}
	}
	if got != inLog || inLog < total() {
		t.Fatalf("thread index counts %d records of the writers, the log holds %d, %d were acknowledged", got, inLog, total())
	}
	srv.stop(30 * time.Second)
}

// TestServeGarbage publishes garbage straight onto spl.rec.> with a raw
// NATS client holding the admin token, and sends bad requests to the HTTP API: the server refuses
// the requests (400, counted), serves the rest of the log, reports the
// garbage as corrupt where it meets it, and verify reports every piece.
func TestServeGarbage(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	port, home := freePort(t), t.TempDir()
	srv := newNode(t, "serve", "--home", home, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	srv.start()
	srv.wait(30 * time.Second)
	base := "http://" + srv.http
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	a := newAppender(t, natsURL(port), "good", 1)
	for range 3 {
		rec, _ := records.New(records.ActDo, "agent.step", "good", "did:sync:agent:fault", time.Now(), map[string]any{"n": 1})
		if _, err := a.l.Append(ctx, rec); err != nil {
			t.Fatalf("append: %v", err)
		}
	}

	// Only the admin right may publish to the log's subjects: the write
	// right writes through the door.
	nc, err := nats.Connect(natsURL(port), nats.Token(readSecret(t, filepath.Join(home, "admin-token"))))
	if err != nil {
		t.Fatalf("raw connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	// A stored record, to forge from.
	good, err := a.l.Head(ctx, "good")
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	goodData, _ := good.Record.Marshal()
	garbage := []*nats.Msg{
		{Subject: "spl.rec.junk.agent.step", Data: []byte("not cbor at all")},
		{Subject: "spl.rec.junk2.agent.step", Data: goodData, Header: nats.Header{log.HeaderID: []string{"bafynotanid"}}},
		{Subject: "spl.rec.elsewhere.agent.step", Data: goodData, Header: nats.Header{log.HeaderID: []string{good.ID.String()}}},
		{Subject: "spl.rec.short", Data: []byte{0xa0}},
	}
	for _, m := range garbage {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish garbage to %s: %v", m.Subject, err)
		}
	}
	// And some without waiting for an ack, as a careless client would.
	for i := range 20 {
		_ = nc.Publish(fmt.Sprintf("spl.rec.junk.k%d", i), []byte{0xff, byte(i)})
	}
	_ = nc.Flush()
	stream, err := js.Stream(ctx, log.DefaultStream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	waitFor(t, 10*time.Second, "garbage stored", func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == uint64(3+len(garbage)+20)
	})

	// Bad HTTP requests are refused with 400 and counted.
	for _, body := range []string{`{`, `[]`, `{"thread":"good","act":"nope","kind":"k","actor":"did:a:b","body":{}}`, `{"thread":"good","extra":1}`} {
		resp, err := authHTTP.Post(base+"/v1/records", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("post: %v", err)
		}
		resp.Body.Close()
		if got, want := resp.StatusCode, http.StatusBadRequest; got != want {
			t.Fatalf("bad request %s: code=%d, want %d", body, got, want)
		}
	}

	// The query of a poisoned thread answers, naming the corrupt message.
	var q struct {
		Records []json.RawMessage `json:"records"`
		Corrupt []struct {
			Clock  uint64 `json:"clock"`
			Reason string `json:"reason"`
		} `json:"corrupt"`
	}
	if code := getJSON(t, base+"/v1/threads/junk/records", &q); code != http.StatusOK {
		t.Fatalf("query junk: code=%d, want 200", code)
	}
	if got, want := len(q.Corrupt), 21; got != want {
		t.Fatalf("corrupt in junk=%d, want %d (%+v)", got, want, q.Corrupt)
	}
	var q2 struct {
		Records []json.RawMessage `json:"records"`
	}
	getJSON(t, base+"/v1/threads/good/records", &q2)
	if got, want := len(q2.Records), 3; got != want {
		t.Fatalf("good records=%d, want %d", got, want)
	}
	// Lists and appends to other threads are unaffected; health says the
	// newest record fails verification while it does, and is ok again
	// once a good record follows it.
	if code := getJSON(t, base+"/v1/threads", nil); code != http.StatusOK {
		t.Fatalf("threads: code=%d", code)
	}
	var h struct{ Status, Error string }
	if code := getJSON(t, base+"/healthz", &h); code != http.StatusServiceUnavailable || h.Status != "corrupt" {
		t.Fatalf("healthz with garbage newest: code=%d %+v, want 503 corrupt", code, h)
	}
	resp, err := authHTTP.Post(base+"/v1/records", "application/json", strings.NewReader(
		`{"thread":"good","act":"DO","kind":"agent.step","actor":"did:sync:agent:fault","body":{"n":2}}`))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusCreated; got != want {
		t.Fatalf("append after garbage: code=%d, want %d", got, want)
	}
	if code := getJSON(t, base+"/healthz", &h); code != http.StatusOK {
		t.Fatalf("healthz after a good record: code=%d %+v", code, h)
	}
	// Appending to a thread whose last message is garbage: the log refuses
	// (its head does not verify: 500, not the client's fault) or chains
	// past it; either way the server answers and stays up.
	resp, err = authHTTP.Post(base+"/v1/records", "application/json", strings.NewReader(
		`{"thread":"junk","act":"DO","kind":"agent.step","actor":"did:sync:agent:fault","body":{}}`))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("append to the poisoned thread: %d %s, want 201 or 500", resp.StatusCode, msg)
	}
	t.Logf("append to the poisoned thread: %d %s", resp.StatusCode, strings.TrimSpace(string(msg)))

	rep := verifyAll(t, a.l)
	if got, want := len(rep.Corrupt), len(garbage)+20; got != want {
		t.Fatalf("VerifyAll corrupt=%d, want %d: %+v", got, want, rep.Corrupt)
	}
	metrics := getText(t, base+"/metrics")
	for _, want := range []string{`spl_http_refused_total{reason="bad_json"} 3`, `spl_http_refused_total{reason="invalid"} 1`, `spl_corrupt_records_total{where="query"} 21`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	srv.stop(30 * time.Second)
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := authHTTP.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: decode: %v", url, err)
		}
	}
	return resp.StatusCode
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := authHTTP.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
