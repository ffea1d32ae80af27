package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// TestEraseKilled kills "spl erase" of 400 records with SIGKILL at points
// spread over its run. The command runs the embedded server, so the
// server dies too, in the middle of a secure delete more often than not.
// Then "spl verify" opens the log again, which finishes the erasure, and
// every file under the data directory is scanned for the erased bodies,
// each of which held a marker of its own: none may be left.
func TestEraseKilled(t *testing.T) {
	needFaults(t)
	if testing.Short() {
		t.Skip("seeds 9 MiB and erases 400 records several times")
	}
	const thread, every, n = "th_kill", 3, 400
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	marker := func(i int) string { return fmt.Sprintf("SPL-KILL-%04d-%s", i, hex.EncodeToString(rnd[:])) }

	// The seed: 1,200 records of about 7 KiB (two message blocks), every
	// third one a target with a marker in its body.
	seed := newHome(t)
	var ids []string
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		l, err := splog.Open(ctx, splog.Options{Dir: seed.dir, Linger: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		pad := make([]byte, 7<<10) // random: stored as is, not compressed, so that the markers beside it are on disk as written
		_, _ = rand.Read(pad)
		for i := range every * n {
			body := map[string]any{"pad": pad, "i": i}
			if i%every == 0 {
				body["secret"] = marker(i / every)
			}
			r, err := records.New(records.ActDo, "agent.step", thread, seedActor, time.Now(), body)
			if err != nil {
				t.Fatal(err)
			}
			e, err := l.Append(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if i%every == 0 {
				ids = append(ids, e.ID.String())
			}
		}
	}()
	args := append(append([]string{"erase"}, ids...), "--thread", thread, "--reason", "kill test", "--actor", seedActor, "--timeout", "5m")

	// left reports the markers still on disk under dir: every file is
	// read once, and every occurrence of the markers' suffix checked.
	suffix := []byte("-" + hex.EncodeToString(rnd[:]))
	left := func(dir string) []string {
		var found []string
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for at := bytes.Index(b, suffix); at >= 0; {
				if at >= 13 && bytes.HasPrefix(b[at-13:], []byte("SPL-KILL-")) {
					found = append(found, fmt.Sprintf("%s in %s", b[at-13:at+len(suffix)], path))
				}
				next := bytes.Index(b[at+1:], suffix)
				if next < 0 {
					break
				}
				at += 1 + next
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if got := left(seed.dir); len(got) != n {
		t.Fatalf("%d markers on disk before the erasure, want %d: the test would prove nothing", len(got), n)
	}

	// An uninterrupted run, to time the erasure.
	whole := copyHome(t, seed)
	start := time.Now()
	whole.mustRun(t, nil, args...)
	took := time.Since(start)
	if got := left(whole.dir); len(got) != 0 {
		t.Fatalf("an uninterrupted erasure left markers: %v", got)
	}
	t.Logf("erasing %d records took %v", n, took)

	for k := 1; k <= 5; k++ {
		after := took * time.Duration(k) / 6
		h := copyHome(t, seed)
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		c, _, stderr := h.cmd(ctx, nil, args...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(after)
		_ = c.Process.Kill()
		err := c.Wait()
		cancel()
		if err == nil {
			t.Logf("kill after %v: the erasure had finished", after)
		}
		intents, _ := os.ReadDir(filepath.Join(h.dir, "erasing"))
		// Reopening finishes the deletes the kill interrupted, ~100 block
		// rewrites: under -race on a loaded machine one took past the
		// default 30 s timeout in CI.
		v := h.run(t, nil, "--timeout", "3m", "verify", thread)
		if v.code != 0 {
			t.Errorf("kill after %v: verify after the kill: exit %d\n%s%s%s", after, v.code, v.stdout, v.stderr, stderr)
		}
		got := left(h.dir)
		landed := erasures(t, h.dir, thread)
		t.Logf("kill after %v: %d intents at the kill, erasure record landed: %v, %d markers left after reopening", after, len(intents), landed, len(got))
		switch {
		case landed && len(got) != 0:
			t.Errorf("kill after %v: erased bodies still on disk after reopening: %v", after, got)
		case !landed && len(got) != n:
			// Killed while planning, before the erasure record: nothing
			// is erased, and nothing may be missing either.
			t.Errorf("kill after %v: no erasure record, yet %d of %d markers left", after, len(got), n)
		}
	}
}

// copyHome copies the data directory of h, with no process on it, to a
// new home.
func copyHome(t *testing.T, h *home) *home {
	t.Helper()
	c := newHome(t)
	if out, err := exec.Command("cp", "-a", h.dir, c.dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return c
}

// erasures reports whether the log in dir holds an erasure record on
// thread.
func erasures(t *testing.T, dir, thread string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := splog.Open(ctx, splog.Options{Dir: dir, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, err := range l.Read(ctx, thread, splog.Kind(records.KindErasure)) {
		if err != nil {
			t.Fatal(err)
		}
		return true
	}
	return false
}
