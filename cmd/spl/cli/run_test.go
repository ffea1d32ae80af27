package cli

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

func TestRunListAndShow(t *testing.T) {
	home := t.TempDir()
	ctx := context.Background()
	c, err := sdk.Open(ctx, sdk.WithDir(home), sdk.WithActor(seedActor))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenRun(ctx, "th_cli", "r1")
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Checkpoint(ctx, sdk.PhaseRunStarted, map[string]any{"agent_name": "a"})
	_ = r.Checkpoint(ctx, sdk.PhaseStepStarted, map[string]any{"step": 2, "llm_calls": 1, "usage": map[string]any{"total_tokens": 120}})
	if _, err := r.Effect(ctx, "c1", "t", 1, func(context.Context) (json.RawMessage, error) { return json.RawMessage(`1`), nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(ctx, sdk.Terminal{Result: map[string]any{"text": "ok"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	runs := decodeJSON[[]wire.Run](t, mustSPL(t, home, "", "--json", "run", "list", "--status", "terminal").stdout)
	if len(runs) != 1 || runs[0].RunID != "r1" || runs[0].Thread != "th_cli" || runs[0].Status != "terminal" {
		t.Fatalf("run list: %+v", runs)
	}
	d := decodeJSON[wire.RunDetail](t, mustSPL(t, home, "", "--json", "run", "show", "r1").stdout)
	if len(d.Phases) != 3 || len(d.Effects) != 1 || d.Snapshot == nil || d.Snapshot.Step != 2 || !strings.Contains(string(d.TerminalResult), `"text": "ok"`) {
		t.Fatalf("run show: %+v", d)
	}
	// With --outputs, each effect's output as recorded.
	dOut := decodeJSON[wire.RunDetail](t, mustSPL(t, home, "", "--json", "run", "show", "r1", "--outputs").stdout)
	if len(dOut.Effects) != 1 || string(dOut.Effects[0].Output) != "1" {
		t.Fatalf("run show --outputs: %+v", dOut.Effects)
	}
	if len(d.Effects) != 1 || d.Effects[0].Output != nil {
		t.Fatalf("run show without --outputs shows outputs: %+v", d.Effects)
	}
	if out := mustSPL(t, home, "", "run", "show", "r1", "--outputs").stdout; !strings.Contains(out, "    output: 1\n") {
		t.Fatalf("run show --outputs:\n%s", out)
	}
	out := mustSPL(t, home, "", "run", "show", "r1").stdout
	for _, want := range []string{"status      terminal", "run_started", "step_started", "run_terminal", "effects: 1 recorded", `result: {"text":"ok"}`} {
		if !strings.Contains(out, want) {
			t.Fatalf("run show lacks %q:\n%s", want, out)
		}
	}
	if r := spl(t, home, "", "run", "show", "nope"); r.code != ExitNotFound {
		t.Fatalf("unknown run: exit %d", r.code)
	}
	// A checkpoint a resume would refuse (no payload): the run is listed
	// as failed, and show exits as for corruption.
	mustSPL(t, home, "", "emit", "--thread", sdk.RunThread("th_cli", "bad"), "--act", "LEARN", "--kind", sdk.KindRunCheckpoint,
		"--actor", seedActor, "--body", `{"run_id":"bad","thread_id":"th_cli","phase":"pre_llm"}`)
	if r := spl(t, home, "", "run", "show", "bad"); r.code != ExitCorrupt || !strings.Contains(r.stderr, "missing field payload") {
		t.Fatalf("bad run: exit %d, stderr %q", r.code, r.stderr)
	}
	// A snapshot whose pending_llm_response no resume can decode: failed
	// too, with the reason, never running.
	mustSPL(t, home, "", "emit", "--thread", sdk.RunThread("th_cli", "badpending"), "--act", "LEARN", "--kind", sdk.KindRunSnapshot,
		"--actor", seedActor, "--body", `{"run_id":"badpending","thread_id":"th_cli","phase":"post_llm","payload":{"pending_llm_response":"not a response"}}`)
	if r := spl(t, home, "", "run", "show", "badpending"); r.code != ExitCorrupt || !strings.Contains(r.stderr, sdk.ReasonPendingLLM) {
		t.Fatalf("run with a bad pending response: exit %d, stderr %q", r.code, r.stderr)
	}
	runs = decodeJSON[[]wire.Run](t, mustSPL(t, home, "", "--json", "run", "list", "--status", "failed").stdout)
	if len(runs) != 2 || runs[0].RunID != "bad" || runs[0].Problem == "" || runs[1].RunID != "badpending" || !strings.Contains(runs[1].Problem, sdk.ReasonPendingLLM) {
		t.Fatalf("failed runs: %+v", runs)
	}
	if running := decodeJSON[[]wire.Run](t, mustSPL(t, home, "", "--json", "run", "list", "--status", "running").stdout); len(running) != 0 {
		t.Fatalf("running runs: %+v, want none", running)
	}
}

// TestRunCancel: spl run cancel records the request, the run is listed as
// cancelled, and a cancel without a reason, of a finished run or of one
// cancelled already, is refused (exit 1).
func TestRunCancel(t *testing.T) {
	home := t.TempDir()
	ctx := context.Background()
	c, err := sdk.Open(ctx, sdk.WithDir(home), sdk.WithActor(seedActor))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"live", "done"} {
		r, err := c.OpenRun(ctx, "th_cancel", id)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Checkpoint(ctx, sdk.PhaseRunStarted, map[string]any{"agent_name": "a"})
		if id == "done" {
			if _, err := r.Finish(ctx, sdk.Terminal{Result: map[string]any{"text": "ok"}}); err != nil {
				t.Fatal(err)
			}
		} else if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := spl(t, home, "", "run", "cancel", "live", "--actor", seedActor); r.code != ExitUsage || !strings.Contains(r.stderr, "reason") {
		t.Fatalf("cancel without a reason: exit %d, %q", r.code, r.stderr)
	}
	mustSPL(t, home, "", "run", "cancel", "live", "--reason", "stuck in a loop", "--actor", seedActor)
	runs := decodeJSON[[]wire.Run](t, mustSPL(t, home, "", "--json", "run", "list", "--status", "cancelled").stdout)
	if len(runs) != 1 || runs[0].RunID != "live" {
		t.Fatalf("cancelled runs: %+v", runs)
	}
	for _, id := range []string{"live", "done"} {
		if r := spl(t, home, "", "run", "cancel", id, "--reason", "again", "--actor", seedActor); r.code != ExitUsage || !strings.Contains(r.stderr, "finished") {
			t.Fatalf("cancel of %s: exit %d, %q, want 1 (run already finished)", id, r.code, r.stderr)
		}
	}
}

// spl version and spl --version print the same: the version, the commit
// and the Go that built it.
func TestVersion(t *testing.T) {
	home := t.TempDir()
	v := mustSPL(t, home, "", "version").stdout
	if !strings.HasPrefix(v, "spl ") || !strings.Contains(v, "\ncommit ") || !strings.Contains(v, runtime.Version()) {
		t.Fatalf("spl version:\n%s", v)
	}
	if f := mustSPL(t, home, "", "--version").stdout; f != v {
		t.Fatalf("spl --version:\n%s\nwant what spl version prints:\n%s", f, v)
	}
}

// spl emit --expect-clock appends only at the thread's clock, and says
// where the thread is otherwise.
func TestEmitExpectClock(t *testing.T) {
	home := t.TempDir()
	emit := func(expect string) result {
		return spl(t, home, "", "--json", "emit", "--thread", "th_cas", "--act", "DO", "--kind", "agent.step", "--body", `{"n":1}`,
			"--actor", seedActor, "--expect-clock", expect)
	}
	if r := emit("0"); r.code != ExitOK {
		t.Fatalf("--expect-clock 0 on a new thread: exit %d %s", r.code, r.stderr)
	}
	r := emit("0")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "is at clock 1; nothing appended") {
		t.Fatalf("--expect-clock 0 on a thread at 1: exit %d %q", r.code, r.stderr)
	}
	if r := emit("1"); r.code != ExitOK {
		t.Fatalf("--expect-clock 1: exit %d %s", r.code, r.stderr)
	}
}

// spl record show takes the end of an id, as the tables print it, with
// --thread; without one it says what to give instead of a decoding error.
func TestRecordShowShortID(t *testing.T) {
	home := t.TempDir()
	rc := decodeJSON[struct{ ID string }](t, mustSPL(t, home, "", "--json", "emit", "--thread", "th_short", "--act", "DO", "--kind", "agent.step",
		"--body", `{"n":1}`, "--actor", seedActor).stdout)
	short := rc.ID[len(rc.ID)-12:]
	if out := mustSPL(t, home, "", "record", "show", short, "--thread", "th_short").stdout; !strings.Contains(out, rc.ID) || !strings.Contains(out, "verified") {
		t.Fatalf("record show %s --thread: %s", short, out)
	}
	mustSPL(t, home, "", "emit", "--thread", "th_other", "--act", "DO", "--kind", "agent.step", "--body", `{"n":2}`, "--actor", seedActor)
	if out := mustSPL(t, home, "", "record", "show", short).stdout; !strings.Contains(out, rc.ID) || !strings.Contains(out, "verified") {
		t.Fatalf("record show %s without --thread: %s", short, out)
	}
	for _, args := range [][]string{{"zzzzzzzzzzzz", "--thread", "th_short"}, {"zzzzzzzzzzzz"}} {
		if r := spl(t, home, "", append([]string{"record", "show"}, args...)...); r.code != ExitNotFound || !strings.Contains(r.stderr, `id ending "zzzzzzzzzzzz"`) {
			t.Fatalf("record show %v, an end no id has: exit %d %q", args, r.code, r.stderr)
		}
	}
	if r := spl(t, home, "", "record", "show", "zzzz"); r.code != ExitUsage {
		t.Fatalf("record show of 4 characters: exit %d %q, want %d", r.code, r.stderr, ExitUsage)
	}
}

// TestRunSignal: a waiting run is listed and shown as waiting, for what;
// spl run signal sends it its signal with data, once; a signal of another
// name, a second one and bad data are refused (exit 1).
func TestRunSignal(t *testing.T) {
	home := t.TempDir()
	ctx := context.Background()
	c, err := sdk.Open(ctx, sdk.WithDir(home), sdk.WithActor(seedActor))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenRun(ctx, "th_signal", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AwaitSignal(ctx, "approval", map[string]any{"question": "ship?"}, 0); !errors.Is(err, sdk.ErrStillWaiting) {
		t.Fatalf("AwaitSignal: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	runs := decodeJSON[[]wire.Run](t, mustSPL(t, home, "", "--json", "run", "list", "--status", "waiting").stdout)
	if len(runs) != 1 || runs[0].WaitingFor != "approval" {
		t.Fatalf("waiting runs: %+v", runs)
	}
	if out := mustSPL(t, home, "", "run", "show", "r1").stdout; !strings.Contains(out, "status      waiting\n") || !strings.Contains(out, "waits for   approval\n") {
		t.Fatalf("run show:\n%s", out)
	}
	for _, args := range [][]string{
		{"run", "signal", "r1", "rejection", "--actor", seedActor},
		{"run", "signal", "r1", "approval", "--data", `{"a":1,"a":2}`, "--actor", seedActor},
	} {
		if res := spl(t, home, "", args...); res.code != ExitUsage {
			t.Fatalf("%v: exit %d, %q, want 1", args, res.code, res.stderr)
		}
	}
	mustSPL(t, home, "", "run", "signal", "r1", "approval", "--data", `{"approved":true}`, "--actor", seedActor)
	if res := spl(t, home, "", "run", "signal", "r1", "approval", "--actor", seedActor); res.code != ExitUsage || !strings.Contains(res.stderr, "waiting for no signal") {
		t.Fatalf("a second signal: exit %d, %q", res.code, res.stderr)
	}
	if runs := decodeJSON[[]wire.Run](t, mustSPL(t, home, "", "--json", "run", "list").stdout); len(runs) != 1 || runs[0].Status != "running" {
		t.Fatalf("after the signal: %+v", runs)
	}
}
