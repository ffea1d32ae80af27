package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// erase splits ids over several erasure records, each naming at most per
// of them; the thread still verifies through all of them.
func TestEraseInChunks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := openClient(t, ctx, t.TempDir())
	var ids []records.ID
	for i := range 25 {
		r, err := c.Emit(ctx, Event{Act: records.ActDo, Kind: "agent.step", Thread: "th_c", Body: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if err := c.log.CheckErase(ctx, "th_c", ids); err != nil {
		t.Fatalf("CheckErase: %v", err)
	}
	res, err := c.erase(ctx, "th_c", "did:sync:agent:dev", ids[:23], "bulk", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Erasures) != 3 || len(res.Erased) != 23 {
		t.Fatalf("%d erasure records erased %d, want 3 and 23", len(res.Erasures), len(res.Erased))
	}
	// The erasure records are now records of the thread: refused.
	if err := c.log.CheckErase(ctx, "th_c", []records.ID{ids[24], res.Erasures[0].ID}); !errors.Is(err, ErrNotErasable) {
		t.Fatalf("CheckErase(erasure record): err=%v, want ErrNotErasable", err)
	}
	// Erased ids pass the check (they are no-ops).
	if err := c.log.CheckErase(ctx, "th_c", ids[:2]); err != nil {
		t.Fatalf("CheckErase(erased ids): %v", err)
	}
	rep, err := c.Verify(ctx, "th_c")
	if err != nil || !rep.OK() || len(rep.Erased) != 23 || rep.Checked != 5 {
		t.Fatalf("verify: %+v, %v; want OK, 23 erased, 5 checked (2 left, 3 erasures)", rep, err)
	}
}

// twoProcesses opens two clients on one directory, as two processes
// would, and a context that bounds the test.
func twoProcesses(t *testing.T) (context.Context, *Client, *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	return ctx, openClient(t, ctx, dir), openClient(t, ctx, dir)
}

// openClient opens a client on dir with an actor, closed when t ends.
func openClient(t *testing.T, ctx context.Context, dir string) *Client {
	t.Helper()
	c, err := Open(ctx, WithDir(dir), WithActor("did:sync:agent:dev"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A checkpoint pinned by another process after retention planned to erase
// it, and before the erasure landed, is kept: the erasure is conditional
// on the thread as the plan read it, so it is refused, and retention
// planned again from what the thread holds spares the pin. The steps of
// retainOnce are taken one by one here, with the pin between them, as the
// other process would interleave.
func TestRetentionSparesPinMadeMeanwhile(t *testing.T) {
	ctx, c, other := twoProcesses(t)
	const th = "th_race"
	var saved []Receipt
	for i := range 3 {
		r, err := c.SaveCheckpoint(ctx, th, "", records.Checkpoint{Summary: fmt.Sprintf("step %d", i), Learnings: []string{"l"}})
		if err != nil {
			t.Fatal(err)
		}
		saved = append(saved, r)
	}
	p := RetentionPolicy{Thread: th, KeepLast: 1}
	if _, err := c.SetRetention(ctx, "", p); err != nil {
		t.Fatal(err)
	}
	oldest := saved[0].ID

	at, err := c.log.ThreadClock(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	_, drop, err := c.plan(ctx, th, p, time.Now())
	if err != nil || !slices.Contains(drop, oldest) {
		t.Fatalf("plan: drop %v, %v; want the oldest checkpoint among them", drop, err)
	}
	if _, err := other.Pin(ctx, th, "", oldest, "keep the first step"); err != nil {
		t.Fatalf("Pin: %v", err)
	}
	if _, err := c.eraseAfter(ctx, th, "did:sync:agent:dev", drop, ReasonRetention, MaxErasureTargets, true, at); !errors.Is(err, splog.ErrMoved) {
		t.Fatalf("erasure planned before the pin: %v, want it refused with ErrMoved", err)
	}
	if _, err := c.Record(ctx, oldest, th); err != nil {
		t.Fatalf("the refused erasure erased the pinned checkpoint: %v", err)
	}

	res, err := c.ApplyRetention(ctx, "")
	if err != nil {
		t.Fatalf("ApplyRetention: %v", err)
	}
	if _, err := c.Record(ctx, oldest, th); err != nil {
		t.Fatalf("the checkpoint pinned meanwhile is gone: %v (retention: %+v)", err, res)
	}
	if _, err := c.Record(ctx, saved[1].ID, th); err == nil {
		t.Fatalf("the unpinned older checkpoint %s survived retention (keep last 1)", saved[1].ID)
	}
	if _, err := c.Record(ctx, saved[2].ID, th); err != nil {
		t.Fatalf("the newest checkpoint is gone: %v", err)
	}
}
