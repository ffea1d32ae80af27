package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestParallelSaves starts 8 spl processes on one data directory at once:
// one of them runs the embedded server and the others join it. All must
// succeed, every checkpoint must land once, and no process may outlive
// the run or keep the directory locked.
func TestParallelSaves(t *testing.T) {
	const n = 8
	h := newHome(t)
	const thread = "th_parallel"

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr fmt.Stringer
	}
	procs := make([]proc, n)
	for i := range procs {
		c, stdout, stderr := h.cmd(ctx, nil, "session", "save", "--thread", thread,
			"--summary", fmt.Sprintf("parallel save %d", i), "--learnings", "l",
			"--session-id", fmt.Sprintf("s-%d", i), "--actor", seedActor)
		if err := c.Start(); err != nil {
			t.Fatalf("start spl %d: %v", i, err)
		}
		procs[i] = proc{c, stdout, stderr}
	}
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("spl %d (pid %d): %v; stderr:\n%s", i, p.cmd.Process.Pid, err, p.stderr)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	for i, p := range procs {
		if err := syscall.Kill(p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("spl %d (pid %d) still exists after it exited: %v", i, p.cmd.Process.Pid, err)
		}
	}
	if pids := running(t, splBin); len(pids) > 0 {
		t.Errorf("spl processes left running: %v", pids)
	}

	// The lock is free: a fresh process opens the directory and sees all.
	cps := decode[[]record](t, h.mustRun(t, nil, "session", "list", "--thread", thread, "--json").stdout)
	if got, want := len(cps), n; got != want {
		t.Fatalf("len(list)=%v, want %v", got, want)
	}
	ids, clocks, summaries := map[string]bool{}, map[uint64]bool{}, map[string]bool{}
	for _, cp := range cps {
		ids[cp.ID], clocks[cp.Clock], summaries[cp.Summary] = true, true, true
	}
	if len(ids) != n || len(clocks) != n || len(summaries) != n {
		t.Fatalf("%d distinct ids, %d clocks, %d summaries, want %d each", len(ids), len(clocks), len(summaries), n)
	}
	for i := 1; i < n; i++ {
		if cps[i].Clock <= cps[i-1].Clock {
			t.Fatalf("list is not in clock order: %d then %d", cps[i-1].Clock, cps[i].Clock)
		}
		if cps[i].Prev == nil || *cps[i].Prev != cps[i-1].ID {
			t.Fatalf("checkpoint %d: prev=%v, want %s (one chain)", i, cps[i].Prev, cps[i-1].ID)
		}
	}
}

// running returns the pids of the processes whose command line contains
// bin, from pgrep -f where there is one, else from /proc.
func running(t *testing.T, bin string) []int {
	t.Helper()
	if pgrep, err := exec.LookPath("pgrep"); err == nil {
		out, err := exec.Command(pgrep, "-f", bin).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return nil // no match
		}
		if err != nil {
			t.Fatalf("pgrep -f %s: %v", bin, err)
		}
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Logf("cannot list processes (no pgrep, no /proc): %v", err)
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), bin) {
			pids = append(pids, pid)
		}
	}
	return pids
}
