package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// A runner in another process drives a run over HTTP: open, checkpoints,
// the effect protocol (ask, record, replay, a retry, the determinism
// check), a cancel seen as a coded conflict, the end; each refusal names
// its field or code, and the Go SDK reads the run as its own.
func TestRunOverHTTP(t *testing.T) {
	s := start(t, Config{})
	b := base(s) + "/v1/runs/r1"
	post := func(route, body string, out any) int {
		t.Helper()
		return call(t, "POST", b+route, body, out)
	}
	var st wire.RunState
	if code := post("/open", `{"thread":"th"}`, &st); code != http.StatusOK || st.Status != "running" || st.Resumed || st.Latest != nil {
		t.Fatalf("open a new run: %d %+v", code, st)
	}
	var rc receiptsResponse
	cps := `{"thread":"th","actor":"` + actor + `","checkpoints":[{"phase":"run_started","payload":{"agent_name":"py"}},` +
		`{"phase":"post_llm","payload":{"step":1,"pending_llm_response":{"text":"t","tool_calls":[{"id":"c0"}]}},"timestamp_ms":1700000000000}]}`
	if code := post("/checkpoints", cps, &rc); code != http.StatusCreated || len(rc.Receipts) != 2 || rc.Receipts[1].Clock != 2 {
		t.Fatalf("checkpoints: %d %+v", code, rc)
	}
	effect := func(extra string, out any) int {
		t.Helper()
		return post("/effects", `{"thread":"th","actor":"`+actor+`","call_id":"c0","tool":"append_line","args":{"n": 0}`+extra+`}`, out)
	}
	var ea runEffectResponse
	if code := effect(``, &ea); code != http.StatusOK || ea.Status != "absent" {
		t.Fatalf("ask: %d %+v", code, ea)
	}
	if code := effect(`,"output":{ "line" : "c0" }`, &ea); code != http.StatusCreated || ea.Status != "recorded" || string(ea.Output) != `{"line":"c0"}` {
		t.Fatalf("record: %d %+v %s", code, ea, ea.Output)
	}
	first := ea.ID
	for _, extra := range []string{`,"output":{"line":"c0"}`, `,"output":{"line":"again"}`, ``} {
		if code := effect(extra, &ea); code != http.StatusOK || ea.Status != "replayed" || ea.ID != first || string(ea.Output) != `{"line":"c0"}` {
			t.Fatalf("again (%s): %d %+v", extra, code, ea)
		}
	}
	var e wire.Error
	if code := post("/effects", `{"thread":"th","actor":"`+actor+`","call_id":"c0","tool":"append_line","args":{"n":1}}`, &e); code != http.StatusConflict ||
		e.Code != wire.ErrorEffectMismatch || !strings.HasPrefix(e.Recorded, "blake3:") || e.Got == e.Recorded || e.RecordedTool != "append_line" {
		t.Fatalf("another input: %d %+v", code, e)
	}

	// Refusals name the field.
	for body, field := range map[string]string{
		`{"thread":"th","actor":"` + actor + `","checkpoints":[{"phase":"pre_llm"},{"phase":"Bad"}]}`: "checkpoints[1].phase",
		`{"thread":"th","checkpoints":[{"phase":"pre_llm","payload":[1]}]}`:                           "checkpoints[0].payload",
		`{"thread":"th","checkpoints":[{"phase":"pre_llm","payload":{"x":0.10000000000000001}}]}`:     "checkpoints[0].payload.x",
		`{"thread":"th","checkpoints":[{"phase":"pre_llm","payload":{"x":1}}],"extra":1}`:             "",
		`{"thread":"th","checkpoints":[]}`:                                                            "checkpoints",
		`{"thread":"","checkpoints":[{"phase":"pre_llm"}]}`:                                           "thread",
		`{"thread":"th","actor":"` + actor + `","checkpoints":[{"phase":"run_terminal"}]}`:            "checkpoints[0].phase",
		`{"thread":"th","checkpoints":[{"phase":"pre_llm","payload":{"a":1,"a":2}}]}`:                 "",
		`{"thread":"th","checkpoints":[{"phase":"pre_llm","payload":{"a":"` + "\xff" + `"}}]}`:        "",
		`{"thread":"th","checkpoints":[{"phase":"pre_llm","payload":{"a":1}}],"actor":"not a did"}`:   "actor",
	} {
		e = wire.Error{}
		if code := post("/checkpoints", body, &e); code != http.StatusBadRequest || (field != "" && e.Field != field) {
			t.Errorf("%s: %d %+v, want 400 naming %q", body, code, e, field)
		}
	}
	if d, err := s.c.Load().RunDetail(context.Background(), "th", "r1"); err != nil || len(d.Phases) != 2 || len(d.Effects) != 1 {
		t.Fatalf("after the refusals: %d phases, %d effects (%v), want 2 and 1: nothing refused was stored", len(d.Phases), len(d.Effects), err)
	}

	// The Go SDK resumes what HTTP wrote.
	r, err := s.c.Load().OpenRun(context.Background(), "th", "r1", sdk.WithRunActor(actor))
	if err != nil || r.Resume().Snapshot == nil || r.Resume().PendingLLMResponse.IsZero() || r.Resume().Effects != 1 {
		t.Fatalf("Go resume: %+v %v", r.Resume(), err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Cancelled: writes refused with the cancel request; the end as
	// cancelled only.
	if code := post("/cancel", `{"thread":"th","reason":"stop","actor":"did:sync:user:rev"}`, nil); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	e = wire.Error{}
	if code := post("/checkpoints", `{"thread":"th","actor":"`+actor+`","checkpoints":[{"phase":"pre_llm"}]}`, &e); code != http.StatusConflict ||
		e.Code != wire.ErrorRunCancelled || e.Cancel == nil || e.Cancel.Reason != "stop" || e.Cancel.Actor != "did:sync:user:rev" {
		t.Fatalf("checkpoint after the cancel: %d %+v", code, e)
	}
	if code := effect(``, &e); code != http.StatusConflict || e.Code != wire.ErrorRunCancelled {
		t.Fatalf("effect after the cancel: %d %+v", code, e)
	}
	if code := post("/open", `{"thread":"th"}`, &st); code != http.StatusOK || st.Status != "cancelled" || st.Cancel == nil {
		t.Fatalf("open a cancelled run: %d %+v", code, st)
	}
	if code := post("/finish", `{"thread":"th","actor":"`+actor+`","result":{"ok":true}}`, &e); code != http.StatusBadRequest || e.Field != "state" {
		t.Fatalf("finish a cancelled run as completed: %d %+v", code, e)
	}
	var fin finishRunResponse
	if code := post("/finish", `{"thread":"th","actor":"`+actor+`","state":"cancelled"}`, &fin); code != http.StatusCreated || fin.Status != "cancelled" {
		t.Fatalf("finish as cancelled: %d %+v", code, fin)
	}
	if code := post("/finish", `{"thread":"th","actor":"`+actor+`","state":"cancelled"}`, &e); code != http.StatusConflict || e.Code != wire.ErrorRunFinished {
		t.Fatalf("finish twice: %d %+v", code, e)
	}

	// A run finished over HTTP gives its result back, exactly.
	b = base(s) + "/v1/runs/r2"
	if code := post("/finish", `{"thread":"th","actor":"`+actor+`","result":{"n":18446744073709551615,"text":"done"},"payload":{"final_text":"done"}}`, &fin); code != http.StatusCreated || fin.Status != "terminal" {
		t.Fatalf("finish: %d %+v", code, fin)
	}
	if code := post("/open", `{"thread":"th"}`, &st); code != http.StatusOK || st.Status != "terminal" || string(st.TerminalResult) != `{"n":18446744073709551615,"text":"done"}` {
		t.Fatalf("open a finished run: %d %s %s", code, st.Status, st.TerminalResult)
	}
	var p map[string]any
	if err := json.Unmarshal(st.Latest.Payload, &p); err != nil || p["final_text"] != "done" || p["state"] != "completed" {
		t.Fatalf("run_terminal payload: %s %v", st.Latest.Payload, err)
	}

	// The read token reads runs, and writes none.
	reader := &http.Client{Transport: withBearer{s.cfg.HTTPReadToken, http.DefaultTransport}}
	for _, route := range []string{"/open", "/checkpoints", "/effects", "/finish"} {
		if code, _ := callWith(t, reader, "POST", base(s)+"/v1/runs/r3"+route, `{"thread":"th"}`, nil); code != http.StatusForbidden {
			t.Errorf("%s with the read token: %d, want 403", route, code)
		}
	}
}

// A run waits for an approval over HTTP: open says waiting and for what;
// POST /v1/runs/{run}/signal sends it once (a second, or another name,
// is 409 run_not_waiting); the next open carries the signal's data.
func TestRunSignalOverHTTP(t *testing.T) {
	s := start(t, Config{})
	b := base(s) + "/v1/runs/r1"
	post := func(route, body string, out any) int {
		t.Helper()
		return call(t, "POST", b+route, body, out)
	}
	if code := post("/checkpoints", `{"thread":"th","actor":"`+actor+`","checkpoints":[{"phase":"awaiting_signal","payload":{"signal":"approval","question":"ship?"}}]}`, nil); code != http.StatusCreated {
		t.Fatalf("awaiting_signal: %d", code)
	}
	var st wire.RunState
	if code := post("/open", `{"thread":"th"}`, &st); code != http.StatusOK || st.Status != "waiting" || st.WaitingFor != "approval" || st.Signal != nil {
		t.Fatalf("open a waiting run: %d %+v", code, st)
	}
	var e wire.Error
	if code := post("/signal", `{"thread":"th","name":"rejection","actor":"`+actor+`"}`, &e); code != http.StatusConflict || e.Code != wire.ErrorRunNotWaiting {
		t.Fatalf("another signal: %d %+v", code, e)
	}
	var sr signalResponse
	if code := post("/signal", `{"name":"approval","data":{"approved":true,"n":12345678901234567890},"actor":"did:sync:user:ana"}`, &sr); code != http.StatusOK || sr.Clock != 2 {
		t.Fatalf("signal: %d %+v", code, sr)
	}
	if code := post("/signal", `{"thread":"th","name":"approval","actor":"`+actor+`"}`, &e); code != http.StatusConflict || e.Code != wire.ErrorRunNotWaiting {
		t.Fatalf("a second signal: %d %+v", code, e)
	}
	if code := post("/open", `{"thread":"th"}`, &st); code != http.StatusOK || st.Status != "running" || st.Signal == nil ||
		st.Signal.Name != "approval" || st.Signal.Actor != "did:sync:user:ana" || string(st.Signal.Data) != `{"approved":true,"n":12345678901234567890}` {
		t.Fatalf("open after the signal: %d %+v", code, st.Signal)
	}
	if len(st.Signals) != 1 || st.Signals[0].Clock != sr.Clock {
		t.Fatalf("signals: %+v", st.Signals)
	}
	var runs runsResponse
	if code := call(t, "GET", base(s)+"/v1/runs?status=waiting", "", &runs); code != http.StatusOK || len(runs.Runs) != 0 {
		t.Fatalf("waiting runs after the signal: %d %+v", code, runs)
	}
}

// A pause over HTTP takes the delegations in flight it is told, each an
// object read strictly, and refuses one that is not, naming it.
func TestPausePendingDelegationsOverHTTP(t *testing.T) {
	s := start(t, Config{})
	b := base(s) + "/v1/threads/th_deleg/pause"
	var p struct {
		PendingDelegations json.RawMessage `json:"pendingDelegations"`
	}
	if code := call(t, "POST", b, `{"actor":"`+actor+`","pendingDelegations":[{"agentId":"lead","targetAgentId":"ops","n":12345678901234567890}]}`, &p); code != http.StatusCreated {
		t.Fatalf("pause: %d", code)
	}
	if got := string(p.PendingDelegations); got != `[{"agentId":"lead","n":12345678901234567890,"targetAgentId":"ops"}]` {
		t.Fatalf("pending delegations: %s", got)
	}
	for body, field := range map[string]string{
		`{"actor":"` + actor + `","pendingDelegations":["ops"]}`:            "pendingDelegations[0]",
		`{"actor":"` + actor + `","pendingDelegations":[{},{"a":1,"a":2}]}`: "",
	} {
		var e wire.Error
		if code := call(t, "POST", b, body, &e); code != http.StatusBadRequest || (field != "" && e.Field != field) {
			t.Errorf("%s: %d %+v, want 400 naming %q", body, code, e, field)
		}
	}
}
