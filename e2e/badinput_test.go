package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput checks that each kind of bad input is refused with exit
// code 1 and a message naming the field and the rule, and that nothing of
// it is stored.
func TestBadInput(t *testing.T) {
	h := newHome(t)
	const (
		thread = "th_bad"       // has records; emits go here
		fresh  = "th_bad_fresh" // never gets a checkpoint; saves go here
	)
	h.mustRun(t, nil, "session", "save", "--thread", thread, "--summary", "s", "--learnings", "l", "--actor", seedActor)
	h.mustRun(t, nil, "emit", "--thread", thread, "--act", "KNOW", "--kind", "agent.step", "--body", `{"n":1}`, "--actor", seedActor)
	before := h.mustRun(t, nil, "thread", "tail", thread, "--json").stdout
	if got, want := len(decode[[]record](t, before)), 2; got != want {
		t.Fatalf("len(tail)=%v, want %v", got, want)
	}

	badUTF8 := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(badUTF8, []byte("{\"s\":\"a\xffb\"}"), 0o600); err != nil {
		t.Fatal(err)
	}

	save := func(args ...string) []string {
		return append([]string{"session", "save", "--thread", fresh}, args...)
	}
	emit := func(args ...string) []string {
		return append([]string{"emit", "--thread", thread, "--actor", seedActor}, args...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of stderr: the field and the rule
	}{
		{"empty summary", save("--summary", "", "--learnings", "l", "--actor", seedActor),
			[]string{"body.summary", "empty"}},
		{"no learnings", save("--summary", "s", "--actor", seedActor),
			[]string{"body.learnings", "at least one"}},
		{"empty thread", []string{"session", "save", "--thread", "", "--summary", "s", "--learnings", "l", "--actor", seedActor},
			[]string{"thread", "1-256 bytes"}},
		{"actor not a DID", save("--summary", "s", "--learnings", "l", "--actor", "agent-dev"),
			[]string{"actor", "DID", `"agent-dev"`}},
		{"malformed JSON body", emit("--act", "KNOW", "--kind", "agent.step", "--body", `{"n":`),
			[]string{"body", "JSON object"}},
		{"lower-case act", emit("--act", "know", "--kind", "agent.step", "--body", `{}`),
			[]string{"act", "upper-case", `"know"`}},
		{"upper-case kind", emit("--act", "KNOW", "--kind", "Agent.Step", "--body", `{}`),
			[]string{"kind", "lower-case", `"Agent.Step"`}},
		// Input a JSON decoder would change is refused, not stored changed.
		{"duplicate key", emit("--act", "KNOW", "--kind", "agent.step", "--body", `{"a":{"x":1,"x":2}}`),
			[]string{"body.a.x", `duplicate key "x"`}},
		{"invalid UTF-8", emit("--act", "KNOW", "--kind", "agent.step", "--body-file", badUTF8),
			[]string{"body.s", "invalid UTF-8"}},
		{"lone surrogate", emit("--act", "KNOW", "--kind", "agent.step", "--body", `{"s":["\ud800"]}`),
			[]string{"body.s[0]", `lone surrogate \ud800`}},
		{"number underflow", emit("--act", "KNOW", "--kind", "agent.step", "--body", `{"n":1e-400}`),
			[]string{"body.n", `number "1e-400" cannot be kept exactly`}},
		{"number overflow", emit("--act", "KNOW", "--kind", "agent.step", "--body", `{"n":-1e400}`),
			[]string{"body.n", `number "-1e400" cannot be kept exactly`}},
		{"number with more digits than a float64", emit("--act", "KNOW", "--kind", "agent.step", "--body", `{"pi":3.141592653589793238462643383279}`),
			[]string{"body.pi", "would keep 3.141592653589793"}},
		{"integer minus zero", emit("--act", "KNOW", "--kind", "agent.step", "--body", `{"z":-0}`),
			[]string{"body.z", "no negative zero"}},
		{"integer past uint64", emit("--act", "KNOW", "--kind", "agent.step", "--body", `{"n":99999999999999999999}`),
			[]string{"body.n", "out of range"}},
		{"no actor", save("--summary", "s", "--learnings", "l"),
			[]string{"actor", "SPL_ACTOR"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(t, nil, tc.args...)
			if got, want := r.code, 1; got != want {
				t.Fatalf("exit=%v, want %v; stderr:\n%s", got, want, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "spl: ") {
				t.Errorf("stderr=%q, want it to start with \"spl: \"", r.stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr=%q lacks %q", r.stderr, want)
				}
			}
			if after := h.mustRun(t, nil, "thread", "tail", thread, "--json").stdout; after != before {
				t.Errorf("thread %s changed:\nbefore %s\nafter  %s", thread, before, after)
			}
			if r := h.run(t, nil, "session", "show", fresh); r.code != 2 {
				t.Errorf("session show %s: exit %d, want 2 (no checkpoint stored); stdout:\n%s", fresh, r.code, r.stdout)
			}
		})
	}
}
