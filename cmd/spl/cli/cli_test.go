package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	seedThread  = "th_auth_refactor_abc123"
	seedSummary = "Completed auth refactor; next: migration tests"
	seedActor   = "did:sync:agent:dev"
)

// seedSave is the seed example's "spl session save", without --home.
var seedSave = []string{
	"session", "save", "--thread", seedThread,
	"--summary", seedSummary,
	"--learnings", "mutex pattern worked", "--learnings", "refactor touched 14 files",
	"--next-steps", "Write migration tests",
	"--actor", seedActor,
}

type result struct {
	code           int
	stdout, stderr string
}

// spl runs the command in-process against the data directory home, with
// stdin as standard input.
func spl(t *testing.T, home, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append([]string{"--home", home}, args...)
	code := Run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// mustSPL runs spl and fails the test unless it exits 0.
func mustSPL(t *testing.T, home, stdin string, args ...string) result {
	t.Helper()
	r := spl(t, home, stdin, args...)
	if r.code != ExitOK {
		t.Fatalf("spl %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return v
}

var (
	idLine    = regexp.MustCompile(`(?m)^id:\s+(b[a-z2-7]+)$`)
	clockLine = regexp.MustCompile(`(?m)^clock:\s+([0-9]+)$`)
)

func TestSessionSeed(t *testing.T) {
	home := t.TempDir()

	save := mustSPL(t, home, "", seedSave...)
	m := idLine.FindStringSubmatch(save.stdout)
	if m == nil {
		t.Fatalf("session save printed no id:\n%s", save.stdout)
	}
	id := m[1]
	if !clockLine.MatchString(save.stdout) {
		t.Fatalf("session save printed no clock:\n%s", save.stdout)
	}

	list := mustSPL(t, home, "", "session", "list", "--thread", seedThread)
	lines := strings.Split(strings.TrimSpace(list.stdout), "\n")
	if got, want := len(lines), 2; got != want {
		t.Fatalf("session list printed %d lines, want %d (header and one row):\n%s", got, want, list.stdout)
	}
	for _, want := range []string{"CLOCK", "SUMMARY"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q lacks %q", lines[0], want)
		}
	}
	for _, want := range []string{seedSummary, id[len(id)-12:], seedActor} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}

	show := mustSPL(t, home, "", "session", "show", seedThread)
	for _, want := range []string{
		seedSummary, "mutex pattern worked", "refactor touched 14 files",
		"Write migration tests", seedActor, id,
	} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("session show lacks %q:\n%s", want, show.stdout)
		}
	}
}

func TestSessionJSON(t *testing.T) {
	home := t.TempDir()

	first := decodeJSON[receiptJSON](t, mustSPL(t, home, "", append(seedSave, "--json")...).stdout)
	if got, want := first.Thread, seedThread; got != want {
		t.Fatalf("thread=%v, want %v", got, want)
	}
	if got, want := first.Kind, records.KindCheckpoint; got != want {
		t.Fatalf("kind=%v, want %v", got, want)
	}
	second := decodeJSON[receiptJSON](t, mustSPL(t, home, "",
		"session", "save", "--thread", seedThread, "--summary", "second", "--learnings", "l",
		"--name", "v1", "--session-id", "s-42", "--actor", seedActor, "--json").stdout)
	if first.ID == second.ID || first.Clock >= second.Clock {
		t.Fatalf("second save (%s, clock %d) does not follow the first (%s, clock %d)",
			second.ID, second.Clock, first.ID, first.Clock)
	}

	list := decodeJSON[[]wire.Checkpoint](t, mustSPL(t, home, "", "session", "list", "--thread", seedThread, "--json").stdout)
	if got, want := len(list), 2; got != want {
		t.Fatalf("len(list)=%v, want %v", got, want)
	}
	if got, want := list[0].ID, first.ID; got != want {
		t.Fatalf("list[0].id=%v, want %v (oldest first)", got, want)
	}
	if list[0].Prev != nil {
		t.Fatalf("list[0].prev=%v, want null on the first record", *list[0].Prev)
	}
	if list[1].Prev == nil || *list[1].Prev != first.ID {
		t.Fatalf("list[1].prev=%v, want %v", list[1].Prev, first.ID)
	}
	if got, want := strings.Join(list[0].Learnings, "|"), "mutex pattern worked|refactor touched 14 files"; got != want {
		t.Fatalf("learnings=%v, want %v", got, want)
	}
	if got, want := strings.Join(list[0].NextSteps, "|"), "Write migration tests"; got != want {
		t.Fatalf("next_steps=%v, want %v", got, want)
	}
	if got, want := list[0].Actor, seedActor; got != want {
		t.Fatalf("actor=%v, want %v", got, want)
	}
	if got, want := list[0].Act, records.ActLearn; got != want {
		t.Fatalf("act=%v, want %v", got, want)
	}
	var body map[string]any
	if err := json.Unmarshal(list[0].Body, &body); err != nil {
		t.Fatalf("body: %v", err)
	}
	if got, want := body["summary"], seedSummary; got != want {
		t.Fatalf("body.summary=%v, want %v", got, want)
	}

	show := decodeJSON[wire.Checkpoint](t, mustSPL(t, home, "", "session", "show", seedThread, "--json").stdout)
	if got, want := show.ID, second.ID; got != want {
		t.Fatalf("show.id=%v, want %v (the latest)", got, want)
	}
	if got, want := show.Name+" "+show.SessionID, "v1 s-42"; got != want {
		t.Fatalf("name, session_id=%v, want %v", got, want)
	}
	if got, want := show.Clock, second.Clock; got != want {
		t.Fatalf("show.clock=%v, want %v", got, want)
	}

	newest := decodeJSON[[]wire.Checkpoint](t, mustSPL(t, home, "", "session", "list", "--thread", seedThread, "-n", "1", "--json").stdout)
	if len(newest) != 1 || newest[0].ID != second.ID {
		t.Fatalf("list -n 1 = %+v, want the second checkpoint only", newest)
	}

	empty := mustSPL(t, home, "", "session", "list", "--thread", "th_empty", "--json")
	if got, want := strings.TrimSpace(empty.stdout), "[]"; got != want {
		t.Fatalf("list of an empty thread=%v, want %v", got, want)
	}
}

func TestEmitAndTail(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SPL_ACTOR", seedActor)

	a := decodeJSON[receiptJSON](t, mustSPL(t, home, "",
		"emit", "--thread", "th_e", "--act", "KNOW", "--kind", "agent.step", "--body", `{"step":1,"tool":"grep"}`, "--json").stdout)
	if got, want := a.Actor, seedActor; got != want {
		t.Fatalf("actor=%v, want %v (from SPL_ACTOR)", got, want)
	}
	b := mustSPL(t, home, `{"step": 2, "note": "from stdin"}`,
		"emit", "--thread", "th_e", "--act", "DO", "--kind", "agent.step", "--body-file", "-")
	if !idLine.MatchString(b.stdout) || !clockLine.MatchString(b.stdout) {
		t.Fatalf("emit printed no id and clock:\n%s", b.stdout)
	}

	recs := decodeJSON[[]wire.Record](t, mustSPL(t, home, "", "thread", "tail", "th_e", "--json").stdout)
	if got, want := len(recs), 2; got != want {
		t.Fatalf("len(tail)=%v, want %v", got, want)
	}
	if got, want := recs[0].ID, a.ID; got != want {
		t.Fatalf("tail[0].id=%v, want %v", got, want)
	}
	if recs[1].Prev == nil || *recs[1].Prev != a.ID {
		t.Fatalf("tail[1].prev=%v, want %v", recs[1].Prev, a.ID)
	}
	var body struct {
		Step int    `json:"step"`
		Note string `json:"note"`
	}
	if err := json.Unmarshal(recs[1].Body, &body); err != nil {
		t.Fatalf("body: %v", err)
	}
	if got, want := fmt.Sprint(body.Step, " ", body.Note), "2 from stdin"; got != want {
		t.Fatalf("body=%v, want %v", got, want)
	}
	if recs[1].TS <= 0 || recs[1].Time == "" {
		t.Fatalf("tail[1] has ts=%d time=%q", recs[1].TS, recs[1].Time)
	}

	text := mustSPL(t, home, "", "thread", "tail", "th_e").stdout
	for _, want := range []string{"KNOW", "DO", "agent.step", a.ID[len(a.ID)-12:], `{"step":1,"tool":"grep"}`} {
		if !strings.Contains(text, want) {
			t.Errorf("thread tail lacks %q:\n%s", want, text)
		}
	}
	last := decodeJSON[[]wire.Record](t, mustSPL(t, home, "", "thread", "tail", "th_e", "-n", "1", "--json").stdout)
	if len(last) != 1 || last[0].Act != "DO" {
		t.Fatalf("tail -n 1 = %+v, want the DO record only", last)
	}
	empty := mustSPL(t, home, "", "thread", "tail", "th_nothing", "--json")
	if got, want := strings.TrimSpace(empty.stdout), "[]"; got != want {
		t.Fatalf("tail of an empty thread=%v, want %v", got, want)
	}
}

func TestErrors(t *testing.T) {
	home := t.TempDir()
	bodyFile := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(bodyFile, []byte(`{"a":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	emit := []string{"emit", "--thread", "th_x", "--actor", seedActor}
	save := []string{"session", "save", "--thread", "th_x", "--actor", seedActor}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a substring of the message
	}{
		{"unknown command", []string{"bogus"}, ExitUsage, `unknown command "bogus"`},
		{"unknown subcommand", []string{"session", "bogus"}, ExitUsage, `unknown command "bogus"`},
		{"unknown flag", []string{"session", "list", "--bogus"}, ExitUsage, "unknown flag: --bogus"},
		{"extra argument", []string{"session", "show", "a", "b"}, ExitUsage, "accepts 1 arg"},
		{"negative limit", []string{"session", "list", "--thread", "t", "-n", "-1"}, ExitUsage, "--limit"},
		{"save without thread", []string{"session", "save", "--summary", "s"}, ExitUsage, `"thread"`},
		{"empty summary", append(save, "--summary", "", "--learnings", "l"), ExitUsage, "body.summary"},
		{"no learnings", append(save, "--summary", "s"), ExitUsage, "body.learnings"},
		{"actor not a DID", []string{"session", "save", "--thread", "t", "--summary", "s", "--learnings", "l", "--actor", "agent-dev"}, ExitUsage, "actor"},
		{"both bodies", append(emit, "--act", "KNOW", "--kind", "a.b", "--body", "{}", "--body-file", bodyFile), ExitUsage, "exactly one of --body and --body-file"},
		{"no body", append(emit, "--act", "KNOW", "--kind", "a.b"), ExitUsage, "exactly one of --body and --body-file"},
		{"missing body file", append(emit, "--act", "KNOW", "--kind", "a.b", "--body-file", bodyFile+".missing"), ExitUsage, "--body-file"},
		{"malformed body", append(emit, "--act", "KNOW", "--kind", "a.b", "--body", "{"), ExitUsage, "body"},
		{"body not an object", append(emit, "--act", "KNOW", "--kind", "a.b", "--body", "[1]"), ExitUsage, "body"},
		{"lower-case act", append(emit, "--act", "know", "--kind", "a.b", "--body", "{}"), ExitUsage, "act"},
		{"bad timeout", []string{"--timeout", "0s", "session", "list", "--thread", "t"}, ExitUsage, "--timeout"},
		{"show unknown thread", []string{"session", "show", "th_unknown"}, ExitNotFound, `"th_unknown"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := spl(t, home, "", tc.args...)
			if got, want := r.code, tc.code; got != want {
				t.Fatalf("exit=%v, want %v; stderr:\n%s", got, want, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "spl: ") || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("stderr=%q, want \"spl: \" and %q", r.stderr, tc.stderr)
			}
			if got, want := strings.Count(r.stderr, "spl: "), 1; got != want {
				t.Fatalf("the error is printed %d times, want %d:\n%s", got, want, r.stderr)
			}
			if r.stdout != "" {
				t.Fatalf("stdout=%q, want nothing", r.stdout)
			}
		})
	}

	t.Run("no actor", func(t *testing.T) {
		t.Setenv("SPL_ACTOR", "")
		r := spl(t, home, "", "session", "save", "--thread", "t", "--summary", "s", "--learnings", "l")
		if got, want := r.code, ExitUsage; got != want {
			t.Fatalf("exit=%v, want %v; stderr:\n%s", got, want, r.stderr)
		}
		for _, want := range []string{"--actor", "SPL_ACTOR"} {
			if !strings.Contains(r.stderr, want) {
				t.Fatalf("stderr=%q, want it to mention %s", r.stderr, want)
			}
		}
	})

	// Nothing above was stored.
	if got := mustSPL(t, home, "", "thread", "tail", "th_x", "--json").stdout; strings.TrimSpace(got) != "[]" {
		t.Fatalf("th_x holds records after refused input:\n%s", got)
	}
}

func TestStorageError(t *testing.T) {
	// A data directory that is a regular file cannot be opened.
	home := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(home, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := spl(t, home, "", "session", "show", "th_x")
	if got, want := r.code, ExitStorage; got != want {
		t.Fatalf("exit=%v, want %v; stderr:\n%s", got, want, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "spl: session show: ") {
		t.Fatalf("stderr=%q, want \"spl: session show: …\"", r.stderr)
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New(`unknown command "x" for "spl"`), ExitUsage},
		{&runError{usagef("x")}, ExitUsage},
		{&runError{fmt.Errorf("emit: %w", &records.FieldError{Field: "act", Rule: "r"})}, ExitUsage},
		{&runError{fmt.Errorf("emit: %w", sdk.ErrNoActor)}, ExitUsage},
		{&runError{fmt.Errorf("session show: %w", sdk.ErrNotFound)}, ExitNotFound},
		{&runError{errors.New("disk on fire")}, ExitStorage},
		{&runError{fmt.Errorf("x: %w", context.DeadlineExceeded)}, ExitStorage},
	} {
		if got, want := exitCode(tc.err), tc.want; got != want {
			t.Errorf("exitCode(%v)=%v, want %v", tc.err, got, want)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"help.golden", []string{"help"}},
		{"help_session_save.golden", []string{"session", "save", "--help"}},
		{"help_emit.golden", []string{"emit", "--help"}},
		{"help_erase.golden", []string{"erase", "--help"}},
		{"help_verify.golden", []string{"verify", "--help"}},
		{"help_retention_set.golden", []string{"retention", "set", "--help"}},
		{"help_thread_list.golden", []string{"thread", "list", "--help"}},
		{"help_thread_tail.golden", []string{"thread", "tail", "--help"}},
		{"help_session_list.golden", []string{"session", "list", "--help"}},
		{"help_projections.golden", []string{"projections", "--help"}},
		{"help_projections_rebuild.golden", []string{"projections", "rebuild", "--help"}},
		{"help_key_new.golden", []string{"key", "new", "--help"}},
	} {
		r := spl(t, t.TempDir(), "", tc.args...)
		if r.code != ExitOK || r.stderr != "" {
			t.Fatalf("spl %v: exit %d, stderr %q", tc.args, r.code, r.stderr)
		}
		golden(t, tc.golden, r.stdout)
	}
}

func TestCell(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"", 5, "-"},
		{"short", 5, "short"},
		{"longer", 5, "long…"},
		{"a b  cdef", 5, "a b…"},
		{"tab\there\nnl", 20, "tab here nl"},
		{"ééééé€", 5, "éééé…"},
	} {
		if got, want := cell(tc.in, tc.width), tc.want; got != want {
			t.Errorf("cell(%q, %d)=%q, want %q", tc.in, tc.width, got, want)
		}
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// A resume or pause the session refuses exits 1 with the reason, as the
// docs say, not 3 (storage error): no checkpoint to resume from, a
// completed session.
func TestSessionRefusalsExitUsage(t *testing.T) {
	home := t.TempDir()
	mustSPL(t, home, "", "emit", "--thread", "th_refuse", "--act", "DO", "--kind", "agent.step", "--body", `{"n":1}`, "--actor", seedActor)
	if r := spl(t, home, "", "session", "resume", "th_refuse", "--actor", seedActor); r.code != ExitUsage || !strings.Contains(r.stderr, "no checkpoint to resume from") {
		t.Fatalf("resume with no checkpoint: exit %d %q, want %d naming it", r.code, r.stderr, ExitUsage)
	}
	mustSPL(t, home, "", "session", "save", "--thread", "th_refuse", "--summary", "s", "--learnings", "l", "--actor", seedActor)
	mustSPL(t, home, "", "session", "mark", "th_refuse", "--status", "completed", "--actor", seedActor)
	for _, cmd := range []string{"resume", "pause"} {
		if r := spl(t, home, "", "session", cmd, "th_refuse", "--actor", seedActor); r.code != ExitUsage || !strings.Contains(r.stderr, "session completed") {
			t.Fatalf("%s of a completed session: exit %d %q, want %d naming it", cmd, r.code, r.stderr, ExitUsage)
		}
	}
}
