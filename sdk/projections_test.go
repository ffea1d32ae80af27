package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/serve"
)

// spl serve runs projection runtimes as its projectors.
var _ serve.Projector = (*projections.Runtime)(nil)

func step(thread string) sdk.Event {
	return sdk.Event{Act: records.ActDo, Kind: "agent.step", Thread: thread, Body: map[string]any{"tool": "go test"}}
}

func TestThreadsAndLatestCheckpoints(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	ctx := ctxT(t)
	for i, th := range []string{"th_a", "th_b", "th_c", "th_a"} {
		if _, err := c.Emit(ctx, step(th)); err != nil {
			t.Fatal(err)
		}
		cp := records.Checkpoint{Summary: fmt.Sprintf("cp %d", i), Learnings: []string{"l"}}
		if _, err := c.SaveCheckpoint(ctx, th, "", cp); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := c.Threads(ctx, sdk.ThreadFilter{Freshness: sdk.Freshness{Fresh: true}})
	if err != nil {
		t.Fatalf("Threads: %v", err)
	}
	var names []string
	for _, th := range ts {
		names = append(names, th.Thread)
	}
	if want := []string{"th_a", "th_c", "th_b"}; !slices.Equal(names, want) {
		t.Fatalf("threads=%v, want %v", names, want)
	}
	if got, want := ts[0].Records, uint64(4); got != want {
		t.Fatalf("th_a records=%d, want %d", got, want)
	}
	if got, want := ts[0].Checkpoints, uint64(2); got != want {
		t.Fatalf("th_a checkpoints=%d, want %d", got, want)
	}
	if got, want := ts[0].LastActor, "did:sync:agent:dev"; got != want {
		t.Fatalf("last actor=%q, want %q", got, want)
	}
	var fe *records.FieldError
	if _, err := c.Threads(ctx, sdk.ThreadFilter{Kind: "Agent.Step"}); !errors.As(err, &fe) || fe.Field != "kind" {
		t.Fatalf("Threads with a kind no record can have: err=%v, want a *FieldError on kind", err)
	}
	cps, err := c.LatestCheckpoints(ctx, sdk.CheckpointPage{Limit: 2, Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, cp := range cps {
		sums = append(sums, cp.Summary)
	}
	if want := []string{"cp 2", "cp 1"}; !slices.Equal(sums, want) {
		t.Fatalf("latest checkpoints, second page=%v, want %v", sums, want)
	}
	if _, err := c.Thread(ctx, "th_nope", sdk.Freshness{}); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("Thread(th_nope): err=%v, want ErrNotFound", err)
	}
}

// A read right after an append sees it, in this process (MinClock) and
// in another (Fresh).
func TestReadYourWrites(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	c1, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:one"))
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:agent:two"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for i := range 5 {
		rc, err := c1.Emit(ctx, step(fmt.Sprintf("th_%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		th, err := c1.Thread(ctx, fmt.Sprintf("th_%d", i), sdk.Freshness{MinClock: rc.Clock})
		if err != nil {
			t.Fatalf("Thread after Emit: %v", err)
		}
		if got, want := th.Last, rc.Clock; got != want {
			t.Fatalf("last=%d, want %d", got, want)
		}
		ts, err := c2.Threads(ctx, sdk.ThreadFilter{Limit: 1, Freshness: sdk.Freshness{Fresh: true}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ts[0].Thread, fmt.Sprintf("th_%d", i); got != want {
			t.Fatalf("newest thread in the other process=%q, want %q", got, want)
		}
	}
}

func TestWaitProjectionTimesOut(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	ctx := ctxT(t)
	if _, err := c.ProjectionStatus(ctx); err != nil { // creates the buckets
		t.Fatal(err)
	}
	// Another process holds the projection's lease and applies nothing.
	meta, err := sdk.JetStreamOf(c).KeyValue(ctx, projections.BucketName(c.StreamName(), projections.MetaModel))
	if err != nil {
		t.Fatal(err)
	}
	lease, _ := json.Marshal(map[string]any{"holder": "stuck-process", "ttl_ms": 60_000, "renewed": time.Now().UnixMilli()})
	if _, err := meta.Put(ctx, "lease."+sdk.ProjectionIndex, lease); err != nil {
		t.Fatal(err)
	}
	rc, err := c.Emit(ctx, step("th_a"))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.Threads(wctx, sdk.ThreadFilter{Freshness: sdk.Freshness{MinClock: rc.Clock}})
	if !errors.Is(err, sdk.ErrProjectionBehind) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Threads: err=%v, want ErrProjectionBehind and DeadlineExceeded", err)
	}
	for _, s := range []string{"projection index at clock 0", fmt.Sprintf("for clock %d", rc.Clock), "stuck-process"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if err := meta.Delete(ctx, "lease."+sdk.ProjectionIndex); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitProjection(ctx, sdk.ProjectionIndex, rc.Clock); err != nil {
		t.Fatalf("WaitProjection without a projector: %v", err)
	}
}

func TestFollowDeliversLiveRecords(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	ctx := ctxT(t)
	first, err := c.Emit(ctx, step("th_f"))
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan sdk.Record, 16)
	errs := make(chan error, 1)
	go func() {
		defer close(got)
		for r, err := range c.Follow(fctx, "th_f", first.Clock+1) {
			if err != nil {
				errs <- err
				return
			}
			got <- r
		}
	}()
	time.Sleep(50 * time.Millisecond) // the follower is waiting: the records land live
	var want []uint64
	for range 3 {
		rc, err := c.Emit(ctx, step("th_f"))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rc.Clock)
		if _, err := c.Emit(ctx, step("th_other")); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.Erase(ctx, "th_f", "", []records.ID{first.ID}, "mistake")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, res.Erasures[0].Clock)
	var clocks []uint64
	timeout := time.After(10 * time.Second)
	for len(clocks) < len(want) {
		select {
		case r, ok := <-got:
			if !ok {
				t.Fatalf("follow ended after %v: %v", clocks, <-errs)
			}
			clocks = append(clocks, r.Clock)
			if r.Header.Thread != "th_f" {
				t.Fatalf("record of thread %q", r.Header.Thread)
			}
		case <-timeout:
			t.Fatalf("followed %v, want %v", clocks, want)
		}
	}
	if !slices.Equal(clocks, want) {
		t.Fatalf("followed %v, want %v", clocks, want)
	}
	cancel()
	for range got { // ends once cancelled
	}
}

func TestRebuildAndStatus(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	ctx := ctxT(t)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.RunProjections(runCtx) }()
	var last sdk.Receipt
	for i := range 30 {
		rc, err := c.Emit(ctx, step(fmt.Sprintf("th_%d", i%7)))
		if err != nil {
			t.Fatal(err)
		}
		last = rc
	}
	if err := c.WaitProjection(ctx, sdk.ProjectionIndex, last.Clock); err != nil {
		t.Fatal(err)
	}
	before, err := c.Threads(ctx, sdk.ThreadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	var lastDone, lastTotal uint64
	if err := c.RebuildProjection(ctx, "", func(done, total uint64) { calls, lastDone, lastTotal = calls+1, done, total }); err != nil {
		t.Fatalf("RebuildProjection: %v", err)
	}
	if calls == 0 || lastDone != last.Clock || lastTotal != last.Clock {
		t.Fatalf("progress: %d calls, last (%d, %d), want (%d, %d)", calls, lastDone, lastTotal, last.Clock, last.Clock)
	}
	after, err := c.Threads(ctx, sdk.ThreadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("threads after the rebuild:\n%v\nbefore:\n%v", after, before)
	}
	st, err := c.ProjectionStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Name != sdk.ProjectionIndex || st[0].Clock != last.Clock || st[0].Lag != 0 {
		t.Fatalf("status=%+v", st)
	}
	if err := c.RebuildProjection(ctx, "nope", nil); !errors.Is(err, sdk.ErrUnknownProjection) {
		t.Fatalf("RebuildProjection(nope): err=%v, want ErrUnknownProjection", err)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("RunProjections: %v", err)
	}
}

func TestCloseStopsRunProjections(t *testing.T) {
	c := open(t, sdk.WithActor("did:sync:agent:dev"))
	ran := make(chan error, 1)
	go func() { ran <- c.RunProjections(context.Background()) }()
	rc, err := c.Emit(ctxT(t), step("th_a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitProjection(ctxT(t), sdk.ProjectionIndex, rc.Clock); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("RunProjections: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunProjections still running 10s after Close")
	}
	if _, err := c.Threads(ctxT(t), sdk.ThreadFilter{}); !errors.Is(err, sdk.ErrClosed) {
		t.Fatalf("Threads after Close: err=%v, want ErrClosed", err)
	}
}
