package sdk_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

const agentActor = "did:sync:agent:dev"

// transcript is three agents (lead, cost, legal) with interleaved
// delegations, and cost's child sub.
var transcript = []map[string]any{
	{"agentId": "lead", "type": "message", "content": "plan"},
	{"agentId": "lead", "type": "delegation", "targetAgentId": "cost", "content": "estimate"},
	{"agentId": "cost", "type": "message", "content": "c1"},
	{"agentId": "lead", "type": "delegation", "targetAgentId": "legal", "content": "review"},
	{"agentId": "legal", "type": "message", "content": "l1"},
	{"agentId": "cost", "type": "delegation", "targetAgentId": "sub", "content": "detail"},
	{"agentId": "cost", "childAgentId": "sub", "type": "child_result", "content": "s1"},
	{"agentId": "legal", "type": "message", "content": "l2"},
	{"agentId": "sub", "type": "message", "content": "s2"},
	{"agentId": "cost", "type": "message", "content": "c2"},
}

func emitTranscript(t *testing.T, c *sdk.Client, thread string) {
	t.Helper()
	for _, ev := range transcript {
		if _, err := c.Emit(ctxT(t), sdk.Event{Act: records.ActSay, Kind: records.KindTranscript, Thread: thread, Actor: agentActor, Body: ev}); err != nil {
			t.Fatal(err)
		}
	}
}

func contents(tail []map[string]any) []string {
	out := make([]string, len(tail))
	for i, ev := range tail {
		out[i], _ = ev["content"].(string)
	}
	return out
}

func TestAgentTails(t *testing.T) {
	want := map[string][]string{
		"lead":  {"plan", "estimate", "review"},
		"cost":  {"estimate", "c1", "detail", "s1", "c2"},
		"legal": {"review", "l1", "l2"},
		"sub":   {"detail", "s1", "s2"},
	}
	for _, depth := range []int{1, 3, 50} {
		for agent, all := range want {
			w := all[max(0, len(all)-depth):]
			if got := contents(sdk.AgentTail(transcript, agent, depth)); !slices.Equal(got, w) {
				t.Errorf("depth %d, %s: tail %v, want %v", depth, agent, got, w)
			}
		}
	}
	agents, parents := sdk.TranscriptAgents(transcript)
	if !slices.Equal(agents, []string{"lead", "cost", "legal", "sub"}) {
		t.Fatalf("agents=%v", agents)
	}
	if parents["cost"] != "lead" || parents["legal"] != "lead" || parents["sub"] != "cost" || parents["lead"] != "" {
		t.Fatalf("parents=%v", parents)
	}
}

func status(t *testing.T, c *sdk.Client, thread string) sdk.SessionInfo {
	t.Helper()
	s, err := c.Session(ctxT(t), thread, sdk.Freshness{Fresh: true})
	if err != nil {
		t.Fatalf("Session(%s): %v", thread, err)
	}
	return s
}

func listed(t *testing.T, c *sdk.Client, f sdk.SessionFilter) []string {
	t.Helper()
	f.Fresh = true
	ss, err := c.Sessions(ctxT(t), f)
	if err != nil {
		t.Fatalf("Sessions(%+v): %v", f, err)
	}
	var out []string
	for _, s := range ss {
		out = append(out, s.Thread+":"+s.Status)
	}
	slices.Sort(out)
	return out
}

func TestPauseCrashResume(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	c1, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor(agentActor))
	if err != nil {
		t.Fatal(err)
	}
	const th = "sess_a"
	emitTranscript(t, c1, th)
	for _, pad := range []map[string]any{{"agentId": "cost", "content": "old"}, {"agentId": "cost", "content": "rates: 3"}, {"agentId": "legal", "content": "clauses"}} {
		if _, err := c1.Emit(ctx, sdk.Event{Act: records.ActKnow, Kind: records.KindScratchpad, Thread: th, Body: pad}); err != nil {
			t.Fatal(err)
		}
	}
	if got := status(t, c1, th).Status; got != sdk.StatusRunning {
		t.Fatalf("status=%s, want running", got)
	}
	p, err := c1.PauseSession(ctx, th, "", sdk.PauseOptions{Depth: 3, BudgetSpent: 4.8, Rounds: 7, Elapsed: 45 * time.Minute,
		Reason: "budget", Memory: map[string]any{"topic": "pricing"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p.Pause.ActiveAgents); got != 4 {
		t.Fatalf("agents=%d", got)
	}
	cost := p.Pause.ActiveAgents[1]
	if cost.AgentID != "cost" || cost.ParentAgentID != "lead" || cost.Depth != 1 || cost.ExpertiseSnapshot != "rates: 3" ||
		!slices.Equal(contents(cost.ConversationTail), []string{"detail", "s1", "c2"}) {
		t.Fatalf("cost=%+v", cost)
	}
	if sub := p.Pause.ActiveAgents[3]; sub.AgentID != "sub" || sub.Depth != 2 || sub.ParentAgentID != "cost" {
		t.Fatalf("sub=%+v", sub)
	}
	if p.Pause.ConstraintState.TimeElapsedMs != 45*60*1000 || p.Pause.TranscriptReplayDepth != 3 || p.Pause.SessionID != th {
		t.Fatalf("pause=%+v", p.Pause)
	}
	if got := status(t, c1, th).Status; got != sdk.StatusPaused {
		t.Fatalf("status=%s, want paused", got)
	}
	// A crash: queued records that never land, and no Flush.
	for range 3 {
		if _, err := c1.EmitAsync(ctx, sdk.Event{Act: records.ActSay, Kind: "agent.noise", Thread: "noise", Body: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
	}
	c1.Close()

	c2, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor(agentActor))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	rc, err := c2.ResumeSession(ctx, th, "", sdk.ResumeOptions{Set: map[string]any{"topic": "costs"}})
	if err != nil {
		t.Fatal(err)
	}
	if rc.From.ID != p.Checkpoint.ID || rc.WasStatus != sdk.StatusPaused {
		t.Fatalf("resumed from %s (was %s), want %s", rc.From.ID, rc.WasStatus, p.Checkpoint.ID)
	}
	if want := (records.ConstraintState{BudgetSpent: 4.8, RoundsCompleted: 7, TimeElapsedMs: 0}); rc.ConstraintState != want || rc.RoundsCompleted != 7 {
		t.Fatalf("constraints=%+v rounds=%d, want %+v and 7", rc.ConstraintState, rc.RoundsCompleted, want)
	}
	if rc.Memory["topic"] != "costs" || rc.MemoryEdit == nil {
		t.Fatalf("memory=%v edit=%v", rc.Memory, rc.MemoryEdit)
	}
	wantPrompt := "## Session Context (Resumed)\n\nThis session was paused and has now resumed. Below is a summary of recent activity you were involved in before the pause.\n\n" +
		`- {"agentId":"lead","content":"review","targetAgentId":"legal","type":"delegation"}` + "\n" +
		`- {"agentId":"legal","content":"l1","type":"message"}` + "\n" +
		`- {"agentId":"legal","content":"l2","type":"message"}` + "\n"
	if got := rc.Agents[2].Prompt; got != wantPrompt {
		t.Fatalf("legal's prompt:\n%s\nwant:\n%s", got, wantPrompt)
	}
	if rc.Agents[2].ExpertiseSnapshot != "clauses" {
		t.Fatalf("legal's scratch pad %q", rc.Agents[2].ExpertiseSnapshot)
	}
	ev, err := c2.Latest(ctx, th, records.KindSessionResumed)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := records.DecodeSessionEvent(ev.Header.Kind, ev.Body); err != nil || e.Checkpoint != p.Checkpoint.ID.String() {
		t.Fatalf("resumed event %+v, %v: want it to name %s", e, err, p.Checkpoint.ID)
	}
	if got := status(t, c2, th).Status; got != sdk.StatusRunning {
		t.Fatalf("status=%s, want running", got)
	}
}

func TestSessionStatusAndRefusals(t *testing.T) {
	c := open(t, sdk.WithActor(agentActor))
	ctx := ctxT(t)
	save := func(thread string, st records.ExecState) sdk.Receipt {
		t.Helper()
		r, err := c.SaveCheckpoint(ctx, thread, "", records.Checkpoint{Summary: "s", Learnings: []string{"l"}, Extra: st.Put(nil)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	yes, no := true, false
	clean := save("s_fail", records.ExecState{Type: records.CheckpointNodeComplete, CurrentNode: "collector", IsClean: &yes})
	save("s_fail", records.ExecState{Type: records.CheckpointNodeStart, CurrentNode: "analyzer", IsClean: &no})
	stuck := save("s_fail", records.ExecState{Type: records.CheckpointNodeComplete, CurrentNode: "analyzer", CanResumeFrom: &no, Description: "mid-write"})
	if _, err := c.MarkSession(ctx, "s_fail", "", records.KindSessionFailed, records.SessionEvent{Error: "Missing API key", Node: "analyzer"}); err != nil {
		t.Fatal(err)
	}
	s := status(t, c, "s_fail")
	if s.Status != sdk.StatusFailed || s.Error != "Missing API key" || s.FailedAt != "analyzer" || s.LastCheckpoint != stuck.ID || s.Created.IsZero() {
		t.Fatalf("failed session=%+v", s)
	}
	if !s.Resumable {
		t.Fatalf("failed session with a clean checkpoint under a final one: not resumable: %+v", s)
	}
	// A failed session none of whose checkpoints is clean and resumable
	// is not offered: its resume would be refused.
	save("s_dirty", records.ExecState{Type: records.CheckpointNodeStart, CurrentNode: "a", IsClean: &no})
	save("s_dirty", records.ExecState{Type: records.CheckpointNodeComplete, CurrentNode: "a", CanResumeFrom: &no})
	if _, err := c.MarkSession(ctx, "s_dirty", "", records.KindSessionFailed, records.SessionEvent{Error: "boom", Node: "a"}); err != nil {
		t.Fatal(err)
	}
	if s := status(t, c, "s_dirty"); s.Status != sdk.StatusFailed || s.Resumable {
		t.Fatalf("failed session without a clean point: %+v, want failed, not resumable", s)
	}
	if _, err := c.ResumeSession(ctx, "s_dirty", "", sdk.ResumeOptions{}); !errors.Is(err, sdk.ErrNoResumePoint) {
		t.Fatalf("resume of a failed session without a clean point: %v", err)
	}
	// Checkpoints by type and by clean.
	cps, err := c.SessionCheckpoints(ctx, "s_fail", sdk.CheckpointQuery{Type: records.CheckpointNodeComplete, Clean: true})
	if err != nil || len(cps) != 2 || cps[0].ID != clean.ID || cps[1].ID != stuck.ID {
		t.Fatalf("node_complete clean checkpoints: %v, %v", cps, err)
	}
	if _, err := c.SessionCheckpoints(ctx, "s_fail", sdk.CheckpointQuery{Type: "node_end"}); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("type node_end: %v", err)
	}
	// Refusals, each named.
	if _, err := c.ResumeSession(ctx, "s_fail", "", sdk.ResumeOptions{From: stuck.ID}); !errors.Is(err, sdk.ErrNotResumable) || !strings.Contains(err.Error(), "mid-write") {
		t.Fatalf("resume from a checkpoint that cannot be resumed from: %v", err)
	}
	if _, err := c.ResumeSession(ctx, "s_fail", "", sdk.ResumeOptions{From: records.ID{1}}); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("resume from a checkpoint not on the thread: %v", err)
	}
	if _, err := c.ResumeSession(ctx, "s_none", "", sdk.ResumeOptions{}); !errors.Is(err, sdk.ErrNoResumePoint) {
		t.Fatalf("resume without a checkpoint: %v", err)
	}
	if _, err := c.PauseSession(ctx, "s_fail", "", sdk.PauseOptions{Depth: -1}); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("pause at depth -1: %v", err)
	}
	// A failed session resumes from its last clean, resumable checkpoint.
	rc, err := c.ResumeSession(ctx, "s_fail", "", sdk.ResumeOptions{})
	if err != nil || rc.From.ID != clean.ID {
		t.Fatalf("resume failed session: from %v, %v; want %s", rc.From.ID, err, clean.ID)
	}
	if j, err := rc.Wire(); err != nil || j.ResumeAt != "collector" || j.Checkpoint.ID != clean.ID.String() || j.Checkpoint.CurrentNode != "collector" {
		t.Fatalf("resume's wire form: at %q, checkpoint %s (%v); want at collector, from %s", j.ResumeAt, j.Checkpoint.ID, err, clean.ID)
	}
	// Every transition, in the listing.
	save("s_cancel", records.ExecState{})
	if _, err := c.MarkSession(ctx, "s_cancel", "", records.KindSessionCancelled, records.SessionEvent{Reason: "user"}); err != nil {
		t.Fatal(err)
	}
	save("s_done", records.ExecState{})
	if _, err := c.PauseSession(ctx, "s_done", "", sdk.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := listed(t, c, sdk.SessionFilter{Resumable: true}), []string{"s_cancel:cancelled", "s_done:paused"}; !slices.Equal(got, want) {
		t.Fatalf("resumable=%v, want %v", got, want)
	}
	if got, want := listed(t, c, sdk.SessionFilter{Resumable: true, Status: []string{sdk.StatusFailed}}), []string(nil); !slices.Equal(got, want) {
		t.Fatalf("resumable failed=%v, want none (s_dirty has no clean point)", got)
	}
	// A page of the resumable is cut from the resumable alone.
	for off, want := range []string{"s_done:paused", "s_cancel:cancelled"} {
		if got := listed(t, c, sdk.SessionFilter{Resumable: true, Offset: off, Limit: 1}); !slices.Equal(got, []string{want}) {
			t.Fatalf("resumable page %d of one: %v, want %s", off, got, want)
		}
	}
	if _, err := c.MarkSession(ctx, "s_done", "", records.KindSessionCompleted, records.SessionEvent{}); err != nil {
		t.Fatal(err)
	}
	if got, want := listed(t, c, sdk.SessionFilter{}), []string{"s_cancel:cancelled", "s_dirty:failed", "s_done:completed", "s_fail:running"}; !slices.Equal(got, want) {
		t.Fatalf("sessions=%v, want %v", got, want)
	}
	if got, want := listed(t, c, sdk.SessionFilter{Status: []string{sdk.StatusCompleted}}), []string{"s_done:completed"}; !slices.Equal(got, want) {
		t.Fatalf("completed=%v, want %v", got, want)
	}
	if got := listed(t, c, sdk.SessionFilter{Limit: 1, Offset: 1}); len(got) != 1 {
		t.Fatalf("page of one: %v", got)
	}
	if _, err := c.ResumeSession(ctx, "s_done", "", sdk.ResumeOptions{}); !errors.Is(err, sdk.ErrSessionCompleted) {
		t.Fatalf("resume completed: %v", err)
	}
	if _, err := c.PauseSession(ctx, "s_done", "", sdk.PauseOptions{}); !errors.Is(err, sdk.ErrSessionCompleted) {
		t.Fatalf("pause completed: %v", err)
	}
	if _, err := c.Sessions(ctx, sdk.SessionFilter{Status: []string{"lost"}}); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("status lost: %v", err)
	}
}

// filesHolding lists the files under dir whose bytes hold secret.
func filesHolding(t *testing.T, dir, secret string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRedactionKeepsSecretsOffTheLog(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor(agentActor))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{Thread: "s_sec", Keys: []string{"api_key"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{All: true, Patterns: []string{"*_token"}}); err != nil {
		t.Fatal(err)
	}
	const s1, s2, s3, s4 = "sk-SECRET-one-91827", "tok-SECRET-two-55123", "sk-SECRET-three-77001", "sk-SECRET-four-31337"
	r, err := c.Emit(ctx, sdk.Event{Act: records.ActKnow, Kind: "agent.step", Thread: "s_sec",
		Body: map[string]any{"api_key": s1, "nested": map[string]any{"refresh_token": s2, "ok": "kept"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The async path, and a checkpoint's memory.
	pe, err := c.EmitAsync(ctx, sdk.Event{Act: records.ActKnow, Kind: "agent.step", Thread: "other", Body: map[string]any{"access_token": s3}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pe.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PauseSession(ctx, "s_sec", "", sdk.PauseOptions{Memory: map[string]any{"api_key": s1}}); err != nil {
		t.Fatal(err)
	}
	rc, err := c.ResumeSession(ctx, "s_sec", "", sdk.ResumeOptions{Set: map[string]any{"api_key": s4, "mode": "fast"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rc.Redacted, []string{"api_key"}) || rc.Memory["api_key"] != s4 {
		t.Fatalf("resume: redacted %v, memory %v", rc.Redacted, rc.Memory)
	}
	for _, rec := range count(t, c, "s_sec") {
		if rec.ID == r.ID {
			j, _ := records.BodyToJSON(rec.Body)
			if got, want := string(j), `{"nested":{"ok":"kept"},"redacted":["api_key","nested.refresh_token"]}`; got != want {
				t.Fatalf("stored body %s, want %s", got, want)
			}
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{s1, s2, s3, s4} {
		if files := filesHolding(t, dir, s); len(files) > 0 {
			t.Errorf("secret %s is in %v", s, files)
		}
	}
}

// A run's payloads follow the redaction policies of the run's thread,
// inline and stored beside the log alike: the secret is in no file of the
// data directory, and the resumed snapshot says what was removed.
func TestRedactionCoversRunPayloads(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor(agentActor))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{Thread: "th_run", Keys: []string{"api_key"}}); err != nil {
		t.Fatal(err)
	}
	const small, big = "sk-RUN-SMALL-SECRET", "sk-RUN-BIG-SECRET"
	r, err := c.OpenRun(ctx, "th_run", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Checkpoint(ctx, "run_started", map[string]any{"agent_name": "a", "api_key": small}); err != nil {
		t.Fatal(err)
	}
	// Past the inline limit: the payload goes to the blob bucket.
	messages := make([]any, 0, 4000)
	for i := range 4000 {
		messages = append(messages, map[string]any{"role": "user", "content": fmt.Sprintf("message %d with some padding text", i)})
	}
	if err := r.Checkpoint(ctx, "step_started", map[string]any{"step": 1, "messages": messages, "context": map[string]any{"api_key": big}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(ctx, sdk.Terminal{Result: "done"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{small, big} {
		if got := filesHolding(t, dir, s); len(got) != 0 {
			t.Fatalf("secret %s in %v", s, got)
		}
	}
}

// A fork's --set values follow the redaction policies of the thread it
// starts, as every sealed record does: the secret is in no file.
func TestRedactionCoversForkSet(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor(agentActor))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{All: true, Keys: []string{"api_key"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SaveCheckpoint(ctx, "th_src", "", records.Checkpoint{Summary: "s", Learnings: []string{"l"}}); err != nil {
		t.Fatal(err)
	}
	const secret = "sk-FORK-SET-SECRET"
	if _, err := c.Fork(ctx, "th_src", sdk.ForkRequest{To: "th_fork", Set: []sdk.StateSet{{Path: "api_key", Value: []byte(`"` + secret + `"`)}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := filesHolding(t, dir, secret); len(got) != 0 {
		t.Fatalf("secret in %v", got)
	}
}
