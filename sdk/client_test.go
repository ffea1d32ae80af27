package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

func open(t *testing.T, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Open(ctx, append([]sdk.Option{sdk.WithDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func count(t *testing.T, c *sdk.Client, thread string, opts ...sdk.QueryOption) []sdk.Record {
	t.Helper()
	var out []sdk.Record
	for r, err := range c.QueryThread(ctxT(t), thread, opts...) {
		if err != nil {
			t.Fatalf("QueryThread: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func TestActorDefaults(t *testing.T) {
	t.Setenv("SPL_ACTOR", "")
	c := open(t)
	ctx := ctxT(t)
	ev := sdk.Event{Act: records.ActKnow, Kind: "agent.step", Thread: "th", Body: map[string]any{}}
	if _, err := c.Emit(ctx, ev); !errors.Is(err, sdk.ErrNoActor) {
		t.Fatalf("emit without actor: err=%v, want ErrNoActor", err)
	}
	t.Setenv("SPL_ACTOR", "did:sync:agent:env")
	c2 := open(t)
	if _, err := c2.Emit(ctx, ev); err != nil {
		t.Fatal(err)
	}
	rs := count(t, c2, "th")
	if got, want := rs[0].Header.Actor, "did:sync:agent:env"; got != want {
		t.Fatalf("actor=%q, want %q", got, want)
	}
	ev.Actor = "did:sync:agent:explicit"
	if _, err := c2.Emit(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if got, want := count(t, c2, "th")[1].Header.Actor, ev.Actor; got != want {
		t.Fatalf("actor=%q, want %q", got, want)
	}
}

func TestEmitRejectsBadInput(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	ctx := ctxT(t)
	for _, ev := range []sdk.Event{
		{Act: "know", Kind: "agent.step", Thread: "th", Body: map[string]any{}},
		{Act: "KNOW", Kind: "Agent.Step", Thread: "th", Body: map[string]any{}},
		{Act: "KNOW", Kind: "agent.step", Thread: "", Body: map[string]any{}},
		{Act: "KNOW", Kind: "agent.step", Thread: "th", Actor: "agent-dev", Body: map[string]any{}},
		{Act: "KNOW", Kind: "agent.step", Thread: "th", Body: []int{1}},
	} {
		if _, err := c.Emit(ctx, ev); !errors.Is(err, records.ErrInvalid) {
			t.Errorf("Emit(%+v): err=%v, want ErrInvalid", ev, err)
		}
		if _, err := c.EmitAsync(ctx, ev); !errors.Is(err, records.ErrInvalid) {
			t.Errorf("EmitAsync(%+v): err=%v, want ErrInvalid", ev, err)
		}
	}
	if n := len(count(t, c, "th")); n != 0 {
		t.Fatalf("bad input stored %d records", n)
	}
}

func TestCheckpoints(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	ctx := ctxT(t)
	if _, err := c.LatestCheckpoint(ctx, "th_cp"); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("latest of empty thread: err=%v, want ErrNotFound", err)
	}
	var receipts []sdk.Receipt
	for i := range 5 {
		if _, err := c.Emit(ctx, sdk.Event{Act: records.ActDo, Kind: "agent.step", Thread: "th_cp", Body: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
		r, err := c.SaveCheckpoint(ctx, "th_cp", "", records.Checkpoint{
			Summary:   fmt.Sprintf("session %d", i),
			Learnings: []string{"a", "b"},
			Name:      map[bool]string{true: "release"}[i == 2],
			Extra:     map[string]any{"tokens": uint64(1000 + i)},
		})
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, r)
	}
	latest, err := c.LatestCheckpoint(ctx, "th_cp")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := latest.ID, receipts[4].ID; got != want {
		t.Fatalf("latest=%s, want %s", got, want)
	}
	if got, want := latest.Checkpoint.Summary, "session 4"; got != want {
		t.Fatalf("summary=%q, want %q", got, want)
	}
	if got := fmt.Sprint(latest.Checkpoint.Extra["tokens"]); got != "1004" {
		t.Fatalf("extra tokens=%s, want 1004", got)
	}
	list, err := c.ListCheckpoints(ctx, "th_cp", 3)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(list), 3; got != want {
		t.Fatalf("list has %d, want %d", got, want)
	}
	if list[0].ID != receipts[2].ID || list[2].ID != receipts[4].ID {
		t.Fatalf("list is not the newest three, oldest first")
	}
	if got, want := list[0].Checkpoint.Name, "release"; got != want {
		t.Fatalf("name=%q, want %q", got, want)
	}
	all, err := c.ListCheckpoints(ctx, "th_cp", 0)
	if err != nil || len(all) != 5 {
		t.Fatalf("all checkpoints: %d, %v", len(all), err)
	}
}

func TestQueryOptions(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	ctx := ctxT(t)
	var clocks []uint64
	for i := range 10 {
		act, kind := records.ActDo, "agent.step"
		if i%2 == 1 {
			act, kind = records.ActSay, "agent.message"
		}
		r, err := c.Emit(ctx, sdk.Event{Act: act, Kind: kind, Thread: "th_q", Body: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		clocks = append(clocks, r.Clock)
	}
	if got, want := len(count(t, c, "th_q", sdk.OfKind("agent.message"))), 5; got != want {
		t.Fatalf("OfKind: %d, want %d", got, want)
	}
	if got, want := len(count(t, c, "th_q", sdk.OfAct(records.ActDo))), 5; got != want {
		t.Fatalf("OfAct: %d, want %d", got, want)
	}
	if got, want := len(count(t, c, "th_q", sdk.FromClock(clocks[7]))), 3; got != want {
		t.Fatalf("FromClock: %d, want %d", got, want)
	}
	last := count(t, c, "th_q", sdk.Last(4))
	if len(last) != 4 || last[0].Clock != clocks[6] || last[3].Clock != clocks[9] {
		t.Fatalf("Last(4) = %d records starting %d", len(last), last[0].Clock)
	}
}

// EmitAsync blocks when the queue is full, until the caller's context ends.
func TestEmitAsyncBackPressure(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"), sdk.WithQueueSize(1))
	ev := sdk.Event{Act: records.ActKnow, Kind: "agent.step", Thread: "th_bp", Body: map[string]any{}}
	const n = 200
	var pend []*sdk.Pending
	blocked := 0
	for len(pend) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Microsecond)
		p, err := c.EmitAsync(ctx, ev)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			blocked++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	if blocked == 0 {
		t.Fatalf("a queue of 1 never pushed back over %d emits", n)
	}
	if err := c.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(count(t, c, "th_bp")); got != n {
		t.Fatalf("thread holds %d, want %d", got, n)
	}
}

// Close flushes within its deadline and reports exactly what did not land.
func TestCloseReportsUnlanded(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:dev"), sdk.WithCloseTimeout(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	for i := range n {
		if _, err := c.EmitAsync(ctx, sdk.Event{Act: records.ActKnow, Kind: "agent.step", Thread: fmt.Sprintf("th_%d", i%50), Body: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	cerr := c.Close()
	var ue *sdk.UnlandedError
	if !errors.As(cerr, &ue) || ue.Count == 0 {
		t.Fatalf("Close: err=%v, want *UnlandedError with a count", cerr)
	}
	c2, err := sdk.Open(ctx, sdk.WithDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	landed := 0
	for i := range 50 {
		landed += len(count(t, c2, fmt.Sprintf("th_%d", i)))
	}
	if got, want := landed+ue.Count, n; got != want {
		t.Fatalf("landed %d + unlanded %d = %d, want %d; Close: %v", landed, ue.Count, got, want, cerr)
	}
}
