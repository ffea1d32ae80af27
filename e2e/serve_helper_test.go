package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// served is an spl serve process on a home, with its ports.
type served struct {
	h        *home
	nats     string     // nats://127.0.0.1:port
	http     string     // http://127.0.0.1:port
	stop     func() int // SIGTERM, and its exit code
	kill     func()     // SIGKILL
	logs     *lockedBuffer
	writeTok string // the directory's token: NATS and HTTP writes
	readTok  string // the read token: HTTP reads only
}

// serveHome starts spl serve on h with the credentials it creates, and
// waits until /healthz answers 200 (healthz needs no credentials).
func serveHome(t *testing.T, h *home, args ...string) *served {
	t.Helper()
	port, httpPort := freePort(t), freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	c, _, _ := h.cmd(ctx, nil, append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--http", fmt.Sprintf("127.0.0.1:%d", httpPort)}, args...)...)
	var logs lockedBuffer
	c.Stderr = &logs
	if err := c.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &served{h: h, nats: natsURL(port), http: fmt.Sprintf("http://127.0.0.1:%d", httpPort), logs: &logs}
	done := false
	s.stop = func() int {
		if done {
			return 0
		}
		done = true
		defer cancel()
		_ = c.Process.Signal(syscall.SIGTERM)
		if err := c.Wait(); err != nil {
			return -1
		}
		return c.ProcessState.ExitCode()
	}
	s.kill = func() {
		if !done {
			done = true
			defer cancel()
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	t.Cleanup(func() { s.stop() })
	waitFor(t, 30*time.Second, "spl serve ready", func() bool {
		resp, err := http.Get(s.http + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK || strings.Contains(string(b), `"loss"`)
	})
	s.writeTok = readSecret(t, filepath.Join(h.dir, "token"))
	s.readTok = readSecret(t, filepath.Join(h.dir, "read-token"))
	return s
}

func readSecret(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("credentials: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// do sends one HTTP request with a bearer token ("" for none) and
// returns the code and body.
func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
