package projections

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// BenchmarkRuntimeApply applies a log of 100,000 records (1,000 threads,
// one in ten a checkpoint) end to end: consumer, decoding and verifying
// every message, fold, atomic batches into the KV buckets (fsync'd),
// position. Each iteration is a rebuild of the projection.
func BenchmarkRuntimeApply(b *testing.B) {
	const total, threads = 100_000, 1000
	l := openLog(b, "")
	ctx := context.Background()
	var ps []*log.Pending
	for i := range total {
		kind, act := "agent.step", records.ActDo
		var body any = map[string]any{"tool": "go test", "n": i}
		if i%10 == 9 {
			kind, act = records.KindCheckpoint, records.ActLearn
			body = &records.Checkpoint{Summary: fmt.Sprintf("step %d done; next: the migration tests", i), Learnings: []string{"l"}}
		}
		r, err := records.New(act, kind, fmt.Sprintf("th_%04d", i%threads), actor, time.Now(), body)
		if err != nil {
			b.Fatal(err)
		}
		p, err := l.Submit(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if _, err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	r := newRuntime(b, l, Options{})
	r.opts.Logf = func(string, ...any) {}
	var elapsed time.Duration
	for b.Loop() {
		start := time.Now()
		if err := r.Rebuild(ctx, nil); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(total*b.N)/elapsed.Seconds(), "records/s")
}

// BenchmarkThreads lists threads from an index of 100,000 threads, built
// straight into the bucket: the newest 50 (the default of spl thread
// list), and all of them.
func BenchmarkThreads(b *testing.B) {
	const n = 100_000
	l := openLog(b, "")
	r := newRuntime(b, l, Options{})
	ctx := context.Background()
	ws := make([]Write, 0, maxAtomic)
	for i := range n {
		th := &Thread{
			Thread: fmt.Sprintf("agent-run-%06d", i), Records: 12, Checkpoints: 3,
			First: uint64(10*i + 1), Last: uint64(10*i + 9), LastActor: actor, LastTS: 1_700_000_000_000 + int64(i),
			Kinds:  map[string]uint64{"agent.step": 9, records.KindCheckpoint: 3},
			Actors: map[string]uint64{actor: 12}, AsOf: uint64(10*i + 9),
		}
		ws = append(ws, Write{Key: Key{Model: ModelThreads, Key: ThreadKey(th.Thread)}, Data: mustJSON(b, th)})
		if len(ws) == maxAtomic || i == n-1 {
			if _, err := r.store.Commit(ctx, ws); err != nil {
				b.Fatal(err)
			}
			ws = ws[:0]
		}
	}
	rd := NewReader(connOf(l), l)
	for _, tc := range []struct {
		name string
		f    ThreadFilter
		want int
	}{
		{"newest-50", ThreadFilter{Limit: 50}, 50},
		{"all", ThreadFilter{}, n},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				ts, err := rd.Threads(ctx, tc.f)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if len(ts) != tc.want {
					b.Fatalf("%d threads, want %d", len(ts), tc.want)
				}
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkFollow measures the time from an append to the delivery of the
// record to a follower of its thread (the append's own fsync included).
func BenchmarkFollow(b *testing.B) {
	l := openLog(b, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan time.Time, 1)
	go func() {
		for _, err := range l.Follow(ctx, "th_follow", 0) {
			if err != nil {
				return
			}
			got <- time.Now()
		}
	}()
	time.Sleep(100 * time.Millisecond) // the follower waits
	var lat []time.Duration
	for b.Loop() {
		r, err := records.New(records.ActDo, "agent.step", "th_follow", actor, time.Now(), map[string]any{"n": 1})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := l.Append(ctx, r); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-got:
			lat = append(lat, at.Sub(start))
		case <-time.After(10 * time.Second):
			b.Fatal("no delivery in 10s")
		}
	}
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
