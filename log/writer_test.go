package log

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

// pause holds the writer in Options.Observe once armed: after it sent a
// group commit, before it answers that group's callers. Appends submitted
// meanwhile wait in the queue and go out together as the next group.
type pause struct {
	armed   atomic.Bool
	parked  chan struct{}
	release chan struct{}
	once    sync.Once
	each    atomic.Pointer[func(BatchStats)] // called on every report, when set
}

// openPaused opens a log whose writer a pause steers. With noSync the
// writer sends every group as one atomic batch; without, it fsyncs itself
// and sends lone records as plain publishes (landEach).
func openPaused(t *testing.T, noSync bool) (*Log, *pause) {
	t.Helper()
	p := &pause{parked: make(chan struct{}, 1), release: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Open(ctx, Options{Dir: t.TempDir(), Linger: time.Second, NoSync: noSync, Observe: p.observe})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(p.resume) // runs first: Close waits for the writer
	return l, p
}

func (p *pause) observe(st BatchStats) {
	if f := p.each.Load(); f != nil {
		(*f)(st)
	}
	if p.armed.CompareAndSwap(true, false) {
		p.parked <- struct{}{}
		<-p.release
	}
}

// hold sends a record of its own thread and returns once the writer is
// parked after sending it.
func (p *pause) hold(t *testing.T, l *Log) {
	t.Helper()
	p.armed.Store(true)
	if _, err := l.Submit(ctxT(t), newRec(t, "th_hold", "agent.step", map[string]any{"hold": true})); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	select {
	case <-p.parked:
	case <-time.After(30 * time.Second):
		t.Fatal("writer never sent the holding record")
	}
}

func (p *pause) resume() { p.once.Do(func() { close(p.release) }) }

// wait returns the outcome of pd, failing the test if it never comes.
func wait(t *testing.T, pd *Pending) (Entry, error) {
	t.Helper()
	select {
	case <-pd.Done():
		return pd.Wait(context.Background())
	case <-time.After(30 * time.Second):
		t.Fatal("append never answered")
		return Entry{}, nil
	}
}

// After Close, every append is refused with ErrClosed; none is queued for
// a writer that has stopped.
func TestAppendAfterClose(t *testing.T) {
	l := openTest(t, "")
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 50 {
		if _, err := l.Submit(ctx, newRec(t, "th_closed", "agent.step", map[string]any{"i": i})); !errors.Is(err, ErrClosed) {
			t.Fatalf("Submit %d after Close: err=%v, want ErrClosed", i, err)
		}
		if _, err := l.Append(ctx, newRec(t, "th_closed", "agent.step", map[string]any{"i": i})); !errors.Is(err, ErrClosed) {
			t.Fatalf("Append %d after Close: err=%v, want ErrClosed", i, err)
		}
	}
}

// Appends racing Close each land or fail with ErrClosed, and every one is
// answered: Close drains all that joined the queue.
func TestAppendsRacingClose(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	const appenders = 8
	var landed atomic.Int64
	errs := make(chan error, appenders)
	for a := range appenders {
		go func() {
			for i := 0; ; i++ {
				pd, err := l.Submit(ctx, newRec(t, fmt.Sprintf("th_race_%d", a), "agent.step", map[string]any{"i": i}))
				if errors.Is(err, ErrClosed) {
					errs <- nil
					return
				}
				if err != nil {
					errs <- fmt.Errorf("Submit %d: %w", i, err)
					return
				}
				select {
				case <-pd.Done():
				case <-time.After(10 * time.Second):
					errs <- fmt.Errorf("append %d: never answered", i)
					return
				}
				_, err = pd.Wait(ctx)
				switch {
				case err == nil:
					landed.Add(1)
				case errors.Is(err, ErrClosed):
					errs <- nil
					return
				default:
					errs <- fmt.Errorf("append %d: %w", i, err)
					return
				}
			}
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); landed.Load() < 50; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d appends landed before Close", landed.Load())
		}
	}
	l.Close()
	for range appenders {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// One caller's context, cancelled while the writer works for its group,
// fails that caller alone: the writer's reads for the group are bounded by
// the log's timeout, and the other callers land. Here the group is sent on
// a stale thread head (a record landed behind the writer's back), and the
// first caller cancels before the writer reads the head again.
func TestCancelledCallerLeavesGroup(t *testing.T) {
	bothModes(t, func(t *testing.T, l *Log, p *pause) {
		ctx := ctxT(t)
		base, err := l.Append(ctx, newRec(t, "th_group", "agent.step", map[string]any{"n": 0}))
		if err != nil {
			t.Fatal(err)
		}
		behind := newRec(t, "th_group", "agent.step", map[string]any{"n": 1}).WithPrev(base.ID)
		if _, err := l.c.JS.PublishMsg(ctx, recordMsg(t, behind)); err != nil {
			t.Fatal(err)
		}

		p.hold(t, l)
		ctxA, cancelA := context.WithTimeout(context.Background(), time.Hour)
		defer cancelA()
		a, err := l.Submit(ctxA, newRec(t, "th_group", "agent.step", map[string]any{"n": "a"}))
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.Submit(context.Background(), newRec(t, "th_group", "agent.step", map[string]any{"n": "b"}))
		if err != nil {
			t.Fatal(err)
		}
		cancelOnStale := func(st BatchStats) {
			if errors.Is(st.Err, ErrExpectation) {
				cancelA()
			}
		}
		p.each.Store(&cancelOnStale)
		p.resume()

		if _, err := wait(t, a); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled append: err=%v, want context.Canceled", err)
		}
		e, err := wait(t, b)
		if err != nil {
			t.Fatalf("other append of the group: %v", err)
		}
		es := chain(t, l, "th_group")
		if got, want := len(es), 3; got != want {
			t.Fatalf("thread holds %d records, want %d", got, want)
		}
		if es[2].ID != e.ID {
			t.Fatalf("last record is %s, want the other append %s", es[2].ID, e.ID)
		}
	})
}

// recordOfSize returns a record of thread whose unchained envelope is n bytes.
func recordOfSize(t *testing.T, thread string, n int) *records.Record {
	t.Helper()
	pad := n - 200
	for {
		fill := make([]byte, pad) // random: it does not compress
		_, _ = rand.Read(fill)
		rec := newRec(t, thread, "agent.step", map[string]any{"pad": fill})
		data, err := rec.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if len(data) == n {
			return rec
		}
		pad += n - len(data)
	}
}

// At the message limit: a record that fits records.MaxEncodedSize
// unchained but not once the writer sets its prev is stored with its body
// outside, and one that fits once chained inline; both read back whole.
func TestRecordAtTheMessageLimit(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	for _, c := range []struct {
		size    int
		outside bool
	}{{records.MaxEncodedSize, true}, {records.MaxEncodedSize - 64, false}} {
		rec := recordOfSize(t, "th_big", c.size)
		e, err := l.Append(ctx, rec)
		if err != nil {
			t.Fatalf("Append(%d bytes unchained): %v", c.size, err)
		}
		m, err := l.get(ctx, getRequest{Seq: e.Clock})
		if err != nil {
			t.Fatal(err)
		}
		if out := !records.Plain(m.data) && keptOutside(m.data); out != c.outside {
			t.Fatalf("%d bytes unchained: stored outside %v, want %v", c.size, out, c.outside)
		}
		got, err := l.At(ctx, e.Clock)
		if err != nil || !bytes.Equal(got.Record.Body, rec.Body) {
			t.Fatalf("%d bytes unchained: read back %d body bytes, %v", c.size, len(got.Record.Body), err)
		}
	}
}

// A record of a group that the writer cannot encode fails alone: the
// others land, and the next record of its thread chains on the one before
// it. (Submit refuses such a record; this one is queued behind its back.)
func TestUnencodableRecordFailsAlone(t *testing.T) {
	bothModes(t, func(t *testing.T, l *Log, p *pause) {
		ctx := ctxT(t)
		p.hold(t, l)
		submit := func(rec *records.Record) *Pending {
			t.Helper()
			pd, err := l.Submit(ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			return pd
		}
		first := submit(newRec(t, "th_mixed", "agent.step", map[string]any{"n": 1}))
		bad := &Pending{rec: recordOfSize(t, "th_mixed", records.MaxEncodedSize), ctx: ctx, done: make(chan struct{})}
		l.w.in <- bad
		next := submit(newRec(t, "th_mixed", "agent.step", map[string]any{"n": 2}))
		other := submit(newRec(t, "th_neighbour", "agent.step", map[string]any{"n": 3}))
		p.resume()

		if _, err := wait(t, bad); !errors.Is(err, records.ErrInvalid) { // not flagged outside by Submit
			t.Errorf("unencodable record: err=%v, want records.ErrInvalid", err)
		}
		for name, pd := range map[string]*Pending{"first": first, "next": next, "other": other} {
			if _, err := wait(t, pd); err != nil {
				t.Errorf("%s append: %v", name, err)
			}
		}
		if got, want := len(chain(t, l, "th_mixed")), 2; got != want {
			t.Fatalf("thread holds %d records, want %d", got, want)
		}
	})
}

// A caller whose context ends after the writer sent its record learns that
// the outcome is unknown (ErrInDoubt), and appending the record again
// returns the stored entry.
func TestContextEndsAfterSend(t *testing.T) {
	l, p := openPaused(t, false)
	ctx := ctxT(t)
	rec := newRec(t, "th_sent", "agent.step", map[string]any{"n": 1})
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.armed.Store(true)
	errc := make(chan error, 1)
	go func() {
		_, err := l.Append(actx, rec)
		errc <- err
	}()
	select {
	case <-p.parked: // the record is sent; its callers not answered yet
	case <-time.After(30 * time.Second):
		t.Fatal("writer never sent the record")
	}
	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("Append did not return when its context ended")
	}
	if !errors.Is(err, ErrInDoubt) || !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "spl/log: ") {
		t.Fatalf("Append: err=%v, want spl/log error wrapping ErrInDoubt and context.Canceled", err)
	}
	p.resume()
	again, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatalf("Append again: %v", err)
	}
	if again.ID != rec.ID() { // the thread's first record: no prev
		t.Fatalf("Append again: id %s, want %s", again.ID, rec.ID())
	}
	if got, want := len(readAll(t, l, "th_sent")), 1; got != want {
		t.Fatalf("thread holds %d records, want %d", got, want)
	}
}

// A caller whose context ends while its record still waits in the queue
// gets the context's error, not ErrInDoubt, and the record is never sent.
func TestContextEndsBeforeSend(t *testing.T) {
	l, p := openPaused(t, false)
	ctx := ctxT(t)
	p.hold(t, l)
	actx, cancel := context.WithCancel(ctx)
	pd, err := l.Submit(actx, newRec(t, "th_unsent", "agent.step", map[string]any{"n": 1}))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = pd.Wait(actx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrInDoubt) || !strings.HasPrefix(err.Error(), "spl/log: append: ") {
		t.Fatalf("Wait: err=%v, want spl/log: append: error wrapping context.Canceled, not ErrInDoubt", err)
	}
	p.resume()
	if _, err := wait(t, pd); !errors.Is(err, context.Canceled) {
		t.Fatalf("append: err=%v, want context.Canceled", err)
	}
	// A later append of the thread has gone through the writer after it.
	if _, err := l.Append(ctx, newRec(t, "th_unsent", "agent.step", map[string]any{"n": 2})); err != nil {
		t.Fatal(err)
	}
	if got, want := len(readAll(t, l, "th_unsent")), 1; got != want {
		t.Fatalf("thread holds %d records, want %d", got, want)
	}
}

// A conditional append lands only right after the clock it names, whoever
// moved the thread, and a refused one leaves nothing behind.
func TestConditionalAppend(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, dir)
	b := openTest(t, dir) // another process on the same directory
	ctx := ctxT(t)
	const th = "th_cond"

	first, err := a.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"n": 1}), 0)
	if err != nil {
		t.Fatalf("on an empty thread: %v", err)
	}
	if _, err := a.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"n": 2}), 0); !errors.Is(err, ErrMoved) {
		t.Fatalf("after 0 on a thread at %d: %v, want ErrMoved", first.Clock, err)
	}
	// b moves the thread: a's head is stale, its expectation old.
	moved, err := b.Append(ctx, newRec(t, th, "agent.step", map[string]any{"n": 3}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"n": 4}), first.Clock); !errors.Is(err, ErrMoved) {
		t.Fatalf("after %d on a thread that b moved to %d: %v, want ErrMoved", first.Clock, moved.Clock, err)
	}
	// b moves it again: a's writer knows the clock before. What a read of
	// the thread says is enough, whatever a's writer knew.
	moved, err = b.Append(ctx, newRec(t, th, "agent.step", map[string]any{"n": 5}))
	if err != nil {
		t.Fatal(err)
	}
	e, err := a.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"n": 6}), moved.Clock)
	if err != nil {
		t.Fatalf("after %d, the thread's last clock: %v", moved.Clock, err)
	}
	if e.Record.Header.Prev != moved.ID {
		t.Fatalf("prev %s, want %s", e.Record.Header.Prev, moved.ID)
	}
	if c, err := b.ThreadClock(ctx, th); err != nil || c != e.Clock {
		t.Fatalf("ThreadClock=%d, %v; want %d", c, err, e.Clock)
	}
	if c, err := b.ThreadClock(ctx, "th_none"); err != nil || c != 0 {
		t.Fatalf("ThreadClock of an empty thread=%d, %v; want 0", c, err)
	}
	if got := len(readAll(t, a, th)); got != 4 {
		t.Fatalf("thread holds %d records, want 4 (the refused appends left nothing)", got)
	}

	// Racing conditional appends on one clock: exactly one lands.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"race": i}), e.Clock)
		}()
	}
	wg.Wait()
	landed := 0
	for _, err := range errs {
		switch {
		case err == nil:
			landed++
		case !errors.Is(err, ErrMoved):
			t.Fatalf("racing append: %v, want ErrMoved or nil", err)
		}
	}
	if landed != 1 {
		t.Fatalf("%d racing conditional appends landed, want 1 (%v)", landed, errs)
	}
	if got := len(readAll(t, a, th)); got != 5 {
		t.Fatalf("thread holds %d records, want 5", got)
	}
}

// ErrMoved says where the thread is: empty, behind the caller's clock, or
// past it.
func TestMovedSaysWhere(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	const th = "th_where"
	try := func(after uint64, want string) {
		t.Helper()
		_, err := l.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"after": after}), after)
		if !errors.Is(err, ErrMoved) || !strings.Contains(err.Error(), want) {
			t.Fatalf("AppendAfter(%d): err=%v, want ErrMoved saying %q", after, err, want)
		}
	}
	try(5, fmt.Sprintf("thread %q is empty, not at clock 5", th))
	e, err := l.Append(ctx, newRec(t, th, "agent.step", map[string]any{"n": 1}))
	if err != nil {
		t.Fatal(err)
	}
	try(e.Clock+10, fmt.Sprintf("is at clock %d, behind clock %d", e.Clock, e.Clock+10))
	try(0, fmt.Sprintf("is at clock %d, past clock 0", e.Clock))
	if got := len(readAll(t, l, th)); got != 1 {
		t.Fatalf("thread holds %d records, want 1", got)
	}
}

// headReads counts the writer's reads of thread's head from the stream
// leader, from now on: each is a message get by last subject.
func headReads(t *testing.T, l *Log, thread string) func() int {
	t.Helper()
	sub, err := l.c.NC.SubscribeSync("$JS.API.STREAM.MSG.GET." + l.opts.Stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := l.c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	n := 0
	return func() int {
		t.Helper()
		// The requests went out before this flush; their copies are
		// queued for sub by the time it returns.
		if err := l.c.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := sub.NextMsg(10 * time.Millisecond)
			if err != nil {
				return n
			}
			var req getRequest
			if json.Unmarshal(m.Data, &req) == nil && req.LastFor == ThreadSubject(thread) {
				n++
			}
		}
	}
}

// A conditional append reads its thread's head from the leader at most
// once: not again right after reading it, nor when the head the writer
// holds is already past the caller's clock (clocks only grow); only a held
// head older than the caller's clock is read again.
func TestConditionalAppendReadsHeadOnce(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, dir)
	b := openTest(t, dir) // another process on the same directory
	ctx := ctxT(t)
	const th = "th_reads"
	first, err := a.Append(ctx, newRec(t, th, "agent.step", map[string]any{"n": 1}))
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.Append(ctx, newRec(t, th, "agent.step", map[string]any{"n": 2}))
	if err != nil {
		t.Fatal(err)
	}

	// b holds no head of th: it reads it once, and refuses.
	reads := headReads(t, b, th)
	if _, err := b.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"n": "b"}), first.Clock); !errors.Is(err, ErrMoved) {
		t.Fatalf("after %d on a thread at %d: %v, want ErrMoved", first.Clock, second.Clock, err)
	}
	if got := reads(); got != 1 {
		t.Errorf("head not held: %d head reads, want 1", got)
	}

	// a holds the head at second.Clock, past the caller's clock: refused
	// without a read.
	reads = headReads(t, a, th)
	if _, err := a.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"n": "a"}), first.Clock); !errors.Is(err, ErrMoved) {
		t.Fatalf("after %d on a thread at %d: %v, want ErrMoved", first.Clock, second.Clock, err)
	}
	if got := reads(); got != 0 {
		t.Errorf("held head newer than the caller's clock: %d head reads, want 0", got)
	}

	// b moves the thread: the head a holds is older than the caller's
	// clock, so a reads it again once, and lands.
	moved, err := b.Append(ctx, newRec(t, th, "agent.step", map[string]any{"n": 3}))
	if err != nil {
		t.Fatal(err)
	}
	reads = headReads(t, a, th)
	e, err := a.AppendAfter(ctx, newRec(t, th, "agent.step", map[string]any{"n": 4}), moved.Clock)
	if err != nil {
		t.Fatalf("after %d, the thread's last clock: %v", moved.Clock, err)
	}
	if e.Record.Header.Prev != moved.ID {
		t.Fatalf("prev %s, want %s", e.Record.Header.Prev, moved.ID)
	}
	if got := reads(); got != 1 {
		t.Errorf("held head older than the caller's clock: %d head reads, want 1", got)
	}
}

// Two conditional appends on the same clock in one group commit: the first
// lands, the second (which would chain on it) is refused.
func TestConditionalAppendsInOneGroup(t *testing.T) {
	bothModes(t, func(t *testing.T, l *Log, p *pause) {
		ctx := ctxT(t)
		base, err := l.Append(ctx, newRec(t, "th_group", "agent.step", map[string]any{"n": 0}))
		if err != nil {
			t.Fatal(err)
		}
		p.hold(t, l)
		var ps []*Pending
		for i := range 2 {
			pd, err := l.submit(ctx, newRec(t, "th_group", "agent.step", map[string]any{"n": i + 1}), true, base.Clock)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, pd)
		}
		p.resume()
		e, err := wait(t, ps[0])
		if err != nil {
			t.Fatalf("first conditional append: %v", err)
		}
		if e.Record.Header.Prev != base.ID {
			t.Fatalf("first conditional append chains on %s, want %s", e.Record.Header.Prev, base.ID)
		}
		// Sent in layers (the embedded log), the second is sealed once the
		// first landed and says where the thread is; in one atomic batch,
		// that a record goes ahead of it.
		if _, err := wait(t, ps[1]); !errors.Is(err, ErrMoved) ||
			!(strings.Contains(err.Error(), "ahead of this one") || strings.Contains(err.Error(), fmt.Sprintf("is at clock %d, past clock %d", e.Clock, base.Clock))) {
			t.Fatalf("second conditional append on the same clock: %v, want ErrMoved saying a record goes ahead of it or where the thread is", err)
		}
		if got := len(readAll(t, l, "th_group")); got != 2 {
			t.Fatalf("thread holds %d records, want 2", got)
		}
	})
}

// Appends queued when Close is called land, also on threads whose head the
// writer has still to read: its reads go on while it drains.
func TestCloseDrainsAppendsToUnseenThreads(t *testing.T) {
	bothModes(t, func(t *testing.T, l *Log, p *pause) {
		ctx := ctxT(t)
		p.hold(t, l)
		var ps []*Pending
		for i := range 3 {
			pd, err := l.Submit(ctx, newRec(t, fmt.Sprintf("th_unseen_%d", i), "agent.step", map[string]any{"n": i}))
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, pd)
		}
		closed := make(chan struct{})
		go func() { defer close(closed); l.Close() }()
		for !l.isClosed() {
			time.Sleep(time.Millisecond)
		}
		p.resume()
		for i, pd := range ps {
			if _, err := wait(t, pd); err != nil {
				t.Fatalf("append %d queued before Close: %v", i, err)
			}
		}
		<-closed
	})
}

// bothModes runs f on a paused log in each of the writer's two ways of
// sending a group: plain publishes and its own fsync, or atomic batches.
func bothModes(t *testing.T, f func(t *testing.T, l *Log, p *pause)) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSync=%v", noSync), func(t *testing.T) {
			l, p := openPaused(t, noSync)
			f(t, l, p)
		})
	}
}

// The embedded log sends a group's records of one thread in layers, each
// once the one it chains on is stored: they land in order and chained,
// beside a lone record and a thread with more records than maxLayers
// (one atomic batch). When another writer appends to the thread between
// two layers, the rest of the thread's records go again on its new head,
// still in order, and nothing is lost or duplicated.
func TestLayersLandInOrder(t *testing.T) {
	l, p := openPaused(t, false)
	other := openTest(t, l.opts.Dir)
	ctx := ctxT(t)
	counts := map[string]int{"th_layered": 5, "th_lone": 1, "th_long": maxLayers + 4}
	raced := false
	l.w.betweenLayers = func(k int) {
		if k == 2 && !raced {
			raced = true
			if _, err := other.Append(ctx, newRec(t, "th_layered", "agent.step", map[string]any{"n": "other"})); err != nil {
				t.Errorf("the other writer's append: %v", err)
			}
		}
	}
	p.hold(t, l)
	var ps []*Pending
	for i := range counts["th_long"] {
		for _, th := range []string{"th_layered", "th_lone", "th_long"} {
			if i >= counts[th] {
				continue
			}
			pd, err := l.Submit(ctx, newRec(t, th, "agent.step", map[string]any{"n": i}))
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, pd)
		}
	}
	p.resume()
	for _, pd := range ps {
		if _, err := wait(t, pd); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	if !raced {
		t.Fatal("the writer sent th_layered in fewer than 3 layers")
	}
	for th, n := range counts {
		var got []any
		for _, e := range chain(t, l, th) { // chained: each prev is the record before
			var b map[string]any
			if err := e.Record.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			got = append(got, b["n"])
		}
		var want []any
		for i := range n {
			if th == "th_layered" && i == 2 {
				want = append(want, "other")
			}
			want = append(want, uint64(i))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s holds %v, want %v", th, got, want)
		}
	}
}
