package sdk_test

import (
	"context"
	"fmt"
	"os"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// A session ends with a checkpoint; the next session of the agent starts by
// reading it.
func Example() {
	dir, _ := os.MkdirTemp("", "spl-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:dev"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	_, err = c.SaveCheckpoint(ctx, "th_auth_refactor", "", records.Checkpoint{
		Summary:   "Completed auth refactor; next: migration tests",
		Learnings: []string{"mutex pattern worked"},
		NextSteps: []string{"Write migration tests"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The next session:
	cp, err := c.LatestCheckpoint(ctx, "th_auth_refactor")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cp.Checkpoint.Summary)
	fmt.Println(cp.Checkpoint.NextSteps[0])
	// Output:
	// Completed auth refactor; next: migration tests
	// Write migration tests
}

// Emit appends one record and returns once it is on disk; QueryThread
// reads the thread back in clock order.
func ExampleClient_Emit() {
	dir, _ := os.MkdirTemp("", "spl-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:dev"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	for _, step := range []string{"read the failing test", "patched the lock order"} {
		if _, err := c.Emit(ctx, sdk.Event{
			Act: records.ActDo, Kind: "agent.step", Thread: "th_fix_42",
			Body: map[string]any{"step": step},
		}); err != nil {
			fmt.Println(err)
			return
		}
	}
	for r, err := range c.QueryThread(ctx, "th_fix_42") {
		if err != nil {
			fmt.Println(err)
			return
		}
		var body struct {
			Step string `cbor:"step"`
		}
		if err := r.DecodeBody(&body); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(r.Clock, r.Header.Act, body.Step)
	}
	// Output:
	// 1 DO read the failing test
	// 2 DO patched the lock order
}

// EmitAsync queues records without waiting for each; Flush waits for all.
func ExampleClient_EmitAsync() {
	dir, _ := os.MkdirTemp("", "spl-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:dev"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	var last *sdk.Pending
	for i := range 100 {
		last, err = c.EmitAsync(ctx, sdk.Event{
			Act: records.ActKnow, Kind: "agent.observation", Thread: "th_obs",
			Body: map[string]any{"i": i},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := c.Flush(ctx); err != nil {
		fmt.Println(err)
		return
	}
	r, _ := last.Wait(ctx)
	fmt.Println("last clock:", r.Clock)
	// Output:
	// last clock: 100
}
