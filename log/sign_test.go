package log

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

func testKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func didOf(k ed25519.PrivateKey) string { return records.DIDKey(k.Public().(ed25519.PublicKey)) }

// appendSigned appends a record on thread as actor, signed with key (nil:
// unsigned).
func appendSigned(t *testing.T, l *Log, thread, actor string, key ed25519.PrivateKey) Entry {
	t.Helper()
	rec, err := records.New(records.ActSay, "note.text", thread, actor, time.Now(), map[string]any{"text": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if key != nil {
		rec.Sign(key)
	}
	e, err := l.Append(ctxT(t), rec)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func bindKey(t *testing.T, l *Log, actor string, key ed25519.PrivateKey) Entry {
	t.Helper()
	rec, err := records.New(records.ActKnow, records.KindActorKey, records.ActorThread, "did:sync:admin", time.Now(),
		&records.ActorKey{Actor: actor, PublicKey: didOf(key)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.Append(ctxT(t), rec)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The signature travels beside the record (Spl-Sig) and comes back on
// every read, over a chained record whose id is not its signing id.
func TestSignatureStoredBeside(t *testing.T) {
	l := openTest(t, "")
	key := testKey(1)
	appendSigned(t, l, "th_s", didOf(key), key)
	e := appendSigned(t, l, "th_s", didOf(key), key)
	got, err := l.At(ctxT(t), e.Clock)
	if err != nil {
		t.Fatal(err)
	}
	if got.Record.Sig == nil || got.Record.CheckSignature() != nil {
		t.Fatalf("read back signature %+v: %v", got.Record.Sig, got.Record.CheckSignature())
	}
	if got.ID == got.Record.Header.SigningID() {
		t.Fatal("a chained record's id equals its signing id")
	}
}

func TestVerifySignatures(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	const dev = "did:sync:agent:dev"
	key, other := testKey(1), testKey(2)
	appendSigned(t, l, "th_a", dev, nil)        // before any binding: unsigned, fine
	appendSigned(t, l, "th_a", didOf(key), key) // did:key: self-certifying
	bindKey(t, l, dev, key)
	appendSigned(t, l, "th_a", dev, key)
	rep, err := l.VerifyAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Signed != 2 || rep.UnsignedCount != 2 || rep.OKSigned(true) {
		t.Fatalf("report %+v: want OK, 2 signed, 2 unsigned (the early record and the binding)", rep)
	}
	wrong := appendSigned(t, l, "th_a", dev, other)         // a key not bound to dev
	forged := appendSigned(t, l, "th_a", didOf(key), other) // a did:key signed by another key
	unsigned := appendSigned(t, l, "th_a", dev, nil)        // unsigned by a bound actor
	rep, err = l.Verify(ctx, "th_a")
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.BadSig) != 2 || rep.BadSig[0].Clock != wrong.Clock || rep.BadSig[1].Clock != forged.Clock {
		t.Fatalf("report %+v: want the two wrong keys", rep)
	}
	if p := rep.BadSig[0]; p.Actor != dev || p.Key != didOf(other) || p.Bound != didOf(key) {
		t.Fatalf("problem %+v: want actor, signing key and bound key named", p)
	}
	if last := rep.Unsigned[len(rep.Unsigned)-1]; last.Clock != unsigned.Clock || last.Bound != didOf(key) {
		t.Fatalf("unsigned %+v: want the bound actor's unsigned record, naming its key", last)
	}
}

// A signed record copied within its thread (chained again, so with
// another id and prev, the signature still valid) is reported as a copy
// naming the first; the first stays good.
func TestVerifySignedCopy(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	ctx := ctxT(t)
	key := testKey(3)
	rec, err := records.New(records.ActDo, "agent.approve", "th_copy", didOf(key), time.Now(), map[string]any{"approve": "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Sign(key)
	first, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	appendSigned(t, l, "th_copy", didOf(key), key)
	// The same signed record replayed at the head by another writer (a
	// writer of its own remembers what it appended and answers with it).
	replay := *rec
	copied, err := openTest(t, dir).Append(ctx, &replay)
	if err != nil {
		t.Fatal(err)
	}
	if copied.ID == first.ID {
		t.Fatal("the copy has the first's id: it was not chained anew")
	}
	for _, verify := range []func() (VerifyReport, error){
		func() (VerifyReport, error) { return l.Verify(ctx, "th_copy") },
		func() (VerifyReport, error) { return l.VerifyAll(ctx, nil) },
	} {
		rep, err := verify()
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || len(rep.BadSig) != 1 || rep.Signed != 2 {
			t.Fatalf("report %+v: want the copy alone reported, the two others signed", rep)
		}
		p := rep.BadSig[0]
		if p.Clock != copied.Clock || !strings.Contains(p.Reason, first.ID.String()) || !strings.Contains(p.Reason, "copy") {
			t.Fatalf("problem %+v: want the copy at clock %d naming the first, %s", p, copied.Clock, first.ID)
		}
	}
}
