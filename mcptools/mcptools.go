// Package mcptools is spl as tools an agent calls: the tools, resources
// and prompts of spl's Model Context Protocol server, built on the
// official Go SDK. `spl mcp` serves them over stdio, and `spl serve` over
// MCP's streamable HTTP transport at /mcp, behind its bearer tokens.
//
// The tools decide nothing themselves: each one builds the request the
// other faces build and hands it to the service layer (sdk.Client), so
// that a call is checked by the same rules and refused with the same
// errors as over the CLI or HTTP. A refused call is a tool error (the
// result's isError, its text naming the field and the rule), never a
// protocol error.
package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// Right is what a connection's credential allows: the read tools only,
// or every tool.
type Right int

const (
	// Read offers the tools, resources and prompts that only read.
	Read Right = iota
	// Write offers the tools that write too.
	Write
)

// Version is the server's version in its MCP implementation info.
const Version = "0.1.0"

// Options configure New.
type Options struct {
	// Actor is the actor of what a tool writes when the call names none
	// (spl mcp: $SPL_ACTOR); with none, such a call is refused naming
	// the field actor.
	Actor string
}

// New returns the MCP server of spl on c, offering what right allows.
func New(c *sdk.Client, right Right, o Options) (*mcp.Server, error) {
	subs := &subscriptions{c: c}
	s := mcp.NewServer(&mcp.Implementation{Name: "spl", Title: "spl: verifiable records for agents", Version: Version}, &mcp.ServerOptions{
		SubscribeHandler:   subs.subscribe,
		UnsubscribeHandler: subs.unsubscribe,
		Instructions: "spl keeps durable, verifiable state for agents: immutable records on threads, and session " +
			"checkpoints (summary, learnings, next steps) to resume from. Save a checkpoint at the end of a piece of " +
			"work (save_checkpoint); read the latest at the start of the next (latest_checkpoint, or the resume_work prompt).",
	})
	subs.srv = s
	t := tools{c: c, actor: o.Actor}
	var errs []error
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	add(s, &errs, &mcp.Tool{Name: "latest_checkpoint", Annotations: readOnly,
		Description: "The latest checkpoint of a thread that verifies: its summary, learnings, next steps, state and id. Read it at the start of a session to pick up where the last one stopped."}, t.latest)
	add(s, &errs, &mcp.Tool{Name: "list_session_checkpoints", Annotations: readOnly,
		Description: "The checkpoints of a thread, oldest first, each with its type, node and whether it is clean and can be resumed from. Checkpoints that do not verify are skipped and their clocks listed."}, t.list)
	add(s, &errs, &mcp.Tool{Name: "inspect_checkpoint", Annotations: readOnly,
		Description: "One checkpoint of a thread in full, named by its id, the end of its id, or its name."}, t.inspect)
	add(s, &errs, &mcp.Tool{Name: "list_resumable_sessions", Annotations: readOnly,
		Description: "Sessions that can be resumed (failed, paused or cancelled, with a checkpoint a resume takes up), newest activity first; or, with status, the sessions in those statuses."}, t.sessions)
	add(s, &errs, &mcp.Tool{Name: "thread_tail", Annotations: readOnly,
		Description: "The newest records of a thread, oldest first, each verified; optionally of one kind."}, t.tail)
	add(s, &errs, &mcp.Tool{Name: "diff_checkpoints", Annotations: readOnly,
		Description: "What changed between two checkpoints (of one thread, or of two: b_thread): the summary, learnings, next steps and state keys added, removed or changed."}, t.diff)
	add(s, &errs, &mcp.Tool{Name: "search_threads", Annotations: readOnly,
		Description: "Threads with a record by an actor, or of a kind, or active since a time; newest activity first, with their record and checkpoint counts."}, t.threads)
	add(s, &errs, &mcp.Tool{Name: "list_runs", Annotations: readOnly,
		Description: "Durable runs, with their status (running, terminal, failed) and newest phase."}, t.runs)
	add(s, &errs, &mcp.Tool{Name: "get_run", Annotations: readOnly,
		Description: "A durable run in full: its phases, its recorded effects, its newest snapshot and its result."}, t.run)
	if right == Write {
		add(s, &errs, &mcp.Tool{Name: "save_checkpoint", Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false), DestructiveHint: ptr(false)},
			Description: "Save a session checkpoint on a thread: what was done (summary), what was learned (learnings, at least one), what comes next (next_steps). Stored as an immutable, content-addressed record; returns its id and clock."}, t.save)
		add(s, &errs, &mcp.Tool{Name: "resume_session", Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false), DestructiveHint: ptr(false)},
			Description: "Resume the session of a thread from a checkpoint (default: the latest; for a failed session the latest clean, resumable one), with changes to its shared memory. Returns the resume context and records the resume."}, t.resume)
		add(s, &errs, &mcp.Tool{Name: "pause_session", Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false), DestructiveHint: ptr(false)},
			Description: "Pause the session of a thread: a pause checkpoint with each agent's recent transcript, the budget, rounds and time spent, to resume later (resume_session)."}, t.pause)
		add(s, &errs, &mcp.Tool{Name: "fork_session", Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false), DestructiveHint: ptr(false)},
			Description: "Fork a thread from one of its checkpoints (default the latest) into a new, empty thread, with changes to the copied state (paths like a.b): to try another approach without touching the original."}, t.fork)
		add(s, &errs, &mcp.Tool{Name: "cancel_run", Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
			Description: "Cancel a durable run, saying why: its runner stops at its next checkpoint or tool effect, and a resume runs nothing. A finished run is refused."}, t.cancelRun)
		add(s, &errs, &mcp.Tool{Name: "signal_run", Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false), DestructiveHint: ptr(false)},
			Description: "Send a waiting durable run (status waiting) the signal it waits for, e.g. an approval, with data (any JSON value): the run is running again and its runner's next resume continues with the data. A run not waiting for that signal is refused, as is a second signal for one wait."}, t.signalRun)
		add(s, &errs, &mcp.Tool{Name: "emit", Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false), DestructiveHint: ptr(false)},
			Description: "Append any record to a thread: an act (upper case, e.g. KNOW, DO, LEARN), a kind (lower-case dotted, e.g. agent.step) and a JSON object body."}, t.emit)
	}
	addResources(s, t)
	addPrompts(s, t)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	return s, nil
}

// rawJSON is the schema of a JSON value of any type: what a
// json.RawMessage or an any of the wire types holds (a body, a state,
// shared memory), which inference would take for an array of bytes, or
// write as the schema true, which some clients do not take.
var rawJSON = &jsonschema.Schema{Description: "any JSON value"}

// schemaTypes are the schemas inference would get wrong (see rawJSON).
var schemaTypes = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): rawJSON,
	reflect.TypeFor[any]():             rawJSON,
}}

// add adds a tool whose input and output schemas are inferred from In
// and Out as the wire types marshal (json.RawMessage as any JSON value).
//
// Its arguments are read as every face reads JSON, not as the MCP SDK's
// typed handlers do (through map[string]any, where a big integer becomes
// the nearest float64 and a duplicate key the last one): the raw
// arguments pass the strict reader of records (records.CheckJSON: a
// value it would change is refused, naming its path under "arguments"),
// then the input schema, then decode into In, whose fields of any JSON
// are json.RawMessage, read by records again where they are used.
func add[In, Out any](s *mcp.Server, errs *[]error, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	in, err := jsonschema.For[In](schemaTypes)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("tool %s: input schema: %w", t.Name, err))
		return
	}
	out, err := jsonschema.For[Out](schemaTypes)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("tool %s: output schema: %w", t.Name, err))
		return
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("tool %s: input schema: %w", t.Name, err))
		return
	}
	t.InputSchema, t.OutputSchema = in, out
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var input In
		if err := arguments(req.Params.Arguments, resolved, &input); err != nil {
			return toolError(err), nil
		}
		res, output, err := h(ctx, req, input)
		if err != nil {
			return toolError(err), nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		if res.StructuredContent == nil {
			res.StructuredContent = output
		}
		return res, nil
	})
}

// arguments reads a call's raw arguments into v: strictly (records), by
// the input schema, then as JSON.
func arguments(raw json.RawMessage, schema *jsonschema.Resolved, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := records.CheckJSON(raw, "arguments"); err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("refused: arguments: must be a JSON object: %w", err)
	}
	if err := schema.Validate(m); err != nil {
		return fmt.Errorf("refused: arguments: %w", err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("refused: arguments: %w", err)
	}
	return nil
}

// toolError is a refused or failed call, as a tool error the agent reads.
func toolError(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

func ptr[T any](v T) *T { return &v }

// tools are the handlers, on the service layer.
type tools struct {
	c     *sdk.Client
	actor string // the default actor (Options.Actor)
}

// actorOr is actor, else the default one.
func (t tools) actorOr(actor string) string {
	if actor == "" {
		return t.actor
	}
	return actor
}

// ThreadInput names a thread.
type ThreadInput struct {
	Thread string `json:"thread" jsonschema:"the thread, e.g. th_auth_refactor"`
}

// CheckpointOutput is a checkpoint with its execution state.
type CheckpointOutput struct {
	Checkpoint wire.SessionCheckpoint `json:"checkpoint"`
	// Skipped are the clocks of newer checkpoints that do not verify.
	Skipped []uint64 `json:"skipped,omitempty"`
}

func (t tools) latest(ctx context.Context, _ *mcp.CallToolRequest, in ThreadInput) (*mcp.CallToolResult, CheckpointOutput, error) {
	if err := records.CheckThread(in.Thread); err != nil {
		return nil, CheckpointOutput{}, err
	}
	sc, err := t.c.LatestCheckpoint(ctx, in.Thread)
	if err != nil {
		return nil, CheckpointOutput{}, explain(err)
	}
	j, err := sessionCheckpoint(sc)
	if err != nil {
		return nil, CheckpointOutput{}, err
	}
	out := CheckpointOutput{Checkpoint: j, Skipped: sc.Skipped}
	return textResult(checkpointText(j), out), out, nil
}

// ListInput filters the checkpoints of a thread.
type ListInput struct {
	Thread string `json:"thread" jsonschema:"the thread"`
	Type   string `json:"type,omitempty" jsonschema:"only checkpoints of this type (phase_boundary, safe_point, error_boundary, ...)"`
	Clean  bool   `json:"clean,omitempty" jsonschema:"only clean checkpoints"`
	Limit  int    `json:"limit,omitempty" jsonschema:"the newest this many; 0 for all"`
}

// ListOutput is the checkpoints of a thread.
type ListOutput struct {
	Thread      string                   `json:"thread"`
	Checkpoints []wire.SessionCheckpoint `json:"checkpoints"`
	Skipped     []uint64                 `json:"skipped,omitempty"`
}

func (t tools) list(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	if err := records.CheckThread(in.Thread); err != nil {
		return nil, ListOutput{}, err
	}
	if in.Limit < 0 {
		return nil, ListOutput{}, &records.FieldError{Field: "limit", Rule: "must be 0 (all) or more"}
	}
	cps, err := t.c.SessionCheckpoints(ctx, in.Thread, sdk.CheckpointQuery{Type: in.Type, Clean: in.Clean, Limit: in.Limit})
	skipped, ok := sdk.Skipped(err)
	if !ok && !errors.Is(err, sdk.ErrNotFound) {
		return nil, ListOutput{}, explain(err)
	}
	out := ListOutput{Thread: in.Thread, Checkpoints: []wire.SessionCheckpoint{}, Skipped: skipped}
	var b strings.Builder
	for _, cp := range cps {
		j, err := cp.Wire()
		if err != nil {
			return nil, ListOutput{}, err
		}
		out.Checkpoints = append(out.Checkpoints, j)
		fmt.Fprintf(&b, "- clock %d, %s%s: %s\n", j.Clock, j.ID, typeNote(j), j.Summary)
	}
	if len(cps) == 0 {
		fmt.Fprintf(&b, "no matching checkpoints on thread %q\n", in.Thread)
	}
	for _, c := range skipped {
		fmt.Fprintf(&b, "(skipped a record that does not verify, at clock %d)\n", c)
	}
	return textResult(b.String(), out), out, nil
}

// InspectInput names one checkpoint.
type InspectInput struct {
	Thread string `json:"thread" jsonschema:"the thread"`
	Ref    string `json:"ref" jsonschema:"the checkpoint: its id, the end of its id, or its name"`
}

func (t tools) inspect(ctx context.Context, _ *mcp.CallToolRequest, in InspectInput) (*mcp.CallToolResult, CheckpointOutput, error) {
	if err := records.CheckThread(in.Thread); err != nil {
		return nil, CheckpointOutput{}, err
	}
	if in.Ref == "" {
		return nil, CheckpointOutput{}, &records.FieldError{Field: "ref", Rule: "required: an id, the end of an id, or a name"}
	}
	sc, err := t.c.FindCheckpoint(ctx, in.Thread, in.Ref)
	if err != nil {
		return nil, CheckpointOutput{}, explain(err)
	}
	j, err := sessionCheckpoint(sc)
	if err != nil {
		return nil, CheckpointOutput{}, err
	}
	out := CheckpointOutput{Checkpoint: j}
	return textResult(checkpointText(j), out), out, nil
}

// SessionsInput filters sessions.
type SessionsInput struct {
	Status []string `json:"status,omitempty" jsonschema:"sessions in these statuses (running, paused, failed, completed, cancelled); default: those that can be resumed"`
	Limit  int      `json:"limit,omitempty" jsonschema:"at most this many; default 50"`
}

// SessionsOutput is a list of sessions.
type SessionsOutput struct {
	Sessions []wire.Session `json:"sessions"`
}

func (t tools) sessions(ctx context.Context, _ *mcp.CallToolRequest, in SessionsInput) (*mcp.CallToolResult, SessionsOutput, error) {
	if in.Limit < 0 {
		return nil, SessionsOutput{}, &records.FieldError{Field: "limit", Rule: "must be 0 (the default, 50) or more"}
	}
	if in.Limit == 0 {
		in.Limit = 50
	}
	f := sdk.SessionFilter{Status: in.Status, Resumable: len(in.Status) == 0, Limit: in.Limit}
	ss, err := t.c.Sessions(ctx, f)
	if err != nil {
		return nil, SessionsOutput{}, explain(err)
	}
	out := SessionsOutput{Sessions: []wire.Session{}}
	var b strings.Builder
	for _, s := range ss {
		j := s.Wire()
		out.Sessions = append(out.Sessions, j)
		fmt.Fprintf(&b, "- %s: %s, updated %s\n", j.SessionID, j.Status, j.UpdatedAt)
	}
	if len(ss) == 0 {
		b.WriteString("no sessions\n")
	}
	return textResult(b.String(), out), out, nil
}

// TailInput asks for the newest records of a thread.
type TailInput struct {
	Thread string `json:"thread" jsonschema:"the thread"`
	N      int    `json:"n,omitempty" jsonschema:"how many of the newest records; default 20, at most 1000"`
	Kind   string `json:"kind,omitempty" jsonschema:"only records of this kind"`
}

// RecordsOutput is records in clock order.
type RecordsOutput struct {
	Records []wire.Record `json:"records"`
	Skipped []uint64      `json:"skipped,omitempty"`
}

func (t tools) tail(ctx context.Context, _ *mcp.CallToolRequest, in TailInput) (*mcp.CallToolResult, RecordsOutput, error) {
	if err := records.CheckThread(in.Thread); err != nil {
		return nil, RecordsOutput{}, err
	}
	switch {
	case in.N < 0 || in.N > 1000:
		return nil, RecordsOutput{}, &records.FieldError{Field: "n", Rule: fmt.Sprintf("must be 1 to 1000 (0: 20), got %d", in.N)}
	case in.N == 0:
		in.N = 20
	}
	opts := []sdk.QueryOption{sdk.Last(in.N)}
	if in.Kind != "" {
		opts = append(opts, sdk.OfKind(in.Kind))
	}
	out := RecordsOutput{Records: []wire.Record{}}
	var b strings.Builder
	for r, err := range t.c.QueryThread(ctx, in.Thread, opts...) {
		var ce *sdk.CorruptError
		switch {
		case errors.As(err, &ce):
			out.Skipped = append(out.Skipped, ce.Clock)
			fmt.Fprintf(&b, "(skipped a record that does not verify, at clock %d)\n", ce.Clock)
			continue
		case err != nil:
			return nil, RecordsOutput{}, explain(err)
		}
		j, err := wire.NewRecord(r.ID, r.Clock, r.Record)
		if err != nil {
			return nil, RecordsOutput{}, err
		}
		out.Records = append(out.Records, j)
		fmt.Fprintf(&b, "- clock %d %s %s by %s: %s\n", j.Clock, j.Act, j.Kind, j.Actor, j.Body)
	}
	if len(out.Records) == 0 && len(out.Skipped) == 0 {
		fmt.Fprintf(&b, "no records on thread %q\n", in.Thread)
	}
	return textResult(b.String(), out), out, nil
}

// ThreadsInput filters threads.
type ThreadsInput struct {
	Actor string `json:"actor,omitempty" jsonschema:"threads with a record by this actor (a DID)"`
	Kind  string `json:"kind,omitempty" jsonschema:"threads with a record of this kind"`
	Since string `json:"since,omitempty" jsonschema:"threads active at or after this time (RFC 3339, e.g. 2026-12-01T00:00:00Z)"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many; default 50"`
}

// ThreadsOutput is a list of threads.
type ThreadsOutput struct {
	Threads []wire.Thread `json:"threads"`
}

func (t tools) threads(ctx context.Context, _ *mcp.CallToolRequest, in ThreadsInput) (*mcp.CallToolResult, ThreadsOutput, error) {
	f := sdk.ThreadFilter{Actor: in.Actor, Kind: in.Kind, Limit: in.Limit, Freshness: sdk.Freshness{Fresh: true}}
	switch {
	case in.Limit < 0:
		return nil, ThreadsOutput{}, &records.FieldError{Field: "limit", Rule: "must be 0 (the default, 50) or more"}
	case in.Limit == 0:
		f.Limit = 50
	}
	if in.Since != "" {
		since, err := time.Parse(time.RFC3339, in.Since)
		if err != nil {
			return nil, ThreadsOutput{}, &records.FieldError{Field: "since", Rule: "must be an RFC 3339 time, e.g. 2026-12-01T00:00:00Z"}
		}
		f.Since = since
	}
	ts, err := t.c.Threads(ctx, f)
	if err != nil {
		return nil, ThreadsOutput{}, explain(err)
	}
	out := ThreadsOutput{Threads: []wire.Thread{}}
	var b strings.Builder
	for _, th := range ts {
		j := th.Wire()
		out.Threads = append(out.Threads, j)
		fmt.Fprintf(&b, "- %s: %d records, %d checkpoints, last %s by %s\n", j.Thread, j.Records, j.Checkpoints, j.LastTime, j.LastActor)
	}
	if len(ts) == 0 {
		b.WriteString("no threads\n")
	}
	return textResult(b.String(), out), out, nil
}

// PauseInput pauses a session.
type PauseInput struct {
	Thread      string   `json:"thread" jsonschema:"the thread of the session"`
	Reason      string   `json:"reason,omitempty" jsonschema:"why it pauses (a constraint, a gate, a call)"`
	Node        string   `json:"node,omitempty" jsonschema:"the node it pauses at"`
	BudgetSpent float64  `json:"budget_spent,omitempty" jsonschema:"budget spent so far"`
	Rounds      uint64   `json:"rounds,omitempty" jsonschema:"rounds completed"`
	ElapsedMs   int64    `json:"elapsed_ms,omitempty" jsonschema:"time spent in this working session, in milliseconds"`
	Agents      []string `json:"agents,omitempty" jsonschema:"the active agents; default those the transcript names"`
	Depth       int      `json:"depth,omitempty" jsonschema:"transcript events kept per agent; default 50"`
	Actor       string   `json:"actor,omitempty" jsonschema:"who pauses (a DID); default the server's actor"`
	// PendingDelegations are the delegations in flight; absent: those the
	// transcript leaves unanswered.
	PendingDelegations []json.RawMessage `json:"pending_delegations,omitempty" jsonschema:"the delegations in flight, each an object; default those the transcript leaves unanswered (a delegation with no child_result from its target)"`
}

func (t tools) pause(ctx context.Context, _ *mcp.CallToolRequest, in PauseInput) (*mcp.CallToolResult, wire.Paused, error) {
	if err := records.CheckThread(in.Thread); err != nil {
		return nil, wire.Paused{}, err
	}
	elapsed, err := sdk.Milliseconds("elapsed_ms", in.ElapsedMs)
	if err != nil {
		return nil, wire.Paused{}, err
	}
	o := sdk.PauseOptions{Depth: in.Depth, BudgetSpent: in.BudgetSpent,
		Rounds: in.Rounds, Elapsed: elapsed, Agents: in.Agents, Reason: in.Reason, Node: in.Node}
	if in.PendingDelegations != nil {
		o.PendingDelegations = make([]any, len(in.PendingDelegations))
		for i, d := range in.PendingDelegations {
			if o.PendingDelegations[i], err = records.ValueFromJSON(d, fmt.Sprintf("pending_delegations[%d]", i)); err != nil {
				return nil, wire.Paused{}, explain(err)
			}
		}
	}
	p, err := t.c.PauseSession(ctx, in.Thread, t.actorOr(in.Actor), o)
	if err != nil {
		return nil, wire.Paused{}, explain(err)
	}
	j, err := p.Wire()
	if err != nil {
		return nil, wire.Paused{}, err
	}
	return textResult(fmt.Sprintf("paused %s: checkpoint %s at clock %d\n", in.Thread, j.Checkpoint, j.Clock), j), j, nil
}

// DiffInput names two checkpoints.
type DiffInput struct {
	Thread  string `json:"thread" jsonschema:"the thread of a (and of b, unless b_thread)"`
	A       string `json:"a" jsonschema:"the first checkpoint: id, end of id, or name"`
	B       string `json:"b" jsonschema:"the second checkpoint: id, end of id, or name"`
	BThread string `json:"b_thread,omitempty" jsonschema:"the thread of b, when it is another (a fork)"`
}

func (t tools) diff(ctx context.Context, _ *mcp.CallToolRequest, in DiffInput) (*mcp.CallToolResult, wire.Diff, error) {
	for _, th := range []struct{ field, v string }{{"thread", in.Thread}, {"b_thread", in.BThread}} {
		if th.v == "" && th.field == "b_thread" {
			continue
		}
		if err := records.CheckThread(th.v); err != nil {
			return nil, wire.Diff{}, fmt.Errorf("%s: %w", th.field, err)
		}
	}
	d, err := t.c.DiffRefs(ctx, in.Thread, in.A, in.BThread, in.B)
	if err != nil {
		return nil, wire.Diff{}, explain(err)
	}
	j := d.Wire()
	b, _ := json.MarshalIndent(j, "", "  ")
	return textResult(string(b), j), j, nil
}

// ForkInput forks a thread.
type ForkInput struct {
	Thread string                     `json:"thread" jsonschema:"the thread to fork"`
	To     string                     `json:"to" jsonschema:"the new thread; it must hold no record"`
	From   string                     `json:"from,omitempty" jsonschema:"the checkpoint to fork from (id, end of id, or name); default the latest"`
	Set    map[string]json.RawMessage `json:"set,omitempty" jsonschema:"changes to the copied state, by path (a.b)"`
	Actor  string                     `json:"actor,omitempty" jsonschema:"who forks (a DID); default the server's actor"`
}

func (t tools) fork(ctx context.Context, _ *mcp.CallToolRequest, in ForkInput) (*mcp.CallToolResult, wire.Fork, error) {
	if err := records.CheckThread(in.Thread); err != nil {
		return nil, wire.Fork{}, err
	}
	set, err := sdk.StateSets(in.Set)
	if err != nil {
		return nil, wire.Fork{}, err
	}
	f, err := t.c.Fork(ctx, in.Thread, sdk.ForkRequest{From: in.From, To: in.To, Actor: t.actorOr(in.Actor), Set: set})
	if err != nil && f.Checkpoint.Record.Record == nil {
		return nil, wire.Fork{}, explain(err)
	}
	j, werr := f.Wire()
	if werr != nil {
		return nil, wire.Fork{}, werr
	}
	text := fmt.Sprintf("forked %s from %s into %s: first checkpoint %s\n", in.Thread, f.From.ID, in.To, f.Checkpoint.ID)
	if err != nil {
		text += fmt.Sprintf("(the fork is made; its note on %s was not: %v)\n", in.Thread, err)
	}
	return textResult(text, j), j, nil
}

// SaveInput is a checkpoint to save.
type SaveInput struct {
	Thread        string                     `json:"thread" jsonschema:"the thread, e.g. th_auth_refactor"`
	Summary       string                     `json:"summary" jsonschema:"what was done, in a few sentences (at most 8 KiB)"`
	Learnings     []string                   `json:"learnings" jsonschema:"what was learned, at least one"`
	NextSteps     []string                   `json:"next_steps,omitempty" jsonschema:"what comes next"`
	State         map[string]json.RawMessage `json:"state,omitempty" jsonschema:"structured state to resume with"`
	Name          string                     `json:"name,omitempty" jsonschema:"a name to find this checkpoint by"`
	Type          string                     `json:"type,omitempty" jsonschema:"phase_boundary, safe_point, error_boundary, ..."`
	IsClean       *bool                      `json:"is_clean,omitempty" jsonschema:"whether the work is in a clean state (default true)"`
	CanResumeFrom *bool                      `json:"can_resume_from,omitempty" jsonschema:"whether a session may resume from it (default true)"`
	Actor         string                     `json:"actor,omitempty" jsonschema:"the writer's DID; default the server's actor"`
}

// Saved says where a record landed.
type Saved struct {
	ID     string `json:"id"`
	Clock  uint64 `json:"clock"`
	Thread string `json:"thread"`
}

func (t tools) save(ctx context.Context, _ *mcp.CallToolRequest, in SaveInput) (*mcp.CallToolResult, Saved, error) {
	body := map[string]any{"summary": in.Summary, "learnings": in.Learnings}
	for k, v := range map[string]any{"next_steps": in.NextSteps, "state": in.State, "name": in.Name, "type": in.Type,
		"is_clean": in.IsClean, "can_resume_from": in.CanResumeFrom} {
		if !zero(v) {
			body[k] = v
		}
	}
	return t.append(ctx, in.Thread, records.ActLearn, records.KindCheckpoint, in.Actor, body)
}

// zero reports whether an optional field was left out.
func zero(v any) bool {
	switch v := v.(type) {
	case string:
		return v == ""
	case []string:
		return v == nil
	case map[string]json.RawMessage:
		return v == nil
	case *bool:
		return v == nil
	}
	return v == nil
}

// EmitInput is any record.
type EmitInput struct {
	Thread string                     `json:"thread" jsonschema:"the thread"`
	Act    string                     `json:"act" jsonschema:"upper-case verb: KNOW, DO, LEARN, SAY, ..."`
	Kind   string                     `json:"kind" jsonschema:"lower-case dotted kind, e.g. agent.step"`
	Body   map[string]json.RawMessage `json:"body" jsonschema:"the record's body, a JSON object"`
	Actor  string                     `json:"actor,omitempty" jsonschema:"the writer's DID; default the server's actor"`
}

func (t tools) emit(ctx context.Context, _ *mcp.CallToolRequest, in EmitInput) (*mcp.CallToolResult, Saved, error) {
	if in.Body == nil {
		return nil, Saved{}, &records.FieldError{Field: "body", Rule: "required: a JSON object"}
	}
	return t.append(ctx, in.Thread, in.Act, in.Kind, in.Actor, in.Body)
}

// append writes one record as the HTTP API's POST /v1/records does: the
// body through the one strict JSON reader, the record through the
// service layer.
func (t tools) append(ctx context.Context, thread, act, kind, actor string, body any) (*mcp.CallToolResult, Saved, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, Saved{}, &records.FieldError{Field: "body", Rule: "must be a JSON object: " + err.Error()}
	}
	cb, err := records.BodyFromJSON(raw)
	if err != nil {
		return nil, Saved{}, err
	}
	r, err := t.c.AppendEvent(ctx, sdk.Event{Act: act, Kind: kind, Thread: thread, Actor: t.actorOr(actor), Body: records.RawBody(cb)})
	var re *sdk.RetentionError
	if err != nil && !errors.As(err, &re) {
		return nil, Saved{}, explain(err)
	}
	out := Saved{ID: r.ID.String(), Clock: r.Clock, Thread: thread}
	return textResult(fmt.Sprintf("saved %s on %s at clock %d\n", out.ID, thread, out.Clock), out), out, nil
}

// ResumeInput resumes a session.
type ResumeInput struct {
	Thread string          `json:"thread" jsonschema:"the thread of the session"`
	From   string          `json:"from,omitempty" jsonschema:"the checkpoint to resume from (id, end of id, or name); default the latest"`
	Set    json.RawMessage `json:"set,omitempty" jsonschema:"keys of the shared memory to change, a JSON object"`
	Actor  string          `json:"actor,omitempty" jsonschema:"who resumes (a DID); default the server's actor"`
}

func (t tools) resume(ctx context.Context, _ *mcp.CallToolRequest, in ResumeInput) (*mcp.CallToolResult, wire.Resume, error) {
	if err := records.CheckThread(in.Thread); err != nil {
		return nil, wire.Resume{}, err
	}
	o := sdk.ResumeOptions{Ref: in.From}
	if in.Set != nil {
		var err error
		if o.Set, err = records.MapFromJSON(in.Set, "set"); err != nil {
			return nil, wire.Resume{}, explain(err)
		}
	}
	rc, err := t.c.ResumeSession(ctx, in.Thread, t.actorOr(in.Actor), o)
	if err != nil {
		return nil, wire.Resume{}, explain(err)
	}
	j, err := rc.Wire()
	if err != nil {
		return nil, wire.Resume{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "resumed %s from %s (was %s)\n", in.Thread, j.ResumedFrom, j.WasStatus)
	for _, a := range rc.Agents {
		b.WriteString("\n" + a.Prompt + "\n")
	}
	return textResult(b.String(), j), j, nil
}

// sessionCheckpoint is the wire form of a saved checkpoint with its state.
func sessionCheckpoint(sc sdk.SavedCheckpoint) (wire.SessionCheckpoint, error) {
	st, err := records.ExecStateOf(sc.Checkpoint)
	if err != nil {
		return wire.SessionCheckpoint{}, err
	}
	return sdk.SessionCheckpoint{SavedCheckpoint: sc, State: st}.Wire()
}

// checkpointText is a checkpoint as an agent reads it.
func checkpointText(j wire.SessionCheckpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Checkpoint %s (clock %d%s) on %s\n\nSummary: %s\n", j.ID, j.Clock, typeNote(j), j.Thread, j.Summary)
	if len(j.Learnings) > 0 {
		b.WriteString("\nLearnings:\n")
		for _, l := range j.Learnings {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	if len(j.NextSteps) > 0 {
		b.WriteString("\nNext steps:\n")
		for _, s := range j.NextSteps {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	return b.String()
}

func typeNote(j wire.SessionCheckpoint) string {
	note := ""
	if j.Type != "" {
		note += ", " + j.Type
	}
	if j.Name != "" {
		note += ", named " + j.Name
	}
	if !j.IsClean {
		note += ", not clean"
	}
	return note
}

// textResult is a tool result whose text is text, for a model to read,
// beside the structured content out.
func textResult(text string, out any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}
}

// explain wraps an error of the service layer for an agent: a refused
// field keeps its field and rule in the text.
func explain(err error) error {
	var fe *records.FieldError
	switch {
	case errors.As(err, &fe):
		return fmt.Errorf("refused: %w", err)
	case errors.Is(err, sdk.ErrNoActor):
		return fmt.Errorf("refused: actor: %w: give the call an actor, or the server one (spl mcp --actor, SPL_ACTOR)", err)
	}
	return err
}
