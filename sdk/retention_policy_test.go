package sdk_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// A save never erases on the strength of a cached policy that a newer,
// looser one has replaced: here another client gives the thread its own
// policy between two saves, well within the cache's lifetime.
func TestRetentionCachedPolicyNotStale(t *testing.T) {
	dir := t.TempDir()
	agent := open(t, sdk.WithDir(dir), sdk.WithActor(actor))
	operator := open(t, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:operator"))
	ctx := ctxT(t)
	if _, err := operator.SetRetention(ctx, "", sdk.RetentionPolicy{All: true, KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	saveCP(t, agent, "th_stale", "c0", "") // reads (and caches) the policy of all threads
	if _, err := operator.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_stale", KeepLast: 10}); err != nil {
		t.Fatal(err)
	}
	saveCP(t, agent, "th_stale", "c1", "")
	if got, want := summaries(t, agent, "th_stale"), []string{"c0", "c1"}; !same(got, want) {
		t.Fatalf("checkpoints %v, want %v (the thread's own policy keeps 10)", got, want)
	}
	ts, err := agent.Tombstones(ctx, "th_stale")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 0 {
		t.Fatalf("%d checkpoints erased, want none", len(ts))
	}
}

// A thread whose policy record is damaged does not stop retention on the
// threads after it: ApplyRetention enforces the others and returns the
// damaged thread's error, naming it.
func TestApplyRetentionGoesOnPastADamagedPolicy(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	r, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_a_damaged", KeepLast: 5})
	if err != nil {
		t.Fatal(err)
	}
	saveCP(t, c, "th_a_damaged", "a0", "")
	forge(t, c, recordAt(t, c, "th_a_damaged", r.Clock), map[string]any{"scope": "thread", "keep_last": 1})
	for _, s := range []string{"b0", "b1", "b2"} {
		saveCP(t, c, "th_b_ok", s, "")
	}
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_b_ok", KeepLast: 1}); err != nil {
		t.Fatal(err)
	}

	res, err := c.ApplyRetention(ctx, "")
	if !errors.Is(err, records.ErrCorrupt) || !strings.Contains(err.Error(), `"th_a_damaged"`) {
		t.Fatalf("ApplyRetention: err=%v, want the damaged policy of th_a_damaged (records.ErrCorrupt)", err)
	}
	if got, want := summaries(t, c, "th_b_ok"), []string{"b2"}; !same(got, want) {
		t.Fatalf("th_b_ok keeps %v, want %v", got, want)
	}
	if len(res) != 1 || res[0].Thread != "th_b_ok" || len(res[0].Erased) != 2 {
		t.Fatalf("results %+v, want th_b_ok with 2 erased", res)
	}
	if got, want := summaries(t, c, "th_a_damaged"), []string{"a0"}; !same(got, want) {
		t.Fatalf("th_a_damaged keeps %v, want %v", got, want)
	}
	// Clearing does not pass over the damaged record either: it names it,
	// and erases nothing.
	if cr, err := c.ClearRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_a_damaged"}); !errors.Is(err, records.ErrCorrupt) || len(cr.Erased) != 0 {
		t.Fatalf("ClearRetention over a damaged policy: %+v, %v; want records.ErrCorrupt and nothing erased", cr, err)
	}
}

// The scope rule, as the service layer reads it: a thread's own
// retention policy governs it, so a damaged policy of all threads does
// not stop its retention, while a thread without one of its own is told
// of the damage; redaction applies both policies, so a damaged policy of
// all threads stops every thread's appends.
func TestPolicyScopeOverADamagedPolicyOfAll(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	all, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{All: true, KeepLast: 3})
	if err != nil {
		t.Fatal(err)
	}
	own, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_own", KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	forge(t, c, recordAt(t, c, records.RetentionThread, all.Clock), map[string]any{"scope": "all", "keep_last": 9})
	if p, err := c.RetentionFor(ctx, "th_own"); err != nil || p.ID != own.ID || p.All {
		t.Fatalf("RetentionFor a thread with its own policy: %+v, %v; want its own (%s)", p, err, own.ID.Short())
	}
	if _, err := c.RetentionFor(ctx, "th_other"); !errors.Is(err, records.ErrCorrupt) {
		t.Fatalf("RetentionFor a thread governed by the damaged policy of all: %v, want records.ErrCorrupt", err)
	}
	for _, s := range []string{"a", "b"} {
		saveCP(t, c, "th_own", s, "")
	}
	if got, want := summaries(t, c, "th_own"), []string{"b"}; !same(got, want) {
		t.Fatalf("th_own keeps %v, want %v", got, want)
	}

	red, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{All: true, Keys: []string{"secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{Thread: "th_own", Keys: []string{"api_key"}}); err != nil {
		t.Fatal(err)
	}
	pols, err := c.RedactionFor(ctx, "th_own")
	if err != nil || len(pols) != 2 || !pols[0].All || pols[1].Thread != "th_own" {
		t.Fatalf("RedactionFor: %+v, %v; want the policy of all, then the thread's", pols, err)
	}
	forge(t, c, recordAt(t, c, records.RedactionThread, red.Clock), map[string]any{"scope": "all", "keys": []any{}})
	if _, err := c.RedactionFor(ctx, "th_own"); !errors.Is(err, records.ErrCorrupt) {
		t.Fatalf("RedactionFor over a damaged policy of all: %v, want records.ErrCorrupt", err)
	}
}
