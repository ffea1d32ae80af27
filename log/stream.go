package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrStreamChanged reports a log stream whose configuration was changed
// behind the log's back (limits that drop records, sources or a mirror
// that bring in records no rule checked, other subjects): the log refuses
// to run on it, and the error names what changed. An administrator puts
// the settings back (nats stream edit, with the admin token) or restores
// the stream from a backup.
var ErrStreamChanged = errors.New("spl/log: stream configuration changed")

// StreamChanges lists what in have, the configuration of a log stream,
// differs from want (StreamConfig) in a way that loses records or lets in
// records that no rule checked: limits, sources, a mirror, subjects,
// transforms, republishing, rollups, message TTLs and a sealed stream.
// Settings the log's owner brings up to date itself (provision) are not
// among them. It is a pure function; nil means none.
func StreamChanges(have, want jetstream.StreamConfig) []string {
	var ch []string
	add := func(format string, args ...any) { ch = append(ch, fmt.Sprintf(format, args...)) }
	if !slices.Equal(have.Subjects, want.Subjects) {
		add("subjects %v, not %v", have.Subjects, want.Subjects)
	}
	if have.Retention != want.Retention {
		add("retention %s, not %s", have.Retention, want.Retention)
	}
	limit := func(name string, v int64) {
		if v > 0 {
			add("%s %d (the log keeps every record: no limit)", name, v)
		}
	}
	limit("max_msgs", have.MaxMsgs)
	limit("max_bytes", have.MaxBytes)
	limit("max_msgs_per_subject", have.MaxMsgsPerSubject)
	if have.MaxAge > 0 {
		add("max_age %s (the log keeps every record: no limit)", have.MaxAge)
	}
	if have.Mirror != nil {
		add("a mirror of %s", have.Mirror.Name)
	}
	for _, s := range have.Sources {
		if s != nil {
			add("a source %s", s.Name)
		}
	}
	if have.SubjectTransform != nil {
		add("a subject transform %s → %s", have.SubjectTransform.Source, have.SubjectTransform.Destination)
	}
	if have.RePublish != nil {
		add("republishing %s → %s", have.RePublish.Source, have.RePublish.Destination)
	}
	if have.AllowRollup {
		add("rollup headers allowed (a publish could purge a thread)")
	}
	if have.AllowMsgTTL {
		add("message TTLs allowed (a record could expire)")
	}
	if have.Sealed {
		add("sealed")
	}
	if have.Storage != want.Storage {
		add("storage %s, not %s", have.Storage, want.Storage)
	}
	return ch
}

// streamChanged is the error of StreamChanges' list ch for stream.
func streamChanged(stream string, ch []string) error {
	return fmt.Errorf("%w: stream %s has %s; put it back with the admin token, or restore the stream", ErrStreamChanged, stream, strings.Join(ch, "; "))
}

// checkStream refuses a stream whose configuration was changed behind the
// log's back (StreamChanges): a door log's check at open, where the
// server owns the stream.
func (l *Log) checkStream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	s, err := l.c.JS.Stream(ctx, l.opts.Stream)
	if err != nil {
		return fmt.Errorf("spl/log: stream %s: %w", l.opts.Stream, err)
	}
	have := s.CachedInfo().Config
	if ch := StreamChanges(have, StreamConfig(l.opts.Stream, have.Replicas)); len(ch) > 0 {
		return streamChanged(l.opts.Stream, ch)
	}
	return nil
}

// State is what one look at the stream finds (Log.State).
type State struct {
	Stats Stats
	// Changed, when not nil, says what of the stream's configuration was
	// changed behind the log's back (an error wrapping ErrStreamChanged).
	Changed error
	// Loss is what the stream lacks behind the high-water mark, or nil.
	Loss *MarkLoss
}

// State reads the stream's information once and reports from it the
// statistics, a configuration changed behind the log's back
// (StreamChanges) and a loss behind the high-water mark (CheckMark):
// spl serve's health check, so that a change made while it runs shows at
// once.
func (l *Log) State(ctx context.Context) (State, error) {
	if l.readsClosed() {
		return State{}, ErrClosed
	}
	s, err := l.c.JS.Stream(ctx, l.opts.Stream)
	if streamGone(err) {
		// A stream deleted behind the log's back is loss, when the mark
		// says records were there.
		if loss, _ := l.goneLoss(err); loss != nil {
			return State{Loss: loss}, nil
		}
	}
	if err != nil {
		return State{}, fmt.Errorf("stream info: %w", err)
	}
	info := s.CachedInfo()
	st := State{Stats: statsOf(info)}
	if ch := StreamChanges(info.Config, StreamConfig(l.opts.Stream, info.Config.Replicas)); len(ch) > 0 {
		st.Changed = streamChanged(l.opts.Stream, ch)
	}
	if st.Loss, err = l.markLoss(ctx, st.Stats); err != nil {
		return st, fmt.Errorf("check mark: %w", err)
	}
	return st, nil
}
