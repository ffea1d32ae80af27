package sdk_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

const actor = "did:sync:agent:dev"

// emitN appends n agent.step records to thread and returns their receipts.
func emitN(t *testing.T, c *sdk.Client, thread string, n int) []sdk.Receipt {
	t.Helper()
	var out []sdk.Receipt
	for i := range n {
		r, err := c.Emit(ctxT(t), sdk.Event{Act: records.ActDo, Kind: "agent.step", Thread: thread, Body: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func idsOf(rs []sdk.Record) map[records.ID]bool {
	m := make(map[records.ID]bool)
	for _, r := range rs {
		m[r.ID] = true
	}
	return m
}

func TestErase(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	rs := emitN(t, c, "th_e", 5)
	res, err := c.Erase(ctx, "th_e", "", []records.ID{rs[1].ID, rs[3].ID}, "user asked")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Erasures) != 1 || len(res.Erased) != 2 || len(res.Already) != 0 {
		t.Fatalf("result %+v, want one erasure of two records", res)
	}
	left := idsOf(count(t, c, "th_e"))
	if left[rs[1].ID] || left[rs[3].ID] || len(left) != 4 { // 3 survivors and the erasure
		t.Fatalf("after erasure the thread reads %d records, erased ones among them: %v", len(left), left[rs[1].ID] || left[rs[3].ID])
	}

	ts, err := c.Tombstones(ctx, "th_e")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(ts), 2; got != want {
		t.Fatalf("%d tombstones, want %d", got, want)
	}
	if ts[0].ID != rs[1].ID || ts[0].Clock != rs[1].Clock || ts[0].ErasedBy != res.Erasures[0] ||
		ts[0].Reason != "user asked" || ts[0].Actor != actor || ts[0].Header.Kind != "agent.step" {
		t.Fatalf("tombstone %+v", ts[0])
	}

	again, err := c.Erase(ctx, "th_e", "", []records.ID{rs[1].ID}, "again")
	if err != nil || len(again.Already) != 1 || len(again.Erasures) != 0 {
		t.Fatalf("erasing twice: %+v, %v; want a no-op that says so", again, err)
	}
	rep, err := c.Verify(ctx, "th_e")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Checked != 4 || len(rep.Erased) != 2 {
		t.Fatalf("verify %+v, want OK, 4 checked, 2 erased", rep)
	}
}

func TestEraseRefusals(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	rs := emitN(t, c, "th_x", 3)
	other := emitN(t, c, "th_other", 1)
	done, err := c.Erase(ctx, "th_x", "", []records.ID{rs[0].ID}, "r")
	if err != nil {
		t.Fatal(err)
	}
	before := count(t, c, "th_x")
	unknown, _ := records.New(records.ActDo, "agent.step", "th_x", actor, time.Now(), map[string]any{})
	for _, tc := range []struct {
		name   string
		ids    []records.ID
		reason string
		want   error
		text   string
	}{
		{"erasure record", []records.ID{done.Erasures[0].ID}, "r", sdk.ErrNotErasable, "is an erasure record"},
		{"unknown id", []records.ID{unknown.ID()}, "r", sdk.ErrNotFound, unknown.ID().String()},
		{"other thread", []records.ID{other[0].ID}, "r", sdk.ErrNotErasable, `is on thread "th_other"`},
		{"valid and unknown", []records.ID{rs[1].ID, unknown.ID()}, "r", sdk.ErrNotFound, unknown.ID().String()},
		{"no reason", []records.ID{rs[1].ID}, "", records.ErrInvalid, "body.reason"},
		{"long reason", []records.ID{rs[1].ID}, strings.Repeat("r", 1025), records.ErrInvalid, "body.reason"},
		{"no ids", nil, "r", records.ErrInvalid, "ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Erase(ctx, "th_x", "", tc.ids, tc.reason)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err=%v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
	if got, want := len(count(t, c, "th_x")), len(before); got != want {
		t.Fatalf("refused erasures changed the thread: %d records, want %d", got, want)
	}
	if got := len(count(t, c, "th_other")); got != 1 {
		t.Fatalf("the other thread changed: %d records", got)
	}
	t.Setenv("SPL_ACTOR", "")
	noActor := open(t)
	if _, err := noActor.Erase(ctx, "th_x", "", []records.ID{rs[1].ID}, "r"); !errors.Is(err, sdk.ErrNoActor) {
		t.Fatalf("erase without an actor: err=%v, want ErrNoActor", err)
	}
}

// Past MaxErasureTargets ids, Erase checks them all before it erases any:
// one refused id changes nothing. (erase_internal_test.go erases in
// several erasure records, with a smaller chunk.)
func TestEraseManyRefused(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	n := sdk.MaxErasureTargets + 1
	var ids []records.ID
	var pend []*sdk.Pending
	for i := range n {
		p, err := c.EmitAsync(ctx, sdk.Event{Act: records.ActDo, Kind: "agent.step", Thread: "th_many", Body: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	for _, p := range pend {
		r, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	other := emitN(t, c, "th_else", 1)
	if _, err := c.Erase(ctx, "th_many", "", append(ids, other[0].ID), "r"); !errors.Is(err, sdk.ErrNotErasable) {
		t.Fatalf("err=%v, want ErrNotErasable", err)
	}
	unknown, _ := records.New(records.ActDo, "agent.step", "th_many", actor, time.Now(), map[string]any{})
	if _, err := c.Erase(ctx, "th_many", "", append(ids, unknown.ID()), "r"); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("err=%v, want ErrNotFound", err)
	}
	if got := len(count(t, c, "th_many")); got != n {
		t.Fatalf("a refused erasure changed the thread: %d records, want %d", got, n)
	}
}

func TestEraseLatestCheckpoint(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	first := saveCP(t, c, "th_cp", "first", "")
	second := saveCP(t, c, "th_cp", "second", "")
	if _, err := c.Erase(ctx, "th_cp", "", []records.ID{second.ID}, "mistake"); err != nil {
		t.Fatal(err)
	}
	latest, err := c.LatestCheckpoint(ctx, "th_cp")
	if err != nil {
		t.Fatal(err)
	}
	if latest.ID != first.ID || len(latest.Skipped) != 0 {
		t.Fatalf("latest is %s (skipped %v), want the first, %s", latest.ID, latest.Skipped, first.ID)
	}
}

// forge republishes the record of r with its body changed, behind spl's
// back: a new message that claims r's id. It returns the forged clock.
func forge(t *testing.T, c *sdk.Client, r sdk.Record, body map[string]any) uint64 {
	t.Helper()
	changed, err := records.New(r.Header.Act, r.Header.Kind, r.Header.Thread, r.Header.Actor, r.Time(), body)
	if err != nil {
		t.Fatal(err)
	}
	forged := *r.Record
	forged.Body = changed.Body
	data, err := forged.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(splog.RecordSubject(r.Header.Thread, r.Header.Kind))
	msg.Data = data
	msg.Header.Set(splog.HeaderID, r.ID.String())
	ack, err := sdk.JetStreamOf(c).PublishMsg(ctxT(t), msg)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func recordAt(t *testing.T, c *sdk.Client, thread string, clock uint64) sdk.Record {
	t.Helper()
	for _, r := range count(t, c, thread) {
		if r.Clock == clock {
			return r
		}
	}
	t.Fatalf("no record at clock %d on %s", clock, thread)
	return sdk.Record{}
}

func TestLatestCheckpointSkipsCorrupt(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	saveCP(t, c, "th_f", "one", "")
	two := saveCP(t, c, "th_f", "two", "")
	three := saveCP(t, c, "th_f", "three", "")
	// Delete the third, then forge it in its place with another summary.
	rec := recordAt(t, c, "th_f", three.Clock)
	stream, err := sdk.JetStreamOf(c).Stream(ctx, c.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, three.Clock); err != nil {
		t.Fatal(err)
	}
	forged := forge(t, c, rec, map[string]any{"summary": "forged", "learnings": []any{"x"}})
	latest, err := c.LatestCheckpoint(ctx, "th_f")
	if err != nil {
		t.Fatal(err)
	}
	if latest.ID != two.ID || fmt.Sprint(latest.Skipped) != fmt.Sprint([]uint64{forged}) {
		t.Fatalf("latest %s skipping %v, want %s skipping [%d]", latest.ID, latest.Skipped, two.ID, forged)
	}
}

func TestVerifyFindsDamage(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	rs := emitN(t, c, "th_d", 5)
	stream, err := sdk.JetStreamOf(c).Stream(ctx, c.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, rs[1].Clock); err != nil {
		t.Fatal(err)
	}
	forged := forge(t, c, recordAt(t, c, "th_d", rs[3].Clock), map[string]any{"i": 99})
	rep, err := c.Verify(ctx, "th_d")
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Corrupt) != 1 || rep.Corrupt[0].Clock != forged || rep.Corrupt[0].ID != rs[3].ID {
		t.Fatalf("corrupt %+v, want the forged copy of %s at clock %d", rep.Corrupt, rs[3].ID, forged)
	}
	if len(rep.Missing) != 1 || rep.Missing[0].ID != rs[1].ID {
		t.Fatalf("missing %+v, want the deleted %s", rep.Missing, rs[1].ID)
	}
	all, err := c.VerifyAll(ctx, nil)
	if err != nil || all.OK() || len(all.Corrupt) != 1 {
		t.Fatalf("verify all: %+v, %v", all, err)
	}

	// Record names the forged copy, though the original still verifies.
	r, err := c.Record(ctx, rs[3].ID, "")
	if !errors.Is(err, records.ErrCorrupt) || r.Clock != forged || r.Record == nil {
		t.Fatalf("Record(forged id): clock %d, err=%v; want the forged clock %d, its content and ErrCorrupt", r.Clock, err, forged)
	}
	var body map[string]any
	if err := r.DecodeBody(&body); err != nil || fmt.Sprint(body["i"]) != "99" {
		t.Fatalf("forged body %v, %v", body, err)
	}
}

func TestRecord(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	rs := emitN(t, c, "th_r", 3)
	for _, thread := range []string{"th_r", ""} {
		r, err := c.Record(ctx, rs[1].ID, thread)
		if err != nil || r.ID != rs[1].ID || r.Clock != rs[1].Clock {
			t.Fatalf("Record(%q): %+v, %v", thread, r, err)
		}
	}
	res, err := c.Erase(ctx, "th_r", "", []records.ID{rs[1].ID}, "gdpr")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Record(ctx, rs[1].ID, "th_r")
	var ee *sdk.ErasedError
	if !errors.As(err, &ee) || !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("Record(erased): err=%v, want an *ErasedError", err)
	}
	if ee.Tombstone.ErasedBy.ID != res.Erasures[0].ID || ee.Tombstone.Reason != "gdpr" {
		t.Fatalf("tombstone %+v", ee.Tombstone)
	}
	if _, err := c.Record(ctx, rs[1].ID, ""); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("Record(erased, no thread): err=%v, want ErrNotFound", err)
	}
	if _, err := c.Record(ctx, rs[0].ID, "th_nothing"); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("Record on the wrong thread: err=%v, want ErrNotFound", err)
	}
}
