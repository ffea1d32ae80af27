package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// Runs written by a runner in another process.
//
// A runner that is not a Go program (the Python and TypeScript SDKs, over
// spl serve's HTTP API) holds no Run. Each of its requests is one of the
// calls below, which keep Run's promises request by request:
//
//   - RunState is OpenRun's read: where the run stands, its newest
//     checkpoint and snapshot, its stored result, its recorded effects
//     and its cancel request.
//   - WriteRunCheckpoints stores phase checkpoints, in order, durably;
//     the runner's own queue makes them write-behind and coalesces its
//     snapshots, as Run does.
//   - RecordEffect is the effect protocol: asked without an output it
//     says whether a result is recorded (replay it) or not (run the
//     tool); asked with one it records it, unless a result with the same
//     input hash was recorded first, which it answers instead. So a
//     request retried after its answer was lost, or a second process on
//     the same call id, records nothing twice: at most one recorded
//     result per call id and input.
//   - FinishRun writes the run_terminal checkpoint.
//
// Every write is refused once the run is finished (ErrRunFinished) or
// cancelled (*RunCancelledError; FinishRun still takes the end of a
// cancelled run).

// RunState is what a runner needs to continue a run.
type RunState struct {
	Resume
	// Effects are the recorded effects, the newest per call id, in clock
	// order; none for a finished run.
	Effects []RecordedEffect
	// Cancel is the run's cancel request, when it was cancelled.
	Cancel *RunCancelledError
	// Signals are the signals sent to the run, in clock order: a runner
	// waiting for a name one of them bears has its answer.
	Signals []RunSignal
}

// RunState reads run runID on thread as OpenRun does, without opening it:
// a run with no checkpoint is a new one (Status RunRunning, Resumed
// false; with the effects recorded before its first checkpoint landed),
// not an error.
func (c *Client) RunState(ctx context.Context, thread, runID string) (RunState, error) {
	if err := checkRun(thread, runID); err != nil {
		return RunState{}, err
	}
	res, effects, err := c.loadRun(ctx, thread, runID)
	if errors.Is(err, ErrNoCheckpoint) {
		// A new run, or one whose effects landed before its first
		// checkpoint did.
		res = Resume{Status: RunRunning}
		effects, err = c.runEffects(ctx, thread, runID)
		res.Effects = len(effects)
	}
	if err != nil {
		return RunState{}, err
	}
	if err := c.loadBlob(ctx, res.Latest, thread, runID); err != nil {
		return RunState{}, err
	}
	st := RunState{Resume: res, Effects: make([]RecordedEffect, 0, len(effects))}
	for _, e := range effects {
		st.Effects = append(st.Effects, e)
	}
	sortEffects(st.Effects)
	if res.Status == RunCancelled {
		if st.Cancel, err = c.runCancel(ctx, thread, runID); err != nil {
			return RunState{}, err
		}
	}
	if res.Resumed && res.Status != RunTerminal {
		if st.Signals, err = c.runSignals(ctx, thread, runID); err != nil {
			return RunState{}, err
		}
	}
	return st, nil
}

// RunCheckpointWrite is one phase checkpoint for WriteRunCheckpoints.
type RunCheckpointWrite struct {
	Phase string
	// Payload is a map, a struct, or the canonical CBOR of a map
	// (cbor.RawMessage); nil is an empty map.
	Payload any
	Time    time.Time // timestamp_ms; now when zero
}

// WriteRunCheckpoints stores the checkpoints cps of run runID on thread,
// in order, as actor (default: the client's), and returns once each is
// durable, with their receipts. The phase rules are Checkpoint's; nothing
// is stored when one checkpoint is refused, or when the run is finished
// or cancelled.
func (c *Client) WriteRunCheckpoints(ctx context.Context, thread, runID, actor string, cps []RunCheckpointWrite) ([]Receipt, error) {
	if err := checkRun(thread, runID); err != nil {
		return nil, err
	}
	if len(cps) == 0 {
		return nil, &records.FieldError{Field: "checkpoints", Rule: "at least one"}
	}
	actor, err := c.actorFor(actor)
	if err != nil {
		return nil, err
	}
	if err := c.runWritable(ctx, thread, runID); err != nil {
		return nil, err
	}
	recs, err := c.runCheckpointRecords(ctx, thread, runID, actor, cps)
	if err != nil {
		return nil, err
	}
	p, err := c.submitRun(ctx, runID, recs)
	defer p.release()
	if err != nil {
		return nil, err
	}
	return p.wait(ctx, runID)
}

// runCheckpointRecords builds and seals the records of checkpoints cps.
// Every checkpoint is held to its rules before any record is built (a
// large payload is stored beside the log as its record is built): the
// first refused is named (checkpoints[i]…), and nothing is stored.
func (c *Client) runCheckpointRecords(ctx context.Context, thread, runID, actor string, cps []RunCheckpointWrite) ([]*records.Record, error) {
	raws := make([][]byte, len(cps))
	for i, cp := range cps {
		if err := checkPhase(cp.Phase); err != nil {
			return nil, indexed(err, "checkpoints", i)
		}
		payload := cp.Payload
		if payload == nil {
			payload = map[string]any{}
		}
		raw, err := checkpointPayload(cp.Phase, payload)
		if err != nil {
			return nil, indexed(err, "checkpoints", i)
		}
		raws[i] = raw
	}
	recs := make([]*records.Record, len(cps))
	for i, cp := range cps {
		ts := cp.Time
		if ts.IsZero() {
			ts = time.Now()
		}
		rec, err := c.runCheckpointRecord(ctx, thread, runID, actor, cp.Phase, raws[i], ts)
		if err != nil {
			return nil, err
		}
		recs[i] = rec
	}
	return recs, nil
}

// pendingRun is a run's records handed to the log, in order.
type pendingRun []submitted

// submitRun hands recs to the log, in order: one group commit when they
// can share one.
func (c *Client) submitRun(ctx context.Context, runID string, recs []*records.Record) (pendingRun, error) {
	p := make(pendingRun, 0, len(recs))
	for _, rec := range recs {
		s, err := c.submit(ctx, rec)
		if err != nil {
			return p, fmt.Errorf("run %q: %s: %w", runID, rec.Header.Kind, err)
		}
		p = append(p, s)
	}
	return p, nil
}

// wait waits until each record landed, and returns their receipts.
func (p pendingRun) wait(ctx context.Context, runID string) ([]Receipt, error) {
	out := make([]Receipt, len(p))
	for i, s := range p {
		e, err := s.p.Wait(ctx)
		if err != nil {
			return nil, fmt.Errorf("run %q: checkpoint %d of %d: %w", runID, i+1, len(p), err)
		}
		out[i] = receipt(e)
	}
	return out, nil
}

// release frees the appends' contexts.
func (p pendingRun) release() {
	for _, s := range p {
		if s.release != nil {
			s.release()
		}
	}
}

// indexed names element i of list in a field error of the element.
func indexed(err error, list string, i int) error {
	var fe *records.FieldError
	if errors.As(err, &fe) {
		return &records.FieldError{Field: fmt.Sprintf("%s[%d].%s", list, i, fe.Field), Rule: fe.Rule}
	}
	return err
}

// checkPhase validates the phase of a checkpoint written by Checkpoint
// or WriteRunCheckpoints: run_terminal is Finish's.
func checkPhase(phase string) error {
	if !phaseRE.MatchString(phase) {
		return &records.FieldError{Field: "phase", Rule: "must be lower-case letters, digits and _ (at most 64)"}
	}
	if phase == PhaseRunTerminal {
		return &records.FieldError{Field: "phase", Rule: "run_terminal is written by Finish"}
	}
	return nil
}

// runEnding says whether run runID on thread may take its run_terminal
// checkpoint (ErrRunFinished once it has one), and its cancel request,
// if any. Two last-by-subject gets, the snapshot (large, and never the
// end of a run) not read: the cost of every write of a runner in another
// process. The two go out together.
func (c *Client) runEnding(ctx context.Context, thread, runID string) (*RunCancelledError, error) {
	var (
		ce        *RunCancelledError
		cancelErr error
		wg        sync.WaitGroup
	)
	wg.Go(func() { ce, cancelErr = c.runCancel(ctx, thread, runID) })
	defer wg.Wait()
	e, err := c.log.Latest(ctx, RunThread(thread, runID), KindRunCheckpoint)
	switch {
	case errors.Is(err, ErrNotFound): // none yet, or snapshots only
	case err != nil:
		return nil, fmt.Errorf("run %q: %w", runID, err)
	default:
		cp, err := decodeRunCheckpoint(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, thread, runID)
		if err != nil {
			return nil, err
		}
		if cp.Phase == PhaseRunTerminal {
			return nil, fmt.Errorf("run %q is %s: %w", runID, cp.status(), ErrRunFinished)
		}
	}
	wg.Wait()
	return ce, cancelErr
}

// EffectCall is one request of the effect protocol (RecordEffect).
type EffectCall struct {
	CallID string
	Tool   string
	// Args is the tool call's input as JSON; the input hash is InputHash
	// of Tool and Args (as a json.RawMessage: its compact text).
	Args json.RawMessage
	// Output is the tool's output as JSON, to record; nil asks whether a
	// result is recorded.
	Output json.RawMessage
	Rerun  bool   // a recorded result of another input is run again (RerunEffect)
	Actor  string // default: the client's
	// Before are checkpoints queued before the effect, stored before it
	// (and in its group commit), so that a runner's step is one request:
	// only with Output. Written unless the call is refused as a whole (a
	// finished or cancelled run, a mismatched input).
	Before []RunCheckpointWrite
}

// EffectOutcome is what RecordEffect did.
type EffectOutcome string

// Outcomes of RecordEffect.
const (
	// EffectReplayed: a result is recorded for the call id with the same
	// input hash; it is the answer, and the tool must not run.
	EffectReplayed EffectOutcome = "replayed"
	// EffectAbsent: nothing is recorded (or, with Rerun, a result of
	// another input is): run the tool, then send its output.
	EffectAbsent EffectOutcome = "absent"
	// EffectRecorded: the output sent is recorded.
	EffectRecorded EffectOutcome = "recorded"
)

// EffectAnswer is RecordEffect's answer.
type EffectAnswer struct {
	Outcome EffectOutcome
	Output  json.RawMessage // replayed or recorded (redacted as stored)
	Receipt Receipt         // the effect record
	Before  []Receipt       // the checkpoints of EffectCall.Before, stored
}

// RecordEffect is one step of the effect protocol for run runID on
// thread (see the top of this file): the answer of Run.Effect's rule
// (effectStep) for a runner that runs its tools itself. A result of
// another input recorded for the call id is an *EffectMismatchError
// unless call.Rerun. The record is appended on condition that the run's
// effects are still as read, so that two servers never record one call
// twice.
func (c *Client) RecordEffect(ctx context.Context, thread, runID string, call EffectCall) (EffectAnswer, error) {
	if err := checkRun(thread, runID); err != nil {
		return EffectAnswer{}, err
	}
	if err := checkCallID(call.CallID); err != nil {
		return EffectAnswer{}, err
	}
	actor := c.actorOr(call.Actor)
	if call.Output != nil && actor == "" {
		return EffectAnswer{}, ErrNoActor
	}
	if len(call.Before) > 0 && call.Output == nil {
		return EffectAnswer{}, &records.FieldError{Field: "checkpoints", Rule: "only with an output to record"}
	}
	in, err := InputHash(call.Tool, call.Args)
	if err != nil {
		return EffectAnswer{}, err
	}
	if err := c.runWritable(ctx, thread, runID); err != nil {
		return EffectAnswer{}, err
	}
	var before []*records.Record
	if len(call.Before) > 0 {
		if before, err = c.runCheckpointRecords(ctx, thread, runID, actor, call.Before); err != nil {
			return EffectAnswer{}, err
		}
	}
	var pend pendingRun
	defer func() { pend.release() }()
	// landed waits for the checkpoints written before the effect.
	landed := func(a EffectAnswer) (EffectAnswer, error) {
		rcs, err := pend.wait(ctx, runID)
		a.Before = rcs
		return a, err
	}
	idx := c.effects.of(thread, runID)
	idx.mu.Lock()
	defer idx.mu.Unlock()
	for try := 0; ; try++ {
		// A result to record for a call the index has none of is appended
		// on condition that the effects thread is still at the index's
		// clock: when another writer moved it, the append fails and the
		// next try reads what it wrote. So only then, to answer an ask,
		// or to replay, is the thread read first.
		_, known := idx.effects[call.CallID]
		if !idx.read || try > 0 || call.Output == nil || known {
			if err := idx.catchUp(ctx, c, thread, runID); err != nil {
				return EffectAnswer{}, err
			}
		}
		var recorded *RecordedEffect
		if e, ok := idx.effects[call.CallID]; ok {
			recorded = &e
		}
		replay, err := effectStep(runID, call.CallID, call.Tool, recorded, in, call.Rerun)
		switch {
		case err != nil:
			return EffectAnswer{}, err
		case replay:
			out, err := c.effectOutput(ctx, *recorded, thread, runID)
			if err != nil {
				return EffectAnswer{}, err
			}
			if before != nil {
				if pend, err = c.submitRun(ctx, runID, before); err != nil {
					return EffectAnswer{}, err
				}
			}
			return landed(EffectAnswer{Outcome: EffectReplayed, Output: out, Receipt: recorded.Receipt})
		case call.Output == nil:
			return EffectAnswer{Outcome: EffectAbsent}, nil
		}
		rec, re, err := c.effectRecord(ctx, thread, runID, actor, call.CallID, call.Tool, in, call.Output)
		if err != nil {
			return EffectAnswer{}, err
		}
		if before != nil {
			// Handed to the log before the effect: the same group commit.
			if pend, err = c.submitRun(ctx, runID, before); err != nil {
				return EffectAnswer{}, err
			}
			before = nil
		}
		p, err := c.log.SubmitAfter(ctx, rec, idx.clock)
		if err == nil {
			var e splog.Entry
			if e, err = p.Wait(ctx); err == nil {
				re.Receipt = receipt(e)
				idx.effects[call.CallID], idx.clock = re, e.Clock
				return landed(EffectAnswer{Outcome: EffectRecorded, Output: re.Output, Receipt: re.Receipt})
			}
		}
		if !errors.Is(err, splog.ErrMoved) || try == 8 {
			return EffectAnswer{}, fmt.Errorf("run %q: effect %q: %w", runID, call.CallID, err)
		}
		// Another writer recorded an effect of the run first: read it,
		// and decide again.
	}
}

// FinishRun writes the run_terminal checkpoint of run runID on thread
// (t's state, result and fields, and replayed: the effects the runner
// replayed) durably, as actor (default: the client's), and returns it
// with the run's status now. A run that is finished already is refused
// with ErrRunFinished; a cancelled one takes its end.
func (c *Client) FinishRun(ctx context.Context, thread, runID, actor string, t Terminal, replayed int) (Receipt, RunStatus, error) {
	if err := checkRun(thread, runID); err != nil {
		return Receipt{}, "", err
	}
	if replayed < 0 {
		return Receipt{}, "", &records.FieldError{Field: "replayed_effect_count", Rule: "must not be negative"}
	}
	actor, err := c.actorFor(actor)
	if err != nil {
		return Receipt{}, "", err
	}
	ce, err := c.runEnding(ctx, thread, runID)
	if err != nil {
		return Receipt{}, "", err
	}
	if err := t.check(ce != nil); err != nil {
		return Receipt{}, "", err
	}
	raw, err := checkpointPayload(PhaseRunTerminal, t.payload(replayed))
	if err != nil {
		return Receipt{}, "", err
	}
	rec, err := c.runCheckpointRecord(ctx, thread, runID, actor, PhaseRunTerminal, raw, time.Now())
	if err != nil {
		return Receipt{}, "", err
	}
	// Once the run_terminal is written (or in doubt), no gate of this
	// client lets a write through without reading the run again.
	defer c.closeGate(thread, runID)
	s, err := c.submit(ctx, rec)
	if err != nil {
		return Receipt{}, "", fmt.Errorf("run %q: %s: %w", runID, PhaseRunTerminal, err)
	}
	if s.release != nil {
		defer s.release()
	}
	e, err := s.p.Wait(ctx)
	if err != nil {
		return Receipt{}, "", fmt.Errorf("run %q: %s: %w", runID, PhaseRunTerminal, err)
	}
	cp, err := decodeRunCheckpoint(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, thread, runID)
	if err != nil {
		return receipt(e), "", err
	}
	return receipt(e), cp.status(), nil
}

// effectIndexes holds, per run, the effects RecordEffect has read, so
// that each request reads only the records appended since the last one.
// It is a cache: a run it dropped is read again from the log, and the
// conditional append, not the cache, keeps one record per call.
type effectIndexes struct {
	mu   sync.Mutex
	runs map[string]*effectIndex
}

// maxEffectIndexes bounds the runs an effectIndexes holds.
const maxEffectIndexes = 1024

// effectIndex is the recorded effects of one run, as of its effects
// thread's clock.
type effectIndex struct {
	mu      sync.Mutex // held for a whole RecordEffect: one decision at a time per run
	clock   uint64     // the effects thread's newest record read
	read    bool       // caught up at least once
	effects map[string]RecordedEffect
}

// of returns the index of run runID on thread.
func (x *effectIndexes) of(thread, runID string) *effectIndex {
	key := effectsThread(thread, runID)
	x.mu.Lock()
	defer x.mu.Unlock()
	if idx := x.runs[key]; idx != nil {
		return idx
	}
	if x.runs == nil {
		x.runs = make(map[string]*effectIndex)
	}
	if len(x.runs) >= maxEffectIndexes {
		for k := range x.runs { // any one: it is read again when asked for
			delete(x.runs, k)
			break
		}
	}
	idx := &effectIndex{effects: make(map[string]RecordedEffect)}
	x.runs[key] = idx
	return idx
}

// catchUp reads the effects appended since the index's clock. A record
// of another kind there (an erasure) may have taken effects away: the
// index is read again from the start.
func (idx *effectIndex) catchUp(ctx context.Context, c *Client, thread, runID string) error {
	from := idx.clock + 1
	for again := false; ; again = true {
		clock, effects, other := idx.clock, idx.effects, false
		if from == 1 {
			clock, effects = 0, make(map[string]RecordedEffect)
		}
		for e, err := range c.log.Read(ctx, effectsThread(thread, runID), splog.From(from), splog.ToEnd()) {
			if err != nil {
				return effectReadError(err, thread, runID)
			}
			clock = e.Clock
			if e.Record.Header.Kind != KindRunEffect {
				other = true
				continue
			}
			re, err := decodeEffect(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, thread, runID)
			if err != nil {
				return err
			}
			effects[re.CallID] = re
		}
		if other && from != 1 && !again {
			from = 1
			continue
		}
		idx.clock, idx.effects, idx.read = clock, effects, true
		return nil
	}
}
