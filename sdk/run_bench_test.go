package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// The run benchmarks reproduce the figures of the runs workload of the
// bench harness (bench/runs.go) inside this package, for a profile:
//
//	go test ./sdk -run '^$' -bench 'Run(Steps|Resume)' -cpuprofile cpu.out
//
// A step is one durable effect of a run (the effect record on disk when
// Effect returns); the plain-writer figure beside it is Emit of a record
// shaped as an effect record, the floor a step is held to.

// stepOutput is the output of a step, about the size of a small tool
// result (the bench harness's).
var stepOutput = json.RawMessage(`{"line":"call-0000 {\"n\":0}","status":"ok","bytes":42,"note":"` + strings.Repeat("x", 120) + `"}`)

func stepTool(context.Context) (json.RawMessage, error) { return stepOutput, nil }

// BenchmarkRunSteps: 64 concurrent runs, each a loop of durable effects,
// against 64 plain writers emitting records shaped as effect records;
// ops/s is steps/s.
func BenchmarkRunSteps(b *testing.B) {
	const runs = 64
	b.Run(fmt.Sprintf("effects/runs=%d", runs), func(b *testing.B) {
		c := benchClient(b)
		ctx := context.Background()
		rs := make([]*sdk.Run, runs)
		for w := range rs {
			r, err := c.OpenRun(ctx, "bench", fmt.Sprintf("w%d", w))
			if err != nil {
				b.Fatal(err)
			}
			rs[w] = r
		}
		runWorkersOf(b, runs, func(w, i int) error {
			_, err := rs[w].Effect(ctx, fmt.Sprintf("c%d", i), "tool", i, stepTool)
			return err
		})
		for _, r := range rs {
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("emit/writers=%d", runs), func(b *testing.B) {
		c := benchClient(b)
		ctx := context.Background()
		hash := "blake3:" + strings.Repeat("0", 64)
		runWorkersOf(b, runs, func(w, i int) error {
			// A record shaped as an effect record: the same fields and
			// sizes, a thread name and a kind as long.
			body := map[string]any{"run_id": fmt.Sprintf("w%d", w), "thread_id": "bench", "call_id": fmt.Sprintf("c%d", i), "tool": "tool",
				"input_hash": hash, "output_hash": hash, "output": string(stepOutput), "timestamp_ms": time.Now().UnixMilli()}
			_, err := c.Emit(ctx, sdk.Event{Act: records.ActDo, Kind: "bench.run.effect", Thread: fmt.Sprintf("bench/emt/w%d/effects", w), Body: body})
			return err
		})
	})
}

// BenchmarkRunResume: resume of a run with 1,000 recorded effects (every
// effect record read and verified) and a checkpoint.
func BenchmarkRunResume(b *testing.B) {
	const effects = 1000
	c := benchClient(b)
	ctx := context.Background()
	r, err := c.OpenRun(ctx, "bench", "resume")
	if err != nil {
		b.Fatal(err)
	}
	for i := range effects {
		if _, err := r.Effect(ctx, fmt.Sprintf("c%d", i), "tool", i, stepTool); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Checkpoint(ctx, sdk.PhasePostToolBatch, map[string]any{"tool_calls_total": effects}); err != nil {
		b.Fatal(err)
	}
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		r, err := c.ResumeRun(ctx, "bench", "resume")
		if err != nil {
			b.Fatal(err)
		}
		if n := r.Resume().Effects; n != effects {
			b.Fatalf("resume: %d effects, want %d", n, effects)
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
