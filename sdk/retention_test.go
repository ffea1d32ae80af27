package sdk_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// saveCP saves a checkpoint with summary and name to thread.
func saveCP(t *testing.T, c *sdk.Client, thread, summary, name string) sdk.Receipt {
	t.Helper()
	r, err := c.SaveCheckpoint(ctxT(t), thread, "", records.Checkpoint{Summary: summary, Learnings: []string{"l"}, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// summaries lists the summaries of the checkpoints thread still has,
// oldest first.
func summaries(t *testing.T, c *sdk.Client, thread string) []string {
	t.Helper()
	cps, err := c.ListCheckpoints(ctxT(t), thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cp := range cps {
		out = append(out, cp.Checkpoint.Summary)
	}
	return out
}

func same(a, b []string) bool { return slices.Equal(a, b) }

// A thread policy is enforced at every save: the newest N stay, and named
// and pinned checkpoints whatever their age.
func TestRetentionOnSave(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_r", KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	saveCP(t, c, "th_r", "c0", "")
	saveCP(t, c, "th_r", "c1", "release") // named
	pinned := saveCP(t, c, "th_r", "c2", "")
	p, err := c.Pin(ctx, "", "", pinned.ID, "the good one")
	if err != nil || p.Already || p.Thread != "th_r" {
		t.Fatalf("Pin: %+v, %v", p, err)
	}
	if p, err := c.Pin(ctx, "th_r", "", pinned.ID, ""); err != nil || !p.Already {
		t.Fatalf("Pin twice: %+v, %v; want Already", p, err)
	}
	for _, s := range []string{"c3", "c4", "c5"} {
		saveCP(t, c, "th_r", s, "")
	}
	if got, want := summaries(t, c, "th_r"), []string{"c1", "c2", "c4", "c5"}; !same(got, want) {
		t.Fatalf("checkpoints %v, want %v", got, want)
	}
	ts, err := c.Tombstones(ctx, "th_r")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Reason != sdk.ReasonRetention || ts[1].Reason != sdk.ReasonRetention {
		t.Fatalf("tombstones %+v, want c0 and c3 erased for retention", ts)
	}
	// Every erasure is explained: the thread verifies.
	rep, err := c.Verify(ctx, "th_r")
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}

// The policy of all threads governs threads without their own; apply
// enforces it everywhere; applying twice erases nothing more; a policy
// change erases nothing the new policy keeps.
func TestApplyRetention(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	for _, th := range []string{"th_a", "th_b", "th b/with space"} {
		for _, s := range []string{"1", "2", "3", "4", "5"} {
			saveCP(t, c, th, s, "")
		}
	}
	if res, err := c.ApplyRetention(ctx, ""); err != nil || len(res) != 0 {
		t.Fatalf("apply without a policy: %+v, %v; want nothing", res, err)
	}
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{All: true, KeepLast: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_a", KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ApplyRetention(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	erased := map[string]int{}
	for _, r := range res {
		erased[r.Thread] = len(r.Erased)
		if len(r.Erased) > 0 && len(r.Erasures) != 1 {
			t.Fatalf("%s: %d erasure records, want one for the thread", r.Thread, len(r.Erasures))
		}
	}
	if erased["th_a"] != 3 || erased["th_b"] != 1 || erased["th b/with space"] != 1 || len(res) != 3 {
		t.Fatalf("apply erased %v, want th_a 3, th_b 1, \"th b/with space\" 1", erased)
	}
	if got, want := summaries(t, c, "th_a"), []string{"4", "5"}; !same(got, want) {
		t.Fatalf("th_a: %v, want %v (its own policy wins)", got, want)
	}
	if got, want := summaries(t, c, "th_b"), []string{"2", "3", "4", "5"}; !same(got, want) {
		t.Fatalf("th_b: %v, want %v", got, want)
	}

	again, err := c.ApplyRetention(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if len(r.Erased) != 0 || len(r.Erasures) != 0 {
			t.Fatalf("applying twice erased %d of %s", len(r.Erased), r.Thread)
		}
	}

	// Keeping more erases nothing; keeping fewer erases only the surplus.
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{All: true, KeepLast: 10}); err != nil {
		t.Fatal(err)
	}
	res, err = c.ApplyRetention(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if len(r.Erased) != 0 {
			t.Fatalf("a looser policy erased %d of %s", len(r.Erased), r.Thread)
		}
	}
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{All: true, KeepLast: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplyRetention(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := summaries(t, c, "th_b"), []string{"3", "4", "5"}; !same(got, want) {
		t.Fatalf("th_b: %v, want %v", got, want)
	}

	policies, err := c.Retention(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 2 || !policies[0].All || policies[0].KeepLast != 3 || policies[1].Thread != "th_a" || policies[1].KeepLast != 2 {
		t.Fatalf("policies %+v, want all: 3 then th_a: 2", policies)
	}
}

// Checkpoints younger than MaxAge are kept beyond KeepLast.
func TestRetentionMaxAge(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	now := time.Now()
	for i, age := range []time.Duration{72 * time.Hour, 48 * time.Hour, 30 * time.Minute, 10 * time.Minute, time.Minute} {
		if _, err := c.Emit(ctx, sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: "th_age",
			Time: now.Add(-age), Body: &records.Checkpoint{Summary: string(rune('a' + i)), Learnings: []string{"l"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_age", KeepLast: 1, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplyRetention(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := summaries(t, c, "th_age"), []string{"c", "d", "e"}; !same(got, want) {
		t.Fatalf("checkpoints %v, want %v", got, want)
	}
	p, err := c.RetentionFor(ctx, "th_age")
	if err != nil || p.MaxAge != time.Hour || p.KeepLast != 1 || p.Thread != "th_age" {
		t.Fatalf("RetentionFor: %+v, %v", p, err)
	}
}

func TestRetentionRefusals(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	for _, p := range []sdk.RetentionPolicy{
		{KeepLast: 1},
		{Thread: "t", All: true, KeepLast: 1},
		{Thread: "t"},
		{Thread: "t", KeepLast: 1, MaxAge: -time.Hour},
		{Thread: sdk.RetentionThread, KeepLast: 1},
	} {
		if _, err := c.SetRetention(ctx, "", p); !errors.Is(err, records.ErrInvalid) {
			t.Errorf("SetRetention(%+v): err=%v, want ErrInvalid", p, err)
		}
	}
	step := emitN(t, c, "th_p", 1)[0]
	if _, err := c.Pin(ctx, "", "", step.ID, ""); !errors.Is(err, records.ErrInvalid) {
		t.Fatalf("pinning a step: err=%v, want ErrInvalid", err)
	}
	unknown, _ := records.New(records.ActLearn, records.KindCheckpoint, "th_p", actor, time.Now(), &records.Checkpoint{Summary: "s", Learnings: []string{"l"}})
	if _, err := c.Pin(ctx, "th_p", "", unknown.ID(), ""); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("pinning an unknown id: err=%v, want ErrNotFound", err)
	}
	if _, err := c.RetentionFor(ctx, "th_p"); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("RetentionFor without a policy: err=%v, want ErrNotFound", err)
	}
	if ps, err := c.Retention(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("Retention: %+v, %v; want none", ps, err)
	}
}

// An expiry (KeepLast 0 with MaxAge) erases every old checkpoint of a
// completed session, the newest too, and keeps a named one; a session
// that is not over keeps its newest, its resume point, however old.
func TestRetentionExpiry(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	now := time.Now()
	old := func(thread, summary, name string, age time.Duration) {
		t.Helper()
		if _, err := c.Emit(ctx, sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: thread,
			Time: now.Add(-age), Body: &records.Checkpoint{Summary: summary, Learnings: []string{"l"}, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	old("th_done", "a", "", 72*time.Hour)
	old("th_done", "b", "release", 60*time.Hour)
	old("th_done", "c", "", 48*time.Hour)
	if _, err := c.MarkSession(ctx, "th_done", "", records.KindSessionCompleted, records.SessionEvent{}); err != nil {
		t.Fatal(err)
	}
	old("th_live", "x", "", 72*time.Hour)
	old("th_live", "y", "", 48*time.Hour)
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{All: true, MaxAge: 24 * time.Hour}); err != nil {
		t.Fatalf("SetRetention of an expiry: %v", err)
	}
	res, err := c.ApplyRetention(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	erased := map[string]int{}
	for _, r := range res {
		erased[r.Thread] = len(r.Erased)
	}
	if erased["th_done"] != 2 || erased["th_live"] != 1 {
		t.Errorf("ApplyRetention reported %v, want 2 erased on th_done and 1 on th_live", erased)
	}
	if got, want := summaries(t, c, "th_done"), []string{"b"}; !same(got, want) {
		t.Errorf("completed session: checkpoints %v, want only the named one %v", got, want)
	}
	if got, want := summaries(t, c, "th_live"), []string{"y"}; !same(got, want) {
		t.Errorf("live session: checkpoints %v, want its newest %v", got, want)
	}
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "t", KeepLast: -1, MaxAge: time.Hour}); !errors.Is(err, records.ErrInvalid) {
		t.Errorf("KeepLast -1: %v, want ErrInvalid", err)
	}
}
