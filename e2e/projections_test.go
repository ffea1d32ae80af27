package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// threadEntry is an element of "thread list --json" (docs/cli.md).
type threadEntry struct {
	Thread      string            `json:"thread"`
	Records     uint64            `json:"records"`
	Checkpoints uint64            `json:"checkpoints"`
	LastClock   uint64            `json:"last_clock"`
	LastActor   string            `json:"last_actor"`
	Kinds       map[string]uint64 `json:"kinds"`
}

// latestEntry is an element of "session list --json" without --thread.
type latestEntry struct {
	Thread  string `json:"thread"`
	ID      string `json:"id"`
	Clock   uint64 `json:"clock"`
	Actor   string `json:"actor"`
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

// statusEntry is an element of "projections status --json".
type statusEntry struct {
	Name      string `json:"name"`
	Position  uint64 `json:"position"`
	LogClock  uint64 `json:"log_clock"`
	Lag       uint64 `json:"lag"`
	Corrupt   uint64 `json:"corrupt"`
	Holder    string `json:"holder"`
	RebuildTo uint64 `json:"rebuild_to"`
}

func (h *home) emit(t *testing.T, thread, kind, actor string) receipt {
	t.Helper()
	return decode[receipt](t, h.mustRun(t, nil, "emit", "--thread", thread, "--act", "DO", "--kind", kind,
		"--body", `{"step":1}`, "--actor", actor, "--json").stdout)
}

func (h *home) threads(t *testing.T, args ...string) string {
	t.Helper()
	ts := decode[[]threadEntry](t, h.mustRun(t, nil, append([]string{"thread", "list", "--json"}, args...)...).stdout)
	names := make([]string, len(ts))
	for i, th := range ts {
		names[i] = th.Thread
	}
	return strings.Join(names, " ")
}

func (h *home) status(t *testing.T, args ...string) statusEntry {
	t.Helper()
	ss := decode[[]statusEntry](t, h.mustRun(t, nil, append(args, "projections", "status", "--json")...).stdout)
	if len(ss) != 1 || ss[0].Name != "index" {
		t.Fatalf("projections status: %+v, want the index projection only", ss)
	}
	return ss[0]
}

// appendOld appends a record stamped 3 days ago, which the CLI cannot
// write, through the log package on the data directory.
func appendOld(t *testing.T, dir, thread string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := splog.Open(ctx, splog.Options{Dir: dir, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := records.New(records.ActDo, "agent.step", thread, seedActor, time.Now().Add(-72*time.Hour), map[string]any{"step": 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, r); err != nil {
		t.Fatal(err)
	}
}

func TestThreadListFilters(t *testing.T) {
	h := newHome(t)
	const reviewer = "did:sync:agent:reviewer"
	appendOld(t, h.dir, "th_old")
	h.emit(t, "th_a", "agent.step", seedActor)
	h.save(t, "th_b", "b saved by the reviewer", "--actor", reviewer)
	h.emit(t, "th_c", "agent.note", seedActor)
	last := h.emit(t, "th_a", "agent.step", seedActor)

	all := decode[[]threadEntry](t, h.mustRun(t, nil, "thread", "list", "--json").stdout)
	if len(all) != 4 || all[0].Thread != "th_a" || all[0].Records != 2 || all[0].LastClock != last.Clock ||
		all[0].Kinds["agent.step"] != 2 || all[2].Thread != "th_b" || all[2].Checkpoints != 1 || all[2].LastActor != reviewer {
		t.Fatalf("thread list: %+v", all)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "th_a th_c th_b th_old"}, // newest activity first
		{[]string{"--actor", reviewer}, "th_b"},
		{[]string{"--kind", "agent.note"}, "th_c"},
		{[]string{"--since", "1h"}, "th_a th_c th_b"},
		{[]string{"--since", "5d"}, "th_a th_c th_b th_old"},
		{[]string{"--kind", "agent.step", "--since", "1d"}, "th_a"},
		{[]string{"--limit", "2"}, "th_a th_c"},
		{[]string{"--actor", seedActor, "--limit", "3"}, "th_a th_c th_old"},
	} {
		if got := h.threads(t, tc.args...); got != tc.want {
			t.Errorf("thread list %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	text := h.mustRun(t, nil, "thread", "list", "-n", "1").stdout
	if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "LAST ACTIVE") || !strings.Contains(lines[1], "th_a") || !strings.Contains(lines[1], "agent.step 2") {
		t.Fatalf("thread list -n 1:\n%s", text)
	}
	r := h.run(t, nil, "thread", "list", "--since", "a week")
	if r.code != 1 || !strings.Contains(r.stderr, "--since") {
		t.Fatalf("--since 'a week': exit %d, stderr %q; want 1 naming --since", r.code, r.stderr)
	}
}

func TestSessionListAcrossThreadsPaged(t *testing.T) {
	h := newHome(t)
	const reviewer = "did:sync:agent:reviewer"
	for i := range 5 {
		h.save(t, fmt.Sprintf("th_%d", i), fmt.Sprintf("first of %d", i))
	}
	h.emit(t, "th_steps", "agent.step", seedActor) // no checkpoint
	newest := h.save(t, "th_1", "second of 1", "--actor", reviewer, "--name", "v2")

	page := func(args ...string) []latestEntry {
		return decode[[]latestEntry](t, h.mustRun(t, nil, append([]string{"session", "list", "--json"}, args...)...).stdout)
	}
	var got []string
	for _, args := range [][]string{{"-n", "2"}, {"-n", "2", "--offset", "2"}, {"-n", "2", "--offset", "4"}} {
		for _, cp := range page(args...) {
			got = append(got, cp.Thread+"="+cp.Summary)
		}
		got = append(got, "|")
	}
	if want := "th_1=second of 1 th_4=first of 4 | th_3=first of 3 th_2=first of 2 | th_0=first of 0 |"; strings.Join(got, " ") != want {
		t.Fatalf("pages: %q, want %q", strings.Join(got, " "), want)
	}
	first := page("-n", "1")[0]
	if first.ID != newest.ID || first.Clock != newest.Clock || first.Actor != reviewer || first.Name != "v2" {
		t.Fatalf("newest: %+v, want %+v by %s named v2", first, newest, reviewer)
	}
	if mine := page("--actor", reviewer); len(mine) != 1 || mine[0].Thread != "th_1" {
		t.Fatalf("--actor %s: %+v", reviewer, mine)
	}
	if all := page("-n", "0"); len(all) != 5 {
		t.Fatalf("-n 0: %d checkpoints, want 5", len(all))
	}
	text := h.mustRun(t, nil, "session", "list", "-n", "1").stdout
	if !strings.Contains(text, "THREAD") || !strings.Contains(text, "th_1") || !strings.Contains(text, "second of 1") {
		t.Fatalf("session list -n 1:\n%s", text)
	}
}

// A follower started as a process prints what another process appends,
// as it lands, an erasure as a tombstone line, and exits 0 on SIGINT.
func TestThreadTailFollow(t *testing.T) {
	h := newHome(t)
	first := h.emit(t, "th_f", "agent.step", seedActor)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, _, _ := h.cmd(ctx, nil, "--timeout", "1s", "thread", "tail", "th_f", "--follow")
	var stdout, stderr lockedBuffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill() }()
	shows := func(what, s string) {
		t.Helper()
		waitFor(t, 5*time.Second, what+" on the follower's stdout", func() bool { return strings.Contains(stdout.String(), s) })
	}
	shows("the tail", first.ID[len(first.ID)-12:])

	time.Sleep(1200 * time.Millisecond) // past --timeout, which bounds the first read only
	began := time.Now()
	second := h.emit(t, "th_f", "agent.step", seedActor)
	h.emit(t, "th_other", "agent.note", seedActor)
	shows("the new record", second.ID[len(second.ID)-12:])
	t.Logf("a record emitted by another process was shown %v after the emit began", time.Since(began).Round(time.Millisecond))
	out := h.mustRun(t, nil, "erase", second.ID, "--thread", "th_f", "--reason", "followed then erased", "--actor", seedActor).stdout
	erasure := idLine.FindStringSubmatch(out)[1]
	shows("the tombstone", "[erased by "+erasure[len(erasure)-12:])

	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("follower on SIGINT: %v; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	want := []string{"CLOCK", first.ID[len(first.ID)-12:], second.ID[len(second.ID)-12:], "core.erasure", "followed then erased]"}
	if len(lines) != len(want) {
		t.Fatalf("follower printed %d lines, want %d:\n%s", len(lines), len(want), stdout.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d %q lacks %q", i, lines[i], w)
		}
	}
	if !strings.HasPrefix(lines[4], fmt.Sprint(second.Clock)+" ") {
		t.Errorf("tombstone line %q does not start with the erased record's clock %d", lines[4], second.Clock)
	}
	if s := stderr.String(); s != "" {
		t.Errorf("follower's stderr: %q", s)
	}
}

func TestProjectionsStatusAndRebuild(t *testing.T) {
	h := newHome(t)
	for i := range 6 {
		h.emit(t, fmt.Sprintf("th_%d", i%3), "agent.step", seedActor)
	}
	cp := h.save(t, "th_0", "checkpoint")
	victim := h.save(t, "th_1", "erased")
	h.mustRun(t, nil, "erase", victim.ID, "--thread", "th_1", "--reason", "r", "--actor", seedActor)

	if s := h.status(t); s.Lag == 0 || s.Holder != "" || s.LogClock <= cp.Clock {
		t.Fatalf("status before any read: %+v, want a lag and no holder (no spl serve runs it)", s)
	}
	threads := h.mustRun(t, nil, "thread", "list", "--json").stdout // catches the projection up
	sessions := h.mustRun(t, nil, "session", "list", "--json").stdout
	before := h.status(t)
	if before.Lag != 0 || before.Position != before.LogClock || before.Corrupt != 0 || before.RebuildTo != 0 {
		t.Fatalf("status after a read: %+v, want lag 0 at the log's clock", before)
	}

	r := h.mustRun(t, nil, "projections", "rebuild")
	if got, want := r.stdout, fmt.Sprintf("rebuilt index: up to clock %d\n", before.LogClock); got != want {
		t.Fatalf("rebuild printed %q, want %q", got, want)
	}
	// stderr is a pipe, not a terminal: plain progress lines, no bar.
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if strings.Contains(r.stderr, "\r") || lines[len(lines)-1] != fmt.Sprintf("rebuild index: %d/%d records", before.LogClock, before.LogClock) {
		t.Fatalf("rebuild progress on a pipe:\n%q", r.stderr)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "rebuild index: ") || !strings.HasSuffix(l, " records") {
			t.Fatalf("rebuild progress line %q", l)
		}
	}
	if after := h.status(t); after != before {
		t.Fatalf("status after the rebuild: %+v, want %+v", after, before)
	}
	if got := h.mustRun(t, nil, "thread", "list", "--json").stdout; got != threads {
		t.Fatalf("thread list after the rebuild:\n%s\nbefore:\n%s", got, threads)
	}
	if got := h.mustRun(t, nil, "session", "list", "--json").stdout; got != sessions {
		t.Fatalf("session list after the rebuild:\n%s\nbefore:\n%s", got, sessions)
	}
	if r := h.run(t, nil, "projections", "rebuild", "nope"); r.code != 1 || !strings.Contains(r.stderr, `"nope"`) {
		t.Fatalf("rebuild of an unknown projection: exit %d, stderr %q", r.code, r.stderr)
	}
}

// spl serve runs the index projector: with no command reading, the
// projection follows the log, held by the server.
func TestServeRunsProjections(t *testing.T) {
	h := newHome(t)
	h.env = append(h.env, "SPL_TOKEN_FILE="+filepath.Join(h.dir, "token"))
	srv := serveHome(t, h)
	server := srv.nats
	var rc receipt
	for i := range 3 {
		rc = decode[receipt](t, h.mustRun(t, nil, "--server", server, "emit", "--thread", fmt.Sprintf("th_%d", i),
			"--act", "DO", "--kind", "agent.step", "--body", "{}", "--actor", seedActor, "--json").stdout)
	}
	var s statusEntry
	waitFor(t, 10*time.Second, "the server's projector at the log's clock", func() bool {
		s = h.status(t, "--server", server)
		return s.Position == rc.Clock && s.Lag == 0
	})
	if s.Holder == "" {
		t.Fatalf("status: %+v, want the server as holder", s)
	}
	if got, want := h.threads(t, "--server", server), "th_2 th_1 th_0"; got != want {
		t.Fatalf("thread list over --server: %q, want %q", got, want)
	}
	if code := srv.stop(); code != 0 {
		t.Fatalf("spl serve exited %d on SIGTERM; logs:\n%s", code, srv.logs.String())
	}
	if !strings.Contains(srv.logs.String(), "projector started") {
		t.Fatalf("spl serve did not log its projector:\n%s", srv.logs.String())
	}
}

// TestErasureIsPhysicalInReadModels extends the proof of erasure to the
// read models: a checkpoint with a unique marker is the latest of its
// thread in the checkpoint index, and listed; after "spl erase" and a read
// that applies the erasure, with every spl process gone, no file under the
// data directory (the log's stream and the projection buckets alike) holds
// the marker.
func TestErasureIsPhysicalInReadModels(t *testing.T) {
	h := newHome(t)
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	marker := "SPL-PROJ-ERASE-PROOF-" + hex.EncodeToString(rnd[:])

	h.save(t, "th_other", "another thread")
	h.save(t, "th_proof", "before the secret")
	secret := h.save(t, "th_proof", "the secret is "+marker, "--name", "named-"+marker)

	list := h.mustRun(t, nil, "session", "list", "--json").stdout
	if !strings.Contains(list, marker) {
		t.Fatalf("session list does not show the secret checkpoint; the test would prove nothing:\n%s", list)
	}
	if got := h.threads(t); got != "th_proof th_other" {
		t.Fatalf("thread list: %q", got)
	}
	if found := filesHolding(t, h.dir, marker); len(found) == 0 {
		t.Fatalf("the marker is on no file before the erasure: the test would prove nothing")
	} else {
		t.Logf("before the erasure the marker is in %v", found)
	}

	h.mustRun(t, nil, "erase", secret.ID, "--thread", "th_proof", "--reason", "proof of erasure", "--actor", seedActor)
	after := decode[[]latestEntry](t, h.mustRun(t, nil, "session", "list", "--json").stdout)
	if len(after) != 2 || after[0].Thread != "th_proof" || after[0].Summary != "before the secret" {
		t.Fatalf("session list after the erasure: %+v, want th_proof back at its earlier checkpoint", after)
	}
	if s := h.status(t); s.Lag != 0 {
		t.Fatalf("status after the erasure: %+v, want lag 0", s)
	}

	// The read models are on disk, beside the stream.
	var buckets []string
	_ = filepath.WalkDir(h.dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "KV_spl_proj_") {
			buckets = append(buckets, d.Name())
		}
		return nil
	})
	if len(buckets) < 3 {
		t.Fatalf("projection buckets on disk: %v, want threads, checkpoints, erased and meta", buckets)
	}
	// Every spl process has exited: nothing may hold the marker.
	if found := filesHolding(t, h.dir, marker); len(found) != 0 {
		t.Fatalf("the erased marker is still on disk in %v", found)
	}
}
