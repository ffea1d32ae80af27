package log

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/spl-dev/spl/records"
)

// Reads that decide what the writer appends next go to the stream leader,
// through the stream's message get API, never through a direct get: in a
// cluster any replica answers a direct get, and one that has not applied
// the newest records would hand the writer a stale thread head, or tell it
// that a batch which did land did not.

// leaderResponse is the answer of $JS.API.STREAM.MSG.GET.<stream>.
type leaderResponse struct {
	Message *struct {
		Subject string `json:"subject"`
		Seq     uint64 `json:"seq"`
		Hdrs    []byte `json:"hdrs"`
		Data    []byte `json:"data"`
	} `json:"message"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// getLeader does one message get answered by the stream leader.
func (l *Log) getLeader(ctx context.Context, req getRequest) (stored, error) {
	body, _ := json.Marshal(req)
	msg, err := l.c.Request(ctx, "$JS.API.STREAM.MSG.GET."+l.opts.Stream, body, l.closedForReads)
	if err != nil {
		return stored{}, fmt.Errorf("message get: %w", err)
	}
	return parseLeader(msg.Data)
}

func parseLeader(data []byte) (stored, error) {
	var resp leaderResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return stored{}, fmt.Errorf("message get: unreadable answer: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.Code == 404 {
			return stored{}, ErrNotFound
		}
		return stored{}, fmt.Errorf("message get: %s (code %d)", resp.Error.Description, resp.Error.ErrCode)
	}
	if resp.Message == nil {
		return stored{}, errors.New("message get: empty answer")
	}
	m := stored{subject: resp.Message.Subject, clock: resp.Message.Seq, data: resp.Message.Data, hdr: nats.Header{}}
	if len(resp.Message.Hdrs) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs)
		if err != nil {
			return stored{}, fmt.Errorf("message get: headers: %w", err)
		}
		m.hdr = h
	}
	return m, nil
}

// threadHead reads a thread's head from the leader: the clock of its last
// message, which the next append must expect, and the id to chain on. A
// last message that is not a record (garbage published behind spl's back)
// is stepped over for the id: the chain goes on from the last message that
// carries an id, so one bad message cannot block a thread.
func (l *Log) threadHead(ctx context.Context, thread string) (head, error) {
	m, err := l.getLeader(ctx, getRequest{LastFor: ThreadSubject(thread)})
	if errors.Is(err, ErrNotFound) {
		return head{}, nil
	}
	if err != nil {
		return head{}, err
	}
	if id, err := records.ParseID(m.hdr.Get(HeaderID)); err == nil {
		back := ancestorsOf(m)
		h := head{id: id, clock: m.clock, idClock: m.clock, back: back[:min(len(back), backLen)]}
		if hd, ok := headerOf(m.data); ok && hd.ID() == id {
			h.prev, h.bd = hd.Prev, hd.BD
		}
		return h, nil
	}
	h := head{clock: m.clock}
	err = l.scan(ctx, ThreadSubject(thread), 1, m.clock, 1024, func(s stored) bool {
		if id, err := records.ParseID(s.hdr.Get(HeaderID)); err == nil {
			h.id, h.idClock = id, s.clock
		}
		return true
	})
	if err != nil {
		return head{}, err
	}
	return h, nil
}
