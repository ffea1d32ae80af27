package sdk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/zeebo/blake3"

	"github.com/spl-dev/spl/records"
)

// runItem is a record of a run on its way to the log, in the run's queue.
// Its record is sealed (seal.go) before it is handed to the log.
type runItem struct {
	seq       uint64
	phase     string
	payload   any       // a checkpoint's payload, encoded by the writer
	ts        time.Time // a checkpoint's time
	rec       *records.Record
	landed    chan struct{} // closed once settled (durable items only)
	receipt   Receipt
	err       error
	coalesced bool // a newer snapshot of the same take supersedes it
}

func (it *runItem) snapshot() bool { return it.rec == nil && isSnapshotPhase(it.phase) }

// Checkpoint queues a phase checkpoint and returns at once
// (write-behind): the run's writer encodes it and appends it in the
// background, in the order of the calls. The run takes payload over: it
// must not be changed after the call. payload is a map or a struct (cbor
// or json tags); the runtime snapshot of phases step_started and
// post_llm holds the runner's fields (messages, step, state, usage, …,
// pending_llm_response).
//
// Runtime snapshots still queued when a newer one is queued are not
// written (coalesced; counted in RunStats.Coalesced): the newest one is
// what a resume needs. A checkpoint that fails to land is reported by the
// next Flush, Finish or Close.
//
// Durable where money is spent: a checkpoint of phase post_llm (the
// snapshot that carries pending_llm_response, the answer of a paid call)
// and one given Durable() return only once stored, after every
// checkpoint queued before them, with their own error; a kill after the
// call returned never makes that LLM call again on resume. WriteBehind()
// makes a post_llm checkpoint write-behind like the others. A durable
// snapshot is never coalesced away.
func (r *Run) Checkpoint(ctx context.Context, phase string, payload any, opts ...CheckpointOption) error {
	if err := checkPhase(phase); err != nil {
		return err
	}
	if err := r.cancelled(); err != nil {
		return err
	}
	if payload == nil {
		payload = map[string]any{}
	}
	cfg := checkpointConfig{durable: phase == PhasePostLLM}
	for _, o := range opts {
		o(&cfg)
	}
	it := &runItem{phase: phase, payload: payload, ts: time.Now()}
	if cfg.durable {
		it.landed = make(chan struct{})
	}
	if _, err := r.enqueue(it); err != nil || !cfg.durable {
		return err
	}
	select {
	case <-it.landed:
		if it.err != nil {
			return fmt.Errorf("spl/sdk: run %q: %s: %w", r.id, phase, it.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("spl/sdk: run %q: %s: %w (%w)", r.id, phase, ErrInDoubt, ctx.Err())
	}
}

// CheckpointOption configures one Checkpoint.
type CheckpointOption func(*checkpointConfig)

type checkpointConfig struct{ durable bool }

// Durable makes a checkpoint durable: Checkpoint returns once it is
// stored (a phase that records money spent, as post_llm does by default).
func Durable() CheckpointOption { return func(c *checkpointConfig) { c.durable = true } }

// WriteBehind makes a checkpoint write-behind, post_llm's too: Checkpoint
// returns at once, and a kill before the writer stored it loses it.
func WriteBehind() CheckpointOption { return func(c *checkpointConfig) { c.durable = false } }

func (r *Run) enqueue(it *runItem) (*runItem, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return nil, ErrRunFinished
	}
	r.enqueued++
	it.seq = r.enqueued
	r.queue = append(r.queue, it)
	r.cond.Broadcast()
	return it, nil
}

// write is the run's writer: it takes what is queued, drops the runtime
// snapshots a newer queued one supersedes, stores large payloads beside
// the log, and hands the records to the client's log all at once (one
// group commit when they can share one), until the run is finished and
// its queue drained. One take is written at a time, by the writer or by
// a caller of a durable write (durable), so records reach the log in the
// order of the calls.
func (r *Run) write() {
	defer close(r.exited)
	for {
		r.mu.Lock()
		for r.busy || (len(r.queue) == 0 && !r.finished) {
			r.cond.Wait()
		}
		items := r.queue
		r.queue = nil
		r.busy = len(items) > 0
		r.mu.Unlock()
		if len(items) == 0 {
			return
		}
		r.settleTake(items, r.send(items))
	}
}

// send seals the records of a take and hands them to the client's log. It
// settles at once the items that are coalesced or fail before the log
// has them, and returns the others with their appends.
func (r *Run) send(items []*runItem) []sent {
	last := -1
	for i, it := range items {
		if it.snapshot() {
			last = i
		}
	}
	var out []sent
	for i, it := range items {
		if it.snapshot() && i != last && it.landed == nil { // a durable one is waited for: never dropped
			it.coalesced = true
			continue
		}
		if it.rec == nil {
			it.rec, it.err = r.checkpointRecord(it.phase, it.payload, it.ts)
			it.payload = nil
		}
		if it.err == nil {
			var s submitted
			if s, it.err = r.c.submit(context.Background(), it.rec); it.err == nil {
				out = append(out, sent{it, s})
				continue
			}
		}
		r.settle(it)
	}
	return out
}

// sent is an item of a take handed to the log.
type sent struct {
	it *runItem
	s  submitted
}

// settleTake waits for the appends of a take, settles them, and ends the
// take: the next one may be written.
func (r *Run) settleTake(items []*runItem, pend []sent) {
	for _, p := range pend {
		e, err := p.s.p.Wait(context.Background())
		if p.s.release != nil {
			p.s.release()
		}
		p.it.receipt, p.it.err = receipt(e), err
		r.settle(p.it)
	}
	coalesced := 0
	for _, it := range items {
		if it.coalesced {
			coalesced++
		}
	}
	r.mu.Lock()
	r.coalesced += coalesced
	r.settled = items[len(items)-1].seq
	r.busy = false
	r.cond.Broadcast()
	r.mu.Unlock()
}

// settle records the outcome of one item.
func (r *Run) settle(it *runItem) {
	r.mu.Lock()
	if it.err != nil {
		if it.landed == nil {
			// A durable item's caller gets its error itself.
			r.failed = append(r.failed, fmt.Errorf("%s: %w", it.phase, it.err))
		}
	} else {
		r.written++
	}
	r.mu.Unlock()
	if it.landed != nil {
		close(it.landed)
	}
}

// durable appends a record built by the caller after every checkpoint
// queued before it, and waits until it landed. When nothing is queued or
// being written, the caller writes it as a take of its own, handing it to
// the log itself: no hand-over to the run's writer and back, so that
// concurrent runs' effects cost what plain appends cost.
func (r *Run) durable(ctx context.Context, phase string, rec *records.Record) (Receipt, error) {
	it := &runItem{phase: phase, rec: rec, landed: make(chan struct{})}
	r.mu.Lock()
	if r.finished {
		r.mu.Unlock()
		return Receipt{}, ErrRunFinished
	}
	r.enqueued++
	it.seq = r.enqueued
	inline := len(r.queue) == 0 && !r.busy
	if inline {
		r.busy = true
	} else {
		r.queue = append(r.queue, it)
		r.cond.Broadcast()
	}
	r.mu.Unlock()
	if inline {
		items := []*runItem{it}
		pend := r.send(items)
		if len(pend) == 0 {
			r.settleTake(items, nil)
		} else {
			select {
			case <-pend[0].s.p.Done():
				r.settleTake(items, pend)
			case <-ctx.Done():
				// The append goes on to its outcome; the take ends then.
				go r.settleTake(items, pend)
			}
		}
	}
	select {
	case <-it.landed:
		return it.receipt, it.err
	case <-ctx.Done():
		return Receipt{}, fmt.Errorf("spl/sdk: run %q: %s: %w (%w)", r.id, phase, ErrInDoubt, ctx.Err())
	}
}

// checkpointRecord builds and seals the record of a checkpoint of the
// run.
func (r *Run) checkpointRecord(phase string, payload any, ts time.Time) (*records.Record, error) {
	raw, err := checkpointPayload(phase, payload)
	if err != nil {
		return nil, err
	}
	return r.c.runCheckpointRecord(context.Background(), r.thread, r.id, r.actor(), phase, raw, ts)
}

// checkpointPayload encodes the payload of a checkpoint of phase (a map,
// a struct, or a cbor.RawMessage of a map) and holds it to the rules of a
// checkpoint's payload, each refusal a *records.FieldError on "payload…".
func checkpointPayload(phase string, payload any) ([]byte, error) {
	raw, err := payloadEnc.Marshal(payload)
	if err != nil {
		return nil, &records.FieldError{Field: "payload", Rule: "cannot encode as CBOR: " + err.Error()}
	}
	if len(raw) == 0 || raw[0]>>5 != 5 {
		return nil, &records.FieldError{Field: "payload", Rule: "must be a map"}
	}
	if err := checkAwaiting(phase, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// runCheckpointRecord builds and seals the record of a checkpoint of run
// runID on thread, its payload raw (checkpointPayload's): the redaction
// policies of the run's thread hold for it, and it is stored beside the
// log when large, after them, so that a covered value is stored nowhere.
func (c *Client) runCheckpointRecord(ctx context.Context, thread, runID, actor, phase string, raw []byte, ts time.Time) (*records.Record, error) {
	var err error
	kind := KindRunCheckpoint
	if isSnapshotPhase(phase) {
		kind = KindRunSnapshot
	}
	// The run's thread's redaction policies hold for the payload, before
	// it is stored anywhere (inline or beside the log).
	if raw, _, err = c.redactBody(ctx, thread, raw); err != nil {
		return nil, err
	}
	body := runBody{RunID: runID, ThreadID: thread, SchemaVersion: RunSchemaVersion, Phase: phase, TimestampMS: ts.UnixMilli()}
	if len(raw) > MaxInlinePayload {
		ref, err := c.putBlob(ctx, raw)
		if err != nil {
			return nil, err
		}
		body.PayloadBlob = &ref
	} else {
		body.Payload = raw
	}
	rec, err := records.New(records.ActLearn, kind, RunThread(thread, runID), actor, ts, &body)
	if err != nil {
		return nil, err
	}
	return c.admit(ctx, rec)
}

func (r *Run) actor() string { return r.cfg.actor }

// Flush waits until every checkpoint queued so far has landed, been
// coalesced or failed, or ctx is done, and reports those that failed
// since the last Flush as an *UnlandedError.
func (r *Run) Flush(ctx context.Context) error {
	if err := r.wait(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	ue := failedError(r.failed)
	r.failed = nil
	r.mu.Unlock()
	if ue != nil {
		return ue
	}
	return nil
}

func (r *Run) wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	target := r.enqueued
	for r.settled < target {
		if ctx.Err() != nil {
			return fmt.Errorf("spl/sdk: run %q: %d checkpoints not yet durable: %w", r.id, target-r.settled, ctx.Err())
		}
		r.cond.Wait()
	}
	return nil
}

// RunStats counts what a Run wrote.
type RunStats struct {
	Written   int // records landed (checkpoints, effects, the terminal one)
	Coalesced int // runtime snapshots superseded before they were written
	Ran       int // effects run and recorded by this Run
	Replayed  int // effects replayed from their records
	Pending   int // checkpoints queued and not yet settled
}

// Stats returns what the run wrote so far.
func (r *Run) Stats() RunStats {
	r.mu.Lock()
	s := RunStats{Written: r.written, Coalesced: r.coalesced, Pending: int(r.enqueued - r.settled)}
	r.mu.Unlock()
	r.effMu.Lock()
	s.Ran, s.Replayed = r.ran, r.replayed
	r.effMu.Unlock()
	return s
}

// Terminal is what Finish writes: the run_terminal checkpoint.
type Terminal struct {
	State  string // "completed" when empty; "failed", "error" or "cancelled" mark a failed run
	Result any    // terminal_result: what a resume of the finished run returns
	// Payload holds more fields of the checkpoint (final_text,
	// requested_model, normalized_model, provider_adapter, …).
	Payload map[string]any
}

// check holds t to the states a run ends in: "completed" (or empty),
// "failed", "error" or "cancelled"; a cancelled run ends as cancelled.
func (t Terminal) check(cancelled bool) error {
	switch t.State {
	case "", "completed", "failed", "error", "cancelled":
	default:
		return &records.FieldError{Field: "state", Rule: `must be "completed", "failed", "error" or "cancelled"`}
	}
	if cancelled && t.State != "cancelled" {
		return &records.FieldError{Field: "state", Rule: `the run was cancelled: it ends as "cancelled"`}
	}
	return nil
}

// payload is the run_terminal checkpoint's payload: t.Payload's fields,
// state ("completed" when empty), terminal_result and
// replayed_effect_count, the last three over any of t.Payload's.
func (t Terminal) payload(replayed int) map[string]any {
	if t.State == "" {
		t.State = "completed"
	}
	payload := make(map[string]any, len(t.Payload)+3)
	for k, v := range t.Payload {
		payload[k] = v
	}
	payload["state"] = t.State
	if t.Result != nil {
		payload["terminal_result"] = t.Result
	}
	payload["replayed_effect_count"] = replayed
	return payload
}

// FinishReport says what Finish wrote.
type FinishReport struct {
	Terminal Receipt // the run_terminal checkpoint
	RunStats
}

// Finish writes the run_terminal checkpoint (state, terminal_result,
// replayed_effect_count and t.Payload's fields) durably, after every
// checkpoint queued before it, waiting at most the flush timeout
// (WithFlushTimeout) and ctx. Then the run takes no more writes. Queued
// checkpoints that did not land within the bound are reported as an
// *UnlandedError, beside the report.
func (r *Run) Finish(ctx context.Context, t Terminal) (FinishReport, error) {
	if err := t.check(r.cancelled() != nil); err != nil {
		return FinishReport{}, err
	}
	r.effMu.Lock()
	payload := t.payload(r.replayed)
	r.effMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.flushTimeout)
	defer cancel()
	rec, err := r.checkpointRecord(PhaseRunTerminal, payload, time.Now())
	if err != nil {
		return FinishReport{}, err
	}
	rc, err := r.durable(ctx, PhaseRunTerminal, rec)
	r.stop()
	rep := FinishReport{Terminal: rc}
	if werr := r.Flush(ctx); werr != nil && err == nil {
		err = werr
	}
	rep.RunStats = r.Stats()
	return rep, err
}

// Close stops the run without finishing it: it waits, at most the flush
// timeout, for the queued checkpoints, and reports those that did not
// land. The run resumes from what landed.
func (r *Run) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.flushTimeout)
	defer cancel()
	r.stop()
	return r.Flush(ctx)
}

// stop takes no more writes; the writer drains the queue and exits.
func (r *Run) stop() {
	if r.unwatch != nil {
		r.unwatch()
	}
	r.mu.Lock()
	r.finished = true
	r.cond.Broadcast()
	r.mu.Unlock()
}

// RecordedEffect is the stored result of one tool call.
type RecordedEffect struct {
	Receipt
	CallID     string
	Tool       string
	InputHash  string
	OutputHash string
	// Output is the output as recorded (nil when it is in Blob). Effect
	// checks it against OutputHash before it replays it, VerifyRun for
	// every effect; a read (ResumeRun, RunDetail) does not.
	Output json.RawMessage
	Blob   *BlobRef
	Time   time.Time
}

// EffectResult is what Effect returns.
type EffectResult struct {
	Output   json.RawMessage
	Replayed bool    // from the record: the tool did not run
	Receipt  Receipt // the effect record
}

type effectConfig struct{ rerun bool }

// EffectOption configures one Effect.
type EffectOption func(*effectConfig)

// RerunEffect runs a tool call again when its input differs from the
// recorded one, and records the new result, instead of failing with an
// *EffectMismatchError.
func RerunEffect() EffectOption { return func(c *effectConfig) { c.rerun = true } }

// effectBody is the body of an effect record.
type effectBody struct {
	RunID       string   `cbor:"run_id"`
	ThreadID    string   `cbor:"thread_id"`
	CallID      string   `cbor:"call_id"`
	Tool        string   `cbor:"tool"`
	InputHash   string   `cbor:"input_hash"`
	OutputHash  string   `cbor:"output_hash"`
	Output      string   `cbor:"output,omitempty"`
	OutputBlob  *BlobRef `cbor:"output_blob,omitempty"`
	TimestampMS int64    `cbor:"timestamp_ms"`
}

// InputHash is the input hash of a tool call: BLAKE3-256 of the tool
// name, a zero byte and the JSON encoding of args (encoding/json: map
// keys sorted, a json.RawMessage compacted), as "blake3:<hex>".
func InputHash(tool string, args any) (string, error) {
	a, err := json.Marshal(args)
	if err != nil {
		return "", &records.FieldError{Field: "args", Rule: "cannot encode as JSON: " + err.Error()}
	}
	h := blake3.New()
	_, _ = h.Write([]byte(tool))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(a)
	return "blake3:" + hex.EncodeToString(h.Sum(nil)), nil
}

func outputHash(out []byte) string {
	d := blake3.Sum256(out)
	return "blake3:" + hex.EncodeToString(d[:])
}

// Effect runs the tool call callID once: when the run has a result
// recorded for callID with the same input hash (InputHash of tool and
// args), it returns that result, replayed, and fn does not run; else it
// runs fn, records its output durably (the effect record is on disk when
// Effect returns) and returns it. A recorded result whose input hash
// differs is an *EffectMismatchError naming both hashes, unless
// RerunEffect is given.
//
// fn's output is JSON. An error from fn is returned and nothing is
// recorded: the call runs again on the next attempt. A tool whose side
// effect happened but whose record did not land (a crash in between) runs
// again on resume: at least once for the tool, exactly once for the
// recorded result. A tool with side effects must therefore be idempotent
// by call id.
func (r *Run) Effect(ctx context.Context, callID, tool string, args any, fn func(context.Context) (json.RawMessage, error), opts ...EffectOption) (EffectResult, error) {
	var cfg effectConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkCallID(callID); err != nil {
		return EffectResult{}, err
	}
	if err := r.cancelled(); err != nil {
		return EffectResult{}, err
	}
	in, err := InputHash(tool, args)
	if err != nil {
		return EffectResult{}, err
	}
	r.effMu.Lock()
	rec, ok := r.effects[callID]
	r.effMu.Unlock()
	var recorded *RecordedEffect
	if ok {
		recorded = &rec
	}
	replay, err := effectStep(r.id, callID, tool, recorded, in, cfg.rerun)
	if err != nil {
		return EffectResult{}, err
	}
	if replay {
		out, err := r.c.effectOutput(ctx, rec, r.thread, r.id)
		if err != nil {
			return EffectResult{}, err
		}
		r.effMu.Lock()
		r.replayed++
		r.effMu.Unlock()
		return EffectResult{Output: out, Replayed: true, Receipt: rec.Receipt}, nil
	}
	r.mu.Lock()
	finished := r.finished
	r.mu.Unlock()
	if finished {
		return EffectResult{}, ErrRunFinished
	}
	out, err := fn(ctx)
	if err != nil {
		return EffectResult{}, err
	}
	er, re, err := r.c.effectRecord(ctx, r.thread, r.id, r.actor(), callID, tool, in, out)
	if err != nil {
		return EffectResult{}, err
	}
	if re.Receipt, err = r.durable(ctx, "effect "+callID, er); err != nil {
		return EffectResult{}, err
	}
	r.effMu.Lock()
	r.effects[callID] = re
	r.ran++
	r.effMu.Unlock()
	return EffectResult{Output: re.Output, Receipt: re.Receipt}, nil
}

// checkCallID validates a tool call's id.
func checkCallID(callID string) error {
	if callID == "" || len(callID) > 256 {
		return &records.FieldError{Field: "call_id", Rule: "must be 1 to 256 bytes"}
	}
	return nil
}

// effectStep is what tool call callID with input hash in does, given the
// result recorded for it (nil when none): replay it (true), run the tool
// (false), or fail with an *EffectMismatchError when the recorded input
// differs and rerun is not asked. The one rule of replay, for Run.Effect
// and for runners in other processes (RecordEffect).
func effectStep(runID, callID, tool string, recorded *RecordedEffect, in string, rerun bool) (replay bool, err error) {
	switch {
	case recorded == nil:
		return false, nil
	case recorded.InputHash == in:
		return true, nil
	case rerun:
		return false, nil
	}
	return false, &EffectMismatchError{Run: runID, CallID: callID, Tool: tool, Recorded: recorded.InputHash, Got: in, RecordedTool: recorded.Tool}
}

// effectRecord builds and seals the record of tool call callID's output
// out on run runID, and the RecordedEffect it is once landed (its
// receipt unset). The run's thread's redaction policies hold for a
// tool's answer as for every payload: a covered value is stored nowhere,
// and a replay answers the redacted output. A large output is stored
// beside the log.
func (c *Client) effectRecord(ctx context.Context, thread, runID, actor, callID, tool, in string, out json.RawMessage) (*records.Record, RecordedEffect, error) {
	if !json.Valid(out) {
		return nil, RecordedEffect{}, &records.FieldError{Field: "output", Rule: "must be JSON"}
	}
	out, err := c.redactOutput(ctx, thread, bytes.Clone(out))
	if err != nil {
		return nil, RecordedEffect{}, err
	}
	now := time.Now()
	body := effectBody{RunID: runID, ThreadID: thread, CallID: callID, Tool: tool, InputHash: in, OutputHash: outputHash(out), TimestampMS: now.UnixMilli()}
	var ref *BlobRef
	if len(out) > MaxInlinePayload {
		b, err := c.putBlob(ctx, out)
		if err != nil {
			return nil, RecordedEffect{}, err
		}
		ref, body.OutputBlob = &b, &b
	} else {
		body.Output = string(out)
	}
	// The output is redacted above (redactOutput): the last steps of the
	// seal path only.
	er, err := records.New(records.ActDo, KindRunEffect, effectsThread(thread, runID), actor, now, &body)
	if err == nil {
		er, err = c.admit(ctx, er)
	}
	if err != nil {
		return nil, RecordedEffect{}, err
	}
	return er, RecordedEffect{CallID: callID, Tool: tool, InputHash: in, OutputHash: body.OutputHash, Output: out, Blob: ref, Time: now}, nil
}

// BlobRef names a payload stored beside the log: the keyed BLAKE3-256 of
// its bytes (key: 32 random bytes, kept in the record, so that an erased
// payload cannot be confirmed by guessing; as records' body digests), its
// size, and the bucket. The blob's name in the bucket is the digest.
type BlobRef struct {
	Digest string `cbor:"digest"` // "blake3k:<hex>"
	Key    []byte `cbor:"key"`
	Size   int64  `cbor:"size"`
	Bucket string `cbor:"bucket"`
}

func (b BlobRef) check() error {
	if len(b.Key) != 32 || len(b.Digest) != len("blake3k:")+64 || b.Bucket == "" || b.Size < 0 {
		return errors.New("malformed blob reference")
	}
	return nil
}

func (b BlobRef) name() string { return b.Digest[len("blake3k:"):] }

func blobDigest(key, data []byte) string {
	h, _ := blake3.NewKeyed(key)
	_, _ = h.Write(data)
	return "blake3k:" + hex.EncodeToString(h.Sum(nil))
}

// putBlob stores data in the blob bucket, durably, and returns its
// reference.
func (c *Client) putBlob(ctx context.Context, data []byte) (BlobRef, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return BlobRef{}, fmt.Errorf("blob key: %w", err)
	}
	ref := BlobRef{Digest: blobDigest(key, data), Key: key, Size: int64(len(data)), Bucket: BlobBucket}
	if err := c.blobs().Put(ctx, ref.name(), data); err != nil {
		return BlobRef{}, err
	}
	return ref, nil
}

// getBlob fetches a blob and checks it against its reference.
func (c *Client) getBlob(ctx context.Context, ref BlobRef) ([]byte, error) {
	data, err := c.blobs().Get(ctx, ref.name())
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != ref.Size || blobDigest(ref.Key, data) != ref.Digest {
		return nil, fmt.Errorf("blob %s: %w: digest or size does not match", ref.name(), records.ErrCorrupt)
	}
	return data, nil
}

// loadBlob fills in cp's payload from the blob it names, if any.
func (c *Client) loadBlob(ctx context.Context, cp *RunCheckpoint, thread, runID string) error {
	if cp == nil || cp.Blob == nil || !cp.Payload.IsZero() {
		return nil
	}
	data, err := c.getBlob(ctx, *cp.Blob)
	if err != nil {
		return &CheckpointError{Thread: thread, Run: runID, Clock: cp.Clock, Reason: ReasonVerification, Field: "payload_blob", Err: err}
	}
	var v map[string]cbor.RawMessage
	if err := payloadDec.Unmarshal(data, &v); err != nil {
		return &CheckpointError{Thread: thread, Run: runID, Clock: cp.Clock, Reason: ReasonMalformedField, Field: "payload_blob", Err: err}
	}
	cp.Payload = Payload{raw: data}
	return nil
}

// effectOutput returns the output of a recorded effect, fetching it from
// its blob when it is not inline.
func (c *Client) effectOutput(ctx context.Context, e RecordedEffect, thread, runID string) (json.RawMessage, error) {
	out := e.Output
	if e.Blob != nil && out == nil {
		data, err := c.getBlob(ctx, *e.Blob)
		if err != nil {
			return nil, &CheckpointError{Thread: thread, Run: runID, Clock: e.Clock, Reason: ReasonVerification, Field: "output_blob", Err: err}
		}
		out = data
	}
	if outputHash(out) != e.OutputHash {
		return nil, &CheckpointError{Thread: thread, Run: runID, Clock: e.Clock, Reason: ReasonVerification, Field: "output_hash"}
	}
	return out, nil
}

// blobStore is a blob bucket: the bucket itself, or spl serve's door to
// it (doorBlobs).
type blobStore interface {
	Put(ctx context.Context, name string, data []byte) error
	Get(ctx context.Context, name string) ([]byte, error)
	Delete(ctx context.Context, name string) error
}

// blobs is the client's blob bucket (BlobBucket).
func (c *Client) blobs() blobStore {
	c.blobOnce.Do(func() {
		if c.log.Door() {
			c.blobStore = doorBlobs{l: c.log}
		} else {
			c.blobStore = c.conn.Blobs(BlobBucket, c.cfg.replicas)
		}
	})
	return c.blobStore
}
