package sdk_test

import (
	"errors"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// TestCancelRun: a person cancels a running run; the runner sees it at
// its next effect, as a typed error, and finishes as cancelled; every
// face's status says cancelled; a resume runs nothing; a second cancel,
// or one of a finished run, is refused.
func TestCancelRun(t *testing.T) {
	c := open(t, sdk.WithActor(runActor))
	ctx := ctxT(t)
	r := openRun(t, c, "th_cancel", "r1")
	if err := r.Checkpoint(ctx, sdk.PhaseRunStarted, map[string]any{"agent_name": "a"}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if _, err := r.Effect(ctx, "c1", "search", map[string]any{"q": "x"}, tool(`{"ok":1}`, &calls)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelRun(ctx, "", "r1", "", "did:sync:user:reviewer"); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("cancel without a reason: %v, want a refusal naming reason", err)
	}
	if _, err := c.CancelRun(ctx, "", "r1", "spending too much", "did:sync:user:reviewer"); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	// The runner sees it at its next effect, once the request reached it.
	var ce *sdk.RunCancelledError
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := r.Effect(ctx, "c2", "search", map[string]any{"q": "y"}, tool(`{"ok":2}`, &calls))
		if errors.As(err, &ce) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("effect after the cancel: %v, want a *RunCancelledError within 10 s", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ce.Reason != "spending too much" || ce.Actor != "did:sync:user:reviewer" || !errors.Is(ce, sdk.ErrRunCancelled) {
		t.Fatalf("cancel error: %+v", ce)
	}
	if err := r.Checkpoint(ctx, sdk.PhasePreLLM, map[string]any{}); !errors.Is(err, sdk.ErrRunCancelled) {
		t.Fatalf("checkpoint after the cancel: %v", err)
	}
	if _, err := r.Finish(ctx, sdk.Terminal{State: "cancelled"}); err != nil {
		t.Fatalf("Finish as cancelled: %v", err)
	}
	if d, err := c.RunDetail(ctx, "", "r1"); err != nil || d.Status != sdk.RunCancelled {
		t.Fatalf("RunDetail: %v %v, want cancelled", d.Status, err)
	}
	if rs, err := c.Runs(ctx, sdk.RunFilter{Status: sdk.RunCancelled}); err != nil || len(rs) != 1 || rs[0].RunID != "r1" {
		t.Fatalf("Runs cancelled: %+v %v", rs, err)
	}
	if _, err := c.CancelRun(ctx, "", "r1", "again", ""); !errors.Is(err, sdk.ErrRunFinished) {
		t.Fatalf("cancel of a cancelled run: %v, want ErrRunFinished", err)
	}

	// Cancelled before the runner comes back: the resume runs nothing.
	r2 := openRun(t, c, "th_cancel", "r2")
	if err := r2.Checkpoint(ctx, sdk.PhaseRunStarted, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelRun(ctx, "th_cancel", "r2", "abandoned", ""); err != nil {
		t.Fatal(err)
	}
	again := openRun(t, c, "th_cancel", "r2")
	if st := again.Resume().Status; st != sdk.RunCancelled {
		t.Fatalf("resume of a cancelled run: status %s", st)
	}
	if err := again.Checkpoint(ctx, sdk.PhasePreLLM, map[string]any{}); !errors.Is(err, sdk.ErrRunFinished) {
		t.Fatalf("checkpoint on a resumed cancelled run: %v", err)
	}
	if n, err := c.Runs(ctx, sdk.RunFilter{Status: sdk.RunRunning}); err != nil || len(n) != 0 {
		t.Fatalf("running runs: %+v %v, want none", n, err)
	}
}
