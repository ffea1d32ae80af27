package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spl serve runs the log for remote clients: the CLI reaches it with
// --server, a client whose server is gone fails within its timeout, and a
// save retried after the server is back lands once. SIGTERM shuts the
// server down cleanly, keeping what it acknowledged.
func TestServeWithCLIClients(t *testing.T) {
	h := newHome(t)
	// The server's token, created on its first start: the clients read it
	// from the file the variable names.
	h.env = append(h.env, "SPL_TOKEN_FILE="+filepath.Join(h.dir, "token"))
	port, httpPort := freePort(t), freePort(t)
	server := natsURL(port)
	start := func() (*stopFunc, *lockedBuffer) {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		c, _, _ := h.cmd(ctx, nil, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--http", fmt.Sprintf("127.0.0.1:%d", httpPort))
		var logs lockedBuffer
		c.Stderr = &logs
		if err := c.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "spl serve ready", func() bool {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", httpPort))
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		stop := stopFunc(func() int {
			defer cancel()
			_ = c.Process.Signal(syscall.SIGTERM)
			err := c.Wait()
			if err != nil {
				return -1
			}
			return c.ProcessState.ExitCode()
		})
		return &stop, &logs
	}
	stop, logs := start()

	save := []string{"--server", server, "--timeout", "5s", "session", "save", "--thread", "th_remote",
		"--summary", "saved through spl serve", "--learnings", "remote works", "--actor", "did:sync:agent:dev"}
	h.mustRun(t, nil, save...)
	show := h.mustRun(t, nil, "--server", server, "session", "show", "th_remote")
	if !strings.Contains(show.stdout, "saved through spl serve") {
		t.Fatalf("session show over --server:\n%s", show.stdout)
	}
	if code := (*stop)(); code != 0 {
		t.Fatalf("spl serve exited %d on SIGTERM; logs:\n%s", code, logs.String())
	}

	// The server is gone: a clear error, within the timeout.
	began := time.Now()
	r := h.run(t, nil, "--server", server, "--timeout", "2s", "session", "show", "th_remote")
	if r.code != 3 || !strings.Contains(r.stderr, server) {
		t.Fatalf("with the server down: exit %d, stderr %q; want 3 naming %s", r.code, r.stderr, server)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("with the server down the client took %v to give up", took)
	}
	if r := h.run(t, nil, save...); r.code != 3 {
		t.Fatalf("save with the server down: exit %d, stderr %q; want 3", r.code, r.stderr)
	}

	// Back again: the retry lands, once.
	stop, logs = start()
	h.mustRun(t, nil, save...)
	list := decode[[]record](t, h.mustRun(t, nil, "--server", server, "--json", "session", "list", "--thread", "th_remote").stdout)
	if got, want := len(list), 2; got != want {
		t.Fatalf("%d checkpoints after a save, a failed save and its retry, want %d", got, want)
	}
	if code := (*stop)(); code != 0 {
		t.Fatalf("spl serve exited %d on SIGTERM; logs:\n%s", code, logs.String())
	}
	// Everything acknowledged is in the data directory, embedded or not.
	if got := len(decode[[]record](t, h.mustRun(t, nil, "--json", "session", "list", "--thread", "th_remote").stdout)); got != 2 {
		t.Fatalf("embedded read after serve stopped: %d checkpoints, want 2", got)
	}
}

type stopFunc func() int
