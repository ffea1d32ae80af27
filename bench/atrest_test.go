package main

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/storekey"
)

// BenchmarkEncryption measures the cost of encryption at rest: spl on the
// embedded log, one store encrypted (SPL_ENCRYPTION_KEY_FILE,
// ChaCha20-Poly1305) and one not, in the same process, in alternating
// rounds so that a slow spell of a shared machine falls on both.
//
//   - save64: 64 writers over 1,000 threads, each awaiting its durable
//     SaveCheckpoint (rounds of 640 saves);
//   - latest: the latest checkpoint of a random thread of 1,000 (two
//     checkpoints each), read, decoded and verified (rounds of 1,000).
//
// Each reports ns/op of each store and their ratio, encrypted/plain (its
// ns/op is of the two together). The
// harness's spl-encrypted peer (go run ./bench -peers spl,spl-encrypted)
// measures the rest: rebuild, scans, cold open, bytes on disk.
//
//	go test ./bench -run '^$' -bench Encryption -benchtime 20000x
func BenchmarkEncryption(b *testing.B) {
	b.Run("op=save64", func(b *testing.B) {
		plain, enc := openPair(b)
		alternate(b, 640, plain, enc, func(c *sdk.Client, i, n int) {
			save64(b, c, i, n)
		})
	})
	b.Run("op=latest", func(b *testing.B) {
		plain, enc := openPair(b)
		for _, c := range []*sdk.Client{plain, enc} {
			fill(b, c)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		alternate(b, 1000, plain, enc, func(c *sdk.Client, _, n int) {
			for range n {
				if _, err := c.LatestCheckpoint(context.Background(), threadName(rng.IntN(benchThreads))); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

const benchThreads = 1000

// openPair opens two embedded logs in fresh directories, the second with
// its store encrypted. The key is read when a log opens, so the first
// opens without one.
func openPair(b *testing.B) (plain, enc *sdk.Client) {
	b.Helper()
	open := func() *sdk.Client {
		c, err := sdk.Open(context.Background(), sdk.WithDir(filepath.Join(b.TempDir(), "spl")), sdk.WithActor(actor))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	b.Setenv(env.EncryptionKeyFileVar, "")
	plain = open()
	key := filepath.Join(b.TempDir(), "store.key")
	if err := storekey.Create(key); err != nil {
		b.Fatal(err)
	}
	b.Setenv(env.EncryptionKeyFileVar, key)
	enc = open()
	return plain, enc
}

// alternate runs b.N operations on each of plain and enc, in rounds of
// round operations, plain first then enc, and reports the time of one
// operation on each and their ratio.
func alternate(b *testing.B, round int, plain, enc *sdk.Client, do func(c *sdk.Client, from, n int)) {
	b.Helper()
	var spent [2]time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		for k, c := range []*sdk.Client{plain, enc} {
			t0 := time.Now()
			do(c, done, n)
			spent[k] += time.Since(t0)
		}
	}
	b.StopTimer()
	p, e := float64(spent[0].Nanoseconds())/float64(b.N), float64(spent[1].Nanoseconds())/float64(b.N)
	b.ReportMetric(p, "plain-ns/op")
	b.ReportMetric(e, "encrypted-ns/op")
	b.ReportMetric(e/p, "encrypted/plain")
}

// save64 makes n durable saves on c from 64 goroutines at once.
func save64(b *testing.B, c *sdk.Client, from, n int) {
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := from + w; i < from+n; i += 64 {
				if _, err := c.SaveCheckpoint(context.Background(), threadName(i%benchThreads), "", content(i, 1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// fill saves two checkpoints on each of the benchmark's threads.
func fill(b *testing.B, c *sdk.Client) {
	ctx := context.Background()
	for i := range 2 * benchThreads {
		cp := content(i, i/benchThreads+1)
		ev := sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: threadName(i % benchThreads), Body: &cp}
		if _, err := c.EmitAsync(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}
