package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

func newRunCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "List the durable runs of agents, and show one",
		RunE:  groupRunE,
	}
	cmd.AddCommand(newRunListCommand(a), newRunShowCommand(a), newRunCancelCommand(a), newRunSignalCommand(a))
	return cmd
}

func newRunListCommand(a *app) *cobra.Command {
	var thread, status string
	cmd := &cobra.Command{
		Use:   "list [--thread T] [--status running|waiting|terminal|failed|cancelled]",
		Short: "List runs and where they stand",
		Long: `List runs, by thread and run id: the status (running, waiting for a signal,
terminal, failed, cancelled), the phase and time of the newest checkpoint.
With --json, every field.`,
		Example: `  spl run list
  spl run list --thread th_support --status running`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "run list", func(ctx context.Context, c *sdk.Client) error {
				runs, err := c.Runs(ctx, sdk.RunFilter{Thread: thread, Status: sdk.RunStatus(status)})
				if err != nil {
					return fmt.Errorf("run list: %w", err)
				}
				if a.json {
					out := make([]wire.Run, len(runs))
					for i, r := range runs {
						out[i] = r.Wire()
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				if len(runs) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no runs")
					return nil
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "UPDATED\tTHREAD\tRUN\tSTATUS\tPHASE")
				for _, r := range runs {
					w := r.Wire()
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", orDash(w.Updated), printable(r.Thread), r.RunID, r.Status, orDash(r.Phase))
				}
				return tw.Flush()
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "only the runs of this thread")
	f.StringVar(&status, "status", "", "only runs in this status: running, waiting, terminal, failed or cancelled")
	return cmd
}

func newRunShowCommand(a *app) *cobra.Command {
	var thread string
	var outputs bool
	cmd := &cobra.Command{
		Use:   "show RUN [--thread T] [--outputs]",
		Short: "Show a run: phases, effects, snapshot and result",
		Long: `Show a run: its status, its phases as a timeline, its tool effects (recorded,
and replayed on resume), what its newest runtime snapshot says (step, LLM
and tool calls, usage, cost) and its terminal result. With --outputs, each
effect's output too, as a replay would give it (fetched from beside the
log when large, and checked against its hash; redacted before it was
stored). Without --thread, the run id must be on one thread only.`,
		Example: `  spl run show run_42
  spl run show run_42 --thread th_support --json`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "run show", func(ctx context.Context, c *sdk.Client) error {
				d, err := c.RunDetail(ctx, thread, args[0])
				if err != nil && d.RunID == "" {
					return fmt.Errorf("run show: %w", err)
				}
				if outputs {
					err = errors.Join(err, c.EffectOutputs(ctx, &d))
				}
				w, werr := d.Wire()
				if werr != nil {
					return fmt.Errorf("run show: %w", werr)
				}
				if a.json {
					if jerr := writeJSON(cmd.OutOrStdout(), w); jerr != nil {
						return jerr
					}
				} else if perr := writeRunDetail(cmd.OutOrStdout(), w); perr != nil {
					return perr
				}
				if err != nil {
					return fmt.Errorf("run show: %w", err)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&thread, "thread", "", "the thread of the run")
	cmd.Flags().BoolVar(&outputs, "outputs", false, "print each effect's output as recorded (fetched from beside the log when large)")
	return cmd
}

func writeRunDetail(out io.Writer, d wire.RunDetail) error {
	var b strings.Builder
	field := func(label, value string) { writeField(&b, label, value) }
	field("run", d.RunID)
	field("thread", printable(d.Thread))
	field("status", d.Status)
	if d.WaitingFor != "" {
		field("waits for", d.WaitingFor)
	}
	field("updated", orDash(d.Updated))
	b.WriteString("phases:\n")
	for _, p := range d.Phases {
		extra := ""
		if p.Blob != nil {
			extra = "  (payload beside the log: " + *p.Blob + ")"
		}
		fmt.Fprintf(&b, "  %s  %-20s clock %d%s\n", p.Time, p.Phase, p.Clock, extra)
	}
	fmt.Fprintf(&b, "effects: %d recorded (%d calls), %d replayed\n", len(d.Effects), d.EffectCalls, d.Replayed)
	for _, e := range d.Effects {
		fmt.Fprintf(&b, "  %s  %-20s %s  clock %d\n", e.Time, printable(e.CallID), printable(e.Tool), e.Clock)
		if e.Output != nil {
			fmt.Fprintf(&b, "    output: %s\n", printable(string(e.Output)))
		}
	}
	if s := d.Snapshot; s != nil {
		fmt.Fprintf(&b, "snapshot: %s at clock %d: step %d, %d messages, %d LLM calls, %d tool calls\n",
			s.Phase, s.Clock, s.Step, s.Messages, s.LLMCalls, s.ToolCalls)
		fmt.Fprintf(&b, "usage: %d input, %d output, %d total tokens; cost $%.4f\n",
			s.Usage["input_tokens"], s.Usage["output_tokens"], s.Usage["total_tokens"], s.TotalCostUSD)
		if s.Pending {
			b.WriteString("pending LLM response: yes\n")
		}
	}
	if string(d.TerminalResult) != "null" {
		fmt.Fprintf(&b, "result: %s\n", d.TerminalResult)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func newRunCancelCommand(a *app) *cobra.Command {
	var thread, reason, actor string
	cmd := &cobra.Command{
		Use:   "cancel RUN --reason TEXT [--thread T]",
		Short: "Cancel a run: its runner stops at its next checkpoint or effect",
		Long: `Record that RUN is cancelled, and why (a record of kind agent.run.cancel on
the run's thread). From then on the run's status is cancelled; a runner
still running sees it at its next checkpoint or tool effect (a typed
error: sdk.ErrRunCancelled) and stops; a resume runs nothing. A run that
finished, or was cancelled already, is refused (exit 1). Without
--thread, the run id must be on one thread only.`,
		Example: `  spl run cancel run_42 --reason "spending too much"`,
		Args:    cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("run cancel: %w", err)
			}
			return a.withClient(cmd, "run cancel", func(ctx context.Context, c *sdk.Client) error {
				rc, err := c.CancelRun(ctx, thread, args[0], reason, actor)
				if err != nil {
					return fmt.Errorf("run cancel: %w", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"run_id": args[0], "request": rc.ID.String(), "clock": rc.Clock})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "cancelled %s: request %s at clock %d\n", args[0], rc.ID, rc.Clock)
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "the thread of the run")
	f.StringVar(&reason, "reason", "", "why the run is cancelled (required)")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}

func newRunSignalCommand(a *app) *cobra.Command {
	var thread, data, actor string
	cmd := &cobra.Command{
		Use:   "signal RUN NAME [--data JSON] [--thread T]",
		Short: "Send a waiting run the signal it waits for (an approval)",
		Long: `Send signal NAME, with --data (any JSON value), to RUN, which must be
waiting for it (status waiting: its newest checkpoint is awaiting_signal
naming NAME). The signal is a record of kind agent.run.signal on the run's
thread; the run is running again, and its runner's next resume continues
with the data. A run waiting for another signal, or for none, is refused
(exit 1), as is a second signal for one wait. Without --thread, the run id
must be on one thread only.`,
		Example: `  spl run signal run_42 approval --data '{"approved": true, "by": "ana"}'`,
		Args:    cobra.ExactArgs(2),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("run signal: %w", err)
			}
			var v any
			if data != "" {
				if v, err = records.ValueFromJSON([]byte(data), "data"); err != nil {
					return fmt.Errorf("run signal: %w", err)
				}
			}
			return a.withClient(cmd, "run signal", func(ctx context.Context, c *sdk.Client) error {
				rc, err := c.SignalRun(ctx, thread, args[0], args[1], v, actor)
				if err != nil {
					return fmt.Errorf("run signal: %w", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"run_id": args[0], "signal": args[1], "request": rc.ID.String(), "clock": rc.Clock})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "signalled %s: %s, request %s at clock %d\n", args[0], args[1], rc.ID, rc.Clock)
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "the thread of the run")
	f.StringVar(&data, "data", "", "the signal's data, any JSON value")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}
