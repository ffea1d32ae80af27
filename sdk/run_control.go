package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spl-dev/spl/records"
)

// Cancelling a run.
//
// A person cancels a run (CancelRun: spl run cancel, POST
// /v1/runs/{run}/cancel, the MCP tool cancel_run) by appending a record
// of kind KindRunCancel to the run's thread, naming why. From then on the
// run's status is cancelled, wherever it is shown; a resume returns
// Status RunCancelled and runs nothing; and a runner still running sees
// it at its next Checkpoint or Effect, which return a *RunCancelledError
// (errors.Is ErrRunCancelled): it stops and may Finish with State
// "cancelled". A run that finished is not cancelled (ErrRunFinished).

// KindRunCancel is the kind of a run's cancel request.
const KindRunCancel = "agent.run.cancel"

// RunCancelled: the run was asked to stop (a cancel request), or finished
// with state "cancelled".
const RunCancelled RunStatus = "cancelled"

// ErrRunCancelled is wrapped by every *RunCancelledError.
var ErrRunCancelled = errors.New("spl/sdk: run cancelled")

// RunCancelledError reports a run someone cancelled: its writes stop.
type RunCancelledError struct {
	Run     string
	Reason  string
	Actor   string  // who cancelled it
	Request Receipt // the cancel request
}

// Error says who cancelled the run and why.
func (e *RunCancelledError) Error() string {
	return fmt.Sprintf("spl/sdk: run %q cancelled by %s: %s", e.Run, e.Actor, e.Reason)
}

// Unwrap makes it an ErrRunCancelled.
func (e *RunCancelledError) Unwrap() error { return ErrRunCancelled }

// runCancelBody is the body of a cancel request.
type runCancelBody struct {
	RunID    string `cbor:"run_id"`
	ThreadID string `cbor:"thread_id"`
	Reason   string `cbor:"reason"`
}

// CancelRun asks run runID (on thread; when empty, the one thread that
// has a run of that id) to stop, for reason, as actor (default the
// client's). A finished run is refused with ErrRunFinished.
func (c *Client) CancelRun(ctx context.Context, thread, runID, reason, actor string) (Receipt, error) {
	if reason == "" || len(reason) > 1024 {
		return Receipt{}, &records.FieldError{Field: "reason", Rule: "required: why the run is cancelled, at most 1024 bytes"}
	}
	thread, err := c.findRun(ctx, thread, runID)
	if err != nil {
		return Receipt{}, err
	}
	latest, _, err := c.latestRun(ctx, thread, runID)
	if err != nil {
		return Receipt{}, err
	}
	st, err := c.runStatus(ctx, thread, runID, latest)
	if err != nil {
		return Receipt{}, err
	}
	if !st.Cancellable() {
		return Receipt{}, fmt.Errorf("cancel run %q: it is %s: %w", runID, st, ErrRunFinished)
	}
	r, err := c.AppendEvent(ctx, Event{Act: records.ActDo, Kind: KindRunCancel, Thread: RunThread(thread, runID), Actor: actor,
		Body: runCancelBody{RunID: runID, ThreadID: thread, Reason: reason}})
	if err != nil {
		return Receipt{}, fmt.Errorf("cancel run %q: %w", runID, err)
	}
	c.closeGate(thread, runID) // before its watch's notice comes
	return Receipt{ID: r.ID, Clock: r.Clock}, nil
}

// Cancellable says whether a run in status st can be cancelled: while it
// runs or waits for a signal (CancelRun; what the faces offer).
func (st RunStatus) Cancellable() bool { return st == RunRunning || st == RunWaiting }

// runCancel is the cancel request of a run, nil when there is none: one
// last-by-subject get.
func (c *Client) runCancel(ctx context.Context, thread, runID string) (*RunCancelledError, error) {
	e, err := c.log.Latest(ctx, RunThread(thread, runID), KindRunCancel)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("run %q: cancel request: %w", runID, err)
	}
	var b runCancelBody
	if err := e.Record.DecodeBody(&b); err != nil {
		return nil, fmt.Errorf("run %q: cancel request at clock %d: %w", runID, e.Clock, err)
	}
	return &RunCancelledError{Run: runID, Reason: b.Reason, Actor: e.Record.Header.Actor, Request: Receipt{ID: e.ID, Clock: e.Clock}}, nil
}

// runStatus is the status of a run whose newest checkpoint is latest: the
// one rule every face shows. A run_terminal checkpoint says how it ended
// (status); before one, a cancel request makes it cancelled, and an
// awaiting_signal checkpoint whose signal has not come waiting
// (run_signal.go).
func (c *Client) runStatus(ctx context.Context, thread, runID string, latest *RunCheckpoint) (RunStatus, error) {
	if st := latest.status(); st != RunRunning {
		return st, nil
	}
	cancel, err := c.runCancel(ctx, thread, runID)
	if err != nil {
		return "", err
	}
	if cancel != nil {
		return RunCancelled, nil
	}
	if awaitedSignal(latest) != "" {
		sig, err := c.signalFor(ctx, thread, runID, latest)
		if err != nil {
			return "", err
		}
		if sig == nil {
			return RunWaiting, nil
		}
	}
	return RunRunning, nil
}

// watchCancel makes the run see a cancel request as it lands, and reads
// once for one that landed before: Checkpoint and Effect then refuse.
func (r *Run) watchCancel() {
	stop, err := r.c.log.Watch(r.rthread, KindRunCancel, func() { go r.readCancel(true) })
	if err == nil {
		r.unwatch = stop
	}
	go r.readCancel(false)
}

// readCancel reads the run's cancel request into r.cancel. After a
// watch's notice (noticed) it reads again until it finds the request, for
// a few seconds: the notice is the publish, and can come before the
// stream has stored what it announces.
func (r *Run) readCancel(noticed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for wait := time.Millisecond; ; wait *= 2 {
		if ce, err := r.c.runCancel(ctx, r.thread, r.id); err == nil && ce != nil {
			r.cancel.Store(ce)
			return
		}
		if !noticed || wait > noticeRead {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// noticeRead bounds the reads after a watch's notice that find nothing
// yet (a publish refused by the stream is never stored).
const noticeRead = 2 * time.Second

// cancelled is the run's cancel request, nil while there is none.
func (r *Run) cancelled() error {
	if ce := r.cancel.Load(); ce != nil {
		return ce
	}
	return nil
}
