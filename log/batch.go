package log

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
	"github.com/spl-dev/spl/records"
)

// Headers of the JetStream publish protocol that the writer sets on a
// thread's first record of a group.
const (
	hdrExpectSubjSeq  = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectSubjName = "Nats-Expected-Last-Subject-Sequence-Subject"
)

// Classes of a refused publish.
var (
	// ErrExpectation reports a publish refused because an expectation
	// header (a last sequence, per subject or not) no longer held: nothing
	// of it was stored.
	ErrExpectation = natsio.ErrExpectation
	// ErrRefused reports a publish the server refused for another reason:
	// nothing of it was stored.
	ErrRefused = natsio.ErrRefused
)

// The writer's names for them.
var (
	errStale   = ErrExpectation // a chain expectation failed; refresh heads and retry
	errRefused = ErrRefused
)

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
	ctx, cancel := w.l.c.UntilAnswered(context.Background(), w.l.opts.Timeout)
	defer cancel()
	msgs := make([]*nats.Msg, len(batch))
	for i, p := range batch {
		msgs[i] = w.message(p)
	}
	return natsio.PublishBatch(ctx, w.l.c.NC, msgs)
}

// message is p's record as a NATS message: the envelope, its id, and, for
// the first record of a thread, the thread's expected last clock.
func (w *writer) message(p *Pending) *nats.Msg {
	t := p.rec.Header.Thread
	msg := recordMessage(p.rec, p.id, p.data)
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

// recordMessage is the message that stores rec, sealed, as data (its
// envelope) under id: its subject, the id and the signature beside it.
// The writer adds where the records before it are and what it expects.
func recordMessage(rec *records.Record, id records.ID, data []byte) *nats.Msg {
	msg := nats.NewMsg(RecordSubject(rec.Header.Thread, rec.Header.Kind))
	msg.Data = data
	msg.Header.Set(HeaderID, id.String())
	if rec.Sig != nil {
		msg.Header.Set(HeaderSig, rec.Sig.String())
	}
	return msg
}
