package log

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Headers of the JetStream publish protocol that the writer uses. The
// atomic batch headers are ADR-50's; nats.go has no helper for them.
const (
	hdrBatchID        = "Nats-Batch-Id"
	hdrBatchSeq       = "Nats-Batch-Sequence"
	hdrBatchCommit    = "Nats-Batch-Commit"
	hdrExpectSubjSeq  = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectSubjName = "Nats-Expected-Last-Subject-Sequence-Subject"
)

// Classes of a refused publish, for PublishBatch's callers.
var (
	// ErrExpectation reports a publish refused because an expectation
	// header (a last sequence, per subject or not) no longer held: nothing
	// of it was stored.
	ErrExpectation = errors.New("spl/log: expectation failed")
	// ErrRefused reports a publish the server refused for another reason:
	// nothing of it was stored.
	ErrRefused = errors.New("spl/log: publish refused")
)

// The writer's names for them.
var (
	errStale   = ErrExpectation // a chain expectation failed; refresh heads and retry
	errRefused = ErrRefused
)

// pubAck is the server's answer to a publish or a batch commit.
type pubAck struct {
	Seq   uint64 `json:"seq"`
	Batch string `json:"batch"`
	Count uint64 `json:"count"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// send publishes batch: a lone record as a plain publish, more as one atomic
// batch, which the server writes with one fsync. It returns the clock of
// the first record. An error that is neither errStale nor errRefused means
// the outcome is unknown.
//
// Once sent, a batch is no longer the callers' to cancel: the writer waits
// for the server's answer up to Options.Timeout whatever their contexts say,
// so that an append is reported landed or not, rarely in doubt.
//
// A batch in flight when the connection drops is in doubt at once: its
// answer cannot come any more, so the writer does not wait out the timeout.
func (w *writer) send(batch []*Pending) (uint64, error) {
	ctx, cancel := w.l.untilLost(context.Background(), w.l.opts.Timeout)
	defer cancel()
	msgs := make([]*nats.Msg, len(batch))
	for i, p := range batch {
		msgs[i] = w.message(p)
	}
	return PublishBatch(ctx, w.l.nc, msgs)
}

// PublishBatch publishes msgs to their stream as one atomic batch (ADR-50:
// headers Nats-Batch-Id, Nats-Batch-Sequence, Nats-Batch-Commit, which it
// sets on msgs), or a lone message as a plain publish, and returns the
// stream sequence of the first; the others follow it one by one. The
// server stores all of them or none. A refusal wraps ErrExpectation or
// ErrRefused (nothing stored); any other error leaves the outcome unknown.
// The stream needs AllowAtomicPublish for more than one message.
func PublishBatch(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) (uint64, error) {
	switch len(msgs) {
	case 0:
		return 0, fmt.Errorf("%w: empty batch", ErrRefused)
	case 1:
		resp, err := nc.RequestMsgWithContext(ctx, msgs[0])
		if err != nil {
			return 0, fmt.Errorf("publish: %w", err)
		}
		ack, err := parseAck(resp.Data)
		if err != nil {
			return 0, err
		}
		return ack.Seq, nil
	}
	id := nuid.Next()
	last := len(msgs) - 1
	for i, msg := range msgs[:last] {
		msg.Header.Set(hdrBatchID, id)
		msg.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if err := nc.PublishMsg(msg); err != nil {
			return 0, fmt.Errorf("publish batch: %w", err)
		}
	}
	commit := msgs[last]
	commit.Header.Set(hdrBatchID, id)
	commit.Header.Set(hdrBatchSeq, strconv.Itoa(len(msgs)))
	commit.Header.Set(hdrBatchCommit, "1")
	resp, err := nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		return 0, fmt.Errorf("commit batch: %w", err)
	}
	ack, err := parseAck(resp.Data)
	if err != nil {
		return 0, err
	}
	if ack.Batch != id || ack.Count != uint64(len(msgs)) {
		return 0, fmt.Errorf("commit batch: ack for batch %q count %d, sent %q count %d", ack.Batch, ack.Count, id, len(msgs))
	}
	return ack.Seq - ack.Count + 1, nil
}

// message is p's record as a NATS message: the envelope, its id, and, for
// the first record of a thread, the thread's expected last clock.
func (w *writer) message(p *Pending) *nats.Msg {
	t := p.rec.Header.Thread
	msg := nats.NewMsg(RecordSubject(t, p.rec.Header.Kind))
	msg.Data = p.data
	msg.Header.Set(HeaderID, p.id.String())
	if p.first {
		msg.Header.Set(hdrExpectSubjSeq, strconv.FormatUint(p.expect, 10))
		msg.Header.Set(hdrExpectSubjName, ThreadSubject(t))
	}
	switch {
	case p.prevClock > 0:
		msg.Header.Set(HeaderPrevClock, strconv.FormatUint(p.prevClock, 10))
	case p.prevBack > 0:
		msg.Header.Set(HeaderPrevBack, strconv.Itoa(p.prevBack))
	}
	if p.back != "" {
		msg.Header.Set(HeaderBack, p.back)
	}
	return msg
}

// parseAck reads the server's answer to a publish.
func parseAck(data []byte) (pubAck, error) {
	if ack, ok := parsePlainAck(data); ok {
		return ack, nil
	}
	var ack pubAck
	if err := json.Unmarshal(data, &ack); err != nil {
		return ack, fmt.Errorf("publish: unreadable ack %q: %w", data, err)
	}
	if ack.Error != nil {
		d := ack.Error.Description
		if strings.Contains(d, "wrong last sequence") || strings.Contains(d, "last sequence mismatch") {
			return ack, fmt.Errorf("%w: %s", errStale, d)
		}
		return ack, fmt.Errorf("%w: %s (code %d)", errRefused, d, ack.Error.ErrCode)
	}
	if ack.Seq == 0 {
		return ack, fmt.Errorf("publish: ack without sequence: %q", data)
	}
	return ack, nil
}

// parsePlainAck reads the answer every landed plain publish gets,
// {"stream":"<name>","seq":<clock>} exactly as the server writes it,
// without encoding/json: one per append, on the writer's goroutine. It
// reports false for anything else (an error, a batch's answer, another
// layout), which parseAck then reads with encoding/json.
func parsePlainAck(data []byte) (pubAck, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"stream":"`))
	if !ok {
		return pubAck{}, false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return pubAck{}, false
	}
	digits, ok := bytes.CutPrefix(rest[i+1:], []byte(`,"seq":`))
	if !ok {
		return pubAck{}, false
	}
	if digits, ok = bytes.CutSuffix(digits, []byte("}")); !ok || len(digits) == 0 || len(digits) > 19 || digits[0] == '0' {
		return pubAck{}, false // 19 digits always fit a uint64; 0 and leading zeros are not a clock
	}
	var seq uint64
	for _, d := range digits {
		if d < '0' || d > '9' {
			return pubAck{}, false
		}
		seq = seq*10 + uint64(d-'0')
	}
	return pubAck{Seq: seq}, true
}

// ackResult is the answer to one pipelined publish.
type ackResult struct {
	seq uint64
	err error // nil, errStale, errRefused, or else unknown outcome
}

// round is one set of pipelined publishes awaiting their answers.
type round struct {
	a       *Answers
	res     []ackResult
	waiting int
}

// publishEach sends every message as a plain publish without waiting
// between them, the answers to come on rs; round.wait collects them.
func (l *Log) publishEach(rs *replies, msgs []*nats.Msg) *round {
	r := &round{a: rs.open(len(msgs)), res: make([]ackResult, len(msgs))}
	for i, msg := range msgs {
		msg.Reply = r.a.Reply(i)
		if err := l.nc.PublishMsg(msg); err != nil {
			r.res[i].err = fmt.Errorf("publish: %w", err)
			continue
		}
		r.res[i].err = errUnanswered
		r.waiting++
	}
	return r
}

// PublishEach publishes msgs as plain publishes, sent all at once, and
// returns each one's stream sequence, or its error: one wrapping
// ErrExpectation or ErrRefused when the server refused it (not stored),
// any other when its outcome is unknown. Each message lands or not on its
// own, where PublishBatch stores all or none.
func (l *Log) PublishEach(ctx context.Context, msgs []*nats.Msg) ([]uint64, []error) {
	res := l.publishEach(l.multi, msgs).wait(ctx)
	seqs, errs := make([]uint64, len(res)), make([]error, len(res))
	for i, r := range res {
		seqs[i], errs[i] = r.seq, r.err
	}
	return seqs, errs
}

// wait collects the round's answers until ctx ends. A message the server
// did not answer has an error that is neither errStale nor errRefused:
// its outcome is unknown.
func (r *round) wait(ctx context.Context) []ackResult {
	defer r.a.Done()
	for r.waiting > 0 {
		m, i, err := r.a.Next(ctx)
		if err != nil {
			for i := range r.res {
				if errors.Is(r.res[i].err, errUnanswered) {
					r.res[i].err = fmt.Errorf("publish: %w: %w", errUnanswered, err)
				}
			}
			break
		}
		if i >= len(r.res) || !errors.Is(r.res[i].err, errUnanswered) {
			continue
		}
		ack, err := parseAck(m.Data)
		r.res[i] = ackResult{seq: ack.Seq, err: err}
		r.waiting--
	}
	return r.res
}

// errUnanswered marks a publish whose answer has not come.
var errUnanswered = errors.New("no answer from the server")
