package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spl-dev/spl/records"
)

// Peer is one system under test, as the worker process drives it. A store
// is named by loc: a directory for spl, raw JetStream and SQLite, a
// database for PostgreSQL.
type Peer interface {
	// Name is the peer's name in the report.
	Name() string
	// Open opens the store at loc, creating it empty if missing.
	Open(ctx context.Context, loc string) (Store, error)
	// Fill creates the store at loc and fills it with plan's records. Fills
	// are not measured; each peer fills its fastest way.
	Fill(ctx context.Context, loc string, plan *Plan) error
	// ColdOpen opens the filled store at loc from cold (no server or
	// handle of it running in the process) and answers one latest
	// checkpoint of probe. It returns the open store and the time from the
	// start of the open to that first answer.
	ColdOpen(ctx context.Context, loc, probe string) (Store, time.Duration, error)
	// DiskBytes is the space the store at loc takes on disk, with a note
	// saying what was counted.
	DiskBytes(ctx context.Context, loc string) (int64, string, error)
	// Remove deletes the store at loc.
	Remove(ctx context.Context, loc string) error
}

// Store is an open store of a peer.
type Store interface {
	// Save durably saves checkpoint content c as record i of thread, and
	// returns once it is durable (acked after fsync, or committed).
	Save(ctx context.Context, i int, thread string, c *records.Checkpoint) error
	// Latest reads and decodes the latest checkpoint of thread.
	Latest(ctx context.Context, thread string) (*records.Checkpoint, error)
	// Last reads the last n records of thread and returns how many it got.
	Last(ctx context.Context, thread string, n int) (int, error)
	// Recent returns the n most recently active threads, newest first.
	Recent(ctx context.Context, n int) ([]string, error)
	// Scan reads every record of the store (a full scan, or a projection
	// rebuild where the peer has one) and returns how many it read.
	Scan(ctx context.Context) (int, error)
	// Close releases the store.
	Close() error
}

// Preparer is a Store that builds its write payloads before the clock
// starts (raw JetStream: the envelope bytes, the floor's only work being
// the publish).
type Preparer interface {
	Prepare(items []WriteItem) error
}

// VerifiedScanner is a Store that can also read every record decoded and
// verified without folding it anywhere (spl: the ceiling of a rebuild).
type VerifiedScanner interface {
	VerifiedScan(ctx context.Context) (int, error)
}

// AsyncStore is a Store that can save without awaiting each save: many
// saves in flight, all awaited at the end.
type AsyncStore interface {
	Store
	// SaveAsync issues saves of items from 0 until max items or until d has
	// passed, then awaits them all. It returns how many were issued; all of
	// them are durable when it returns nil.
	SaveAsync(ctx context.Context, items []WriteItem, max int, d time.Duration) (int, error)
}

// WriteItem is one save of the write workloads.
type WriteItem struct {
	Thread  string
	Content *records.Checkpoint
}

// Bounds bounds a timed phase in time and in count.
type Bounds struct {
	Dur time.Duration
	Max int
}

// Stats is the outcome of a timed phase.
type Stats struct {
	N        int
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// OpsPerSec is the phase's throughput.
func (s Stats) OpsPerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.N) / s.Elapsed.Seconds()
}

// timed runs op(i) for i = 0, 1, … over `workers` goroutines, each awaiting
// its op before the next, until b.Max ops have run or b.Dur has passed. It
// fails on the first error.
func timed(ctx context.Context, workers int, b Bounds, op func(i int) error) (Stats, error) {
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		lat    []time.Duration
		first  error
		failed atomic.Bool
	)
	start := time.Now()
	deadline := start.Add(b.Dur)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1024)
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= b.Max {
					return
				}
				t0 := time.Now()
				if t0.After(deadline) {
					return
				}
				if err := op(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("op %d: %w", i, err)
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
				mine = append(mine, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if first != nil {
		return Stats{}, first
	}
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	return summarize(lat, el), nil
}

func summarize(lat []time.Duration, el time.Duration) Stats {
	s := Stats{N: len(lat), Elapsed: el}
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	s.P50 = lat[len(lat)/2]
	s.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	return s
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// writeItems are the payloads of the write workloads: a ring of distinct
// checkpoints over the write workloads' 1,000 threads. Op i saves item
// i mod len(items), so op i goes to thread i mod 1000.
func writeItems(threads int) []WriteItem {
	items := make([]WriteItem, 4*threads)
	for i := range items {
		c := content(i, i/threads+1)
		items[i] = WriteItem{Thread: "w-" + threadName(i%threads), Content: &c}
	}
	return items
}

// measure runs every timed workload of one run against peer and records
// the figures in m. Stores: a fresh write store, the small filled store
// (latest checkpoint at the small size) and the big filled store.
func measure(ctx context.Context, cfg *Config, peer Peer, run int, m *Metrics, logf func(string, ...any)) error {
	if err := measureWrites(ctx, cfg, peer, run, m, logf); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(run), 42))

	small := NewPlan(cfg.SmallRecords, cfg.SmallThreads)
	st, err := peer.Open(ctx, "small")
	if err != nil {
		return fmt.Errorf("open small store: %w", err)
	}
	logf("w3 latest checkpoint, %d records", cfg.SmallRecords)
	err = latestPhase(ctx, cfg, st, small, rng, "w3s", m)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}

	big := NewPlan(cfg.Records, cfg.Threads)
	logf("w7 cold open, %d records", cfg.Records)
	st, d, err := peer.ColdOpen(ctx, "big", big.RandomThread(rng))
	if err != nil {
		return fmt.Errorf("w7 cold open: %w", err)
	}
	defer st.Close()
	m.Set("w7.ms", float64(d)/float64(time.Millisecond))
	m.Set("hwm.w7", vmHWM())

	logf("w3 latest checkpoint, %d records", cfg.Records)
	if err := latestPhase(ctx, cfg, st, big, rng, "w3", m); err != nil {
		return err
	}
	m.Set("hwm.w3", vmHWM())

	logf("w4 last 50 records of a thread")
	for range min(100, cfg.Reads.Max) {
		if _, err := st.Last(ctx, big.RandomLong(rng), 50); err != nil {
			return fmt.Errorf("w4 warm-up: %w", err)
		}
	}
	s, err := timed(ctx, 1, cfg.Reads, func(int) error {
		n, err := st.Last(ctx, big.RandomLong(rng), 50)
		if err == nil && n != 50 {
			err = fmt.Errorf("got %d records, want 50", n)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("w4: %w", err)
	}
	m.Set("w4.p50", us(s.P50))
	m.Set("w4.p99", us(s.P99))
	m.Set("w4.ops", s.OpsPerSec())
	m.Set("hwm.w4", vmHWM())

	logf("w5 100 most recently active threads")
	if _, err := st.Recent(ctx, 100); err != nil {
		return fmt.Errorf("w5 warm-up: %w", err)
	}
	s, err = timed(ctx, 1, cfg.Recent, func(int) error {
		ts, err := st.Recent(ctx, 100)
		if err == nil && len(ts) != 100 {
			err = fmt.Errorf("got %d threads, want 100", len(ts))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("w5: %w", err)
	}
	m.Set("w5.p50", us(s.P50))
	m.Set("w5.p99", us(s.P99))
	m.Set("hwm.w5", vmHWM())

	logf("w6 full scan / rebuild")
	if err := scanPhase(ctx, cfg, st.Scan, "w6", m); err != nil {
		return err
	}
	m.Set("hwm.w6", vmHWM())
	if vs, ok := st.(VerifiedScanner); ok {
		logf("w6 verified scan")
		if err := scanPhase(ctx, cfg, vs.VerifiedScan, "w6v", m); err != nil {
			return err
		}
	}
	return nil
}

// scanPhase times one full scan, bounded by cfg.ScanLimit.
func scanPhase(ctx context.Context, cfg *Config, scan func(context.Context) (int, error), key string, m *Metrics) error {
	sctx, cancel := context.WithTimeout(ctx, cfg.ScanLimit)
	defer cancel()
	stop := profilePhase(key)
	t0 := time.Now()
	n, err := scan(sctx)
	el := time.Since(t0)
	stop()
	switch {
	case err != nil && sctx.Err() != nil && ctx.Err() == nil:
		m.Note("%s: stopped at the %s limit after %d records", key, cfg.ScanLimit, n)
	case err != nil:
		return fmt.Errorf("%s: %w", key, err)
	case n != cfg.Records:
		return fmt.Errorf("%s: read %d records, want %d", key, n, cfg.Records)
	}
	m.Set(key+".rps", float64(n)/el.Seconds())
	return nil
}

// latestPhase measures the latest checkpoint of random threads of plan.
func latestPhase(ctx context.Context, cfg *Config, st Store, plan *Plan, rng *rand.Rand, key string, m *Metrics) error {
	check := func(c *records.Checkpoint, err error) error {
		// A nil checkpoint with no error: the raw peer, which does not decode.
		if err == nil && c != nil && (c.Summary == "" || len(c.Learnings) != 2 || len(c.NextSteps) != 2) {
			err = fmt.Errorf("decoded checkpoint is incomplete: %+v", c)
		}
		return err
	}
	for range min(200, cfg.Reads.Max) {
		if err := check(st.Latest(ctx, plan.RandomThread(rng))); err != nil {
			return fmt.Errorf("%s warm-up: %w", key, err)
		}
	}
	stop := profilePhase(key)
	s, err := timed(ctx, 1, cfg.Reads, func(int) error {
		return check(st.Latest(ctx, plan.RandomThread(rng)))
	})
	stop()
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	m.Set(key+".p50", us(s.P50))
	m.Set(key+".p99", us(s.P99))
	m.Set(key+".ops", s.OpsPerSec())
	return nil
}

// largeCheckpoints is how many 5 MB checkpoints the large phase saves
// (and loads): enough for a median, bounded in bytes (50 MB a run).
const largeCheckpoints = 10

// largeContent is a checkpoint of about 5 MB: 5,000 learnings of 1 KB,
// a session's conversation kept in its state; distinct for each i.
func largeContent(i int) *records.Checkpoint {
	ls := make([]string, 5_000)
	for k := range ls {
		ls[k] = fmt.Sprintf("checkpoint %d, message %d: ", i, k) + strings.Repeat("m", 1_000)
	}
	return &records.Checkpoint{Summary: fmt.Sprintf("a long conversation, part %d", i), Learnings: ls, NextSteps: []string{"go on"}}
}

// largePhase saves largeCheckpoints checkpoints of 5 MB, one writer, each
// durable, over five threads, then loads the latest of each thread twice
// (w9): what a session with a large state costs to save and to resume.
func largePhase(ctx context.Context, st Store, m *Metrics, logf func(string, ...any)) error {
	logf("w9 %d checkpoints of 5 MB, saved and loaded", largeCheckpoints)
	content := make([]*records.Checkpoint, largeCheckpoints)
	for i := range content {
		content[i] = largeContent(i)
	}
	thread := func(i int) string { return fmt.Sprintf("th_large_%d", i%5) }
	s, err := timed(ctx, 1, Bounds{time.Minute, largeCheckpoints}, func(i int) error {
		return st.Save(ctx, 1_000_000+i, thread(i), content[i])
	})
	if err != nil {
		return fmt.Errorf("w9 save: %w", err)
	}
	m.Set("w9.save_ms", float64(s.P50)/float64(time.Millisecond))
	s, err = timed(ctx, 1, Bounds{time.Minute, largeCheckpoints}, func(i int) error {
		c, err := st.Latest(ctx, thread(i))
		if err == nil && len(c.Learnings) != 5_000 {
			err = fmt.Errorf("latest of %s: %d learnings, want 5000", thread(i), len(c.Learnings))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("w9 load: %w", err)
	}
	m.Set("w9.load_ms", float64(s.P50)/float64(time.Millisecond))
	return nil
}

// measureWrites runs the write workloads on a fresh store.
func measureWrites(ctx context.Context, cfg *Config, peer Peer, run int, m *Metrics, logf func(string, ...any)) error {
	loc := fmt.Sprintf("writes-%d", run)
	_ = peer.Remove(ctx, loc)
	st, err := peer.Open(ctx, loc)
	if err != nil {
		return fmt.Errorf("open write store: %w", err)
	}
	defer func() {
		st.Close()
		_ = peer.Remove(ctx, loc)
	}()
	items := writeItems(cfg.WriteThreads)
	if p, ok := st.(Preparer); ok {
		if err := p.Prepare(items); err != nil {
			return fmt.Errorf("prepare writes: %w", err)
		}
	}
	base := 0
	save := func(i int) error {
		it := items[(base+i)%len(items)]
		return st.Save(ctx, base+i, it.Thread, it.Content)
	}
	// A short warm-up, so that the first timed save does not pay for
	// connections and files opened on first use.
	for i := range 20 {
		if err := save(i); err != nil {
			return fmt.Errorf("write warm-up: %w", err)
		}
	}
	base = 20

	logf("w1 one writer, durable saves")
	s, err := timed(ctx, 1, cfg.Write1, save)
	if err != nil {
		return fmt.Errorf("w1: %w", err)
	}
	m.Set("w1.ops", s.OpsPerSec())
	m.Set("w1.p50", us(s.P50))
	m.Set("w1.p99", us(s.P99))
	base += s.N

	logf("w2 %d writers over %d threads, durable saves", cfg.Writers, cfg.WriteThreads)
	s, err = timed(ctx, cfg.Writers, cfg.WriteN, save)
	if err != nil {
		return fmt.Errorf("w2: %w", err)
	}
	m.Set("w2.ops", s.OpsPerSec())
	m.Set("w2.p50", us(s.P50))
	m.Set("w2.p99", us(s.P99))
	m.Set("hwm.w2", vmHWM())
	base += s.N

	if peer.Name() != "jetstream" { // one message holds at most 1 MiB: nothing to compare
		if err := largePhase(ctx, st, m, logf); err != nil {
			return err
		}
	}

	as, ok := st.(AsyncStore)
	if !ok {
		return nil
	}
	logf("w2b async saves, many in flight")
	rot := append(append([]WriteItem{}, items[base%len(items):]...), items[:base%len(items)]...)
	t0 := time.Now()
	n, err := as.SaveAsync(ctx, rot, cfg.Async.Max, cfg.Async.Dur)
	el := time.Since(t0)
	if err != nil {
		return fmt.Errorf("w2b: %w", err)
	}
	m.Set("w2b.ops", float64(n)/el.Seconds())
	m.Set("w2b.n", float64(n))
	m.Set("hwm.w2", vmHWM())
	return nil
}

// vmHWM is this process's peak resident set so far (VmHWM), in MiB.
func vmHWM() float64 {
	return float64(procField(os.Getpid(), "status", "VmHWM:")) / 1024
}
