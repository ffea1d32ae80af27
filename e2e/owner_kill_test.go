package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOwnerKilledDuringOpen kills, with SIGKILL, the process that runs a
// data directory's embedded server while other spl commands are opening
// the log on it (dialling, provisioning the stream, finishing erasures).
// Every command must succeed, well within its --timeout: a request lost
// with the owner is sent again to the next owner, not waited out.
func TestOwnerKilledDuringOpen(t *testing.T) {
	needFaults(t)
	const rounds, cmds, bound = 12, 4, 8 * time.Second
	h := newHome(t)
	a := h.save(t, "th_owner", "to erase")
	h.save(t, "th_owner", "kept")
	h.mustRun(t, nil, "erase", a.ID, "--thread", "th_owner", "--reason", "a watermark to read on open", "--actor", seedActor)

	var slowest time.Duration
	for round := range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		owner, _, ownerErr := h.cmd(ctx, nil, "thread", "tail", "th_owner", "--follow")
		if err := owner.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the owner serving", func() bool {
			b, err := os.ReadFile(filepath.Join(h.dir, "server.json"))
			var info struct{ PID int }
			return err == nil && json.Unmarshal(b, &info) == nil && info.PID == owner.Process.Pid
		})
		var wg sync.WaitGroup
		errs := make([]string, cmds)
		took := make([]time.Duration, cmds)
		for i := range cmds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				c, _, stderr := h.cmd(ctx, nil, "session", "save", "--thread", "th_owner",
					"--summary", fmt.Sprintf("round %d save %d", round, i), "--learnings", "l", "--actor", seedActor)
				if err := c.Run(); err != nil {
					errs[i] = fmt.Sprintf("%v: %s", err, stderr)
				}
				took[i] = time.Since(start)
			}()
		}
		time.Sleep(time.Duration(round) * 10 * time.Millisecond)
		_ = owner.Process.Kill()
		_ = owner.Wait()
		wg.Wait()
		cancel()
		for i := range cmds {
			if errs[i] != "" {
				t.Errorf("round %d: save %d failed after %v: %s (owner stderr: %s)", round, i, took[i], errs[i], ownerErr)
			} else if took[i] > bound {
				t.Errorf("round %d: save %d took %v, want under %v", round, i, took[i], bound)
			}
			slowest = max(slowest, took[i])
		}
	}
	t.Logf("slowest command over %d kills: %v", rounds, slowest)
	out := h.mustRun(t, nil, "session", "list", "--thread", "th_owner", "-n", "100").stdout
	if got, want := strings.Count(out, "round "), rounds*cmds; got != want {
		t.Fatalf("%d saves listed, want %d:\n%s", got, want, out)
	}
}
