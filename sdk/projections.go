package sdk

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/spl-dev/spl/projections"
	"github.com/spl-dev/spl/records"
)

// ProjectionIndex is the name of the built-in projection behind Threads,
// LatestCheckpoints and Erasure: the thread index, the latest checkpoint
// of every thread and the erased records.
const ProjectionIndex = projections.IndexName

// DefaultProjectionWait bounds how long a read that must be fresh (Fresh,
// MinClock) waits for the projection when ctx has no deadline.
const DefaultProjectionWait = 30 * time.Second

// Errors of projection reads, for errors.Is.
var (
	// ErrProjectionBehind reports that a projection did not reach the
	// clock a read waited for in time; the error is a
	// *projections.BehindError that says where it is and who runs it.
	ErrProjectionBehind = projections.ErrBehind
	// ErrUnknownProjection reports a projection name that is not one of
	// ProjectionNames.
	ErrUnknownProjection = projections.ErrUnknown
)

// ProjectionStatus is where a projection stands: its position, its lag
// behind the log in records and in time, the messages it skipped because
// they did not verify, and the process that runs it.
type ProjectionStatus = projections.Status

// ThreadInfo is a thread in the thread index: a summary of its records
// that are not erased.
type ThreadInfo struct {
	Thread      string
	Records     uint64            // records on the thread
	Checkpoints uint64            // of them, checkpoints
	First       uint64            // clock of the oldest record (0: unknown)
	FirstID     records.ID        // its id
	Last        uint64            // clock of the newest record
	LastID      records.ID        // its id
	LastActor   string            // actor of the newest record
	LastActive  time.Time         // time of the newest record: the last activity
	Kinds       map[string]uint64 // records per kind
	Actors      map[string]uint64 // records per actor
}

func threadInfo(t *projections.Thread) ThreadInfo {
	return ThreadInfo{
		Thread: t.Thread, Records: t.Records, Checkpoints: t.Checkpoints,
		First: t.First, FirstID: t.FirstID, Last: t.Last, LastID: t.LastID,
		LastActor: t.LastActor, LastActive: time.UnixMilli(t.LastTS).UTC(),
		Kinds: t.Kinds, Actors: t.Actors,
	}
}

// Freshness says how up to date a projection read must be. The zero value
// reads what the projection has stored, without waiting.
type Freshness struct {
	// Fresh waits until the projection has applied every record in the
	// log at the time of the call: a read after any append, of this
	// process or another, sees it.
	Fresh bool
	// MinClock waits until the projection has applied this clock (the
	// Clock of a Receipt, say): read-your-writes.
	MinClock uint64
}

// ThreadFilter selects threads for Threads. Its zero value lists every
// thread.
type ThreadFilter struct {
	Actor string    // threads with a record by this actor
	Kind  string    // threads with a record of this kind
	Since time.Time // threads active at or after (by the time of their newest record)
	Limit int       // at most this many; 0: all
	Freshness
}

// check refuses a filter that would list nothing silently: a kind no
// record can have.
func (f ThreadFilter) check() error {
	if f.Kind != "" {
		if err := records.CheckKind(f.Kind); err != nil {
			return fmt.Errorf("spl/sdk: threads: %w", err)
		}
	}
	return nil
}

// Threads lists the threads of the thread index that match f, newest
// activity first. It reads the index, not the log: its cost grows with
// the number of threads listed, not with the size of the log.
func (c *Client) Threads(ctx context.Context, f ThreadFilter) ([]ThreadInfo, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	p, ctx, cancel, err := c.fresh(ctx, f.Freshness)
	defer cancel()
	if err != nil {
		return nil, err
	}
	ts, err := p.reader.Threads(ctx, projections.ThreadFilter{Actor: f.Actor, Kind: f.Kind, Since: f.Since, Limit: f.Limit})
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: %w", err)
	}
	out := make([]ThreadInfo, len(ts))
	for i, t := range ts {
		out[i] = threadInfo(t)
	}
	return out, nil
}

// ThreadPage is one look at the thread index (ThreadIndexPage): the
// threads that matched, newest activity first, how many threads the index
// holds in all, the clock it had applied (every record up to it is in the
// answer), and the log's last clock when the look began.
type ThreadPage struct {
	Threads  []ThreadInfo
	Total    uint64
	AsOf     uint64
	LogClock uint64
}

// ThreadIndexPage reads the thread index as a face answering a request
// does: it waits at most wait for the index to apply the log's last clock
// (a wait that runs out is no error: AsOf says how far the index got, so
// that a thread appended just before is listed whenever the index keeps
// up, and the answer never waits long when it does not), then reads, from
// one look, the threads that match f (f.Limit 0: every one; countOnly:
// none, the count alone) and the count. f.Freshness is not used: wait
// says how fresh.
func (c *Client) ThreadIndexPage(ctx context.Context, f ThreadFilter, countOnly bool, wait time.Duration) (ThreadPage, error) {
	if err := f.check(); err != nil {
		return ThreadPage{}, err
	}
	p, err := c.projections(ctx)
	if err != nil {
		return ThreadPage{}, err
	}
	var page ThreadPage
	if page.LogClock, err = c.log.LastClock(ctx); err != nil {
		return ThreadPage{}, fmt.Errorf("spl/sdk: last clock: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	page.AsOf, err = p.index.WaitApplied(wctx, page.LogClock)
	cancel()
	var be *projections.BehindError
	switch {
	case errors.As(err, &be) && ctx.Err() == nil:
		page.AsOf = be.Clock // the position the wait read last
	case err != nil:
		return ThreadPage{}, fmt.Errorf("spl/sdk: thread index: %w", err)
	}
	if countOnly {
		if page.Total, err = p.reader.ThreadCount(ctx); err != nil {
			return ThreadPage{}, fmt.Errorf("spl/sdk: thread index: %w", err)
		}
		return page, nil
	}
	ts, total, err := p.reader.ThreadsAndCount(ctx, projections.ThreadFilter{Actor: f.Actor, Kind: f.Kind, Since: f.Since, Limit: f.Limit})
	if err != nil {
		return ThreadPage{}, fmt.Errorf("spl/sdk: thread index: %w", err)
	}
	page.Total, page.Threads = total, make([]ThreadInfo, len(ts))
	for i, t := range ts {
		page.Threads[i] = threadInfo(t)
	}
	return page, nil
}

// IndexProjector returns a runtime of the index projection (the thread
// index, the latest checkpoints, the erased records) for a server to run
// (spl serve), its buckets with replicas replicas (at least 1). logf, when
// set, gets its warnings.
func (c *Client) IndexProjector(ctx context.Context, replicas int, logf func(format string, args ...any)) (*projections.Runtime, error) {
	return c.NewProjector(ctx, projections.Index(), projections.Options{Replicas: max(replicas, 1), Logf: logf})
}

// Thread returns the thread index entry of thread, or an error wrapping
// ErrNotFound when the index knows no record of it.
func (c *Client) Thread(ctx context.Context, thread string, fr Freshness) (ThreadInfo, error) {
	p, ctx, cancel, err := c.fresh(ctx, fr)
	defer cancel()
	if err != nil {
		return ThreadInfo{}, err
	}
	t, err := p.reader.Thread(ctx, thread)
	if err != nil {
		return ThreadInfo{}, fmt.Errorf("spl/sdk: %w", err)
	}
	return threadInfo(t), nil
}

// CheckpointInfo is the latest checkpoint of a thread, as the index holds
// it: enough to list; LatestCheckpoint reads the whole record.
type CheckpointInfo struct {
	Thread    string
	ID        records.ID
	Clock     uint64
	Time      time.Time
	Actor     string
	Name      string
	SessionID string
	Summary   string
}

// CheckpointPage selects and pages the checkpoints of LatestCheckpoints.
type CheckpointPage struct {
	Actor  string    // checkpoints by this actor
	Since  time.Time // checkpoints at or after this time
	Offset int       // skip this many
	Limit  int       // then at most this many; 0: all
	Freshness
}

// LatestCheckpoints lists the latest checkpoint of every thread that has
// one, newest first, paged by p.Offset and p.Limit.
func (c *Client) LatestCheckpoints(ctx context.Context, p CheckpointPage) ([]CheckpointInfo, error) {
	ps, ctx, cancel, err := c.fresh(ctx, p.Freshness)
	defer cancel()
	if err != nil {
		return nil, err
	}
	cs, err := ps.reader.Checkpoints(ctx, projections.CheckpointFilter{Actor: p.Actor, Since: p.Since, Offset: p.Offset, Limit: p.Limit})
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: %w", err)
	}
	out := make([]CheckpointInfo, len(cs))
	for i, cp := range cs {
		out[i] = CheckpointInfo{
			Thread: cp.Thread, ID: cp.ID, Clock: cp.Clock, Time: time.UnixMilli(cp.TS).UTC(),
			Actor: cp.Actor, Name: cp.Name, SessionID: cp.SessionID, Summary: cp.Summary,
		}
	}
	return out, nil
}

// ErasureInfo says which erasure record removed a record.
type ErasureInfo struct {
	ID           records.ID // the erased record
	Clock        uint64     // where it was (0: the erasure did not say)
	Thread       string
	Kind         string
	Erasure      records.ID // the erasure record
	ErasureClock uint64
	Reason       string
	Time         time.Time // the erasure's time
}

// Erasure returns what erased the record id, from the index of erased
// records, or an error wrapping ErrNotFound when no erasure names it.
func (c *Client) Erasure(ctx context.Context, id records.ID, fr Freshness) (ErasureInfo, error) {
	p, ctx, cancel, err := c.fresh(ctx, fr)
	defer cancel()
	if err != nil {
		return ErasureInfo{}, err
	}
	e, err := p.reader.Erased(ctx, id)
	if err != nil {
		return ErasureInfo{}, fmt.Errorf("spl/sdk: %w", err)
	}
	return ErasureInfo{
		ID: e.ID, Clock: e.Clock, Thread: e.Thread, Kind: e.Kind, Erasure: e.Erasure,
		ErasureClock: e.ErasureClock, Reason: e.Reason, Time: time.UnixMilli(e.TS).UTC(),
	}, nil
}

// WatchThread calls fn whenever a record lands on thread, until stop is
// called: a notice only (read the thread to know what landed), and one
// missed while the connection is down. Follow is the way to have every
// record.
func (c *Client) WatchThread(thread string, fn func()) (stop func(), err error) {
	if err := records.CheckThread(thread); err != nil {
		return nil, err
	}
	return c.log.WatchThread(thread, fn)
}

// Follow yields the records of thread as they land, in clock order, from
// clock from on (0: those appended after the call), until ctx is done or
// the loop stops: it never ends by itself. Erasure records come too. A
// record that does not verify is yielded as an error wrapping
// records.ErrCorrupt, and following goes on.
//
// To show the tail of a thread and then follow it, read the tail first
// and follow from the clock after its last record (or from the log's
// clock at the start plus one, when the thread is empty).
func (c *Client) Follow(ctx context.Context, thread string, from uint64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		ctx, cancel := c.bound(ctx)
		defer cancel()
		for e, err := range c.log.Follow(ctx, thread, from) {
			if !yield(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, err) {
				return
			}
		}
	}
}

// FollowAll is Follow of every thread: the records of the whole log, in
// clock order, as they land (from 0: those appended after the call).
func (c *Client) FollowAll(ctx context.Context, from uint64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		ctx, cancel := c.bound(ctx)
		defer cancel()
		for e, err := range c.log.FollowAll(ctx, from) {
			if !yield(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, err) {
				return
			}
		}
	}
}

// ProjectionNames are the projections of a Client, for status and
// rebuild.
func ProjectionNames() []string { return []string{ProjectionIndex} }

// ProjectionStatus returns where each projection stands.
func (c *Client) ProjectionStatus(ctx context.Context) ([]ProjectionStatus, error) {
	p, err := c.projections(ctx)
	if err != nil {
		return nil, err
	}
	st, err := p.index.Status(ctx)
	if err != nil {
		return nil, err
	}
	return []ProjectionStatus{st}, nil
}

// WaitProjection waits until projection name has applied clock. When no
// process runs the projection, this one catches it up (taking the
// projection's lease for the time). Without a deadline on ctx it waits
// DefaultProjectionWait; a wait that times out returns an error wrapping
// ErrProjectionBehind (a *projections.BehindError) that says how far the
// projection got and who runs it.
func (c *Client) WaitProjection(ctx context.Context, name string, clock uint64) error {
	p, err := c.projections(ctx)
	if err != nil {
		return err
	}
	r, err := p.runtime(name)
	if err != nil {
		return err
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	ctx, cancelWait := withDefaultDeadline(ctx)
	defer cancelWait()
	return r.Wait(ctx, clock)
}

// RebuildProjection empties the read models of projection name (every
// projection when name is "") and applies the log again from its start.
// progress, when set, is called after each stored batch with the clock
// reached and the clock the rebuild runs to. A process that runs the
// projection hands it over for the rebuild and takes it back after. An
// interrupted rebuild (ctx, a crash) is resumed, not restarted, by the next
// RebuildProjection, and meanwhile by any process that runs the
// projection.
func (c *Client) RebuildProjection(ctx context.Context, name string, progress func(done, total uint64)) error {
	p, err := c.projections(ctx)
	if err != nil {
		return err
	}
	names := []string{name}
	if name == "" {
		names = ProjectionNames()
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	for _, n := range names {
		r, err := p.runtime(n)
		if err != nil {
			return err
		}
		if err := r.Rebuild(ctx, progress); err != nil {
			return err
		}
	}
	return nil
}

// RunProjections runs every projection in this process until ctx is done:
// each applies new records as they land while this process holds its
// lease, and stands by to take over while another process does. It
// returns nil when ctx ends or the client is closed. A long-running
// process (spl serve) runs it; without one, reads that must be fresh catch
// the projections up themselves.
func (c *Client) RunProjections(ctx context.Context) error {
	p, err := c.projections(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	return p.index.Run(ctx)
}

// bound returns ctx, cancelled also when the client closes.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// fresh returns the client's projections once the index has applied what
// fr asks for, and ctx bounded by DefaultProjectionWait when that wait
// needs a deadline.
func (c *Client) fresh(ctx context.Context, fr Freshness) (*clientProjections, context.Context, context.CancelFunc, error) {
	p, err := c.projections(ctx)
	if err != nil {
		return nil, ctx, func() {}, err
	}
	if !fr.Fresh && fr.MinClock == 0 {
		return p, ctx, func() {}, nil
	}
	ctx, unbind := c.bound(ctx)
	ctx, cancelWait := withDefaultDeadline(ctx)
	cancel := func() { cancelWait(); unbind() }
	clock := fr.MinClock
	if fr.Fresh {
		end, err := c.log.LastClock(ctx)
		if err != nil {
			return nil, ctx, cancel, fmt.Errorf("spl/sdk: %w", err)
		}
		clock = max(clock, end)
	}
	if clock == 0 {
		return p, ctx, cancel, nil
	}
	if err := p.index.Wait(ctx, clock); err != nil {
		return nil, ctx, cancel, err
	}
	return p, ctx, cancel, nil
}

func withDefaultDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultProjectionWait)
}

// clientProjections is the projection state of one Client: the runtime of
// the index (which creates the buckets once) and a reader.
type clientProjections struct {
	mu     sync.Mutex
	index  *projections.Runtime
	reader *projections.Reader
}

func (p *clientProjections) runtime(name string) (*projections.Runtime, error) {
	if name != ProjectionIndex {
		return nil, fmt.Errorf("%w: %q (there is %q)", ErrUnknownProjection, name, ProjectionIndex)
	}
	return p.index, nil
}

// projections returns the client's projection state, creating the
// runtime (and with it the buckets) on first use.
func (c *Client) projections(ctx context.Context) (*clientProjections, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	p := &c.proj
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.index == nil {
		// The buckets are replicated as the client's stream is (WithReplicas).
		// A door client writes no bucket, spl serve runs the projection;
		// the admin right may (a rebuild).
		readOnly := c.log.Door() && !c.log.DoorAdmin()
		r, err := projections.New(ctx, c.conn, c.log, projections.Index(), projections.Options{Replicas: max(c.cfg.replicas, 1), ReadOnly: readOnly})
		if err != nil {
			return nil, err
		}
		p.index, p.reader = r, projections.NewReader(c.conn, c.log)
	}
	return p, nil
}

// NewProjector returns a projections runtime of fold on the client's log
// and connection, for a server that keeps read models up to date
// (spl serve). Programs that only read them use Threads and
// LatestCheckpoints.
func (c *Client) NewProjector(ctx context.Context, fold projections.Fold, opts projections.Options) (*projections.Runtime, error) {
	if c.isClosing() {
		return nil, ErrClosed
	}
	return projections.New(ctx, c.conn, c.log, fold, opts)
}

// IndexReader returns a reader of the thread index's read models, for a
// server that answers from them (spl serve).
func (c *Client) IndexReader() *projections.Reader { return projections.NewReader(c.conn, c.log) }
