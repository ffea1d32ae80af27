package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEmitStdinAndTail(t *testing.T) {
	h := newHome(t)
	const thread = "th_emit"

	first := h.mustRun(t, strings.NewReader(`{"step": 1, "tool": "grep", "args": ["-r", "mutex"]}`),
		"emit", "--thread", thread, "--act", "KNOW", "--kind", "agent.step", "--body-file", "-",
		"--actor", seedActor)
	m := idLine.FindStringSubmatch(first.stdout)
	if m == nil || !clockLine.MatchString(first.stdout) {
		t.Fatalf("emit printed no id and clock:\n%s", first.stdout)
	}
	id := m[1]

	second := decode[record](t, h.mustRun(t, strings.NewReader(`{"step": 2, "ok": true}`),
		"emit", "--thread", thread, "--act", "DO", "--kind", "agent.step", "--body-file", "-",
		"--actor", seedActor, "--json").stdout)
	if second.ID == "" || second.ID == id || second.Clock == 0 {
		t.Fatalf("emit --json = %+v, want a new id and a clock", second)
	}

	tail := h.mustRun(t, nil, "thread", "tail", thread)
	for _, want := range []string{id[len(id)-12:], "KNOW", "DO", "agent.step", `"tool":"grep"`} {
		if !strings.Contains(tail.stdout, want) {
			t.Errorf("thread tail lacks %q:\n%s", want, tail.stdout)
		}
	}

	recs := decode[[]record](t, h.mustRun(t, nil, "thread", "tail", thread, "--json").stdout)
	if got, want := len(recs), 2; got != want {
		t.Fatalf("len(tail)=%v, want %v", got, want)
	}
	if got, want := recs[0].ID, id; got != want {
		t.Fatalf("tail[0].id=%v, want %v", got, want)
	}
	if recs[1].Prev == nil || *recs[1].Prev != id {
		t.Fatalf("tail[1].prev=%v, want %v", recs[1].Prev, id)
	}
	var body struct {
		Step int      `json:"step"`
		Tool string   `json:"tool"`
		Args []string `json:"args"`
	}
	if err := json.Unmarshal(recs[0].Body, &body); err != nil {
		t.Fatalf("tail[0].body: %v", err)
	}
	if got, want := body.Tool+" "+strings.Join(body.Args, " "), "grep -r mutex"; got != want || body.Step != 1 {
		t.Fatalf("tail[0].body=%s, want step 1 and %q", recs[0].Body, want)
	}
	if got, want := recs[1].Actor, seedActor; got != want {
		t.Fatalf("tail[1].actor=%v, want %v", got, want)
	}
}
