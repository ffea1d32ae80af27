package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// The fault tests of spl serve run the built spl binary's serve command in
// child processes, so that they can kill it with SIGKILL.

// freePort returns a loopback port that was free a moment ago and that
// no earlier call returned. It is drawn below the kernel's ephemeral
// range: a port from that range can be taken, between this call and the
// server's listen, as the local end of any outgoing connection (a
// cluster node dialling its peers took one, and the node whose client
// port it was could not start).
func freePort(t *testing.T) int {
	t.Helper()
	lo := ephemeralLow()
	const base = 10000
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := base + rand.IntN(lo-base)
		if portsGiven[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatalf("free port: none free in [%d, %d) after 1000 tries", base, lo)
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range
// (32768, Linux's default, where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 11000 {
		return 32768
	}
	return lo
}

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// node is one spl serve process.
type node struct {
	t       *testing.T
	name    string
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has exited and exitErr is set
	exitErr error
	ready   chan string // the HTTP address, once the log is open ("" without HTTP)
	stderr  *lockedBuffer
	http    string
}

// testToken is the NATS token, and HTTP write token, of the test
// servers: every node of a cluster requires the same one from clients.
const testToken = "e2e-test-token-0123456789abcdef"

// authHTTP is an HTTP client that sends testToken.
var authHTTP = &http.Client{Transport: bearer{testToken, http.DefaultTransport}}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// newNode is an spl serve process (not started) with args, the test token
// and, unless args say otherwise, an HTTP API on a free port.
func newNode(t *testing.T, name string, args ...string) *node {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"serve", "--log-format", "json", "--token-file", tokenFile}, args...)
	if !slices.Contains(args, "--no-http") && !slices.Contains(args, "--http") {
		args = append(args, "--http", "127.0.0.1:0")
	}
	n := &node{t: t, name: name, args: args}
	t.Cleanup(func() {
		if n.cmd != nil {
			n.kill()
		}
	})
	return n
}

// start starts the process; wait waits for it to be ready.
func (n *node) start() {
	n.t.Helper()
	n.cmd = exec.Command(splBin, n.args...)
	n.stderr = &lockedBuffer{}
	n.ready = make(chan string, 1)
	n.cmd.Stderr = io.MultiWriter(n.stderr, &readyWatch{ready: n.ready})
	if raceEnabled {
		n.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	}
	if err := n.cmd.Start(); err != nil {
		n.t.Fatalf("%s: start: %v", n.name, err)
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		n.exitErr = cmd.Wait()
		close(exited)
	}(n.cmd, n.exited)
}

// readyWatch reads spl serve's JSON log as it is written, and sends on
// ready the HTTP address once the log is open ("log open"): the one of
// the "http listening" line before it, empty without an HTTP API.
type readyWatch struct {
	ready chan string
	buf   []byte
	http  string
}

func (r *readyWatch) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(r.buf[:i], &line) == nil {
			switch line.Msg {
			case "http listening":
				r.http = line.Addr
			case "log open":
				select {
				case r.ready <- r.http:
				default:
				}
			}
		}
		r.buf = r.buf[i+1:]
	}
}

// wait waits for the log to be open; a process that exits first fails
// the test at once, with its stderr.
func (n *node) wait(timeout time.Duration) {
	n.t.Helper()
	select {
	case n.http = <-n.ready:
	case <-n.exited:
		n.t.Fatalf("%s: exited before it was ready (%v); stderr:\n%s", n.name, n.exitErr, n.stderr)
	case <-time.After(timeout):
		n.t.Fatalf("%s: not ready within %v; stderr:\n%s", n.name, timeout, n.stderr)
	}
}

// kill sends SIGKILL and reaps the process.
func (n *node) kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
}

// stop sends SIGTERM and waits for a clean exit.
func (n *node) stop(timeout time.Duration) {
	n.t.Helper()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		n.cmd = nil
		if n.exitErr != nil {
			n.t.Fatalf("%s: exit after SIGTERM: %v; stderr:\n%s", n.name, n.exitErr, n.stderr)
		}
	case <-time.After(timeout):
		n.kill()
		n.t.Fatalf("%s: still running %v after SIGTERM", n.name, timeout)
	}
}

// appender appends numbered records to its own thread through its own
// connection, retrying each record (the same *records.Record, so that a
// retry of an append that landed is recognised) until it is acknowledged,
// and remembers every acknowledged id.
type appender struct {
	thread   string
	conn     *natsio.Conn // for what the tests inspect behind the log
	l        *log.Log
	mu       sync.Mutex
	acked    map[records.ID]int // id → sequence number n
	count    int
	fails    int
	firstErr error
}

// retryDuplicates says that log/ may still store a retried record twice
// after a crash or failover; check then logs duplicates instead of failing.
// Known, not yet fixed: since writes of NATS clients go through spl
// serve's door (log/door.go), a record whose answer was lost when a
// cluster's stream leader died was, rarely, stored twice: in CI runs of
// TestServeClusterFailover and TestServeClusterFailoverTime under -race,
// one record of about 2,000, in about one run of three (kill -9 of spl
// serve, TestServeKill9, has not shown it since the doubt is settled from
// the stream leader). One path was found and closed: a first send that
// reached a node late, after the client had sent the record again through
// another node where it landed, was sealed on top of its own copy; the
// writer now answers it with the copy (TestDoorSameRecordOnTwoNodes, which
// fails without it). Whether that was the path of the duplicates seen is
// not known: 24 runs of the two tests on a quiet machine showed none
// before the fix either. A duplicate is now logged with both copies'
// clocks and prevs, which tells that path (the second chained on the
// first) from any other.
//
// Both copies are chained, so verify passes. Set to false once log/ is
// fixed: a duplicate then fails the tests. A lost acknowledged record
// always fails them.
const retryDuplicates = true

func newAppender(t *testing.T, url, thread string, replicas int) *appender {
	t.Helper()
	return newAppenderTimeout(t, url, thread, replicas, 2*time.Second)
}

// newAppenderTimeout is newAppender with a request timeout of its own
// (the connection's and the log's).
func newAppenderTimeout(t *testing.T, url, thread string, replicas int, timeout time.Duration) *appender {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := natsio.Dial(ctx, natsio.Options{URL: url, Timeout: timeout, Name: thread, NATSOptions: []nats.Option{nats.Token(testToken)}})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	l, err := log.On(ctx, conn, log.Options{Replicas: replicas, Timeout: timeout})
	if err != nil {
		conn.Close()
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() {
		l.Close()
		conn.Close()
	})
	return &appender{thread: thread, conn: conn, l: l, acked: make(map[records.ID]int)}
}

// share is another appender on a's connection and log, for thread: a
// second caller of the same writer (its appends share group commits).
func (a *appender) share(thread string) *appender {
	return &appender{thread: thread, conn: a.conn, l: a.l, acked: map[records.ID]int{}}
}

// startWriters runs every appender until the returned halt is called (it
// waits for them; calling it again does nothing). The caller defers it.
func startWriters(as []*appender) (halt func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, a := range as {
		wg.Go(func() { a.run(stop, 1_000_000) })
	}
	return sync.OnceFunc(func() { close(stop); wg.Wait() })
}

// run appends until stop is closed or max records are acknowledged.
func (a *appender) run(stop <-chan struct{}, max int) {
	for n := 0; n < max; n++ {
		rec, err := records.New(records.ActDo, "agent.step", a.thread, "did:sync:agent:fault", time.Now(), map[string]any{"n": n})
		if err != nil {
			panic(err)
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			e, err := a.append(rec)
			if err == nil {
				a.mu.Lock()
				a.acked[e.ID] = n
				a.count++
				a.mu.Unlock()
				break
			}
			a.mu.Lock()
			a.fails++
			if a.firstErr == nil {
				a.firstErr = err
			}
			a.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// append is log.Append bounded by 3 s, except that when the caller's time
// is up it still waits (up to 30 s) for the writer to finish with the
// record before answering: log.Pending.Wait returns on ctx before the
// writer has settled the append, and a retry while the writer still
// holds the first attempt can store the record twice. Once the writer is
// done, the outcome is landed, failed, or ErrInDoubt (the case a retry of
// the same record is meant to resolve).
func (a *appender) append(rec *records.Record) (log.Entry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p, err := a.l.Submit(ctx, rec)
	if err != nil {
		return log.Entry{}, err
	}
	e, err := p.Wait(ctx)
	if err == nil {
		return e, nil
	}
	select {
	case <-p.Done():
		return p.Wait(context.Background())
	case <-time.After(30 * time.Second):
		return log.Entry{}, fmt.Errorf("writer still holds the append after 30s: %w", err)
	}
}

func (a *appender) acks() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// check reads the appender's thread through l: every acknowledged record
// is there, and no sequence number is there twice (no retry duplicated a
// record).
//
// A replica answers a direct get too and may be a moment behind the
// leader that acknowledged the last appends: while an acknowledged record
// is not in what l reads, it reads again, for up to 10 s, before calling
// it missing.
func (a *appender) check(t *testing.T, l *log.Log) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		missing := a.read(t, l, false)
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	a.read(t, l, true)
}

// read reads a's thread through l and returns how many acknowledged
// records it lacks; when report is set, it fails t for those and for any
// record stored twice.
func (a *appender) read(t *testing.T, l *log.Log, report bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[records.ID]bool{}
	byN := map[int64]int{}
	firstOf := map[int64]log.Entry{} // the first copy of each n
	for e, err := range l.Read(ctx, a.thread) {
		if err != nil {
			t.Fatalf("%s: read: %v", a.thread, err)
		}
		seen[e.ID] = true
		var body struct {
			N int64 `cbor:"n"`
		}
		if err := e.Record.DecodeBody(&body); err != nil {
			t.Fatalf("%s: body at clock %d: %v", a.thread, e.Clock, err)
		}
		byN[body.N]++
		if byN[body.N] == 1 {
			firstOf[body.N] = e
		}
		if byN[body.N] > 1 && report {
			first := firstOf[body.N]
			a.mu.Lock()
			n, acked := a.acked[e.ID]
			_, firstAcked := a.acked[first.ID]
			a.mu.Unlock()
			report := t.Errorf
			if retryDuplicates {
				report = t.Logf
			}
			report("%s: record n=%d stored twice: first at clock %d (id %s, prev %s, acknowledged: %v), second at clock %d (id %s, prev %s, acknowledged: %v %d)",
				a.thread, body.N, first.Clock, first.ID, first.Record.Header.Prev, firstAcked, e.Clock, e.ID, e.Record.Header.Prev, acked, n)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	missing := 0
	for id, n := range a.acked {
		if !seen[id] {
			missing++
			if report {
				t.Fatalf("%s: acknowledged record n=%d (%s) is missing", a.thread, n, id)
			}
		}
	}
	return missing
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func verifyAll(t *testing.T, l *log.Log) log.VerifyReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := l.VerifyAll(ctx, nil)
	if err != nil {
		t.Fatalf("VerifyAll: %v", err)
	}
	return rep
}

func natsURL(port int) string { return fmt.Sprintf("nats://127.0.0.1:%d", port) }
