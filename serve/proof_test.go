package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/spl-dev/spl/wire"
)

// The proof vectors, made with another implementation of HMAC
// (testdata/proof.json), are what every SDK checks against too.
func TestProofVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/proof.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct{ Token, Challenge, Proof string }
	}
	if err := json.Unmarshal(b, &f); err != nil || len(f.Vectors) == 0 {
		t.Fatalf("testdata/proof.json: %v, %d vectors", err, len(f.Vectors))
	}
	for _, v := range f.Vectors {
		if p, err := Proof(v.Token, v.Challenge); err != nil || p != v.Proof {
			t.Errorf("Proof(%q, %q) = %q, %v; want %q", v.Token, v.Challenge, p, err, v.Proof)
		}
	}
	for _, c := range []string{"", "00", strings.Repeat("a", 31), strings.Repeat("a", 130), strings.Repeat("g", 32), strings.Repeat("a", 33)} {
		if _, err := Proof("t", c); !errors.Is(err, ErrChallenge) {
			t.Errorf("Proof of challenge %q: %v, want ErrChallenge", c, err)
		}
	}
}

// /healthz answers a challenge with the proof of the write token, to
// anyone (it needs no credentials), and never with the token.
func TestHealthProof(t *testing.T) {
	s := start(t, Config{})
	const challenge = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	ask := func(c string) (int, http.Header, wire.Error) {
		req, _ := http.NewRequest("GET", base(s)+"/healthz", nil)
		req.Header.Set("Authorization", "Basic x") // no bearer token: keeps the helper's away
		if c != "" {
			req.Header.Set(ChallengeHeader, c)
		}
		var e wire.Error
		code, h := callReq(t, http.DefaultClient, req, &e)
		return code, h, e
	}
	code, h, _ := ask(challenge)
	want, _ := Proof(s.cfg.HTTPToken, challenge)
	if code != http.StatusOK || h.Get(ProofHeader) != want {
		t.Errorf("healthz with a challenge: %d, proof %q; want 200 and %q", code, h.Get(ProofHeader), want)
	}
	if other, _ := Proof("not the token", challenge); other == want {
		t.Fatal("the proof does not depend on the token")
	}
	if code, h, _ := ask(""); code != http.StatusOK || h.Get(ProofHeader) != "" {
		t.Errorf("healthz without a challenge: %d, proof %q; want 200 and none", code, h.Get(ProofHeader))
	}
	if code, _, e := ask("not hex at all, and long enough to be taken for a challenge"); code != http.StatusBadRequest || e.Field != ChallengeHeader {
		t.Errorf("healthz with a bad challenge: %d %+v, want 400 naming %s", code, e, ChallengeHeader)
	}
}
