package sdk_test

import (
	"errors"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// Clearing a thread's policy hands the thread back to the policy of all
// threads; clearing that one too keeps every checkpoint from then on. The
// policy records are erased, with an audit trail, and nothing else is.
func TestClearRetention(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	set := func(p sdk.RetentionPolicy) {
		t.Helper()
		if _, err := c.SetRetention(ctx, "", p); err != nil {
			t.Fatal(err)
		}
	}
	set(sdk.RetentionPolicy{All: true, KeepLast: 3})
	set(sdk.RetentionPolicy{Thread: "th_c", KeepLast: 2})
	set(sdk.RetentionPolicy{Thread: "th_c", KeepLast: 1})
	for _, s := range []string{"c0", "c1", "c2"} {
		saveCP(t, c, "th_c", s, "")
	}
	if got, want := summaries(t, c, "th_c"), []string{"c2"}; !same(got, want) {
		t.Fatalf("under the thread's policy: %v, want %v", got, want)
	}

	r, err := c.ClearRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Erased) != 2 || len(r.Erasures) != 1 {
		t.Fatalf("clear: %+v, want both policy records erased by one erasure", r)
	}
	p, err := c.RetentionFor(ctx, "th_c")
	if err != nil || !p.All || p.KeepLast != 3 {
		t.Fatalf("RetentionFor after clearing the thread's policy: %+v, %v; want the policy of all threads", p, err)
	}
	for _, s := range []string{"c3", "c4", "c5", "c6"} {
		saveCP(t, c, "th_c", s, "")
	}
	if got, want := summaries(t, c, "th_c"), []string{"c4", "c5", "c6"}; !same(got, want) {
		t.Fatalf("under the policy of all threads: %v, want %v", got, want)
	}

	if r, err := c.ClearRetention(ctx, "", sdk.RetentionPolicy{All: true}); err != nil || len(r.Erased) != 1 {
		t.Fatalf("clear all: %+v, %v; want its one record erased", r, err)
	}
	if _, err := c.RetentionFor(ctx, "th_c"); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("RetentionFor with no policy left: err=%v, want ErrNotFound", err)
	}
	if ps, err := c.Retention(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("Retention: %+v, %v; want none", ps, err)
	}
	saveCP(t, c, "th_c", "c7", "")
	saveCP(t, c, "th_c", "c8", "")
	if got, want := summaries(t, c, "th_c"), []string{"c4", "c5", "c6", "c7", "c8"}; !same(got, want) {
		t.Fatalf("with no policy: %v, want %v", got, want)
	}
	if r, err := c.ClearRetention(ctx, "", sdk.RetentionPolicy{Thread: "th_c"}); err != nil || len(r.Erased)+len(r.Erasures) != 0 {
		t.Fatalf("clearing what is not set: %+v, %v; want nothing done", r, err)
	}

	ts, err := c.Tombstones(ctx, "th_c")
	if err != nil {
		t.Fatal(err)
	}
	cleared := 0
	for _, tb := range ts {
		if tb.Reason == sdk.ReasonRetentionCleared {
			if tb.Header.Kind != records.KindRetention {
				t.Fatalf("clearing erased a %s: %+v", tb.Header.Kind, tb)
			}
			cleared++
		}
	}
	if cleared != 2 {
		t.Fatalf("tombstones %+v: want the 2 policy records erased with reason %q", ts, sdk.ReasonRetentionCleared)
	}
	for _, th := range []string{"th_c", sdk.RetentionThread} {
		if rep, err := c.Verify(ctx, th); err != nil || !rep.OK() {
			t.Fatalf("verify %s: %+v, %v", th, rep, err)
		}
	}
}

func TestClearRetentionRefusals(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	for _, p := range []sdk.RetentionPolicy{
		{},
		{Thread: "t", All: true},
		{Thread: sdk.RetentionThread},
	} {
		if _, err := c.ClearRetention(ctxT(t), "", p); !errors.Is(err, records.ErrInvalid) {
			t.Errorf("ClearRetention(%+v): err=%v, want ErrInvalid", p, err)
		}
	}
}
