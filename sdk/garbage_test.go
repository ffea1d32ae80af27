package sdk_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// TestGarbageNeverHoldsAThread: a message that is no record at all, on a
// thread's checkpoint subject, between valid saves. Every read of the
// thread's checkpoints goes on past it, naming its clock, and resume
// takes the newest valid checkpoint.
func TestGarbageNeverHoldsAThread(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	const thread = "th_garbage"
	one := saveCP(t, c, thread, "one", "")
	ack, err := sdk.JetStreamOf(c).PublishMsg(ctx, &nats.Msg{Subject: log.RecordSubject(thread, records.KindCheckpoint), Data: []byte("not a record at all")})
	if err != nil {
		t.Fatal(err)
	}
	two := saveCP(t, c, thread, "two", "")
	want := fmt.Sprint([]uint64{ack.Sequence})
	skippedOnly := func(what string, err error) {
		t.Helper()
		clocks, ok := sdk.Skipped(err)
		if !ok || fmt.Sprint(clocks) != want || !errors.Is(err, records.ErrCorrupt) {
			t.Errorf("%s: %v, want the garbage at clock %d skipped and reported", what, err, ack.Sequence)
		}
	}

	if latest, err := c.LatestCheckpoint(ctx, thread); err != nil || latest.ID != two.ID {
		t.Errorf("LatestCheckpoint: %v, %v; want %s", latest.ID, err, two.ID)
	}
	for _, limit := range []int{0, 5} {
		list, err := c.ListCheckpoints(ctx, thread, limit)
		skippedOnly(fmt.Sprintf("ListCheckpoints(limit %d)", limit), err)
		if len(list) != 2 || list[0].ID != one.ID || list[1].ID != two.ID {
			t.Errorf("ListCheckpoints(limit %d): %d checkpoints, want one and two", limit, len(list))
		}
	}
	scp, err := c.SessionCheckpoints(ctx, thread, sdk.CheckpointQuery{})
	skippedOnly("SessionCheckpoints", err)
	if len(scp) != 2 {
		t.Errorf("SessionCheckpoints: %d, want 2", len(scp))
	}
	rc, err := c.ResumeSession(ctx, thread, actor, sdk.ResumeOptions{})
	if err != nil || rc.From.ID != two.ID || fmt.Sprint(rc.Skipped) != want {
		t.Errorf("ResumeSession: from %s skipping %v, %v; want from %s skipping %s", rc.From.ID, rc.Skipped, err, two.ID, want)
	}
	rep, err := c.Verify(ctx, thread)
	if err != nil || len(rep.Corrupt) != 1 || rep.Corrupt[0].Clock != ack.Sequence {
		t.Errorf("Verify: %+v, %v; want the garbage named", rep.Corrupt, err)
	}
}
