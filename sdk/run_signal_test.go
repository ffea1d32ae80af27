package sdk_test

import (
	"errors"
	"testing"
	"time"

	"github.com/spl-dev/spl/sdk"
)

// TestRunSignal: a run waits for an approval and its process ends; every
// face says waiting, for what; a signal of another name, or to a run
// not waiting, is refused; the approval is taken once, the run is
// running again, and its resume carries the data.
func TestRunSignal(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	const thread = "th_signal"
	r := openRun(t, c, thread, "r1")
	if err := r.Checkpoint(ctx, sdk.PhaseRunStarted, map[string]any{}, sdk.Durable()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SignalRun(ctx, thread, "r1", "approval", nil, ""); !errors.Is(err, sdk.ErrNotWaiting) {
		t.Fatalf("signal to a running run: %v, want ErrNotWaiting", err)
	}
	if _, err := r.AwaitSignal(ctx, "approval", map[string]any{"question": "ship it?"}, 200*time.Millisecond); !errors.Is(err, sdk.ErrStillWaiting) {
		t.Fatalf("AwaitSignal with no signal: %v, want ErrStillWaiting", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := c.RunDetail(ctx, thread, "r1")
	if err != nil || d.Status != sdk.RunWaiting || d.WaitingFor != "approval" {
		t.Fatalf("RunDetail: %s waiting for %q (%v), want waiting for approval", d.Status, d.WaitingFor, err)
	}
	if rs, err := c.Runs(ctx, sdk.RunFilter{Status: sdk.RunWaiting}); err != nil || len(rs) != 1 || rs[0].WaitingFor != "approval" {
		t.Fatalf("Runs waiting: %+v %v", rs, err)
	}
	if _, err := c.SignalRun(ctx, thread, "r1", "rejection", nil, ""); !errors.Is(err, sdk.ErrNotWaiting) {
		t.Fatalf("signal of another name: %v, want ErrNotWaiting", err)
	}
	if _, err := c.SignalRun(ctx, thread, "r1", "Bad Name", nil, ""); !isField(err, "name") {
		t.Fatalf("bad name: %v", err)
	}
	// A resume while it waits is waiting too: no new checkpoint, no signal.
	w := openRun(t, c, thread, "r1")
	if w.Resume().Status != sdk.RunWaiting || w.Resume().Signal != nil {
		t.Fatalf("resume while waiting: %+v", w.Resume())
	}
	got := make(chan error, 1)
	var sig *sdk.RunSignal
	go func() {
		var err error
		sig, err = w.AwaitSignal(ctx, "approval", nil, time.Minute)
		got <- err
	}()
	rc, err := c.SignalRun(ctx, thread, "r1", "approval", map[string]any{"approved": true, "by": "ana"}, "did:sync:user:ana")
	if err != nil {
		t.Fatalf("SignalRun: %v", err)
	}
	if _, err := c.SignalRun(ctx, thread, "r1", "approval", nil, ""); !errors.Is(err, sdk.ErrNotWaiting) {
		t.Fatalf("a second signal: %v, want ErrNotWaiting", err)
	}
	select {
	case err := <-got:
		if err != nil || sig.Request != rc || sig.Actor != "did:sync:user:ana" {
			t.Fatalf("AwaitSignal: %+v %v", sig, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a runner waiting in its process did not see the signal")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := c.RunDetail(ctx, thread, "r1"); err != nil || d.Status != sdk.RunRunning || d.WaitingFor != "" {
		t.Fatalf("after the signal: %s %q %v, want running", d.Status, d.WaitingFor, err)
	}
	// A new process resumes with the signal, and AwaitSignal answers it.
	again := openRun(t, c, thread, "r1")
	s := again.Resume().Signal
	if s == nil || s.Name != "approval" {
		t.Fatalf("resume after the signal: %+v", again.Resume())
	}
	var data map[string]any
	if err := s.Data.Decode(&data); err != nil || data["approved"] != true || data["by"] != "ana" {
		t.Fatalf("signal data: %v %v", data, err)
	}
	if s2, err := again.AwaitSignal(ctx, "approval", nil, 0); err != nil || s2.Request != rc {
		t.Fatalf("AwaitSignal after a resume with it: %+v %v", s2, err)
	}
	// Killed after a checkpoint past the wait: the name is the wait, and
	// its answer is found again, not waited for anew.
	if err := again.Checkpoint(ctx, sdk.PhaseRunStarted, map[string]any{}, sdk.Durable()); err != nil {
		t.Fatal(err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	again = openRun(t, c, thread, "r1")
	if again.Resume().Signal != nil || again.Resume().Status != sdk.RunRunning {
		t.Fatalf("resume past the wait: %+v", again.Resume())
	}
	if s3, err := again.AwaitSignal(ctx, "approval", nil, 0); err != nil || s3.Request != rc {
		t.Fatalf("AwaitSignal of an answered name: %+v %v", s3, err)
	}
	if _, err := again.Finish(ctx, sdk.Terminal{Result: "shipped"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SignalRun(ctx, thread, "r1", "approval", nil, ""); !errors.Is(err, sdk.ErrRunFinished) {
		t.Fatalf("signal to a finished run: %v, want ErrRunFinished", err)
	}
}

// TestRunSignalCheckpointNamesIt: an awaiting_signal checkpoint must say
// what it waits for, on every path.
func TestRunSignalCheckpointNamesIt(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	r := openRun(t, c, "th_signal_bad", "r1")
	if err := r.Checkpoint(ctx, sdk.PhaseAwaitingSignal, map[string]any{}, sdk.Durable()); !isField(err, "payload.signal") {
		t.Fatalf("awaiting_signal without a name: %v", err)
	}
	if _, err := c.WriteRunCheckpoints(ctx, "th_signal_bad", "r2", "", []sdk.RunCheckpointWrite{{Phase: sdk.PhaseAwaitingSignal, Payload: map[string]any{"signal": "No"}}}); !isField(err, "checkpoints[0].payload.signal") {
		t.Fatalf("remote awaiting_signal with a bad name: %v", err)
	}
	if _, err := c.WriteRunCheckpoints(ctx, "th_signal_bad", "r3", "", []sdk.RunCheckpointWrite{{Phase: sdk.PhaseAwaitingSignal, Payload: map[string]any{"signal": "approval"}}}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.RunState(ctx, "th_signal_bad", "r3"); err != nil || st.Status != sdk.RunWaiting {
		t.Fatalf("remote waiting: %s %v", st.Status, err)
	}
}
