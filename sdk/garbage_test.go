package sdk_test

import (
	"errors"
	"fmt"
	"strings"
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

// TestEraseGarbageByClock: the message that holds nothing back is erased
// by its clock; afterwards no read skips anything, the thread and the
// whole log verify with its clock counted as erased, and its bytes are
// gone. Clocks that hold records, other threads' messages or nothing are
// refused, naming why, and erase nothing.
func TestEraseGarbageByClock(t *testing.T) {
	c := open(t, sdk.WithActor(actor))
	ctx := ctxT(t)
	const thread = "th_garbage_erase"
	one := saveCP(t, c, thread, "one", "")
	js := sdk.JetStreamOf(c)
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: log.RecordSubject(thread, records.KindCheckpoint), Data: []byte("not a record at all")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := js.PublishMsg(ctx, &nats.Msg{Subject: log.RecordSubject("th_elsewhere", "agent.step"), Data: []byte("garbage elsewhere")})
	if err != nil {
		t.Fatal(err)
	}
	saveCP(t, c, thread, "two", "")

	for _, bad := range []struct {
		clock uint64
		want  error
		says  string
	}{
		{one.Clock, sdk.ErrNotErasable, "erase it by its id"},
		{other.Sequence, sdk.ErrNotErasable, "not on thread"},
		{ack.Sequence + 100, sdk.ErrNotFound, "no message there"},
	} {
		res, err := c.EraseMessages(ctx, thread, "", []uint64{ack.Sequence, bad.clock}, "garbage")
		if !errors.Is(err, bad.want) || !strings.Contains(err.Error(), bad.says) || len(res.Erasures) != 0 {
			t.Errorf("EraseMessages(clock %d): %+v, %v; want %v saying %q, nothing erased", bad.clock, res, err, bad.want, bad.says)
		}
	}
	if _, err := c.ListCheckpoints(ctx, thread, 0); err == nil {
		t.Fatal("a refused erasure erased the garbage")
	}

	res, err := c.EraseMessages(ctx, thread, "", []uint64{ack.Sequence}, "garbage published by hand")
	if err != nil || fmt.Sprint(res.ErasedClocks) != fmt.Sprint([]uint64{ack.Sequence}) || len(res.Erasures) != 1 {
		t.Fatalf("EraseMessages: %+v, %v; want clock %d erased by one erasure record", res, err, ack.Sequence)
	}
	if list, err := c.ListCheckpoints(ctx, thread, 0); err != nil || len(list) != 2 {
		t.Errorf("ListCheckpoints after the erasure: %d, %v; want 2 and nothing skipped", len(list), err)
	}
	rep, err := c.Verify(ctx, thread)
	if err != nil || !rep.OK() {
		t.Errorf("Verify after the erasure: corrupt %v missing %v, %v; want ok", rep.Corrupt, rep.Missing, err)
	}
	all, err := c.VerifyAll(ctx, nil)
	if err != nil || len(all.Missing) != 0 || len(all.Corrupt) != 1 || all.Corrupt[0].Clock != other.Sequence {
		t.Errorf("VerifyAll after the erasure: corrupt %v missing %v, %v; want only th_elsewhere's garbage, no gap", all.Corrupt, all.Missing, err)
	}
	stream, err := js.Stream(ctx, log.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetMsg(ctx, ack.Sequence); err == nil {
		t.Errorf("the erased message is still at clock %d", ack.Sequence)
	}
	again, err := c.EraseMessages(ctx, thread, "", []uint64{ack.Sequence}, "again")
	if err != nil || fmt.Sprint(again.AlreadyClocks) != fmt.Sprint([]uint64{ack.Sequence}) || len(again.Erasures) != 0 {
		t.Errorf("EraseMessages again: %+v, %v; want it already erased, nothing appended", again, err)
	}
}
