package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

// threadWrite is the write of a thread value th_<i> whose newest record
// is at clock last and is of kind.
func threadWrite(i int, last uint64, kind string) Write {
	th := &Thread{Thread: fmt.Sprintf("th_%05d", i), Records: 1, First: last, Last: last, LastTS: int64(last), AsOf: last,
		Kinds: map[string]uint64{kind: 1}, Actors: map[string]uint64{actor: 1}}
	b, _ := json.Marshal(th) // a Thread always encodes
	return Write{Key: Key{Model: ModelThreads, Key: ThreadKey(th.Thread)}, Data: b}
}

// threadStore returns a Reader and a store of the models of a new log,
// whose threads bucket holds n threads th_00000 … th_<n-1> at clocks
// 1 … n, all of kind "k".
func threadStore(t testing.TB, n int) (*Reader, *kvStore) {
	t.Helper()
	l := openLog(t, "")
	r := newRuntime(t, l, Options{})
	st := &kvStore{js: connOf(l).JS, nc: connOf(l).NC, d: r.d, stream: l.StreamName(), replicas: 1}
	var ws []Write
	for i := range n {
		ws = append(ws, threadWrite(i, uint64(i+1), "k"))
	}
	if _, err := st.Commit(ctxT(t), ws); err != nil {
		t.Fatal(err)
	}
	return NewReader(connOf(l), l), st
}

// overwrite stores ws over the values their keys hold, as a projector
// does.
func overwrite(ctx context.Context, st *kvStore, ws []Write) error {
	keys := make([]Key, len(ws))
	for i, w := range ws {
		keys[i] = w.Key
	}
	old, err := st.Load(ctx, keys)
	if err != nil {
		return err
	}
	for i := range ws {
		ws[i].Expect = old[i].Rev
	}
	_, err = st.Commit(ctx, ws)
	return err
}

// decodeOfKind decodes threads and selects those with a record of kind;
// before the first value it runs midWalk once.
func decodeOfKind(kind string, midWalk func()) func([]byte) (*Thread, uint64, uint64, error) {
	var once sync.Once
	return func(b []byte) (*Thread, uint64, uint64, error) {
		once.Do(midWalk)
		var th Thread
		if err := json.Unmarshal(b, &th); err != nil {
			return nil, 0, 0, err
		}
		if th.Kinds[kind] == 0 {
			return nil, 0, th.AsOf, nil
		}
		return &th, th.Last, th.AsOf, nil
	}
}

// A thread written while a full listing pages back loses its message
// further back and gets one past where the walk began: the listing still
// holds it, with its new value.
func TestWalkKeepsValuesWrittenMidWalk(t *testing.T) {
	const n, moved = 3000, 500
	rd, st := threadStore(t, n)
	ctx := ctxT(t)
	// Once the walk holds its first page (the newest values), the oldest
	// threads change.
	got, total, err := walkModel(ctx, rd, ModelThreads, 0, time.Time{}, decodeOfKind("k", func() {
		var ws []Write
		for i := range moved {
			ws = append(ws, threadWrite(i, uint64(n+1+i), "k"))
		}
		if err := overwrite(ctx, st, ws); err != nil {
			t.Error(err)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || total != n {
		t.Fatalf("walk found %d threads and counted %d, want %d", len(got), total, n)
	}
	for _, th := range got {
		var i int
		fmt.Sscanf(th.Thread, "th_%d", &i)
		want := uint64(i + 1)
		if i < moved {
			want = uint64(n + 1 + i)
		}
		if th.Last != want {
			t.Fatalf("%s: last=%d, want %d", th.Thread, th.Last, want)
		}
	}
}

// A short listing stops once it holds enough values; when values
// written meanwhile take some of them out of the selection, it pages on
// back for others.
func TestWalkPagesOnWhenWritesUndoItsStop(t *testing.T) {
	const n = 3000
	rd, st := threadStore(t, n)
	ctx := ctxT(t)
	// The five newest threads, which the walk selects first, become of
	// another kind.
	got, _, err := walkModel(ctx, rd, ModelThreads, 5, time.Time{}, decodeOfKind("k", func() {
		var ws []Write
		for i := n - 5; i < n; i++ {
			ws = append(ws, threadWrite(i, uint64(n+1+i), "other"))
		}
		if err := overwrite(ctx, st, ws); err != nil {
			t.Error(err)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b *Thread) int { return strings.Compare(b.Thread, a.Thread) })
	if names, want := threadNames(got), []string{"th_02994", "th_02993", "th_02992", "th_02991", "th_02990"}; !slices.Equal(names, want) {
		t.Fatalf("walk selected %v, want %v", names, want)
	}
}

// Full listings made while a projector rewrites the oldest threads list
// every thread.
func TestThreadsListsEveryThreadUnderWrites(t *testing.T) {
	const n, rewritten = 3000, 1000
	rd, st := threadStore(t, n)
	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
	// The projector rewrites the oldest threads ten times over, 100 at a
	// time, and on until a listing has run while it wrote: a listing that
	// saw no write would prove nothing.
	var stored atomic.Int64     // writes stored
	var overlapped atomic.Int64 // listings during which a write was stored whole
	done := make(chan struct{})
	var writeErr error
	go func() {
		defer close(done)
		clock := uint64(n)
		for round := 0; round < 10 || overlapped.Load() == 0; round++ {
			for lo := 0; lo < rewritten; lo += 100 {
				var ws []Write
				for i := lo; i < lo+100; i++ {
					clock++
					ws = append(ws, threadWrite(i, clock, "k"))
				}
				if writeErr = overwrite(ctx, st, ws); writeErr != nil {
					return
				}
				stored.Add(1)
			}
		}
	}()
	defer func() { cancel(); <-done }()
	for listings := 1; ; listings++ {
		before := stored.Load()
		ts, err := rd.Threads(ctx, ThreadFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != n {
			t.Fatalf("listing %d holds %d threads, want %d", listings, len(ts), n)
		}
		// Two more writes stored: the second began after the listing did
		// (once the first was stored) and ended before it returned.
		if stored.Load() >= before+2 {
			overlapped.Add(1)
		}
		select {
		case <-done:
			if writeErr != nil {
				t.Fatal(writeErr)
			}
			if overlapped.Load() == 0 {
				t.Fatalf("none of %d listings ran while threads were written", listings)
			}
			t.Logf("%d listings, %d while threads were written", listings, overlapped.Load())
			return
		default:
		}
	}
}

// A negative offset or limit is a field error, not a panic, even with
// nothing to list.
func TestListingsRejectNegativePaging(t *testing.T) {
	l := openLog(t, "")
	newRuntime(t, l, Options{})
	rd := NewReader(connOf(l), l)
	for _, tc := range []struct {
		name  string
		field string
		list  func() error
	}{
		{"Checkpoints offset -1", "offset", func() error {
			_, err := rd.Checkpoints(ctxT(t), CheckpointFilter{Offset: -1})
			return err
		}},
		{"Checkpoints limit -1", "limit", func() error {
			_, err := rd.Checkpoints(ctxT(t), CheckpointFilter{Limit: -1})
			return err
		}},
		{"Threads limit -1", "limit", func() error {
			_, err := rd.Threads(ctxT(t), ThreadFilter{Limit: -1})
			return err
		}},
	} {
		err := tc.list()
		var fe *records.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, records.ErrInvalid) {
			t.Fatalf("%s: err=%v, want a *records.FieldError", tc.name, err)
		}
		if fe.Field != tc.field || !strings.Contains(fe.Rule, "negative") {
			t.Fatalf("%s: field %q rule %q, want field %q and a rule on negative values", tc.name, fe.Field, fe.Rule, tc.field)
		}
	}
}
