package log

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/records"
)

// The benchmarks measure spl's append and read paths against raw JetStream
// on the same server, stream settings and payload bytes, so the figures
// compare as ratios within one run. Each reports ops/s and latency
// percentiles as custom metrics.

func benchBody(i int) map[string]any {
	return map[string]any{
		"summary":    fmt.Sprintf("Completed step %d of the auth refactor; next: migration tests", i),
		"learnings":  []any{"mutex pattern worked", "refactor touched 14 files"},
		"next_steps": []any{"Write migration tests"},
	}
}

type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, start time.Time) {
	b.StopTimer()
	el := time.Since(start)
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	if n := len(l.d); n > 0 {
		b.ReportMetric(float64(l.d[n/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(l.d[n*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(n)/el.Seconds(), "ops/s")
	}
}

// runConcurrent runs b.N operations over `workers` goroutines, each
// awaiting its own result before the next.
func runConcurrent(b *testing.B, workers int, op func(worker, i int) error) {
	var lat latencies
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := op(w, i); err != nil {
					failed.Store(err)
					return
				}
				lat.add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	lat.report(b, start)
}

func BenchmarkAppend(b *testing.B) {
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("spl/writers=%d", workers), func(b *testing.B) {
			l := openTest(b, "")
			ctx := context.Background()
			recs := make([]*records.Record, b.N)
			for i := range recs {
				recs[i] = newRec(b, fmt.Sprintf("th_%d", i%1000), records.KindCheckpoint, benchBody(i))
			}
			runConcurrent(b, workers, func(_, i int) error {
				_, err := l.Append(ctx, recs[i])
				return err
			})
		})
		b.Run(fmt.Sprintf("jetstream/writers=%d", workers), func(b *testing.B) {
			l := openTest(b, "")
			ctx := context.Background()
			msgs := make([]*nats.Msg, b.N)
			for i := range msgs {
				r := newRec(b, fmt.Sprintf("th_%d", i%1000), records.KindCheckpoint, benchBody(i))
				data, _ := r.Marshal()
				msgs[i] = nats.NewMsg(RecordSubject(r.Header.Thread, r.Header.Kind))
				msgs[i].Data = data
				msgs[i].Header.Set(HeaderID, r.ID().String())
			}
			runConcurrent(b, workers, func(_, i int) error {
				_, err := l.JetStream().PublishMsg(ctx, msgs[i])
				return err
			})
		})
	}
}

// BenchmarkLatestCheckpoint: the latest checkpoint of a random thread in a
// store of `records` records over `threads` threads, against a raw
// last-by-subject get of the same message. Sized by -benchtime only for
// reads; the store is filled once per size.
func BenchmarkLatestCheckpoint(b *testing.B) {
	for _, size := range []struct{ records, threads int }{{10_000, 1_000}, {100_000, 10_000}} {
		l := openTest(b, "")
		fill(b, l, size.records, size.threads)
		name := fmt.Sprintf("records=%d/threads=%d", size.records, size.threads)
		b.Run("spl/"+name, func(b *testing.B) {
			ctx := context.Background()
			runConcurrent(b, 1, func(_, i int) error {
				_, err := l.Latest(ctx, fmt.Sprintf("th_%d", rand.IntN(size.threads)), records.KindCheckpoint)
				return err
			})
		})
		b.Run("jetstream/"+name, func(b *testing.B) {
			ctx := context.Background()
			s, err := l.JetStream().Stream(ctx, l.StreamName())
			if err != nil {
				b.Fatal(err)
			}
			runConcurrent(b, 1, func(_, i int) error {
				_, err := s.GetLastMsgForSubject(ctx, RecordSubject(fmt.Sprintf("th_%d", rand.IntN(size.threads)), records.KindCheckpoint))
				return err
			})
		})
	}
}

var _ jetstream.Stream

// fill appends n checkpoints round-robin over threads, 64 writers at a time.
func fill(b *testing.B, l *Log, n, threads int) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := l.Append(ctx, newRec(b, fmt.Sprintf("th_%d", i%threads), records.KindCheckpoint, benchBody(i))); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
