package log

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
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
			path := filepath.Join(dir, tokenFile)
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
			if err != nil || !wholeToken(tok) {
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

// Processes that race to create the token, or to replace an incomplete
// one, all end with the token the file holds.
func TestLoadTokenRace(t *testing.T) {
	for name, content := range map[string][]byte{"missing": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tokenFile)
			if content != nil {
				if err := os.WriteFile(path, content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			const racers = 8
			toks := make([]string, racers)
			errs := make([]error, racers)
			var wg sync.WaitGroup
			for i := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					toks[i], errs[i] = loadToken(path)
				}()
			}
			wg.Wait()
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for i := range racers {
				if errs[i] != nil {
					t.Fatalf("racer %d: %v", i, errs[i])
				}
				if !bytes.Equal([]byte(toks[i]), file) || !wholeToken(file) {
					t.Fatalf("racer %d got token %q, the file holds %q", i, toks[i], file)
				}
			}
			names, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*"))
			if err != nil || len(names) != 1 {
				t.Fatalf("directory holds %v, want the token file only", names)
			}
		})
	}
}
