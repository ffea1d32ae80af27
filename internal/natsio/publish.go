package natsio

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

// Headers of ADR-50's atomic batch publish; nats.go has no helper for them.
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
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
			return ack, fmt.Errorf("%w: %s", ErrExpectation, d)
		}
		if ack.Error.ErrCode == errInsufficientResources {
			return ack, fmt.Errorf("%w: the server's storage is full (%s, code %d)", ErrDiskFull, d, ack.Error.ErrCode)
		}
		return ack, fmt.Errorf("%w: %s (code %d)", ErrRefused, d, ack.Error.ErrCode)
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

// Ack is the answer to one pipelined publish.
type Ack struct {
	Seq uint64 // the stream sequence it was stored at
	Err error  // nil, ErrExpectation, ErrRefused, ErrDiskFull, or else unknown outcome
}

// Round is one set of pipelined publishes awaiting their answers.
type Round struct {
	a       *Answers
	res     []Ack
	waiting int
}

// SendEach sends every message as a plain publish without waiting between
// them, the answers to come on a (opened for at least len(msgs)); the
// Round's Wait collects them.
func SendEach(nc *nats.Conn, a *Answers, msgs []*nats.Msg) *Round {
	r := &Round{a: a, res: make([]Ack, len(msgs))}
	for i, msg := range msgs {
		msg.Reply = r.a.Reply(i)
		if err := nc.PublishMsg(msg); err != nil {
			r.res[i].Err = fmt.Errorf("publish: %w", err)
			continue
		}
		r.res[i].Err = errUnanswered
		r.waiting++
	}
	return r
}

// PublishEach publishes msgs as plain publishes, sent all at once, and
// returns each one's stream sequence, or its error: one wrapping
// ErrExpectation or ErrRefused when the server refused it (not stored),
// any other when its outcome is unknown. Each message lands or not on its
// own, where PublishBatch stores all or none.
func (c *Conn) PublishEach(ctx context.Context, msgs []*nats.Msg) ([]uint64, []error) {
	res := SendEach(c.NC, c.Replies(len(msgs)), msgs).Wait(ctx)
	seqs, errs := make([]uint64, len(res)), make([]error, len(res))
	for i, r := range res {
		seqs[i], errs[i] = r.Seq, r.Err
	}
	return seqs, errs
}

// Wait collects the round's answers until ctx ends. A message the server
// did not answer has an error that is neither ErrExpectation nor ErrRefused:
// its outcome is unknown.
func (r *Round) Wait(ctx context.Context) []Ack {
	defer r.a.Done()
	for r.waiting > 0 {
		m, i, err := r.a.Next(ctx)
		if err != nil {
			for i := range r.res {
				if errors.Is(r.res[i].Err, errUnanswered) {
					r.res[i].Err = fmt.Errorf("publish: %w: %w", errUnanswered, err)
				}
			}
			break
		}
		if i >= len(r.res) || !errors.Is(r.res[i].Err, errUnanswered) {
			continue
		}
		ack, err := parseAck(m.Data)
		r.res[i] = Ack{Seq: ack.Seq, Err: err}
		r.waiting--
	}
	return r.res
}

// errUnanswered marks a publish whose answer has not come.
var errUnanswered = errors.New("no answer from the server")
