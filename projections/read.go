package projections

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// Reader reads the read models of Index from their KV buckets: any
// process can, whether or not it runs the projection. Reads see what the
// projection has stored; Runtime.Wait first for reads that must see a
// clock.
type Reader struct {
	log *log.Log
	d   direct
}

// NewReader returns a Reader of the Index models of l, on l's connection
// c.
func NewReader(c *natsio.Conn, l *log.Log) *Reader {
	return &Reader{log: l, d: direct{c: c, timeout: 10 * time.Second}}
}

func (rd *Reader) stream(model string) string { return kvStreamName(rd.log.StreamName(), model) }

// ThreadCount returns how many threads the thread index holds, from the
// state of its bucket's stream (one message per thread), without reading
// them. A thread whose every record was erased by an erasure on another
// thread leaves a delete marker, which counts too. ThreadsAndCount lists
// threads and counts them in one look at that state.
func (rd *Reader) ThreadCount(ctx context.Context) (uint64, error) {
	s, err := rd.d.c.JS.Stream(ctx, rd.stream(ModelThreads))
	if err != nil {
		return 0, fmt.Errorf("thread count: %w", err)
	}
	return s.CachedInfo().State.Msgs, nil
}

// get returns the value of key in model, or an error wrapping
// log.ErrNotFound.
func (rd *Reader) get(ctx context.Context, model, key string, v any) error {
	subj := "$KV." + BucketName(rd.log.StreamName(), model) + "." + key
	ms, ok, err := rd.d.lasts(ctx, rd.stream(model), []string{subj})
	if err != nil {
		return err
	}
	if !ok[0] || ms[0].deleted() {
		return log.ErrNotFound
	}
	if err := json.Unmarshal(ms[0].data, v); err != nil {
		return fmt.Errorf("decode %s/%s: %w", model, key, err)
	}
	return nil
}

// Thread returns the ModelThreads value of thread, or an error wrapping
// log.ErrNotFound when the projection knows no record of it.
func (rd *Reader) Thread(ctx context.Context, thread string) (*Thread, error) {
	var t Thread
	if err := rd.get(ctx, ModelThreads, ThreadKey(thread), &t); err != nil {
		return nil, fmt.Errorf("thread %q: %w", thread, err)
	}
	return &t, nil
}

// Checkpoint returns the latest checkpoint of thread from ModelCheckpoints,
// or an error wrapping log.ErrNotFound.
func (rd *Reader) Checkpoint(ctx context.Context, thread string) (*Checkpoint, error) {
	var c Checkpoint
	if err := rd.get(ctx, ModelCheckpoints, ThreadKey(thread), &c); err != nil {
		return nil, fmt.Errorf("checkpoint of thread %q: %w", thread, err)
	}
	if err := rd.fillBody(ctx, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// fillBody sets the fields of c that come from the checkpoint's body, read
// from the log. A checkpoint erased since the projection last applied keeps
// them empty; one that does not verify is an error wrapping
// records.ErrCorrupt.
func (rd *Reader) fillBody(ctx context.Context, c *Checkpoint) error {
	e, err := rd.log.At(ctx, c.Clock)
	if errors.Is(err, log.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s at clock %d: %w", c.ID, c.Clock, err)
	}
	if e.ID != c.ID {
		return nil // not the record the model names: leave the body fields empty
	}
	if cp, err := records.DecodeCheckpoint(e.Record.Body); err == nil {
		c.Name, c.SessionID, c.Summary = cp.Name, cp.SessionID, cp.Summary
	}
	return nil
}

// Erased returns the ModelErased value of id, or an error wrapping
// log.ErrNotFound when no erasure the projection applied names it.
func (rd *Reader) Erased(ctx context.Context, id records.ID) (*Erased, error) {
	var e Erased
	if err := rd.get(ctx, ModelErased, id.String(), &e); err != nil {
		return nil, fmt.Errorf("erased %s: %w", id, err)
	}
	return &e, nil
}

// ThreadFilter selects threads for Reader.Threads.
type ThreadFilter struct {
	Actor string    // threads with a record by this actor
	Kind  string    // threads with a record of this kind
	Since time.Time // threads whose last activity (the ts of the newest record) is at or after
	Limit int       // at most this many (0: all)
	// Sessions keeps the threads whose session status (Thread.SessionStatus)
	// is one of these; empty: no filter.
	Sessions []string
}

// Threads returns the threads that match f, newest activity first (by
// the clock of their newest record). It reads the threads bucket's stream
// backwards: the stream keeps one message per thread, in the order of
// their last change, so the newest come first and the walk stops as soon
// as no thread further back can come before the ones found. A negative
// f.Limit is a *records.FieldError.
func (rd *Reader) Threads(ctx context.Context, f ThreadFilter) ([]*Thread, error) {
	ts, _, err := rd.ThreadsAndCount(ctx, f)
	return ts, err
}

// ThreadsAndCount returns what Threads returns, and how many threads the
// index holds whatever f selects, as ThreadCount counts them: from the
// stream state the walk starts from, so that one request serves both and
// the count is of the index the walk began on (a thread first stored
// during the walk may be listed and not counted).
func (rd *Reader) ThreadsAndCount(ctx context.Context, f ThreadFilter) ([]*Thread, uint64, error) {
	if err := notNegative("limit", f.Limit); err != nil {
		return nil, 0, fmt.Errorf("threads: %w", err)
	}
	cutoff := int64(0)
	if !f.Since.IsZero() {
		cutoff = f.Since.UnixMilli()
	}
	out, total, err := walkModel(ctx, rd, ModelThreads, f.Limit, f.Since, func(data []byte) (*Thread, uint64, uint64, error) {
		var t Thread
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, 0, 0, err
		}
		if (f.Actor != "" && t.Actors[f.Actor] == 0) || (f.Kind != "" && t.Kinds[f.Kind] == 0) || t.LastTS < cutoff ||
			(len(f.Sessions) > 0 && !slices.Contains(f.Sessions, t.SessionStatus())) {
			return nil, 0, t.AsOf, nil
		}
		return &t, t.Last, t.AsOf, nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("threads: %w", err)
	}
	slices.SortFunc(out, func(a, b *Thread) int {
		return cmp.Or(cmp.Compare(b.Last, a.Last), strings.Compare(a.Thread, b.Thread))
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, total, nil
}

// CheckpointFilter selects checkpoints for Reader.Checkpoints.
type CheckpointFilter struct {
	Actor  string    // checkpoints by this actor
	Since  time.Time // checkpoints whose ts is at or after
	Offset int       // skip this many
	Limit  int       // then at most this many (0: all)
}

// Checkpoints returns the latest checkpoint of every thread that matches
// f, newest first (by clock), paged by f.Offset and f.Limit. It walks the
// checkpoints bucket backwards as Threads walks the threads. A negative
// f.Offset or f.Limit is a *records.FieldError.
func (rd *Reader) Checkpoints(ctx context.Context, f CheckpointFilter) ([]*Checkpoint, error) {
	if err := cmp.Or(notNegative("offset", f.Offset), notNegative("limit", f.Limit)); err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	cutoff := int64(0)
	if !f.Since.IsZero() {
		cutoff = f.Since.UnixMilli()
	}
	want := 0
	if f.Limit > 0 {
		want = f.Offset + f.Limit
	}
	out, _, err := walkModel(ctx, rd, ModelCheckpoints, want, f.Since, func(data []byte) (*Checkpoint, uint64, uint64, error) {
		var c Checkpoint
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, 0, 0, err
		}
		if (f.Actor != "" && c.Actor != f.Actor) || c.TS < cutoff {
			return nil, 0, c.AsOf, nil
		}
		return &c, c.Clock, c.AsOf, nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	slices.SortFunc(out, func(a, b *Checkpoint) int {
		return cmp.Or(cmp.Compare(b.Clock, a.Clock), strings.Compare(a.Thread, b.Thread))
	})
	if f.Offset >= len(out) {
		return nil, nil
	}
	out = out[f.Offset:]
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	for _, c := range out {
		if err := rd.fillBody(ctx, c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// notNegative returns a *records.FieldError when n, the value of field,
// is negative.
func notNegative(field string, n int) error {
	if n < 0 {
		return &records.FieldError{Field: field, Rule: fmt.Sprintf("must not be negative, got %d", n)}
	}
	return nil
}

// sinceSlack is how far before a Since cutoff a walk still reads: the
// cutoff is on record times (set by the emitters), the walk's order on
// when the projector stored the values (the server's clock).
const sinceSlack = 10 * time.Minute

// maxForwardReads bounds the batched gets (of up to 1,024 messages each)
// that a walk spends on what was stored after it began (see walkModel).
const maxForwardReads = 64

// walkModel reads the values of model newest change first and returns the
// ones decode selects, in no particular order, and how many messages
// (values and delete markers, one per key) the model's stream held when
// the walk began. decode returns the value, its order (0: not selected)
// and its as-of clock. The walk stops when want values are selected whose
// order is at least the as-of clock of the value in hand (no value further
// back can come before them: its order is at most its as-of clock, which
// is at most that one), or, with since, at the first value stored well
// before it (sinceSlack).
//
// The walk pages back from the stream's last sequence at its start, while
// the projector may be writing: a key written meanwhile loses its message
// below (the bucket keeps one per key) and gets one above, where the pages
// do not look. So the walk then reads forward from its start to the
// stream's end, again while the stream moves, taking each key's newest
// message (a value not selected, or a delete, takes the key out); and if
// that leaves fewer than want values at or above the as-of clock it
// stopped at, it pages back on from there. The result holds every key
// with its value as the walk last read it. When the writes do not pause,
// the forward reads end after maxForwardReads batches: a key written
// during the walk may then be missing, or have an older value than the
// one stored last.
func walkModel[T any](ctx context.Context, rd *Reader, model string, want int, since time.Time, decode func([]byte) (T, uint64, uint64, error)) ([]T, uint64, error) {
	stream := rd.stream(model)
	st, err := rd.d.c.JS.Stream(ctx, stream)
	if err != nil {
		return nil, 0, fmt.Errorf("bucket %s: %w", BucketName(rd.log.StreamName(), model), err)
	}
	info := st.CachedInfo().State
	window := uint64(1024)
	if want > 0 {
		window = uint64(min(max(2*want, 64), 1024))
	}
	w := walker[T]{
		rd: rd, stream: stream, want: want, since: since, decode: decode,
		sel:    make(map[string]walked[T]),
		top:    topK{k: want},
		first:  max(info.FirstSeq, 1),
		hi:     info.LastSeq,
		window: window,
		next:   info.LastSeq + 1,
	}
	// Each round reads forward at least once until the forward reads are
	// spent; after that, nothing changes the selection between where the
	// walk back stops and the check that ends the rounds.
	for {
		if err := w.back(ctx); err != nil {
			return nil, 0, err
		}
		if err := w.forward(ctx); err != nil {
			return nil, 0, err
		}
		if w.hi < w.first {
			break // the walk back is done
		}
		// The walk back stopped early: does the stop still hold with
		// what the forward reads changed?
		w.top = topK{k: want}
		for _, v := range w.sel {
			w.top.add(v.order)
		}
		if w.enough(w.stopAsOf) {
			break
		}
	}
	out := make([]T, 0, len(w.sel))
	for _, v := range w.sel {
		out = append(out, v.v)
	}
	return out, info.Msgs, nil
}

// walked is a value a walk selected.
type walked[T any] struct {
	seq   uint64 // of its message in the bucket's stream
	order uint64
	v     T
}

// walker is the state of walkModel.
type walker[T any] struct {
	rd     *Reader
	stream string
	want   int
	since  time.Time
	decode func([]byte) (T, uint64, uint64, error)

	sel      map[string]walked[T] // the selected values, by subject
	top      topK                 // the largest orders in sel
	first    uint64               // the stream's first sequence when the walk began
	hi       uint64               // the backward walk reads at and below it next; below first: done
	window   uint64               // messages the backward walk gets at once
	stopAsOf uint64               // the as-of clock of the value it last stopped at
	next     uint64               // the forward reads start there
	reads    int                  // forward reads done
}

// back pages backwards from w.hi until it may stop, and leaves w.hi
// below w.first when nothing further back can be selected.
func (w *walker[T]) back(ctx context.Context) error {
	for w.hi >= w.first {
		lo := w.first
		if w.hi-lo+1 > w.window {
			lo = w.hi - w.window + 1
		}
		ms, _, err := w.rd.d.batch(ctx, w.stream, getRequest{Seq: lo, Batch: int(w.hi - lo + 1)})
		if err != nil {
			return err
		}
		for i := len(ms) - 1; i >= 0; i-- {
			m := ms[i]
			if m.seq > w.hi || m.deleted() {
				continue
			}
			if !w.since.IsZero() && m.time.Before(w.since.Add(-sinceSlack)) {
				w.hi = 0
				return nil
			}
			order, asOf, err := w.merge(m)
			if err != nil {
				return err
			}
			if order > 0 {
				w.top.add(order)
			}
			if w.enough(asOf) {
				w.hi, w.stopAsOf = m.seq-1, asOf
				return nil
			}
		}
		w.hi = lo - 1
		w.window = min(2*w.window, 4096)
	}
	return nil
}

// forward reads what was stored from w.next on, to the stream's end or
// until the walk has spent its forward reads.
func (w *walker[T]) forward(ctx context.Context) error {
	for w.reads < maxForwardReads {
		w.reads++
		ms, pending, err := w.rd.d.batch(ctx, w.stream, getRequest{Seq: w.next, Batch: 1024})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if _, _, err := w.merge(m); err != nil {
				return err
			}
			w.next = m.seq + 1
		}
		if len(ms) == 0 || pending == 0 {
			return nil
		}
	}
	return nil
}

// merge takes m into the selection, unless the selection holds a newer
// message of its key, and returns its value's order (0: not selected or
// not taken) and as-of clock (0 for a delete).
func (w *walker[T]) merge(m message) (uint64, uint64, error) {
	var v T
	var order, asOf uint64
	if !m.deleted() {
		var err error
		if v, order, asOf, err = w.decode(m.data); err != nil {
			return 0, 0, fmt.Errorf("decode %s: %w", m.subject, err)
		}
	}
	if old, ok := w.sel[m.subject]; ok && old.seq > m.seq {
		return 0, asOf, nil
	}
	if order == 0 {
		delete(w.sel, m.subject)
	} else {
		w.sel[m.subject] = walked[T]{seq: m.seq, order: order, v: v}
	}
	return order, asOf, nil
}

// enough reports whether want values are selected whose order is at least
// asOf.
func (w *walker[T]) enough(asOf uint64) bool {
	return w.want > 0 && len(w.top.h) == w.want && w.top.h[0] >= asOf
}

// topK keeps the k largest numbers added, in a min-heap: h[0] is the k-th
// largest once there are k.
type topK struct {
	k int
	h []uint64
}

func (t *topK) add(x uint64) {
	if t.k <= 0 {
		return
	}
	if len(t.h) < t.k {
		t.h = append(t.h, x)
		for i := len(t.h) - 1; i > 0; { // sift up
			p := (i - 1) / 2
			if t.h[p] <= t.h[i] {
				break
			}
			t.h[p], t.h[i] = t.h[i], t.h[p]
			i = p
		}
		return
	}
	if x <= t.h[0] {
		return
	}
	t.h[0] = x
	for i := 0; ; { // sift down
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.h) && t.h[l] < t.h[m] {
			m = l
		}
		if r < len(t.h) && t.h[r] < t.h[m] {
			m = r
		}
		if m == i {
			return
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}
