package sdk

import (
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

// One cache holds both kinds of policy, and a policy record of either
// kind that another process stores empties it as soon as the
// connection delivers it, well within policyTTL: the next save here
// enforces a retention policy set elsewhere a moment ago, and the next
// append is redacted by a redaction policy likewise.
func TestPolicyCacheSeesOtherProcesses(t *testing.T) {
	ctx, c, other := twoProcesses(t)
	const th = "th_cache"
	save := func(summary string) {
		t.Helper()
		if _, err := c.SaveCheckpoint(ctx, th, "", records.Checkpoint{Summary: summary, Learnings: []string{"l"}}); err != nil {
			t.Fatal(err)
		}
	}
	// seen waits until c has seen a policy record since gen.
	seen := func(gen uint64) {
		t.Helper()
		for deadline := time.Now().Add(policyTTL / 2); c.policies.gen.Load() == gen; {
			if time.Now().After(deadline) {
				t.Fatalf("no policy record seen within %v", policyTTL/2)
			}
			time.Sleep(time.Millisecond)
		}
	}
	save("a")
	save("b") // the cache now says th has no retention policy, nor redaction
	start := time.Now()
	gen := c.policies.gen.Load()
	if _, err := other.SetRetention(ctx, "", RetentionPolicy{Thread: th, KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	seen(gen)
	save("c")
	cps, err := c.ListCheckpoints(ctx, th, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 1 || cps[0].Checkpoint.Summary != "c" {
		t.Fatalf("after the other process's keep-last 1, the save kept %d checkpoints, want only c", len(cps))
	}

	gen = c.policies.gen.Load()
	if _, err := other.SetRedaction(ctx, "", RedactionPolicy{Thread: th, Keys: []string{"api_key"}}); err != nil {
		t.Fatal(err)
	}
	seen(gen)
	r, err := c.Emit(ctx, Event{Act: records.ActDo, Kind: "agent.step", Thread: th, Body: map[string]any{"api_key": "sk-1", "n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Record(ctx, r.ID, th)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := got.Record.DecodeBody(&body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["api_key"]; ok {
		t.Fatalf("the append after the other process's redaction policy kept api_key: %v", body)
	}
	if d := time.Since(start); d >= policyTTL {
		t.Fatalf("took %v: the cache may have expired instead of being emptied", d)
	}
}
