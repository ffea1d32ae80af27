package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/projections/fold"
	"github.com/spl-dev/spl/records"
)

const actor = "did:sync:agent:test"

func openLog(t testing.TB, dir string) *log.Log {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := natsio.Dial(ctx, natsio.Options{Dir: dir, Linger: time.Second, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	l, err := log.On(ctx, c, log.Options{})
	if err != nil {
		c.Close()
		t.Fatalf("log.On: %v", err)
	}
	conns.Store(l, c)
	t.Cleanup(func() {
		l.Close()
		c.Close()
	})
	return l
}

// conns holds the connection each test log is open on.
var conns sync.Map // *log.Log → *natsio.Conn

// connOf returns the connection openLog opened l on.
func connOf(l *log.Log) *natsio.Conn {
	c, _ := conns.Load(l)
	return c.(*natsio.Conn)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newRuntime(t testing.TB, l *log.Log, opts Options) *Runtime {
	t.Helper()
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 600 * time.Millisecond
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	r, err := New(ctxT(t), connOf(l), l, Index(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// appender appends records to a log for tests.
type appender struct {
	t  testing.TB
	l  *log.Log
	ts int64
}

// steps appends n steps round-robin over three threads, and a checkpoint
// after steps 0, 4, 8 and so on.
func (a *appender) steps(n int) {
	for i := range n {
		a.add(fmt.Sprintf("th_%d", i%3), "agent.step", nil)
		if i%4 == 0 {
			a.checkpoint(fmt.Sprintf("th_%d", i%3), fmt.Sprintf("cp %d", i))
		}
	}
}

func (a *appender) add(thread, kind string, body any) log.Entry {
	a.t.Helper()
	act := records.ActKnow
	if kind == records.KindCheckpoint {
		act = records.ActLearn
	}
	if body == nil {
		body = map[string]any{"n": a.ts}
	}
	a.ts++
	r, err := records.New(act, kind, thread, actor, time.UnixMilli(1_700_000_000_000+a.ts), body)
	if err != nil {
		a.t.Fatalf("records.New: %v", err)
	}
	e, err := a.l.Append(ctxT(a.t), r)
	if err != nil {
		a.t.Fatalf("Append: %v", err)
	}
	return e
}

func (a *appender) checkpoint(thread, summary string) log.Entry {
	return a.add(thread, records.KindCheckpoint, &records.Checkpoint{Summary: summary, Learnings: []string{"l"}})
}

func (a *appender) erase(thread string, es ...log.Entry) {
	a.t.Helper()
	ids := make([]records.ID, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	if _, err := a.l.Erase(ctxT(a.t), thread, ids, "test", actor); err != nil {
		a.t.Fatalf("Erase: %v", err)
	}
}

// models returns every value of the Index models in KV, "model/key" → value.
func models(t testing.TB, r *Runtime) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	for _, m := range r.fold.Models() {
		vals, err := r.store.dump(ctxT(t), m)
		if err != nil {
			t.Fatalf("dump %s: %v", m, err)
		}
		for k, v := range vals {
			out[m+"/"+k] = v
		}
	}
	return out
}

// entries reads the whole log, as a rebuild would see it.
func entries(t testing.TB, l *log.Log) []log.Entry {
	t.Helper()
	var out []log.Entry
	end, err := l.LastClock(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for c := uint64(1); c <= end; c++ {
		e, err := l.At(ctxT(t), c)
		if errors.Is(err, log.ErrNotFound) || errors.Is(err, records.ErrCorrupt) {
			continue
		}
		if err != nil {
			t.Fatalf("At %d: %v", c, err)
		}
		out = append(out, e)
	}
	return out
}

// reference folds the log in memory, with the log as history.
func reference(t testing.TB, r *Runtime) map[string][]byte {
	t.Helper()
	st, err := fold.FoldMemory(ctxT(t), r.fold, r.hist, entries(t, r.log), 7)
	if err != nil {
		t.Fatalf("fold.FoldMemory: %v", err)
	}
	out := make(map[string][]byte)
	for k, v := range st.Dump() {
		out[k.Model+"/"+k.Key] = v
	}
	return out
}

// sameModels fails the test unless a and b hold the same keys with the
// same bytes.
func sameModels(t testing.TB, what string, a, b map[string][]byte) {
	t.Helper()
	var diffs []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: only in the first: %s", k, v))
		} else if !bytes.Equal(v, w) {
			diffs = append(diffs, fmt.Sprintf("%s:\n  %s\n  %s", k, v, w))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: only in the second: %s", k, v))
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 0 {
		t.Fatalf("%s: %d values differ:\n%s", what, len(diffs), strings.Join(diffs, "\n"))
	}
}

func storedClock(t testing.TB, r *Runtime) uint64 {
	t.Helper()
	p, _, err := r.readPosition(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return p.Clock
}

func TestCatchUpMatchesMemoryFold(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	var cps []log.Entry
	for i := range 30 {
		th := fmt.Sprintf("th_%d", i%4)
		a.add(th, "agent.step", nil)
		if i%3 == 0 {
			cps = append(cps, a.checkpoint(th, fmt.Sprintf("summary %d", i)))
		}
	}
	a.add("research/vector db", "agent.note", nil)
	a.erase("th_0", cps[0], cps[4]) // the first record, a checkpoint in the middle
	r := newRuntime(t, l, Options{MaxBatch: 5})
	end, _ := l.LastClock(ctxT(t))
	if err := r.CatchUp(ctxT(t), end); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	if got, want := storedClock(t, r), end; got != want {
		t.Fatalf("position=%d, want %d", got, want)
	}
	sameModels(t, "KV vs memory", models(t, r), reference(t, r))
}

// halfwayLog returns a log of 20 steps, its appender, and a runtime of
// Index caught up to clock 10.
func halfwayLog(t *testing.T) (*log.Log, *appender, *Runtime) {
	t.Helper()
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	a.steps(20)
	r := newRuntime(t, l, Options{})
	if err := r.CatchUp(ctxT(t), 10); err != nil {
		t.Fatal(err)
	}
	return l, a, r
}

// A crash between storing the models and storing the position: the next
// projector applies the batch again, and nothing changes.
func TestCrashBeforePositionChangesNothing(t *testing.T) {
	l, a, r := halfwayLog(t)
	before := storedClock(t, r)
	beforeModels := models(t, r)
	es := entries(t, l)
	a.erase(es[4].Record.Header.Thread, es[4])
	end, _ := l.LastClock(ctxT(t))

	crashing := newRuntime(t, l, Options{})
	if err := crashingCatchUp(t, crashing, end); !errors.Is(err, errCrash) {
		t.Fatalf("CatchUp with a crash: err=%v, want errCrash", err)
	}
	if got, want := storedClock(t, r), before; got != want {
		t.Fatalf("position after the crash=%d, want %d", got, want)
	}
	afterCrash := models(t, r)

	restarted := newRuntime(t, l, Options{})
	if err := restarted.CatchUp(ctxT(t), end); err != nil {
		t.Fatal(err)
	}
	if got, want := storedClock(t, r), end; got != want {
		t.Fatalf("position=%d, want %d", got, want)
	}
	// The crash left models stored ahead of the position (how far ahead
	// depends on how the consumer batched the entries); the replay applies
	// those entries again, and the result is the fold of the log.
	if reflect.DeepEqual(afterCrash, beforeModels) {
		t.Fatalf("the crashing runtime stored no models ahead of the position: the test proves nothing")
	}
	sameModels(t, "KV vs memory", models(t, r), reference(t, r))
}

// Read models ahead of their log (the log lost its tail, as a power loss
// before the embedded writer's fsync can make it, while KV kept its
// writes): the next projector rebuilds instead of trusting them.
func TestPositionPastEndOfLogRebuilds(t *testing.T) {
	l, _, r := halfwayLog(t)
	end, _ := l.LastClock(ctxT(t))
	// The models hold the first 10 clocks; the position claims far more
	// than the log has.
	p, rev, err := r.readPosition(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Clock = end + 100
	if _, err := r.writePosition(ctxT(t), p, rev, "test"); err != nil {
		t.Fatal(err)
	}
	var logged []string
	next := newRuntime(t, l, Options{Logf: func(f string, args ...any) { logged = append(logged, fmt.Sprintf(f, args...)) }})
	if err := next.CatchUp(ctxT(t), end); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	if got := storedClock(t, next); got != end {
		t.Fatalf("position=%d, want the end of the log %d", got, end)
	}
	sameModels(t, "KV vs memory", models(t, next), reference(t, next))
	if len(logged) == 0 || !strings.Contains(logged[0], "past the end of the log") {
		t.Fatalf("logged %q, want the rebuild said", logged)
	}
}

func TestCorruptMessageSkippedAndCounted(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	a.add("th_a", "agent.step", nil)
	if err := connOf(l).NC.Publish("spl.rec.x.y", []byte("not a record")); err != nil {
		t.Fatal(err)
	}
	if err := connOf(l).NC.Flush(); err != nil {
		t.Fatal(err)
	}
	// The garbage lands before the next append, which waits for its ack.
	a.add("th_a", "agent.step", nil)
	r := newRuntime(t, l, Options{})
	end, _ := l.LastClock(ctxT(t))
	if got, want := end, uint64(3); got != want {
		t.Fatalf("log clock=%d, want %d", got, want)
	}
	if err := r.CatchUp(ctxT(t), end); err != nil {
		t.Fatal(err)
	}
	st, err := r.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Corrupt, uint64(1); got != want {
		t.Fatalf("corrupt=%d, want %d", got, want)
	}
	if got, want := st.LastCorrupt, uint64(2); got != want {
		t.Fatalf("last corrupt=%d, want %d", got, want)
	}
	if got, want := st.Clock, uint64(3); got != want {
		t.Fatalf("clock=%d, want %d", got, want)
	}
	th, err := NewReader(connOf(l), l).Thread(ctxT(t), "th_a")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := th.Records, uint64(2); got != want {
		t.Fatalf("records=%d, want %d", got, want)
	}
	if _, err := NewReader(connOf(l), l).Thread(ctxT(t), "x"); !errors.Is(err, log.ErrNotFound) {
		t.Fatalf("thread x: err=%v, want ErrNotFound", err)
	}
}

func TestStandbyTakesOver(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	ra := newRuntime(t, l, Options{Holder: "a"})
	rb := newRuntime(t, l, Options{Holder: "b"})
	ctxA, stopA := context.WithCancel(ctxT(t))
	ctxB, stopB := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	wg.Add(2)
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() { defer wg.Done(); defer close(doneA); ra.Run(ctxA) }()
	go func() { defer wg.Done(); defer close(doneB); rb.Run(ctxB) }()
	defer func() { stopA(); stopB(); wg.Wait() }()

	e := a.add("th_a", "agent.step", nil)
	wctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	if err := ra.Wait(wctx, e.Clock); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	st, err := ra.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	active, standby, stopActive := "a", rb, stopA
	if strings.HasPrefix(st.Holder, "b#") {
		active, standby, stopActive = "b", ra, stopB
	} else if !strings.HasPrefix(st.Holder, "a#") {
		t.Fatalf("holder=%q, want a# or b#", st.Holder)
	}
	stopActive()
	if active == "a" {
		<-doneA
	} else {
		<-doneB
	}
	e = a.add("th_a", "agent.step", nil)
	if err := standby.Wait(wctx, e.Clock); err != nil {
		t.Fatalf("Wait after the active projector stopped: %v", err)
	}
	// The standby's Run takes the lease over; a Wait may have caught up
	// by itself first (no holder), so poll for the takeover.
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err = standby.Status(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if st.Holder != "" && !strings.HasPrefix(st.Holder, active+"#") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("holder=%q 15s after %s stopped, want the standby", st.Holder, active)
		}
		time.Sleep(50 * time.Millisecond)
	}
	th, err := NewReader(connOf(l), l).Thread(ctxT(t), "th_a")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := th.Records, uint64(2); got != want {
		t.Fatalf("records=%d, want %d", got, want)
	}
	stopA()
	stopB()
}

// A standby takes over a projector that died without giving its lease
// back, once the lease expires.
func TestStandbyTakesOverExpiredLease(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	r := newRuntime(t, l, Options{Holder: "b", LeaseTTL: 300 * time.Millisecond})
	dead := r.newLease()
	dead.holder = "dead"
	if ok, _, err := dead.acquire(ctxT(t)); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	e := a.add("th_a", "agent.step", nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer wcancel()
	start := time.Now()
	if err := r.Wait(wctx, e.Clock); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("took over after %v, before the lease expired", el)
	}
}

// A wait that times out says who holds the projection and how far it got.
func TestWaitTimesOutWithClearError(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	r := newRuntime(t, l, Options{LeaseTTL: 10 * time.Second})
	a.steps(5)
	applied, err := l.LastClock(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CatchUp(ctxT(t), applied); err != nil {
		t.Fatal(err)
	}
	// Another process holds the lease and applies nothing more.
	other := r.newLease()
	other.holder = "stuck"
	if ok, _, err := other.acquire(ctxT(t)); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	e := a.add("th_a", "agent.step", nil)
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	err = r.Wait(ctx, e.Clock)
	var be *BehindError
	if !errors.As(err, &be) || !errors.Is(err, ErrBehind) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: err=%v, want a *BehindError wrapping ErrBehind and DeadlineExceeded", err)
	}
	if got, want := be.Holder, "stuck"; got != want {
		t.Fatalf("holder=%q, want %q", got, want)
	}
	if be.Clock != applied {
		t.Fatalf("BehindError at clock %d, want %d (where the projection stopped)", be.Clock, applied)
	}
	if want := fmt.Sprintf("at clock %d,", applied); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if got, want := be.Want, e.Clock; got != want {
		t.Fatalf("want=%d, want %d", got, want)
	}
	if !strings.Contains(err.Error(), "projector stuck") {
		t.Fatalf("error %q does not name the projector", err)
	}
	// Without a projector, the wait catches up itself.
	other.release(ctxT(t))
	if err := r.Wait(ctxT(t), e.Clock); err != nil {
		t.Fatalf("Wait without a projector: %v", err)
	}
	// WaitApplied says how far the projection got: past the clock asked.
	if got, err := r.WaitApplied(ctxT(t), 1); err != nil || got != e.Clock {
		t.Fatalf("WaitApplied(1)=%d, %v; want %d", got, err, e.Clock)
	}
}

func TestWaitPassesDeletedTail(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	a.add("th_a", "agent.step", nil)
	r := newRuntime(t, l, Options{})
	if err := r.CatchUp(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	// The last message of the log goes (as erased records do): a wait
	// for its clock must still end.
	e := a.add("th_b", "agent.step", nil)
	st, err := connOf(l).JS.Stream(ctxT(t), l.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctxT(t), e.Clock); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	if err := r.Wait(ctx, e.Clock); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

// The proof of the projection: after a run that interleaves appends,
// erasures (the log deletes the erased records at once, sometimes before
// the projector saw them), retention records and erasures, projector
// restarts and a crash, the live models, a fold of the log in memory and a
// rebuild are the same, byte for byte.
func TestRebuildIsIdenticalToLive(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	var r *Runtime
	var stop func()
	start := func() {
		r = newRuntime(t, l, Options{MaxBatch: 16})
		ctx, cancel := context.WithCancel(ctxT(t))
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		stop = func() { cancel(); <-done }
	}
	caughtUp := func() {
		t.Helper()
		end, err := l.LastClock(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
		defer cancel()
		if err := r.Wait(ctx, end); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
	threads := []string{"th_a", "th_b", "th_c", "research/vector db", "th_e"}
	cps := make(map[string][]log.Entry)
	firsts := make(map[string]log.Entry)
	start()
	for round := range 6 {
		for i := range 12 {
			th := threads[(round+i)%len(threads)]
			e := a.add(th, "agent.step", nil)
			if _, ok := firsts[th]; !ok {
				firsts[th] = e
			}
			if i%2 == 0 {
				cps[th] = append(cps[th], a.checkpoint(th, fmt.Sprintf("round %d step %d", round, i)))
			}
		}
		if round == 1 {
			a.add("th_a", records.KindRetention, &records.Retention{Scope: records.ScopeThread, KeepLast: 2})
		}
		// Retention: keep the last two checkpoints of th_a.
		if n := len(cps["th_a"]); n > 2 {
			a.erase("th_a", cps["th_a"][:n-2]...)
			cps["th_a"] = cps["th_a"][n-2:]
		}
		switch round {
		case 1:
			a.erase("th_b", firsts["th_b"]) // the first record of a thread
		case 2:
			stop()                                           // erasures while no projector runs: it never sees the records
			a.erase("th_c", cps["th_c"][len(cps["th_c"])-1]) // the latest checkpoint
			cps["th_c"] = cps["th_c"][:len(cps["th_c"])-1]
			e := a.add("th_e", "agent.step", nil)
			a.erase("th_e", e) // the last record
			start()
		case 3:
			caughtUp()
			stop()
			crashing := newRuntime(t, l, Options{MaxBatch: 8})
			a.erase("research/vector db", cps["research/vector db"]...)
			cps["research/vector db"] = nil
			a.add("research/vector db", "agent.note", nil)
			end, _ := l.LastClock(ctxT(t))
			if err := crashingCatchUp(t, crashing, end); !errors.Is(err, errCrash) {
				t.Fatalf("CatchUp with a crash: %v", err)
			}
			start()
		case 4:
			stop()
			start()
		}
	}
	caughtUp()
	live := models(t, r)
	if len(live) < 10 {
		t.Fatalf("only %d values in the live models", len(live))
	}
	sameModels(t, "live vs a fold of the log in memory", live, reference(t, r))

	// Rebuild in another runtime while the first one runs: it hands the
	// lease over and takes it back after.
	rb := newRuntime(t, l, Options{MaxBatch: 10, MaxHeld: 1}) // a store, and progress, after every batch
	var progress [][2]uint64
	if err := rb.Rebuild(ctxT(t), func(done, total uint64) { progress = append(progress, [2]uint64{done, total}) }); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	end, _ := l.LastClock(ctxT(t))
	if len(progress) < 3 {
		t.Fatalf("progress calls: %v, want several", progress)
	}
	for i, p := range progress {
		if p[0] > p[1] || (i > 0 && p[0] < progress[i-1][0]) {
			t.Fatalf("progress %v at call %d of %v", p, i, progress)
		}
	}
	if got, want := progress[len(progress)-1], [2]uint64{end, end}; got != want {
		t.Fatalf("last progress=%v, want %v", got, want)
	}
	sameModels(t, "live vs rebuilt", live, models(t, r))
	// The first runtime runs the projection again.
	var st Status
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if st, err = r.Status(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if st.Holder != "" {
			break
		}
	}
	if !strings.HasPrefix(st.Holder, r.Holder()) || st.RebuildTo != 0 || st.Lag != 0 {
		t.Fatalf("status after the rebuild: %+v, want held by %s", st, r.Holder())
	}
	stop()
}

// stepsLog returns a log of n records spread in turn over threads th_0,
// th_1, ….
func stepsLog(t *testing.T, n, threads int) *log.Log {
	t.Helper()
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	for i := range n {
		a.add(fmt.Sprintf("th_%d", i%threads), "agent.step", nil)
	}
	return l
}

// An interrupted rebuild is resumed by the next projector, not restarted.
func TestRebuildResumes(t *testing.T) {
	l := stepsLog(t, 40, 5)
	r := newRuntime(t, l, Options{MaxBatch: 5, MaxHeld: 1}) // a store, and progress, after every batch
	if err := r.CatchUp(ctxT(t), 40); err != nil {
		t.Fatal(err)
	}
	live := models(t, r)
	ctx, cancel := context.WithCancel(ctxT(t))
	err := r.Rebuild(ctx, func(done, total uint64) {
		if done >= 10 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Rebuild: err=%v, want context.Canceled", err)
	}
	st, err := r.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.RebuildTo != 40 || st.Clock < 10 || st.Clock >= 40 {
		t.Fatalf("status after the interruption: %+v", st)
	}
	var first uint64
	if err := r.Rebuild(ctxT(t), func(done, total uint64) {
		if first == 0 {
			first = done
		}
	}); err != nil {
		t.Fatal(err)
	}
	if first < 10 {
		t.Fatalf("resumed rebuild reported %d first, want where it stopped (≥10)", first)
	}
	sameModels(t, "live vs rebuilt", live, models(t, r))
}

// kvWrites returns how many writes the bucket of model has taken.
func kvWrites(t *testing.T, r *Runtime, model string) uint64 {
	t.Helper()
	s, err := r.conn.JS.Stream(ctxT(t), r.store.kvStream(model))
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

// A projector that is behind stores the changes of many batches together:
// a value changed by each of them is written once, not once a batch.
func TestBehindStoresBatchesTogether(t *testing.T) {
	l := stepsLog(t, 400, 4)
	r := newRuntime(t, l, Options{MaxBatch: 10})
	before := kvWrites(t, r, ModelThreads)
	if err := r.CatchUp(ctxT(t), 400); err != nil {
		t.Fatal(err)
	}
	// 40 batches of 10 records over 4 threads: storing every batch writes
	// each thread 40 times.
	if got := kvWrites(t, r, ModelThreads) - before; got < 4 || got > 40 {
		t.Fatalf("%d writes of the threads model for 4 threads, want 4 to 40", got)
	}
	sameModels(t, "caught up vs a fold of the log in memory", models(t, r), reference(t, r))
}

// A projector that has caught up stores every batch as it comes, without
// waiting for more, while records keep coming.
func TestCaughtUpStoresAtOnce(t *testing.T) {
	l := openLog(t, "")
	r := newRuntime(t, l, Options{MaxHold: time.Hour})
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// Appends every few milliseconds: the projector is never idle long
	// enough to store on its idle tick.
	stop := make(chan struct{})
	appended := make(chan uint64, 1)
	go func() {
		defer close(appended)
		for i := 0; ; i++ {
			rec, err := records.New(records.ActKnow, "agent.step", "th_busy", actor, time.Now(), map[string]any{"n": i})
			if err != nil {
				t.Errorf("records.New: %v", err)
				return
			}
			e, err := l.Append(ctx, rec)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("Append: %v", err)
				}
				return
			}
			if i == 20 {
				appended <- e.Clock
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	defer func() {
		close(stop)
		for range appended {
		}
	}()
	clock, ok := <-appended
	if !ok {
		t.Fatal("the appender stopped")
	}
	wctx, wcancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer wcancel()
	if err := r.Wait(wctx, clock); err != nil {
		t.Fatalf("Wait for clock %d while records keep coming: %v", clock, err)
	}
}
