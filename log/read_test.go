package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
)

// Options.Timeout bounds each wait for the server, not the time the
// caller's loop body takes: a loop that dwells on a record past the
// timeout still gets the rest of the page.
func TestReadTimeoutSparesLoopBody(t *testing.T) {
	const timeout = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Open(ctx, Options{Dir: t.TempDir(), Linger: time.Second, Timeout: timeout})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	want := appendN(t, l, "th_slow", 20, func(i int) map[string]any { return map[string]any{"i": i} })
	n := 0
	// No deadline on the read's context: Options.Timeout applies.
	for e, err := range l.Read(context.Background(), "th_slow") {
		if err != nil {
			t.Fatalf("Read after %d of %d records: %v", n, len(want), err)
		}
		if got, want := e.ID, want[n].ID; got != want {
			t.Fatalf("record %d: %s, want %s", n, got, want)
		}
		if n == 0 {
			time.Sleep(timeout + timeout/2) // the caller's own work
		}
		n++
	}
	if got, want := n, len(want); got != want {
		t.Fatalf("read %d records, want %d", got, want)
	}
}

// Tail with From(c) is the last n of the records Read with From(c)
// yields: those at clock c or after, with the filters or without (the
// walk back by headers, and the scan).
func TestTailFrom(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	mine := interleaved(t, l, "th_from", "th_noise", 12)
	read := func(opts ...ReadOption) []Entry {
		var es []Entry
		for e, err := range l.Read(ctx, "th_from", opts...) {
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			es = append(es, e)
		}
		return es
	}
	filters := map[string][]ReadOption{
		"none": nil,
		"kind": {Kind("agent.step")},
		"act":  {Act(records.ActKnow)},
	}
	froms := []uint64{0, 1, mine[0].Clock, mine[5].Clock, mine[5].Clock - 1, mine[11].Clock, mine[11].Clock + 1}
	for name, filter := range filters {
		for _, from := range froms {
			all := read(append([]ReadOption{From(from)}, filter...)...)
			for _, n := range []int{1, 3, 7, 20} {
				got, err := l.Tail(ctx, "th_from", n, append([]ReadOption{From(from)}, filter...)...)
				if err != nil {
					t.Fatalf("Tail(%d, From(%d), %s): %v", n, from, name, err)
				}
				want := all[max(0, len(all)-n):]
				if err := sameEntries(got, want); err != nil {
					t.Fatalf("Tail(%d, From(%d), filter %s): %v", n, from, name, err)
				}
			}
		}
	}
	// The walk back by headers stops at From on its own: it need not fall
	// back to a scan to honour it.
	head, err := l.get(ctx, getRequest{LastFor: ThreadSubject("th_from")})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 7, 20} {
		got, ok := l.walkBack(ctx, head, n, mine[5].Clock)
		if !ok {
			t.Fatalf("walkBack(%d, from %d) fell back to a scan", n, mine[5].Clock)
		}
		if err := sameEntries(got, mine[max(5, len(mine)-n):]); err != nil {
			t.Fatalf("walkBack(%d, from %d): %v", n, mine[5].Clock, err)
		}
	}
}

func sameEntries(got, want []Entry) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Clock != want[i].Clock {
			return fmt.Errorf("record %d: %s@%d, want %s@%d", i, got[i].ID, got[i].Clock, want[i].ID, want[i].Clock)
		}
	}
	return nil
}

// A kind or act filter breaking the record format's rules is refused with
// the records package's *FieldError, naming the field: a kind becomes
// subject tokens, where "*" and ">" would match other kinds.
func TestReadRefusesInvalidFilter(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	appendN(t, l, "th_f", 2, func(i int) map[string]any { return map[string]any{"i": i} })
	if _, err := l.Append(ctx, newRec(t, "th_f", "agent.note", map[string]any{"n": 1})); err != nil {
		t.Fatal(err)
	}
	check := func(what, field string, err error) {
		t.Helper()
		var fe *records.FieldError
		if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, records.ErrInvalid) {
			t.Fatalf("%s: err=%v, want a *records.FieldError for %q", what, err, field)
		}
	}
	// refusal returns the one error Read with opt must yield, and nothing
	// else: no record, no second error.
	refusal := func(what string, opt ReadOption) error {
		var errs []error
		for e, err := range l.Read(ctx, "th_f", opt) {
			if err == nil {
				t.Fatalf("%s yielded the %s record at clock %d", what, e.Record.Header.Kind, e.Clock)
			}
			errs = append(errs, err)
		}
		if len(errs) != 1 {
			t.Fatalf("%s yielded %d errors, want 1", what, len(errs))
		}
		return errs[0]
	}
	for _, kind := range []string{">", "*", "agent.*", "agent.>", "Bad.Kind", "agent..step", "agent.step.", "agent step"} {
		check(fmt.Sprintf("Read(Kind(%q))", kind), "kind", refusal(fmt.Sprintf("Read(Kind(%q))", kind), Kind(kind)))
		es, err := l.Tail(ctx, "th_f", 5, Kind(kind))
		if len(es) != 0 {
			t.Fatalf("Tail(Kind(%q)) returned %d records", kind, len(es))
		}
		check(fmt.Sprintf("Tail(Kind(%q))", kind), "kind", err)
		_, err = l.Latest(ctx, "th_f", kind)
		check(fmt.Sprintf("Latest(%q)", kind), "kind", err)
	}
	for _, act := range []string{"know", "K", "KNOW.*", ">"} {
		check(fmt.Sprintf("Read(Act(%q))", act), "act", refusal(fmt.Sprintf("Read(Act(%q))", act), Act(act)))
		_, err := l.Tail(ctx, "th_f", 5, Act(act))
		check(fmt.Sprintf("Tail(Act(%q))", act), "act", err)
	}
	// Valid filters still read, the well-known kinds included.
	es, err := l.Tail(ctx, "th_f", 5, Kind("agent.step"), Act(records.ActKnow))
	if err != nil || len(es) != 2 {
		t.Fatalf("Tail(agent.step, KNOW) = %d records, %v; want 2", len(es), err)
	}
	if _, err := l.Latest(ctx, "th_f", records.KindCheckpoint); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest(%s) = %v, want ErrNotFound", records.KindCheckpoint, err)
	}
}

// IDsEnding finds the ids that end so on a thread or on every thread, in
// clock order, each once, at most as many as asked.
func TestIDsEnding(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	var all []Entry
	for i := range 40 {
		e, err := l.Append(ctx, newRec(t, fmt.Sprintf("th_end_%d", i%2), "agent.step", map[string]any{"i": i}))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	last := all[len(all)-1].ID.String()
	got, err := l.IDsEnding(ctx, "", last[len(last)-12:], 5)
	if err != nil || len(got) != 1 || got[0] != all[len(all)-1].ID {
		t.Fatalf("IDsEnding(12 characters of the last id) = %v, %v", got, err)
	}
	// One character ends about a 32nd of the ids: ask for all, and for 2.
	end := last[len(last)-1:]
	var want []records.ID
	for _, e := range all {
		if strings.HasSuffix(e.ID.String(), end) {
			want = append(want, e.ID)
		}
	}
	if got, err := l.IDsEnding(ctx, "", end, 100); err != nil || !slices.Equal(got, want) {
		t.Fatalf("IDsEnding(%q) = %v, %v; want %v", end, got, err, want)
	}
	if got, err := l.IDsEnding(ctx, "", end, 1); err != nil || !slices.Equal(got, want[:1]) {
		t.Fatalf("IDsEnding(%q, limit 1) = %v, %v; want %v", end, got, err, want[:1])
	}
	if got, err := l.IDsEnding(ctx, "th_end_0", last[len(last)-12:], 5); err != nil || len(got) != 0 {
		t.Fatalf("IDsEnding on the other thread = %v, %v; want none", got, err)
	}
}

// LatestValid passes over the messages of a kind that are no records,
// naming them newest first, and finds none when nothing of the kind
// verifies.
func TestLatestValid(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	garbage := func(thread string) uint64 {
		t.Helper()
		ack, err := l.c.JS.PublishMsg(ctx, &nats.Msg{Subject: RecordSubject(thread, "agent.step"), Data: []byte("no record")})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	good, err := l.Append(ctx, newRec(t, "th_v", "agent.step", map[string]any{"i": 1}))
	if err != nil {
		t.Fatal(err)
	}
	g1, g2 := garbage("th_v"), garbage("th_v")
	e, skipped, err := l.LatestValid(ctx, "th_v", "agent.step")
	if err != nil || e.ID != good.ID || fmt.Sprint(skipped) != fmt.Sprint([]uint64{g2, g1}) {
		t.Fatalf("LatestValid = %v, skipped %v, %v; want %v skipping [%d %d]", e.ID, skipped, err, good.ID, g2, g1)
	}
	garbage("th_bad")
	if _, _, err := l.LatestValid(ctx, "th_bad", "agent.step"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LatestValid of garbage alone: %v, want ErrNotFound", err)
	}
	if _, _, err := l.LatestValid(ctx, "th_none", "agent.step"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LatestValid of nothing: %v, want ErrNotFound", err)
	}
}
