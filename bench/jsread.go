package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	splog "github.com/spl-dev/spl/log"
)

// Reads over JetStream below spl's API: the raw peer's reads (last N of a
// subject, a walk back from the end of the stream, a whole-stream scan),
// and the whole-stream scan under spl's verified scan, which decodes and
// verifies what it reads.

// directReq is the JSON body of a direct get.
type directReq struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	UpToSeq uint64 `json:"up_to_seq,omitempty"`
}

const directPage = 256

// directGet does a single direct get and returns the message and its
// stream sequence.
func directGet(ctx context.Context, nc *nats.Conn, stream string, req directReq) (*nats.Msg, uint64, error) {
	body, _ := json.Marshal(req)
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, body)
	if err != nil {
		return nil, 0, fmt.Errorf("direct get: %w", err)
	}
	if st := m.Header.Get("Status"); st != "" {
		return nil, 0, fmt.Errorf("direct get: status %s %s", st, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("direct get: bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
	}
	return m, seq, nil
}

// directRange calls fn for every message matching filter with sequence in
// [from, to], in order, through batched direct gets.
func directRange(ctx context.Context, nc *nats.Conn, stream, filter string, from, to uint64, fn func(*nats.Msg, uint64)) error {
	for from <= to {
		last, more, err := directBatch(ctx, nc, stream, directReq{Seq: from, NextFor: filter, Batch: directPage, UpToSeq: to}, fn)
		if err != nil {
			return err
		}
		if !more || last == 0 || last >= to {
			return nil
		}
		from = last + 1
	}
	return nil
}

// directBatch does one batched direct get. It returns the sequence of the
// last message and whether more may follow.
func directBatch(ctx context.Context, nc *nats.Conn, stream string, req directReq, fn func(*nats.Msg, uint64)) (uint64, bool, error) {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, req.Batch+2)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return 0, false, fmt.Errorf("direct get: subscribe: %w", err)
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(req)
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, body); err != nil {
		return 0, false, fmt.Errorf("direct get: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return last, false, fmt.Errorf("direct get: %w", ctx.Err())
		case m := <-ch:
			switch m.Header.Get("Status") {
			case "404":
				return last, false, nil
			case "204":
				pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return last, pending > 0, nil
			case "":
			default:
				return last, false, fmt.Errorf("direct get: status %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
			}
			seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
			if err != nil {
				return last, false, fmt.Errorf("direct get: bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
			}
			fn(m, seq)
			last = seq
		}
	}
}

// lastN returns the last n messages matching filter, oldest first: the
// last message's sequence from one direct get, then a window back from it
// that grows fourfold until it holds n matches (spl's Tail algorithm).
func lastN(ctx context.Context, nc *nats.Conn, stream, filter string, n int) ([]*nats.Msg, error) {
	_, end, err := directGet(ctx, nc, stream, directReq{LastFor: filter})
	if err != nil {
		return nil, err
	}
	window := uint64(4 * n)
	for {
		from := uint64(1)
		if end > window {
			from = end - window + 1
		}
		ring := make([]*nats.Msg, 0, n)
		count := 0
		err := directRange(ctx, nc, stream, filter, from, end, func(m *nats.Msg, _ uint64) {
			if len(ring) < n {
				ring = append(ring, m)
			} else {
				ring[count%n] = m
			}
			count++
		})
		if err != nil {
			return nil, err
		}
		if count >= n || from == 1 {
			if count > n {
				k := count % n
				ring = append(append([]*nats.Msg{}, ring[k:]...), ring[:k]...)
			}
			return ring, nil
		}
		window *= 4
	}
}

// recentThreads walks the stream back from its end, in windows that grow
// fourfold, and returns the first n distinct threads it meets (newest
// first). threadOf names the thread of a message (and may verify it).
func recentThreads(ctx context.Context, nc *nats.Conn, stream string, n int,
	threadOf func(*nats.Msg, uint64) (string, error)) ([]string, error) {
	filter := splog.SubjectPrefix + ".>"
	_, end, err := directGet(ctx, nc, stream, directReq{LastFor: filter})
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	window := uint64(2 * n)
	type msgAt struct {
		m   *nats.Msg
		seq uint64
	}
	for end > 0 {
		from := uint64(1)
		if end > window {
			from = end - window + 1
		}
		chunk := make([]msgAt, 0, end-from+1)
		if err := directRange(ctx, nc, stream, filter, from, end, func(m *nats.Msg, seq uint64) {
			chunk = append(chunk, msgAt{m, seq})
		}); err != nil {
			return nil, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			t, err := threadOf(chunk[i].m, chunk[i].seq)
			if err != nil {
				return nil, err
			}
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
				if len(out) == n {
					return out, nil
				}
			}
		}
		end = from - 1
		window *= 4
	}
	return out, nil
}

// scanStream reads every message of the stream, in order, through an
// ordered consumer, and calls fn for each. It returns how many it read.
func scanStream(ctx context.Context, js jetstream.JetStream, stream string, fn func(subject string, seq uint64, hdr nats.Header, data []byte)) (int, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("scan: stream info: %w", err)
	}
	last := s.CachedInfo().State.LastSeq
	if s.CachedInfo().State.Msgs == 0 {
		return 0, nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return 0, fmt.Errorf("scan: consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return 0, fmt.Errorf("scan: messages: %w", err)
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return n, fmt.Errorf("scan: next: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return n, fmt.Errorf("scan: metadata: %w", err)
		}
		fn(m.Subject(), md.Sequence.Stream, m.Headers(), m.Data())
		n++
		if md.Sequence.Stream >= last {
			return n, nil
		}
	}
}

// subjectToken returns token i (from 0) of a subject, or "".
func subjectToken(subject string, i int) string {
	for range i {
		k := strings.IndexByte(subject, '.')
		if k < 0 {
			return ""
		}
		subject = subject[k+1:]
	}
	if k := strings.IndexByte(subject, '.'); k >= 0 {
		return subject[:k]
	}
	return subject
}

// du is the disk usage of the files under path (allocated blocks, as du
// counts them).
func du(path string) (int64, error) {
	var total int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("du %s: %w", path, err)
	}
	return total, nil
}
