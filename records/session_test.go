package records

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

func bptr(b bool) *bool { return &b }

func TestExecStateRoundTrip(t *testing.T) {
	at := time.UnixMilli(1700000000123).UTC()
	s := &ExecState{
		Type: CheckpointNodeComplete, CurrentNode: "collector", NextNode: "analyzer",
		ExecutionPath: []string{"start", "collector"},
		SharedMemory:  map[string]any{"topic": "go"}, IsClean: bptr(true), CanResumeFrom: bptr(false),
		Description: "done",
		Pause: &SessionPause{
			SessionID: "s1", ConstraintState: ConstraintState{BudgetSpent: 4.8, RoundsCompleted: 3, TimeElapsedMs: 2700000},
			ActiveAgents: []AgentCheckpoint{{AgentID: "a", Depth: 0, ConversationTail: []map[string]any{{"agentId": "a", "type": "message"}}, ExpertiseSnapshot: "notes"},
				{AgentID: "c", ParentAgentID: "a", Depth: 1, ConversationTail: []map[string]any{}}},
			RoundsCompleted: 3, TranscriptReplayDepth: 50, CreatedAt: at,
		},
	}
	cp := &Checkpoint{Summary: "s", Learnings: []string{"l"}, Extra: s.Put(nil)}
	rec, err := New(ActLearn, KindCheckpoint, "th", "did:sync:agent:dev", at, cp)
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeCheckpoint(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ExecStateOf(d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != s.Type || got.CurrentNode != "collector" || got.NextNode != "analyzer" || !slices.Equal(got.ExecutionPath, s.ExecutionPath) ||
		!got.Clean() || got.Resumable() || got.Description != "done" || got.SharedMemory["topic"] != "go" {
		t.Fatalf("decoded %+v, want %+v", got, s)
	}
	p := got.Pause
	if p == nil || p.SessionID != "s1" || p.ConstraintState != s.Pause.ConstraintState || p.RoundsCompleted != 3 ||
		p.TranscriptReplayDepth != 50 || !p.CreatedAt.Equal(at) || len(p.ActiveAgents) != 2 {
		t.Fatalf("pause=%+v, want %+v", p, s.Pause)
	}
	if a := p.ActiveAgents[1]; a.AgentID != "c" || a.ParentAgentID != "a" || a.Depth != 1 || len(a.ConversationTail) != 0 {
		t.Fatalf("agent=%+v", a)
	}
	if a := p.ActiveAgents[0]; a.ExpertiseSnapshot != "notes" || !reflect.DeepEqual(a.ConversationTail, []map[string]any{{"agentId": "a", "type": "message"}}) {
		t.Fatalf("agent=%+v", a)
	}
	// Untyped: clean and resumable.
	if u := (&ExecState{}); !u.Clean() || !u.Resumable() {
		t.Fatal("untyped checkpoint must be clean and resumable")
	}
}

func TestExecStateRefusals(t *testing.T) {
	pause := func(edit func(m map[string]any)) map[string]any {
		m := (&SessionPause{SessionID: "s", TranscriptReplayDepth: 50, ActiveAgents: []AgentCheckpoint{{AgentID: "a"}}}).value()
		edit(m)
		return m
	}
	for _, tc := range []struct {
		extra map[string]any
		field string
	}{
		{map[string]any{"type": "node_finish"}, "body.type"},
		{map[string]any{"type": 3}, "body.type"},
		{map[string]any{"current_node": 1}, "body.current_node"},
		{map[string]any{"execution_path": []any{"a", 2}}, "body.execution_path[1]"},
		{map[string]any{"shared_memory": "x"}, "body.shared_memory"},
		{map[string]any{"is_clean": "yes"}, "body.is_clean"},
		{map[string]any{"can_resume_from": 1}, "body.can_resume_from"},
		{map[string]any{"pause": pause(func(m map[string]any) { m["sessionId"] = "" })}, "body.pause.sessionId"},
		{map[string]any{"pause": pause(func(m map[string]any) { m["transcriptReplayDepth"] = 0 })}, "body.pause.transcriptReplayDepth"},
		{map[string]any{"pause": pause(func(m map[string]any) { m["createdAt"] = "yesterday" })}, "body.pause.createdAt"},
		{map[string]any{"pause": pause(func(m map[string]any) {
			m["constraintState"] = map[string]any{"budgetSpent": -1, "roundsCompleted": 0, "timeElapsedMs": 0}
		})}, "body.pause.constraintState.budgetSpent"},
		{map[string]any{"pause": pause(func(m map[string]any) {
			m["activeAgents"] = []any{map[string]any{"agentId": "", "depth": 0, "conversationTail": []any{}}}
		})}, "body.pause.activeAgents[0].agentId"},
		{map[string]any{"pause": pause(func(m map[string]any) {
			m["activeAgents"] = []any{map[string]any{"agentId": "a", "depth": 0, "conversationTail": []any{"x"}}}
		})}, "body.pause.activeAgents[0].conversationTail[0]"},
	} {
		_, err := New(ActLearn, KindCheckpoint, "th", "did:sync:agent:dev", time.Now(), &Checkpoint{Summary: "s", Learnings: []string{"l"}, Extra: tc.extra})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("extra %v: err=%v, want a FieldError on %s", tc.extra, err, tc.field)
		}
	}
}

func TestSessionEvents(t *testing.T) {
	for _, kind := range SessionEventKinds {
		body := SessionEvent{Error: "boom", Node: "n"}.Body(kind)
		if _, err := New(ActDo, kind, "th", "did:sync:agent:dev", time.Now(), body); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if SessionStatusOf(kind) == "" {
			t.Fatalf("%s: no status", kind)
		}
	}
	for _, tc := range []struct {
		kind  string
		body  map[string]any
		field string
	}{
		{KindSessionPaused, map[string]any{"type": "session_resumed"}, "body.type"},
		{KindSessionFailed, map[string]any{}, "body.type"},
		{KindSessionFailed, map[string]any{"type": "session_failed", "error": 1}, "body.error"},
		{KindSessionResumed, map[string]any{"type": "session_resumed", "checkpoint": "nope"}, "body.checkpoint"},
		{KindSessionMemory, map[string]any{"type": "session_memory", "set": "x"}, "body.set"},
	} {
		_, err := New(ActDo, tc.kind, "th", "did:sync:agent:dev", time.Now(), tc.body)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s %v: err=%v, want a FieldError on %s", tc.kind, tc.body, err, tc.field)
		}
	}
}

func TestRedact(t *testing.T) {
	pol := &Redaction{Scope: ScopeThread, Keys: []string{"API_KEY", "auth.password"}, Patterns: []string{"*_token", "creds.*"}}
	body, err := BodyFromJSON([]byte(`{"api_key":"s1","auth":{"password":"s2","user":"u"},"password":"kept",
		"items":[{"refresh_token":"s3"},{"x":1}],"creds":{"a":"s4"},"redacted":["earlier"],"note":"n"}`))
	if err != nil {
		t.Fatal(err)
	}
	out, removed, err := Redact(body, pol.Covers)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"api_key", "auth.password", "creds.a", "earlier", "items[0].refresh_token"}
	if !slices.Equal(removed, want) {
		t.Fatalf("removed=%v, want %v", removed, want)
	}
	j, err := BodyToJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(j), `{"auth":{"user":"u"},"creds":{},"items":[{},{"x":1}],"note":"n","password":"kept","redacted":["api_key","auth.password","creds.a","earlier","items[0].refresh_token"]}`; got != want {
		t.Fatalf("redacted body=%s\nwant %s", got, want)
	}
	// Nothing covered: the same bytes.
	same, removed, err := Redact(out, pol.Covers)
	if err != nil || removed != nil || string(same) != string(out) {
		t.Fatalf("second redaction changed the body: %v %v", removed, err)
	}
}

func TestRedactionPolicy(t *testing.T) {
	if _, err := New(ActKnow, KindRedaction, RedactionThread, "did:sync:agent:dev", time.Now(), &Redaction{Scope: ScopeAll, Keys: []string{"k"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		thread string
		r      Redaction
		field  string
	}{
		{"th", Redaction{Scope: ScopeAll}, "body.scope"},
		{RedactionThread, Redaction{Scope: ScopeThread}, "body.scope"},
		{"th", Redaction{Scope: "some"}, "body.scope"},
		{"th", Redaction{Scope: ScopeThread, Keys: []string{""}}, "body.keys[0]"},
		{"th", Redaction{Scope: ScopeThread, Patterns: []string{"a", "[x"}}, "body.patterns[1]"},
	} {
		_, err := New(ActKnow, KindRedaction, tc.thread, "did:sync:agent:dev", time.Now(), &tc.r)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v on %s: err=%v, want a FieldError on %s", tc.r, tc.thread, err, tc.field)
		}
	}
}
