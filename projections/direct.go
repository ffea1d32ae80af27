package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/log"
)

// getRequest is the JSON body of a direct get ($JS.API.DIRECT.GET.<stream>).
type getRequest struct {
	Seq       uint64   `json:"seq,omitempty"`
	NextFor   string   `json:"next_by_subj,omitempty"`
	Batch     int      `json:"batch,omitempty"`
	MultiLast []string `json:"multi_last,omitempty"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
}

// message is a stored message from a direct get.
type message struct {
	subject string
	seq     uint64
	time    time.Time // when the server stored it
	hdr     nats.Header
	data    []byte
}

// deleted reports whether m is a KV delete or purge marker.
func (m message) deleted() bool {
	op := m.hdr.Get("KV-Operation")
	return op == "DEL" || op == "PURGE"
}

func parseMessage(msg *nats.Msg) (message, error) {
	seq, err := strconv.ParseUint(msg.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return message{}, fmt.Errorf("direct get: bad Nats-Sequence %q", msg.Header.Get("Nats-Sequence"))
	}
	ts, _ := time.Parse(time.RFC3339Nano, msg.Header.Get("Nats-Time-Stamp"))
	return message{subject: msg.Header.Get("Nats-Subject"), seq: seq, time: ts, hdr: msg.Header, data: msg.Data}, nil
}

// direct does direct gets on streams (AllowDirect): what the projections
// read, the log's stream as well as the KV streams, without consumers.
type direct struct {
	log     *log.Log
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
	a := d.log.Replies(max(req.Batch, 16) + 2)
	defer a.Done()
	body, _ := json.Marshal(req)
	if err := d.log.Conn().PublishRequest("$JS.API.DIRECT.GET."+stream, a.Reply(0), body); err != nil {
		return nil, 0, fmt.Errorf("direct get: %w", err)
	}
	var out []message
	for {
		msg, _, err := a.Next(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("direct get %s: %w", stream, err)
		}
		switch st := msg.Header.Get("Status"); st {
		case "":
		case "404":
			return out, 0, nil
		case "204": // end of batch
			pending, _ := strconv.ParseUint(msg.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, pending, nil
		case "503":
			return nil, 0, fmt.Errorf("direct get %s: no responders (is the stream there?)", stream)
		default:
			return nil, 0, fmt.Errorf("direct get %s: status %s %s", stream, st, msg.Header.Get("Description"))
		}
		m, err := parseMessage(msg)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, m)
	}
}

// lasts gets the last message of each subject of stream, pipelined: one
// round trip for them all. A subject without a message gives ok false.
func (d direct) lasts(ctx context.Context, stream string, subjects []string) ([]message, []bool, error) {
	ctx, cancel := d.context(ctx)
	defer cancel()
	out := make([]message, len(subjects))
	ok := make([]bool, len(subjects))
	const window = 1024 // requests in flight
	for start := 0; start < len(subjects); start += window {
		end := min(start+window, len(subjects))
		if err := d.lastsWindow(ctx, stream, subjects[start:end], out[start:end], ok[start:end]); err != nil {
			return nil, nil, err
		}
	}
	return out, ok, nil
}

func (d direct) lastsWindow(ctx context.Context, stream string, subjects []string, out []message, ok []bool) error {
	a := d.log.Replies(len(subjects))
	defer a.Done()
	api := "$JS.API.DIRECT.GET." + stream + "."
	for i, s := range subjects {
		if err := d.log.Conn().PublishRequest(api+s, a.Reply(i), nil); err != nil {
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
		switch st := msg.Header.Get("Status"); st {
		case "":
		case "404":
			continue
		case "503":
			return fmt.Errorf("direct get %s: no responders (is the stream there?)", stream)
		default:
			return fmt.Errorf("direct get %s %s: status %s %s", stream, subjects[i], st, msg.Header.Get("Description"))
		}
		m, err := parseMessage(msg)
		if err != nil {
			return err
		}
		out[i], ok[i] = m, true
	}
	return nil
}
