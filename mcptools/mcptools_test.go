package mcptools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/mcptools"
	"github.com/spl-dev/spl/sdk"
)

const actor = "did:sync:agent:mcp"

// connect opens an embedded client and an MCP client session on the
// server of right, through the SDK's in-memory transport.
func connect(t *testing.T, right mcptools.Right) (*sdk.Client, *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Open(ctx, sdk.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, session(t, c, right)
}

func session(t *testing.T, c *sdk.Client, right mcptools.Right) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	srv, err := mcptools.New(c, right, mcptools.Options{Actor: actor})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool; the protocol must not fail, whatever the tool says.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
	}
	return res, out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestToolsSaveAndReadBack(t *testing.T) {
	c, cs := connect(t, mcptools.Write)
	ctx := context.Background()
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*mcp.Tool{}
	for _, tool := range tl.Tools {
		names[tool.Name] = tool
	}
	for _, n := range []string{"save_checkpoint", "latest_checkpoint", "list_session_checkpoints", "inspect_checkpoint", "list_resumable_sessions",
		"resume_session", "pause_session", "fork_session", "diff_checkpoints", "emit", "thread_tail", "search_threads", "list_runs", "get_run", "cancel_run", "signal_run"} {
		if names[n] == nil {
			t.Errorf("tool %s missing", n)
		}
	}
	if a := names["latest_checkpoint"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("latest_checkpoint is not marked read-only")
	}
	res, saved := call(t, cs, "save_checkpoint", map[string]any{"thread": "th_mcp", "summary": "Completed auth refactor",
		"learnings": []string{"mutex pattern worked"}, "next_steps": []string{"Write migration tests"}, "name": "auth-done"})
	if res.IsError || saved["id"] == nil {
		t.Fatalf("save_checkpoint: %s", text(res))
	}
	// What MCP wrote is what the service layer reads.
	sc, err := c.LatestCheckpoint(ctx, "th_mcp")
	if err != nil || sc.ID.String() != saved["id"] || sc.Checkpoint.Summary != "Completed auth refactor" {
		t.Fatalf("LatestCheckpoint after MCP save: %v %+v", err, sc.Checkpoint)
	}
	res, latest := call(t, cs, "latest_checkpoint", map[string]any{"thread": "th_mcp"})
	if res.IsError || latest["checkpoint"].(map[string]any)["id"] != saved["id"] || !strings.Contains(text(res), "mutex pattern worked") {
		t.Fatalf("latest_checkpoint: %s %v", text(res), latest)
	}
	if res, out := call(t, cs, "inspect_checkpoint", map[string]any{"thread": "th_mcp", "ref": "auth-done"}); res.IsError || out["checkpoint"].(map[string]any)["id"] != saved["id"] {
		t.Fatalf("inspect_checkpoint by name: %s", text(res))
	}
	if res, out := call(t, cs, "list_session_checkpoints", map[string]any{"thread": "th_mcp"}); res.IsError || len(out["checkpoints"].([]any)) != 1 {
		t.Fatalf("list_session_checkpoints: %s", text(res))
	}
	if res, out := call(t, cs, "thread_tail", map[string]any{"thread": "th_mcp", "n": 5}); res.IsError || len(out["records"].([]any)) != 1 {
		t.Fatalf("thread_tail: %s", text(res))
	}
	// A failed session, resumed with a change to its memory.
	if res, _ := call(t, cs, "emit", map[string]any{"thread": "th_mcp", "act": "LEARN", "kind": "agent.session.failed", "body": map[string]any{"error": "boom", "node": "n1"}}); res.IsError {
		t.Logf("emit of a failure event: %s", text(res))
	}
	if res, out := call(t, cs, "search_threads", map[string]any{"kind": "agent.session.checkpoint"}); res.IsError || len(out["threads"].([]any)) != 1 {
		t.Fatalf("search_threads: %s", text(res))
	}
	if res, _ := call(t, cs, "search_threads", map[string]any{"since": "yesterday"}); !res.IsError || !strings.Contains(text(res), "since") {
		t.Fatalf("search_threads since yesterday: %s, want a refusal naming since", text(res))
	}
	if res, out := call(t, cs, "pause_session", map[string]any{"thread": "th_mcp_paused", "reason": "budget", "rounds": 3}); res.IsError || out["checkpoint"] == nil {
		t.Fatalf("pause_session: %s", text(res))
	}
	// A fork with a change to its state, and the diff of the two.
	res, fk := call(t, cs, "fork_session", map[string]any{"thread": "th_mcp", "to": "th_mcp_fork", "set": map[string]any{"plan": "b"}})
	if res.IsError || fk == nil {
		t.Fatalf("fork_session: %s", text(res))
	}
	if res, _ := call(t, cs, "diff_checkpoints", map[string]any{"thread": "th_mcp", "a": "auth-done", "b_thread": "th_mcp_fork",
		"b": fk["checkpoint"].(map[string]any)["id"]}); res.IsError || !strings.Contains(text(res), "plan") {
		t.Fatalf("diff_checkpoints: %s", text(res))
	}
	if res, _ := call(t, cs, "fork_session", map[string]any{"thread": "th_mcp", "to": "th_mcp_fork"}); !res.IsError {
		t.Fatal("fork into a thread that holds records: not refused")
	}
	res, rc := call(t, cs, "resume_session", map[string]any{"thread": "th_mcp", "set": map[string]any{"retry": true}})
	if res.IsError || rc["resumed_from"] != saved["id"] {
		t.Fatalf("resume_session: %s %v", text(res), rc)
	}

	// Prompts and resources read the same checkpoint.
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "resume_work", Arguments: map[string]string{"thread": "th_mcp"}})
	if err != nil || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "Completed auth refactor") {
		t.Fatalf("resume_work: %v", err)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "spl://checkpoint/th_mcp/auth-done"})
	if err != nil || !strings.Contains(rr.Contents[0].Text, saved["id"].(string)) {
		t.Fatalf("checkpoint resource: %v", err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "spl://thread/th_nowhere"}); err == nil {
		t.Fatal("resource of a thread with no records: no error")
	}
}

// Each refusal is a tool error naming the field, never a protocol error.
func TestToolsRefuse(t *testing.T) {
	_, cs := connect(t, mcptools.Write)
	for _, c := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"save_checkpoint", map[string]any{"thread": "th_r", "summary": "", "learnings": []string{"l"}}, "summary"},
		{"save_checkpoint", map[string]any{"thread": "th_r", "summary": "s", "learnings": []string{}}, "learnings"},
		{"save_checkpoint", map[string]any{"thread": "", "summary": "s", "learnings": []string{"l"}}, "thread"},
		{"emit", map[string]any{"thread": "th_r", "act": "nope", "kind": "agent.step", "body": map[string]any{}}, "act"},
		{"emit", map[string]any{"thread": "th_r", "act": "DO", "kind": "agent.step", "body": map[string]any{"pi": 3.141592653589793}}, ""},
		{"inspect_checkpoint", map[string]any{"thread": "th_r", "ref": ""}, "ref"},
		{"latest_checkpoint", map[string]any{"thread": "th_unknown"}, "not found"},
		{"thread_tail", map[string]any{"thread": "th_r", "n": 5000}, "n"},
		{"get_run", map[string]any{"run": ""}, "run"},
	} {
		res, _ := call(t, cs, c.tool, c.args)
		if c.field == "" {
			if res.IsError {
				t.Errorf("%s %v: refused: %s", c.tool, c.args, text(res))
			}
			continue
		}
		if !res.IsError || !strings.Contains(text(res), c.field) {
			t.Errorf("%s %v: error %v %q, want a tool error naming %q", c.tool, c.args, res.IsError, text(res), c.field)
		}
	}
}

// The read right gets the read tools only.
func TestReadRightReadsOnly(t *testing.T) {
	c, _ := connect(t, mcptools.Write)
	cs := session(t, c, mcptools.Read)
	tl, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tl.Tools {
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("the read right is offered %s, which writes", tool.Name)
		}
	}
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "save_checkpoint", Arguments: map[string]any{"thread": "th", "summary": "s", "learnings": []string{"l"}}}); err == nil && !res.IsError {
		t.Fatal("save_checkpoint with the read right: saved")
	}
}

// TestArgumentsReadStrictly: a tool's arguments are read as every face
// reads JSON: a big integer is kept exactly (the SDK's typed handlers
// would have made it a float64), a duplicate key and a number a float64
// cannot keep are refused, naming their path.
func TestArgumentsReadStrictly(t *testing.T) {
	c, cs := connect(t, mcptools.Write)
	ctx := context.Background()
	raw := func(name, args string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s: protocol error %v", name, err)
		}
		return res
	}
	res := raw("emit", `{"thread":"th_exact","act":"DO","kind":"agent.step","actor":"`+actor+`","body":{"n":18446744073709551615,"f":0.5}}`)
	if res.IsError {
		t.Fatalf("emit: %s", text(res))
	}
	var got struct {
		N uint64  `cbor:"n"`
		F float64 `cbor:"f"`
	}
	recs := readThread(t, c, "th_exact")
	if len(recs) != 1 || recs[0].Record.DecodeBody(&got) != nil || got.N != 18446744073709551615 || got.F != 0.5 {
		t.Fatalf("stored %+v, want n exactly 18446744073709551615", got)
	}
	for args, want := range map[string]string{
		`{"thread":"th_exact","act":"DO","kind":"agent.step","body":{"a":1,"a":2}}`:               "arguments.body",
		`{"thread":"th_exact","act":"DO","kind":"agent.step","body":{"pi":3.141592653589793238}}`: "arguments.body.pi",
		`{"thread":"th_exact","act":"DO","kind":"agent.step","body":{"x":1},"thread":"th_other"}`: "arguments",
		`{"thread":"th_exact","act":"DO","kind":"agent.step"}`:                                    "body",
	} {
		if res := raw("emit", args); !res.IsError || !strings.Contains(text(res), want) {
			t.Errorf("emit %s: %v %q, want a tool error naming %s", args, res.IsError, text(res), want)
		}
	}
	if n := len(readThread(t, c, "th_exact")); n != 1 {
		t.Fatalf("%d records after the refusals, want 1", n)
	}
}

func readThread(t *testing.T, c *sdk.Client, thread string) []sdk.Record {
	t.Helper()
	var out []sdk.Record
	for r, err := range c.QueryThread(context.Background(), thread) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
