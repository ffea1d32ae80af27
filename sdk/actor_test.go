package sdk_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

func keyOf(b byte) (ed25519.PrivateKey, string) {
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	return k, records.DIDKey(k.Public().(ed25519.PublicKey))
}

func wantField(t *testing.T, err error, field string, words ...string) {
	t.Helper()
	var fe *records.FieldError
	if !errors.As(err, &fe) || fe.Field != field {
		t.Fatalf("err=%v, want a field error on %s", err, field)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("err=%v, want it to name %s", err, w)
		}
	}
}

func TestSignedEmit(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	const dev = "did:sync:agent:dev"
	key, keyDID := keyOf(1)
	_, otherDID := keyOf(2)
	other, _ := keyOf(2)
	admin := open2(t, dir, sdk.WithActor("did:sync:admin"))
	agent := open2(t, dir, sdk.WithSigningKey(key))
	if got := agent.SigningKey(); got != keyDID {
		t.Fatalf("SigningKey=%s, want %s", got, keyDID)
	}
	note := sdk.Event{Act: records.ActSay, Kind: "note.text", Thread: "th", Body: map[string]any{"text": "hi"}}

	// A did:key actor needs no binding.
	ev := note
	ev.Actor = keyDID
	r, err := agent.AppendEvent(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sig == nil || r.CheckSignature() != nil {
		t.Fatalf("stored record's signature %+v", r.Sig)
	}
	// A DID with no key bound: refused, saying how to bind it.
	ev.Actor = dev
	_, err = agent.Emit(ctx, ev)
	wantField(t, err, "signature", dev, keyDID, "spl actor bind")

	if _, err := admin.BindActorKey(ctx, "", dev, keyDID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Emit(ctx, ev); err != nil {
		t.Fatalf("emit after binding: %v", err)
	}
	p, err := agent.EmitAsync(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Another key claiming dev: refused, naming the actor and both keys.
	forger := open2(t, dir, sdk.WithSigningKey(other))
	_, err = forger.Emit(ctx, ev)
	wantField(t, err, "signature", dev, otherDID, keyDID)

	// A log that requires signatures refuses an unsigned record.
	strict := open2(t, dir, sdk.WithRequireSigned())
	_, err = strict.Emit(ctx, ev)
	wantField(t, err, "actor", dev)

	keys, err := admin.ActorKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0].Actor != dev || keys[0].Key != keyDID {
		t.Fatalf("ActorKeys=%+v, %v", keys, err)
	}
	rep, err := admin.Verify(ctx, "th")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OKSigned(true) || rep.Signed != 3 {
		t.Fatalf("verify %+v: want 3 signed, nothing else", rep)
	}
	// Revoked: dev's key no longer signs.
	if _, err := admin.BindActorKey(ctx, "", dev, "", true); err != nil {
		t.Fatal(err)
	}
	_, err = agent.Emit(ctx, ev)
	wantField(t, err, "signature", dev)
}

// A record its author signed cannot be redacted: the signature would not
// cover what is stored.
func TestSignedRecordNotRedacted(t *testing.T) {
	ctx := ctxT(t)
	c := open(t, sdk.WithActor("did:sync:admin"))
	key, keyDID := keyOf(3)
	if _, err := c.SetRedaction(ctx, "", sdk.RedactionPolicy{Thread: "th", Keys: []string{"secret"}}); err != nil {
		t.Fatal(err)
	}
	rec, err := records.New(records.ActSay, "note.text", "th", keyDID, time.Now(), map[string]any{"secret": "x"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Sign(key)
	_, err = c.Append(ctx, rec)
	wantField(t, err, "signature", "redaction")
}

func TestKeyFile(t *testing.T) {
	key, did, err := sdk.GenerateKey()
	if err != nil || !strings.HasPrefix(did, "did:key:z6Mk") {
		t.Fatalf("GenerateKey: %s, %v", did, err)
	}
	path := filepath.Join(t.TempDir(), "keys", "a.key")
	if err := sdk.WriteKeyFile(path, key); err != nil {
		t.Fatal(err)
	}
	if err := sdk.WriteKeyFile(path, key); err == nil {
		t.Fatal("WriteKeyFile replaced a key")
	}
	got, err := sdk.ReadKeyFile(path)
	if err != nil || !got.Equal(key) {
		t.Fatalf("ReadKeyFile: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.ReadKeyFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("ReadKeyFile of a readable file: %v", err)
	}
}

// open2 opens a client on dir, closed when the test ends.
func open2(t *testing.T, dir string, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	c, err := sdk.Open(ctxT(t), append([]sdk.Option{sdk.WithDir(dir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A run's records take the seal path of every record: signed by the
// client's key after its payload was redacted under the policies of the
// run's thread, and refused unsigned by a log that requires signatures.
func TestRunRecordsSealed(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	key, keyDID := keyOf(4)
	admin := open2(t, dir, sdk.WithActor("did:sync:admin"))
	if _, err := admin.SetRedaction(ctx, "", sdk.RedactionPolicy{Thread: "th", Keys: []string{"secret"}}); err != nil {
		t.Fatal(err)
	}
	agent := open2(t, dir, sdk.WithSigningKey(key), sdk.WithActor(keyDID))
	r, err := agent.OpenRun(ctx, "th", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Checkpoint(ctx, sdk.PhasePreLLM, map[string]any{"secret": "s3cr3t", "model": "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Effect(ctx, "c1", "echo", 1, func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"ok":1}`), nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(ctx, sdk.Terminal{Result: "done"}); err != nil {
		t.Fatal(err)
	}
	d, err := admin.RunDetail(ctx, "th", "r1")
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Phases[0].Payload.Map()
	if err != nil || m["secret"] != nil || m["model"] != "m" {
		t.Fatalf("payload %v, err %v: want the secret redacted, the rest kept", m, err)
	}
	for _, th := range []string{sdk.RunThread("th", "r1"), sdk.RunThread("th", "r1") + "/effects"} {
		rep, err := admin.Verify(ctx, th)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OKSigned(true) || rep.Signed == 0 {
			t.Fatalf("%s: verify %+v: want every record signed", th, rep)
		}
	}
	strict := open2(t, dir, sdk.WithRequireSigned(), sdk.WithActor("did:sync:agent:dev"))
	s, err := strict.OpenRun(ctx, "th", "r2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Effect(ctx, "c1", "echo", 1, func(context.Context) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
	wantField(t, err, "actor", "did:sync:agent:dev")
	s.Close()
}

// An erasure record is held to the same signature rules as every record:
// a client that requires signatures and has no key cannot erase, and
// nothing is erased; a client with a key signs its erasure.
func TestErasureSealed(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	key, keyDID := keyOf(3)
	agent := open2(t, dir, sdk.WithSigningKey(key), sdk.WithActor(keyDID))
	r, err := agent.Emit(ctx, sdk.Event{Act: records.ActSay, Kind: "note.text", Thread: "th", Body: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	strict := open2(t, dir, sdk.WithRequireSigned(), sdk.WithActor("did:sync:agent:dev"))
	_, err = strict.Erase(ctx, "th", "", []records.ID{r.ID}, "user request")
	wantField(t, err, "actor", "did:sync:agent:dev")
	if _, err := agent.Record(ctx, r.ID, "th"); err != nil {
		t.Fatalf("the record after a refused erasure: %v", err)
	}
	res, err := agent.Erase(ctx, "th", "", []records.ID{r.ID}, "user request")
	if err != nil || len(res.Erasures) != 1 {
		t.Fatalf("erase with a key: %+v, %v", res, err)
	}
	rep, err := agent.Verify(ctx, "th")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OKSigned(true) || rep.Signed != 1 || rep.UnsignedCount != 0 {
		t.Fatalf("verify %+v: want the erasure record signed, nothing unsigned", rep)
	}
}
