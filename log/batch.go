package log

import (
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

// Classes of a refused publish.
var (
	// errStale: a chain expectation failed; refresh heads and retry.
	errStale = errors.New("thread moved on")
	// errRefused: the server refused the publish for another reason.
	errRefused = errors.New("refused by server")
)

// pubAck is the server's answer to a publish or a batch commit.
type pubAck struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Batch  string `json:"batch"`
	Count  uint64 `json:"count"`
	Error  *struct {
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
	nc := w.l.nc
	if len(batch) == 1 {
		msg := w.message(batch[0])
		resp, err := nc.RequestMsgWithContext(ctx, msg)
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
	for i, p := range batch {
		msg := w.message(p)
		msg.Header.Set(hdrBatchID, id)
		msg.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i < len(batch)-1 {
			if err := nc.PublishMsg(msg); err != nil {
				return 0, fmt.Errorf("publish batch: %w", err)
			}
			continue
		}
		msg.Header.Set(hdrBatchCommit, "1")
		resp, err := nc.RequestMsgWithContext(ctx, msg)
		if err != nil {
			return 0, fmt.Errorf("commit batch: %w", err)
		}
		ack, err := parseAck(resp.Data)
		if err != nil {
			return 0, err
		}
		if ack.Batch != id || ack.Count != uint64(len(batch)) {
			return 0, fmt.Errorf("commit batch: ack for batch %q count %d, sent %q count %d", ack.Batch, ack.Count, id, len(batch))
		}
		return ack.Seq - ack.Count + 1, nil
	}
	return 0, fmt.Errorf("%w: empty batch", errRefused)
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
	return msg
}

func parseAck(data []byte) (pubAck, error) {
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
