package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// Resource URIs. A thread is path-escaped in them (a '/' in a thread name
// is %2F), as in the HTTP API's paths.
const (
	checkpointURI = "spl://checkpoint/{thread}/{ref}"
	sessionURI    = "spl://session/{thread}"
	threadURI     = "spl://thread/{thread}"
)

// addResources adds the resource templates: a checkpoint, a session (its
// status and latest checkpoint) and a thread (its newest records), each
// JSON, so that a client can attach them to a model's context.
func addResources(s *mcp.Server, t tools) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "checkpoint", URITemplate: checkpointURI, MIMEType: "application/json",
		Description: "A checkpoint of a thread (ref: its id, the end of its id, or its name), with its execution state."}, t.readCheckpoint)
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "session", URITemplate: sessionURI, MIMEType: "application/json",
		Description: "A session: its status and its latest checkpoint."}, t.readSession)
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "thread", URITemplate: threadURI, MIMEType: "application/json",
		Description: "The newest 20 records of a thread, oldest first, each verified."}, t.readThread)
}

// uriParts splits a resource URI of scheme spl and kind into its
// path-escaped parts.
func uriParts(uri, kind string, n int) ([]string, error) {
	rest, ok := strings.CutPrefix(uri, "spl://"+kind+"/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != n {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil || u == "" {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		parts[i] = u
	}
	if err := records.CheckThread(parts[0]); err != nil {
		return nil, fmt.Errorf("%s: %w", uri, err)
	}
	return parts, nil
}

func jsonResource(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// notFound turns the service layer's not-found into the protocol's.
func notFound(uri string, err error) error {
	if errors.Is(err, sdk.ErrNotFound) {
		return mcp.ResourceNotFoundError(uri)
	}
	return err
}

func (t tools) readCheckpoint(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	p, err := uriParts(uri, "checkpoint", 2)
	if err != nil {
		return nil, err
	}
	sc, err := t.c.FindCheckpoint(ctx, p[0], p[1])
	if err != nil {
		return nil, notFound(uri, err)
	}
	j, err := sessionCheckpoint(sc)
	if err != nil {
		return nil, err
	}
	return jsonResource(uri, j)
}

func (t tools) readSession(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	p, err := uriParts(uri, "session", 1)
	if err != nil {
		return nil, err
	}
	si, err := t.c.Session(ctx, p[0], sdk.Freshness{})
	if err != nil {
		return nil, notFound(uri, err)
	}
	out := map[string]any{"session": si.Wire()}
	if sc, err := t.c.LatestCheckpoint(ctx, p[0]); err == nil {
		j, err := sessionCheckpoint(sc)
		if err != nil {
			return nil, err
		}
		out["latest_checkpoint"] = j
	} else if !errors.Is(err, sdk.ErrNotFound) {
		return nil, err
	}
	return jsonResource(uri, out)
}

func (t tools) readThread(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	p, err := uriParts(uri, "thread", 1)
	if err != nil {
		return nil, err
	}
	_, out, err := t.tail(ctx, nil, TailInput{Thread: p[0]})
	if err != nil {
		return nil, err
	}
	if len(out.Records) == 0 && len(out.Skipped) == 0 {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	return jsonResource(uri, out)
}

// CheckpointProtocol is the protocol an agent follows to keep its work
// across sessions in spl: what the checkpoint-protocol prompt says, and
// `spl prompt checkpoint-protocol` prints for any agent's instructions.
const CheckpointProtocol = `# Checkpoint protocol

You keep your work across sessions in spl, as session checkpoints on a
thread: one thread per piece of work (th_<topic>), the same thread in
every session of that work.

## At the start of a session
1. Read the latest checkpoint of your thread (the latest_checkpoint tool,
   the resume_work prompt, or: spl session show THREAD).
2. Take its summary as where things stand, its learnings as what holds,
   its next steps as your plan. Do not redo what the summary says is done.
3. A session that failed or was paused is resumed from its latest clean
   checkpoint (resume_session, or: spl session resume THREAD).

## At the end of a piece of work, and before you stop
Save a checkpoint (save_checkpoint, or: spl session save):
- summary: what was done, in a few sentences, with names a successor can
  search for (files, functions, tickets);
- learnings: at least one thing that proved true or false (an approach
  that worked, a dead end, a constraint found);
- next_steps: what comes next, in order;
- optionally a name (to find it again), a type (phase_boundary at the end
  of a phase, safe_point, error_boundary when stopping on an error),
  is_clean=false when the work is half done, and state to resume with.

## Rules
- A checkpoint is immutable and content-addressed: save a new one rather
  than trying to edit an old one.
- Never put secrets in a checkpoint; redaction policies may remove keys,
  and the record keeps the rest forever unless erased.
- Save at least once an hour of work, and always before a risky step.
`

// addPrompts adds the prompts: resume_work (a thread's latest checkpoint,
// as the text an agent reads at the start of a session) and
// checkpoint_protocol.
func addPrompts(s *mcp.Server, t tools) {
	s.AddPrompt(&mcp.Prompt{Name: "resume_work", Title: "Resume work on a thread",
		Description: "The latest checkpoint of a thread, as the text an agent reads at the start of a session.",
		Arguments:   []*mcp.PromptArgument{{Name: "thread", Description: "the thread of the work", Required: true}}}, t.resumeWork)
	s.AddPrompt(&mcp.Prompt{Name: "checkpoint_protocol", Title: "The checkpoint protocol",
		Description: "When an agent saves a checkpoint, what it holds, and how it resumes."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "The checkpoint protocol",
				Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: CheckpointProtocol}}}}, nil
		})
}

func (t tools) resumeWork(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	thread := req.Params.Arguments["thread"]
	if err := records.CheckThread(thread); err != nil {
		return nil, err
	}
	var text string
	sc, err := t.c.LatestCheckpoint(ctx, thread)
	switch {
	case errors.Is(err, sdk.ErrNotFound):
		text = fmt.Sprintf("There is no checkpoint on thread %s yet: this is the first session of this work. Save one (save_checkpoint) when a piece of it is done.\n", thread)
	case err != nil:
		return nil, err
	default:
		j, err := sessionCheckpoint(sc)
		if err != nil {
			return nil, err
		}
		text = "You are resuming work saved in spl. Where it stands:\n\n" + checkpointText(j) +
			"\nContinue from the next steps. Save a checkpoint on the same thread (save_checkpoint) when a piece of work is done.\n"
	}
	return &mcp.GetPromptResult{Description: "Resume work on " + thread,
		Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
}
