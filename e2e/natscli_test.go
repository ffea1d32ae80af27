package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// natsCLI is the stock nats CLI (github.com/nats-io/natscli): $SPL_NATS_CLI,
// else nats on PATH. .ci/run installs it; without it the test skips,
// saying so.
func natsCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SPL_NATS_CLI"); p != "" {
		return p
	}
	p, err := exec.LookPath("nats")
	if err != nil {
		t.Skip("the nats CLI is not installed (go install github.com/nats-io/natscli/nats@v0.5.0, or set SPL_NATS_CLI); .ci/run installs it")
	}
	return p
}

// A hostile holder of the write token, or of the read token, armed with
// the stock nats CLI against spl serve: every act below the service layer
// is refused — purging the log or a thread, editing the stream to keep
// fewer records or to source another, creating a stream or a consumer,
// deleting a message, publishing bytes that are no record (or a record
// past the rules) into the log, putting a value into a read model — and
// afterwards the log verifies with nothing lost. Writes through the door
// (the CLI with --server) still work with the write token.
func TestNATSCLIAttacks(t *testing.T) {
	cli := natsCLI(t)
	h := newHome(t)
	s := serveHome(t, h)
	h.env = append(h.env, "SPL_TOKEN_FILE="+filepath.Join(h.dir, "token"))
	for i := range 3 {
		h.mustRun(t, nil, "--server", s.nats, "emit", "--thread", "th_target", "--act", "SAY", "--kind", "note.text",
			"--body", `{"n":`+string(rune('0'+i))+`}`, "--actor", "did:sync:agent:dev")
	}
	// The read models' buckets exist once the server's projector ran.
	h.mustRun(t, nil, "--server", s.nats, "thread", "list")
	nats := func(token string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, cli, append([]string{"--server", s.nats, "--token", token, "--timeout", "1s"}, args...)...)
		c.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
		out, err := c.CombinedOutput()
		return string(out), err
	}
	buckets := func() []string {
		out, err := nats(readSecret(t, filepath.Join(h.dir, "admin-token")), "kv", "ls", "--names")
		if err != nil {
			t.Fatalf("admin: kv ls: %v\n%s", err, out)
		}
		return strings.Fields(out)
	}()
	if len(buckets) == 0 {
		t.Fatal("no read-model bucket to attack")
	}
	tail := h.mustRun(t, nil, "--server", s.nats, "thread", "tail", "th_target", "--json")
	var recs []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(tail.stdout), &recs); err != nil || len(recs) != 3 {
		t.Fatalf("thread tail --json: %v\n%s", err, tail.stdout)
	}
	attacks := [][]string{
		{"stream", "purge", "SPL", "-f"},
		{"stream", "purge", "SPL", "--subject", "spl.rec.>", "-f"},
		{"stream", "edit", "SPL", "--max-msgs", "1", "-f"},
		{"stream", "edit", "SPL", "--max-age", "1s", "-f"},
		{"stream", "add", "EVIL", "--source", "SPL", "--defaults"},
		{"stream", "add", "EVIL2", "--subjects", "evil.>", "--defaults"},
		{"stream", "rm", "SPL", "-f"},
		{"stream", "rmm", "SPL", "1", "-f"},
		{"consumer", "add", "SPL", "evil", "--pull", "--defaults"},
		{"req", "spl.rec.dGhfdGFyZ2V0.agent.step", "not cbor"},
		{"pub", "spl.rec.dGhfdGFyZ2V0.agent.step", "not cbor", "--jetstream"},
	}
	for _, b := range buckets {
		attacks = append(attacks, []string{"kv", "put", b, "evil", "x"}, []string{"kv", "purge", b, "evil", "-f"}, []string{"kv", "rm", b, "-f"})
	}
	for _, who := range []struct{ name, token string }{
		{"write token", s.writeTok},
		{"read token", s.readTok},
	} {
		for _, a := range attacks {
			// The CLI reports a publish the server dropped, and may
			// still exit 0 (nats req): the server's word counts.
			if out, err := nats(who.token, a...); err == nil && !strings.Contains(out, "Permissions Violation") {
				t.Errorf("%s: nats %s: allowed:\n%s", who.name, strings.Join(a, " "), out)
			}
		}
	}
	// Nothing lost, nothing added, nothing changed: every record verifies,
	// the stream keeps its settings, and the server says it is healthy.
	v := h.mustRun(t, nil, "--server", s.nats, "verify", "--all")
	if !strings.Contains(v.stdout, "ok") {
		t.Fatalf("verify --all after the attacks:\n%s", v.stdout)
	}
	tail = h.mustRun(t, nil, "--server", s.nats, "thread", "tail", "th_target", "--json")
	if err := json.Unmarshal([]byte(tail.stdout), &recs); err != nil || len(recs) != 3 {
		t.Fatalf("after the attacks, th_target holds: %v\n%s", err, tail.stdout)
	}
	if code, body := do(t, "GET", s.http+"/healthz", "", ""); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("healthz after the attacks: %d %s", code, body)
	}
	info, err := nats(readSecret(t, filepath.Join(h.dir, "admin-token")), "stream", "info", "SPL", "--json")
	if err != nil {
		t.Fatalf("admin: stream info: %v\n%s", err, info)
	}
	var si struct {
		Config struct {
			MaxMsgs int64 `json:"max_msgs"`
			Sources []any `json:"sources"`
		} `json:"config"`
		State struct {
			Msgs uint64 `json:"messages"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(info), &si); err != nil {
		t.Fatalf("stream info: %v\n%s", err, info)
	}
	if si.Config.MaxMsgs > 0 || len(si.Config.Sources) > 0 || si.State.Msgs != 3 {
		t.Fatalf("stream after the attacks: %+v, want no limit, no source, 3 messages", si)
	}
	// The door still takes the write token's records.
	h.mustRun(t, nil, "--server", s.nats, "emit", "--thread", "th_target", "--act", "SAY", "--kind", "note.text",
		"--body", `{"n":9}`, "--actor", "did:sync:agent:dev")
}

// An administrator who deletes the log's stream with the stock nats CLI
// and recreates it with the very same settings leaves spl serve on a
// stream that lost every acknowledged record: appends over HTTP and over
// the door are refused naming the loss (before, they were acknowledged
// on the new stream as if nothing had happened), /healthz says loss, and
// reads of what the new stream holds go on.
func TestRecreatedStreamRefusesAppends(t *testing.T) {
	cli := natsCLI(t)
	h := newHome(t)
	s := serveHome(t, h)
	h.env = append(h.env, "SPL_TOKEN_FILE="+filepath.Join(h.dir, "token"))
	emit := func(n int) result {
		return h.run(t, nil, "--server", s.nats, "emit", "--thread", "th_before", "--act", "SAY", "--kind", "note.text",
			"--body", fmt.Sprintf(`{"n":%d}`, n), "--actor", "did:sync:agent:dev")
	}
	for i := range 3 {
		if r := emit(i); r.code != 0 {
			t.Fatalf("emit %d: exit %d: %s", i, r.code, r.stderr)
		}
	}
	admin := readSecret(t, filepath.Join(h.dir, "admin-token"))
	nats := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, cli, append([]string{"--server", s.nats, "--token", admin, "--timeout", "5s"}, args...)...)
		c.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("admin: nats %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var info struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal([]byte(nats("stream", "info", "SPL", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "spl.json")
	if err := os.WriteFile(cfg, info.Config, 0o600); err != nil {
		t.Fatal(err)
	}
	nats("stream", "rm", "SPL", "-f")
	nats("stream", "add", "SPL", "--config", cfg)

	post := func() (int, string) {
		return do(t, "POST", s.http+"/v1/records", s.writeTok, `{"thread":"th_after","act":"SAY","kind":"note.text","actor":"did:sync:agent:dev","body":{}}`)
	}
	code, body := post()
	if code == http.StatusCreated || !strings.Contains(body, "appends refused") || !strings.Contains(body, "loss") {
		t.Fatalf("the first append to the recreated stream: %d %s; want it refused, naming the loss", code, body)
	}
	if code, body = post(); code == http.StatusCreated || !strings.Contains(body, "appends refused") {
		t.Fatalf("a second append: %d %s; want it refused", code, body)
	}
	if r := emit(3); r.code != 4 || !strings.Contains(r.stderr, "appends refused") {
		t.Fatalf("emit over the door: exit %d: %s; want exit 4, appends refused", r.code, r.stderr)
	}
	if code, body := do(t, "GET", s.http+"/healthz", "", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, `"status":"loss"`) {
		t.Fatalf("healthz on the recreated stream: %d %s; want 503 loss", code, body)
	}
	// The new stream holds the one append that showed the loss, and
	// reads of it work.
	if r := h.run(t, nil, "--server", s.nats, "thread", "tail", "th_after", "--json"); r.code != 0 || strings.Count(r.stdout, `"id"`) != 1 {
		t.Fatalf("thread tail of the recreated stream: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A message that is no record, published by an administrator with the
// stock nats CLI onto a thread's checkpoint subject, is erased by its
// clock with spl erase --clock over the door (the write token), and the
// whole log verifies again.
func TestEraseGarbageByClockOverTheDoor(t *testing.T) {
	cli := natsCLI(t)
	h := newHome(t)
	s := serveHome(t, h)
	h.env = append(h.env, "SPL_TOKEN_FILE="+filepath.Join(h.dir, "token"), "SPL_ACTOR=did:sync:agent:dev")
	save := func(summary string) {
		t.Helper()
		h.mustRun(t, nil, "--server", s.nats, "session", "save", "--thread", "th_g", "--summary", summary, "--learnings", "l")
	}
	save("one")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := exec.CommandContext(ctx, cli, "--server", s.nats, "--token", readSecret(t, filepath.Join(h.dir, "admin-token")),
		"pub", "spl.rec.th_g.agent.session.checkpoint", "not a record", "--jetstream")
	pub.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	if out, err := pub.CombinedOutput(); err != nil {
		t.Fatalf("admin: nats pub: %v\n%s", err, out)
	}
	save("two")
	if r := h.run(t, nil, "--server", s.nats, "verify", "--all"); r.code != 4 || !strings.Contains(r.stdout, "corrupt  1") {
		t.Fatalf("verify --all with the garbage: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := h.run(t, nil, "--server", s.nats, "erase", "--clock", "1", "--thread", "th_g", "--reason", "x"); r.code != 1 || !strings.Contains(r.stderr, "erase it by its id") {
		t.Fatalf("erase --clock of a record: exit %d: %s; want exit 1, erase it by its id", r.code, r.stderr)
	}
	r := h.mustRun(t, nil, "--server", s.nats, "erase", "--clock", "2", "--thread", "th_g", "--reason", "garbage published by hand")
	if !strings.Contains(r.stdout, "erased: the message at clock 2") {
		t.Fatalf("erase --clock 2:\n%s", r.stdout)
	}
	v := h.mustRun(t, nil, "--server", s.nats, "verify", "--all")
	if !strings.Contains(v.stdout, "ok") {
		t.Fatalf("verify --all after the erasure:\n%s", v.stdout)
	}
	if l := h.mustRun(t, nil, "--server", s.nats, "session", "list", "--thread", "th_g"); strings.Contains(l.stderr, "skipped") {
		t.Fatalf("session list still skips: %s", l.stderr)
	}
}
