package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/projections/fold"
)

// idleTick is how often an idle projector looks for work beyond messages:
// a handover asked for, a log whose last messages were deleted.
const idleTick = 100 * time.Millisecond

// follow consumes the log from the stored position and applies it, batch
// by batch. It returns handed true when another process asked for the
// lease, with the lease still to grant.
func (r *Runtime) follow(ctx context.Context, ls *lease, done func(position) bool, progress func(position)) (handed bool, err error) {
	f, err := r.newFollower(ctx, ls, done, progress)
	if err != nil {
		return false, err
	}
	if done != nil && done(f.pos) {
		return false, nil
	}
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	msgs, stop, err := r.consume(fctx, f.pos.Clock+1)
	if err != nil {
		return false, err
	}
	defer stop()
	// Decoding (verifying every message) runs beside applying and
	// storing: the next batch is decoded while the last one is stored.
	decoded := make(chan decodedBatch, 1)
	go r.decodeLoop(fctx, msgs, decoded)
	return f.run(ctx, decoded)
}

// follower is one follow of the log: the state it folds into, the
// position it stores, and the batches it holds.
type follower struct {
	r        *Runtime
	ls       *lease
	done     func(position) bool // nil: until ctx ends or the lease goes
	progress func(position)      // nil: no reports
	st       *fold.State
	pos      position
	rev      uint64 // revision of the stored position
	// Batches applied but not yet stored: while the log has more waiting,
	// the changes of several batches are stored together, so that a value
	// changed by many of them is written once (a rebuild, a projector far
	// behind). held is the clock they reach, 0 when nothing is held.
	held      uint64
	heldSince time.Time
	idleTicks int // idle ticks since the follow began
}

// newFollower starts a follow at the stored position: it empties the read
// models first when the position asks for it (a rebuild) or is past the
// end of the log.
func (r *Runtime) newFollower(ctx context.Context, ls *lease, done func(position) bool, progress func(position)) (*follower, error) {
	pos, rev, err := r.readPosition(ctx)
	if err != nil {
		return nil, err
	}
	if !pos.Reset && pos.Clock > 0 {
		if pos.Reset, err = r.pastEnd(ctx, pos.Clock); err != nil {
			return nil, err
		}
	}
	f := &follower{
		r: r, ls: ls, done: done, progress: progress, pos: pos, rev: rev,
		st: fold.NewState(r.fold, r.models, r.hist, r.opts.CacheSize),
	}
	if f.pos.Reset {
		if err := f.reset(ctx); err != nil {
			return nil, err
		}
	}
	f.st.SetBase(f.pos.Clock)
	return f, nil
}

// pastEnd reports whether clock, a stored position, is past the end of
// the log.
func (r *Runtime) pastEnd(ctx context.Context, clock uint64) (bool, error) {
	last, err := r.log.LastClock(ctx)
	if err != nil {
		return false, fmt.Errorf("end of the log: %w", err)
	}
	if clock <= last {
		return false, nil
	}
	// The read models are ahead of their log: the log lost its tail (on
	// the embedded log, a power loss before the writer's fsync; KV is
	// written without one) or was replaced. They may hold what the log no
	// longer has: rebuild them.
	r.opts.Logf("spl/projections: %s: position %d is past the end of the log (%d); rebuilding", r.Name(), clock, last)
	return true, nil
}

// reset empties the read models and stores the position at the start of
// the log.
func (f *follower) reset(ctx context.Context) error {
	for _, m := range f.r.fold.Models() {
		if err := f.r.store.purge(ctx, m); err != nil {
			return err
		}
	}
	f.pos.Reset, f.pos.Clock, f.pos.Corrupt, f.pos.LastCorrupt = false, 0, 0, 0
	var err error
	if f.rev, err = f.r.writePosition(ctx, f.pos, f.rev, f.ls.holder); err != nil {
		return err
	}
	f.st.Emptied()
	return nil
}

// consume starts an ordered consumer of the log from clock from. Its
// messages come on msgs until ctx ends; stop stops it.
func (r *Runtime) consume(ctx context.Context, from uint64) (msgs <-chan jetstream.Msg, stop func(), err error) {
	cons, err := r.conn.JS.OrderedConsumer(ctx, r.log.StreamName(), jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   from,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("consumer: %w", err)
	}
	ch := make(chan jetstream.Msg, min(r.opts.MaxBatch, 4096))
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case ch <- m:
		case <-ctx.Done():
		}
	}, jetstream.PullMaxMessagesWithBytesLimit(min(r.opts.MaxBatch, 4096), maxBatchBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("consume: %w", err)
	}
	return ch, cc.Stop, nil
}

// run applies the decoded batches until ctx ends, done says so, or
// another process asks for the lease (handed true).
func (f *follower) run(ctx context.Context, decoded <-chan decodedBatch) (handed bool, err error) {
	tick := time.NewTimer(idleTick)
	defer tick.Stop()
	for {
		tick.Reset(idleTick)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case b := <-decoded:
			err = f.batch(ctx, b)
		case <-tick.C:
			err = f.idle(ctx)
		}
		if err != nil {
			return false, err
		}
		if f.done != nil && f.done(f.pos) {
			return false, nil
		}
		if f.ls.asked() != "" {
			// Hand over: store what is held first.
			if err := f.store(ctx); err != nil {
				return false, err
			}
			return true, nil
		}
	}
}

// batch applies a decoded batch, and stores the changes held when the
// hold ends.
func (f *follower) batch(ctx context.Context, b decodedBatch) error {
	if b.err != nil {
		return b.err
	}
	if err := f.absorb(ctx, b); err != nil {
		return err
	}
	if f.held == 0 {
		f.heldSince = f.r.opts.Now()
	}
	f.held = b.last
	if f.hold(b.pending) {
		return nil
	}
	return f.store(ctx)
}

// absorb applies one batch of messages, and counts in the position the
// messages that did not verify.
func (f *follower) absorb(ctx context.Context, b decodedBatch) error {
	if len(b.corrupt) > 0 {
		f.pos.Corrupt += uint64(len(b.corrupt))
		f.pos.LastCorrupt = b.corrupt[len(b.corrupt)-1]
		f.r.opts.Logf("spl/projections: %s: skipped %d messages that do not verify (last at clock %d)", f.r.Name(), len(b.corrupt), f.pos.LastCorrupt)
	}
	return f.st.Apply(ctx, b.entries)
}

// hold reports whether the changes held may wait for more batches: the
// consumer has pending more messages, the hold is within
// Options.MaxHeld and Options.MaxHold, and done does not want the clock
// held.
func (f *follower) hold(pending uint64) bool {
	o := &f.r.opts
	return pending > 0 && f.st.Held() < o.MaxHeld && o.Now().Sub(f.heldSince) < o.MaxHold &&
		(f.done == nil || !f.done(f.pos.after(f.held)))
}

// idle runs when no batch came for an idleTick: it stores what is held,
// and passes over messages deleted at the end of the log, so that a wait
// for their clocks ends. (The log never deletes its last message itself:
// an erasure comes after the records it deletes.) A catch-up looks at
// once, a projector that runs every second.
func (f *follower) idle(ctx context.Context) error {
	if err := f.store(ctx); err != nil {
		return err
	}
	if f.idleTicks++; f.done != nil || f.idleTicks%10 == 0 {
		return f.passDeleted(ctx)
	}
	return nil
}

// store stores the changes held, then the position they reach, and
// reports progress.
func (f *follower) store(ctx context.Context) error {
	if f.held == 0 {
		return nil
	}
	last := f.held
	f.held = 0
	if err := f.save(ctx, last); err != nil {
		return err
	}
	if f.progress != nil {
		f.progress(f.pos)
	}
	return nil
}

// save stores the changes the state holds, then the position after clock
// last.
func (f *follower) save(ctx context.Context, last uint64) error {
	ws, err := f.st.Changes()
	if err != nil {
		return err
	}
	if !f.ls.valid() {
		return fmt.Errorf("lease not renewed in time: %w", ErrConflict)
	}
	revs, err := f.r.models.Commit(ctx, ws)
	if err != nil {
		return err
	}
	f.st.Committed(ws, revs)
	f.pos = f.pos.after(last)
	if f.rev, err = f.r.writePosition(ctx, f.pos, f.rev, f.ls.holder); err != nil {
		return err
	}
	f.st.SetBase(f.pos.Clock)
	return nil
}

// passDeleted moves the position to the end of the log when every message
// after it is deleted (erased records at the end of the log): the consumer
// delivers nothing for them.
func (f *follower) passDeleted(ctx context.Context) error {
	r := f.r
	end, err := r.log.LastClock(ctx)
	if err != nil || end <= f.pos.Clock {
		return err
	}
	ms, _, err := r.d.batch(ctx, r.log.StreamName(), getRequest{Seq: f.pos.Clock + 1, Batch: 1})
	if err != nil || len(ms) > 0 {
		return err // a message to come: the consumer delivers it
	}
	f.pos = f.pos.after(end)
	f.rev, err = r.writePosition(ctx, f.pos, f.rev, f.ls.holder)
	return err
}

// after returns p moved to clock: a rebuild that reached its end is done.
func (p position) after(clock uint64) position {
	p.Clock = clock
	if p.RebuildTo != 0 && p.Clock >= p.RebuildTo {
		p.RebuildTo = 0
	}
	return p
}
