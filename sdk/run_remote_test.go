package sdk_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// TestRemoteRun drives a run as a runner in another process does (each
// call one request), and checks that a Go Run resumes it as its own: the
// records are one format, and the replay rule is one.
func TestRemoteRun(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	const thread, run = "th_remote", "r1"

	st, err := c.RunState(ctx, thread, run)
	if err != nil || st.Status != sdk.RunRunning || st.Resumed || st.Latest != nil || len(st.Effects) != 0 {
		t.Fatalf("RunState of a new run: %+v %v", st, err)
	}
	rcs, err := c.WriteRunCheckpoints(ctx, thread, run, "", []sdk.RunCheckpointWrite{
		{Phase: sdk.PhaseRunStarted, Payload: map[string]any{"agent_name": "py"}},
		{Phase: sdk.PhaseStepStarted, Payload: cbor.RawMessage(mustCBOR(t, `{"step":1,"messages":[]}`))},
		{Phase: sdk.PhasePostLLM, Payload: map[string]any{"step": 1, "pending_llm_response": map[string]any{"text": "calling", "tool_calls": []any{}}}},
	})
	if err != nil || len(rcs) != 3 || rcs[0].Clock != 1 || rcs[2].Clock != 3 {
		t.Fatalf("WriteRunCheckpoints: %+v %v", rcs, err)
	}

	// The effect protocol: ask, run, record; then every later ask replays.
	args := json.RawMessage(`{"n": 0}`)
	ask := sdk.EffectCall{CallID: "call-0", Tool: "append_line", Args: args}
	if a, err := c.RecordEffect(ctx, thread, run, ask); err != nil || a.Outcome != sdk.EffectAbsent {
		t.Fatalf("ask before it ran: %+v %v", a, err)
	}
	rec := ask
	rec.Output = json.RawMessage(`{"line":"call-0 {\"n\":0}"}`)
	first, err := c.RecordEffect(ctx, thread, run, rec)
	if err != nil || first.Outcome != sdk.EffectRecorded || string(first.Output) != string(rec.Output) {
		t.Fatalf("record: %+v %v", first, err)
	}
	// A retry of the same request, and a second process with another
	// output for the same call, get the first result: one record.
	other := rec
	other.Output = json.RawMessage(`{"line":"ran twice"}`)
	for _, call := range []sdk.EffectCall{rec, other, ask} {
		a, err := c.RecordEffect(ctx, thread, run, call)
		if err != nil || a.Outcome != sdk.EffectReplayed || string(a.Output) != string(rec.Output) || a.Receipt != first.Receipt {
			t.Fatalf("again: %+v %v, want the first result replayed", a, err)
		}
	}
	// Another input for the call id: the determinism check.
	changed := ask
	changed.Args = json.RawMessage(`{"n":1}`)
	var em *sdk.EffectMismatchError
	if _, err := c.RecordEffect(ctx, thread, run, changed); !errors.As(err, &em) || em.RecordedTool != "append_line" {
		t.Fatalf("another input: %v, want an *EffectMismatchError", err)
	}
	changed.Rerun = true
	if a, err := c.RecordEffect(ctx, thread, run, changed); err != nil || a.Outcome != sdk.EffectAbsent {
		t.Fatalf("rerun ask: %+v %v", a, err)
	}
	if _, err := c.RecordEffect(ctx, thread, run, sdk.EffectCall{CallID: "", Tool: "x"}); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("no call id: %v", err)
	}
	if _, err := c.WriteRunCheckpoints(ctx, thread, run, "", []sdk.RunCheckpointWrite{{Phase: sdk.PhasePreLLM}, {Phase: sdk.PhaseRunTerminal}}); !isField(err, "checkpoints[1].phase") {
		t.Fatalf("run_terminal as a checkpoint: %v, want a refusal naming checkpoints[1].phase", err)
	}

	// A Go runner resumes the run: the same snapshot, the effect replayed.
	r := openRun(t, c, thread, run)
	res := r.Resume()
	if res.Status != sdk.RunRunning || res.Snapshot == nil || res.Snapshot.Phase != sdk.PhasePostLLM || res.Effects != 1 || res.PendingLLMResponse.IsZero() {
		t.Fatalf("Go resume of a remote run: %+v", res)
	}
	calls := 0
	er, err := r.Effect(ctx, "call-0", "append_line", json.RawMessage(`{"n":0}`), tool(`{"line":"again"}`, &calls))
	if err != nil || !er.Replayed || calls != 0 || string(er.Output) != string(rec.Output) {
		t.Fatalf("Go replay of a remote effect: %+v %v (calls %d)", er, err, calls)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = c.RunState(ctx, thread, run)
	if err != nil || !st.Resumed || st.Snapshot == nil || len(st.Effects) != 1 || st.Effects[0].CallID != "call-0" {
		t.Fatalf("RunState: %+v %v", st, err)
	}
	if _, _, err := c.FinishRun(ctx, thread, run, "", sdk.Terminal{State: "done"}, 0); !isField(err, "state") {
		t.Fatalf("finish with an unknown state: %v", err)
	}
	rc, status, err := c.FinishRun(ctx, thread, run, "", sdk.Terminal{Result: map[string]any{"final_text": "ok"}}, 1)
	if err != nil || status != sdk.RunTerminal || rc.Clock == 0 {
		t.Fatalf("FinishRun: %v %v %v", rc, status, err)
	}
	st, err = c.RunState(ctx, thread, run)
	if j, _ := st.Terminal.JSON(); err != nil || st.Status != sdk.RunTerminal || string(j) != `{"final_text":"ok"}` {
		t.Fatalf("RunState of the finished run: %s %s %v", st.Status, j, err)
	}
	for name, err := range map[string]error{
		"checkpoint": func() error {
			_, err := c.WriteRunCheckpoints(ctx, thread, run, "", []sdk.RunCheckpointWrite{{Phase: sdk.PhasePreLLM}})
			return err
		}(),
		"effect": func() error { _, err := c.RecordEffect(ctx, thread, run, rec); return err }(),
		"finish": func() error { _, _, err := c.FinishRun(ctx, thread, run, "", sdk.Terminal{}, 0); return err }(),
	} {
		if !errors.Is(err, sdk.ErrRunFinished) {
			t.Errorf("%s after the finish: %v, want ErrRunFinished", name, err)
		}
	}
}

// TestRemoteRunCancelled: a cancelled run refuses a runner's writes with
// the cancel request, and ends only as cancelled.
func TestRemoteRunCancelled(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	const thread, run = "th_remote_cancel", "r1"
	if _, err := c.WriteRunCheckpoints(ctx, thread, run, "", []sdk.RunCheckpointWrite{{Phase: sdk.PhaseRunStarted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelRun(ctx, thread, run, "over budget", "did:sync:user:reviewer"); err != nil {
		t.Fatal(err)
	}
	var ce *sdk.RunCancelledError
	if _, err := c.WriteRunCheckpoints(ctx, thread, run, "", []sdk.RunCheckpointWrite{{Phase: sdk.PhasePreLLM}}); !errors.As(err, &ce) || ce.Reason != "over budget" {
		t.Fatalf("checkpoint of a cancelled run: %v", err)
	}
	if _, err := c.RecordEffect(ctx, thread, run, sdk.EffectCall{CallID: "c", Tool: "t", Args: json.RawMessage(`{}`)}); !errors.As(err, &ce) {
		t.Fatalf("effect of a cancelled run: %v", err)
	}
	if st, err := c.RunState(ctx, thread, run); err != nil || st.Status != sdk.RunCancelled || st.Cancel == nil || st.Cancel.Actor != "did:sync:user:reviewer" {
		t.Fatalf("RunState: %+v %v", st, err)
	}
	if _, _, err := c.FinishRun(ctx, thread, run, "", sdk.Terminal{Result: "ok"}, 0); !isField(err, "state") {
		t.Fatalf("finish of a cancelled run as completed: %v", err)
	}
	if _, st, err := c.FinishRun(ctx, thread, run, "", sdk.Terminal{State: "cancelled"}, 0); err != nil || st != sdk.RunCancelled {
		t.Fatalf("finish as cancelled: %v %v", st, err)
	}
}

// TestRemoteEffectRace: runners racing on one call id through two
// clients (two servers' service layers), as two processes resumed at once
// would, record it once and all get that result.
func TestRemoteEffectRace(t *testing.T) {
	ctx := ctxT(t)
	clients := twoClients(t)
	c := clients[0]
	const thread, run = "th_remote_race", "r1"
	const n = 8
	if _, err := c.WriteRunCheckpoints(ctx, thread, run, "", []sdk.RunCheckpointWrite{{Phase: sdk.PhaseRunStarted}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	answers := make([]sdk.EffectAnswer, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = clients[i%2].RecordEffect(ctx, thread, run, sdk.EffectCall{CallID: "c", Tool: "t", Args: json.RawMessage(`{}`),
				Output: json.RawMessage(`{"by":` + string(rune('0'+i)) + `}`)})
		}()
	}
	wg.Wait()
	recorded := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("racer %d: %v", i, errs[i])
		}
		if answers[i].Outcome == sdk.EffectRecorded {
			recorded++
		}
		if string(answers[i].Output) != string(answers[0].Output) || answers[i].Receipt != answers[0].Receipt {
			t.Fatalf("racer %d got %s, racer 0 %s", i, answers[i].Output, answers[0].Output)
		}
	}
	d, err := c.RunDetail(ctx, thread, run)
	if err != nil || recorded != 1 || len(d.Effects) != 1 {
		t.Fatalf("%d recorded, %d effect records (%v), want 1 and 1", recorded, len(d.Effects), err)
	}
}

// twoClients are two clients of one data directory, as two servers'
// service layers (or two processes) on one log are.
func twoClients(t *testing.T) [2]*sdk.Client {
	t.Helper()
	dir := t.TempDir()
	var clients [2]*sdk.Client
	for i := range clients {
		c, err := sdk.Open(ctxT(t), sdk.WithDir(dir), sdk.WithActor(runActor))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	return clients
}

func mustCBOR(t *testing.T, js string) []byte {
	t.Helper()
	b, err := records.ObjectFromJSON([]byte(js), "payload")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// isField says whether err is a *records.FieldError on field.
func isField(err error, field string) bool {
	var fe *records.FieldError
	return errors.As(err, &fe) && fe.Field == field
}

// TestRemoteEffectBeforeCheckpoint: an effect durable before the run's
// first (write-behind) checkpoint landed is still replayed, by a runner
// in another process and by a Go one.
func TestRemoteEffectBeforeCheckpoint(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	const thread, run = "th_remote_early", "r1"
	if _, err := c.RecordEffect(ctx, thread, run, sdk.EffectCall{CallID: "c0", Tool: "t", Args: json.RawMessage(`{}`), Output: json.RawMessage(`{"ok":1}`)}); err != nil {
		t.Fatal(err)
	}
	st, err := c.RunState(ctx, thread, run)
	if err != nil || st.Resumed || len(st.Effects) != 1 || st.Effects[0].CallID != "c0" {
		t.Fatalf("RunState: %+v %v, want the effect listed", st, err)
	}
	r := openRun(t, c, thread, run)
	calls := 0
	if er, err := r.Effect(ctx, "c0", "t", json.RawMessage(`{}`), tool(`{"ok":2}`, &calls)); err != nil || !er.Replayed || calls != 0 {
		t.Fatalf("Go effect: %+v %v (calls %d), want the early one replayed", er, err, calls)
	}
}

// TestRemoteEffectWithCheckpoints: a runner's step in one request: the
// checkpoints queued before an effect are stored before it, in order,
// whether the effect is recorded or replayed; a refused effect stores
// none of them; without an output they are refused.
func TestRemoteEffectWithCheckpoints(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	const thread, run = "th_remote_step", "r1"
	before := []sdk.RunCheckpointWrite{{Phase: sdk.PhasePreToolBatch, Payload: map[string]any{"n": 1}}, {Phase: "tool_started"}}
	call := sdk.EffectCall{CallID: "c0", Tool: "t", Args: json.RawMessage(`{}`), Output: json.RawMessage(`{"ok":1}`), Before: before}
	a, err := c.RecordEffect(ctx, thread, run, call)
	// (Within one group commit the log may give the effect, alone on its
	// thread, an earlier clock than the checkpoints: docs/design.md.)
	if err != nil || a.Outcome != sdk.EffectRecorded || len(a.Before) != 2 || a.Before[0].Clock == 0 || a.Before[0].Clock >= a.Before[1].Clock {
		t.Fatalf("effect with checkpoints: %+v %v", a, err)
	}
	a, err = c.RecordEffect(ctx, thread, run, call) // a retry: replayed, its checkpoints stored again
	if err != nil || a.Outcome != sdk.EffectReplayed || len(a.Before) != 2 {
		t.Fatalf("again: %+v %v", a, err)
	}
	mismatch := call
	mismatch.Args = json.RawMessage(`{"x":1}`)
	if _, err := c.RecordEffect(ctx, thread, run, mismatch); !errors.Is(err, sdk.ErrEffectMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	ask := call
	ask.Output = nil
	if _, err := c.RecordEffect(ctx, thread, run, ask); !isField(err, "checkpoints") {
		t.Fatalf("checkpoints without an output: %v", err)
	}
	bad := call
	bad.CallID, bad.Before = "c1", []sdk.RunCheckpointWrite{{Phase: sdk.PhasePreLLM}, {Phase: "Bad"}}
	if _, err := c.RecordEffect(ctx, thread, run, bad); !isField(err, "checkpoints[1].phase") {
		t.Fatalf("a bad checkpoint: %v", err)
	}
	d, err := c.RunDetail(ctx, thread, run)
	if err != nil || len(d.Phases) != 4 || len(d.Effects) != 1 {
		t.Fatalf("%d phases, %d effects (%v), want 4 and 1: the refused calls stored nothing", len(d.Phases), len(d.Effects), err)
	}
}

// TestRemoteRunSeesOthersEnd: a client that found a run writable (its
// gate, run_gate.go) refuses its writes once another client cancelled
// the run (its watch's notice) or finished it (within gateTTL, 1 s).
func TestRemoteRunSeesOthersEnd(t *testing.T) {
	ctx := ctxT(t)
	clients := twoClients(t)
	runner, other := clients[0], clients[1]
	const thread = "th_remote_gate"
	ask := sdk.EffectCall{CallID: "c", Tool: "t", Args: json.RawMessage(`{}`)}
	// refusedWithin asks about an effect until the run is refused, and
	// returns the refusal and how long it took.
	refusedWithin := func(run string, bound time.Duration) (error, time.Duration) {
		start := time.Now()
		for {
			_, err := runner.RecordEffect(ctx, thread, run, ask)
			if err != nil || time.Since(start) > bound {
				return err, time.Since(start)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, run := range []string{"cancelled", "finished"} {
		if _, err := runner.WriteRunCheckpoints(ctx, thread, run, "", []sdk.RunCheckpointWrite{{Phase: sdk.PhaseRunStarted}}); err != nil {
			t.Fatal(err)
		}
		if _, err := runner.RecordEffect(ctx, thread, run, ask); err != nil { // the gate is open
			t.Fatal(err)
		}
	}

	if _, err := other.CancelRun(ctx, thread, "cancelled", "stop", "did:sync:user:reviewer"); err != nil {
		t.Fatal(err)
	}
	var ce *sdk.RunCancelledError
	if err, took := refusedWithin("cancelled", 3*time.Second); !errors.As(err, &ce) || ce.Reason != "stop" {
		t.Fatalf("after another client's cancel: %v after %v, want the cancel", err, took)
	} else {
		t.Logf("cancel seen after %v", took)
	}

	if _, _, err := other.FinishRun(ctx, thread, "finished", "", sdk.Terminal{Result: "done"}, 0); err != nil {
		t.Fatal(err)
	}
	if err, took := refusedWithin("finished", 3*time.Second); !errors.Is(err, sdk.ErrRunFinished) || took > 2*time.Second {
		t.Fatalf("after another client's finish: %v after %v, want ErrRunFinished within the gate's second", err, took)
	} else {
		t.Logf("finish seen after %v", took)
	}
	// Through the client that wrote them, both are refused at once.
	if _, err := other.RecordEffect(ctx, thread, "cancelled", ask); !errors.As(err, &ce) {
		t.Fatalf("the cancelling client: %v", err)
	}
	if _, err := other.RecordEffect(ctx, thread, "finished", ask); !errors.Is(err, sdk.ErrRunFinished) {
		t.Fatalf("the finishing client: %v", err)
	}
}
