package sdk

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/records"
)

// runEffects reads the effects recorded for a run: the newest per call
// id. An effect record that does not verify or decode fails the read: a
// run must not run a tool again because its record is unreadable.
func (c *Client) runEffects(ctx context.Context, thread, runID string) (map[string]RecordedEffect, error) {
	out := make(map[string]RecordedEffect)
	err := c.eachEffect(ctx, thread, runID, func(e RecordedEffect) { out[e.CallID] = e })
	return out, err
}

func (c *Client) eachEffect(ctx context.Context, thread, runID string, fn func(RecordedEffect)) error {
	for e, err := range c.log.Read(ctx, effectsThread(thread, runID), splog.Kind(KindRunEffect), splog.ToEnd()) {
		if err != nil {
			return effectReadError(err, thread, runID)
		}
		re, err := decodeEffect(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, thread, runID)
		if err != nil {
			return err
		}
		fn(re)
	}
	return nil
}

// effectReadError is the error of a read of a run's effects: a record
// that does not verify is a *CheckpointError naming its clock.
func effectReadError(err error, thread, runID string) error {
	if errors.Is(err, records.ErrCorrupt) {
		var ce *CorruptError
		clock := uint64(0)
		if errors.As(err, &ce) {
			clock = ce.Clock
		}
		return &CheckpointError{Thread: thread, Run: runID, Clock: clock, Reason: ReasonVerification, Field: "effect", Err: err}
	}
	return fmt.Errorf("run %q: effects: %w", runID, err)
}

// sortEffects puts effects in clock order.
func sortEffects(effects []RecordedEffect) {
	slices.SortFunc(effects, func(a, b RecordedEffect) int { return cmp.Compare(a.Clock, b.Clock) })
}

func decodeEffect(r Record, thread, runID string) (RecordedEffect, error) {
	var b effectBody
	if err := payloadDec.Unmarshal(r.Record.Body, &b); err != nil || b.CallID == "" || b.InputHash == "" {
		return RecordedEffect{}, &CheckpointError{Thread: thread, Run: runID, Clock: r.Clock, Reason: ReasonMalformedField, Field: "effect", Err: err}
	}
	e := RecordedEffect{
		Receipt: Receipt{ID: r.ID, Clock: r.Clock}, CallID: b.CallID, Tool: b.Tool,
		InputHash: b.InputHash, OutputHash: b.OutputHash, Blob: b.OutputBlob,
		Time: time.UnixMilli(b.TimestampMS).UTC(),
	}
	if b.OutputBlob == nil {
		// Its output_hash is checked when the output is used (replay),
		// not here: a resume reads every effect and replays few.
		e.Output = json.RawMessage(b.Output)
	}
	return e, nil
}

// RunInfo is a run and where it stands.
type RunInfo struct {
	Thread  string
	RunID   string
	Status  RunStatus
	Phase   string    // of the newest checkpoint
	Updated time.Time // the newest checkpoint's timestamp_ms
	Latest  Receipt   // the newest checkpoint
	Problem string    // why the newest checkpoint cannot be read (Status failed), if so
	// WaitingFor is the signal a waiting run waits for (Status
	// RunWaiting).
	WaitingFor string
}

// RunFilter narrows Runs.
type RunFilter struct {
	Thread string    // runs of this thread only; all when empty
	Status RunStatus // runs in this status only; all when empty
}

// Runs lists runs, by thread and run id, with their status: one
// last-by-subject get per kind per run, from the stream's subject list
// (no record is scanned).
func (c *Client) Runs(ctx context.Context, f RunFilter) ([]RunInfo, error) {
	switch f.Status {
	case "", RunRunning, RunWaiting, RunTerminal, RunFailed, RunCancelled:
	default:
		return nil, &records.FieldError{Field: "status", Rule: "must be running, waiting, terminal, failed or cancelled"}
	}
	if f.Thread != "" {
		if err := records.CheckThread(f.Thread); err != nil {
			return nil, err
		}
	}
	threads, err := c.runThreads(ctx)
	if err != nil {
		return nil, err
	}
	var out []RunInfo
	for _, t := range threads {
		thread, runID, _ := splitRunThread(t)
		if f.Thread != "" && thread != f.Thread {
			continue
		}
		info := c.runInfo(ctx, thread, runID)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if f.Status == "" || info.Status == f.Status {
			out = append(out, info)
		}
	}
	return out, nil
}

// runThreads returns the run threads of the log, sorted.
func (c *Client) runThreads(ctx context.Context) ([]string, error) {
	seen := make(map[string]bool)
	for _, kind := range []string{KindRunCheckpoint, KindRunSnapshot} {
		ts, err := c.log.ThreadsWith(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("runs: %w", err)
		}
		for _, t := range ts {
			if _, _, ok := splitRunThread(t); ok {
				seen[t] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}

func (c *Client) runInfo(ctx context.Context, thread, runID string) RunInfo {
	info := RunInfo{Thread: thread, RunID: runID}
	latest, _, err := c.latestRun(ctx, thread, runID)
	if err != nil {
		info.Status, info.Problem = RunFailed, err.Error()
		return info
	}
	st, err := c.runStatus(ctx, thread, runID, latest)
	if err != nil {
		info.Status, info.Problem = RunFailed, err.Error()
		return info
	}
	return newRunInfo(thread, runID, latest, st)
}

// newRunInfo is the RunInfo of a run whose newest checkpoint is latest
// and status st.
func newRunInfo(thread, runID string, latest *RunCheckpoint, st RunStatus) RunInfo {
	info := RunInfo{Thread: thread, RunID: runID, Status: st, Phase: latest.Phase, Updated: latest.Time, Latest: latest.Receipt}
	if st == RunWaiting {
		info.WaitingFor = awaitedSignal(latest)
	}
	return info
}

// findRun returns the thread of run runID when thread is empty: the one
// thread that has a run of that id.
func (c *Client) findRun(ctx context.Context, thread, runID string) (string, error) {
	if thread != "" {
		return thread, checkRun(thread, runID)
	}
	threads, err := c.runThreads(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for _, t := range threads {
		if th, id, _ := splitRunThread(t); id == runID {
			found = append(found, th)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("run %q: %w", runID, ErrNoCheckpoint)
	case 1:
		return found[0], nil
	}
	return "", &records.FieldError{Field: "thread", Rule: fmt.Sprintf("run %q is on several threads (%s): name one", runID, strings.Join(found, ", "))}
}

// SnapshotSummary is what a run's newest runtime snapshot says about it.
type SnapshotSummary struct {
	Phase        string
	Clock        uint64
	Step         int64
	Messages     int
	LLMCalls     int64
	ToolCalls    int64
	Usage        map[string]int64 // input_tokens, output_tokens, total_tokens
	TotalCostUSD float64
	Pending      bool // holds a pending_llm_response
}

// RunDetail is a run in full: its phases in order, its effects, its
// newest snapshot and its result.
type RunDetail struct {
	RunInfo
	Phases   []RunCheckpoint  // every checkpoint, in clock order; blob payloads not fetched
	Effects  []RecordedEffect // every effect record, in clock order
	Calls    int              // distinct call ids recorded
	Replayed int              // replayed_effect_count of the newest checkpoint that has one
	Snapshot *SnapshotSummary
	Terminal Payload // terminal_result, when the run finished
	// Outputs says the effects' outputs were fetched (EffectOutputs): the
	// wire form carries them.
	Outputs bool
}

// EffectOutputs fetches the output of each of d's effects into it, as a
// replay would give it: from the record, or from beside the log and
// checked against its hash. Outputs were redacted before they were
// stored. An output that cannot be fetched or does not verify is an
// error naming its effect; the others are fetched all the same.
func (c *Client) EffectOutputs(ctx context.Context, d *RunDetail) error {
	var errs []error
	for i, e := range d.Effects {
		out, err := c.effectOutput(ctx, e, d.Thread, d.RunID)
		if err != nil {
			errs = append(errs, fmt.Errorf("effect %s (clock %d): %w", e.CallID, e.Clock, err))
			continue
		}
		d.Effects[i].Output = out
	}
	d.Outputs = true
	return errors.Join(errs...)
}

// RunDetail reads run runID (on thread; when thread is empty, the one
// thread that has a run of that id).
func (c *Client) RunDetail(ctx context.Context, thread, runID string) (RunDetail, error) {
	thread, err := c.findRun(ctx, thread, runID)
	if err != nil {
		return RunDetail{}, err
	}
	latest, snap, err := c.latestRun(ctx, thread, runID)
	if err != nil {
		return RunDetail{}, err
	}
	st, err := c.runStatus(ctx, thread, runID, latest)
	if err != nil {
		return RunDetail{}, err
	}
	d := RunDetail{RunInfo: newRunInfo(thread, runID, latest, st)}
	if t, ok := latest.Terminal(); ok {
		d.Terminal = t
	}
	var errs []error
	for e, err := range c.log.Read(ctx, RunThread(thread, runID)) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k := e.Record.Header.Kind
		if k != KindRunCheckpoint && k != KindRunSnapshot {
			continue
		}
		cp, err := decodeRunCheckpoint(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, thread, runID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var n int64
		if cp.Payload.Field("replayed_effect_count").Decode(&n) == nil {
			d.Replayed = int(n)
		}
		d.Phases = append(d.Phases, *cp)
	}
	calls := make(map[string]bool)
	if err := c.eachEffect(ctx, thread, runID, func(e RecordedEffect) {
		calls[e.CallID] = true
		d.Effects = append(d.Effects, e)
	}); err != nil {
		errs = append(errs, err)
	}
	d.Calls = len(calls)
	if snap != nil {
		if err := c.loadBlob(ctx, snap, thread, runID); err != nil {
			errs = append(errs, err)
		} else {
			d.Snapshot = summarize(snap)
		}
	}
	return d, errors.Join(errs...)
}

func summarize(cp *RunCheckpoint) *SnapshotSummary {
	var p struct {
		Step         int64             `cbor:"step"`
		Messages     []cbor.RawMessage `cbor:"messages"`
		LLMCalls     int64             `cbor:"llm_calls"`
		ToolCalls    int64             `cbor:"tool_calls"`
		Usage        map[string]int64  `cbor:"usage"`
		TotalCostUSD float64           `cbor:"total_cost_usd"`
		Pending      cbor.RawMessage   `cbor:"pending_llm_response"`
	}
	_ = cp.Payload.Decode(&p)
	return &SnapshotSummary{
		Phase: cp.Phase, Clock: cp.Clock, Step: p.Step, Messages: len(p.Messages),
		LLMCalls: p.LLMCalls, ToolCalls: p.ToolCalls, Usage: p.Usage, TotalCostUSD: p.TotalCostUSD,
		Pending: len(p.Pending) > 0 && !isNull(p.Pending),
	}
}

// RunVerifyReport is what VerifyRun found.
type RunVerifyReport struct {
	Checkpoints VerifyReport // the run's checkpoint thread
	Effects     VerifyReport // its effects thread
	Blobs       int          // payloads stored beside the log, checked
	BadBlobs    []string     // those missing or whose digest does not match, with why
	BadOutputs  []string     // effects whose output does not match their output_hash
}

// OK says whether everything verified.
func (r RunVerifyReport) OK() bool {
	return r.Checkpoints.OK() && r.Effects.OK() && len(r.BadBlobs) == 0 && len(r.BadOutputs) == 0
}

// VerifyRun verifies a run's records (ids, body digests, chain links, as
// Verify), every payload it stored beside the log, against the digest its
// record holds, and every effect's output against its output_hash.
func (c *Client) VerifyRun(ctx context.Context, thread, runID string) (RunVerifyReport, error) {
	var rep RunVerifyReport
	if err := checkRun(thread, runID); err != nil {
		return rep, err
	}
	var err error
	if rep.Checkpoints, err = c.Verify(ctx, RunThread(thread, runID)); err != nil {
		return rep, err
	}
	if rep.Effects, err = c.Verify(ctx, effectsThread(thread, runID)); err != nil {
		return rep, err
	}
	for _, t := range []string{RunThread(thread, runID), effectsThread(thread, runID)} {
		for e, err := range c.log.Read(ctx, t) {
			if err != nil {
				continue // in the report above
			}
			var blob []byte // the record's blob, fetched and checked
			if ref, ok := blobOf(e.Record.Body); ok {
				rep.Blobs++
				b, err := c.getBlob(ctx, ref)
				if err != nil {
					rep.BadBlobs = append(rep.BadBlobs, fmt.Sprintf("clock %d: %v", e.Clock, err))
					continue
				}
				blob = b
			}
			if e.Record.Header.Kind != KindRunEffect {
				continue
			}
			re, err := decodeEffect(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, thread, runID)
			if err == nil {
				if blob != nil {
					re.Output = blob // checked against output_hash, not fetched again
				}
				_, err = c.effectOutput(ctx, re, thread, runID)
			}
			if err != nil {
				rep.BadOutputs = append(rep.BadOutputs, fmt.Sprintf("clock %d: %v", e.Clock, err))
			}
		}
	}
	return rep, nil
}

// blobOf returns the blob a run record's body names, if any.
func blobOf(body []byte) (BlobRef, bool) {
	var m struct {
		P *BlobRef `cbor:"payload_blob"`
		O *BlobRef `cbor:"output_blob"`
	}
	if payloadDec.Unmarshal(body, &m) != nil {
		return BlobRef{}, false
	}
	for _, r := range []*BlobRef{m.P, m.O} {
		if r != nil && r.check() == nil {
			return *r, true
		}
	}
	return BlobRef{}, false
}

// runBlobs returns the blobs named by records ids of thread, when thread
// is a run's (checkpoints or effects): what Erase deletes with them.
func (c *Client) runBlobs(ctx context.Context, thread string, ids []records.ID) map[records.ID]BlobRef {
	if _, _, ok := splitRunThread(strings.TrimSuffix(thread, "/effects")); !ok {
		return nil
	}
	out := make(map[records.ID]BlobRef)
	for _, id := range ids {
		e, err := c.log.Get(ctx, id, thread)
		if err != nil {
			continue
		}
		if ref, ok := blobOf(e.Record.Body); ok {
			out[id] = ref
		}
	}
	return out
}

// eraseBlobs deletes the blobs of the records erased.
func (c *Client) eraseBlobs(ctx context.Context, blobs map[records.ID]BlobRef, erased []records.ID) error {
	var errs []error
	for _, id := range erased {
		if ref, ok := blobs[id]; ok {
			if err := c.blobs().Delete(ctx, ref.name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
