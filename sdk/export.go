package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spl-dev/spl/archive"
	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// Export and import of threads as archives (package archive: a CARv1
// file whose blocks are the records' headers, under their ids, and
// bodies). docs/cli.md, "spl export" and "spl import", says what a user
// sees.

// ExportOptions says which threads Export writes.
type ExportOptions struct {
	Threads []string // these threads, in this order
	All     bool     // every thread of the log, in name order (Threads must be empty)
}

// ExportedThread is one thread of an export.
type ExportedThread struct {
	Thread  string
	Records int        // records, erased ones included
	Erased  int        // records whose bodies an erasure removed (not in the archive)
	Head    records.ID // the thread's last record
}

// ExportResult says what Export wrote.
type ExportResult struct {
	Root    string // the CID of the archive's index block, its one root
	Threads []ExportedThread
	Records int
	Erased  int
	Blocks  int
	Bytes   int64
}

// Export writes the threads o names to w as an archive: every record of
// each, in chain order, with its signature; of an erased record only its
// header (the erasure record that names it is exported whole). A thread
// with no record is an error wrapping ErrNotFound; a thread that does
// not verify as one chain (a corrupt record, a fork) is refused, with
// what spl verify would say, and nothing is written.
func (c *Client) Export(ctx context.Context, w io.Writer, o ExportOptions) (ExportResult, error) {
	var res ExportResult
	names := o.Threads
	switch {
	case o.All && len(names) > 0:
		return res, &records.FieldError{Field: "threads", Rule: "name threads or ask for all of them, not both"}
	case o.All:
		var err error
		if names, err = c.allThreads(ctx); err != nil {
			return res, err
		}
	case len(names) == 0:
		return res, &records.FieldError{Field: "threads", Rule: "name at least one thread, or ask for all of them"}
	}
	threads := make([]archive.Thread, 0, len(names))
	seen := make(map[string]bool)
	for _, name := range names {
		if err := records.CheckThread(name); err != nil {
			return res, err
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		chain, err := c.threadChain(ctx, name)
		if err != nil {
			return res, err
		}
		if len(chain) == 0 {
			return res, fmt.Errorf("thread %q: no record: %w", name, ErrNotFound)
		}
		t := archive.Thread{Name: name, Records: make([]archive.Record, len(chain))}
		et := ExportedThread{Thread: name, Records: len(chain), Head: chain[len(chain)-1].rec.ID}
		for i, it := range chain {
			t.Records[i] = it.rec
			if it.rec.Erased() {
				et.Erased++
			}
		}
		threads = append(threads, t)
		res.Threads = append(res.Threads, et)
		res.Records += et.Records
		res.Erased += et.Erased
	}
	sum, err := archive.Write(w, threads)
	if err != nil {
		return res, err
	}
	res.Root, res.Blocks, res.Bytes = archive.CIDString(sum.Root), sum.Blocks, sum.Bytes
	return res, nil
}

// allThreads lists every thread of the log, sorted, from the stream's
// per-subject counts (no record is read).
func (c *Client) allThreads(ctx context.Context) ([]string, error) {
	s, err := c.conn.JS.Stream(ctx, c.log.StreamName())
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(splog.SubjectPrefix+".>"))
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	seen := make(map[string]bool)
	var out []string
	for subj, n := range info.State.Subjects {
		if t, ok := splog.ThreadOfSubject(subj); ok && n > 0 && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

// chainItem is one record of a thread's chain as the log holds it: whole,
// or erased (header only, from the erasure record that names it).
type chainItem struct {
	rec   archive.Record
	clock uint64 // where it is (or was, for an erased record); 0: not known
}

// threadChain returns thread's records in chain order, the erased ones
// included, walking back from the one record that no other names as its
// prev. A record that does not verify, or a thread that is not one chain
// (a fork, a gap no erasure explains), is an error wrapping
// records.ErrCorrupt: spl verify says more. An empty thread has no chain.
func (c *Client) threadChain(ctx context.Context, thread string) ([]chainItem, error) {
	items := make(map[records.ID]chainItem)
	erased := make(map[records.ID]chainItem)
	for e, err := range c.log.Read(ctx, thread) {
		if err != nil {
			if errors.Is(err, records.ErrCorrupt) {
				return nil, fmt.Errorf("thread %q: record at clock %d does not verify (spl verify %s): %w", thread, e.Clock, thread, err)
			}
			return nil, fmt.Errorf("thread %q: read: %w", thread, err)
		}
		r := e.Record
		if r.Sig != nil && r.Sig.Malformed != "" {
			return nil, fmt.Errorf("thread %q: record %s at clock %d has a malformed signature (%s): %w", thread, e.ID, e.Clock, r.Sig.Malformed, records.ErrCorrupt)
		}
		items[e.ID] = chainItem{rec: archive.Record{ID: e.ID, Header: r.Header, Body: r.Body, Salt: r.Salt, Sig: r.Sig}, clock: e.Clock}
		if r.Header.Kind != records.KindErasure {
			continue
		}
		er, err := records.DecodeErasure(r.Body)
		if err != nil {
			return nil, fmt.Errorf("thread %q: erasure record %s at clock %d: %w", thread, e.ID, e.Clock, err)
		}
		for _, t := range er.Targets {
			if !t.Message() && t.Header.Kind != records.KindErasure {
				erased[t.ID] = chainItem{rec: archive.Record{ID: t.ID, Header: t.Header}, clock: t.Clock}
			}
		}
	}
	// An erasure's target is erased even while its message is still
	// there (deletes an interrupted erasure left to the next open): its
	// body is not exported.
	for id, it := range erased {
		items[id] = it
	}
	if len(items) == 0 {
		return nil, nil
	}
	named := make(map[records.ID]bool, len(items))
	for _, it := range items {
		named[it.rec.Header.Prev] = true
	}
	var heads []records.ID
	for id := range items {
		if !named[id] {
			heads = append(heads, id)
		}
	}
	broken := func(why string) error {
		return fmt.Errorf("thread %q is not one chain (%s; spl verify %s says more): %w", thread, why, thread, records.ErrCorrupt)
	}
	if len(heads) != 1 {
		return nil, broken(fmt.Sprintf("%d records are named by no record as prev", len(heads)))
	}
	chain := make([]chainItem, 0, len(items))
	for id := heads[0]; !id.IsZero(); {
		it, ok := items[id]
		if !ok {
			return nil, broken(fmt.Sprintf("record %s is neither in the log nor named by an erasure", id))
		}
		if len(chain) == len(items) {
			return nil, broken("prev links loop")
		}
		chain = append(chain, it)
		id = it.rec.Header.Prev
	}
	if len(chain) != len(items) {
		return nil, broken(fmt.Sprintf("%d of its %d records are off the chain from its last record", len(items)-len(chain), len(items)))
	}
	slices.Reverse(chain)
	return chain, nil
}
