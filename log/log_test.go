package log

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

const actor = "did:sync:agent:test"

func openTest(t testing.TB, dir string) *Log {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Open(ctx, Options{Dir: dir, Linger: time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func newRec(t testing.TB, thread, kind string, body map[string]any) *records.Record {
	t.Helper()
	act := records.ActKnow
	if kind == records.KindCheckpoint {
		act = records.ActLearn
	}
	r, err := records.New(act, kind, thread, actor, time.Now(), body)
	if err != nil {
		t.Fatalf("records.New: %v", err)
	}
	return r
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recordMsg is rec as the writer publishes it (without the writer's
// chain headers): for tests that land records behind its back.
func recordMsg(t *testing.T, rec *records.Record) *nats.Msg {
	t.Helper()
	data, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(RecordSubject(rec.Header.Thread, rec.Header.Kind))
	msg.Data = data
	msg.Header.Set(HeaderID, rec.ID().String())
	return msg
}

// chain checks that the records of thread link each to the one before.
func chain(t *testing.T, l *Log, thread string) []Entry {
	t.Helper()
	var es []Entry
	var prev records.ID
	for e, err := range l.Read(ctxT(t), thread) {
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if e.Record.Header.Prev != prev {
			t.Fatalf("clock %d: prev=%s, want %s", e.Clock, e.Record.Header.Prev, prev)
		}
		prev = e.ID
		es = append(es, e)
	}
	return es
}

func TestAppendRead(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	var want []Entry
	for i := range 5 {
		e, err := l.Append(ctx, newRec(t, "th_a", "agent.step", map[string]any{"i": i}))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		want = append(want, e)
	}
	got := chain(t, l, "th_a")
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Clock != want[i].Clock {
			t.Fatalf("record %d: got %s@%d, want %s@%d", i, got[i].ID, got[i].Clock, want[i].ID, want[i].Clock)
		}
	}
	if want[0].Record.Header.Prev != (records.ID{}) {
		t.Fatalf("first record has prev %s", want[0].Record.Header.Prev)
	}
}

func TestConcurrentAppendsOneThread(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	const writers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := l.Append(ctx, newRec(t, "th_busy", "agent.step", map[string]any{"w": w, "i": i})); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	if got, want := len(chain(t, l, "th_busy")), writers*each; got != want {
		t.Fatalf("thread holds %d records, want %d", got, want)
	}
}

// Two Logs on one directory (the second joins the first's server) append
// to the same thread at once: the chain stays intact across processes'
// writers, through optimistic concurrency.
func TestTwoWritersOneDirectory(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, dir)
	b := openTest(t, dir)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	for _, l := range []*Log{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				if _, err := l.Append(ctx, newRec(t, "th_shared", "agent.step", map[string]any{"i": i})); err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d appends failed, first: %v", len(failures), failures[0])
	}
	if got, want := len(chain(t, a, "th_shared")), 120; got != want {
		t.Fatalf("thread holds %d records, want %d", got, want)
	}
}

func TestRetryReturnsStoredRecord(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	rec := newRec(t, "th_retry", "agent.step", map[string]any{"x": 1})
	first, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, newRec(t, "th_retry", "agent.step", map[string]any{"x": 2})); err != nil {
		t.Fatal(err)
	}
	again, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.Clock != first.Clock {
		t.Fatalf("retry landed as %s@%d, want %s@%d", again.ID, again.Clock, first.ID, first.Clock)
	}
	if got, want := len(chain(t, l, "th_retry")), 2; got != want {
		t.Fatalf("thread holds %d records, want %d", got, want)
	}
}

// A record sent again through another writer, which never saw the first
// copy land, is answered with that copy when it is its thread's head, not
// chained on top of it: spl serve's door meets this when a client's first
// send reached a node late, after the client had sent it again through
// another node and it landed (log/door.go). Packed records too.
func TestAppendAgainOnItsCopy(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, dir)
	b := openTest(t, dir)
	ctx := ctxT(t)
	for _, rec := range []*records.Record{
		newRec(t, "th_again", "agent.step", map[string]any{"x": 1}),
		newRec(t, "th_again", "agent.step", map[string]any{"x": strings.Repeat("spl ", 4<<10)}), // compressed
	} {
		first, err := a.Append(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := b.Append(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if again.ID != first.ID || again.Clock != first.Clock {
			t.Fatalf("sent again through another writer: %s@%d, want the copy %s@%d", again.ID, again.Clock, first.ID, first.Clock)
		}
	}
	if got, want := len(chain(t, a, "th_again")), 2; got != want {
		t.Fatalf("thread holds %d records, want %d", got, want)
	}
}

// An append whose answer was lost is resolved from the log: the record
// after the expected clock is the sealed one, however long ago it landed.
func TestResolveInDoubt(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	base, err := l.Append(ctx, newRec(t, "th_doubt", "agent.step", map[string]any{"n": 0}))
	if err != nil {
		t.Fatal(err)
	}
	// Land a sealed record behind the writer's back, as a lost ack would.
	rec := newRec(t, "th_doubt", "agent.step", map[string]any{"n": 1})
	sealed := rec.WithPrev(base.ID)
	msg := recordMsg(t, sealed)
	if _, err := l.c.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	inDoubtAfter(t, l, rec, base)

	got, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != sealed.ID() || got.Clock != base.Clock+1 {
		t.Fatalf("resolved as %s@%d, want %s@%d", got.ID, got.Clock, sealed.ID(), base.Clock+1)
	}
	if n := len(chain(t, l, "th_doubt")); n != 2 {
		t.Fatalf("thread holds %d records, want 2", n)
	}
}

// An append in doubt whose thread has not moved may still be on its way:
// it is sent again as it was, chained on the same record, so that it
// lands once whichever copy the server takes; a copy landing meanwhile
// is found, not doubled.
func TestInDoubtSentAgainAsItWas(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	base, err := l.Append(ctx, newRec(t, "th_again", "agent.step", map[string]any{"n": 0}))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRec(t, "th_again", "agent.step", map[string]any{"n": 1})
	p := inDoubtAfter(t, l, rec, base)

	got, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != p.id || got.Clock != base.Clock+1 {
		t.Fatalf("landed as %s@%d, want %s@%d (sent as it was)", got.ID, got.Clock, p.id, base.Clock+1)
	}
	// The first copy arriving late is refused: the thread moved past the
	// clock it expects.
	if _, err := l.c.JS.PublishMsg(ctx, l.w.message(p)); err == nil {
		t.Fatalf("late first copy: stored, want refused")
	}
	if n := len(chain(t, l, "th_again")); n != 2 {
		t.Fatalf("thread holds %d records, want 2", n)
	}
}

// An append in doubt whose thread moved on with another record never
// lands: it is appended afresh, after that record.
func TestInDoubtThreadMovedOn(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	base, err := l.Append(ctx, newRec(t, "th_moved", "agent.step", map[string]any{"n": 0}))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRec(t, "th_moved", "agent.step", map[string]any{"n": 1})
	p := inDoubtAfter(t, l, rec, base)
	other, err := l.Append(ctx, newRec(t, "th_moved", "agent.step", map[string]any{"n": 2}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == p.id || got.Clock != other.Clock+1 || got.Record.Header.Prev != other.ID {
		t.Fatalf("landed as %s@%d after %s, want a new seal after %s@%d", got.ID, got.Clock, got.Record.Header.Prev, other.ID, other.Clock)
	}
	if n := len(chain(t, l, "th_moved")); n != 3 {
		t.Fatalf("thread holds %d records, want 3", n)
	}
}

// inDoubtAfter leaves rec in doubt as the writer does when no answer came
// and its caller stopped waiting: sealed after base, the first of its
// thread in a unit of its own.
func inDoubtAfter(t *testing.T, l *Log, rec *records.Record, base Entry) *Pending {
	t.Helper()
	sealed := rec.WithPrev(base.ID)
	data, err := sealed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := &Pending{rec: rec, sealed: sealed, id: sealed.ID(), data: data, first: true, expect: base.Clock, prevClock: base.Clock}
	l.w.mu.Lock()
	l.w.doubts[rec.Header.BD] = doubt{unit: []*Pending{p}}
	l.w.mu.Unlock()
	return p
}

func TestTailLatestGet(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	var cps []Entry
	for i := range 30 {
		// Interleave a busy other thread so th_t is sparse in the log.
		for j := range 5 {
			if _, err := l.Append(ctx, newRec(t, "th_noise", "agent.step", map[string]any{"j": j})); err != nil {
				t.Fatal(err)
			}
		}
		kind := "agent.step"
		if i%3 == 0 {
			kind = records.KindCheckpoint
		}
		body := map[string]any{"i": i}
		if kind == records.KindCheckpoint {
			body = map[string]any{"summary": fmt.Sprintf("cp %d", i), "learnings": []any{"l"}}
		}
		e, err := l.Append(ctx, newRec(t, "th_t", kind, body))
		if err != nil {
			t.Fatal(err)
		}
		if kind == records.KindCheckpoint {
			cps = append(cps, e)
		}
	}
	tail, err := l.Tail(ctx, "th_t", 7)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(tail), 7; got != want {
		t.Fatalf("tail has %d, want %d", got, want)
	}
	for i := 1; i < len(tail); i++ {
		if tail[i].Record.Header.Prev != tail[i-1].ID {
			t.Fatalf("tail not in chain order at %d", i)
		}
	}
	all := chain(t, l, "th_t")
	if tail[6].ID != all[len(all)-1].ID || tail[0].ID != all[len(all)-7].ID {
		t.Fatalf("tail is not the last 7 records")
	}
	cpTail, err := l.Tail(ctx, "th_t", 100, Kind(records.KindCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(cpTail), len(cps); got != want {
		t.Fatalf("checkpoint tail has %d, want %d", got, want)
	}
	latest, err := l.Latest(ctx, "th_t", records.KindCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := latest.ID, cps[len(cps)-1].ID; got != want {
		t.Fatalf("latest=%s, want %s", got, want)
	}
	if _, err := l.Latest(ctx, "th_none", records.KindCheckpoint); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest of empty thread: err=%v, want ErrNotFound", err)
	}
	got, err := l.Get(ctx, cps[2].ID, "")
	if err != nil || got.Clock != cps[2].Clock {
		t.Fatalf("Get=%v,%v, want clock %d", got.Clock, err, cps[2].Clock)
	}
	acts := 0
	for e, err := range l.Read(ctx, "th_t", Act(records.ActLearn)) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Record.Header.Act != records.ActLearn {
			t.Fatalf("act filter let %s through", e.Record.Header.Act)
		}
		acts++
	}
	if acts != len(cps) {
		t.Fatalf("act filter yielded %d, want %d", acts, len(cps))
	}
}

// Threads that are not plain subject tokens (Unicode, dots, spaces) map to
// base64url tokens and read back intact.
func TestUnicodeThread(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	for _, th := range []string{"研究 スレッド", "a.b.c", "with space", "🚀"} {
		e, err := l.Append(ctx, newRec(t, th, "agent.step", map[string]any{"t": th}))
		if err != nil {
			t.Fatalf("%q: %v", th, err)
		}
		got, err := l.Head(ctx, th)
		if err != nil || got.ID != e.ID || got.Record.Header.Thread != th {
			t.Fatalf("%q: head=%v,%v", th, got.ID, err)
		}
	}
}

// A message changed behind the log's back is reported as corruption, never
// returned as valid.
func TestCorruptionDetected(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	good, err := l.Append(ctx, newRec(t, "th_c", "agent.step", map[string]any{"text": "original"}))
	if err != nil {
		t.Fatal(err)
	}
	forged := newRec(t, "th_c", "agent.step", map[string]any{"text": "forged"})
	forged.Salt = good.Record.Salt
	forged.Header = good.Record.Header // keep the header (and its digest) of the good record
	data, err := forged.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(RecordSubject("th_c", "agent.step"))
	msg.Data = data
	msg.Header.Set(HeaderID, good.ID.String())
	if _, err := l.c.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	var corrupt int
	for _, err := range l.Read(ctx, "th_c") {
		if err != nil {
			if !errors.Is(err, records.ErrCorrupt) {
				t.Fatalf("err=%v, want ErrCorrupt", err)
			}
			corrupt++
		}
	}
	if corrupt != 1 {
		t.Fatalf("%d corrupt records reported, want 1", corrupt)
	}
	if _, err := l.Head(ctx, "th_c"); !errors.Is(err, records.ErrCorrupt) {
		t.Fatalf("Head err=%v, want ErrCorrupt", err)
	}
}

// Records survive a close and reopen of the embedded server.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	e, err := l.Append(ctxT(t), newRec(t, "th_r", "agent.step", map[string]any{"a": 1}))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	l2 := openTest(t, dir)
	got, err := l2.Head(ctxT(t), "th_r")
	if err != nil || got.ID != e.ID || got.Clock != e.Clock {
		t.Fatalf("after reopen head=%v@%d,%v, want %s@%d", got.ID, got.Clock, err, e.ID, e.Clock)
	}
	e2, err := l2.Append(ctxT(t), newRec(t, "th_r", "agent.step", map[string]any{"a": 2}))
	if err != nil || e2.Record.Header.Prev != e.ID {
		t.Fatalf("append after reopen: %v, prev %s", err, e2.Record.Header.Prev)
	}
}

// Open provisions the stream once, with what the log depends on, and a
// second Open of the same directory changes nothing.
func TestProvision(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	ctx := ctxT(t)
	s, err := l.c.JS.Stream(ctx, l.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowDirect || !cfg.AllowAtomicPublish || cfg.DenyDelete || cfg.DenyPurge || cfg.Subjects[0] != "spl.rec.>" ||
		cfg.Duplicates != DuplicateWindow {
		t.Fatalf("stream config %+v", cfg)
	}
	created := s.CachedInfo().Created
	l.Close()
	l2 := openTest(t, dir)
	s2, err := l2.c.JS.Stream(ctx, l2.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if !s2.CachedInfo().Created.Equal(created) {
		t.Fatalf("stream re-created on second open")
	}
}

// A stream made with the server's default de-duplication window (stores
// from before the log set its own) is brought down to DuplicateWindow on
// open, keeping its records: with the default, every open reloads what
// was appended in the last two minutes.
func TestProvisionShrinksDuplicateWindow(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	ctx := ctxT(t)
	e, err := l.Append(ctx, newRec(t, "th_dw", "agent.step", map[string]any{"n": 1}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.c.JS.Stream(ctx, l.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	old := s.CachedInfo().Config
	old.Duplicates = 2 * time.Minute
	if _, err := l.c.JS.UpdateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	l.Close()

	l2 := openTest(t, dir)
	s2, err := l2.c.JS.Stream(ctx, l2.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.CachedInfo().Config.Duplicates; got != DuplicateWindow {
		t.Fatalf("duplicate window after open: %v, want %v", got, DuplicateWindow)
	}
	got, err := l2.Head(ctx, "th_dw")
	if err != nil || got.ID != e.ID {
		t.Fatalf("head after open: %v, %v; want %s", got.ID, err, e.ID)
	}
}

// A process that joined another's embedded server takes it over when the
// serving process closes, and goes on appending.
func TestJoinedProcessTakesOver(t *testing.T) {
	dir := t.TempDir()
	owner := openTest(t, dir)
	joined := openTest(t, dir)
	if joined.c.Serving() {
		t.Fatalf("second Log on a directory started its own server")
	}
	if _, err := joined.Append(ctxT(t), newRec(t, "th_to", "agent.step", map[string]any{"n": 1})); err != nil {
		t.Fatal(err)
	}
	owner.c.SetLinger(10 * time.Millisecond)
	owner.Close()
	e, err := joined.Append(ctxT(t), newRec(t, "th_to", "agent.step", map[string]any{"n": 2}))
	if err != nil {
		t.Fatalf("append after the owner left: %v", err)
	}
	if !joined.c.Serving() {
		t.Fatalf("joined process did not take the server over")
	}
	if got := len(chain(t, joined, "th_to")); got != 2 || e.Clock != 2 {
		t.Fatalf("thread has %d records, last clock %d; want 2, 2", got, e.Clock)
	}
}

// Garbage published onto a thread's subject behind spl's back does not
// block the thread: the next append expects the garbage's clock and chains
// on the last record.
func TestGarbageDoesNotBlockThread(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	first, err := l.Append(ctx, newRec(t, "th_g", "agent.step", map[string]any{"n": 1}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.JS.Publish(ctx, RecordSubject("th_g", "agent.step"), []byte("not a record")); err != nil {
		t.Fatal(err)
	}
	l.w.heads = map[string]head{} // as a fresh process would
	next, err := l.Append(ctx, newRec(t, "th_g", "agent.step", map[string]any{"n": 2}))
	if err != nil {
		t.Fatalf("append after garbage: %v", err)
	}
	if next.Record.Header.Prev != first.ID || next.Clock != first.Clock+2 {
		t.Fatalf("appended at %d with prev %s; want clock %d, prev %s", next.Clock, next.Record.Header.Prev, first.Clock+2, first.ID)
	}
	rep, err := l.Verify(ctx, "th_g")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Corrupt) != 1 || len(rep.Missing) != 0 || rep.Checked != 2 {
		t.Fatalf("verify %+v, want the garbage alone reported", rep)
	}
}

// The last records of a thread are found by walking its chain back, and
// when a record on the way is erased, by scanning instead: same answer.
func TestTailAcrossErasure(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	es := interleaved(t, l, "th_w", "th_other", 12)
	got, err := l.Tail(ctx, "th_w", 5)
	if err != nil || len(got) != 5 || got[0].ID != es[7].ID || got[4].ID != es[11].ID {
		t.Fatalf("tail by chain: %d records, %v", len(got), err)
	}
	if got[1].Record.Header.Prev != got[0].ID {
		t.Fatalf("tail not in chain order")
	}
	if _, err := l.Erase(ctx, "th_w", []records.ID{es[9].ID}, "r", actor); err != nil {
		t.Fatal(err)
	}
	got, err = l.Tail(ctx, "th_w", 5)
	if err != nil || len(got) != 5 {
		t.Fatalf("tail after erasure: %d records, %v", len(got), err)
	}
	want := []records.ID{es[8].ID, es[10].ID, es[11].ID}
	for i, id := range want {
		if got[i+1].ID != id {
			t.Fatalf("tail[%d]=%s, want %s", i+1, got[i+1].ID, id)
		}
	}
	if got[4].Record.Header.Kind != records.KindErasure {
		t.Fatalf("the erasure record is not last")
	}
}

// PublishBatch stores all of a batch or none: a failed expectation in it
// is ErrExpectation and leaves the stream as it was.
func TestPublishBatch(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	msgs := func(expect string) []*nats.Msg {
		var ms []*nats.Msg
		for i := range 3 {
			m := nats.NewMsg(fmt.Sprintf("spl.rec.raw%d.k", i))
			m.Data = []byte("x")
			if i == 1 && expect != "" {
				m.Header.Set(hdrExpectSubjSeq, expect)
			}
			ms = append(ms, m)
		}
		return ms
	}
	first, err := natsio.PublishBatch(ctx, l.c.NC, msgs(""))
	if err != nil || first != 1 {
		t.Fatalf("PublishBatch=%d, %v; want 1", first, err)
	}
	if _, err := natsio.PublishBatch(ctx, l.c.NC, msgs("7")); !errors.Is(err, ErrExpectation) {
		t.Fatalf("batch with a failed expectation: err=%v, want ErrExpectation", err)
	}
	if last, err := l.LastClock(ctx); err != nil || last != 3 {
		t.Fatalf("last clock=%d, %v after a refused batch; want 3", last, err)
	}
}
