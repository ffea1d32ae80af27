package serve

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/wire"
)

// A client signs as a TS or Python client would: it draws a salt, builds
// the record from the same fields (its body's canonical CBOR), signs
// "spl/v1/sig" || signing id and sends the signature with the fields.
func TestRequireSignedHTTP(t *testing.T) {
	s := start(t, Config{RequireSigned: true})
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	did := records.DIDKey(key.Public().(ed25519.PublicKey))
	const jsonBody = `{"text":"hi","n":1}`
	ts := time.UnixMilli(1700000000000)
	salt := bytes.Repeat([]byte{4}, records.SaltSize)
	signed := func(ts time.Time) string {
		body, err := records.BodyFromJSON([]byte(jsonBody))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := records.NewWithSalt("SAY", "note.text", "th", did, ts, records.RawBody(body), [records.SaltSize]byte(salt))
		if err != nil {
			t.Fatal(err)
		}
		rec.Sign(key)
		return base64.StdEncoding.EncodeToString(rec.Sig.Sig)
	}
	req := func(sig string) string {
		return fmt.Sprintf(`{"thread":"th","act":"SAY","kind":"note.text","actor":%q,"ts":%d,"body":%s,"salt":%q,"signature":%q}`,
			did, ts.UnixMilli(), jsonBody, base64.StdEncoding.EncodeToString(salt), sig)
	}
	var e wire.Error
	if code := call(t, "POST", base(s)+"/v1/records", req(signed(ts)), nil); code != http.StatusCreated {
		t.Fatalf("signed: %d", code)
	}
	// A signature over other fields (another time) is refused.
	if code := call(t, "POST", base(s)+"/v1/records", req(signed(ts.Add(time.Millisecond))), &e); code != http.StatusBadRequest || e.Field != "signature" {
		t.Fatalf("bad signature: %d %+v", code, e)
	}
	// Unsigned: refused, naming the actor.
	e = wire.Error{}
	unsigned := fmt.Sprintf(`{"thread":"th","act":"SAY","kind":"note.text","actor":%q,"body":{}}`, actor)
	if code := call(t, "POST", base(s)+"/v1/records", unsigned, &e); code != http.StatusBadRequest || e.Field != "actor" {
		t.Fatalf("unsigned: %d %+v", code, e)
	}
	// A signature without the salt it was made with.
	e = wire.Error{}
	noSalt := fmt.Sprintf(`{"thread":"th","act":"SAY","kind":"note.text","actor":%q,"ts":1,"body":{},"signature":%q}`, did, signed(ts))
	if code := call(t, "POST", base(s)+"/v1/records", noSalt, &e); code != http.StatusBadRequest || e.Field != "salt" {
		t.Fatalf("no salt: %d %+v", code, e)
	}
}
