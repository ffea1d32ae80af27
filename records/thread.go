package records

import (
	"encoding/base64"
	"strings"
)

// ThreadToken maps a thread to its subject token: the thread itself when it
// matches ^[A-Za-z0-9_-]{1,64}$, else "~" followed by the unpadded base64url
// of the thread's bytes.
func ThreadToken(thread string) string {
	if plainToken(thread) {
		return thread
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(thread))
}

// ThreadFromToken inverts ThreadToken.
func ThreadFromToken(tok string) (string, bool) {
	if rest, ok := strings.CutPrefix(tok, "~"); ok {
		b, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return tok, plainToken(tok)
}

// plainToken reports whether s is its own thread token.
func plainToken(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
