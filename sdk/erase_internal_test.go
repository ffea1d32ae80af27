package sdk

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

// erase splits ids over several erasure records, each naming at most per
// of them; the thread still verifies through all of them.
func TestEraseInChunks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Open(ctx, WithDir(t.TempDir()), WithActor("did:sync:agent:dev"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []records.ID
	for i := range 25 {
		r, err := c.Emit(ctx, Event{Act: records.ActDo, Kind: "agent.step", Thread: "th_c", Body: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if err := c.checkErasable(ctx, "th_c", ids); err != nil {
		t.Fatalf("checkErasable: %v", err)
	}
	res, err := c.erase(ctx, "th_c", "did:sync:agent:dev", ids[:23], "bulk", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Erasures) != 3 || len(res.Erased) != 23 {
		t.Fatalf("%d erasure records erased %d, want 3 and 23", len(res.Erasures), len(res.Erased))
	}
	// The erasure records are now records of the thread: refused.
	if err := c.checkErasable(ctx, "th_c", []records.ID{ids[24], res.Erasures[0].ID}); !errors.Is(err, ErrNotErasable) {
		t.Fatalf("checkErasable(erasure record): err=%v, want ErrNotErasable", err)
	}
	// Erased ids pass the check (they are no-ops).
	if err := c.checkErasable(ctx, "th_c", ids[:2]); err != nil {
		t.Fatalf("checkErasable(erased ids): %v", err)
	}
	rep, err := c.Verify(ctx, "th_c")
	if err != nil || !rep.OK() || len(rep.Erased) != 23 || rep.Checked != 5 {
		t.Fatalf("verify: %+v, %v; want OK, 23 erased, 5 checked (2 left, 3 erasures)", rep, err)
	}
}
