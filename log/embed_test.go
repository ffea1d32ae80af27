package log

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token file that holds no whole token is replaced, and the data
// directory opens: an empty or short one (a crash between its creation
// and its write), or one of zeros (a power loss before the write reached
// the disk), a token anyone could guess.
func TestOpenReplacesIncompleteToken(t *testing.T) {
	for name, content := range map[string][]byte{
		"empty": nil,
		"short": []byte("0123abcd"),
		"zeros": make([]byte, 48),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "token")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			l := openTest(t, dir)
			ctx := ctxT(t)
			e, err := l.Append(ctx, newRec(t, "th_tok", "agent.step", map[string]any{"i": 1}))
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			tok, err := os.ReadFile(path)
			if err != nil || len(tok) < 32 || bytes.ContainsFunc(tok, func(r rune) bool { return !strings.ContainsRune("0123456789abcdef", r) }) {
				t.Fatalf("token file = %q, %v; want a whole token", tok, err)
			}
			// A second process of the directory reads the same token and
			// joins the first one's server.
			other := openTest(t, dir)
			if got, err := other.At(ctx, e.Clock); err != nil || got.ID != e.ID {
				t.Fatalf("joined log: At(%d) = %v, %v", e.Clock, got.ID, err)
			}
		})
	}
}
