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

// NewReader returns a Reader of the Index models of l.
func NewReader(l *log.Log) *Reader {
	return &Reader{log: l, d: direct{log: l, timeout: 10 * time.Second}}
}

func (rd *Reader) stream(model string) string { return "KV_" + BucketName(rd.log.StreamName(), model) }

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
}

// Threads returns the threads that match f, newest activity first (by
// the clock of their newest record). It reads the threads bucket's stream
// backwards: the stream keeps one message per thread, in the order of
// their last change, so the newest come first and the walk stops as soon
// as no thread further back can come before the ones found.
func (rd *Reader) Threads(ctx context.Context, f ThreadFilter) ([]*Thread, error) {
	cutoff := int64(0)
	if !f.Since.IsZero() {
		cutoff = f.Since.UnixMilli()
	}
	var out []*Thread
	err := rd.walk(ctx, ModelThreads, f.Limit, f.Since, func(data []byte) (uint64, uint64, error) {
		var t Thread
		if err := json.Unmarshal(data, &t); err != nil {
			return 0, 0, err
		}
		if (f.Actor != "" && t.Actors[f.Actor] == 0) || (f.Kind != "" && t.Kinds[f.Kind] == 0) || t.LastTS < cutoff {
			return 0, t.AsOf, nil
		}
		out = append(out, &t)
		return t.Last, t.AsOf, nil
	})
	if err != nil {
		return nil, fmt.Errorf("threads: %w", err)
	}
	slices.SortFunc(out, func(a, b *Thread) int {
		return cmp.Or(cmp.Compare(b.Last, a.Last), strings.Compare(a.Thread, b.Thread))
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
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
// checkpoints bucket backwards as Threads walks the threads.
func (rd *Reader) Checkpoints(ctx context.Context, f CheckpointFilter) ([]*Checkpoint, error) {
	cutoff := int64(0)
	if !f.Since.IsZero() {
		cutoff = f.Since.UnixMilli()
	}
	want := 0
	if f.Limit > 0 {
		want = f.Offset + f.Limit
	}
	var out []*Checkpoint
	err := rd.walk(ctx, ModelCheckpoints, want, f.Since, func(data []byte) (uint64, uint64, error) {
		var c Checkpoint
		if err := json.Unmarshal(data, &c); err != nil {
			return 0, 0, err
		}
		if (f.Actor != "" && c.Actor != f.Actor) || c.TS < cutoff {
			return 0, c.AsOf, nil
		}
		out = append(out, &c)
		return c.Clock, c.AsOf, nil
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

// sinceSlack is how far before a Since cutoff a walk still reads: the
// cutoff is on record times (set by the emitters), the walk's order on
// when the projector stored the values (the server's clock).
const sinceSlack = 10 * time.Minute

// walk reads the values of model newest change first and calls fn with
// each. fn returns the value's order (0: not selected) and its as-of
// clock. The walk stops when want values are selected whose order is at
// least the as-of clock of the value in hand (no value further back can
// come before them: its order is at most its as-of clock, which is at most
// that one), or, with since, at the first value stored well before it
// (sinceSlack).
func (rd *Reader) walk(ctx context.Context, model string, want int, since time.Time, fn func([]byte) (uint64, uint64, error)) error {
	stream := rd.stream(model)
	st, err := rd.log.JetStream().Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", BucketName(rd.log.StreamName(), model), err)
	}
	info := st.CachedInfo().State
	window := uint64(1024)
	if want > 0 {
		window = uint64(min(max(2*want, 64), 1024))
	}
	var top topK // the largest orders of the selected values
	top.k = want
	for hi := info.LastSeq; hi >= info.FirstSeq && hi > 0; {
		lo := max(info.FirstSeq, 1)
		if hi-lo+1 > window {
			lo = hi - window + 1
		}
		ms, _, err := rd.d.batch(ctx, stream, getRequest{Seq: lo, Batch: int(hi - lo + 1)})
		if err != nil {
			return err
		}
		for i := len(ms) - 1; i >= 0; i-- {
			m := ms[i]
			if m.seq > hi || m.deleted() {
				continue
			}
			if !since.IsZero() && m.time.Before(since.Add(-sinceSlack)) {
				return nil
			}
			order, asOf, err := fn(m.data)
			if err != nil {
				return fmt.Errorf("decode %s: %w", m.subject, err)
			}
			if order > 0 {
				top.add(order)
			}
			if want > 0 && len(top.h) == want && top.h[0] >= asOf {
				return nil
			}
		}
		if lo <= max(info.FirstSeq, 1) {
			return nil
		}
		hi = lo - 1
		window = min(2*window, 4096)
	}
	return nil
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
