package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

const runActor = "did:sync:agent:runner"

func openRun(t *testing.T, c *sdk.Client, thread, id string) *sdk.Run {
	t.Helper()
	r, err := c.OpenRun(ctxT(t), thread, id)
	if err != nil {
		t.Fatalf("OpenRun: %v", err)
	}
	return r
}

func tool(out string, calls *int) func(context.Context) (json.RawMessage, error) {
	return func(context.Context) (json.RawMessage, error) {
		*calls++
		return json.RawMessage(out), nil
	}
}

func TestRunResumeReplaysEffectsAndShortCircuits(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	r := openRun(t, c, "th", "r1")
	if r.Resume().Resumed {
		t.Fatal("new run says resumed")
	}
	if err := r.Checkpoint(ctx, sdk.PhaseRunStarted, map[string]any{"agent_name": "a", "resumed": false}); err != nil {
		t.Fatal(err)
	}
	snap := map[string]any{"step": 1, "messages": []any{map[string]any{"role": "user", "content": "hi"}},
		"pending_llm_response": map[string]any{"tool_calls": []any{"c1", "c2"}}}
	if err := r.Checkpoint(ctx, sdk.PhasePostLLM, snap); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if _, err := r.Effect(ctx, "c1", "echo", map[string]any{"x": 1}, tool(`{"ok":1}`, &calls)); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Resume: the snapshot and its pending response come back; c1 is
	// replayed, c2 runs.
	r = openRun(t, c, "th", "r1")
	res := r.Resume()
	if !res.Resumed || res.Status != sdk.RunRunning || res.Snapshot == nil || res.PendingLLMResponse.IsZero() || res.Effects != 1 {
		t.Fatalf("resume=%+v", res)
	}
	got, err := r.Effect(ctx, "c1", "echo", map[string]any{"x": 1}, tool(`{"ok":2}`, &calls))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Replayed || string(got.Output) != `{"ok":1}` || calls != 1 {
		t.Fatalf("c1: replayed=%v output=%s calls=%d", got.Replayed, got.Output, calls)
	}
	var me *sdk.EffectMismatchError
	_, err = r.Effect(ctx, "c1", "echo", map[string]any{"x": 2}, tool(`{}`, &calls))
	if !errors.As(err, &me) || !errors.Is(err, sdk.ErrEffectMismatch) {
		t.Fatalf("changed input: err=%v, want *EffectMismatchError", err)
	}
	if me.Recorded == me.Got || !strings.Contains(err.Error(), me.Recorded) || !strings.Contains(err.Error(), me.Got) {
		t.Fatalf("mismatch does not name both hashes: %v", err)
	}
	if _, err := r.Effect(ctx, "c2", "echo", "y", tool(`"y"`, &calls)); err != nil || calls != 2 {
		t.Fatalf("c2: err=%v calls=%d", err, calls)
	}
	rep, err := r.Finish(ctx, sdk.Terminal{Result: map[string]any{"text": "done"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 1 || rep.Ran != 1 || rep.Terminal.Clock == 0 {
		t.Fatalf("finish report %+v", rep)
	}

	// Finished: the stored result, nothing to run.
	r = openRun(t, c, "th", "r1")
	if res := r.Resume(); res.Status != sdk.RunTerminal {
		t.Fatalf("status=%s", res.Status)
	}
	var out map[string]any
	if err := r.Resume().Terminal.Decode(&out); err != nil || out["text"] != "done" {
		t.Fatalf("terminal=%v err=%v", out, err)
	}
	if err := r.Checkpoint(ctx, sdk.PhasePreLLM, nil); !errors.Is(err, sdk.ErrRunFinished) {
		t.Fatalf("checkpoint after finish: %v", err)
	}

	d, err := c.RunDetail(ctx, "", "r1")
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, p := range d.Phases {
		phases = append(phases, p.Phase)
	}
	if got, want := strings.Join(phases, ","), "run_started,post_llm,run_terminal"; got != want {
		t.Fatalf("phases=%s, want %s", got, want)
	}
	if d.Calls != 2 || len(d.Effects) != 2 || d.Replayed != 1 || d.Status != sdk.RunTerminal {
		t.Fatalf("detail %+v", d)
	}
}

func TestResumeErrors(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	if _, err := c.ResumeRun(ctx, "th", "none"); !errors.Is(err, sdk.ErrNoCheckpoint) || !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("no checkpoint: err=%v", err)
	}
	// A checkpoint written by hand without a payload.
	emit := func(run string, body map[string]any, kind string) {
		t.Helper()
		if _, err := c.Emit(ctx, sdk.Event{Act: records.ActLearn, Kind: kind, Thread: sdk.RunThread("th", run), Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	emit("nopayload", map[string]any{"run_id": "nopayload", "thread_id": "th", "phase": "pre_llm"}, sdk.KindRunCheckpoint)
	var ce *sdk.CheckpointError
	if _, err := c.ResumeRun(ctx, "th", "nopayload"); !errors.As(err, &ce) || ce.Reason != sdk.ReasonMissingField || ce.Field != "payload" {
		t.Fatalf("missing payload: err=%v", err)
	}
	emit("badpending", map[string]any{"run_id": "badpending", "thread_id": "th", "phase": "post_llm",
		"payload": map[string]any{"pending_llm_response": "not a response"}}, sdk.KindRunSnapshot)
	if _, err := c.ResumeRun(ctx, "th", "badpending"); !errors.As(err, &ce) || ce.Reason != sdk.ReasonPendingLLM || !errors.Is(err, sdk.ErrCheckpointCorrupt) {
		t.Fatalf("bad pending: err=%v", err)
	}
	// A legacy shape (no schema_version, "data" for payload) is normalised.
	emit("legacy", map[string]any{"run_id": "legacy", "thread_id": "th", "phase": "pre_llm", "data": map[string]any{}}, sdk.KindRunCheckpoint)
	r, err := c.ResumeRun(ctx, "th", "legacy")
	if err != nil || r.Resume().Latest.SchemaVersion != "0" {
		t.Fatalf("legacy: err=%v", err)
	}
	r.Close()
}

func TestCheckpointsCoalesceAndLatestIsO1(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	// Many runs on one thread, many records each: the latest of one is two gets.
	for i := range 20 {
		r := openRun(t, c, "busy", fmt.Sprintf("r%d", i))
		for s := range 50 {
			if err := r.Checkpoint(ctx, sdk.PhaseStepStarted, map[string]any{"step": s}); err != nil {
				t.Fatal(err)
			}
			if err := r.Checkpoint(ctx, sdk.PhasePreLLM, map[string]any{"step": s}); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		st := r.Stats()
		if st.Written+st.Coalesced != 100 {
			t.Fatalf("written %d + coalesced %d != 100", st.Written, st.Coalesced)
		}
	}
	cp, err := c.LatestRunCheckpoint(ctx, "busy", "r7")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Step int `cbor:"step"`
	}
	if err := cp.Payload.Decode(&p); err != nil || cp.Phase != sdk.PhasePreLLM || p.Step != 49 {
		t.Fatalf("latest: phase=%s step=%d err=%v", cp.Phase, p.Step, err)
	}
	runs, err := c.Runs(ctx, sdk.RunFilter{Thread: "busy", Status: sdk.RunRunning})
	if err != nil || len(runs) != 20 {
		t.Fatalf("runs=%d err=%v", len(runs), err)
	}
}

func TestLargeSnapshotBesideTheLog(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	msgs := make([]any, 10000)
	for i := range msgs {
		msgs[i] = map[string]any{"role": "assistant", "content": strings.Repeat(fmt.Sprintf("message %d ", i), 30)}
	}
	r := openRun(t, c, "big", "r")
	if err := r.Checkpoint(ctx, sdk.PhaseStepStarted, map[string]any{"step": 3, "messages": msgs}); err != nil {
		t.Fatal(err)
	}
	// A tool output past the inline limit goes beside the log too.
	big := `{"text":"` + strings.Repeat("y", sdk.MaxInlinePayload) + `"}`
	calls := 0
	if _, err := r.Effect(ctx, "c1", "read", 1, tool(big, &calls)); err != nil || calls != 1 {
		t.Fatalf("large effect: err=%v calls=%d", err, calls)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openRun(t, c, "big", "r")
	s := r.Resume().Snapshot
	if s == nil || s.Blob == nil || s.Blob.Size < 2<<20 {
		t.Fatalf("snapshot=%+v", s)
	}
	var p struct {
		Messages []map[string]any `cbor:"messages"`
	}
	if err := s.Payload.Decode(&p); err != nil || len(p.Messages) != 10000 {
		t.Fatalf("messages=%d err=%v", len(p.Messages), err)
	}
	r.Close()
	rep, err := c.VerifyRun(ctx, "big", "r")
	if err != nil || !rep.OK() || rep.Blobs != 2 || rep.Effects.Checked != 1 {
		t.Fatalf("verify: %+v err=%v", rep, err)
	}
	// Erasing the checkpoint erases its payload too.
	if _, err := c.Erase(ctx, sdk.RunThread("big", "r"), "", []records.ID{s.ID}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.JetStreamOf(c).ObjectStore(ctx, sdk.BlobBucket); err != nil {
		t.Fatal(err)
	}
	os, _ := sdk.JetStreamOf(c).ObjectStore(ctx, sdk.BlobBucket)
	if _, err := os.GetInfo(ctx, strings.TrimPrefix(s.Blob.Digest, "blake3k:")); err == nil {
		t.Fatal("blob still there after erasure")
	}
}

func TestEffectOutputCheckedBeforeReplay(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	r := openRun(t, c, "th", "bad")
	if err := r.Checkpoint(ctx, sdk.PhaseRunStarted, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// An effect record written by hand whose output is not the one its
	// output_hash names: the body digest holds, the effect does not.
	in, err := sdk.InputHash("echo", 1)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"run_id": "bad", "thread_id": "th", "call_id": "c1", "tool": "echo", "input_hash": in,
		"output_hash": "blake3:" + strings.Repeat("0", 64), "output": `{"ok":1}`, "timestamp_ms": 1}
	if _, err := c.Emit(ctx, sdk.Event{Act: records.ActDo, Kind: sdk.KindRunEffect, Thread: sdk.RunThread("th", "bad") + "/effects", Body: body}); err != nil {
		t.Fatal(err)
	}
	r = openRun(t, c, "th", "bad")
	defer r.Close()
	if n := r.Resume().Effects; n != 1 {
		t.Fatalf("effects=%d, want 1", n)
	}
	calls := 0
	var ce *sdk.CheckpointError
	if _, err := r.Effect(ctx, "c1", "echo", 1, tool(`{"ok":2}`, &calls)); !errors.As(err, &ce) || ce.Field != "output_hash" || calls != 0 {
		t.Fatalf("replay of a bad output: err=%v calls=%d", err, calls)
	}
	rep, err := c.VerifyRun(ctx, "th", "bad")
	if err != nil || rep.OK() || len(rep.BadOutputs) != 1 {
		t.Fatalf("verify: %+v err=%v", rep, err)
	}
}

// A tool's answer passes the run's thread's redaction policies before it
// is stored: the covered key is in no record, the replay answers the
// redacted output, and an answer that is no object is kept as it is.
func TestEffectOutputRedacted(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	if _, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{Thread: "sec", Keys: []string{"api_key"}}); err != nil {
		t.Fatal(err)
	}
	r := openRun(t, c, "sec", "r")
	if err := r.Checkpoint(ctx, sdk.PhaseStepStarted, map[string]any{"step": 1}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if _, err := r.Effect(ctx, "c1", "login", 1, tool(`{"user":"ann","api_key":"sk-123"}`, &calls)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Effect(ctx, "c2", "list", 1, tool(`["sk-kept-in-a-list"]`, &calls)); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for rec, err := range c.QueryThread(ctx, sdk.RunThread("sec", "r")+"/effects") {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(rec.Body), "sk-123") {
			t.Fatalf("the covered value is stored in %s", rec.ID)
		}
	}
	r = openRun(t, c, "sec", "r")
	defer r.Close()
	res, err := r.Effect(ctx, "c1", "login", 1, tool(`{}`, &calls))
	if err != nil || calls != 2 {
		t.Fatalf("replay: %v, calls %d", err, calls)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Output, &out); err != nil || out["user"] != "ann" || out["api_key"] != nil {
		t.Fatalf("replayed output %s, %v: want the user without the api_key", res.Output, err)
	}
	res, err = r.Effect(ctx, "c2", "list", 1, tool(`[]`, &calls))
	if err != nil || string(res.Output) != `["sk-kept-in-a-list"]` {
		t.Fatalf("replayed list %s, %v", res.Output, err)
	}
}
