package log

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
)

// Read with ToEnd yields what Read yields without it, in the same order,
// over several pages: every record verified, a forged one reported in its
// place, the filters applied; and a reader may still stop early.
func TestReadToEndIsRead(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	body := func(i int) map[string]any { return map[string]any{"i": i} }
	appendN(t, l, "th_ahead", 2*readPage+10, body)
	// A message that does not verify, between two pages' worth of records.
	good, err := l.Head(ctx, "th_ahead")
	if err != nil {
		t.Fatal(err)
	}
	forged := newRec(t, "th_ahead", "agent.step", map[string]any{"i": "forged"})
	forged.Salt, forged.Header = good.Record.Salt, good.Record.Header
	data, err := forged.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(RecordSubject("th_ahead", "agent.step"))
	msg.Data = data
	msg.Header.Set(HeaderID, good.ID.String())
	if _, err := l.c.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, "th_ahead", readPage+3, body)

	type item struct {
		clock   uint64
		id      records.ID
		corrupt bool
	}
	read := func(opts ...ReadOption) []item {
		var out []item
		for e, err := range l.Read(ctx, "th_ahead", opts...) {
			if err != nil && !errors.Is(err, records.ErrCorrupt) {
				t.Fatalf("Read: %v", err)
			}
			out = append(out, item{e.Clock, e.ID, err != nil})
		}
		return out
	}
	for name, opts := range map[string][]ReadOption{
		"all":  nil,
		"kind": {Kind("agent.step")},
		"from": {From(good.Clock - 5)},
		"act":  {Act(records.ActDo)}, // none of them
	} {
		want := read(opts...)
		got := read(append(opts, ToEnd())...)
		if len(got) != len(want) {
			t.Fatalf("%s: %d items, want %d", name, len(got), len(want))
		}
		corrupt := 0
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: item %d: %+v, want %+v", name, i, got[i], want[i])
			}
			if got[i].corrupt {
				corrupt++
			}
		}
		if name != "act" && corrupt != 1 {
			t.Fatalf("%s: %d corrupt, want 1", name, corrupt)
		}
	}
	n := 0
	for _, err := range l.Read(ctx, "th_ahead", ToEnd()) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("stopped after %d records, want 3", n)
	}
}
