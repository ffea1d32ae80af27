package log

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spl-dev/spl/internal/natsio"
)

// Group commit the embedded way: two processes' writers (the second joins
// the first's server) append from many goroutines to threads that are
// mostly their own and partly shared, so batches mix lone records (plain
// publishes), runs of one thread (atomic batches), and lost races between
// the writers. Every append lands once, every chain holds, and every group
// that stored something was fsynced by the writer before its callers were
// answered.
func TestGroupCommitEmbedded(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var stats []BatchStats
	observe := func(st BatchStats) {
		mu.Lock()
		stats = append(stats, st)
		mu.Unlock()
	}
	ctx := ctxT(t)
	open := func() *Log {
		l, err := Open(ctx, Options{Dir: dir, Linger: time.Second, Observe: observe})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(), open()
	const writers, each = 24, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		l := a
		if w%2 == 1 {
			l = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				thread := fmt.Sprintf("own_%d", w)
				switch i % 4 {
				case 1:
					thread = "shared" // both writers race here
				case 3:
					thread = fmt.Sprintf("pair_%d", w/2) // two goroutines of one writer or two
				}
				if _, err := l.Append(ctx, newRec(t, thread, "agent.step", map[string]any{"w": w, "i": i})); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	total := 0
	for _, th := range []string{"shared"} {
		total += len(chain(t, a, th))
	}
	for w := range writers {
		total += len(chain(t, a, fmt.Sprintf("own_%d", w)))
		if w%2 == 0 {
			total += len(chain(t, b, fmt.Sprintf("pair_%d", w/2)))
		}
	}
	if total != writers*each {
		t.Fatalf("threads hold %d records, want %d", total, writers*each)
	}
	rep, err := a.VerifyAll(ctx, nil)
	if err != nil {
		t.Fatalf("VerifyAll: %v", err)
	}
	if !rep.OK() {
		t.Fatalf("VerifyAll: %+v", rep)
	}
	mu.Lock()
	defer mu.Unlock()
	landed, multi := 0, false
	for _, st := range stats {
		if st.Err == nil {
			landed += st.Records
			if st.Fsync <= 0 {
				t.Fatalf("a group of %d records was answered without the writer's fsync", st.Records)
			}
		}
		multi = multi || st.Records > 1
	}
	if landed == 0 || !multi {
		t.Fatalf("no group commit observed: %d records landed in clean groups, any group of several: %v", landed, multi)
	}
}

// The syncer follows the server's blocks as the stream rolls over to new
// ones, and fsyncs the one appends go to.
func TestBlockSyncerFollowsRollover(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	ctx := ctxT(t)
	msgs := filepath.Join(dir, "jetstream", "$G", "streams", DefaultStream, "msgs")
	pad := make([]byte, 60<<10) // random: it does not compress
	_, _ = rand.Read(pad)
	blocks := func() int {
		ents, err := os.ReadDir(msgs)
		if err != nil {
			t.Fatalf("read msgs directory: %v", err)
		}
		hi := 0
		for _, e := range ents {
			if n, ok := strings.CutSuffix(e.Name(), ".blk"); ok {
				if i, err := strconv.Atoi(n); err == nil {
					hi = max(hi, i)
				}
			}
		}
		return hi
	}
	first := blocks()
	for i := 0; blocks() < first+2; i++ {
		if i > 1000 {
			t.Fatalf("no rollover after %d appends of 60 KiB", i)
		}
		var ps []*Pending
		for j := range 16 {
			p, err := l.Submit(ctx, newRec(t, fmt.Sprintf("big_%d", j), "agent.step", map[string]any{"pad": pad, "i": i}))
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			ps = append(ps, p)
		}
		for _, p := range ps {
			if _, err := p.Wait(ctx); err != nil {
				t.Fatalf("append: %v", err)
			}
		}
		hi := l.blocks.Known()
		if want := blocks(); hi != want {
			t.Fatalf("after a group: syncer at block %d, the stream writes block %d", hi, want)
		}
	}
}

// A store the syncer does not recognise fails at open, not silently at the
// first power loss.
func TestBlockSyncerRefusesUnknownLayout(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir)
	s := natsio.NewBlockSyncer(dir, "NO_SUCH_STREAM")
	err := s.Check()
	if err == nil || !strings.Contains(err.Error(), "NO_SUCH_STREAM") {
		t.Fatalf("check of a missing stream store: %v, want an error naming it", err)
	}
	if err := natsio.NewBlockSyncer(dir, DefaultStream).Check(); err != nil {
		t.Fatalf("check of the log's store: %v", err)
	}
}
