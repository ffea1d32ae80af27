package serve

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// With --retention-every, the server itself expires old checkpoints: no
// save and no retention apply comes after the policy, and the erasure
// records name the schedule's actor.
func TestRetentionSchedule(t *testing.T) {
	const keeper = "did:sync:agent:retention"
	s := start(t, Config{RetentionEvery: time.Second, RetentionActor: keeper})
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, age := range []time.Duration{72 * time.Hour, 48 * time.Hour} {
		if _, err := c.Emit(ctx, sdk.Event{Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: "th_expire", Actor: actor,
			Time: time.Now().Add(-age), Body: &records.Checkpoint{Summary: string(rune('a' + i)), Learnings: []string{"l"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.MarkSession(ctx, "th_expire", actor, records.KindSessionCompleted, records.SessionEvent{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRetention(ctx, actor, sdk.RetentionPolicy{All: true, MaxAge: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cps, err := c.ListCheckpoints(ctx, "th_expire", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d checkpoints left 10 s after the policy, with a schedule of 1 s", len(cps))
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts, err := c.Tombstones(ctx, "th_expire")
	if err != nil || len(ts) != 2 || ts[0].Actor != keeper || ts[0].Reason != sdk.ReasonRetention {
		t.Fatalf("tombstones %+v, %v; want 2 erased by %s for %q", ts, err, keeper, sdk.ReasonRetention)
	}
}

func TestRetentionScheduleConfig(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{RetentionEvery: time.Hour}, "RetentionActor"},
		{Config{RetentionActor: "did:sync:agent:x"}, "RetentionActor"},
		{Config{RetentionEvery: time.Millisecond, RetentionActor: "did:sync:agent:x"}, "RetentionEvery"},
		{Config{RetentionEvery: time.Hour, RetentionActor: "not a did"}, "RetentionActor"},
		{Config{RetentionEvery: time.Hour, RetentionActor: "did:sync:agent:x", RequireSigned: true}, "RetentionEvery"},
	} {
		c.cfg.Dir = t.TempDir()
		_, err := New(c.cfg, nil)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("New(%+v): %v, want a config error on %s", c.cfg, err, c.field)
		} else if strings.TrimSpace(ce.Rule) == "" {
			t.Errorf("New(%+v): no rule in %v", c.cfg, err)
		}
	}
}
