package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// emitJSON emits a record with spl and returns its receipt.
func emitJSON(t *testing.T, home, thread, kind, actor string, extra ...string) receiptJSON {
	t.Helper()
	args := append([]string{"emit", "--thread", thread, "--act", "DO", "--kind", kind, "--body", `{"n":1}`,
		"--actor", actor, "--json"}, extra...)
	return decodeJSON[receiptJSON](t, mustSPL(t, home, "", args...).stdout)
}

func threadNames(ts []wire.Thread) string {
	var names []string
	for _, t := range ts {
		names = append(names, t.Thread)
	}
	return strings.Join(names, " ")
}

func TestThreadList(t *testing.T) {
	home := t.TempDir()
	const other = "did:sync:agent:other"
	emitJSON(t, home, "th_a", "agent.step", seedActor)
	saveJSON(t, home, "th_b", "b's checkpoint")
	emitJSON(t, home, "th_c", "agent.note", other)
	last := emitJSON(t, home, "th_a", "agent.step", seedActor)

	all := decodeJSON[[]wire.Thread](t, mustSPL(t, home, "", "thread", "list", "--json").stdout)
	if got, want := threadNames(all), "th_a th_c th_b"; got != want {
		t.Fatalf("threads=%q, want %q (newest activity first)", got, want)
	}
	a := all[0]
	if a.Records != 2 || a.Checkpoints != 0 || a.LastClock != last.Clock || a.LastID == nil || *a.LastID != last.ID ||
		a.LastActor != seedActor || a.Kinds["agent.step"] != 2 || a.Actors[seedActor] != 2 || a.FirstClock != 1 {
		t.Fatalf("th_a=%+v", a)
	}
	if all[2].Checkpoints != 1 || all[2].Kinds[records.KindCheckpoint] != 1 {
		t.Fatalf("th_b=%+v, want one checkpoint", all[2])
	}
	if _, err := time.Parse(time.RFC3339Nano, a.LastTime); err != nil || a.LastTS <= 0 {
		t.Fatalf("last_time=%q last_ts=%d", a.LastTime, a.LastTS)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--actor", other}, "th_c"},
		{[]string{"--kind", "agent.step"}, "th_a"},
		{[]string{"--kind", records.KindCheckpoint, "--actor", seedActor}, "th_b"},
		{[]string{"-n", "2"}, "th_a th_c"},
		{[]string{"--limit", "0"}, "th_a th_c th_b"},
		{[]string{"--since", "1h"}, "th_a th_c th_b"},
		{[]string{"--since", "30d", "-n", "1"}, "th_a"},
		{[]string{"--actor", "did:sync:agent:nobody"}, ""},
	} {
		args := append([]string{"thread", "list", "--json"}, tc.args...)
		if got := threadNames(decodeJSON[[]wire.Thread](t, mustSPL(t, home, "", args...).stdout)); got != tc.want {
			t.Errorf("thread list %v: %q, want %q", tc.args, got, tc.want)
		}
	}

	// A thread whose last activity is old (by its record's time) is left
	// out by --since.
	old := mustSPL(t, home, "", "emit", "--thread", "th_old", "--act", "DO", "--kind", "agent.step", "--body", "{}",
		"--actor", seedActor)
	if !idLine.MatchString(old.stdout) {
		t.Fatalf("emit: %s", old.stdout)
	}
	c, err := sdk.Open(context.Background(), sdk.WithDir(home), sdk.WithActor(seedActor))
	if err != nil {
		t.Fatal(err)
	}
	r, err := records.New(records.ActDo, "agent.step", "th_older", seedActor, time.Now().Add(-48*time.Hour), records.RawBody(mustBody(t, `{}`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := threadNames(decodeJSON[[]wire.Thread](t, mustSPL(t, home, "", "thread", "list", "--json", "--since", "1d").stdout)), "th_old th_a th_c th_b"; got != want {
		t.Fatalf("--since 1d: %q, want %q", got, want)
	}
	if got := threadNames(decodeJSON[[]wire.Thread](t, mustSPL(t, home, "", "thread", "list", "--json", "--since", "3d").stdout)); !strings.Contains(got, "th_older") {
		t.Fatalf("--since 3d: %q, want th_older in it", got)
	}

	text := mustSPL(t, home, "", "thread", "list", "-n", "2")
	lines := strings.Split(strings.TrimSpace(text.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "LAST ACTIVE") || !strings.Contains(lines[1], "th_older") {
		t.Fatalf("thread list -n 2:\n%s", text.stdout)
	}

	none := spl(t, home, "", "thread", "list", "--kind", "no.such")
	if none.code != ExitOK || none.stdout != "" || none.stderr != "no threads\n" {
		t.Fatalf("thread list of nothing: exit %d, stdout %q, stderr %q", none.code, none.stdout, none.stderr)
	}
}

func mustBody(t *testing.T, js string) []byte {
	t.Helper()
	b, err := records.BodyFromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSessionListAcrossThreads(t *testing.T) {
	home := t.TempDir()
	const other = "did:sync:agent:other"
	saveJSON(t, home, "th_a", "a one")
	saveJSON(t, home, "th_b", "b one", "--name", "bee")
	saveJSON(t, home, "th_a", "a two")
	c := saveJSON(t, home, "th_c", "c one", "--actor", other) // the later --actor wins
	emitJSON(t, home, "th_d", "agent.step", seedActor)        // no checkpoint: not listed

	all := decodeJSON[[]latestJSON](t, mustSPL(t, home, "", "session", "list", "--json").stdout)
	var got []string
	for _, cp := range all {
		got = append(got, cp.Thread+":"+cp.Summary)
	}
	if want := "th_c:c one th_a:a two th_b:b one"; strings.Join(got, " ") != want {
		t.Fatalf("session list=%q, want %q", strings.Join(got, " "), want)
	}
	if all[0].ID != c.ID || all[0].Clock != c.Clock || all[0].Actor != other || all[2].Name != "bee" {
		t.Fatalf("session list[0]=%+v, [2]=%+v", all[0], all[2])
	}
	if _, err := time.Parse(time.RFC3339Nano, all[0].Time); err != nil || all[0].TS <= 0 {
		t.Fatalf("time=%q ts=%d", all[0].Time, all[0].TS)
	}

	page := decodeJSON[[]latestJSON](t, mustSPL(t, home, "", "session", "list", "--json", "-n", "1", "--offset", "1").stdout)
	if len(page) != 1 || page[0].Thread != "th_a" {
		t.Fatalf("-n 1 --offset 1: %+v, want th_a", page)
	}
	if past := decodeJSON[[]latestJSON](t, mustSPL(t, home, "", "session", "list", "--json", "--offset", "3").stdout); len(past) != 0 {
		t.Fatalf("--offset 3: %+v, want nothing", past)
	}
	mine := decodeJSON[[]latestJSON](t, mustSPL(t, home, "", "session", "list", "--json", "--actor", other).stdout)
	if len(mine) != 1 || mine[0].Thread != "th_c" {
		t.Fatalf("--actor %s: %+v", other, mine)
	}

	text := mustSPL(t, home, "", "session", "list", "-n", "2").stdout
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "THREAD") || !strings.Contains(lines[1], "th_c") ||
		!strings.Contains(lines[1], c.ID[len(c.ID)-12:]) || !strings.Contains(lines[2], "a two") {
		t.Fatalf("session list -n 2:\n%s", text)
	}
	none := spl(t, home, "", "session", "list", "--actor", "did:sync:agent:nobody")
	if none.code != ExitOK || none.stdout != "" || none.stderr != "no checkpoints\n" {
		t.Fatalf("session list of nothing: exit %d, stdout %q, stderr %q", none.code, none.stdout, none.stderr)
	}
}

func TestProjectionCommandErrors(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"since not a duration", []string{"thread", "list", "--since", "yesterday"}, "thread list: --since: "},
		{"since negative", []string{"thread", "list", "--since", "-1h"}, "--since"},
		{"negative thread limit", []string{"thread", "list", "-n", "-1"}, "--limit"},
		{"thread list argument", []string{"thread", "list", "th_a"}, `unknown command "th_a"`},
		{"negative offset", []string{"session", "list", "--offset", "-1"}, "--offset"},
		{"offset with thread", []string{"session", "list", "--thread", "t", "--offset", "1"}, "--offset lists across threads"},
		{"actor with thread", []string{"session", "list", "--thread", "t", "--actor", seedActor}, "--actor lists across threads"},
		{"unknown projection", []string{"projections", "rebuild", "bogus"}, `no such projection: "bogus"`},
		{"two projections", []string{"projections", "rebuild", "a", "b"}, "accepts at most 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := spl(t, home, "", tc.args...)
			if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "spl: ") || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, ExitUsage, tc.stderr)
			}
			if r.stdout != "" {
				t.Fatalf("stdout=%q, want nothing", r.stdout)
			}
		})
	}
}

func TestProjectionsStatusAndRebuild(t *testing.T) {
	home := t.TempDir()
	for i := range 5 {
		emitJSON(t, home, fmt.Sprintf("th_%d", i%2), "agent.step", seedActor)
	}
	cp := saveJSON(t, home, "th_0", "checkpoint")

	// Nobody applied the projection yet: it lags.
	st := decodeJSON[[]statusJSON](t, mustSPL(t, home, "", "projections", "status", "--json").stdout)
	if len(st) != 1 || st[0].Name != sdk.ProjectionIndex || st[0].LogClock != cp.Clock || st[0].Lag != cp.Clock-st[0].Position {
		t.Fatalf("status before a read: %+v", st)
	}
	// A read catches it up.
	mustSPL(t, home, "", "thread", "list")
	st = decodeJSON[[]statusJSON](t, mustSPL(t, home, "", "projections", "status", "--json").stdout)
	if s := st[0]; s.Position != cp.Clock || s.Lag != 0 || s.LagMS != 0 || s.Holder != "" || s.RebuildTo != 0 || s.Updated == "" {
		t.Fatalf("status after a read: %+v", s)
	}
	before := mustSPL(t, home, "", "thread", "list", "--json").stdout
	text := mustSPL(t, home, "", "projections", "status").stdout
	if !strings.HasPrefix(text, "NAME") || !strings.Contains(text, fmt.Sprintf("index  %d ", cp.Clock)) {
		t.Fatalf("projections status:\n%s", text)
	}

	rb := mustSPL(t, home, "", "projections", "rebuild")
	if got, want := rb.stdout, fmt.Sprintf("rebuilt index: up to clock %d\n", cp.Clock); got != want {
		t.Fatalf("rebuild printed %q, want %q", got, want)
	}
	// stderr is not a terminal: plain lines, the last one complete.
	final := fmt.Sprintf("rebuild index: %d/%d records\n", cp.Clock, cp.Clock)
	if !strings.HasSuffix(rb.stderr, final) || strings.Contains(rb.stderr, "\r") {
		t.Fatalf("rebuild progress %q, want plain lines ending in %q", rb.stderr, final)
	}
	if after := mustSPL(t, home, "", "thread", "list", "--json").stdout; after != before {
		t.Fatalf("thread list after the rebuild:\n%s\nbefore:\n%s", after, before)
	}
	st = decodeJSON[[]statusJSON](t, mustSPL(t, home, "", "projections", "status", "--json").stdout)
	if s := st[0]; s.Position != cp.Clock || s.Lag != 0 || s.RebuildTo != 0 {
		t.Fatalf("status after the rebuild: %+v", s)
	}
	js := decodeJSON[[]rebuiltJSON](t, mustSPL(t, home, "", "projections", "rebuild", "index", "--json").stdout)
	if len(js) != 1 || js[0].Name != "index" || js[0].Clock != cp.Clock {
		t.Fatalf("rebuild --json: %+v", js)
	}
}

// holdLease makes a process that does not exist hold the index
// projection's lease, so that nobody applies it, and returns a function
// that gives it back.
func holdLease(t *testing.T, home string, c *sdk.Client, holder string) func() {
	t.Helper()
	ctx := context.Background()
	if _, err := c.ProjectionStatus(ctx); err != nil { // creates the buckets
		t.Fatal(err)
	}
	conn, err := natsio.Dial(ctx, natsio.Options{Dir: home, Name: "cli-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	meta, err := conn.JS.KeyValue(ctx, projections.BucketName(c.StreamName(), projections.MetaModel))
	if err != nil {
		t.Fatal(err)
	}
	lease, _ := json.Marshal(map[string]any{"holder": holder, "ttl_ms": 60_000, "renewed": time.Now().UnixMilli()})
	if _, err := meta.Put(ctx, "lease."+sdk.ProjectionIndex, lease); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := meta.Delete(ctx, "lease."+sdk.ProjectionIndex); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProjectionBehind(t *testing.T) {
	home := t.TempDir()
	c, err := sdk.Open(context.Background(), sdk.WithDir(home), sdk.WithActor(seedActor))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	release := holdLease(t, home, c, "stuck-process")
	rc := emitJSON(t, home, "th_a", "agent.step", seedActor)

	for _, args := range [][]string{{"thread", "list"}, {"session", "list"}} {
		r := spl(t, home, "", append([]string{"--timeout", "500ms"}, args...)...)
		if r.code != ExitUsage {
			t.Fatalf("%v with a stuck projector: exit %d, want %d; stderr %q", args, r.code, ExitUsage, r.stderr)
		}
		for _, want := range []string{"projection index at clock 0", fmt.Sprintf("for clock %d", rc.Clock), "stuck-process", "--timeout"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr %q does not say %q", args, r.stderr, want)
			}
		}
	}
	st := decodeJSON[[]statusJSON](t, mustSPL(t, home, "", "projections", "status", "--json").stdout)
	if st[0].Holder != "stuck-process" || st[0].Lag != rc.Clock {
		t.Fatalf("status with a stuck projector: %+v", st[0])
	}

	// A rebuild waits for the holder to hand the projection over; Ctrl-C
	// ends the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := Run(ctx, []string{"--home", home, "projections", "rebuild"}, strings.NewReader(""), &stdout, &stderr)
	if code != ExitStorage || !strings.Contains(stderr.String(), "hand it over") || !strings.Contains(stderr.String(), "stuck-process") {
		t.Fatalf("rebuild against a stuck holder: exit %d, stderr %q", code, stderr.String())
	}

	release()
	if got := decodeJSON[[]wire.Thread](t, mustSPL(t, home, "", "thread", "list", "--json").stdout); len(got) != 1 {
		t.Fatalf("thread list once the lease is free: %+v", got)
	}
}

// syncBuffer is a bytes.Buffer that a follow writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// follow runs "thread tail --follow" in the background; stop cancels its
// context, as Ctrl-C does, and returns its exit code.
func follow(t *testing.T, home string, args ...string) (stdout, stderr *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"--home", home, "thread", "tail", "--follow"}, args...), strings.NewReader(""), stdout, stderr)
	}()
	stopped := false
	stop = func() int {
		if stopped {
			return -1
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(20 * time.Second):
			t.Fatal("thread tail --follow did not end when cancelled")
			return -1
		}
	}
	t.Cleanup(func() { stop() })
	return stdout, stderr, stop
}

// waitOutput waits until out holds want.
func waitOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never held %q:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestThreadTailFollow(t *testing.T) {
	home := t.TempDir()
	first := emitJSON(t, home, "th_f", "agent.step", seedActor)
	emitJSON(t, home, "th_other", "agent.step", seedActor)

	stdout, stderr, stop := follow(t, home, "th_f", "--timeout", "1s")
	waitOutput(t, stdout, first.ID[len(first.ID)-12:])
	if !strings.HasPrefix(stdout.String(), "CLOCK") {
		t.Fatalf("follow does not start with the tail:\n%s", stdout)
	}
	time.Sleep(1500 * time.Millisecond) // past --timeout: following goes on
	second := emitJSON(t, home, "th_f", "agent.step", seedActor)
	emitJSON(t, home, "th_other", "agent.note", seedActor) // another thread: not shown
	waitOutput(t, stdout, second.ID[len(second.ID)-12:])
	erase := mustSPL(t, home, "", "erase", second.ID, "--thread", "th_f", "--reason", "followed away", "--actor", seedActor).stdout
	erasure := idLine.FindStringSubmatch(erase)[1]
	waitOutput(t, stdout, "[erased by "+erasure[len(erasure)-12:])
	if code := stop(); code != ExitOK {
		t.Fatalf("follow ended with exit %d, want 0; stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("follow printed %d lines, want 5 (header, record, record, erasure, tombstone):\n%s", len(lines), stdout)
	}
	for i, want := range []string{"CLOCK", first.ID[len(first.ID)-12:], second.ID[len(second.ID)-12:], "core.erasure", "followed away]"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q lacks %q", i, lines[i], want)
		}
	}
	if strings.Contains(stdout.String(), "agent.note") || stderr.String() != "" {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	// The tombstone is the erased record's line: its clock and short id.
	if !strings.HasPrefix(lines[4], fmt.Sprint(second.Clock)+" ") || !strings.Contains(lines[4], second.ID[len(second.ID)-12:]) {
		t.Errorf("tombstone line %q is not the erased record's", lines[4])
	}
}

func TestThreadTailFollowJSONEmptyThread(t *testing.T) {
	home := t.TempDir()
	emitJSON(t, home, "th_other", "agent.step", seedActor)
	stdout, _, stop := follow(t, home, "th_new", "--json")
	time.Sleep(300 * time.Millisecond) // following: the record lands live
	rc := emitJSON(t, home, "th_new", "agent.step", seedActor)
	waitOutput(t, stdout, rc.ID)
	if code := stop(); code != ExitOK {
		t.Fatalf("exit %d, want 0", code)
	}
	var lines []tailJSON
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		lines = append(lines, decodeJSON[tailJSON](t, l))
	}
	if len(lines) != 1 || lines[0].ID != rc.ID || lines[0].Thread != "th_new" || lines[0].Erased != nil {
		t.Fatalf("follow --json of a new thread: %+v", lines)
	}
}

func TestLineTableMatchesTailTable(t *testing.T) {
	recs := []sdk.Record{}
	for i, js := range []string{`{"step":1}`, `{"a long body": "that goes on and on past the width of the body column"}`} {
		recs = append(recs, sdk.Record{ID: fixedID(byte(i + 1)), Clock: uint64(9 + 91*i), Record: &records.Record{
			Header: records.Header{V: records.FormatVersion, Act: []string{"DO", "FORGET"}[i], Kind: "agent.step",
				Thread: "th", Actor: "did:sync:agent:dev", TS: fixedTime.UnixMilli()},
			Body: mustBody(t, js),
		}})
	}
	var want, got bytes.Buffer
	if err := writeTailTable(&want, recs, nil); err != nil {
		t.Fatal(err)
	}
	p := &tailPrinter{t: &lineTable{w: &got}}
	if err := p.start(recs, nil); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("follow's tail:\n%s\nthread tail's:\n%s", got.String(), want.String())
	}
}

func TestRebuildProgress(t *testing.T) {
	now := fixedTime
	var b bytes.Buffer
	p := newRebuildProgress(&b, "index", func() time.Time { return now })
	for _, step := range []struct {
		after       time.Duration
		done, total uint64
	}{{0, 1000, 5000}, {300 * time.Millisecond, 2000, 5000}, {time.Second, 3000, 5000}, {10 * time.Millisecond, 5000, 5000}, {0, 5000, 5000}} {
		now = now.Add(step.after)
		p.update(step.done, step.total)
	}
	p.finish()
	if got, want := b.String(), "rebuild index: 1000/5000 records\nrebuild index: 3000/5000 records\nrebuild index: 5000/5000 records\n"; got != want {
		t.Fatalf("progress:\n%s\nwant:\n%s", got, want)
	}
}

func TestExitCodeProjections(t *testing.T) {
	behind := &projections.BehindError{Name: "index", Clock: 3, Want: 9, Err: context.DeadlineExceeded}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&runError{fmt.Errorf("thread list: %w", behind)}, ExitUsage},
		{&runError{fmt.Errorf("projections rebuild: %w", sdk.ErrUnknownProjection)}, ExitUsage},
		{&runError{fmt.Errorf("projections rebuild: %w", projections.ErrBusy)}, ExitStorage},
		{&runError{errors.Join(projections.ErrBusy, context.Canceled)}, ExitStorage},
	} {
		if got, want := exitCode(tc.err), tc.want; got != want {
			t.Errorf("exitCode(%v)=%v, want %v", tc.err, got, want)
		}
	}
}

func TestProjectionTables(t *testing.T) {
	threads := []sdk.ThreadInfo{
		{Thread: "th_auth_refactor_abc123", Records: 14, Checkpoints: 3, First: 1, FirstID: fixedID(1), Last: 40, LastID: fixedID(2),
			LastActor: "did:sync:agent:dev", LastActive: fixedTime.Add(2 * time.Hour),
			Kinds:  map[string]uint64{"agent.step": 9, records.KindCheckpoint: 3, "agent.tool.call": 1, "agent.tool.result.with.a.long.name": 1},
			Actors: map[string]uint64{"did:sync:agent:dev": 14}},
		{Thread: "research/vector-db", Records: 2, Checkpoints: 1, First: 7, FirstID: fixedID(3), Last: 9, LastID: fixedID(4),
			LastActor: "did:sync:agent:reviewer", LastActive: fixedTime,
			Kinds:  map[string]uint64{records.KindCheckpoint: 1, "agent.step": 1},
			Actors: map[string]uint64{"did:sync:agent:reviewer": 1, "did:sync:agent:dev": 1}},
	}
	var b bytes.Buffer
	if err := writeThreadTable(&b, threads); err != nil {
		t.Fatal(err)
	}
	golden(t, "thread_list.golden", b.String())

	var cps []sdk.CheckpointInfo
	for i, cp := range fixedCheckpoints() {
		c := cp.Checkpoint
		cps = append([]sdk.CheckpointInfo{{Thread: fmt.Sprintf("th_%d", i), ID: cp.ID, Clock: cp.Clock, Time: cp.Record.Time(),
			Actor: cp.Header.Actor, Name: c.Name, SessionID: c.SessionID, Summary: c.Summary}}, cps...)
	}
	b.Reset()
	if err := writeLatestTable(&b, cps); err != nil {
		t.Fatal(err)
	}
	golden(t, "session_list_all.golden", b.String())

	b.Reset()
	ss := []sdk.ProjectionStatus{
		{Name: "index", Clock: 120000, LogClock: 1000000, Lag: 880000, LagTime: 93 * time.Second, Corrupt: 2, LastCorrupt: 17,
			Holder: "build-7-4242-x1Yz#1", RebuildTo: 1000000, Updated: fixedTime},
		{Name: "idle", Clock: 9, LogClock: 9},
	}
	if err := writeStatusTable(&b, ss); err != nil {
		t.Fatal(err)
	}
	golden(t, "projections_status.golden", b.String())
}
