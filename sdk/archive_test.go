package sdk_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

func emitSteps(t *testing.T, c *sdk.Client, thread string, n int) []records.ID {
	t.Helper()
	var ids []records.ID
	for i := 0; i < n; i++ {
		r, err := c.Emit(ctxT(t), sdk.Event{Thread: thread, Act: records.ActDo, Kind: "agent.step", Body: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

func chainIDs(t *testing.T, c *sdk.Client, thread string) []records.ID {
	t.Helper()
	var ids []records.ID
	for _, r := range count(t, c, thread) {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestImportKeepsIDsAndSignatures exports a signed thread whose last
// record before the erasure is erased (so the erasure's prev is a record
// the archive has no body of), imports it, and finds the same ids, the
// signatures and a log that verifies.
func TestImportKeepsIDsAndSignatures(t *testing.T) {
	key, did, err := sdk.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	src := open(t, sdk.WithActor(did), sdk.WithSigningKey(key))
	ids := emitSteps(t, src, "th_sig", 3)
	if _, err := src.Erase(ctxT(t), "th_sig", did, ids[2:], "gone"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	ex, err := src.Export(ctxT(t), &buf, sdk.ExportOptions{Threads: []string{"th_sig"}})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Records != 4 || ex.Erased != 1 {
		t.Fatalf("export: %+v", ex)
	}
	dst := open(t, sdk.WithActor("did:sync:agent:b"))
	im, err := dst.Import(ctxT(t), bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if im.Appended != 3 {
		t.Fatalf("import: %+v", im)
	}
	if a, b := chainIDs(t, src, "th_sig"), chainIDs(t, dst, "th_sig"); !slices.Equal(a, b) {
		t.Fatalf("ids: source %v, import %v", a, b)
	}
	rep, err := dst.VerifyAll(ctxT(t), nil)
	if err != nil || !rep.OK() || rep.Signed != 3 || len(rep.Erased) != 1 {
		t.Fatalf("verify after import: %+v, %v", rep, err)
	}
}

// TestImportRefusesFork: the target holds another record at a position;
// the import names it and writes nothing, not even the other threads.
func TestImportRefusesFork(t *testing.T) {
	src, dst := open(t, sdk.WithActor("did:sync:agent:a")), open(t, sdk.WithActor("did:sync:agent:a"))
	emitSteps(t, src, "th_new", 1)
	ours := emitSteps(t, src, "th_f", 2)
	theirs := emitSteps(t, dst, "th_f", 1)
	var buf bytes.Buffer
	if _, err := src.Export(ctxT(t), &buf, sdk.ExportOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	_, err := dst.Import(ctxT(t), &buf)
	var ce *sdk.ImportConflictError
	if !errors.As(err, &ce) || !errors.Is(err, records.ErrInvalid) || ce.Thread != "th_f" || ce.Position != 0 || ce.Log != theirs[0] || ce.Archive != ours[0] {
		t.Fatalf("Import = %v, want a conflict at th_f record 0", err)
	}
	if n := len(count(t, dst, "th_new")); n != 0 {
		t.Fatalf("a refused import wrote %d records of another thread", n)
	}
}

// TestImportRefusesErasedButWhole: the target holds a record the
// archive's erasure removed; appending the erasure would not remove it.
func TestImportRefusesErasedButWhole(t *testing.T) {
	src := open(t, sdk.WithActor("did:sync:agent:a"))
	ids := emitSteps(t, src, "th_e", 2)
	var before bytes.Buffer
	if _, err := src.Export(ctxT(t), &before, sdk.ExportOptions{Threads: []string{"th_e"}}); err != nil {
		t.Fatal(err)
	}
	dst := open(t, sdk.WithActor("did:sync:agent:a"))
	if _, err := dst.Import(ctxT(t), &before); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Erase(ctxT(t), "th_e", "did:sync:agent:a", ids[:1], "gone"); err != nil {
		t.Fatal(err)
	}
	var after bytes.Buffer
	if _, err := src.Export(ctxT(t), &after, sdk.ExportOptions{Threads: []string{"th_e"}}); err != nil {
		t.Fatal(err)
	}
	_, err := dst.Import(ctxT(t), &after)
	var ce *sdk.ImportConflictError
	if !errors.As(err, &ce) || ce.Reason == "" || ce.Position != 0 {
		t.Fatalf("Import = %v, want refused: erased in the archive, whole here", err)
	}
}
