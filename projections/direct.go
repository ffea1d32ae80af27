package projections

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/internal/natsio"
)

// getRequest is the JSON body of a direct get.
type getRequest = natsio.GetRequest

// message is a stored message from a direct get.
type message struct {
	subject string
	seq     uint64
	time    time.Time // when the server stored it
	hdr     nats.Header
	data    []byte
}

func messageOf(m natsio.Message) message {
	return message{subject: m.Subject, seq: m.Seq, time: m.Stored(), hdr: m.Header, data: m.Data}
}

// deleted reports whether m is a KV delete or purge marker.
func (m message) deleted() bool {
	op := m.hdr.Get("KV-Operation")
	return op == "DEL" || op == "PURGE"
}

// direct does direct gets on streams (AllowDirect): what the projections
// read, the log's stream as well as the KV streams, without consumers.
type direct struct {
	c       *natsio.Conn
	timeout time.Duration
}

func (d direct) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.timeout)
}

// batch does one batched or multi-last direct get on stream and returns the
// messages, in stream order, and the number of messages after the last one
// that match the request (batched gets only).
func (d direct) batch(ctx context.Context, stream string, req getRequest) ([]message, uint64, error) {
	ctx, cancel := d.context(ctx)
	defer cancel()
	ms, pending, err := d.c.Batch(ctx, stream, req, nil)
	if err != nil {
		return nil, 0, err
	}
	out := make([]message, len(ms))
	for i, m := range ms {
		out[i] = messageOf(m)
	}
	return out, pending, nil
}

// lasts gets the last message of each subject of stream, pipelined: one
// round trip for them all. A subject without a message gives ok false.
func (d direct) lasts(ctx context.Context, stream string, subjects []string) ([]message, []bool, error) {
	ctx, cancel := d.context(ctx)
	defer cancel()
	ms, ok, err := d.c.Lasts(ctx, stream, subjects)
	if err != nil {
		return nil, nil, err
	}
	out := make([]message, len(ms))
	for i, m := range ms {
		out[i] = messageOf(m)
	}
	return out, ok, nil
}
