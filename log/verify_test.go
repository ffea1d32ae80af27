package log

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
)

func TestVerifyClean(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	es := appendN(t, l, "th_v", 6, func(i int) map[string]any { return map[string]any{"i": i} })
	appendN(t, l, "th_w", 3, func(i int) map[string]any { return map[string]any{"i": i} })
	// Erase two neighbours and the last record: the chain is bridged
	// through the erasure's headers.
	if _, err := l.Erase(ctx, "th_v", []records.ID{es[2].ID, es[3].ID, es[5].ID}, "r", actor); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, "th_v", 2, func(i int) map[string]any { return map[string]any{"after": i} })
	rep, err := l.Verify(ctx, "th_v")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Checked != 6 || len(rep.Erased) != 3 {
		t.Fatalf("report %+v, want OK with 6 checked (3 survivors, erasure, 2 after) and 3 erased", rep)
	}
	all, err := l.VerifyAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !all.OK() || all.Checked != 9 || all.Threads != 2 {
		t.Fatalf("verify all %+v", all)
	}
}

// Damage behind spl's back, through the raw JetStream API: verify names
// exactly the deleted and the altered record.
func TestVerifyFindsDamage(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	es := appendN(t, l, "th_d", 5, func(i int) map[string]any { return map[string]any{"text": "original"} })
	stream, err := l.c.JS.Stream(ctx, l.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, es[1].Clock); err != nil {
		t.Fatal(err)
	}
	// Republish record 3 with its body changed, in place of nothing: a new
	// message claiming the old id.
	forged := *es[3].Record
	forged.Body = mustBody(t, map[string]any{"text": "forged!!"})
	data, err := forged.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(RecordSubject("th_d", "agent.step"))
	msg.Data = data
	msg.Header.Set(HeaderID, es[3].ID.String())
	ack, err := l.c.JS.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	thread, err := l.Verify(ctx, "th_d")
	if err != nil {
		t.Fatal(err)
	}
	all, err := l.VerifyAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]VerifyReport{"thread": thread, "all": all} {
		if r.OK() || len(r.Corrupt) != 1 || r.Corrupt[0].Clock != ack.Sequence || r.Corrupt[0].ID != es[3].ID {
			t.Fatalf("%s: corrupt %+v, want exactly clock %d claiming %s", name, r.Corrupt, ack.Sequence, es[3].ID)
		}
	}
	// The thread walk sees the hole where record 2's prev is gone.
	if len(thread.Missing) != 1 || thread.Missing[0].Clock != es[2].Clock || thread.Missing[0].ID != es[1].ID {
		t.Fatalf("thread: missing %+v, want one gap at clock %d naming %s", thread.Missing, es[2].Clock, es[1].ID)
	}
	// The whole-log walk also accounts for the deleted clock itself.
	if len(all.Missing) != 2 || all.Missing[0].Clock != es[1].Clock || all.Missing[1].Clock != es[2].Clock {
		t.Fatalf("all: missing %+v, want the deleted clock %d and the gap at %d", all.Missing, es[1].Clock, es[2].Clock)
	}
}

func mustBody(t *testing.T, v map[string]any) []byte {
	t.Helper()
	r, err := records.New(records.ActKnow, "agent.step", "th", actor, time.Now(), v)
	if err != nil {
		t.Fatal(err)
	}
	return r.Body
}

// A record whose prev is an earlier record of its thread, not the one
// just before it, is a fork: verify names both records and their clocks,
// rather than calling the earlier record missing.
func TestVerifyNamesFork(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	es := appendN(t, l, "th_f", 3, func(i int) map[string]any { return map[string]any{"i": i} })
	fork := newRec(t, "th_f", "agent.step", map[string]any{"fork": true}).WithPrev(es[0].ID)
	ack, err := l.c.JS.PublishMsg(ctx, recordMsg(t, fork))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("record %s (clock %d) links to %s (clock %d), not to the record before it, %s (clock %d): a fork",
		fork.ID(), ack.Sequence, es[0].ID, es[0].Clock, es[2].ID, es[2].Clock)
	thread, err := l.Verify(ctx, "th_f")
	if err != nil {
		t.Fatal(err)
	}
	all, err := l.VerifyAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]VerifyReport{"thread": thread, "all": all} {
		if len(r.Missing) != 1 || len(r.Corrupt) != 0 {
			t.Fatalf("%s: missing %+v, corrupt %+v, want one problem", name, r.Missing, r.Corrupt)
		}
		if got := r.Missing[0]; got.Clock != ack.Sequence || got.ID != es[0].ID || got.Reason != want {
			t.Errorf("%s: problem %+v,\nwant clock %d, id %s, reason %q", name, got, ack.Sequence, es[0].ID, want)
		}
	}
}
