package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// addSessionLifecycle adds the commands of a session's life (pause,
// resume, mark, redact) to the session command, and the status and
// checkpoint-type filters to its list and the execution state to its
// show --json. Every rule is sdk's; these are the faces.
func addSessionLifecycle(a *app, session *cobra.Command) {
	for _, c := range session.Commands() {
		switch c.Name() {
		case "list":
			withSessionFilters(a, c)
		case "show":
			withExecState(a, c)
		}
	}
	session.AddCommand(newSessionPauseCommand(a), newSessionResumeCommand(a), newSessionMarkCommand(a), newSessionRedactCommand(a))
}

// withSessionFilters adds --status, --resumable (sessions by status,
// across threads) and --type, --clean (a thread's checkpoints) to
// "session list".
func withSessionFilters(a *app, list *cobra.Command) {
	var (
		statuses         []string
		resumable, clean bool
		typ              string
	)
	f := list.Flags()
	f.StringSliceVar(&statuses, "status", nil, "without --thread: list sessions with this status (running, paused, failed, completed, cancelled; repeatable)")
	f.BoolVar(&resumable, "resumable", false, "without --thread: list sessions that can be resumed (failed, paused, cancelled, with a checkpoint a resume takes up)")
	f.StringVar(&typ, "type", "", "with --thread: checkpoints of this type ("+strings.Join(records.CheckpointTypes, ", ")+")")
	f.BoolVar(&clean, "clean", false, "with --thread: clean checkpoints only")
	list.Long += `

With --status or --resumable, list sessions instead: each thread holding
a session (a checkpoint, a transcript event or a session status event)
with its status, the error and node of a failure, its last checkpoint and
its first and newest activity, newest first, paged by -n and --offset.
With --thread and --type or --clean, list the thread's checkpoints of that
type, or clean ones, with their execution state (--json).`
	list.Example += `
  spl session list --status failed --json
  spl session list --resumable
  spl session list --thread th_1 --type node_complete --clean`
	inner := list.RunE
	list.RunE = run(func(cmd *cobra.Command, args []string) error {
		fl := cmd.Flags()
		thread, _ := fl.GetString("thread")
		limit, _ := fl.GetInt("limit")
		offset, _ := fl.GetInt("offset")
		bySession := fl.Changed("status") || fl.Changed("resumable")
		byType := fl.Changed("type") || fl.Changed("clean")
		switch {
		case bySession && fl.Changed("thread"):
			return usagef("session list: --status and --resumable list across threads, not with --thread")
		case bySession && fl.Changed("actor"):
			// Never ignored in silence: sessions are not listed by actor.
			return usagef("session list: --actor keeps the latest checkpoints saved by an actor; it does not filter --status or --resumable")
		case byType && !fl.Changed("thread"):
			return usagef("session list: --type and --clean list a thread's checkpoints: give --thread")
		case bySession:
			return a.listSessions(cmd, sdk.SessionFilter{Status: statuses, Resumable: resumable, Offset: offset, Limit: limit, Freshness: sdk.Freshness{Fresh: true}})
		case byType:
			return a.listTyped(cmd, thread, sdk.CheckpointQuery{Type: typ, Clean: clean, Limit: limit})
		}
		return inner(cmd, args)
	})
}

func (a *app) listSessions(cmd *cobra.Command, f sdk.SessionFilter) error {
	if f.Offset < 0 || f.Limit < 0 {
		return usagef("session list: --offset and --limit must be 0 or more")
	}
	return a.withClient(cmd, "session list", func(ctx context.Context, c *sdk.Client) error {
		ss, err := c.Sessions(ctx, f)
		if err != nil {
			return fmt.Errorf("session list: %w", err)
		}
		if a.json {
			out := wire.Sessions{Sessions: make([]wire.Session, len(ss)), Total: len(ss)}
			for i, s := range ss {
				out.Sessions[i] = s.Wire()
			}
			return writeJSON(cmd.OutOrStdout(), out)
		}
		if len(ss) == 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "no sessions")
			return nil
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tSTATUS\tUPDATED\tFAILED AT\tERROR")
		for _, s := range ss {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(s.Thread), s.Status, tableTime(s.Updated.UnixMilli()), orDash(printable(s.FailedAt)), orDash(printable(s.Error)))
		}
		return tw.Flush()
	})
}

func (a *app) listTyped(cmd *cobra.Command, thread string, q sdk.CheckpointQuery) error {
	return a.withClient(cmd, "session list", func(ctx context.Context, c *sdk.Client) error {
		cps, err := c.SessionCheckpoints(ctx, thread, q)
		if err = reportSkipped(cmd, err); err != nil {
			return fmt.Errorf("session list: %w", err)
		}
		if a.json {
			out := make([]wire.SessionCheckpoint, 0, len(cps))
			for _, cp := range cps {
				j, err := cp.Wire()
				if err != nil {
					return fmt.Errorf("session list: %w", err)
				}
				out = append(out, j)
			}
			return writeJSON(cmd.OutOrStdout(), out)
		}
		if len(cps) == 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "no matching checkpoints on thread %q\n", thread)
			return nil
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLOCK\tTIME\tID\tTYPE\tNODE\tCLEAN\tRESUMABLE\tDESCRIPTION")
		for _, cp := range cps {
			s := cp.State
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%t\t%t\t%s\n", cp.Clock, tableTime(cp.Header.TS), cp.ID, orDash(s.Type),
				orDash(printable(s.CurrentNode)), s.Clean(), s.Resumable(), orDash(printable(s.Description)))
		}
		return tw.Flush()
	})
}

// withExecState makes "session show THREAD --json" print the execution
// state of the checkpoint too (type, memory, and a pause checkpoint's
// deliberation fields under "pause"): a superset of the checkpoint form.
func withExecState(a *app, show *cobra.Command) {
	inner := show.RunE
	show.RunE = run(func(cmd *cobra.Command, args []string) error {
		for _, name := range []string{"id", "name"} {
			if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
				return inner(cmd, args)
			}
		}
		if !a.json || len(args) != 1 {
			return inner(cmd, args)
		}
		return a.withClient(cmd, "session show", func(ctx context.Context, c *sdk.Client) error {
			cp, err := c.LatestCheckpoint(ctx, args[0])
			if err != nil {
				return fmt.Errorf("session show: %w", err)
			}
			for _, clock := range cp.Skipped {
				fmt.Fprintf(cmd.ErrOrStderr(), "spl: skipped corrupt checkpoint at clock %d\n", clock)
			}
			st, err := records.ExecStateOf(cp.Checkpoint)
			if err != nil {
				return fmt.Errorf("session show: %w", err)
			}
			j, err := sdk.SessionCheckpoint{SavedCheckpoint: cp, State: st}.Wire()
			if err != nil {
				return fmt.Errorf("session show: %w", err)
			}
			return writeJSON(cmd.OutOrStdout(), j)
		})
	})
}

func newSessionPauseCommand(a *app) *cobra.Command {
	var (
		o           sdk.PauseOptions
		actor       string
		delegations []string
	)
	cmd := &cobra.Command{
		Use:   "pause THREAD [--depth N] [--budget-spent X] [--rounds N] [--elapsed DURATION]",
		Short: "Pause a session: save a checkpoint with each agent's conversation tail",
		Long: `Pause the session of THREAD: spl computes each agent's conversation tail
from the transcript records (kind agent.transcript) on the thread (the
last N events where the agent is agentId or childAgentId, or the target
of a delegation; N is --depth, default 50), reads each agent's newest
scratch pad (kind agent.scratchpad), and saves a checkpoint of type
safe_point whose "pause" holds the session checkpoint (sessionId,
constraintState, activeAgents, roundsCompleted, pendingDelegations,
transcriptReplayDepth, createdAt), then a session_paused event
(agent.session.paused). The agents are those the transcript names unless
--agent lists them; the pending delegations those the transcript leaves
unanswered (a delegation event with no child_result from its target to
its delegator) unless --pending-delegation lists them. A completed
session is refused.`,
		Example: `  spl session pause th_1 --budget-spent 4.80 --rounds 7 --elapsed 45m --json`,
		Args:    cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("session pause: %w", err)
			}
			if o.Depth < 1 && cmd.Flags().Changed("depth") {
				return usagef("session pause: --depth must be at least 1, got %d", o.Depth)
			}
			if cmd.Flags().Changed("pending-delegation") {
				o.PendingDelegations = make([]any, len(delegations))
				for i, d := range delegations {
					if o.PendingDelegations[i], err = records.ValueFromJSON([]byte(d), "pending-delegation"); err != nil {
						return fmt.Errorf("session pause: %w", err)
					}
				}
			}
			return a.withClient(cmd, "session pause", func(ctx context.Context, c *sdk.Client) error {
				p, err := c.PauseSession(ctx, args[0], actor, o)
				if err != nil {
					return fmt.Errorf("session pause: %w", err)
				}
				j, err := p.Wire()
				if err != nil {
					return fmt.Errorf("session pause: %w", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), j)
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "checkpoint: %s\nclock:      %d\nrounds:     %d\nbudget:     %g\nelapsed:    %v\n", j.Checkpoint, j.Clock,
					j.RoundsCompleted, j.ConstraintState.BudgetSpent, time.Duration(j.ConstraintState.TimeElapsedMs)*time.Millisecond)
				for _, ag := range j.ActiveAgents {
					fmt.Fprintf(w, "agent:      %s (depth %d, %d events)\n", printable(ag.AgentID), ag.Depth, len(ag.ConversationTail))
				}
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.IntVar(&o.Depth, "depth", sdk.DefaultReplayDepth, "transcript events kept per agent (transcriptReplayDepth)")
	f.Float64Var(&o.BudgetSpent, "budget-spent", 0, "budget spent so far")
	f.Uint64Var(&o.Rounds, "rounds", 0, "rounds completed")
	f.DurationVar(&o.Elapsed, "elapsed", 0, "time elapsed in this working session")
	f.StringArrayVar(&o.Agents, "agent", nil, "an active agent (repeatable; default: those the transcript names)")
	f.StringArrayVar(&delegations, "pending-delegation", nil, "a delegation in flight, a JSON object (repeatable; default: those the transcript leaves unanswered)")
	f.StringVar(&o.Reason, "reason", "", "why the session pauses (a constraint, a gate, a call)")
	f.StringVar(&o.Node, "node", "", "the node the session pauses at")
	f.StringVar(&o.SessionID, "session-id", "", "the session's id (default: the thread)")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}

func newSessionResumeCommand(a *app) *cobra.Command {
	var (
		from, actor string
		sets        []string
	)
	cmd := &cobra.Command{
		Use:   "resume THREAD [--from CHECKPOINT] [--set key=value...]",
		Short: "Resume a session from a checkpoint, and print its resume context",
		Long: `Resume the session of THREAD from a checkpoint: --from, else its latest
(for a failed session, its latest clean checkpoint that can be resumed
from). Prints the resume context: the checkpoint, the shared memory with
--set applied (a value that is JSON is taken as JSON, else as text; the
changes are recorded as a record of kind agent.session.memory, under the
thread's redaction policy, so a covered key's value is never stored), the
constraints (time elapsed reset to 0, budget spent and rounds carried
over) and each agent's "## Session Context (Resumed)" prompt section with
its tail; then records a session_resumed event (agent.session.resumed)
naming the checkpoint. Refused: a completed session, a session with no
checkpoint to resume from, a checkpoint whose can_resume_from is false.`,
		Example: `  spl session resume th_1 --set api_key=sk-... --json
  spl session resume th_1 --from bafy...`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("session resume: %w", err)
			}
			o := sdk.ResumeOptions{Ref: from}
			for _, s := range sets {
				k, v, ok := strings.Cut(s, "=")
				if !ok || k == "" {
					return usagef("session resume: --set %q: want key=value", s)
				}
				if o.Set == nil {
					o.Set = make(map[string]any)
				}
				o.Set[k] = setValue(v)
			}
			return a.withClient(cmd, "session resume", func(ctx context.Context, c *sdk.Client) error {
				rc, err := c.ResumeSession(ctx, args[0], actor, o)
				if err != nil {
					return fmt.Errorf("session resume: %w", err)
				}
				_ = reportSkipped(cmd, &sdk.SkippedError{Clocks: rc.Skipped})
				j, err := rc.Wire()
				if err != nil {
					return fmt.Errorf("session resume: %w", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), j)
				}
				return writeResume(cmd.OutOrStdout(), j)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "the checkpoint to resume from: its id, the end of its id, or its name (default: the latest)")
	f.StringArrayVar(&sets, "set", nil, "key=value: change a key of the shared memory (repeatable)")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}

// setValue reads a --set value: JSON when it is (a number, true, an
// object), else the text itself.
func setValue(v string) any {
	if body, err := records.BodyFromJSON([]byte(`{"v":` + v + `}`)); err == nil {
		var m map[string]any
		if err := (&records.Record{Body: body}).DecodeBody(&m); err == nil {
			return m["v"]
		}
	}
	return v
}

func writeResume(w io.Writer, j wire.Resume) error {
	mem, _ := json.Marshal(j.Memory)
	fmt.Fprintf(w, "resumed from: %s (%s)\nwas:          %s\nrounds:       %d\nbudget spent: %g\nelapsed:      0s (reset)\nmemory:       %s\n",
		j.ResumedFrom, orDash(j.ResumedFromType), j.WasStatus, j.RoundsCompleted, j.ConstraintState.BudgetSpent, mem)
	if len(j.Redacted) > 0 {
		fmt.Fprintf(w, "not stored:   %s (redaction policy)\n", strings.Join(j.Redacted, ", "))
	}
	if j.ResumeAt != "" {
		fmt.Fprintf(w, "resume at:    %s\n", printable(j.ResumeAt))
	}
	cp := j.Checkpoint
	fmt.Fprintf(w, "\nsummary:      %s\n", printable(cp.Summary))
	for i, l := range cp.Learnings {
		fmt.Fprintf(w, "%-14s%s\n", map[bool]string{true: "learnings:", false: ""}[i == 0], printable(l))
	}
	for i, s := range cp.NextSteps {
		fmt.Fprintf(w, "%-14s%s\n", map[bool]string{true: "next steps:", false: ""}[i == 0], printable(s))
	}
	if len(cp.ExecutionPath) > 0 {
		fmt.Fprintf(w, "path:         %s\n", printable(strings.Join(cp.ExecutionPath, " → ")))
	}
	if len(cp.State) > 0 && string(cp.State) != "null" {
		fmt.Fprintf(w, "state:        %s\n", cp.State)
	}
	for _, ag := range j.Agents {
		fmt.Fprintf(w, "\n# agent %s\n%s", printable(ag.AgentID), ag.Prompt)
	}
	return nil
}

func newSessionMarkCommand(a *app) *cobra.Command {
	var status, errText, node, reason, actor string
	cmd := &cobra.Command{
		Use:   "mark THREAD --status failed|completed|cancelled [--error TEXT] [--node NODE]",
		Short: "Record that a session failed, completed or was cancelled",
		Long: `Record a session status event on THREAD: a record of kind
agent.session.failed (with --error and --node, the node it failed at),
agent.session.completed or agent.session.cancelled. A session's status is
its newest such event (paused and resumed come from pause and resume).`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			kind := "agent.session." + status
			if status != records.StatusFailed && status != records.StatusCompleted && status != records.StatusCancelled {
				return usagef("session mark: --status must be failed, completed or cancelled, got %q", status)
			}
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("session mark: %w", err)
			}
			return a.withClient(cmd, "session mark", func(ctx context.Context, c *sdk.Client) error {
				r, err := c.MarkSession(ctx, args[0], actor, kind, records.SessionEvent{Error: errText, Node: node, Reason: reason})
				if err != nil {
					return fmt.Errorf("session mark: %w", err)
				}
				return a.writeReceipt(cmd, r, receiptJSON{Thread: args[0], Act: records.ActDo, Kind: kind, Actor: actor})
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "failed, completed or cancelled (required)")
	f.StringVar(&errText, "error", "", "why it failed")
	f.StringVar(&node, "node", "", "the node it failed at")
	f.StringVar(&reason, "reason", "", "free text")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	_ = cmd.MarkFlagRequired("status")
	return cmd
}

func newSessionRedactCommand(a *app) *cobra.Command {
	var (
		p     sdk.RedactionPolicy
		actor string
	)
	cmd := &cobra.Command{
		Use:   "redact (--thread THREAD | --all) [--key KEY...] [--pattern GLOB...]",
		Short: "Set the redaction policy of a thread, or of all threads",
		Long: `Set which keys of a record's body never reach the log, for a thread or
for all threads (both apply). Before a record is sealed, by any face
(spl emit, spl session, POST /v1/records, Go), every value under a
covered key is removed at any depth and the body's "redacted" list names
the paths removed. A key matches a map key by name (case-insensitive) or,
with a dot, a whole path; a pattern is a path.Match glob. No --key and no
--pattern lifts the policy. Stored as a core.redaction record.`,
		Example: `  spl session redact --all --key api_key --pattern '*_token'`,
		Args:    cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("session redact: %w", err)
			}
			return a.withClient(cmd, "session redact", func(ctx context.Context, c *sdk.Client) error {
				r, err := c.SetRedaction(ctx, actor, p)
				if err != nil {
					return fmt.Errorf("session redact: %w", err)
				}
				thread := p.Thread
				if p.All {
					thread = sdk.RedactionThread
				}
				return a.writeReceipt(cmd, r, receiptJSON{Thread: thread, Act: records.ActKnow, Kind: records.KindRedaction, Actor: actor})
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&p.Thread, "thread", "", "the thread of the policy")
	f.BoolVar(&p.All, "all", false, "the policy of all threads")
	f.StringArrayVar(&p.Keys, "key", nil, "a key (or dotted path) to remove (repeatable)")
	f.StringArrayVar(&p.Patterns, "pattern", nil, "a glob of keys (or paths) to remove (repeatable)")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}
