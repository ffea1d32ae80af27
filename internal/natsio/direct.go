package natsio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrNoMessage reports a direct get that found no message (status 404).
var ErrNoMessage = errors.New("spl/natsio: no message")

// GetRequest is the JSON body of a direct get ($JS.API.DIRECT.GET.<stream>).
type GetRequest struct {
	Seq       uint64   `json:"seq,omitempty"`
	LastFor   string   `json:"last_by_subj,omitempty"`
	NextFor   string   `json:"next_by_subj,omitempty"`
	Batch     int      `json:"batch,omitempty"`
	MultiLast []string `json:"multi_last,omitempty"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
}

// Message is a stored message as a direct get returns it.
type Message struct {
	Subject string
	Seq     uint64
	Header  nats.Header
	Data    []byte
}

// Stored is when the server stored m (zero when its answer did not say).
// It is parsed on demand: most reads never ask.
func (m Message) Stored() time.Time {
	ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
	return ts
}

// DirectAPI is the direct get subject of stream.
func DirectAPI(stream string) string { return "$JS.API.DIRECT.GET." + stream }

// ParseMessage reads a direct get's answer: a stored message, or
// ErrNoMessage for a 404, or an error naming any other status.
func ParseMessage(msg *nats.Msg) (Message, error) {
	switch st := msg.Header.Get("Status"); st {
	case "":
	case "404":
		return Message{}, ErrNoMessage
	case "503":
		return Message{}, errors.New("direct get: no responders (is the stream there?)")
	default:
		return Message{}, fmt.Errorf("direct get: status %s %s", st, msg.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(msg.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("direct get: bad Nats-Sequence %q", msg.Header.Get("Nats-Sequence"))
	}
	return Message{Subject: msg.Header.Get("Nats-Subject"), Seq: seq, Header: msg.Header, Data: msg.Data}, nil
}

// Request sends a request that is safe to repeat (a read): one whose
// connection dropped before the answer came is sent again, a few times,
// while ctx allows. Each try waits up to the connection's Timeout. closed,
// when not nil, is asked before each try; its error ends the request.
func (c *Conn) Request(ctx context.Context, subject string, body []byte, closed func() error) (*nats.Msg, error) {
	var err error
	for range 3 {
		if closed != nil {
			if err := closed(); err != nil {
				return nil, err
			}
		}
		var msg *nats.Msg
		dropped := c.Lost()
		rctx, cancel := c.UntilLost(ctx, c.Timeout)
		msg, err = c.NC.RequestWithContext(rctx, subject, body)
		cancel()
		if err == nil {
			return msg, nil
		}
		select {
		case <-dropped:
			if ctx.Err() == nil {
				continue
			}
		default:
		}
		break
	}
	return nil, err
}

// Get does one direct get on stream (Request's retries included).
func (c *Conn) Get(ctx context.Context, stream string, req GetRequest, closed func() error) (Message, error) {
	body, _ := json.Marshal(req)
	return c.get(ctx, DirectAPI(stream), body, closed)
}

// Last gets the last message of a literal subject of stream through the
// subject-in-API form, which needs no JSON.
func (c *Conn) Last(ctx context.Context, stream, subject string, closed func() error) (Message, error) {
	return c.get(ctx, DirectAPI(stream)+"."+subject, nil, closed)
}

func (c *Conn) get(ctx context.Context, subject string, body []byte, closed func() error) (Message, error) {
	msg, err := c.Request(ctx, subject, body, closed)
	if err != nil {
		return Message{}, fmt.Errorf("direct get: %w", err)
	}
	return ParseMessage(msg)
}

// Batch does one batched or multi-last direct get on stream and appends
// the messages of its answer, in stream order, to ms. It returns the
// number of messages after the last one that match the request (batched
// gets only). On an error it returns the messages that came before it.
// ctx bounds the wait: give it a deadline.
func (c *Conn) Batch(ctx context.Context, stream string, req GetRequest, ms []Message) (_ []Message, pending uint64, err error) {
	a := c.Replies(max(req.Batch, 16) + 2)
	defer a.Done()
	body, _ := json.Marshal(req)
	if err := c.NC.PublishRequest(DirectAPI(stream), a.Reply(0), body); err != nil {
		return ms, 0, fmt.Errorf("direct get: %w", err)
	}
	for {
		msg, _, err := a.Next(ctx)
		if err != nil {
			return ms, 0, fmt.Errorf("direct get %s: %w", stream, err)
		}
		switch msg.Header.Get("Status") {
		case "404":
			return ms, 0, nil
		case "204": // end of batch
			pending, _ := strconv.ParseUint(msg.Header.Get("Nats-Num-Pending"), 10, 64)
			return ms, pending, nil
		}
		m, err := ParseMessage(msg)
		if err != nil {
			return ms, 0, fmt.Errorf("%s: %w", stream, err)
		}
		ms = append(ms, m)
	}
}

// Lasts gets the last message of each subject of stream, pipelined: one
// round trip for them all, at most 1,024 requests in flight. A subject
// without a message gives ok false. ctx bounds the wait: give it a
// deadline.
func (c *Conn) Lasts(ctx context.Context, stream string, subjects []string) ([]Message, []bool, error) {
	out := make([]Message, len(subjects))
	ok := make([]bool, len(subjects))
	const window = 1024 // requests in flight
	for start := 0; start < len(subjects); start += window {
		end := min(start+window, len(subjects))
		if err := c.lastsWindow(ctx, stream, subjects[start:end], out[start:end], ok[start:end]); err != nil {
			return nil, nil, err
		}
	}
	return out, ok, nil
}

func (c *Conn) lastsWindow(ctx context.Context, stream string, subjects []string, out []Message, ok []bool) error {
	a := c.Replies(len(subjects))
	defer a.Done()
	api := DirectAPI(stream) + "."
	for i, s := range subjects {
		if err := c.NC.PublishRequest(api+s, a.Reply(i), nil); err != nil {
			return fmt.Errorf("direct get: %w", err)
		}
	}
	for range subjects {
		msg, i, err := a.Next(ctx)
		if err != nil {
			return fmt.Errorf("direct get %s: %w", stream, err)
		}
		if i >= len(subjects) {
			return fmt.Errorf("direct get: unexpected reply subject %q", msg.Subject)
		}
		m, err := ParseMessage(msg)
		if errors.Is(err, ErrNoMessage) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", stream, subjects[i], err)
		}
		out[i], ok[i] = m, true
	}
	return nil
}

// Each fetches the messages of stream at seqs by direct gets sent all at
// once, each answer on a reply subject of its own, and calls fn with each
// one and its index in seqs, in the order the answers come. It fails when
// a sequence holds no message or an answer does not come before ctx ends.
func (c *Conn) Each(ctx context.Context, stream string, seqs []uint64, fn func(int, Message)) error {
	a := c.Replies(len(seqs))
	defer a.Done()
	api := DirectAPI(stream)
	body := make([]byte, 0, 32)
	for i, s := range seqs {
		body = strconv.AppendUint(append(body[:0], `{"seq":`...), s, 10)
		body = append(body, '}')
		if err := c.NC.PublishRequest(api, a.Reply(i), body); err != nil {
			return fmt.Errorf("direct get: %w", err)
		}
	}
	seen := make([]bool, len(seqs))
	for left := len(seqs); left > 0; {
		msg, i, err := a.Next(ctx)
		if err != nil {
			return fmt.Errorf("direct get: %w", err)
		}
		if i >= len(seqs) || seen[i] {
			continue
		}
		m, err := ParseMessage(msg)
		if err != nil {
			return fmt.Errorf("direct get of clock %d: %w", seqs[i], err)
		}
		if m.Seq != seqs[i] {
			return fmt.Errorf("direct get of clock %d: answered with clock %d", seqs[i], m.Seq)
		}
		seen[i] = true
		left--
		fn(i, m)
	}
	return nil
}
