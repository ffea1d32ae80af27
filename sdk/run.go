package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/spl-dev/spl/records"
)

// Durable agent runs.
//
// A run is a sequence of phase checkpoints and tool effects, written by an
// agent runner so that a run killed at any moment resumes where it was:
// effects already recorded are replayed instead of run again, and a run
// that finished returns its stored result without running anything.
//
// Records of a run (docs/design.md, "Runs"):
//
//   - thread RunThread(thread, run) = "<thread>/run/<run>" holds the
//     phase checkpoints: kind agent.run.snapshot for the runtime
//     snapshots (phases step_started and post_llm), kind
//     agent.run.checkpoint for every other phase. Each kind is one
//     subject, so the newest of each is one last-by-subject get.
//   - thread "<thread>/run/<run>/effects" holds the tool effects, kind
//     agent.run.effect, one record per tool call that ran. A thread of
//     their own keeps an effect from sharing an atomic batch with the
//     checkpoints queued before it (a lone record per thread in a group
//     is a plain publish).
//
// A body holds the runner's field names: run_id, thread_id,
// schema_version, phase, payload, timestamp_ms. A payload whose encoding
// is larger than MaxInlinePayload is stored in the object store bucket
// BlobBucket, named by its keyed BLAKE3 digest, and the record holds
// payload_blob (digest, key, size) instead of payload.

// Kinds and phases of runs.
const (
	KindRunCheckpoint = "agent.run.checkpoint"
	KindRunSnapshot   = "agent.run.snapshot"
	KindRunEffect     = "agent.run.effect"

	// RunSchemaVersion is the schema_version of checkpoints this SDK
	// writes.
	RunSchemaVersion = "1"

	PhaseRunStarted        = "run_started"
	PhaseStepStarted       = "step_started"
	PhasePreLLM            = "pre_llm"
	PhasePostLLM           = "post_llm"
	PhasePreToolBatch      = "pre_tool_batch"
	PhasePostToolBatch     = "post_tool_batch"
	PhasePreSubagentBatch  = "pre_subagent_batch"
	PhasePostSubagentBatch = "post_subagent_batch"
	PhaseRunTerminal       = "run_terminal"
)

// MaxInlinePayload is the largest encoded payload (or effect output) kept
// inside its record; larger ones go to the object store. It leaves room
// for the rest of the record under records.MaxEncodedSize.
const MaxInlinePayload = 256 << 10

// BlobBucket is the JetStream object store bucket of large run payloads.
const BlobBucket = "spl_blobs"

// RunStatus is where a run stands, from its newest checkpoint.
type RunStatus string

// Statuses of a run.
const (
	// RunRunning: the newest checkpoint is not run_terminal.
	RunRunning RunStatus = "running"
	// RunTerminal: a run_terminal checkpoint with a terminal_result.
	RunTerminal RunStatus = "terminal"
	// RunFailed: a run_terminal checkpoint without a terminal_result, or
	// whose state is "failed" or "error"; or a newest checkpoint no resume
	// can continue from.
	RunFailed RunStatus = "failed"
)

// Errors of runs, for errors.Is.
var (
	// ErrNoCheckpoint reports a run with no checkpoint (ResumeRun). It
	// wraps ErrNotFound. The runner treats it as corruption: the run was
	// never started, or its records were erased.
	ErrNoCheckpoint = fmt.Errorf("spl/sdk: run has no checkpoint: %w", ErrNotFound)
	// ErrCheckpointCorrupt is wrapped by every *CheckpointError.
	ErrCheckpointCorrupt = errors.New("spl/sdk: corrupt run checkpoint")
	// ErrEffectMismatch is wrapped by every *EffectMismatchError.
	ErrEffectMismatch = errors.New("spl/sdk: effect input differs from the recorded one")
	// ErrRunFinished reports a write to a run after Finish or Close.
	ErrRunFinished = errors.New("spl/sdk: run already finished")
)

// Reasons of a CheckpointError.
const (
	ReasonMissingField   = "missing field"
	ReasonMalformedField = "malformed field"
	ReasonPendingLLM     = "undecodable pending_llm_response"
	ReasonVerification   = "failed verification"
)

// CheckpointError reports a run checkpoint (or effect record) that cannot
// be resumed from. The run is not resumed: nothing is re-executed from a
// checkpoint that cannot be trusted.
type CheckpointError struct {
	Thread, Run string
	Clock       uint64 // the record's clock; 0 when unknown
	Reason      string // one of the Reason constants
	Field       string // the field, for a missing or malformed one
	Err         error  // the cause, if any (a records.ErrCorrupt for a failed verification)
}

// Error implements error.
func (e *CheckpointError) Error() string {
	s := fmt.Sprintf("spl/sdk: run %q on thread %q: checkpoint at clock %d: %s", e.Run, e.Thread, e.Clock, e.Reason)
	if e.Field != "" {
		s += " " + e.Field
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrCheckpointCorrupt and the cause.
func (e *CheckpointError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCheckpointCorrupt, e.Err}
	}
	return []error{ErrCheckpointCorrupt}
}

// EffectMismatchError reports an effect whose input hash differs from the
// one recorded for the same call id: the run is not replaying what it did
// before (the determinism check). Effect runs it again only with
// RerunEffect.
type EffectMismatchError struct {
	Run, CallID, Tool string
	Recorded, Got     string // input hashes
	RecordedTool      string
}

// Error implements error.
func (e *EffectMismatchError) Error() string {
	return fmt.Sprintf("spl/sdk: run %q: effect %q (%s): input hash %s differs from the recorded %s (tool %s)",
		e.Run, e.CallID, e.Tool, e.Got, e.Recorded, e.RecordedTool)
}

// Unwrap returns ErrEffectMismatch.
func (e *EffectMismatchError) Unwrap() error { return ErrEffectMismatch }

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
var phaseRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// RunThread is the thread that holds the checkpoints of run runID on
// thread.
func RunThread(thread, runID string) string { return thread + "/run/" + runID }

func effectsThread(thread, runID string) string { return RunThread(thread, runID) + "/effects" }

// splitRunThread returns the thread and run id of a run thread.
func splitRunThread(t string) (thread, runID string, ok bool) {
	i := strings.LastIndex(t, "/run/")
	if i <= 0 {
		return "", "", false
	}
	thread, runID = t[:i], t[i+len("/run/"):]
	return thread, runID, runIDRE.MatchString(runID)
}

// checkRun validates a thread and run id pair.
func checkRun(thread, runID string) error {
	if !runIDRE.MatchString(runID) {
		return &records.FieldError{Field: "run_id", Rule: "must be 1 to 128 characters of A-Z a-z 0-9 . _ : -"}
	}
	if err := records.CheckThread(thread); err != nil {
		return err
	}
	if err := records.CheckThread(effectsThread(thread, runID)); err != nil {
		return &records.FieldError{Field: "thread", Rule: "with the run id, must fit the thread limit (256 bytes)"}
	}
	return nil
}

// isSnapshotPhase says whether checkpoints of phase carry the runtime
// snapshot (kind agent.run.snapshot).
func isSnapshotPhase(phase string) bool { return phase == PhaseStepStarted || phase == PhasePostLLM }

// payloadDec decodes payloads into Go values: maps with string keys.
var payloadDec, _ = cbor.DecOptions{
	DefaultMapType:   reflect.TypeOf(map[string]any(nil)),
	MaxArrayElements: 1 << 24, MaxMapPairs: 1 << 24, MaxNestedLevels: 256,
}.DecMode()

// payloadEnc is the records' encoding (core deterministic).
var payloadEnc, _ = cbor.CoreDetEncOptions().EncMode()

// Payload is the payload of a checkpoint, or a value in it, as stored
// (canonical CBOR).
type Payload struct {
	raw []byte
}

// IsZero says whether the payload is absent.
func (p Payload) IsZero() bool { return len(p.raw) == 0 }

// Decode decodes the payload into v (a map, or a struct with cbor or json
// tags).
func (p Payload) Decode(v any) error {
	if p.IsZero() {
		return errors.New("spl/sdk: no payload")
	}
	return payloadDec.Unmarshal(p.raw, v)
}

// Map decodes the payload as a map.
func (p Payload) Map() (map[string]any, error) {
	var m map[string]any
	err := p.Decode(&m)
	return m, err
}

// JSON returns the payload as JSON (null when absent).
func (p Payload) JSON() (json.RawMessage, error) {
	if p.IsZero() {
		return json.RawMessage("null"), nil
	}
	var v any
	if err := p.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(jsonable(v))
}

// Field returns the value of key in a map payload (zero when absent).
func (p Payload) Field(key string) Payload {
	var m map[string]cbor.RawMessage
	if p.IsZero() || payloadDec.Unmarshal(p.raw, &m) != nil {
		return Payload{}
	}
	return Payload{raw: m[key]}
}

// jsonable turns what CBOR decodes into something encoding/json takes:
// byte strings as base64 (json's default), maps with string keys.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

// RunCheckpoint is a stored phase checkpoint of a run.
type RunCheckpoint struct {
	Receipt
	Kind          string // KindRunCheckpoint or KindRunSnapshot
	RunID         string
	ThreadID      string
	SchemaVersion string
	Phase         string
	Time          time.Time // timestamp_ms
	Payload       Payload
	Blob          *BlobRef // where the payload was stored, when not inline
}

// Terminal is the result a finished run returned, when the checkpoint is
// run_terminal with a terminal_result.
func (cp *RunCheckpoint) Terminal() (Payload, bool) {
	if cp == nil || cp.Phase != PhaseRunTerminal {
		return Payload{}, false
	}
	t := cp.Payload.Field("terminal_result")
	return t, !t.IsZero() && !isNull(t.raw)
}

// status is the status of a run whose newest checkpoint is cp.
func (cp *RunCheckpoint) status() RunStatus {
	if cp.Phase != PhaseRunTerminal {
		return RunRunning
	}
	var state string
	_ = cp.Payload.Field("state").Decode(&state)
	switch state {
	case "failed", "error":
		return RunFailed
	case "cancelled":
		return RunCancelled
	}
	if _, ok := cp.Terminal(); ok {
		return RunTerminal
	}
	return RunFailed
}

func isNull(raw []byte) bool { return len(raw) == 1 && raw[0] == 0xf6 }

// runBody is the body of a run checkpoint as written.
type runBody struct {
	RunID         string          `cbor:"run_id"`
	ThreadID      string          `cbor:"thread_id"`
	SchemaVersion string          `cbor:"schema_version"`
	Phase         string          `cbor:"phase"`
	Payload       cbor.RawMessage `cbor:"payload,omitempty"`
	PayloadBlob   *BlobRef        `cbor:"payload_blob,omitempty"`
	TimestampMS   int64           `cbor:"timestamp_ms"`
}

// decodeRunCheckpoint checks and decodes a stored checkpoint record,
// normalising legacy shapes: a body without schema_version is of version
// "0"; "state_payload" or "data" stand for payload; "timestamp" (Unix
// seconds, a float) for timestamp_ms. The payload of a blob is not
// fetched here.
func decodeRunCheckpoint(r Record, thread, runID string) (*RunCheckpoint, error) {
	fail := func(reason, field string, err error) error {
		return &CheckpointError{Thread: thread, Run: runID, Clock: r.Clock, Reason: reason, Field: field, Err: err}
	}
	var m map[string]cbor.RawMessage
	if err := payloadDec.Unmarshal(r.Record.Body, &m); err != nil {
		return nil, fail(ReasonMalformedField, "body", err)
	}
	for _, legacy := range []string{"state_payload", "data"} {
		if _, ok := m["payload"]; !ok && m[legacy] != nil {
			m["payload"] = m[legacy]
		}
	}
	cp := &RunCheckpoint{Receipt: Receipt{ID: r.ID, Clock: r.Clock}, Kind: r.Record.Header.Kind, SchemaVersion: "0"}
	text := func(key string, dst *string, required bool) error {
		raw, ok := m[key]
		if !ok {
			if required {
				return fail(ReasonMissingField, key, nil)
			}
			return nil
		}
		if err := payloadDec.Unmarshal(raw, dst); err != nil || (required && *dst == "") {
			return fail(ReasonMalformedField, key, err)
		}
		return nil
	}
	for _, f := range []struct {
		key      string
		dst      *string
		required bool
	}{{"run_id", &cp.RunID, true}, {"thread_id", &cp.ThreadID, true}, {"phase", &cp.Phase, true}, {"schema_version", &cp.SchemaVersion, false}} {
		if err := text(f.key, f.dst, f.required); err != nil {
			return nil, err
		}
	}
	if cp.RunID != runID || cp.ThreadID != thread {
		return nil, fail(ReasonMalformedField, "run_id", fmt.Errorf("names run %q on thread %q", cp.RunID, cp.ThreadID))
	}
	switch raw, ok := m["timestamp_ms"]; {
	case ok:
		var ms int64
		if err := payloadDec.Unmarshal(raw, &ms); err != nil {
			return nil, fail(ReasonMalformedField, "timestamp_ms", err)
		}
		cp.Time = time.UnixMilli(ms).UTC()
	case m["timestamp"] != nil:
		var s float64
		if err := payloadDec.Unmarshal(m["timestamp"], &s); err != nil {
			return nil, fail(ReasonMalformedField, "timestamp", err)
		}
		cp.Time = time.UnixMilli(int64(s * 1000)).UTC()
	default:
		cp.Time = r.Record.Time()
	}
	if raw, ok := m["payload_blob"]; ok {
		var ref BlobRef
		if err := payloadDec.Unmarshal(raw, &ref); err != nil || ref.check() != nil {
			return nil, fail(ReasonMalformedField, "payload_blob", err)
		}
		cp.Blob = &ref
		return cp, nil
	}
	raw, ok := m["payload"]
	if !ok {
		return nil, fail(ReasonMissingField, "payload", nil)
	}
	var v any
	if err := payloadDec.Unmarshal(raw, &v); err != nil {
		return nil, fail(ReasonMalformedField, "payload", err)
	}
	if _, isMap := v.(map[string]any); !isMap && v != nil {
		return nil, fail(ReasonMalformedField, "payload", errors.New("not a map"))
	}
	cp.Payload = Payload{raw: raw}
	return cp, nil
}

// runConfig configures a Run.
type runConfig struct {
	flushTimeout time.Duration
	actor        string
}

// RunOption configures OpenRun and ResumeRun.
type RunOption func(*runConfig)

// WithFlushTimeout bounds how long Finish and Close wait for the run's
// queued checkpoints to land. The default is 5 seconds.
func WithFlushTimeout(d time.Duration) RunOption { return func(c *runConfig) { c.flushTimeout = d } }

// WithRunActor sets the actor of the run's records (default: the
// client's).
func WithRunActor(did string) RunOption { return func(c *runConfig) { c.actor = did } }

// Resume is what OpenRun and ResumeRun found of a run.
type Resume struct {
	Status  RunStatus
	Resumed bool // the run had checkpoints
	// Latest is the newest checkpoint (nil for a new run).
	Latest *RunCheckpoint
	// Snapshot is the newest runtime snapshot (step_started, post_llm),
	// payload fetched and checked; nil when there is none.
	Snapshot *RunCheckpoint
	// Terminal is the stored result of a finished run (Status
	// RunTerminal): return it, run nothing.
	Terminal Payload
	// PendingLLMResponse is the snapshot's pending_llm_response: an LLM
	// response whose tool calls have not all run. Run them, skip the LLM
	// call. Zero when there is none.
	PendingLLMResponse Payload
	// Effects is the number of tool effects recorded so far.
	Effects int
	// Signal is the signal the run waited for, when it came after the
	// newest checkpoint (awaiting_signal): continue with its data.
	Signal *RunSignal
}

// Run is an open run: write its checkpoints (Checkpoint, write-behind),
// its tool effects (Effect, durable) and its end (Finish). A Run is safe
// for concurrent use, but one run id must be written by one Run at a
// time.
type Run struct {
	c                *Client
	thread, id       string
	rthread, ethread string
	cfg              runConfig
	resume           Resume

	mu        sync.Mutex
	cond      *sync.Cond
	queue     []*runItem
	busy      bool   // a take is being written (write, durable)
	enqueued  uint64 // items queued so far (their seq)
	settled   uint64 // every item up to this seq has landed, failed or been coalesced
	written   int
	coalesced int
	failed    []error
	finished  bool
	exited    chan struct{}

	effMu    sync.Mutex
	effects  map[string]RecordedEffect // by call id, the newest
	replayed int
	ran      int

	cancel  atomic.Pointer[RunCancelledError] // the cancel request, once seen (run_control.go)
	unwatch func()                            // stops watching for one
}

// ID returns the run id.
func (r *Run) ID() string { return r.id }

// Thread returns the thread the run is on.
func (r *Run) Thread() string { return r.thread }

// Resume returns what opening the run found.
func (r *Run) Resume() Resume { return r.resume }

// OpenRun starts run runID on thread, or resumes it when it has
// checkpoints (see ResumeRun). A run that finished comes back with
// Resume().Status RunTerminal and its stored result in Resume().Terminal:
// return that, and run nothing.
func (c *Client) OpenRun(ctx context.Context, thread, runID string, opts ...RunOption) (*Run, error) {
	r, err := c.ResumeRun(ctx, thread, runID, opts...)
	if errors.Is(err, ErrNoCheckpoint) {
		// Effects may have landed before the first checkpoint (a
		// checkpoint is write-behind; an effect is durable).
		effects, err := c.runEffects(ctx, thread, runID)
		if err != nil {
			return nil, err
		}
		return c.newRun(thread, runID, Resume{Status: RunRunning, Effects: len(effects)}, effects, opts), nil
	}
	return r, err
}

// ResumeRun resumes run runID on thread from its newest checkpoint: it
// loads the newest checkpoint and the newest runtime snapshot (two
// last-by-subject gets, whatever the size of the log), checks their
// shape, fetches and checks a payload stored beside the log, and loads
// the run's recorded effects. A run with no checkpoint is ErrNoCheckpoint;
// a checkpoint that does not verify, misses a field or holds a
// pending_llm_response that is not a map is a *CheckpointError.
func (c *Client) ResumeRun(ctx context.Context, thread, runID string, opts ...RunOption) (*Run, error) {
	if err := checkRun(thread, runID); err != nil {
		return nil, err
	}
	res, effects, err := c.loadRun(ctx, thread, runID)
	if err != nil {
		return nil, err
	}
	return c.newRun(thread, runID, res, effects, opts), nil
}

// loadRun is what ResumeRun finds of a run: where it stands, its newest
// checkpoint and snapshot (payload fetched and checked), the pending LLM
// response, and, unless it finished, its recorded effects by call id.
func (c *Client) loadRun(ctx context.Context, thread, runID string) (Resume, map[string]RecordedEffect, error) {
	latest, snap, err := c.latestRun(ctx, thread, runID)
	if err != nil {
		return Resume{}, nil, err
	}
	st, err := c.runStatus(ctx, thread, runID, latest)
	if err != nil {
		return Resume{}, nil, err
	}
	res := Resume{Resumed: true, Latest: latest, Status: st}
	if t, ok := latest.Terminal(); ok && res.Status == RunTerminal {
		res.Terminal = t
		return res, nil, nil
	}
	if st == RunRunning {
		if res.Signal, err = c.signalFor(ctx, thread, runID, latest); err != nil {
			return Resume{}, nil, err
		}
	}
	if snap != nil {
		if err := c.loadBlob(ctx, snap, thread, runID); err != nil {
			return Resume{}, nil, err
		}
		if res.PendingLLMResponse, err = pendingOf(snap, thread, runID); err != nil {
			return Resume{}, nil, err
		}
		res.Snapshot = snap
	}
	effects, err := c.runEffects(ctx, thread, runID)
	if err != nil {
		return Resume{}, nil, err
	}
	res.Effects = len(effects)
	return res, effects, nil
}

// pendingOf is the pending_llm_response of snapshot snap (zero when it
// has none), or the *CheckpointError of one a resume cannot use: the one
// rule of it, for resume and for the status every face shows.
func pendingOf(snap *RunCheckpoint, thread, runID string) (Payload, error) {
	p := snap.Payload.Field("pending_llm_response")
	if p.IsZero() || isNull(p.raw) {
		return Payload{}, nil
	}
	var m map[string]any
	if err := p.Decode(&m); err != nil {
		return Payload{}, &CheckpointError{Thread: thread, Run: runID, Clock: snap.Clock, Reason: ReasonPendingLLM, Err: err}
	}
	return p, nil
}

// latestRun returns the newest checkpoint of the run and its newest
// runtime snapshot (nil when none), or ErrNoCheckpoint. A snapshot whose
// payload is inline is held to what a resume needs of it (pendingOf), so
// that a run no resume can continue is failed wherever it is shown, not
// running; one stored beside the log is when its payload is fetched.
func (c *Client) latestRun(ctx context.Context, thread, runID string) (latest, snap *RunCheckpoint, err error) {
	rt := RunThread(thread, runID)
	get := func(kind string) (*RunCheckpoint, error) {
		e, err := c.log.Latest(ctx, rt, kind)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, nil
		case errors.Is(err, records.ErrCorrupt):
			var ce *CorruptError
			clock := uint64(0)
			if errors.As(err, &ce) {
				clock = ce.Clock
			}
			return nil, &CheckpointError{Thread: thread, Run: runID, Clock: clock, Reason: ReasonVerification, Err: err}
		case err != nil:
			return nil, fmt.Errorf("run %q: %w", runID, err)
		}
		return decodeRunCheckpoint(Record{ID: e.ID, Clock: e.Clock, Record: e.Record}, thread, runID)
	}
	cp, err := get(KindRunCheckpoint)
	if err != nil {
		return nil, nil, err
	}
	snap, err = get(KindRunSnapshot)
	if err != nil {
		return nil, nil, err
	}
	if snap != nil && snap.Blob == nil && (cp == nil || snap.Clock > cp.Clock) {
		if _, err := pendingOf(snap, thread, runID); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case cp == nil && snap == nil:
		return nil, nil, fmt.Errorf("run %q on thread %q: %w", runID, thread, ErrNoCheckpoint)
	case cp == nil || (snap != nil && snap.Clock > cp.Clock):
		return snap, snap, nil
	}
	return cp, snap, nil
}

// LatestRunCheckpoint returns the newest checkpoint of a run, its payload
// fetched: two last-by-subject gets, no scan, whatever the number of runs
// and records. ErrNoCheckpoint when it has none.
func (c *Client) LatestRunCheckpoint(ctx context.Context, thread, runID string) (*RunCheckpoint, error) {
	if err := checkRun(thread, runID); err != nil {
		return nil, err
	}
	latest, _, err := c.latestRun(ctx, thread, runID)
	if err != nil {
		return nil, err
	}
	return latest, c.loadBlob(ctx, latest, thread, runID)
}

func (c *Client) newRun(thread, runID string, res Resume, effects map[string]RecordedEffect, opts []RunOption) *Run {
	cfg := runConfig{flushTimeout: 5 * time.Second, actor: c.cfg.actor}
	for _, o := range opts {
		o(&cfg)
	}
	if effects == nil {
		effects = make(map[string]RecordedEffect)
	}
	r := &Run{
		c: c, thread: thread, id: runID,
		rthread: RunThread(thread, runID), ethread: effectsThread(thread, runID),
		cfg: cfg, resume: res, effects: effects, exited: make(chan struct{}),
	}
	r.cond = sync.NewCond(&r.mu)
	if res.Status != RunRunning && res.Status != RunWaiting {
		// Nothing more is written to a finished or cancelled run.
		r.finished = true
		close(r.exited)
		return r
	}
	r.watchCancel()
	go r.write()
	return r
}
