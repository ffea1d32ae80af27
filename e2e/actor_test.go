package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/log/logtest"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

type actorNew struct {
	KeyFile string `json:"key_file"`
	DIDKey  string `json:"did_key"`
}

type sigProblem struct {
	Clock  uint64 `json:"clock"`
	ID     string `json:"id"`
	Actor  string `json:"actor"`
	Key    string `json:"key"`
	Bound  string `json:"bound_key"`
	Reason string `json:"reason"`
}

type sigReport struct {
	OK            bool         `json:"ok"`
	Signed        int          `json:"signed"`
	UnsignedCount int          `json:"unsigned_count"`
	Unsigned      []sigProblem `json:"unsigned"`
	BadSig        []sigProblem `json:"bad_signatures"`
}

// Actors proven, through the built binary: keys made and bound with spl
// actor, records signed with --key-file, a server with --require-signed
// refusing an actor claimed with another key or none, and records forged
// behind spl's back found by spl verify.
func TestActorsProven(t *testing.T) {
	h := newHome(t)
	const dev = "did:sync:agent:dev"
	admin := decode[actorNew](t, h.mustRun(t, nil, "actor", "new", "--out", filepath.Join(h.dir, "admin.key"), "--json").stdout)
	agent := decode[actorNew](t, h.mustRun(t, nil, "actor", "new", "--did", dev, "--json").stdout)
	if agent.KeyFile != filepath.Join(h.dir, sdk.ActorKeyFile) || !strings.HasPrefix(agent.DIDKey, "did:key:z6Mk") {
		t.Fatalf("actor new: %+v", agent)
	}
	if r := h.run(t, nil, "actor", "new", "--did", dev); r.code == 0 {
		t.Fatal("actor new replaced the key file")
	}
	other := decode[actorNew](t, h.mustRun(t, nil, "actor", "new", "--out", filepath.Join(h.dir, "other.key"), "--json").stdout)

	// The administrator, a did:key, binds dev to the agent's key, signed.
	h.mustRun(t, nil, "actor", "bind", dev, "--key", agent.DIDKey, "--actor", admin.DIDKey, "--key-file", admin.KeyFile)
	if out := h.mustRun(t, nil, "actor", "list").stdout; !strings.Contains(out, dev) || !strings.Contains(out, agent.DIDKey) {
		t.Fatalf("actor list:\n%s", out)
	}
	emit := func(keyFile string, extra ...string) result {
		args := append([]string{"emit", "--thread", "work", "--act", "SAY", "--kind", "note.text", "--body", `{"text":"hi"}`, "--actor", dev}, extra...)
		if keyFile != "" {
			args = append(args, "--key-file", keyFile)
		}
		return h.run(t, nil, args...)
	}
	if r := emit(agent.KeyFile); r.code != 0 {
		t.Fatalf("signed emit: exit %d: %s", r.code, r.stderr)
	}
	if r := emit(other.KeyFile); r.code != 1 || !strings.Contains(r.stderr, dev) || !strings.Contains(r.stderr, other.DIDKey) {
		t.Fatalf("emit as %s with another key: exit %d: %s", dev, r.code, r.stderr)
	}
	rep := decode[sigReport](t, h.mustRun(t, nil, "verify", "--all", "--require-signed", "--json").stdout)
	if !rep.OK || rep.Signed != 2 || rep.UnsignedCount != 0 {
		t.Fatalf("verify: %+v", rep)
	}

	// A server that requires signatures refuses dev claimed without its key.
	s := serveHome(t, h, "--require-signed")
	post := func(body string) (int, string) { return do(t, "POST", s.http+"/v1/records", s.writeTok, body) }
	code, body := post(fmt.Sprintf(`{"thread":"work","act":"SAY","kind":"note.text","actor":%q,"body":{}}`, dev))
	if code != http.StatusBadRequest || !strings.Contains(body, `"field":"actor"`) || !strings.Contains(body, dev) {
		t.Fatalf("unsigned POST: %d %s", code, body)
	}
	otherKey, err := sdk.ReadKeyFile(filepath.Join(h.dir, "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	code, body = post(signedRequest(t, dev, otherKey))
	if code != http.StatusBadRequest || !strings.Contains(body, `"field":"signature"`) || !strings.Contains(body, other.DIDKey) {
		t.Fatalf("POST signed with another key: %d %s", code, body)
	}
	agentKey, err := sdk.ReadKeyFile(agent.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if code, body = post(signedRequest(t, dev, agentKey)); code != http.StatusCreated {
		t.Fatalf("POST signed by dev's key: %d %s", code, body)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}

	// Behind spl's back: dev unsigned, then dev signed by another key.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unsigned, err := logtest.Impersonate(ctx, h.dir, "work", "note.text", dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.mustRun(t, nil, "verify", "--all") // unsigned is reported, not a failure
	r := h.run(t, nil, "verify", "--all", "--require-signed", "--json")
	rep = decode[sigReport](t, r.stdout)
	if r.code != 4 || rep.UnsignedCount != 1 || rep.Unsigned[0].Clock != unsigned || !strings.Contains(rep.Unsigned[0].Reason, agent.DIDKey) {
		t.Fatalf("verify --require-signed: exit %d, %+v", r.code, rep)
	}
	forged, err := logtest.Impersonate(ctx, h.dir, "work", "note.text", dev, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	r = h.run(t, nil, "verify", "work")
	if r.code != 4 {
		t.Fatalf("verify of a forged signature: exit %d\n%s", r.code, r.stdout)
	}
	for _, want := range []string{fmt.Sprint(forged), dev, other.DIDKey, agent.DIDKey} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("verify output does not name %s:\n%s", want, r.stdout)
		}
	}
}

// signedRequest is the body of POST /v1/records that a client holding key
// sends to write as actor: the record's fields, its salt and time, and
// the signature over its signing id.
func signedRequest(t *testing.T, actor string, key ed25519.PrivateKey) string {
	t.Helper()
	const body = `{"text":"over http"}`
	ts := time.Now()
	cbor, err := records.BodyFromJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var salt [records.SaltSize]byte
	copy(salt[:], []byte("0123456789abcdef0123456789abcdef"))
	rec, err := records.NewWithSalt("SAY", "note.text", "work", actor, ts, records.RawBody(cbor), salt)
	if err != nil {
		t.Fatal(err)
	}
	rec.Sign(key)
	req := map[string]any{"thread": "work", "act": "SAY", "kind": "note.text", "actor": actor, "ts": ts.UnixMilli(),
		"body": json.RawMessage(body), "salt": base64.StdEncoding.EncodeToString(salt[:]),
		"signature": base64.StdEncoding.EncodeToString(rec.Sig.Sig), "key": records.DIDKey(rec.Sig.Key)}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Against spl serve, an actor's key is bound with the admin token only:
// the write token is refused at once (exit 3) naming the admin token, and
// a Go program that names the server and its token in the environment
// (SPL_SERVER, SPL_TOKEN_FILE), as the CLI does, reads what was bound.
func TestBindThroughServe(t *testing.T) {
	h := newHome(t)
	s := serveHome(t, h)
	const dev = "did:sync:agent:dev"
	_, keyDID, err := sdk.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	bind := func(tokenFile string) result {
		return h.run(t, nil, "--server", s.nats, "--token-file", tokenFile,
			"actor", "bind", dev, "--key", keyDID, "--actor", "did:sync:admin")
	}
	start := time.Now()
	r := bind(filepath.Join(h.dir, "token"))
	if r.code != 3 || !strings.Contains(r.stderr, "needs the admin right") || !strings.Contains(r.stderr, "admin-token") {
		t.Fatalf("bind with the write token: exit %d, stderr %q; want exit 3, needs the admin right, naming the admin token", r.code, r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refused bind took %v", d)
	}
	h.mustRun(t, nil, "--server", s.nats, "--token-file", filepath.Join(h.dir, "admin-token"),
		"actor", "bind", dev, "--key", keyDID, "--actor", "did:sync:admin")

	t.Setenv("SPL_SERVER", s.nats)
	t.Setenv("SPL_TOKEN_FILE", filepath.Join(h.dir, "read-token"))
	t.Setenv("SPL_HOME", t.TempDir()) // not the server's directory: SPL_SERVER decides
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sdk.Open(ctx)
	if err != nil {
		t.Fatalf("sdk.Open with SPL_SERVER and SPL_TOKEN_FILE: %v", err)
	}
	defer c.Close()
	keys, err := c.ActorKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0].Actor != dev || keys[0].Key != keyDID {
		t.Fatalf("ActorKeys over SPL_SERVER: %+v, %v; want dev bound to %s", keys, err, keyDID)
	}
}
