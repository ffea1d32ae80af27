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

func saveLineageCP(t *testing.T, c *sdk.Client, thread string, cp records.Checkpoint) sdk.Receipt {
	t.Helper()
	if cp.Learnings == nil {
		cp.Learnings = []string{"l"}
	}
	r, err := c.SaveCheckpoint(context.Background(), thread, "did:sync:agent:dev", cp)
	if err != nil {
		t.Fatalf("save: %v", err)
	}
	return r
}

// Parents follow the branch: the previous checkpoint, or the one resumed.
func TestLineageParentsAndResume(t *testing.T) {
	ctx := context.Background()
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	a := saveLineageCP(t, c, "th", records.Checkpoint{Summary: "a", Name: "first"})
	b := saveLineageCP(t, c, "th", records.Checkpoint{Summary: "b"})
	if _, err := c.ResumeSession(ctx, "th", "", sdk.ResumeOptions{Ref: "first"}); err != nil {
		t.Fatal(err)
	}
	d := saveLineageCP(t, c, "th", records.Checkpoint{Summary: "d"})
	for _, tc := range []struct {
		id, parent records.ID
	}{{b.ID, a.ID}, {d.ID, a.ID}} {
		sc, err := c.CheckpointByID(ctx, "th", tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if got := sc.Checkpoint.Parent; got != tc.parent {
			t.Errorf("parent of %s = %s, want %s", tc.id.Short(), got.Short(), tc.parent.Short())
		}
	}
	if sc, err := c.FindCheckpoint(ctx, "th", b.ID.String()[50:]); err != nil || sc.ID != b.ID {
		t.Errorf("FindCheckpoint by end of id: %v, %v", sc.ID, err)
	}
	l, err := c.Lineage(ctx, "th")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(l.Nodes), 4; got != want {
		t.Fatalf("lineage has %d nodes, want %d: %+v", got, want, l.Nodes)
	}
}

// A fork verifies across threads, also once its source was erased; a
// broken link does not.
func TestForkVerifiesAfterErasure(t *testing.T) {
	ctx := context.Background()
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	a := saveLineageCP(t, c, "src", records.Checkpoint{Summary: "a", State: map[string]any{"phase": "1"}})
	saveLineageCP(t, c, "src", records.Checkpoint{Summary: "b"})
	set, err := sdk.ParseStateSet("phase=2")
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Fork(ctx, "src", sdk.ForkRequest{From: a.ID.String(), To: "dst", Set: []sdk.StateSet{set}})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Checkpoint.Checkpoint.State["phase"]; got != uint64(2) {
		t.Errorf("forked state phase = %#v, want 2", got)
	}
	if _, err := c.Fork(ctx, "src", sdk.ForkRequest{To: "dst"}); !errors.Is(err, records.ErrInvalid) {
		t.Errorf("fork onto a thread with records: %v, want ErrInvalid", err)
	}
	if _, err := c.Erase(ctx, "src", "", []records.ID{a.ID}, "test"); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Verify(ctx, "dst")
	if err != nil || !rep.OK() {
		t.Fatalf("verify dst after erasure: %+v, %v", rep, err)
	}
	bad := records.Checkpoint{Summary: "x", Learnings: []string{"l"},
		ForkedFrom: &records.ForkLink{Thread: "src", ID: f.Checkpoint.ID, Clock: 1}}
	if _, err := c.SaveCheckpoint(ctx, "bad", "", bad); err != nil {
		t.Fatal(err)
	}
	if rep, err := c.Verify(ctx, "bad"); err != nil || rep.OK() {
		t.Fatalf("verify a broken fork link: %+v, %v; want a problem", rep, err)
	}
}

func TestPruneAndDiff(t *testing.T) {
	ctx := context.Background()
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	dirty := false
	var ids []records.ID
	for i := range 4 {
		cp := records.Checkpoint{Summary: "s", State: map[string]any{"i": uint64(i)}}
		if i == 1 {
			cp.Extra = map[string]any{"is_clean": dirty}
		}
		ids = append(ids, saveLineageCP(t, c, "p", cp).ID)
	}
	res, err := c.Prune(ctx, "p", sdk.PruneOptions{KeepLast: 1, KeepCleanOnly: true, DryRun: true})
	if err != nil || len(res.Pruned) != 1 || res.Pruned[0] != ids[1] {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	res, err = c.Prune(ctx, "p", sdk.PruneOptions{OlderThan: time.Hour, KeepLast: 2, Now: time.Now().Add(2 * time.Hour)})
	if err != nil || len(res.Pruned) != 2 || len(res.Erasures) != 1 {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	a, _ := c.CheckpointByID(ctx, "p", ids[2])
	b, _ := c.CheckpointByID(ctx, "p", ids[3])
	d, err := sdk.DiffCheckpoints(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, ch := range d.Changes {
		paths = append(paths, ch.Op+" "+ch.Path)
	}
	if got, want := len(paths), 2; got != want { // parent, state.i
		t.Fatalf("diff: %v", paths)
	}
}

// A client that saved a thread's last checkpoint skips reading the thread
// for the next one only while its checkpoint is still the thread's last
// record: a checkpoint saved by another client (another process) in
// between, or any other record, makes the next parent the thread's true
// head.
func TestLineageParentAcrossClients(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	a := open2(t, dir, sdk.WithActor("did:sync:agent:dev"))
	b := open2(t, dir, sdk.WithActor("did:sync:agent:dev"))
	a1 := saveLineageCP(t, a, "th", records.Checkpoint{Summary: "a1"})
	a2 := saveLineageCP(t, a, "th", records.Checkpoint{Summary: "a2"}) // a's own head
	b1 := saveLineageCP(t, b, "th", records.Checkpoint{Summary: "b1"}) // another process
	a3 := saveLineageCP(t, a, "th", records.Checkpoint{Summary: "a3"})
	if _, err := b.Emit(ctx, sdk.Event{Act: records.ActSay, Kind: "note.text", Thread: "th", Body: map[string]any{"text": "between"}}); err != nil {
		t.Fatal(err)
	}
	a4 := saveLineageCP(t, a, "th", records.Checkpoint{Summary: "a4"})
	b2 := saveLineageCP(t, b, "th", records.Checkpoint{Summary: "b2"})
	for _, tc := range []struct {
		name       string
		id, parent records.ID
	}{
		{"a2", a2.ID, a1.ID}, {"b1", b1.ID, a2.ID}, {"a3", a3.ID, b1.ID}, {"a4", a4.ID, a3.ID}, {"b2", b2.ID, a4.ID},
	} {
		sc, err := a.CheckpointByID(ctx, "th", tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if got := sc.Checkpoint.Parent; got != tc.parent {
			t.Errorf("parent of %s = %s, want %s", tc.name, got.Short(), tc.parent.Short())
		}
	}
}

// Under a keep-last policy every save is followed by the retention
// erasure it causes; the client's next save still skips reading the
// thread (the erasures follow its own checkpoint directly), and each
// checkpoint's parent is the one before.
func TestLineageParentUnderRetention(t *testing.T) {
	ctx := ctxT(t)
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	if _, err := c.SetRetention(ctx, "", sdk.RetentionPolicy{Thread: "th", KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	var prev records.ID
	for i := range 6 {
		r := saveLineageCP(t, c, "th", records.Checkpoint{Summary: fmt.Sprintf("s%d", i)})
		sc, err := c.CheckpointByID(ctx, "th", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Checkpoint.Parent != prev {
			t.Fatalf("save %d: parent %s, want %s", i, sc.Checkpoint.Parent.Short(), prev.Short())
		}
		prev = r.ID
		last, err := c.LastClock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := sdk.CachedHead(c, "th"); got != last {
			t.Fatalf("save %d: the next save skips reading the thread at clock %d, but the thread is at %d: it will read it", i, got, last)
		}
	}
}

// A checkpoint whose body names no parent (written raw) is drawn under
// the parent a save would have given it then, by the same rule: after a
// resume, the checkpoint resumed; after an erasure of the newest
// checkpoint, the one before it; and a checkpoint erased after it was
// saved stays its parent.
func TestImpliedParentIsTheSaveRule(t *testing.T) {
	ctx := ctxT(t)
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	raw := func(summary string) records.ID {
		t.Helper()
		r, err := c.Emit(ctx, sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: "th",
			Body: &records.Checkpoint{Summary: summary, Learnings: []string{"l"}}})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	a := saveLineageCP(t, c, "th", records.Checkpoint{Summary: "a", Name: "first"})
	saveLineageCP(t, c, "th", records.Checkpoint{Summary: "b"})
	if _, err := c.ResumeSession(ctx, "th", "", sdk.ResumeOptions{Ref: "first"}); err != nil {
		t.Fatal(err)
	}
	afterResume := raw("after the resume")
	x := saveLineageCP(t, c, "th", records.Checkpoint{Summary: "x"})
	y := saveLineageCP(t, c, "th", records.Checkpoint{Summary: "y"})
	if _, err := c.Erase(ctx, "th", "", []records.ID{y.ID}, "test"); err != nil {
		t.Fatal(err)
	}
	afterErasure := raw("after y was erased")
	w := raw("w")
	z := raw("z")
	if _, err := c.Erase(ctx, "th", "", []records.ID{w}, "test"); err != nil {
		t.Fatal(err)
	}
	saved := saveLineageCP(t, c, "th", records.Checkpoint{Summary: "saved"})

	l, err := c.Lineage(ctx, "th")
	if err != nil {
		t.Fatal(err)
	}
	parents := make(map[records.ID]sdk.LineageNode)
	for _, n := range l.Nodes {
		if n.Type == sdk.NodeCheckpoint {
			parents[n.ID] = n
		}
	}
	for _, tc := range []struct {
		name          string
		id, parent    records.ID
		impliedParent bool
	}{
		{"raw after a resume", afterResume, a.ID, true},
		{"raw after an erasure", afterErasure, x.ID, true},
		{"raw whose parent was erased since", z, w, true},
		{"saved after raw ones", saved.ID, z, false},
	} {
		n, ok := parents[tc.id]
		if !ok {
			t.Fatalf("%s: no node for %s", tc.name, tc.id.Short())
		}
		if n.Parent != tc.parent || n.ImpliedParent != tc.impliedParent {
			t.Errorf("%s: parent %s (implied %v), want %s (implied %v)", tc.name, n.Parent.Short(), n.ImpliedParent, tc.parent.Short(), tc.impliedParent)
		}
	}
}
