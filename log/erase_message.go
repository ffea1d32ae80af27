package log

import (
	"context"
	"errors"
	"fmt"

	"github.com/spl-dev/spl/records"
)

// EraseMessages erases messages of thread that are no records: messages at
// the given clocks, on the thread's subjects, that do not decode or do not
// verify (garbage published with the admin right, or a record damaged on
// disk), which Erase cannot name, having no id to name them by. It
// appends one core.erasure record whose targets name each by clock and
// digest (records.ErasureTarget.Message) and carries reason, then deletes
// the messages securely, as Erase does; verify then accounts for their
// clocks as erased.
//
// It refuses, changing nothing, a clock that holds no message and that no
// erasure of the thread names (ErrNotFound), and one whose message is on
// another thread, is an erasure record, or is a record that verifies
// (ErrNotErasable: erase a record by its id). A clock an earlier erasure
// of the thread erased is reported in AlreadyClocks and otherwise ignored.
func (l *Log) EraseMessages(ctx context.Context, thread string, clocks []uint64, reason, actor string, opts ...EraseOption) (EraseResult, error) {
	var o eraseOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(clocks) == 0 {
		return EraseResult{}, &records.FieldError{Field: "clocks", Rule: "must name at least one message"}
	}
	targets, already, err := l.messageTargets(ctx, thread, clocks)
	if err != nil {
		return EraseResult{}, err
	}
	res := EraseResult{AlreadyClocks: already}
	if len(targets) == 0 {
		return res, nil
	}
	res, err = l.eraseNew(ctx, thread, actor, reason, targets, o, res)
	res.AlreadyClocks = already
	if err == nil {
		res.ErasedClocks = messageClocks(targets)
	}
	return res, err
}

// messageClocks are the clocks of the message targets of targets.
func messageClocks(targets []records.ErasureTarget) []uint64 {
	var cs []uint64
	for _, t := range targets {
		if t.Message() {
			cs = append(cs, t.Clock)
		}
	}
	return cs
}

// messageTargets resolves clocks on thread: the targets naming the
// messages there that are no records, and the clocks an erasure of the
// thread erased already.
func (l *Log) messageTargets(ctx context.Context, thread string, clocks []uint64) ([]records.ErasureTarget, []uint64, error) {
	erased := make(map[uint64]bool)
	err := l.scan(ctx, RecordSubject(thread, records.KindErasure), 1, 0, 256, func(m stored) bool {
		e, err := l.decode(m)
		if err != nil {
			return true // a corrupt erasure record erases nothing
		}
		if er, err := records.DecodeErasure(e.Record.Body); err == nil {
			for _, t := range er.Targets {
				if t.Message() {
					erased[t.Clock] = true
				}
			}
		}
		return true
	})
	if err != nil {
		return nil, nil, fmt.Errorf("erase: read erasures of thread %q: %w", thread, err)
	}
	var targets []records.ErasureTarget
	var already []uint64
	seen := make(map[uint64]bool)
	for _, c := range clocks {
		if seen[c] {
			continue
		}
		seen[c] = true
		if erased[c] {
			already = append(already, c)
			continue
		}
		if c == 0 {
			return nil, nil, &records.FieldError{Field: "clocks", Rule: "must be positive, got 0"}
		}
		m, err := l.get(ctx, getRequest{Seq: c})
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, nil, fmt.Errorf("erase: clock %d: no message there, and no erasure of thread %q names it: %w", c, thread, ErrNotFound)
		case err != nil:
			return nil, nil, fmt.Errorf("erase: read clock %d: %w", c, err)
		case subjectToken(m.subject) != ThreadToken(thread):
			return nil, nil, fmt.Errorf("%w: clock %d is on subject %s, not on thread %q", ErrNotErasable, c, m.subject, thread)
		case isErasureSubject(m.subject):
			return nil, nil, fmt.Errorf("%w: clock %d is on an erasure subject; erasures stay as the audit trail", ErrNotErasable, c)
		}
		if e, err := l.decode(m); err == nil {
			return nil, nil, fmt.Errorf("%w: clock %d holds record %s, which verifies: erase it by its id", ErrNotErasable, c, e.ID)
		}
		targets = append(targets, records.ErasureTarget{Clock: c, Digest: records.MessageDigest(m.data)})
	}
	return targets, already, nil
}
