package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

func threadNames(ts []*Thread) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Thread
	}
	return out
}

func TestThreadsNewestActivityFirst(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	r := newRuntime(t, l, Options{MaxBatch: 3})
	// th_0 .. th_9 get a record each, oldest first; then th_3 and th_7
	// get more, in two batches, so that they move to the front.
	for i := range 10 {
		a.add(fmt.Sprintf("th_%d", i), "agent.step", nil)
	}
	if err := r.CatchUp(ctxT(t), 10); err != nil {
		t.Fatal(err)
	}
	a.add("th_3", records.KindCheckpoint, &records.Checkpoint{Summary: "s", Learnings: []string{"l"}})
	a.add("th_7", "agent.tool", nil)
	now := time.Now()
	r2, err := records.New(records.ActSay, "agent.note", "th_5", "did:sync:agent:other", now, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctxT(t), r2); err != nil {
		t.Fatal(err)
	}
	if err := r.CatchUp(ctxT(t), 13); err != nil {
		t.Fatal(err)
	}
	rd := NewReader(connOf(l), l)
	for _, tc := range []struct {
		f    ThreadFilter
		want []string
	}{
		{ThreadFilter{Limit: 4}, []string{"th_5", "th_7", "th_3", "th_9"}},
		{ThreadFilter{}, []string{"th_5", "th_7", "th_3", "th_9", "th_8", "th_6", "th_4", "th_2", "th_1", "th_0"}},
		{ThreadFilter{Kind: records.KindCheckpoint}, []string{"th_3"}},
		{ThreadFilter{Actor: "did:sync:agent:other"}, []string{"th_5"}},
		{ThreadFilter{Actor: actor, Limit: 2}, []string{"th_5", "th_7"}},
		{ThreadFilter{Since: now.Add(-time.Second)}, []string{"th_5"}},
		{ThreadFilter{Kind: "no.such.kind"}, []string{}},
	} {
		got, err := rd.Threads(ctxT(t), tc.f)
		if err != nil {
			t.Fatalf("Threads(%+v): %v", tc.f, err)
		}
		if names := threadNames(got); !slices.Equal(names, tc.want) {
			t.Errorf("Threads(%+v)=%v, want %v", tc.f, names, tc.want)
		}
	}
	// Three threads got a second record: still ten threads.
	if n, err := rd.ThreadCount(ctxT(t)); err != nil || n != 10 {
		t.Errorf("ThreadCount=%d, %v; want 10", n, err)
	}
	// ThreadsAndCount lists as Threads does, and counts every thread
	// whatever the filter selects.
	for _, f := range []ThreadFilter{{Limit: 4}, {Kind: records.KindCheckpoint}} {
		ts, n, err := rd.ThreadsAndCount(ctxT(t), f)
		if err != nil {
			t.Fatalf("ThreadsAndCount(%+v): %v", f, err)
		}
		want, err := rd.Threads(ctxT(t), f)
		if err != nil {
			t.Fatal(err)
		}
		if names, want := threadNames(ts), threadNames(want); !slices.Equal(names, want) || n != 10 {
			t.Errorf("ThreadsAndCount(%+v)=%v, %d; want %v, 10", f, names, n, want)
		}
	}
}

func TestCheckpointsNewestFirstPaged(t *testing.T) {
	l := openLog(t, "")
	a := &appender{t: t, l: l}
	var cps []log.Entry
	for i := range 8 {
		cps = append(cps, a.checkpoint(fmt.Sprintf("th_%d", i%4), fmt.Sprintf("cp %d", i)))
	}
	a.erase("th_3", cps[7]) // th_3 falls back to cp 3
	r := newRuntime(t, l, Options{MaxBatch: 2})
	if err := r.CatchUp(ctxT(t), 100); err != nil {
		t.Fatal(err)
	}
	rd := NewReader(connOf(l), l)
	summaries := func(f CheckpointFilter) []string {
		t.Helper()
		cs, err := rd.Checkpoints(ctxT(t), f)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, c := range cs {
			out = append(out, c.Summary)
		}
		return out
	}
	for _, tc := range []struct {
		f    CheckpointFilter
		want []string
	}{
		{CheckpointFilter{}, []string{"cp 6", "cp 5", "cp 4", "cp 3"}},
		{CheckpointFilter{Limit: 2}, []string{"cp 6", "cp 5"}},
		{CheckpointFilter{Limit: 2, Offset: 2}, []string{"cp 4", "cp 3"}},
		{CheckpointFilter{Limit: 2, Offset: 4}, []string{}},
	} {
		if got := summaries(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("Checkpoints(%+v)=%v, want %v", tc.f, got, tc.want)
		}
	}
	c, err := rd.Checkpoint(ctxT(t), "th_3")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ID, cps[3].ID; got != want {
		t.Fatalf("latest checkpoint of th_3=%s, want %s", got, want)
	}
	e, err := rd.Erased(ctxT(t), cps[7].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.Clock, cps[7].Clock; got != want {
		t.Fatalf("erased clock=%d, want %d", got, want)
	}
}

// The walk reads few values for a short list, whatever the number of
// threads.
func TestThreadsStopsEarly(t *testing.T) {
	l := openLog(t, "")
	r := newRuntime(t, l, Options{})
	st := &kvStore{js: connOf(l).JS, nc: connOf(l).NC, d: r.d, stream: l.StreamName(), replicas: 1}
	var ws []Write
	for i := range 3000 {
		th := &Thread{Thread: fmt.Sprintf("th_%05d", i), Records: 1, First: uint64(i + 1), Last: uint64(i + 1), LastTS: int64(i), AsOf: uint64(i + 1),
			Kinds: map[string]uint64{"k": 1}, Actors: map[string]uint64{actor: 1}}
		ws = append(ws, Write{Key: Key{Model: ModelThreads, Key: ThreadKey(th.Thread)}, Data: mustJSON(t, th)})
	}
	if _, err := st.Commit(ctxT(t), ws); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	visited := 0
	if _, _, err := walkModel(ctx, NewReader(connOf(l), l), ModelThreads, 5, time.Time{}, func(b []byte) (struct{}, uint64, uint64, error) {
		visited++
		var th Thread
		if err := json.Unmarshal(b, &th); err != nil {
			return struct{}{}, 0, 0, err
		}
		return struct{}{}, th.Last, th.AsOf, nil
	}); err != nil {
		t.Fatal(err)
	}
	if visited > 6 {
		t.Fatalf("visited %d values for 5", visited)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// On the embedded server the store's writes go out one by one: each still
// lands only on the revision it expects, the revisions Commit returns are
// the ones Load reads back, and a stale expectation is ErrConflict and
// changes nothing of its key.
func TestKVCommitExpectsRevisions(t *testing.T) {
	l := openLog(t, "")
	if !l.Embedded() {
		t.Fatal("test log is not embedded")
	}
	r := newRuntime(t, l, Options{})
	st := &kvStore{js: connOf(l).JS, nc: connOf(l).NC, d: r.d, stream: l.StreamName(), replicas: 1}
	ctx := ctxT(t)
	key := func(i int) Key { return Key{Model: ModelThreads, Key: fmt.Sprintf("k%d", i)} }
	var ws []Write
	for i := range 50 {
		ws = append(ws, Write{Key: key(i), Data: []byte(fmt.Sprintf(`{"v":%d}`, i))})
	}
	revs, err := st.Commit(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]Key, len(ws))
	for i := range ws {
		keys[i] = key(i)
	}
	got, err := st.Load(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		if got[i].Rev != revs[i] || string(got[i].Data) != string(ws[i].Data) {
			t.Fatalf("key %d: stored rev %d %q, Commit said rev %d %q", i, got[i].Rev, got[i].Data, revs[i], ws[i].Data)
		}
	}
	// k0 on its revision, k1 on a stale one.
	_, err = st.Commit(ctx, []Write{
		{Key: key(0), Data: []byte(`{"v":"new"}`), Expect: revs[0]},
		{Key: key(1), Data: []byte(`{"v":"stale"}`), Expect: revs[1] - 1},
	})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("stale expectation: %v, want ErrConflict", err)
	}
	got, err = st.Load(ctx, keys[:2])
	if err != nil {
		t.Fatal(err)
	}
	if got[1].Rev != revs[1] || string(got[1].Data) != `{"v":1}` {
		t.Fatalf("k1 after a stale write: rev %d %q, want rev %d unchanged", got[1].Rev, got[1].Data, revs[1])
	}
	if got[0].Rev <= revs[0] || string(got[0].Data) != `{"v":"new"}` {
		t.Fatalf("k0 written on its revision: rev %d %q", got[0].Rev, got[0].Data)
	}
}

// A bucket made with the server's default de-duplication window (before
// the store set its own) is brought down to log.DuplicateWindow by the
// next runtime, and keeps its values: with the default, every open of the
// store reloads the bucket's writes of the last two minutes.
func TestEnsureShrinksBucketDuplicateWindow(t *testing.T) {
	l := openLog(t, "")
	r := newRuntime(t, l, Options{})
	st := &kvStore{js: connOf(l).JS, nc: connOf(l).NC, d: r.d, stream: l.StreamName(), replicas: 1}
	ctx := ctxT(t)
	key := Key{Model: ModelThreads, Key: "k"}
	revs, err := st.Commit(ctx, []Write{{Key: key, Data: []byte(`{"v":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	name := st.kvStream(ModelThreads)
	s, err := connOf(l).JS.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	old := s.CachedInfo().Config
	old.Duplicates = 2 * time.Minute
	if _, err := connOf(l).JS.UpdateStream(ctx, old); err != nil {
		t.Fatal(err)
	}

	newRuntime(t, l, Options{})
	s, err = connOf(l).JS.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != log.DuplicateWindow {
		t.Fatalf("bucket's duplicate window: %v, want %v", got, log.DuplicateWindow)
	}
	got, err := st.Load(ctx, []Key{key})
	if err != nil || got[0].Rev != revs[0] || string(got[0].Data) != `{"v":1}` {
		t.Fatalf("value after ensure: %+v, %v; want rev %d", got, err, revs[0])
	}
}
