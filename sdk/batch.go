package sdk

import (
	"context"
	"slices"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// AppendEvents appends evs as AppendEvent appends each one, and returns
// one outcome per event, in the order given: the record as stored, or the
// error of that event alone (an invalid event, a refused signature, a
// lost race) while the others land. The events are handed to the log
// together, so that they share group commits, and in order, so that the
// records of one thread are chained in the order given. As with Append,
// a checkpoint that landed while its thread's retention failed has its
// record and a *RetentionError. The face of a request that carries many
// records (spl serve's POST /v1/records/batch) uses it.
func (c *Client) AppendEvents(ctx context.Context, evs []Event) ([]Record, []error) {
	recs := make([]*records.Record, len(evs))
	errs := make([]error, len(evs))
	for i, ev := range evs {
		recs[i], errs[i] = c.record(ev)
	}
	return c.appendAll(ctx, recs, errs, nil)
}

// appendAll is the write path of Append and AppendEvents. Each record
// whose errs entry is nil is sealed (redaction, signature rules) and
// handed to the log, in order (with after, only if its thread is still at
// that clock: log.SubmitAfter); once each has its outcome, every thread
// where a checkpoint landed enforces its retention policy, from the
// thread's last clock among the records that landed.
func (c *Client) appendAll(ctx context.Context, recs []*records.Record, errs []error, after *uint64) ([]Record, []error) {
	pending := make([]*splog.Pending, len(recs))
	for i, rec := range recs {
		if errs[i] != nil {
			continue
		}
		if rec, errs[i] = c.seal(ctx, rec); errs[i] != nil {
			continue
		}
		if after != nil {
			pending[i], errs[i] = c.log.SubmitAfter(ctx, rec, *after)
		} else {
			pending[i], errs[i] = c.log.Submit(ctx, rec)
		}
	}
	out := make([]Record, len(recs))
	type retain struct {
		actor string
		clock uint64 // the thread's last clock among the records that landed
		saved []int  // the checkpoints that landed, by index
	}
	var threads map[string]*retain
	for i, p := range pending {
		if p == nil {
			continue
		}
		e, err := p.Wait(ctx)
		if err != nil {
			errs[i] = err
			continue
		}
		out[i] = Record{ID: e.ID, Clock: e.Clock, Record: e.Record}
		h := e.Record.Header
		if r := threads[h.Thread]; r != nil {
			r.clock = max(r.clock, e.Clock)
		}
		if h.Kind != records.KindCheckpoint {
			continue
		}
		if threads == nil {
			threads = make(map[string]*retain)
		}
		r := threads[h.Thread]
		if r == nil {
			r = &retain{clock: e.Clock}
			threads[h.Thread] = r
		}
		r.actor, r.clock = h.Actor, max(r.clock, e.Clock)
		r.saved = append(r.saved, i)
	}
	for thread, r := range threads {
		res, err := c.enforceRetention(ctx, thread, r.actor, r.clock)
		if err != nil {
			for _, i := range r.saved {
				errs[i] = &RetentionError{Thread: thread, Err: err}
			}
			continue
		}
		// Erasures chained right after the thread's last record leave
		// the last checkpoint the head of its branch (lineage.go).
		if n := len(res.Erasures); n > 0 && res.chained {
			for _, i := range r.saved {
				if out[i].Clock == r.clock && !slices.Contains(res.Erased, out[i].ID) {
					out[i].after = res.Erasures[n-1].Clock
				}
			}
		}
	}
	return out, errs
}
