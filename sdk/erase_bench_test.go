package sdk_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// diskUsage returns the apparent size (sum of file lengths) and the
// allocated size (blocks, as du counts them) of the files under dir.
func diskUsage(b *testing.B, dir string) (apparent, allocated int64) {
	b.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		apparent += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return apparent, allocated
}

// fill appends n records of about size bytes of body over threads threads
// with EmitAsync and waits until they are durable. It returns their ids
// per thread.
func fill(b *testing.B, c *sdk.Client, n, threads, size int) map[string][]records.ID {
	b.Helper()
	ctx := context.Background()
	pad := strings.Repeat("x", size)
	type sent struct {
		thread string
		p      *sdk.Pending
	}
	pend := make([]sent, 0, min(n, 65536))
	ids := make(map[string][]records.ID)
	drain := func() {
		for _, s := range pend {
			r, err := s.p.Wait(ctx)
			if err != nil {
				b.Fatal(err)
			}
			ids[s.thread] = append(ids[s.thread], r.ID)
		}
		pend = pend[:0]
	}
	for i := range n {
		th := fmt.Sprintf("th_%d", i%threads)
		p, err := c.EmitAsync(ctx, sdk.Event{Act: records.ActDo, Kind: "agent.step", Thread: th,
			Body: map[string]any{"i": i, "pad": pad}})
		if err != nil {
			b.Fatal(err)
		}
		pend = append(pend, sent{th, p})
		if len(pend) == cap(pend) {
			drain()
		}
	}
	drain()
	return ids
}

// BenchmarkErase10k erases 10,000 records of one thread (about 1 KiB
// each) in one call, which appends 10 erasure records of 1,000 targets
// and securely deletes every message. It reports the wall time of the
// erasure and the space of the data directory's jetstream/ before, right
// after (server running) and after a restart. The server's secure delete
// overwrites the message with random bytes and writes its whole block
// (up to 8 MiB) anew, atomically, so each record costs a block rewrite;
// space comes back only when a block is emptied or compacted.
func BenchmarkErase10k(b *testing.B) {
	const n = 10_000
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		// A deadline of the caller's replaces the log's 10 s bound on each
		// request: one secure delete rewrites its whole message block, so
		// a busy disk can hold a request up for seconds.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:bench"))
		if err != nil {
			b.Fatal(err)
		}
		ids := fill(b, c, n, 1, 1000)["th_0"]
		js := filepath.Join(dir, "jetstream")
		beforeApp, beforeAlloc := diskUsage(b, js)

		b.StartTimer()
		start := time.Now()
		res, err := c.Erase(ctx, "th_0", "", ids, "benchmark")
		took := time.Since(start)
		b.StopTimer()
		if err != nil || len(res.Erased) != n {
			b.Fatalf("erased %d: %v", len(res.Erased), err)
		}
		afterApp, afterAlloc := diskUsage(b, js)
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		// Reopen and close: the server recovers and tidies its blocks.
		c, err = sdk.Open(ctx, sdk.WithDir(dir))
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
		restartApp, restartAlloc := diskUsage(b, js)

		b.ReportMetric(took.Seconds(), "s/erase")
		b.ReportMetric(float64(n)/took.Seconds(), "records/s")
		b.ReportMetric(float64(beforeAlloc)/(1<<20), "MiB-before")
		b.ReportMetric(float64(beforeAlloc-afterAlloc)/(1<<20), "MiB-reclaimed")
		b.ReportMetric(float64(beforeAlloc-restartAlloc)/(1<<20), "MiB-reclaimed-after-restart")
		b.Logf("jetstream/ apparent/allocated bytes: before %d/%d, after erase %d/%d, after restart %d/%d",
			beforeApp, beforeAlloc, afterApp, afterAlloc, restartApp, restartAlloc)
	}
}

// benchVerify fills a log with n records (about 200 bytes of body each,
// over 100 threads) and measures VerifyAll over it.
func benchVerify(b *testing.B, n int) {
	dir := b.TempDir()
	ctx := context.Background()
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fill(b, c, n, 100, 200)
	b.Logf("filled %d records in %v", n, time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		rep, err := c.VerifyAll(ctx, nil)
		took := time.Since(start)
		if err != nil || !rep.OK() || rep.Checked != n {
			b.Fatalf("verify: %d checked, ok %v, %v", rep.Checked, rep.OK(), err)
		}
		b.ReportMetric(float64(n)/took.Seconds(), "records/s")
	}
}

// BenchmarkVerify100k verifies a log of 100,000 records.
func BenchmarkVerify100k(b *testing.B) { benchVerify(b, 100_000) }

// BenchmarkVerify1M verifies a log of 1,000,000 records. Filling it takes
// most of the time; run it alone with -benchtime 1x.
func BenchmarkVerify1M(b *testing.B) { benchVerify(b, 1_000_000) }
