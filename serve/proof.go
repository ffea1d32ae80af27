package serve

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Proving a server is the one of a data directory.
//
// An SDK that joins the local spl finds it by the address spl serve wrote
// to DIR/serve-http.addr. That file outlives a server killed with -9, and
// another user's process may then hold the port; the SDK must not hand it
// the write token. So before it sends the token, the SDK asks /healthz
// with a fresh random challenge (header Spl-Challenge), and the server
// answers with a proof (header Spl-Proof) that only a holder of the
// write token can compute: HMAC-SHA256 keyed by the token over
// ProofContext and the challenge, in hex. The SDK, which read the token
// from DIR/token, computes the same and trusts the listener only when
// they match. The challenge is the SDK's, never reused, so a proof seen
// once is worth nothing again.

// ChallengeHeader carries a client's challenge to /healthz.
const ChallengeHeader = "Spl-Challenge"

// ProofHeader carries the server's answer to a challenge.
const ProofHeader = "Spl-Proof"

// ProofContext binds a proof to this use of the token: an HMAC of the
// same token over the same bytes made for another purpose differs.
const ProofContext = "spl healthz proof v1\n"

// ErrChallenge is a challenge the server will not answer.
var ErrChallenge = errors.New("challenge")

// Proof is the server's answer to challenge, keyed by token: the hex of
// HMAC-SHA256(token, ProofContext + challenge). A challenge is 32 to 128
// hex digits (16 to 64 random bytes); any other is refused, so a
// stranger cannot have the server sign text of its own choosing.
func Proof(token, challenge string) (string, error) {
	if n := len(challenge); n < 32 || n > 128 || n%2 != 0 {
		return "", fmt.Errorf("%w: %s: must be 32 to 128 hex digits, is %d characters", ErrChallenge, ChallengeHeader, n)
	}
	if _, err := hex.DecodeString(challenge); err != nil {
		return "", fmt.Errorf("%w: %s: must be hex digits: %v", ErrChallenge, ChallengeHeader, err)
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(ProofContext))
	m.Write([]byte(challenge))
	return hex.EncodeToString(m.Sum(nil)), nil
}
