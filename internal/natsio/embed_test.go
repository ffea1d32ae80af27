package natsio

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestStartServerPortTaken: a server whose port is taken fails at once,
// saying why, instead of waiting out serverReady for a listener that
// never comes.
func TestStartServerPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	opts := EmbeddedServerOptions(t.TempDir(), false)
	opts.Port = ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	srv, err := StartServer(opts, nil)
	if err == nil {
		srv.Shutdown()
		t.Fatal("started on a port that is taken")
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error %q does not say the port is taken", err)
	}
	if d := time.Since(start); d > serverReady/2 {
		t.Errorf("took %v to fail, serverReady is %v", d, serverReady)
	}
}
