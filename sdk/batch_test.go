package sdk_test

import (
	"errors"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// TestAppendEvents checks that the events of one call land in the order
// given on their thread, each with its own outcome: a bad one fails alone.
func TestAppendEvents(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:test"))
	ctx := ctxT(t)
	ev := func(thread string, act string, step int) sdk.Event {
		return sdk.Event{Act: act, Kind: "agent.step", Thread: thread, Body: map[string]any{"step": step}}
	}
	evs := []sdk.Event{ev("th_a", "DO", 0), ev("th_b", "DO", 1), ev("th_a", "do", 2), ev("th_a", "DO", 3), ev("th_a", "DO", 4)}
	recs, errs := c.AppendEvents(ctx, evs)
	var fe *records.FieldError
	if !errors.As(errs[2], &fe) || fe.Field != "act" {
		t.Fatalf("event 2: err=%v, want a field error on act", errs[2])
	}
	for _, i := range []int{0, 1, 3, 4} {
		if errs[i] != nil || recs[i].Clock == 0 {
			t.Fatalf("event %d: %+v, %v", i, recs[i], errs[i])
		}
	}
	got := count(t, c, "th_a")
	if len(got) != 3 {
		t.Fatalf("%d records on th_a, want 3", len(got))
	}
	for i, want := range []int{0, 3, 4} {
		if got[i].ID != recs[want].ID {
			t.Errorf("record %d of th_a is %s, want event %d's %s", i, got[i].ID, want, recs[want].ID)
		}
		if i > 0 && got[i].Header.Prev != got[i-1].ID {
			t.Errorf("record %d: prev=%s, want %s", i, got[i].Header.Prev, got[i-1].ID)
		}
	}
}
