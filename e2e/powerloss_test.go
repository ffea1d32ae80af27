package e2e

import (
	"bufio"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spl-dev/spl/e2e/lazyfs"
	"github.com/spl-dev/spl/log"
)

// The power-loss tests run the log on lazyfs, which keeps file data in
// memory until it is fsynced and drops the rest when the power is cut:
// kill -9 alone cannot show a missing fsync, the kernel keeps the page
// cache. Four writer processes append until the power is cut at a
// random moment (every process killed, then the unsynced data dropped);
// the file system is mounted again, the log opened, and every append
// that was acknowledged must be there.
//
// The bodies are large (powerPad bytes of padding), so that the stream
// rolls over to new message blocks (8 MiB each) several times a test and
// groups of appends straddle two blocks: the fsync of a block left behind
// is proven too, not only the fsync of the last one (without it, 4 runs
// of 4 lost 11 to 24 acknowledged appends each). The power is cut at a
// random moment 1–3 s into a run, and not before the stream rolled over
// twice in it.

const (
	powerCuts    = 5
	powerWriters = 4
	powerPad     = 128 << 10
)

// highestBlock is the highest message block index of the log's stream
// among the files under root (0 when there is none).
func highestBlock(t *testing.T, root string) int {
	t.Helper()
	hi := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if d.IsDir() || filepath.Base(dir) != "msgs" || filepath.Base(filepath.Dir(dir)) != log.DefaultStream {
			return nil
		}
		if n, ok := strings.CutSuffix(d.Name(), ".blk"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				hi = max(hi, i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("message blocks under %s: %v", root, err)
	}
	return hi
}

// needLazyFS skips the test, saying why, where lazyfs cannot be mounted.
func needLazyFS(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount lazyfs (FUSE); run the test as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("needs /dev/fuse to mount lazyfs: %v", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("needs fusermount3 to mount lazyfs: apt-get install fuse3")
	}
}

// buildHelper builds a command of this module into the test's temporary
// directory.
func buildHelper(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, pkg)...)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// TestPowerLossEmbedded: the embedded log (the default: the writer
// fsyncs the stream's blocks once per group commit, before any ack)
// loses no acknowledged append when the power is cut.
func TestPowerLossEmbedded(t *testing.T) { powerLoss(t, false, false) }

// TestPowerLossServe: nor does spl serve (on one node, as the embedded
// log: its own client fsyncs the blocks once per group commit).
func TestPowerLossServe(t *testing.T) { powerLoss(t, true, false) }

// TestPowerLossCaught is the control: without the fsync before the ack
// (log.Options.NoSync), the same cuts lose acknowledged appends, so the
// two tests above would see a missing fsync.
func TestPowerLossCaught(t *testing.T) { powerLoss(t, false, true) }

func powerLoss(t *testing.T, serve, nosync bool) {
	needFaults(t)
	needLazyFS(t)
	writer := buildHelper(t, "./e2e/internal/powerwriter")
	mnt, backing := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(backing, "spl"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "spl")
	var threads []string
	for i := range powerWriters {
		threads = append(threads, fmt.Sprintf("th_power_%d", i))
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)

	var lfs *lazyfs.FS
	mount := func() {
		t.Helper()
		var err error
		if lfs, err = lazyfs.Mount(mnt, backing); err != nil {
			t.Fatal(err)
		}
	}
	cut := func() {
		t.Helper()
		if err := lfs.CutPower(); err != nil {
			t.Fatal(err)
		}
		lfs = nil
	}
	t.Cleanup(func() {
		if lfs != nil {
			lfs.CutPower()
		}
	})
	// startServer starts spl serve on the mount and returns its URL.
	startServer := func() (*node, string) {
		t.Helper()
		port := freePort(t)
		n := newNode(t, "serve", "--home", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--no-http")
		n.start()
		n.wait(60 * time.Second)
		return n, natsURL(port)
	}
	target := func(url string) []string {
		if serve {
			return []string{"-server", url, "-token", testToken}
		}
		if nosync {
			return []string{"-dir", dir, "-nosync"}
		}
		return []string{"-dir", dir}
	}
	pad := []string{"-pad", strconv.Itoa(powerPad)}

	cuts := powerCuts
	if nosync {
		// A control: it loses at the first cut, after which the log
		// refuses appends (log.ErrAppendsRefused: the stream is behind
		// its high-water mark) until the operator takes the loss.
		cuts = 1
	}
	acked := map[string]string{} // id → thread, over all cuts
	lost := map[string]bool{}
	totalAcks := 0
	for c := range cuts {
		mount()
		var srv *node
		var url string
		if serve {
			srv, url = startServer()
		}
		// The writers, until the power is cut.
		var (
			mu    sync.Mutex
			ready sync.WaitGroup
			done  sync.WaitGroup
			procs []*exec.Cmd
			errs  []*lockedBuffer
			acks  int
		)
		for i := range powerWriters {
			cmd := exec.Command(writer, append(append(target(url), pad...), "-threads", threads[i], "-cycle", fmt.Sprint(c))...)
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// A writer loops until killed: a test that fails midway
			// kills it, before the mount is cut (cleanups run last
			// first), or the mount would hang on its open files.
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			procs, errs = append(procs, cmd), append(errs, stderr)
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				sawReady := false
				defer func() {
					if !sawReady {
						ready.Done()
					}
				}()
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					switch {
					case len(f) == 1 && f[0] == "ready":
						sawReady = true
						ready.Done()
					case len(f) == 3 && f[0] == "ack":
						mu.Lock()
						acked[f[2]] = f[1]
						acks++
						mu.Unlock()
					}
				}
			}()
		}
		first := highestBlock(t, backing)
		readyC := make(chan struct{})
		go func() { ready.Wait(); close(readyC) }()
		select {
		case <-readyC:
		case <-time.After(60 * time.Second):
			t.Fatalf("cut %d: writers not ready in 60s; stderr: %s", c, errs[0])
		}
		start := time.Now()
		run := time.Duration(1000+rng.IntN(2000)) * time.Millisecond
		time.Sleep(run)
		// Not before the stream rolled over twice in this run, however
		// slow the machine.
		for deadline := time.Now().Add(60 * time.Second); highestBlock(t, mnt) < first+2; {
			if time.Now().After(deadline) {
				t.Fatalf("cut %d: the stream did not roll over twice in 60s (past block %d); a writer's stderr:\n%s", c, first, errs[0])
			}
			time.Sleep(50 * time.Millisecond)
		}
		run = time.Since(start)
		// The power is cut: every process stops at once...
		for _, p := range procs {
			p.Process.Signal(syscall.SIGKILL)
		}
		if srv != nil {
			srv.cmd.Process.Signal(syscall.SIGKILL)
		}
		done.Wait()
		for _, p := range procs {
			p.Wait()
		}
		if srv != nil {
			srv.kill()
		}
		// ...and what was not fsynced is gone.
		cut()
		mu.Lock()
		totalAcks += acks
		mu.Unlock()
		if acks == 0 {
			t.Errorf("cut %d: no append acknowledged in %v; a writer's stderr:\n%s", c, run, errs[0])
		}

		// Power back: every acknowledged append must be there.
		mount()
		if serve {
			srv, url = startServer()
		}
		check := exec.Command(writer, append(target(url), "-threads", strings.Join(threads, ","), "-check")...)
		var stderr strings.Builder
		check.Stderr = &stderr
		out, err := check.Output()
		if err != nil {
			t.Fatalf("cut %d: open and read the log after the cut: %v\n%s", c, err, stderr.String())
		}
		have := map[string]bool{}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "have" {
				have[f[2]] = true
			}
		}
		newly := 0
		for id := range acked {
			if !have[id] && !lost[id] {
				lost[id] = true
				newly++
			}
		}
		t.Logf("cut %d after %v: %d appends acknowledged, %d records held, %d acknowledged lost, up to message block %d", c, run, acks, len(have), newly, highestBlock(t, backing))
		if srv != nil {
			srv.stop(30 * time.Second)
		}
		cut()
	}
	blocks := highestBlock(t, backing)
	t.Logf("%d cuts, %d appends acknowledged, %d lost, %d message blocks", cuts, totalAcks, len(lost), blocks)
	switch {
	case nosync && len(lost) == 0:
		t.Errorf("without fsync, %d power cuts lost none of %d acknowledged appends: the test cannot see a missing fsync", cuts, totalAcks)
	case !nosync && len(lost) > 0:
		t.Errorf("%d acknowledged appends lost over %d power cuts (of %d acknowledged)", len(lost), cuts, totalAcks)
	}
}
