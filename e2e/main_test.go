// Package e2e runs the built spl binary as a user would: separate
// processes on one data directory, real embedded servers, exit codes and
// output checked from the outside.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// splBin is the spl binary TestMain builds.
var splBin string

// runTimeout bounds one spl process: a hang fails its test instead of the
// whole package.
const runTimeout = 2 * time.Minute

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "spl-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	splBin = filepath.Join(dir, "spl")
	args := []string{"build", "-o", splBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/spl")...)
	build.Dir = ".." // the module root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n", strings.Join(build.Args[1:], " "), err)
		return 1
	}
	return m.Run()
}

// home is a data directory of its own for one test, and the environment
// spl runs in: SPL_HOME set to it, SPL_ACTOR unset unless a test sets it.
type home struct {
	dir string
	env []string
}

func newHome(t *testing.T) *home {
	t.Helper()
	dir := t.TempDir()
	h := &home{dir: filepath.Join(dir, "spl")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPL_") && !strings.HasPrefix(kv, "HOME=") {
			h.env = append(h.env, kv)
		}
	}
	h.env = append(h.env, "SPL_HOME="+h.dir, "HOME="+dir)
	if raceEnabled && os.Getenv("GORACE") == "" {
		// A race-built process that exits 0 sleeps 1 s first by default,
		// for reports from other goroutines; here that is only delay. A
		// race still makes the process exit non-zero.
		h.env = append(h.env, "GORACE=atexit_sleep_ms=0")
	}
	return h
}

type result struct {
	code           int
	stdout, stderr string
}

// cmd returns an spl process on h, not yet started.
func (h *home) cmd(ctx context.Context, stdin io.Reader, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	c := exec.CommandContext(ctx, splBin, args...)
	c.Env = h.env
	c.Stdin = stdin
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	return c, &stdout, &stderr
}

// run runs spl on h with stdin (nil: none) and returns how it ended.
func (h *home) run(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, stdout, stderr := h.cmd(ctx, stdin, args...)
	err := c.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok || ctx.Err() != nil {
			t.Fatalf("spl %s: %v (stderr: %s)", strings.Join(args, " "), err, stderr)
		}
		code = ee.ExitCode()
	}
	return result{code, stdout.String(), stderr.String()}
}

// mustRun runs spl and fails the test unless it exits 0.
func (h *home) mustRun(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	r := h.run(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("spl %s: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// record is the --json form of a record (docs/cli.md), with the fields of
// a checkpoint.
type record struct {
	ID        string          `json:"id"`
	Clock     uint64          `json:"clock"`
	Thread    string          `json:"thread"`
	Act       string          `json:"act"`
	Kind      string          `json:"kind"`
	Actor     string          `json:"actor"`
	Time      string          `json:"time"`
	TS        int64           `json:"ts"`
	Prev      *string         `json:"prev"`
	Body      json.RawMessage `json:"body"`
	Summary   string          `json:"summary"`
	Learnings []string        `json:"learnings"`
	NextSteps []string        `json:"next_steps"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return v
}
