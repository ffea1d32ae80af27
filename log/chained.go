package log

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// AppendChained appends rec as it is sealed, its prev kept (Append chains
// a record on its thread's last one; an import keeps the ids records had
// where they were written, and after an erased record that is not the
// last one), on condition that its thread's last clock is after (0: the
// thread is empty). prevClock, when known, is the clock of the record
// prev names, for readers that walk the thread backwards. Each call is
// one publish of its own, outside the group commit: SyncStore makes what
// they stored durable. A thread that moved since after is an error
// wrapping ErrConflict, and nothing is stored. A door log refuses it
// (ErrNoDoor): spl serve's door takes only unchained records.
func (l *Log) AppendChained(ctx context.Context, rec *records.Record, after, prevClock uint64) (Entry, error) {
	if l.door != nil {
		return Entry{}, fmt.Errorf("spl/log: append chained: %w: the door takes unchained records only", ErrNoDoor)
	}
	if l.isClosed() {
		return Entry{}, ErrClosed
	}
	if err := rec.Validate(); err != nil {
		return Entry{}, err
	}
	data, err := rec.Marshal() // pack checks a large one's size

	if len(rec.Body) >= CompressMin && err == nil {
		var st records.Stored
		var packed bool
		if st, packed, err = l.pack(ctx, rec, len(data)); err == nil && packed {
			data, err = rec.MarshalStored(st)
		}
	}
	if err != nil {
		return Entry{}, fmt.Errorf("spl/log: append chained: %w", err)
	}
	if err := l.c.CheckRoom(len(data)); err != nil {
		return Entry{}, err
	}
	id := rec.ID()
	msg := recordMessage(rec, id, data)
	msg.Header.Set(hdrExpectSubjSeq, strconv.FormatUint(after, 10))
	msg.Header.Set(hdrExpectSubjName, ThreadSubject(rec.Header.Thread))
	if prevClock > 0 {
		msg.Header.Set(HeaderPrevClock, strconv.FormatUint(prevClock, 10))
	}
	actx, cancel := l.c.UntilAnswered(ctx, l.opts.Timeout)
	defer cancel()
	clock, err := natsio.PublishBatch(actx, l.c.NC, []*nats.Msg{msg})
	switch {
	case errors.Is(err, ErrExpectation):
		return Entry{}, fmt.Errorf("spl/log: append chained to %q: the thread moved past clock %d: %w (%w)", rec.Header.Thread, after, ErrConflict, err)
	case err != nil:
		return Entry{}, fmt.Errorf("spl/log: append chained to %q: %w", rec.Header.Thread, err)
	}
	l.mark.saw(clock, id)
	return Entry{Clock: clock, ID: id, Record: rec}, nil
}

// SyncStore makes durable what the stream stored, when this log's
// server leaves the fsync to it (the embedded log): what AppendChained
// stored, which no group commit covered.
func (l *Log) SyncStore() error {
	if l.blocks == nil {
		return nil
	}
	if err := l.blocks.Sync(); err != nil {
		return fmt.Errorf("spl/log: sync: %w", err)
	}
	return nil
}
