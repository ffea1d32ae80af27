package projections

import (
	"context"

	"github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// logHistory is History over the log's stream, through direct gets. It is
// asked only for erasures, and only about one thread.
type logHistory struct {
	d      direct
	stream string
	log    *log.Log // decodes what the gets return
}

var _ History = (*logHistory)(nil)

const historyBatch = 256

// Find implements History: a scan of the subject of kind on thread,
// reading message headers only until the id matches.
func (h *logHistory) Find(ctx context.Context, thread, kind string, id records.ID, after, before uint64) (uint64, error) {
	subj, want := log.RecordSubject(thread, kind), id.String()
	for from := after + 1; from < before; {
		ms, pending, err := h.d.batch(ctx, h.stream, getRequest{Seq: from, NextFor: subj, Batch: historyBatch})
		if err != nil {
			return 0, err
		}
		for _, m := range ms {
			if m.seq >= before {
				return 0, nil
			}
			if m.hdr.Get(log.HeaderID) == want {
				if _, err := h.log.DecodeMessage(m.subject, m.seq, m.hdr, m.data); err == nil {
					return m.seq, nil
				}
			}
			from = m.seq + 1
		}
		if len(ms) == 0 || pending == 0 {
			break
		}
	}
	return 0, nil
}

// After implements History.
func (h *logHistory) After(ctx context.Context, thread string, after, before uint64, n int) ([]log.Entry, error) {
	var out []log.Entry
	for from := after + 1; from < before && len(out) < n; {
		ms, pending, err := h.d.batch(ctx, h.stream, getRequest{Seq: from, NextFor: log.ThreadSubject(thread), Batch: n})
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if m.seq >= before || len(out) == n {
				return out, nil
			}
			if e, err := h.log.DecodeMessage(m.subject, m.seq, m.hdr, m.data); err == nil {
				out = append(out, e)
			}
			from = m.seq + 1
		}
		if len(ms) == 0 || pending == 0 {
			break
		}
	}
	return out, nil
}

// Before implements History: a last-by-subject get bounded by the clock,
// again past messages that do not verify.
func (h *logHistory) Before(ctx context.Context, thread, kind string, before uint64) (log.Entry, bool, error) {
	subj := log.ThreadSubject(thread)
	if kind != "" {
		subj = log.RecordSubject(thread, kind)
	}
	for before > 1 {
		ms, _, err := h.d.batch(ctx, h.stream, getRequest{MultiLast: []string{subj}, UpToSeq: before - 1})
		if err != nil {
			return log.Entry{}, false, err
		}
		if len(ms) == 0 {
			break
		}
		last := ms[0]
		for _, m := range ms[1:] {
			if m.seq > last.seq {
				last = m
			}
		}
		if e, err := h.log.DecodeMessage(last.subject, last.seq, last.hdr, last.data); err == nil {
			return e, true, nil
		}
		before = last.seq
	}
	return log.Entry{}, false, nil
}
