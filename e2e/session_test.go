package e2e

import (
	"regexp"
	"strings"
	"testing"
)

const (
	seedThread  = "th_auth_refactor_abc123"
	seedSummary = "Completed auth refactor; next: migration tests"
	seedActor   = "did:sync:agent:dev"
)

var (
	idLine    = regexp.MustCompile(`(?m)^id:\s+(b[a-z2-7]+)$`)
	clockLine = regexp.MustCompile(`(?m)^clock:\s+([0-9]+)$`)
)

// TestSeed runs the example of the README on a fresh data directory.
func TestSeed(t *testing.T) {
	h := newHome(t)

	save := h.mustRun(t, nil, "session", "save", "--thread", seedThread,
		"--summary", seedSummary,
		"--learnings", "mutex pattern worked", "--learnings", "refactor touched 14 files",
		"--next-steps", "Write migration tests", "--actor", seedActor)
	m := idLine.FindStringSubmatch(save.stdout)
	if m == nil {
		t.Fatalf("session save printed no id:\n%s", save.stdout)
	}
	id := m[1]
	if !clockLine.MatchString(save.stdout) {
		t.Fatalf("session save printed no clock:\n%s", save.stdout)
	}

	list := h.mustRun(t, nil, "session", "list", "--thread", seedThread)
	lines := strings.Split(strings.TrimSpace(list.stdout), "\n")
	if got, want := len(lines), 2; got != want {
		t.Fatalf("session list printed %d lines, want %d (header, one row):\n%s", got, want, list.stdout)
	}
	for _, want := range []string{seedSummary, id[len(id)-12:]} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("session list row %q lacks %q", lines[1], want)
		}
	}

	show := h.mustRun(t, nil, "session", "show", seedThread)
	for _, want := range []string{
		seedSummary, "mutex pattern worked", "refactor touched 14 files",
		"Write migration tests", seedActor, id,
	} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("session show lacks %q:\n%s", want, show.stdout)
		}
	}
}

func TestShowUnknownThread(t *testing.T) {
	h := newHome(t)
	r := h.run(t, nil, "session", "show", "th_unknown")
	if got, want := r.code, 2; got != want {
		t.Fatalf("exit=%v, want %v; stderr:\n%s", got, want, r.stderr)
	}
	for _, want := range []string{"spl: ", "th_unknown", "not found"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr=%q lacks %q", r.stderr, want)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout=%q, want nothing", r.stdout)
	}
}

func TestHelp(t *testing.T) {
	h := newHome(t)
	r := h.mustRun(t, nil, "help")
	for _, want := range []string{"Exit codes:", "SPL_HOME", "SPL_ACTOR", "session", "emit", "thread"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("spl help lacks %q", want)
		}
	}
}
