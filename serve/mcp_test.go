package serve

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/sdk"
)

// withBearer adds a bearer token to every request.
type withBearer struct {
	token string
	next  http.RoundTripper
}

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpSession connects the SDK's MCP client to the server's /mcp with token.
func mcpSession(t *testing.T, s *Server, token string) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: base(s) + mcpPath, MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: withBearer{token, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// /mcp is behind the API's credentials, and a session gets the tools of
// its credential's right.
func TestMCPOverHTTP(t *testing.T) {
	s := start(t, Config{})
	if _, err := mcpSession(t, s, "not a token at all, no"); err == nil {
		t.Fatal("MCP with a wrong token: connected")
	}
	ctx := context.Background()
	w, err := mcpSession(t, s, s.cfg.HTTPToken)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.CallTool(ctx, &mcp.CallToolParams{Name: "save_checkpoint", Arguments: map[string]any{"thread": "th_mcp",
		"summary": "over http", "learnings": []string{"tokens hold"}, "actor": actor}})
	if err != nil || res.IsError {
		t.Fatalf("save_checkpoint with the write token: %v %+v", err, res)
	}
	// With no actor in the call, and none on the server: refused, naming it.
	res, err = w.CallTool(ctx, &mcp.CallToolParams{Name: "save_checkpoint", Arguments: map[string]any{"thread": "th_mcp",
		"summary": "s", "learnings": []string{"l"}}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "actor") {
		t.Fatalf("save_checkpoint without an actor: %v %+v", err, res)
	}
	r, err := mcpSession(t, s, s.cfg.HTTPReadToken)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := r.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tl.Tools {
		if !tool.Annotations.ReadOnlyHint {
			t.Errorf("the read token is offered %s", tool.Name)
		}
	}
	res, err = r.CallTool(ctx, &mcp.CallToolParams{Name: "latest_checkpoint", Arguments: map[string]any{"thread": "th_mcp"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "over http") {
		t.Fatalf("latest_checkpoint with the read token: %v %+v", err, res)
	}
	if res, err := r.CallTool(ctx, &mcp.CallToolParams{Name: "save_checkpoint", Arguments: map[string]any{"thread": "th_mcp",
		"summary": "s", "learnings": []string{"l"}, "actor": actor}}); err == nil && !res.IsError {
		t.Fatal("save_checkpoint with the read token: saved")
	}
	// The read token naming the write session's id gets none of it.
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"save_checkpoint","arguments":{"thread":"th_mcp","summary":"hijack","learnings":["l"],"actor":"` + actor + `"}}}`
	req, _ := http.NewRequest("POST", base(s)+mcpPath, strings.NewReader(call))
	req.Header.Set("Authorization", "Bearer "+s.cfg.HTTPReadToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcpSessionHeader, w.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the read token in a write session: %d, want 403", resp.StatusCode)
	}
	if sc, err := s.c.Load().LatestCheckpoint(ctx, "th_mcp"); err != nil || sc.Checkpoint.Summary != "over http" {
		t.Fatalf("latest after the attempt: %q %v, want the write token's checkpoint", sc.Checkpoint.Summary, err)
	}
}

// POST /v1/runs/{run}/cancel cancels a running run, once, with the write
// right; the MCP tool cancel_run is the same call.
func TestCancelRunOverHTTPAndMCP(t *testing.T) {
	s := start(t, Config{})
	c := s.c.Load()
	ctx := context.Background()
	for _, id := range []string{"r_http", "r_mcp"} {
		r, err := c.OpenRun(ctx, "th_runs", id, sdk.WithRunActor(actor))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Checkpoint(ctx, "run_started", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b := base(s)
	body := `{"reason":"over budget","actor":"` + actor + `"}`
	reader := &http.Client{Transport: withBearer{s.cfg.HTTPReadToken, http.DefaultTransport}}
	if code, _ := callWith(t, reader, "POST", b+"/v1/runs/r_http/cancel", body, nil); code != http.StatusForbidden {
		t.Fatalf("cancel with the read token: %d, want 403", code)
	}
	if code := call(t, "POST", b+"/v1/runs/r_http/cancel", `{"actor":"`+actor+`"}`, nil); code != http.StatusBadRequest {
		t.Fatalf("cancel without a reason: %d, want 400", code)
	}
	if code := call(t, "POST", b+"/v1/runs/r_http/cancel", body, nil); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	if code := call(t, "POST", b+"/v1/runs/r_http/cancel", body, nil); code != http.StatusConflict {
		t.Fatalf("cancel again: %d, want 409", code)
	}
	w, err := mcpSession(t, s, s.cfg.HTTPToken)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.CallTool(ctx, &mcp.CallToolParams{Name: "cancel_run", Arguments: map[string]any{"run": "r_mcp", "reason": "by an agent", "actor": actor}})
	if err != nil || res.IsError {
		t.Fatalf("cancel_run: %v %+v", err, res)
	}
	res, err = w.CallTool(ctx, &mcp.CallToolParams{Name: "get_run", Arguments: map[string]any{"run": "r_mcp"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "cancelled") {
		t.Fatalf("get_run after cancel_run: %v %+v", err, res)
	}
}
