package sdk_test

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

	"github.com/spl-dev/spl/internal/natsio"
	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// The benchmarks measure spl against raw JetStream on the same embedded
// server options, stream and payload bytes, in the same run, so that the figures
// compare as ratios on a noisy machine. Each reports ops/s and latency
// percentiles as extra metrics; ns/op is wall time over all workers.

func benchClient(b *testing.B) *sdk.Client {
	b.Helper()
	c, err := sdk.Open(context.Background(), sdk.WithDir(b.TempDir()), sdk.WithActor("did:sync:agent:bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func checkpoint(i int) records.Checkpoint {
	return records.Checkpoint{
		Summary:   fmt.Sprintf("Completed step %d of the auth refactor; next: migration tests", i),
		Learnings: []string{"mutex pattern worked", "refactor touched 14 files"},
		NextSteps: []string{"Write migration tests"},
	}
}

func checkpointEvent(i, threads int) sdk.Event {
	cp := checkpoint(i)
	return sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: fmt.Sprintf("th_%d", i%threads), Body: &cp}
}

// rawJetStream is the raw peer: the server spl's embedded log runs, on
// the same options but with SyncAlways (the server fsyncs every message
// before its ack), and the same stream.
func rawJetStream(b *testing.B) jetstream.JetStream {
	b.Helper()
	srv, err := natsio.StartServer(natsio.EmbeddedServerOptions(b.TempDir(), true), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), splog.StreamConfig(splog.DefaultStream, 1)); err != nil {
		b.Fatal(err)
	}
	return js
}

// rawMessages are the same records as spl would store, ready to publish
// with no records layer (no chain, no group commit).
func rawMessages(b *testing.B, n, threads int) []*nats.Msg {
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		cp := checkpoint(i)
		r, err := records.New(records.ActLearn, records.KindCheckpoint, fmt.Sprintf("th_%d", i%threads), "did:sync:agent:bench", time.Now(), &cp)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := r.Marshal()
		msgs[i] = nats.NewMsg(splog.RecordSubject(r.Header.Thread, r.Header.Kind))
		msgs[i].Data = data
		msgs[i].Header.Set(splog.HeaderID, r.ID().String())
	}
	return msgs
}

// runWorkers runs b.N operations over `workers` goroutines, each awaiting
// its own result before its next, and reports ops/s, p50 and p99.
func runWorkers(b *testing.B, workers int, op func(i int) error) {
	runWorkersOf(b, workers, func(_, i int) error { return op(i) })
}

// runWorkersOf is runWorkers for operations that need to know their
// worker w (0 to workers-1), such as a run of its own.
func runWorkersOf(b *testing.B, workers int, op func(w, i int) error) {
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
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
					failed.Store(&err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(b.N)/el.Seconds(), "ops/s")
	b.ReportMetric(float64(lat[b.N/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[b.N*99/100].Microseconds()), "p99-µs")
}

// BenchmarkEmit: durable emits (fsync before ack) by 1 and 64 concurrent
// emitters over 1,000 threads, against raw JetStream sync publishes of the
// same bytes to the same server and stream under SyncAlways.
func BenchmarkEmit(b *testing.B) {
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("spl/emitters=%d", workers), func(b *testing.B) {
			c := benchClient(b)
			ctx := context.Background()
			evs := make([]sdk.Event, b.N)
			for i := range evs {
				evs[i] = checkpointEvent(i, 1000)
			}
			runWorkers(b, workers, func(i int) error {
				_, err := c.Emit(ctx, evs[i])
				return err
			})
		})
		b.Run(fmt.Sprintf("jetstream/emitters=%d", workers), func(b *testing.B) {
			ctx := context.Background()
			msgs := rawMessages(b, b.N, 1000)
			js := rawJetStream(b)
			runWorkers(b, workers, func(i int) error {
				_, err := js.PublishMsg(ctx, msgs[i])
				return err
			})
		})
	}
}

// BenchmarkEmitAsync: write-behind emits, many in flight, awaited by one
// Flush at the end: durable records/s.
func BenchmarkEmitAsync(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	evs := make([]sdk.Event, b.N)
	for i := range evs {
		evs[i] = checkpointEvent(i, 1000)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range evs {
		if _, err := c.EmitAsync(ctx, evs[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkLatestCheckpoint: the latest checkpoint of a random thread with
// 100k records over 10k threads, against a raw last-by-subject get of the
// same message.
func BenchmarkLatestCheckpoint(b *testing.B) {
	const records, threads = 100_000, 10_000
	c := benchClient(b)
	ctx := context.Background()
	for i := range records {
		if _, err := c.EmitAsync(ctx, checkpointEvent(i, threads)); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("records=%d/threads=%d", records, threads)
	b.Run("spl/"+name, func(b *testing.B) {
		runWorkers(b, 1, func(int) error {
			_, err := c.LatestCheckpoint(ctx, fmt.Sprintf("th_%d", rand.IntN(threads)))
			return err
		})
	})
	b.Run("jetstream/"+name, func(b *testing.B) {
		s, err := sdk.JetStreamOf(c).Stream(ctx, c.StreamName())
		if err != nil {
			b.Fatal(err)
		}
		runWorkers(b, 1, func(int) error {
			_, err := s.GetLastMsgForSubject(ctx, splog.RecordSubject(fmt.Sprintf("th_%d", rand.IntN(threads)), "agent.session.checkpoint"))
			return err
		})
	})
}
