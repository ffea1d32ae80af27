package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/records"
)

// Stats is the state of the log's stream.
type Stats struct {
	Records    uint64 // messages stored
	Bytes      uint64 // bytes stored
	FirstClock uint64 // clock of the oldest stored record (0: none)
	LastClock  uint64 // clock of the newest record ever appended (0: none)
	Replicas   int    // replicas of the stream
}

// Stats returns the state of the log's stream: one request, no record read.
func (l *Log) Stats(ctx context.Context) (Stats, error) {
	if l.readsClosed() {
		return Stats{}, ErrClosed
	}
	s, err := l.c.JS.Stream(ctx, l.opts.Stream)
	if err != nil {
		return Stats{}, fmt.Errorf("stream info: %w", err)
	}
	return statsOf(s.CachedInfo()), nil
}

// statsOf is the Stats of a stream's information.
func statsOf(info *jetstream.StreamInfo) Stats {
	st := info.State
	return Stats{Records: st.Msgs, Bytes: st.Bytes, FirstClock: st.FirstSeq, LastClock: st.LastSeq, Replicas: info.Config.Replicas}
}

// ThreadsWith lists, sorted, the threads that hold records of kind, from
// the stream's per-subject counts (no record is read). Like a read, it
// is asked again of the next owner when the connection drops before the
// answer (an embedded server's owner that died).
func (l *Log) ThreadsWith(ctx context.Context, kind string) ([]string, error) {
	if err := records.CheckKind(kind); err != nil {
		return nil, fmt.Errorf("threads with %s: %w", kind, err)
	}
	if l.readsClosed() {
		return nil, ErrClosed
	}
	var subjects map[string]uint64
	err := l.retryLost(ctx, func(ctx context.Context) error {
		s, err := l.c.JS.Stream(ctx, l.opts.Stream)
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(SubjectPrefix+".*."+kind))
		if err != nil {
			return fmt.Errorf("stream info: %w", err)
		}
		subjects = info.State.Subjects
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for subj, n := range subjects {
		if n == 0 || subjectKind(subj) != kind {
			continue
		}
		if t, ok := ThreadOfSubject(subj); ok {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ThreadOfSubject returns the thread of a record subject,
// spl.rec.<thread-token>.<kind…>; ok is false for any other subject.
func ThreadOfSubject(subject string) (string, bool) {
	if !strings.HasPrefix(subject, SubjectPrefix+".") {
		return "", false
	}
	return ThreadFromToken(subjectToken(subject))
}

// Claimants returns the clocks of the messages stored under subject whose
// id header claims id, reading headers only: for a record that did not
// verify, where its copies are.
func (l *Log) Claimants(ctx context.Context, subject string, id records.ID) ([]uint64, error) {
	if l.readsClosed() {
		return nil, ErrClosed
	}
	s, err := l.c.JS.Stream(ctx, l.opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	if len(info.State.Subjects) == 0 {
		return nil, nil
	}
	if l.door != nil {
		// No consumer for a door log's credentials: whole messages by
		// direct gets.
		var clocks []uint64
		err := l.scan(ctx, subject, 1, 0, readPage, func(m stored) bool {
			if m.hdr.Get(HeaderID) == id.String() {
				clocks = append(clocks, m.clock)
			}
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("read headers: %w", err)
		}
		return clocks, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		HeadersOnly:    true,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	defer it.Stop()
	want := id.String()
	var clocks []uint64
	for {
		// The subject held messages a moment ago; a quiet consumer means
		// they went since.
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := it.Next(jetstream.NextContext(mctx))
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return clocks, nil
			}
			return nil, fmt.Errorf("read headers: %w", err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("read headers: %w", err)
		}
		if m.Headers().Get(HeaderID) == want {
			clocks = append(clocks, meta.Sequence.Stream)
		}
		if meta.NumPending == 0 {
			return clocks, nil
		}
	}
}

// Raw returns the record stored at clock decoded without verification:
// what a message that failed verification claims to be (without its body
// when the body is kept outside). It returns
// ErrNotFound when the clock holds no message, and an error when its
// bytes are no record at all.
func (l *Log) Raw(ctx context.Context, clock uint64) (*records.Record, error) {
	m, err := l.get(ctx, getRequest{Seq: clock})
	if err != nil {
		return nil, err
	}
	var rec *records.Record
	if records.Packed(m.data) {
		rec, _, err = records.UnmarshalStored(m.data) // its header: the body may be what is wrong
	} else {
		rec, err = records.Unmarshal(m.data)
	}
	if err != nil {
		return nil, fmt.Errorf("clock %d: %w", clock, err)
	}
	return rec, nil
}
