package log

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// Every record carries where the records before it on its thread are:
// prev's clock and up to backLen more, complete and in order, whether it
// went out alone, chained in an atomic batch, after a lost race, or from
// a writer that had to fetch the thread's head. Tail follows them to the
// same answer a full read gives.
func TestBackHeadersComplete(t *testing.T) {
	dir := t.TempDir()
	a := openTest(t, dir)
	b := openTest(t, dir)
	ctx := ctxT(t)
	threads := []string{"th_solo", "th_burst", "th_shared", "th_u ni"}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	submit := func(l *Log, thread string, n int) {
		defer wg.Done()
		ps := make([]*Pending, 0, n)
		for i := range n {
			p, err := l.Submit(ctx, newRec(t, thread, "agent.step", map[string]any{"i": i}))
			if err != nil {
				errs <- err
				return
			}
			ps = append(ps, p)
		}
		for _, p := range ps {
			if _, err := p.Wait(ctx); err != nil {
				errs <- err
			}
		}
	}
	for round := range 6 {
		wg.Add(5)
		go submit(a, "th_solo", 3)   // one at a time or a few per group
		go submit(a, "th_burst", 25) // chained in atomic batches
		go submit(a, "th_shared", 4) // two writers race on it
		go submit(b, "th_shared", 4)
		go submit(b, "th_u ni", 1+round)
		wg.Wait()
		// A fresh writer knows no heads and reads them from the log.
		a.w.heads, b.w.heads = map[string]head{}, map[string]head{}
	}
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	for _, th := range threads {
		es := chain(t, a, th)
		for i, e := range es {
			m, err := a.get(ctx, getRequest{Seq: e.Clock})
			if err != nil {
				t.Fatal(err)
			}
			var want []uint64
			for j := i - 1; j >= 0 && len(want) < backLen+1; j-- {
				want = append(want, es[j].Clock)
			}
			if got := ancestorsOf(m); !slices.Equal(got, want) {
				t.Fatalf("%s clock %d (prev %q, back %q): ancestors %v, want %v", th, e.Clock,
					m.hdr.Get(HeaderPrevClock)+m.hdr.Get(HeaderPrevBack), m.hdr.Get(HeaderBack), got, want)
			}
		}
		for _, n := range []int{1, 2, backLen + 1, backLen + 2, 40, len(es), len(es) + 5} {
			got, err := a.Tail(ctx, th, n)
			if err != nil {
				t.Fatalf("Tail(%s, %d): %v", th, n, err)
			}
			want := es[max(0, len(es)-n):]
			if len(got) != len(want) {
				t.Fatalf("Tail(%s, %d): %d records, want %d", th, n, len(got), len(want))
			}
			for i := range want {
				if got[i].ID != want[i].ID || got[i].Clock != want[i].Clock {
					t.Fatalf("Tail(%s, %d)[%d] = clock %d, want %d", th, n, i, got[i].Clock, want[i].Clock)
				}
			}
		}
	}
}

// A Spl-Back header that points at other records (here: another thread's)
// is only a hint: Tail sees the chain break and scans instead.
func TestTailDistrustsBackHeader(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	others := appendN(t, l, "th_other", 20, func(j int) map[string]any { return map[string]any{"j": j} })
	mine := appendN(t, l, "th_mine", 5, func(j int) map[string]any { return map[string]any{"j": j} })
	last := mine[len(mine)-1]
	rec := newRec(t, "th_mine", "agent.step", map[string]any{"forged": true}).WithPrev(last.ID)
	msg := recordMsg(t, rec)
	msg.Header.Set(HeaderPrevClock, strconv.FormatUint(last.Clock, 10))
	var back []string
	for i := len(others) - 1; i >= len(others)-4; i-- {
		back = append(back, "="+strconv.FormatUint(others[i].Clock, 10))
	}
	msg.Header.Set(HeaderBack, fmt.Sprint(back[0], " ", back[1], " ", back[2], " ", back[3]))
	if _, err := l.c.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	head, err := l.get(ctx, getRequest{LastFor: ThreadSubject("th_mine")})
	if err != nil {
		t.Fatal(err)
	}
	if got := ancestorsOf(head); len(got) != 5 || got[1] != others[len(others)-1].Clock {
		t.Fatalf("forged header not read as written: %v", got)
	}
	got, err := l.Tail(ctx, "th_mine", 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []records.ID{mine[2].ID, mine[3].ID, mine[4].ID, rec.ID()}
	for i := range want {
		if i >= len(got) || got[i].ID != want[i] {
			t.Fatalf("Tail = %d records, [%d] differs; want the thread's own last 4", len(got), i)
		}
	}
}

func TestAncestorsOfMalformed(t *testing.T) {
	hdr := func(kv ...string) nats.Header {
		h := nats.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name string
		m    stored
		want []uint64
	}{
		{"no headers", stored{clock: 100, hdr: hdr()}, nil},
		{"prev only", stored{clock: 100, hdr: hdr(HeaderPrevClock, "90")}, []uint64{90}},
		{"prev back", stored{clock: 100, hdr: hdr(HeaderPrevBack, "3", HeaderBack, "2 =50 10")}, []uint64{97, 95, 50, 40}},
		{"prev not before", stored{clock: 100, hdr: hdr(HeaderPrevClock, "100", HeaderBack, "1")}, nil},
		{"not a number", stored{clock: 100, hdr: hdr(HeaderPrevClock, "90", HeaderBack, "5 x 5")}, []uint64{90, 85}},
		{"delta past zero", stored{clock: 100, hdr: hdr(HeaderPrevClock, "90", HeaderBack, "90")}, []uint64{90}},
		{"zero delta", stored{clock: 100, hdr: hdr(HeaderPrevClock, "90", HeaderBack, "0 1")}, []uint64{90}},
		{"absolute not before", stored{clock: 100, hdr: hdr(HeaderPrevClock, "90", HeaderBack, "=95")}, []uint64{90}},
		{"too many", stored{clock: 1000, hdr: hdr(HeaderPrevClock, "900", HeaderBack, "1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1")},
			[]uint64{900, 899, 898, 897, 896, 895, 894, 893, 892, 891, 890, 889, 888, 887, 886, 885, 884}},
	}
	for _, tt := range tests {
		if got := ancestorsOf(tt.m); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The log's one reply subscription loses no answer of a read that gets
// more than it said it expects, and a read abandoned with answers still
// coming holds up no other read.
func TestRepliesOverflowAndAbandon(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	es := appendN(t, l, "th_r", 20, func(j int) map[string]any { return map[string]any{"j": j} })
	batch := []byte(`{"seq":1,"next_by_subj":"` + ThreadSubject("th_r") + `","batch":20}`)

	a := l.c.Replies(1)
	if err := l.c.NC.PublishRequest(natsio.DirectAPI(l.opts.Stream), a.Reply(0), batch); err != nil {
		t.Fatal(err)
	}
	for i := range 21 {
		msg, _, err := a.Next(ctx)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if i == 20 {
			if st := msg.Header.Get("Status"); st != "204" {
				t.Fatalf("after the batch: status %q, want 204 (end of batch)", st)
			}
			break
		}
		m, err := natsio.ParseMessage(msg)
		if err != nil || m.Seq != es[i].Clock {
			t.Fatalf("answer %d: clock %d, %v; want %d", i, m.Seq, err, es[i].Clock)
		}
	}
	a.Done()

	abandoned := l.c.Replies(1)
	if err := l.c.NC.PublishRequest(natsio.DirectAPI(l.opts.Stream), abandoned.Reply(0), batch); err != nil {
		t.Fatal(err)
	}
	if err := l.c.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the answers pile up behind the full channel
	abandoned.Done()
	got, err := l.Tail(ctx, "th_r", 20)
	if err != nil || len(got) != 20 || got[0].Clock != es[0].Clock {
		t.Fatalf("Tail after an abandoned read: %d records, %v", len(got), err)
	}
}
