package mcptools

// The tools of runs: list and show them, cancel one, signal one.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// RunsInput filters runs.
type RunsInput struct {
	Status string `json:"status,omitempty" jsonschema:"running, terminal or failed; default all"`
}

// RunsOutput is a list of runs.
type RunsOutput struct {
	Runs []wire.Run `json:"runs"`
}

func (t tools) runs(ctx context.Context, _ *mcp.CallToolRequest, in RunsInput) (*mcp.CallToolResult, RunsOutput, error) {
	rs, err := t.c.Runs(ctx, sdk.RunFilter{Status: sdk.RunStatus(in.Status)})
	if err != nil {
		return nil, RunsOutput{}, explain(err)
	}
	out := RunsOutput{Runs: []wire.Run{}}
	var b strings.Builder
	for _, r := range rs {
		j := r.Wire()
		out.Runs = append(out.Runs, j)
		fmt.Fprintf(&b, "- %s on %s: %s, phase %s\n", j.RunID, j.Thread, j.Status, j.Phase)
	}
	if len(rs) == 0 {
		b.WriteString("no runs\n")
	}
	return textResult(b.String(), out), out, nil
}

// RunInput names a run.
type RunInput struct {
	Run     string `json:"run" jsonschema:"the run id"`
	Thread  string `json:"thread,omitempty" jsonschema:"its thread, when the run id is on several"`
	Outputs bool   `json:"outputs,omitempty" jsonschema:"include each effect's output as recorded"`
}

func (t tools) run(ctx context.Context, _ *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, wire.RunDetail, error) {
	if in.Run == "" {
		return nil, wire.RunDetail{}, &records.FieldError{Field: "run", Rule: "required: a run id"}
	}
	d, err := t.c.RunDetail(ctx, in.Thread, in.Run)
	if err == nil && in.Outputs {
		err = t.c.EffectOutputs(ctx, &d)
	}
	if err != nil {
		return nil, wire.RunDetail{}, explain(err)
	}
	j, err := d.Wire()
	if err != nil {
		return nil, wire.RunDetail{}, err
	}
	text := fmt.Sprintf("run %s on %s: %s, phase %s, %d phases, %d effects\n", j.RunID, j.Thread, j.Status, j.Phase, len(j.Phases), len(j.Effects))
	return textResult(text, j), j, nil
}

// CancelInput cancels a run.
type CancelInput struct {
	Run    string `json:"run" jsonschema:"the run id"`
	Reason string `json:"reason" jsonschema:"why the run is cancelled"`
	Thread string `json:"thread,omitempty" jsonschema:"its thread, when the run id is on several"`
	Actor  string `json:"actor,omitempty" jsonschema:"who cancels it (a DID); default the server's actor"`
}

func (t tools) cancelRun(ctx context.Context, _ *mcp.CallToolRequest, in CancelInput) (*mcp.CallToolResult, Saved, error) {
	if in.Run == "" {
		return nil, Saved{}, &records.FieldError{Field: "run", Rule: "required: a run id"}
	}
	rc, err := t.c.CancelRun(ctx, in.Thread, in.Run, in.Reason, t.actorOr(in.Actor))
	if err != nil {
		return nil, Saved{}, explain(err)
	}
	out := Saved{ID: rc.ID.String(), Clock: rc.Clock, Thread: in.Thread}
	return textResult(fmt.Sprintf("cancelled run %s: request %s at clock %d\n", in.Run, out.ID, out.Clock), out), out, nil
}

// SignalInput sends a waiting run its signal.
type SignalInput struct {
	Run    string          `json:"run" jsonschema:"the run id"`
	Name   string          `json:"name" jsonschema:"the signal the run waits for (its waiting_for), e.g. approval"`
	Data   json.RawMessage `json:"data,omitempty" jsonschema:"the signal's data, any JSON value, e.g. {\"approved\": true}"`
	Thread string          `json:"thread,omitempty" jsonschema:"its thread, when the run id is on several"`
	Actor  string          `json:"actor,omitempty" jsonschema:"who sends it (a DID); default the server's actor"`
}

func (t tools) signalRun(ctx context.Context, _ *mcp.CallToolRequest, in SignalInput) (*mcp.CallToolResult, Saved, error) {
	if in.Run == "" {
		return nil, Saved{}, &records.FieldError{Field: "run", Rule: "required: a run id"}
	}
	var data any
	if in.Data != nil {
		v, err := records.ValueFromJSON(in.Data, "data")
		if err != nil {
			return nil, Saved{}, explain(err)
		}
		data = v
	}
	rc, err := t.c.SignalRun(ctx, in.Thread, in.Run, in.Name, data, t.actorOr(in.Actor))
	if err != nil {
		return nil, Saved{}, explain(err)
	}
	out := Saved{ID: rc.ID.String(), Clock: rc.Clock, Thread: in.Thread}
	return textResult(fmt.Sprintf("signalled run %s: %s, request %s at clock %d\n", in.Run, in.Name, out.ID, out.Clock), out), out, nil
}
