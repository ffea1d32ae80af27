package log

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func readMarkFile(t *testing.T, dir string) Mark {
	t.Helper()
	var m Mark
	b, err := os.ReadFile(filepath.Join(dir, MarkFile))
	if err != nil {
		t.Fatalf("mark: %v", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("mark: %v", err)
	}
	return m
}

// A deleted stream, recreated empty, is loss; appends to the new stream
// do not raise the mark past it; a purge is loss; an edited mark is
// reported.
func TestMarkReportsLoss(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	l := openTest(t, dir)
	var last Entry
	for i := range 3 {
		e, err := l.Append(ctx, newRec(t, "th_mark", "agent.step", map[string]any{"i": i}))
		if err != nil {
			t.Fatal(err)
		}
		last = e
	}
	if loss, err := l.CheckMark(ctx); loss != nil || err != nil {
		t.Fatalf("CheckMark on a whole log: %v, %v", loss, err)
	}
	l.Close()
	if m := readMarkFile(t, dir); m.Clock != 3 || m.ID != last.ID.String() {
		t.Fatalf("mark after Close = %+v, want clock 3 id %s", m, last.ID)
	}
	if fi, _ := os.Stat(filepath.Join(dir, MarkKeyFile)); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mark key: %v, want mode 0600", fi)
	}

	// Deleted behind the log's back, recreated empty by the next open.
	l = openTest(t, dir)
	if err := l.c.JS.DeleteStream(ctx, l.StreamName()); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openTest(t, dir)
	loss, err := l.CheckMark(ctx)
	if err != nil || loss == nil || loss.From != 1 || loss.To != 3 || !strings.Contains(loss.Reason, "behind") {
		t.Fatalf("CheckMark on a recreated stream: %+v, %v; want loss of clocks 1–3", loss, err)
	}
	rep, err := l.VerifyAll(ctx, nil)
	if err != nil || rep.OK() || rep.Loss == nil {
		t.Fatalf("VerifyAll on a recreated stream: ok=%v loss=%v err=%v; want the loss", rep.OK(), rep.Loss, err)
	}
	// New records past the old mark's clock, put there by a log that
	// keeps no mark (this one refuses them: TestAppendsRefusedBehindMark),
	// do not hide it.
	l.Close()
	nm, err := Open(ctx, Options{Dir: dir, Linger: time.Second, NoMark: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := nm.Append(ctx, newRec(t, "th_new", "agent.step", map[string]any{"i": i})); err != nil {
			t.Fatal(err)
		}
	}
	nm.Close()
	if m := readMarkFile(t, dir); m.Clock != 3 || m.ID != last.ID.String() {
		t.Fatalf("mark after appends to the recreated stream = %+v, want it kept at clock 3", m)
	}
	l = openTest(t, dir)
	if loss, _ := l.CheckMark(ctx); loss == nil || !strings.Contains(loss.Reason, "replaced") {
		t.Fatalf("CheckMark with another record at the mark: %+v, want loss (replaced)", loss)
	}
	l.Close()

	// A purge.
	dir2 := t.TempDir()
	l = openTest(t, dir2)
	if _, err := l.Append(ctx, newRec(t, "th_p", "agent.step", map[string]any{"i": 1})); err != nil {
		t.Fatal(err)
	}
	if err := l.MarkNow(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := l.c.JS.Stream(ctx, l.StreamName())
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if loss, _ := l.CheckMark(ctx); loss == nil || !strings.Contains(loss.Reason, "purged") {
		t.Fatalf("CheckMark after a purge: %+v, want loss (purged)", loss)
	}

	// An edited mark does not verify. The log is closed first: its marker
	// raises the mark after appends in the background, and would write a
	// good mark over the edited one.
	l.Close()
	m := readMarkFile(t, dir2)
	m.Clock = 0
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir2, MarkFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir2)
	if loss, _ := l.CheckMark(ctx); loss == nil || !strings.Contains(loss.Reason, "does not verify") {
		t.Fatalf("CheckMark with an edited mark: %+v, want it reported", loss)
	}
}

// A stream deleted and recreated behind the log's back takes no more
// appends: the first one it stores is answered with the loss, every one
// after it is refused unsent, and so is every append of a log opened on
// it later, until the mark is removed; reads go on throughout.
func TestAppendsRefusedBehindMark(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	l := openTest(t, dir)
	for i := range 3 {
		if _, err := l.Append(ctx, newRec(t, "th_gone", "agent.step", map[string]any{"i": i})); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.c.JS.DeleteStream(ctx, l.StreamName()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.JS.CreateStream(ctx, StreamConfig(l.StreamName(), 1)); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		var loss *MarkLoss
		if !errors.Is(err, ErrAppendsRefused) || !errors.Is(err, ErrLoss) || !errors.As(err, &loss) {
			t.Fatalf("%s: %v; want ErrAppendsRefused with the *MarkLoss", what, err)
		}
	}
	_, err := l.Append(ctx, newRec(t, "th_new", "agent.step", map[string]any{"i": 0}))
	refused("the first append to the recreated stream", err)
	if !strings.Contains(err.Error(), "went back") || !strings.Contains(err.Error(), filepath.Join(dir, MarkFile)) {
		t.Fatalf("the first append's error %q does not say the stream went back and which mark to remove", err)
	}
	_, err = l.Append(ctx, newRec(t, "th_gone", "agent.step", map[string]any{"i": 3}))
	refused("an append after it", err)
	st, err := l.Stats(ctx)
	if err != nil || st.LastClock != 1 {
		t.Fatalf("the recreated stream's last clock = %d (%v), want 1: the refused append was sent", st.LastClock, err)
	}
	l.Close()

	// Opened again: behind the mark, refused before anything is sent.
	l = openTest(t, dir)
	_, err = l.Append(ctx, newRec(t, "th_new", "agent.step", map[string]any{"i": 1}))
	refused("an append of a log opened on the recreated stream", err)
	n := 0
	for _, err := range l.Read(ctx, "th_new") {
		if err != nil {
			t.Fatalf("a read of a log that refuses appends: %v", err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("read %d records of th_new, want the 1 the recreated stream holds", n)
	}
	if st, _ := l.Stats(ctx); st.LastClock != 1 {
		t.Fatalf("last clock %d after a refused append, want 1", st.LastClock)
	}
	l.Close()

	// The operator takes the stream as it is.
	if err := os.Remove(filepath.Join(dir, MarkFile)); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir)
	if e, err := l.Append(ctx, newRec(t, "th_new", "agent.step", map[string]any{"i": 2})); err != nil || e.Clock != 2 {
		t.Fatalf("append once the mark is removed: clock %d, %v; want clock 2", e.Clock, err)
	}
}

// BenchmarkAppendMark measures what the high-water mark costs appends:
// 64 goroutines appending to 64 threads of an embedded log, with the mark
// (written at most every DefaultMarkEvery) and without it.
func BenchmarkAppendMark(b *testing.B) {
	for _, c := range []struct {
		name   string
		noMark bool
	}{{"nomark", true}, {"mark", false}} {
		b.Run(c.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			l, err := Open(ctx, Options{Dir: b.TempDir(), Linger: time.Millisecond, NoMark: c.noMark})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			var n atomic.Int64
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				thread := fmt.Sprintf("th_%d", n.Add(1))
				for pb.Next() {
					if _, err := l.Append(ctx, newRec(b, thread, "agent.step", map[string]any{"x": "y"})); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
