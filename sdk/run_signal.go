package sdk

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/fxamacker/cbor/v2"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// Waiting for a signal.
//
// A run that needs a person (an approval, hours or days away) records
// that it awaits a named signal, a checkpoint of phase awaiting_signal
// whose payload names it ("signal"), and may end its process: its status
// is then waiting. Someone sends the signal (SignalRun: spl run signal,
// POST /v1/runs/{run}/signal), a record of kind agent.run.signal on the
// run's thread with its data; the run is running again, and its next
// resume carries the signal (Resume.Signal). A signal is taken only by a
// run waiting for that name, once (a second is refused, as is one to a
// run that is not waiting), so a reviewer's double click approves once.

// Kind and phase of signals.
const (
	// KindRunSignal is the kind of a signal sent to a run.
	KindRunSignal = "agent.run.signal"
	// PhaseAwaitingSignal is the phase of a run waiting for a signal.
	PhaseAwaitingSignal = "awaiting_signal"
	// RunWaiting: the newest checkpoint awaits a signal not yet sent.
	RunWaiting RunStatus = "waiting"
)

// Errors of signals, for errors.Is.
var (
	// ErrNotWaiting reports a signal to a run that is not waiting for it.
	ErrNotWaiting = errors.New("spl/sdk: run is not waiting for this signal")
	// ErrStillWaiting is returned by AwaitSignal when its context ends
	// before the signal came: the run stays waiting, and a resume after
	// the signal continues it.
	ErrStillWaiting = errors.New("spl/sdk: run still waiting for its signal")
)

var signalRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// checkSignalName validates a signal's name.
func checkSignalName(field, name string) error {
	if !signalRE.MatchString(name) {
		return &records.FieldError{Field: field, Rule: "must be 1 to 64 of a-z 0-9 _ . -, starting with a letter"}
	}
	return nil
}

// RunSignal is a signal sent to a run.
type RunSignal struct {
	Name    string
	Data    Payload // what the sender gave (zero when nothing)
	Actor   string  // who sent it
	Request Receipt // the agent.run.signal record
	Time    time.Time
}

// runSignalBody is the body of an agent.run.signal record.
type runSignalBody struct {
	RunID    string          `cbor:"run_id"`
	ThreadID string          `cbor:"thread_id"`
	Name     string          `cbor:"name"`
	Data     cbor.RawMessage `cbor:"data,omitempty"`
}

// awaitedSignal is the signal a checkpoint awaits: the name in the
// payload of an awaiting_signal checkpoint, "" for any other.
func awaitedSignal(cp *RunCheckpoint) string {
	if cp == nil || cp.Phase != PhaseAwaitingSignal {
		return ""
	}
	var name string
	_ = cp.Payload.Field("signal").Decode(&name)
	return name
}

// checkAwaiting holds the payload of an awaiting_signal checkpoint to
// naming its signal (payload, canonical CBOR).
func checkAwaiting(phase string, payload []byte) error {
	if phase != PhaseAwaitingSignal {
		return nil
	}
	var name string
	if err := (Payload{raw: payload}).Field("signal").Decode(&name); err != nil {
		return &records.FieldError{Field: "payload.signal", Rule: "an awaiting_signal checkpoint names the signal it waits for"}
	}
	return checkSignalName("payload.signal", name)
}

// runSignal is the newest signal sent to a run, nil when none.
func (c *Client) runSignal(ctx context.Context, thread, runID string) (*RunSignal, error) {
	e, err := c.log.Latest(ctx, RunThread(thread, runID), KindRunSignal)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("run %q: signal: %w", runID, err)
	}
	sig, err := decodeSignal(e, runID)
	if err != nil {
		return nil, err
	}
	return &sig, nil
}

// decodeSignal is the signal an agent.run.signal record holds.
func decodeSignal(e splog.Entry, runID string) (RunSignal, error) {
	var b runSignalBody
	if err := e.Record.DecodeBody(&b); err != nil {
		return RunSignal{}, fmt.Errorf("run %q: signal at clock %d: %w", runID, e.Clock, err)
	}
	return RunSignal{Name: b.Name, Data: Payload{raw: b.Data}, Actor: e.Record.Header.Actor,
		Request: Receipt{ID: e.ID, Clock: e.Clock}, Time: e.Record.Time()}, nil
}

// runSignals is every signal sent to a run, in clock order: a read of
// the run thread's signal subject alone.
func (c *Client) runSignals(ctx context.Context, thread, runID string) ([]RunSignal, error) {
	var out []RunSignal
	for e, err := range c.log.Read(ctx, RunThread(thread, runID), splog.Kind(KindRunSignal)) {
		if err != nil {
			return nil, fmt.Errorf("run %q: signals: %w", runID, err)
		}
		sig, err := decodeSignal(e, runID)
		if err != nil {
			return nil, err
		}
		out = append(out, sig)
	}
	return out, nil
}

// signalNamed is the first signal of name sent to a run, nil when none.
func (c *Client) signalNamed(ctx context.Context, thread, runID, name string) (*RunSignal, error) {
	sigs, err := c.runSignals(ctx, thread, runID)
	if err != nil {
		return nil, err
	}
	for i := range sigs {
		if sigs[i].Name == name {
			return &sigs[i], nil
		}
	}
	return nil, nil
}

// signalFor is the signal that ends the wait of checkpoint latest: the
// newest signal, when it came after latest and bears the awaited name;
// nil while the run waits (or latest awaits nothing).
func (c *Client) signalFor(ctx context.Context, thread, runID string, latest *RunCheckpoint) (*RunSignal, error) {
	name := awaitedSignal(latest)
	if name == "" {
		return nil, nil
	}
	sig, err := c.runSignal(ctx, thread, runID)
	if err != nil || sig == nil || sig.Request.Clock < latest.Clock || sig.Name != name {
		return nil, err
	}
	return sig, nil
}

// SignalRun sends signal name, with data (any value JSON or CBOR can
// hold; nil for none), to run runID (on thread; when empty, the one
// thread that has a run of that id), as actor (default: the client's).
// The run must be waiting for that signal: a finished run is refused
// with ErrRunFinished, any other with ErrNotWaiting, saying what it
// waits for. Two signals racing for one wait: one is taken.
func (c *Client) SignalRun(ctx context.Context, thread, runID, name string, data any, actor string) (Receipt, error) {
	if err := checkSignalName("name", name); err != nil {
		return Receipt{}, err
	}
	var raw []byte
	if data != nil {
		var err error
		if raw, err = payloadEnc.Marshal(data); err != nil {
			return Receipt{}, &records.FieldError{Field: "data", Rule: "cannot encode as CBOR: " + err.Error()}
		}
	}
	thread, err := c.findRun(ctx, thread, runID)
	if err != nil {
		return Receipt{}, err
	}
	rt := RunThread(thread, runID)
	for try := 0; ; try++ {
		at, err := c.log.ThreadClock(ctx, rt)
		if err != nil {
			return Receipt{}, fmt.Errorf("signal run %q: %w", runID, err)
		}
		latest, _, err := c.latestRun(ctx, thread, runID)
		if err != nil {
			return Receipt{}, err
		}
		st, err := c.runStatus(ctx, thread, runID, latest)
		if err != nil {
			return Receipt{}, err
		}
		switch waits := awaitedSignal(latest); {
		case st == RunTerminal || st == RunFailed || st == RunCancelled:
			return Receipt{}, fmt.Errorf("signal run %q: it is %s: %w", runID, st, ErrRunFinished)
		case st != RunWaiting:
			return Receipt{}, fmt.Errorf("signal %q to run %q: it is %s, waiting for no signal: %w", name, runID, st, ErrNotWaiting)
		case waits != name:
			return Receipt{}, fmt.Errorf("signal %q to run %q: it waits for %q: %w", name, runID, waits, ErrNotWaiting)
		}
		r, err := c.appendEventAfter(ctx, Event{Act: records.ActDo, Kind: KindRunSignal, Thread: rt, Actor: actor,
			Body: runSignalBody{RunID: runID, ThreadID: thread, Name: name, Data: raw}}, at)
		if err == nil {
			return Receipt{ID: r.ID, Clock: r.Clock}, nil
		}
		if !errors.Is(err, splog.ErrMoved) || try == 8 {
			return Receipt{}, fmt.Errorf("signal run %q: %w", runID, err)
		}
		// The run's thread moved (another signal, a checkpoint, a
		// cancel): decide again.
	}
}

// AwaitSignal makes the run wait for signal name. A name is one wait of
// the run (wait twice: use two names): when a signal of that name was
// sent, it returns it at once. Otherwise it records a durable checkpoint
// of phase awaiting_signal (payload's fields and "signal": name), unless
// the run was opened waiting for name and has written nothing since, and
// waits for
// the signal at most wait (0: not at all) and while ctx lasts. Then it
// returns ErrStillWaiting: the run stays waiting, the process may end,
// and a resume after the signal continues with it.
func (r *Run) AwaitSignal(ctx context.Context, name string, payload map[string]any, wait time.Duration) (*RunSignal, error) {
	if err := checkSignalName("name", name); err != nil {
		return nil, err
	}
	if s := r.resume.Signal; s != nil && s.Name == name {
		return s, nil
	}
	// A name is one wait: a signal of it sent before (this run resumed
	// from a checkpoint written after the wait) is the answer.
	if s, err := r.c.signalNamed(ctx, r.thread, r.id, name); err != nil || s != nil {
		return s, err
	}
	if err := r.cancelled(); err != nil {
		return nil, err
	}
	notify := make(chan struct{}, 1)
	stop, err := r.c.log.Watch(r.rthread, KindRunSignal, func() {
		select {
		case notify <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, fmt.Errorf("spl/sdk: run %q: watch for signal %q: %w", r.id, name, err)
	}
	defer stop()
	var since uint64
	r.mu.Lock()
	untouched := r.enqueued == 0 // nothing written since the resume
	r.mu.Unlock()
	if l := r.resume.Latest; untouched && r.resume.Status == RunWaiting && awaitedSignal(l) == name {
		since = l.Clock
	} else {
		p := make(map[string]any, len(payload)+1)
		for k, v := range payload {
			p[k] = v
		}
		p["signal"] = name
		rec, err := r.checkpointRecord(PhaseAwaitingSignal, p, time.Now())
		if err != nil {
			return nil, err
		}
		rc, err := r.durable(ctx, PhaseAwaitingSignal, rec)
		if err != nil {
			return nil, err
		}
		since = rc.Clock
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// After a notice, read again soon until the signal is found: the
	// notice is the publish, and can come before the stream stored it.
	var again time.Duration
	for {
		sig, err := r.c.runSignal(ctx, r.thread, r.id)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		if sig != nil && sig.Request.Clock > since && sig.Name == name {
			return sig, nil
		}
		next := 5 * time.Second // a notice missed across a reconnect
		if again > 0 && again <= noticeRead {
			next, again = again, 2*again
		}
		select {
		case <-notify:
			again = time.Millisecond
		case <-time.After(next):
		case <-deadline.C:
			return nil, fmt.Errorf("spl/sdk: run %q: signal %q: %w", r.id, name, ErrStillWaiting)
		case <-ctx.Done():
			return nil, fmt.Errorf("spl/sdk: run %q: signal %q: %w (%w)", r.id, name, ErrStillWaiting, ctx.Err())
		}
	}
}
