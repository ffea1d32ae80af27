// Command sdkruns measures durable runs through the Go SDK on spl serve
// (SPL_SERVER, SPL_TOKEN: the NATS door), the peer the TypeScript and
// Python SDKs' runs over HTTP are compared with (bench/sdks.sh): a
// durable effect's p50, a write-behind checkpoint's p50 (the call, not
// the write), and the steps per second of 64 runs at once, a step being
// one effect and two checkpoints. It prints one JSON object.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spl-dev/spl/bench/internal/stat"
	"github.com/spl-dev/spl/sdk"
)

func main() {
	n := flag.Int("n", 300, "effects and checkpoints of the one run")
	runs := flag.Int("c", 64, "concurrent runs")
	steps := flag.Int("steps", 20, "steps of each concurrent run")
	flag.Parse()
	ctx := context.Background()
	c, err := sdk.Open(ctx, sdk.WithActor("did:sync:agent:bench"))
	if err != nil {
		fail(err)
	}
	defer c.Close()
	id := fmt.Sprintf("go_%d", time.Now().UnixNano())
	r, err := c.OpenRun(ctx, "bench-runs", id)
	if err != nil {
		fail(err)
	}
	tool := func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"ok":true}`), nil }
	var effect, cp []float64
	for i := range *n {
		t := time.Now()
		if _, err := r.Effect(ctx, fmt.Sprintf("c%d", i), "t", map[string]int{"i": i}, tool); err != nil {
			fail(err)
		}
		effect = append(effect, stat.MS(time.Since(t)))
	}
	for i := range *n {
		t := time.Now()
		if err := r.Checkpoint(ctx, sdk.PhasePreToolBatch, map[string]int{"i": i}); err != nil {
			fail(err)
		}
		cp = append(cp, stat.MS(time.Since(t)))
	}
	if _, err := r.Finish(ctx, sdk.Terminal{Result: "ok"}); err != nil {
		fail(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, *runs)
	for w := range *runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.OpenRun(ctx, "bench-runs", fmt.Sprintf("%s_c%d", id, w))
			if err != nil {
				errs <- err
				return
			}
			for s := range *steps {
				if err := r.Checkpoint(ctx, sdk.PhasePreToolBatch, map[string]int{"s": s}); err != nil {
					errs <- err
					return
				}
				if _, err := r.Effect(ctx, fmt.Sprintf("c%d", s), "t", map[string]int{"s": s}, tool); err != nil {
					errs <- err
					return
				}
				if err := r.Checkpoint(ctx, sdk.PhasePostToolBatch, map[string]int{"s": s}); err != nil {
					errs <- err
					return
				}
			}
			if _, err := r.Finish(ctx, sdk.Terminal{Result: "ok"}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fail(err)
	}
	sps := float64(*runs**steps) / time.Since(start).Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(map[string]float64{
		"effect_p50_ms": stat.P50(effect), "checkpoint_p50_us": stat.P50(cp) * 1000, "concurrent_steps_per_s": sps,
	})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sdkruns:", err)
	os.Exit(1)
}
