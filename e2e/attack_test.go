package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/log"
)

// The attacks of issue 16, by a second user on the same machine (loopback
// only). Each must fail to get in. The tests that need a second Unix user
// run as root (they create it) and skip otherwise.

const adminPost = `{"thread":"th_a","act":"DO","kind":"agent.step","actor":"did:sync:agent:admin","body":{"n":1}}`

// The HTTP API: nothing without a token, no write with a read token.
func TestAttackHTTPWithoutCredentials(t *testing.T) {
	s := serveHome(t, newHome(t))
	for _, c := range []struct {
		method, path, token, body string
		want                      int
	}{
		{"GET", "/v1/threads", "", "", http.StatusUnauthorized},
		{"GET", "/v1/threads/th_a/records", "", "", http.StatusUnauthorized},
		{"GET", "/metrics", "", "", http.StatusUnauthorized},
		{"POST", "/v1/records", "", adminPost, http.StatusUnauthorized},
		{"POST", "/v1/records", "not-the-token", adminPost, http.StatusUnauthorized},
		{"POST", "/v1/records", s.readTok, adminPost, http.StatusForbidden},
		{"GET", "/v1/threads/th_a/records", s.readTok, "", http.StatusOK},
		{"POST", "/v1/records", s.writeTok, adminPost, http.StatusCreated},
	} {
		code, body := do(t, c.method, s.http+c.path, c.token, c.body)
		if code != c.want {
			t.Errorf("%s %s (token %t): %d %s, want %d", c.method, c.path, c.token != "", code, body, c.want)
		}
		if code == http.StatusForbidden && !strings.Contains(body, "write") {
			t.Errorf("403 does not name the missing right: %s", body)
		}
	}
	// Only the one written with the write token is there.
	code, body := do(t, "GET", s.http+"/v1/threads/th_a/records", s.readTok, "")
	if code != 200 || strings.Count(body, `"id"`) != 1 {
		t.Errorf("records after the attack: %d %s, want the one written with the write token", code, body)
	}
}

// The NATS listener of spl serve: no connection without credentials.
func TestAttackNATSWithoutCredentials(t *testing.T) {
	h := newHome(t)
	s := serveHome(t, h)
	if nc, err := nats.Connect(s.nats, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatalf("raw NATS connect without credentials: accepted, want refused")
	}
	nc, err := nats.Connect(s.nats, nats.Token(s.writeTok))
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	nc.Close()
	// The CLI reaches it with the token from a file, never on the command line.
	h.mustRun(t, nil, "--server", s.nats, "--token-file", filepath.Join(h.dir, "token"), "emit", "--thread", "th_n",
		"--act", "DO", "--kind", "agent.step", "--actor", "did:sync:agent:dev", "--body", `{"n":1}`)
	// A URL with a token inline is never printed back.
	r := h.run(t, nil, "--server", "nats://s3cr3t-t0ken@127.0.0.1:1", "--timeout", "1s", "session", "show", "th_n")
	if r.code == 0 || strings.Contains(r.stderr, "s3cr3t-t0ken") || !strings.Contains(r.stderr, "nats://***@127.0.0.1:1") {
		t.Fatalf("error with a token in the URL: exit %d, stderr %q; want it redacted to nats://***@127.0.0.1:1", r.code, r.stderr)
	}
}

// A pre-created data directory that others can write is refused, by the
// embedded log and by spl serve, saying how to fix it.
func TestAttackWorldWritableDir(t *testing.T) {
	h := newHome(t)
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(h.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	want := "chmod 700 " + h.dir
	for _, args := range [][]string{
		{"emit", "--thread", "th_w", "--act", "DO", "--kind", "agent.step", "--actor", "did:sync:agent:dev", "--body", "{}"},
		{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"},
	} {
		r := h.run(t, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("spl %s on a 0777 directory: exit %d, stderr %q; want refused with %q", args[0], r.code, r.stderr, want)
		}
	}
	if err := os.Chmod(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	h.mustRun(t, nil, "emit", "--thread", "th_w", "--act", "DO", "--kind", "agent.step", "--actor", "did:sync:agent:dev", "--body", "{}")
}

// attacker returns the credential of a second Unix user, created when
// missing; the test is skipped unless it runs as root.
func attacker(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as a second Unix user (useradd); skipped when not root")
	}
	const name = "spl-attacker"
	u, err := user.Lookup(name)
	if err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd %s: %v\n%s", name, err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// as runs a shell command as cred and returns its error and output.
func as(cred *syscall.Credential, script string) (string, error) {
	c := exec.Command("/bin/sh", "-c", script)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	c.Dir = "/"
	out, err := c.CombinedOutput()
	return string(out), err
}

// A second user cannot replace server.json in a directory spl made, nor
// read its token; in a directory others can write, where it can, spl
// refuses the directory before it reads server.json: the owner's token
// never reaches the second user's fake server.
func TestAttackReplacedServerJSON(t *testing.T) {
	cred := attacker(t)
	h := newHome(t)
	h.mustRun(t, nil, "emit", "--thread", "th_s", "--act", "DO", "--kind", "agent.step", "--actor", "did:sync:agent:dev", "--body", "{}")
	// The test's temporary directories are the victim's: let the
	// attacker reach the data directory's parent, as a home would be.
	for _, d := range []string{filepath.Dir(h.dir), filepath.Dir(filepath.Dir(h.dir))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := as(cred, fmt.Sprintf("echo '{}' > %s/server.json", h.dir)); err == nil {
		t.Fatalf("second user wrote server.json in the data directory: %s", out)
	}
	if out, err := as(cred, fmt.Sprintf("cat %s/token", h.dir)); err == nil {
		t.Fatalf("second user read the token: %s", out)
	}

	// A fake server that records what a client sends it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		defer close(got)
		c, err := ln.Accept()
		if err != nil {
			return // the listener closed: nobody connected
		}
		defer c.Close()
		fmt.Fprintf(c, "INFO {\"server_id\":\"fake\",\"version\":\"2.12.0\",\"proto\":1,\"auth_required\":true,\"max_payload\":1048576}\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- line
	}()

	// The pre-created world-writable directory: the attacker takes the
	// lock (so that the owner joins rather than serves) and points
	// server.json at the fake server.
	if err := os.Chmod(h.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	addr, _ := json.Marshal(map[string]any{"url": ln.Addr().String(), "pid": 1})
	holder := exec.Command("/bin/sh", "-c", fmt.Sprintf("rm -f %[1]s/lock && flock -x %[1]s/lock sh -c 'echo locked; sleep 30'", h.dir))
	holder.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("attacker could not take the lock: %q", line)
	}
	if o, err := as(cred, fmt.Sprintf("rm -f %[1]s/server.json; echo '%[2]s' > %[1]s/server.json", h.dir, addr)); err != nil {
		t.Fatalf("attacker could not write server.json in the 0777 directory: %v %s", err, o)
	}
	r := h.run(t, nil, "--timeout", "3s", "emit", "--thread", "th_s", "--act", "DO", "--kind", "agent.step", "--actor", "did:sync:agent:dev", "--body", "{}")
	// The command has exited: close the fake server and wait for its
	// goroutine, which reports a connection it took, or nothing.
	ln.Close()
	if line, ok := <-got; ok {
		if strings.Contains(line, readSecret(t, filepath.Join(h.dir, "token"))) {
			t.Fatalf("the owner's spl sent the directory's token to the second user's server: %q", line)
		}
		t.Fatalf("the owner's spl connected to the second user's server: %q", line)
	}
	if r.code == 0 || !strings.Contains(r.stderr, "chmod 700") {
		t.Fatalf("emit in a 0777 directory: exit %d, stderr %q; want refused with chmod 700", r.code, r.stderr)
	}
}

// A purged stream, and a deleted one that the server recreates empty, are
// loss: /healthz answers 503 "loss" and verify exits 4, naming the clocks.
func TestAttackPurgedStreamIsLoss(t *testing.T) {
	h := newHome(t)
	s := serveHome(t, h)
	for range 3 {
		if code, body := do(t, "POST", s.http+"/v1/records", s.writeTok, adminPost); code != http.StatusCreated {
			t.Fatalf("post: %d %s", code, body)
		}
	}
	// The mark reaches the log's last clock soon after the appends.
	waitFor(t, 10*time.Second, "high-water mark at clock 3", func() bool {
		b, err := os.ReadFile(filepath.Join(h.dir, "mark"))
		var m struct{ Clock uint64 }
		return err == nil && json.Unmarshal(b, &m) == nil && m.Clock == 3
	})

	// The attacker, holding the admin credentials (leaked, or a server run
	// with --insecure-no-auth; the write token may not), purges the
	// stream.
	nc, err := nats.Connect(s.nats, nats.Token(readSecret(t, filepath.Join(h.dir, "admin-token"))))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, log.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	var health struct{ Status string }
	code, body := do(t, "GET", s.http+"/healthz", "", "")
	_ = json.Unmarshal([]byte(body), &health)
	if code != http.StatusServiceUnavailable || health.Status != "loss" {
		t.Errorf("/healthz after a purge: %d %s, want 503 status loss", code, body)
	}

	// The admin token deletes it too, and spl recreates it empty when it
	// next opens the log.
	if err := js.DeleteStream(ctx, log.DefaultStream); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if code := s.stop(); code != 0 {
		t.Fatalf("spl serve exit %d; logs:\n%s", code, s.logs)
	}
	r := h.run(t, nil, "verify", "--all")
	if r.code != 4 || !strings.Contains(r.stdout+r.stderr, "loss") || !strings.Contains(r.stdout+r.stderr, "1–3") {
		t.Errorf("verify --all after the stream was deleted: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 4 naming the loss of clocks 1–3", r.code, r.stdout, r.stderr)
	}
	s2 := serveHome(t, h)
	code, body = do(t, "GET", s2.http+"/healthz", "", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"loss"`) {
		t.Errorf("/healthz on the recreated stream: %d %s, want 503 status loss", code, body)
	}
}
