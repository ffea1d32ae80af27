package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// A session through the built binary: transcript, pause (its tails
// computed by spl), the process that runs the server killed, resume in a
// new process with constraints carried and time reset, and the status
// listing through every transition.
func TestSessionPauseKillResume(t *testing.T) {
	h := newHome(t)
	h.env = append(h.env, "SPL_ACTOR="+seedActor)
	kill := serveHome(t, h).kill
	const th = "sess_e2e"
	for _, ev := range []string{
		`{"agentId":"lead","type":"message","content":"plan"}`,
		`{"agentId":"lead","type":"delegation","targetAgentId":"cost","content":"estimate"}`,
		`{"agentId":"cost","type":"message","content":"c1"}`,
		`{"agentId":"lead","type":"delegation","targetAgentId":"legal","content":"review"}`,
		`{"agentId":"cost","childAgentId":"sub","type":"child_result","content":"s1"}`,
		`{"agentId":"legal","type":"message","content":"l1"}`,
		`{"agentId":"cost","type":"message","content":"c2"}`,
	} {
		h.mustRun(t, nil, "emit", "--thread", th, "--act", "SAY", "--kind", records.KindTranscript, "--body", ev)
	}
	h.mustRun(t, nil, "emit", "--thread", th, "--act", "KNOW", "--kind", records.KindScratchpad, "--body", `{"agentId":"cost","content":"rates"}`)
	sessions := func(args ...string) []string {
		t.Helper()
		l := decode[wire.Sessions](t, h.mustRun(t, nil, append([]string{"--json", "session", "list"}, args...)...).stdout)
		var out []string
		for _, s := range l.Sessions {
			out = append(out, s.SessionID+":"+s.Status)
		}
		return out
	}
	if got := sessions("--status", "running"); strings.Join(got, ",") != th+":running" {
		t.Fatalf("running: %v", got)
	}
	p := decode[wire.Paused](t, h.mustRun(t, nil, "--json", "session", "pause", th, "--depth", "2",
		"--budget-spent", "4.8", "--rounds", "7", "--elapsed", "45m").stdout)
	tails := map[string]string{}
	for _, a := range p.ActiveAgents {
		var cs []string
		for _, ev := range a.ConversationTail {
			cs = append(cs, ev.(map[string]any)["content"].(string))
		}
		tails[a.AgentID] = fmt.Sprintf("%s<%s>%d:%s", strings.Join(cs, ","), a.ParentAgentID, a.Depth, a.ExpertiseSnapshot)
	}
	want := map[string]string{"lead": "estimate,review<>0:", "cost": "s1,c2<lead>1:rates", "legal": "review,l1<lead>1:", "sub": "s1<cost>2:"}
	for a, w := range want {
		if tails[a] != w {
			t.Errorf("agent %s: %q, want %q", a, tails[a], w)
		}
	}
	if p.ConstraintState.TimeElapsedMs != 2700000 || p.RoundsCompleted != 7 || p.TranscriptReplayDepth != 2 || p.SessionID != th {
		t.Fatalf("pause: %+v", p)
	}
	// The delegations in flight, from the transcript: lead's to cost and
	// to legal, neither answered by a child_result.
	if got, _ := json.Marshal(p.PendingDelegations); string(got) != `[{"agentId":"lead","content":"estimate","targetAgentId":"cost","type":"delegation"},{"agentId":"lead","content":"review","targetAgentId":"legal","type":"delegation"}]` {
		t.Fatalf("pending delegations: %s", got)
	}
	if got := sessions("--resumable"); strings.Join(got, ",") != th+":paused" {
		t.Fatalf("resumable: %v", got)
	}
	// session show --json of the pause checkpoint: the engine's names.
	show := h.mustRun(t, nil, "--json", "session", "show", th).stdout
	for _, k := range []string{`"sessionId"`, `"constraintState"`, `"budgetSpent": 4.8`, `"activeAgents"`, `"parentAgentId"`, `"conversationTail"`, `"expertiseSnapshot"`, `"transcriptReplayDepth": 2`, `"createdAt"`, `"type": "safe_point"`} {
		if !strings.Contains(show, k) {
			t.Fatalf("session show --json has no %s:\n%s", k, show)
		}
	}

	kill() // the process that ran the embedded server dies

	rs := h.mustRun(t, nil, "--json", "session", "resume", th, "--set", "mode=fast")
	r := decode[wire.Resume](t, rs.stdout)
	if r.ResumedFrom != p.Checkpoint || r.WasStatus != "paused" || r.RoundsCompleted != 7 ||
		r.ConstraintState != (wire.ConstraintState{BudgetSpent: 4.8, RoundsCompleted: 7, TimeElapsedMs: 0}) {
		t.Fatalf("resume: %+v", r)
	}
	if m, _ := r.Memory.(map[string]any); m["mode"] != "fast" || r.MemoryEdit == nil {
		t.Fatalf("memory %v, edit %v", r.Memory, r.MemoryEdit)
	}
	// The checkpoint resumed from comes with the resume, in full: no
	// second call to session show.
	if r.Checkpoint.ID != p.Checkpoint || r.Checkpoint.Summary == "" || len(r.Checkpoint.Learnings) == 0 || r.Checkpoint.Type != "safe_point" || r.Checkpoint.Pause == nil {
		t.Fatalf("resume's checkpoint: %+v", r.Checkpoint)
	}
	if !strings.HasPrefix(r.Agents[1].Prompt, "## Session Context (Resumed)\n\nThis session was paused and has now resumed. Below is a summary of recent activity you were involved in before the pause.\n\n- ") {
		t.Fatalf("prompt:\n%s", r.Agents[1].Prompt)
	}
	if got := sessions("--status", "running"); strings.Join(got, ",") != th+":running" {
		t.Fatalf("after resume: %v", got)
	}
	h.mustRun(t, nil, "session", "mark", th, "--status", "failed", "--error", "Missing API key", "--node", "analyzer")
	l := decode[wire.Sessions](t, h.mustRun(t, nil, "--json", "session", "list", "--status", "failed").stdout)
	if len(l.Sessions) != 1 || *l.Sessions[0].Error != "Missing API key" || *l.Sessions[0].FailedAtNode != "analyzer" || l.Sessions[0].LastCheckpoint == nil {
		t.Fatalf("failed: %+v", l)
	}
	h.mustRun(t, nil, "session", "mark", th, "--status", "completed")
	if got := sessions("--resumable"); len(got) != 0 {
		t.Fatalf("resumable after completion: %v", got)
	}
	refused := h.run(t, nil, "session", "resume", th)
	if refused.code == 0 || !strings.Contains(refused.stderr, "session completed") {
		t.Fatalf("resume of a completed session: exit %d, %s", refused.code, refused.stderr)
	}
	// A checkpoint that cannot be resumed from, refused with its reason.
	h.mustRun(t, nil, "emit", "--thread", "sess_b", "--act", "LEARN", "--kind", records.KindCheckpoint, "--body",
		`{"summary":"s","learnings":["l"],"type":"node_start","can_resume_from":false,"description":"mid-write"}`)
	refused = h.run(t, nil, "session", "resume", "sess_b")
	if refused.code == 0 || !strings.Contains(refused.stderr, "mid-write") || !strings.Contains(refused.stderr, "cannot be resumed from") {
		t.Fatalf("resume from a checkpoint that cannot be: exit %d, %s", refused.code, refused.stderr)
	}
	list := decode[[]wire.SessionCheckpoint](t, h.mustRun(t, nil, "--json", "session", "list", "--thread", "sess_b", "--type", "node_start").stdout)
	if len(list) != 1 || list[0].CanResumeFrom || list[0].Type != "node_start" {
		t.Fatalf("typed list: %+v", list)
	}
	bad := h.run(t, nil, "emit", "--thread", "sess_b", "--act", "LEARN", "--kind", records.KindCheckpoint, "--body",
		`{"summary":"s","learnings":["l"],"type":"node_end"}`)
	if bad.code == 0 || !strings.Contains(bad.stderr, "body.type") {
		t.Fatalf("a checkpoint of an unknown type: exit %d, %s", bad.code, bad.stderr)
	}
}

// A secret under a covered key never reaches the data directory, whichever
// face wrote it: spl emit, the Go SDK's Emit, POST /v1/records, and a
// --set on resume.
func TestRedactionThroughEveryFace(t *testing.T) {
	h := newHome(t)
	h.env = append(h.env, "SPL_ACTOR="+seedActor)
	h.env = append(h.env, "SPL_TOKEN_FILE="+filepath.Join(h.dir, "token"))
	srv := serveHome(t, h)
	server, base, stop := srv.nats, srv.http, func() { srv.stop() }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	remote := func(args ...string) []string { return append([]string{"--server", server}, args...) }
	goClient, err := sdk.Connect(ctx, server, sdk.WithActor(seedActor), sdk.WithNATSOptions(nats.Token(srv.writeTok)))
	if err != nil {
		t.Fatal(err)
	}
	defer goClient.Close()
	// Set after the server and the Go client are up: both learn it from
	// the policy's record.
	h.mustRun(t, nil, remote("session", "redact", "--all", "--key", "api_key", "--pattern", "*_secret")...)

	secrets := map[string]string{"emit": "SECRET-emit-48151", "go": "SECRET-go-62342", "http": "SECRET-http-77777", "set": "SECRET-set-90210", "nested": "SECRET-nested-31415"}
	h.mustRun(t, nil, remote("emit", "--thread", "red", "--act", "KNOW", "--kind", "agent.step", "--body",
		fmt.Sprintf(`{"api_key":%q,"cfg":{"db_secret":%q},"ok":1}`, secrets["emit"], secrets["nested"]))...)
	if _, err := goClient.Emit(ctx, sdk.Event{Act: records.ActKnow, Kind: "agent.step", Thread: "red",
		Body: map[string]any{"API_KEY": secrets["go"]}}); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"thread":"red","act":"KNOW","kind":"agent.step","actor":%q,"body":{"api_key":%q}}`, seedActor, secrets["http"])
	req, err := http.NewRequest(http.MethodPost, base+"/v1/records", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+srv.writeTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rec wire.Record
	_ = json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || string(rec.Body) != `{"redacted":["api_key"]}` {
		t.Fatalf("POST /v1/records: %s, body %s", resp.Status, rec.Body)
	}
	h.mustRun(t, nil, remote("session", "save", "--thread", "red", "--summary", "s", "--learnings", "l")...)
	r := decode[wire.Resume](t, h.mustRun(t, nil, remote("--json", "session", "resume", "red", "--set", "api_key="+secrets["set"])...).stdout)
	if strings.Join(r.Redacted, ",") != "api_key" {
		t.Fatalf("resume: redacted %v", r.Redacted)
	}
	tail := h.mustRun(t, nil, remote("--json", "thread", "tail", "red", "-n", "20")...).stdout
	if !strings.Contains(tail, `"redacted": [`) {
		t.Fatalf("no redacted list on the thread:\n%s", tail)
	}
	goClient.Close()
	stop()
	for face, s := range secrets {
		if files := filesHolding(t, h.dir, s); len(files) > 0 {
			t.Errorf("the secret written through %s is in %v", face, files)
		}
	}
}
