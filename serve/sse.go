package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// tailBuffer is how many records a tail holds between the follow and a
// slow HTTP client (the follow bounds its own buffer in bytes, log.Follow);
// beyond it the follow waits.
const tailBuffer = 4

// handleTail streams the records of a thread as Server-Sent Events:
//
//	id: <clock>
//	event: record
//	data: <record JSON>
//
// from the clock ?from= (or the Last-Event-ID a reconnecting client sends,
// plus one), else from the records appended after the request. A message
// that fails verification is sent as an event "corrupt" and the tail goes
// on. A comment line is sent every heartbeat interval; the tail ends when
// the client goes away or the server shuts down, or when it falls behind:
// a reader that takes no record for HTTPWriteTimeout while records wait
// is cut off. A tail holds at most tailBuffer records and the follow's
// buffer (two of the largest records) of the server's memory.
func (s *Server) handleTail(w http.ResponseWriter, r *http.Request) {
	s.tail(w, r, r.PathValue("thread"))
}

// handleTailAll is handleTail of every thread (GET /v1/events): the
// records of the whole log, in clock order, each event's id its clock.
func (s *Server) handleTailAll(w http.ResponseWriter, r *http.Request) {
	s.tail(w, r, "")
}

// tail streams the records of thread, or of every thread when it is "".
func (s *Server) tail(w http.ResponseWriter, r *http.Request, thread string) {
	l := s.liveLog(w)
	if l == nil {
		return
	}
	from, err := uintParam(r.URL.Query(), "from", 0, 0, maxClock)
	if err == nil && thread != "" {
		err = records.CheckThread(thread)
	}
	if err != nil {
		s.m.refused.WithLabelValues("bad_param").Inc()
		s.fail(w, r, err)
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		c, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			s.refuse(w, http.StatusBadRequest, "bad_param", wire.Error{Error: "Last-Event-ID: must be a clock", Field: "Last-Event-ID", Rule: "must be a clock"})
			return
		}
		from = c + 1
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.tails, cancel) // shutdown ends the tail
	defer stop()
	if from == 0 {
		// Only what comes after this request: fixed before the answer
		// starts, so a record appended once the client has the headers is
		// always delivered.
		last, err := l.LastClock(ctx)
		if err != nil {
			s.fail(w, r, fmt.Errorf("tail: %w", err))
			return
		}
		from = last + 1
	}
	type followed struct {
		rec sdk.Record
		err error
	}
	msgs := make(chan followed, tailBuffer)
	behind := make(chan struct{})
	go func() {
		// A reader that takes no record for a whole write timeout while
		// more wait is cut off: what it holds of the server stays bounded
		// (tailBuffer records and the follow's own buffer), and it resumes
		// with the Last-Event-ID of the last record it took.
		stall := time.NewTimer(s.cfg.HTTPWriteTimeout)
		defer stall.Stop()
		follow := l.FollowAll(ctx, from)
		if thread != "" {
			follow = l.Follow(ctx, thread, from)
		}
		for rec, err := range follow {
			stall.Reset(s.cfg.HTTPWriteTimeout)
			select {
			case msgs <- followed{rec, err}:
			case <-ctx.Done():
				return
			case <-stall.C:
				close(behind)
				return
			}
		}
	}()

	env := wantEnvelope(r)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	of := "every thread"
	if thread != "" {
		of = strconv.Quote(thread)
	}
	if _, err := fmt.Fprintf(w, ": tail of %s from clock %d\n\n", of, from); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	s.m.tails.Inc()
	defer s.m.tails.Dec()
	login := credentialOf(ctx).id // a tail of a login ends with it
	beat := time.NewTicker(s.cfg.Heartbeat)
	defer beat.Stop()
	var buf bytes.Buffer
	for {
		buf.Reset()
		select {
		case <-ctx.Done():
			return
		case <-behind:
			s.m.refused.WithLabelValues("tail_behind").Inc()
			s.logger.Warn("tail: the reader fell behind; cut off (it resumes with Last-Event-ID)", "thread", thread, "remote", r.RemoteAddr)
			return
		case <-beat.C:
			if login != "" && !s.logins.alive(login) {
				return // logged out, or the login ended: so does its tail
			}
			buf.WriteString(": heartbeat\n\n")
		case m := <-msgs:
			if err := s.tailEvent(&buf, m.rec, m.err, env); err != nil {
				s.logger.Warn("tail: event", "thread", thread, "err", err)
				return
			}
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return // the client went away
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// tailEvent writes the event of one followed record to buf: the record,
// or a message that failed verification.
func (s *Server) tailEvent(buf *bytes.Buffer, rec sdk.Record, err error, env bool) error {
	clock := rec.Clock
	var event string
	var v any
	var ce *sdk.CorruptError
	switch {
	case errors.As(err, &ce):
		s.m.corrupt.WithLabelValues("tail").Inc()
		clock = ce.Clock
		event, v = "corrupt", wire.Corrupt{Clock: ce.Clock, Subject: ce.Subject, Reason: ce.Reason}
	case err != nil:
		return err
	default:
		j, err := newRecordJSON(rec)
		if err == nil {
			err = addEnvelope(&j, rec, env)
		}
		if err != nil {
			return err
		}
		event, v = "record", j
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode clock %d: %w", clock, err)
	}
	fmt.Fprintf(buf, "id: %d\nevent: %s\ndata: %s\n\n", clock, event, data)
	return nil
}
