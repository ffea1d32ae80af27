package natsio

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

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
