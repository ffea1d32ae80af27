package sdk

import (
	"context"
	"sync"
	"time"
)

// A runner in another process writes a run through this client (HTTP,
// MCP): every checkpoint and effect must be refused once the run is
// finished or cancelled. Reading the run's two subjects for each write
// costs two gets that contend, in the server, with the writes
// themselves. The gate of a run remembers that the reads found it
// writable, for gateTTL, as the Go SDK's Run remembers a cancel it
// watched for: a cancel request landing (its watch's notice, or
// CancelRun on this client) and a run_terminal this client wrote close
// it at once; a run_terminal written through another server or process
// is seen within gateTTL.

// gateTTL bounds how long a gate trusts its last reads.
const gateTTL = time.Second

// maxRunGates bounds the runs a client keeps gates for.
const maxRunGates = 1024

// runGates holds the gates of the runs written through a client.
type runGates struct {
	mu   sync.Mutex
	runs map[string]*runGate
}

// runGate is what the last reads of one run found.
type runGate struct {
	mu      sync.Mutex
	open    time.Time // when reads that found the run writable began (zero: not known)
	gen     uint64    // bumped by every notice: reads begun before it prove nothing
	quiet   time.Time // before it, reads prove nothing: a notice's record may not be readable yet
	watched bool      // the cancel watch is on: without it the gate never opens
	unwatch func()
}

// gate returns the gate of run runID on thread, made (with its cancel
// watch) on first use.
func (c *Client) gate(thread, runID string) *runGate {
	key := RunThread(thread, runID)
	x := &c.gates
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.runs[key]; g != nil {
		return g
	}
	if x.runs == nil {
		x.runs = make(map[string]*runGate)
	}
	if len(x.runs) >= maxRunGates {
		for k, g := range x.runs { // any one: it is read again when asked for
			if g.unwatch != nil {
				g.unwatch()
			}
			delete(x.runs, k)
			break
		}
	}
	g := &runGate{}
	if stop, err := c.log.Watch(key, KindRunCancel, g.close); err == nil {
		g.watched, g.unwatch = true, stop
	}
	x.runs[key] = g
	return g
}

// closeGate closes the gate of run runID on thread, if it has one.
func (c *Client) closeGate(thread, runID string) {
	c.gates.mu.Lock()
	g := c.gates.runs[RunThread(thread, runID)]
	c.gates.mu.Unlock()
	if g != nil {
		g.close()
	}
}

// close forgets what the reads found, and trusts no read for noticeRead.
func (g *runGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	g.open = time.Time{}
	g.quiet = time.Now().Add(noticeRead)
}

// runWritable says whether run runID on thread takes writes: nil while
// it runs (a run with no checkpoint is new), ErrRunFinished once it has
// a run_terminal checkpoint, its *RunCancelledError once cancelled. It
// reads the run (runEnding) unless its gate is open.
func (c *Client) runWritable(ctx context.Context, thread, runID string) error {
	g := c.gate(thread, runID)
	began := time.Now()
	g.mu.Lock()
	if g.watched && !g.open.IsZero() && began.Sub(g.open) < gateTTL && began.After(g.quiet) {
		g.mu.Unlock()
		return nil
	}
	gen := g.gen
	g.mu.Unlock()
	ce, err := c.runEnding(ctx, thread, runID)
	if err != nil {
		return err
	}
	if ce != nil {
		return ce
	}
	g.mu.Lock()
	if g.gen == gen && began.After(g.quiet) {
		g.open = began
	}
	g.mu.Unlock()
	return nil
}
