package projections

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Status is where a projection stands.
type Status struct {
	Name        string
	Clock       uint64        // every record up to this clock is applied
	LogClock    uint64        // the clock of the newest record in the log
	Lag         uint64        // records in the log after Clock
	LagTime     time.Duration // how long the oldest of them has waited (0 when none)
	Corrupt     uint64        // messages skipped because they did not verify
	LastCorrupt uint64        // the clock of the last of them
	Holder      string        // the process applying the projection; "" when none
	RebuildTo   uint64        // while a rebuild runs, the clock it runs to
	Updated     time.Time     // when the position was last stored
}

// Status returns where the projection stands, from the stored position
// and the log.
func (r *Runtime) Status(ctx context.Context) (Status, error) {
	pos, _, err := r.readPosition(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
	}
	s := Status{
		Name: r.Name(), Clock: pos.Clock, Corrupt: pos.Corrupt, LastCorrupt: pos.LastCorrupt,
		RebuildTo: pos.RebuildTo,
	}
	if pos.Reset && pos.RebuildTo == 0 {
		s.RebuildTo = 1
	}
	if pos.Updated != 0 {
		s.Updated = time.UnixMilli(pos.Updated).UTC()
	}
	ls := r.newLease()
	if v, rev, err := ls.read(ctx); err == nil && ls.live(v, rev) {
		s.Holder = v.Holder
	}
	if s.LogClock, err = r.log.LastClock(ctx); err != nil {
		return Status{}, fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
	}
	// One batched get: the oldest message not applied, and how many follow.
	ms, pending, err := r.d.batch(ctx, r.log.StreamName(), getRequest{Seq: pos.Clock + 1, Batch: 1})
	if err != nil {
		return Status{}, fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
	}
	if len(ms) > 0 {
		s.Lag = pending + 1
		s.LagTime = max(r.opts.Now().Sub(ms[0].time), 0)
	}
	return s, nil
}

// Wait waits until the projection has applied clock. When no process runs
// the projection, it catches the projection up itself (CatchUp), unless
// the runtime is read-only. When ctx
// ends first, it returns a *BehindError that says where the projection
// is; give ctx a deadline.
func (r *Runtime) Wait(ctx context.Context, clock uint64) error {
	_, err := r.WaitApplied(ctx, clock)
	return err
}

// WaitApplied is Wait, and returns the clock the projection had applied
// when the wait ended, as the stored position it read then says: at least
// clock, and every record up to it is in the read models read after.
func (r *Runtime) WaitApplied(ctx context.Context, clock uint64) (uint64, error) {
	start := r.opts.Now()
	// Every stored position is a message on the key's subject: a wait
	// wakes up as soon as the projector moves.
	moved, unsub := r.notify(r.posKey())
	defer unsub()
	ls := r.newLease()
	var pos position // the last position read: what the error reports
	var holder string
	for {
		p, _, err := r.readPosition(ctx)
		if err != nil && ctx.Err() == nil {
			return 0, fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
		}
		if err == nil {
			if !p.Reset && p.Clock >= clock {
				return p.Clock, nil
			}
			pos = p
		}
		if ctx.Err() != nil {
			break
		}
		v, rev, err := ls.read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break // keep the holder read before
			}
			return 0, fmt.Errorf("spl/projections: %s: %w", r.Name(), err)
		}
		holder = ""
		if ls.live(v, rev) {
			holder = v.Holder
		} else if ctx.Err() == nil && !r.opts.ReadOnly {
			// Nobody runs it: run it here, as far as the wait needs.
			err := r.CatchUp(ctx, clock)
			switch {
			case err == nil:
				if p, _, err := r.readPosition(ctx); err == nil {
					if !p.Reset && p.Clock >= clock {
						return p.Clock, nil
					}
					pos = p
				}
				// The clock is not in the log yet: wait for it below.
			case errors.Is(err, ErrBusy), ctx.Err() != nil:
			default:
				return 0, err
			}
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-moved:
		case <-t.C:
		}
		t.Stop()
	}
	return 0, &BehindError{Name: r.Name(), Clock: pos.Clock, Want: clock, Holder: holder, Waited: r.opts.Now().Sub(start), Err: ctx.Err()}
}
