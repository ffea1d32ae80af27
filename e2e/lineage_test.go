package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// saveID saves a checkpoint on thread with extra flags and returns its id.
func saveID(t *testing.T, h *home, thread, summary string, extra ...string) string {
	t.Helper()
	args := append([]string{"session", "save", "--thread", thread, "--summary", summary,
		"--learnings", "l", "--actor", seedActor}, extra...)
	m := idLine.FindStringSubmatch(h.mustRun(t, nil, args...).stdout)
	if m == nil {
		t.Fatalf("session save printed no id")
	}
	return m[1]
}

// TestLineageCommands runs save --state-file, show --id/--name, list,
// resume, log, fork (--set), diff and prune through the built binary,
// and verifies a fork after its source's records were erased.
func TestLineageCommands(t *testing.T) {
	h := newHome(t)
	state := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(state, []byte(`{"current_phase":"2","step":3,"progress":"30%","todos":[{"content":"auth","status":"done"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	a := saveID(t, h, "src", "phase one", "--name", "first", "--state-file", state)
	b := saveID(t, h, "src", "phase two")

	// show by id end and by name; every body key, nested.
	show := h.mustRun(t, nil, "session", "show", "src", "--id", a[len(a)-12:])
	for _, want := range []string{"phase one", "current_phase: 2", "- content: auth", "status: done"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("session show --id lacks %q:\n%s", want, show.stdout)
		}
	}
	if got := decode[record](t, h.mustRun(t, nil, "session", "show", "src", "--name", "first", "--json").stdout); got.ID != a {
		t.Errorf("session show --name: id %s, want %s", got.ID, a)
	}
	if r := h.run(t, strings.NewReader(`{"a":1,"a":2}`), "session", "save", "--thread", "src", "--summary", "s",
		"--learnings", "l", "--actor", seedActor, "--state-file", "-"); r.code != 1 || !strings.Contains(r.stderr, "duplicate key") {
		t.Errorf("a duplicate key in --state-file: exit %d, %s", r.code, r.stderr)
	}

	// list: age, step, progress.
	list := h.mustRun(t, nil, "session", "list", "--thread", "src")
	if !strings.Contains(list.stdout, "AGE") || !strings.Contains(list.stdout, "30%") || !strings.Contains(list.stdout, "s ago") {
		t.Errorf("session list lacks age, step or progress:\n%s", list.stdout)
	}

	// resume the first: the next save is its child, a branch.
	h.mustRun(t, nil, "session", "resume", "src", "--from", "first", "--actor", seedActor)
	c := saveID(t, h, "src", "phase two, again")
	if got := decode[struct {
		Parent string `json:"parent"`
	}](t, h.mustRun(t, nil, "session", "show", "src", "--id", c, "--json").stdout); got.Parent != a {
		t.Errorf("parent after resume = %s, want %s", got.Parent, a)
	}

	// fork from the first, with a changed state, and a fork of the fork.
	fork := h.mustRun(t, nil, "session", "fork", "src", "--from", a, "--to", "dst",
		"--set", "current_phase=3", "--set", "approach=rewrite", "--set", `limits.max={"files":20}`, "--actor", seedActor)
	if !strings.Contains(fork.stdout, "forked:") {
		t.Fatalf("session fork printed:\n%s", fork.stdout)
	}
	h.mustRun(t, nil, "session", "fork", "dst", "--to", "dst2", "--actor", seedActor)
	if r := h.run(t, nil, "session", "fork", "src", "--to", "dst", "--actor", seedActor); r.code != 1 {
		t.Errorf("fork onto a thread with records: exit %d, want 1", r.code)
	}

	// log: the tree, with the resume, the branch and the fork.
	lg := h.mustRun(t, nil, "session", "log", "src")
	for _, want := range []string{"phase one", "├── ", "↻", "⑂", "forked to dst"} {
		if !strings.Contains(lg.stdout, want) {
			t.Errorf("session log lacks %q:\n%s", want, lg.stdout)
		}
	}
	if !strings.Contains(h.mustRun(t, nil, "session", "log", "dst2").stdout, "forked from dst") {
		t.Errorf("session log of a fork of a fork does not say where it came from")
	}
	type node struct {
		Type   string  `json:"type"`
		Parent *string `json:"parent"`
	}
	lj := decode[struct {
		Nodes []node `json:"nodes"`
	}](t, h.mustRun(t, nil, "session", "log", "src", "--json").stdout)
	if len(lj.Nodes) != 5 { // a, b, resume, c, fork
		t.Errorf("session log --json: %d nodes, want 5: %+v", len(lj.Nodes), lj.Nodes)
	}

	// diff: a fork against its source.
	dj := h.mustRun(t, nil, "session", "diff", "--thread", "dst", "--thread-b", "src", dstFirst(t, h), "first", "--json")
	for _, want := range []string{`"path": "state.current_phase"`, `"path": "state.approach"`, `"op": "removed"`} {
		if !strings.Contains(dj.stdout, want) {
			t.Errorf("session diff --json lacks %s:\n%s", want, dj.stdout)
		}
	}
	text := h.mustRun(t, nil, "session", "diff", "--thread", "src", a, b)
	if !strings.Contains(text.stdout, "~ summary:") {
		t.Errorf("session diff lacks the changed summary:\n%s", text.stdout)
	}

	// prune (dry run, then for real) erases the source's older records;
	// the fork still verifies.
	dry := h.mustRun(t, nil, "session", "prune", "src", "--keep-last", "1", "--dry-run")
	if !strings.Contains(dry.stdout, "would prune: "+b) || strings.Contains(dry.stdout, a) {
		t.Errorf("prune --dry-run (the named one is kept):\n%s", dry.stdout)
	}
	h.mustRun(t, nil, "erase", a, "--thread", "src", "--reason", "older records go", "--actor", seedActor)
	pr := h.mustRun(t, nil, "session", "prune", "src", "--keep-last", "1", "--actor", seedActor)
	if !strings.Contains(pr.stdout, "pruned: "+b) {
		t.Errorf("session prune:\n%s", pr.stdout)
	}
	if r := h.run(t, nil, "session", "show", "src", "--id", a); r.code != 2 || !strings.Contains(r.stderr, "erased") {
		t.Errorf("show an erased checkpoint: exit %d, %s", r.code, r.stderr)
	}
	for _, th := range []string{"dst", "dst2", "src"} {
		if r := h.run(t, nil, "verify", th); r.code != 0 {
			t.Errorf("verify %s after the source was erased: exit %d\n%s%s", th, r.code, r.stdout, r.stderr)
		}
	}
	if !strings.Contains(h.mustRun(t, nil, "session", "log", "src").stdout, "✗") {
		t.Errorf("session log does not show the erased checkpoints")
	}

	// A fork link to nothing does not verify.
	h.mustRun(t, nil, "emit", "--thread", "forged", "--act", "LEARN", "--kind", "agent.session.checkpoint", "--actor", seedActor,
		"--body", `{"summary":"s","learnings":["l"],"forked_from":{"thread":"src","id":"`+c[:len(c)-4]+`aaaa","clock":3}}`)
	if r := h.run(t, nil, "verify", "forged"); r.code != 4 || !strings.Contains(r.stdout, "forked_from") {
		t.Errorf("verify a broken fork link: exit %d\n%s", r.code, r.stdout)
	}
	if r := h.run(t, nil, "verify", "--all"); r.code != 4 {
		t.Errorf("verify --all with a broken fork link: exit %d", r.code)
	}
}

// dstFirst is the id of the first checkpoint of thread dst.
func dstFirst(t *testing.T, h *home) string {
	t.Helper()
	return decode[record](t, h.mustRun(t, nil, "session", "show", "dst", "--json").stdout).ID
}
