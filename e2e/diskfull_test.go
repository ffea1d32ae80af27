package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// mountSmall mounts a tmpfs of size (e.g. "20m") on a new directory and
// returns it; unmounted when the test ends. It skips the test, saying so,
// unless it runs as root, which mounting needs.
func mountSmall(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs that can be filled up; run the test as root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file under dir until the disk is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last pages too
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// homeOn is a home whose data directory is on mnt.
func homeOn(t *testing.T, mnt string) *home {
	t.Helper()
	h := newHome(t)
	h.dir = filepath.Join(mnt, "spl")
	for i, kv := range h.env {
		if strings.HasPrefix(kv, "SPL_HOME=") {
			h.env[i] = "SPL_HOME=" + h.dir
		}
	}
	return h
}

// TestDiskFull: on a full disk every read command works, an append fails
// at once with exit 3 and an error that says the disk is full, and once
// space is freed appends work again.
func TestDiskFull(t *testing.T) {
	needFaults(t)
	mnt := mountSmall(t, "20m")
	h := homeOn(t, mnt)
	h.save(t, "th_full", "saved before the disk filled up")
	h.mustRun(t, nil, "emit", "--thread", "th_full", "--act", "DO", "--kind", "agent.step", "--body", `{"n":1}`, "--actor", seedActor)
	h.mustRun(t, nil, "thread", "list") // the read models exist and hold it all
	filler := fill(t, mnt)

	for _, args := range [][]string{
		{"session", "show", "th_full"},
		{"session", "list", "--thread", "th_full"},
		{"session", "list"},
		{"thread", "tail", "th_full"},
		{"thread", "list"},
		{"verify", "th_full"},
	} {
		start := time.Now()
		r := h.run(t, nil, args...)
		if r.code != 0 {
			t.Errorf("spl %s on a full disk: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("spl %s on a full disk took %v", strings.Join(args, " "), d)
		}
	}
	if r := h.run(t, nil, "session", "show", "th_full"); !strings.Contains(r.stdout, "saved before the disk filled up") {
		t.Errorf("session show on a full disk printed:\n%s", r.stdout)
	}

	emit := []string{"emit", "--thread", "th_full", "--act", "DO", "--kind", "agent.step", "--body", `{"n":2}`, "--actor", seedActor}
	start := time.Now()
	r := h.run(t, nil, emit...)
	if r.code != 3 || !strings.Contains(r.stderr, "disk full") {
		t.Fatalf("emit on a full disk: exit %d, stderr %q; want exit 3 and an error naming the full disk", r.code, r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("emit on a full disk took %v to fail", d)
	}
	t.Logf("emit on a full disk: %s", strings.TrimSpace(r.stderr))

	// The SDK's and the log's callers tell it by errors.Is.
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := splog.Open(ctx, splog.Options{Dir: h.dir, Linger: time.Millisecond})
		if err != nil {
			t.Fatalf("open on a full disk: %v", err)
		}
		defer l.Close()
		rec, err := records.New(records.ActDo, "agent.step", "th_full", seedActor, time.Now(), map[string]any{"n": 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, rec); !errors.Is(err, splog.ErrDiskFull) {
			t.Errorf("Append on a full disk: %v, want ErrDiskFull", err)
		}
	}()

	// Free what was filled: appends work again at once.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	h.mustRun(t, nil, emit...)
	if got := decode[[]record](t, h.mustRun(t, nil, "thread", "tail", "th_full", "--json").stdout); len(got) != 3 {
		t.Fatalf("%d records after freeing space, want 3", len(got))
	}
}

// TestDiskFilledByOtherEmbedded: the embedded log's own check keeps its
// appends off a full disk, but a write it does not make (here a direct
// publish with the data directory's token, as any program of the
// directory's user may make) can still meet ENOSPC in the server, which
// then takes no more writes to the stream. The process serving the
// directory (a long-lived follower) restarts its JetStream: appends fail
// at once naming the disk while it is full, and are taken again within
// seconds once space is freed, without a restart of that process.
func TestDiskFilledByOtherEmbedded(t *testing.T) {
	needFaults(t)
	mnt := mountSmall(t, "40m")
	h := homeOn(t, mnt)
	emit := func(n int) []string {
		return []string{"emit", "--thread", "th_other", "--act", "DO", "--kind", "agent.step", "--body", fmt.Sprintf(`{"n":%d}`, n), "--actor", seedActor, "--timeout", "10s"}
	}
	h.mustRun(t, nil, emit(1)...)
	// The owner: a follower that serves the directory for the whole test.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	owner, _, _ := h.cmd(ctx, nil, "thread", "tail", "th_other", "--follow")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = owner.Wait() }()
	var info struct {
		URL string `json:"url"`
		PID int    `json:"pid"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(h.dir, "server.json"))
		if err == nil && json.Unmarshal(b, &info) == nil && info.PID == owner.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower does not serve the directory: server.json %s, %v", b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	filler := fill(t, mnt)
	nc, err := nats.Connect(info.URL, nats.Token(readSecret(t, filepath.Join(h.dir, "token"))))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = js.Publish(pctx, "spl.rec.th_other.agent.step", make([]byte, 256<<10))
	pcancel()
	t.Logf("a direct publish on the full disk: %v", err)

	start := time.Now()
	r := h.run(t, nil, emit(2)...)
	if r.code != 3 || !strings.Contains(r.stderr, "disk full") || time.Since(start) > 5*time.Second {
		t.Errorf("emit on the full disk: exit %d after %v, stderr %q; want exit 3 at once, naming the full disk", r.code, time.Since(start), r.stderr)
	}
	if r := h.run(t, nil, "thread", "tail", "th_other"); r.code != 0 {
		t.Errorf("thread tail on the full disk: exit %d: %s", r.code, r.stderr)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	for n := 3; ; n++ {
		r := h.run(t, nil, emit(n)...)
		if r.code == 0 {
			t.Logf("appends taken again %v after space was freed", time.Since(freed).Round(time.Millisecond))
			break
		}
		if time.Since(freed) > 20*time.Second {
			t.Fatalf("appends still refused 20 s after space was freed: exit %d: %s", r.code, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.mustRun(t, nil, "verify", "th_other")
}
