package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// largeState writes a JSON object of about n bytes, the state a LangGraph
// or checkpoint-agent user keeps: a list of messages, a marker in the
// last one.
func largeState(t *testing.T, marker string, n int) string {
	t.Helper()
	msgs := make([]string, 0, n/1024+1)
	for len(msgs)*1024 < n {
		msgs = append(msgs, fmt.Sprintf("message %d ", len(msgs))+strings.Repeat("x", 1000))
	}
	msgs = append(msgs, marker)
	data, err := json.Marshal(map[string]any{"messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A checkpoint of several MB saves and shows whole, on the embedded
// default and through spl serve's door, and spl verify checks it; a body
// of 10 MB emits. (A 1.2 MB state was refused: "the limit is 1048576".)
func TestLargeStateThroughTheCLI(t *testing.T) {
	h := newHome(t)
	state := largeState(t, "LAST-MESSAGE-embedded", 3<<20)
	h.mustRun(t, nil, "session", "save", "--thread", "th_big", "--summary", "a long conversation",
		"--learnings", "kept it all", "--state-file", state, "--actor", "did:sync:agent:dev")
	show := h.mustRun(t, nil, "--json", "session", "show", "th_big").stdout
	if !strings.Contains(show, "LAST-MESSAGE-embedded") || len(show) < 3<<20 {
		t.Fatalf("session show: %d bytes, marker %v; want the whole state", len(show), strings.Contains(show, "LAST-MESSAGE-embedded"))
	}
	body := largeState(t, "LAST-MESSAGE-emit", 10<<20)
	h.mustRun(t, nil, "emit", "--thread", "th_big", "--act", "KNOW", "--kind", "agent.state", "--body-file", body, "--actor", "did:sync:agent:dev")
	h.mustRun(t, nil, "verify", "--all")

	s := serveHome(t, h)
	state2 := largeState(t, "LAST-MESSAGE-door", 3<<20)
	h.mustRun(t, nil, "--server", s.nats, "--token-file", filepath.Join(h.dir, "token"), "session", "save", "--thread", "th_big2",
		"--summary", "through the door", "--learnings", "kept it all", "--state-file", state2, "--actor", "did:sync:agent:dev")
	code, got := do(t, "GET", s.http+"/v1/threads/th_big2/checkpoint", s.readTok, "")
	if code != 200 || !strings.Contains(got, "LAST-MESSAGE-door") {
		t.Fatalf("latest checkpoint over HTTP: code %d, %d bytes, marker %v", code, len(got), strings.Contains(got, "LAST-MESSAGE-door"))
	}
}

// A record over the server's --max-record is refused by every face with
// the log's one rule, naming body and the limit, and nothing is stored:
// the CLI through the door (its body refused as it is staged) and HTTP.
func TestRecordOverTheLimit(t *testing.T) {
	h := newHome(t)
	s := serveHome(t, h, "--max-record", "2097152")
	body := largeState(t, "OVER", 3<<20)
	r := h.run(t, nil, "--server", s.nats, "--token-file", filepath.Join(h.dir, "token"),
		"emit", "--thread", "th_over", "--act", "KNOW", "--kind", "agent.state", "--body-file", body, "--actor", "did:sync:agent:dev")
	if r.code != 1 || !strings.Contains(r.stderr, "body") || !strings.Contains(r.stderr, "the limit is 2097152") {
		t.Fatalf("emit over the limit through the door: exit %d, stderr %q; want 1 naming body and the limit", r.code, r.stderr)
	}
	// Under the request limit (a quarter over --max-record), over the
	// record limit: the log's rule answers.
	data, err := os.ReadFile(largeState(t, "OVER", 2200<<10))
	if err != nil {
		t.Fatal(err)
	}
	code, got := do(t, "POST", s.http+"/v1/records", s.writeTok,
		fmt.Sprintf(`{"thread":"th_over","act":"KNOW","kind":"agent.state","actor":"did:sync:agent:dev","body":%s}`, data))
	if code != 413 || !strings.Contains(got, `"field":"body"`) || !strings.Contains(got, "the limit is 2097152") {
		t.Fatalf("POST over the limit: %d %.200s; want 413 naming body and the limit", code, got)
	}
	if code, got := do(t, "GET", s.http+"/v1/threads/th_over/records", s.readTok, ""); code != 200 || strings.Contains(got, "OVER") {
		t.Fatalf("thread after the refusals: %d %.200s; want it empty", code, got)
	}
}
