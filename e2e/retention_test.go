package e2e

import (
	"strings"
	"testing"
)

type checkpoint struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
}

// summaries lists the summaries of the checkpoints thread has left.
func (h *home) summaries(t *testing.T, thread string) string {
	t.Helper()
	var out []string
	for _, cp := range decode[[]checkpoint](t, h.mustRun(t, nil, "session", "list", "--thread", thread, "-n", "0", "--json").stdout) {
		out = append(out, cp.Summary)
	}
	return strings.Join(out, " ")
}

type applied struct {
	Thread string   `json:"thread"`
	Kept   int      `json:"kept"`
	Erased []string `json:"erased"`
}

func (h *home) apply(t *testing.T) map[string]applied {
	t.Helper()
	out := map[string]applied{}
	for _, a := range decode[[]applied](t, h.mustRun(t, nil, "retention", "apply", "--json").stdout) {
		out[a.Thread] = a
	}
	return out
}

func TestRetention(t *testing.T) {
	h := newHome(t)
	h.env = append(h.env, "SPL_ACTOR="+seedActor)
	var a []receipt
	for _, s := range []string{"a0", "a1", "a2", "a3", "a4", "a5"} {
		var extra []string
		if s == "a1" {
			extra = []string{"--name", "release-1"}
		}
		a = append(a, h.save(t, "th_a", s, extra...))
	}
	for _, s := range []string{"b0", "b1", "b2", "b3"} {
		h.save(t, "th_b", s)
	}
	h.mustRun(t, nil, "session", "pin", a[2].ID, "--reason", "the design decision")

	h.mustRun(t, nil, "retention", "set", "--all", "--keep-last", "3")
	h.mustRun(t, nil, "retention", "set", "--thread", "th_a", "--keep-last", "2", "--max-age", "30d")
	show := h.mustRun(t, nil, "retention", "show").stdout
	for _, want := range []string{"all", "th_a", "30d"} {
		if !strings.Contains(show, want) {
			t.Fatalf("retention show lacks %q:\n%s", want, show)
		}
	}
	// Setting a policy erases nothing by itself.
	if got, want := h.summaries(t, "th_a"), "a0 a1 a2 a3 a4 a5"; got != want {
		t.Fatalf("th_a after set: %q, want %q", got, want)
	}

	// Every checkpoint of th_a is younger than 30 days: all kept.
	res := h.apply(t)
	if len(res["th_a"].Erased) != 0 || len(res["th_b"].Erased) != 1 {
		t.Fatalf("apply: %+v, want th_b's oldest erased only", res)
	}
	// A thread policy without an age: the newest 2, the named and the pinned.
	h.mustRun(t, nil, "retention", "set", "--thread", "th_a", "--keep-last", "2")
	res = h.apply(t)
	if got := len(res["th_a"].Erased); got != 2 {
		t.Fatalf("apply erased %d of th_a, want 2 (a0, a3)", got)
	}
	if got, want := h.summaries(t, "th_a"), "a1 a2 a4 a5"; got != want {
		t.Fatalf("th_a: %q, want %q (named a1, pinned a2, newest a4 a5)", got, want)
	}
	if got, want := h.summaries(t, "th_b"), "b1 b2 b3"; got != want {
		t.Fatalf("th_b: %q, want %q", got, want)
	}

	// Applying twice erases nothing more.
	for th, r := range h.apply(t) {
		if len(r.Erased) != 0 {
			t.Fatalf("applying twice erased %d of %s", len(r.Erased), th)
		}
	}
	// A looser policy erases nothing it keeps.
	h.mustRun(t, nil, "retention", "set", "--thread", "th_a", "--keep-last", "3")
	for th, r := range h.apply(t) {
		if len(r.Erased) != 0 {
			t.Fatalf("a looser policy erased %d of %s", len(r.Erased), th)
		}
	}
	// Enforced at every save: with keep-last 3, a6 still keeps a4; a7
	// pushes it out. Named a1 and pinned a2 stay.
	h.save(t, "th_a", "a6")
	if got, want := h.summaries(t, "th_a"), "a1 a2 a4 a5 a6"; got != want {
		t.Fatalf("th_a after a save: %q, want %q", got, want)
	}
	h.save(t, "th_a", "a7")
	if got, want := h.summaries(t, "th_a"), "a1 a2 a5 a6 a7"; got != want {
		t.Fatalf("th_a after another save: %q, want %q", got, want)
	}

	// Every retention erasure left a tombstone with reason retention, and
	// the log verifies.
	tail := h.mustRun(t, nil, "thread", "tail", "th_a", "-n", "0", "--tombstones").stdout
	if got := strings.Count(tail, ": retention]"); got != 3 {
		t.Fatalf("%d retention tombstones on th_a, want 3 (a0, a3, a4):\n%s", got, tail)
	}
	if r := h.mustRun(t, nil, "verify", "--all"); !strings.HasSuffix(r.stdout, "\nok\n") {
		t.Fatalf("verify --all:\n%s", r.stdout)
	}
}
