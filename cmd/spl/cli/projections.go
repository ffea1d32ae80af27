package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/sdk"
)

func newProjectionsCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "projections",
		Short: "Show and rebuild the read models folded from the log",
		Long: `Projections fold the log into read models: the projection "index" keeps
the thread index (thread list), the latest checkpoint of every thread
(session list without --thread) and the erased records. spl serve runs
them as records land; without a server, a command that reads them first
catches them up. Every read model can be rebuilt from the log.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(newProjectionsStatusCommand(a), newProjectionsRebuildCommand(a))
	return cmd
}

func newProjectionsStatusCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show where each projection stands",
		Long: `Show where each projection stands: the clock it has applied up to
(position), the log's newest clock, how many records it lags behind and
for how long the oldest of them has waited, the messages it skipped
because they do not verify, the process that runs it (- when none), the
clock a rebuild in progress runs to, and when its position was stored.

Without spl serve nobody applies the projections between commands: a lag
after writes is expected, and the next command that reads them (thread
list, session list) catches them up.`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "projections status", func(ctx context.Context, c *sdk.Client) error {
				ss, err := c.ProjectionStatus(ctx)
				if err != nil {
					return fmt.Errorf("projections status: %w", err)
				}
				if a.json {
					out := make([]statusJSON, len(ss))
					for i, s := range ss {
						out[i] = newStatusJSON(s)
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				return writeStatusTable(cmd.OutOrStdout(), ss)
			})
		}),
	}
}

// rebuiltJSON is an element of "projections rebuild --json".
type rebuiltJSON struct {
	Name  string `json:"name"`
	Clock uint64 `json:"clock"` // the position the rebuild reached
}

func newProjectionsRebuildCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild [NAME]",
		Short: "Empty a projection's read models and apply the whole log again",
		Long: `Empty the read models of a projection (every projection without NAME) and
apply the log again from its start, up to the log's clock when the
rebuild began. A process that runs the projection (spl serve) hands it
over for the rebuild and takes it back after. Meanwhile thread list and
session list wait (within --timeout) for the rebuild to pass the log's
clock.

Progress goes to stderr: a bar on a terminal, else a line at most every
second. --timeout does not bound a rebuild. An interrupted rebuild
(Ctrl-C, a crash) is resumed, not restarted, by running the command again,
and meanwhile by any process that runs the projection.`,
		Example: `  spl projections rebuild
  spl projections rebuild index`,
		Args: cobra.MaximumNArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			names := sdk.ProjectionNames()
			if len(args) == 1 {
				if !slices.Contains(names, args[0]) {
					return fmt.Errorf("projections rebuild: %w: %q (there is %s)",
						sdk.ErrUnknownProjection, args[0], strings.Join(names, ", "))
				}
				names = args
			}
			return a.withClient(cmd, "projections rebuild", func(_ context.Context, c *sdk.Client) error {
				// The rebuild itself is bounded by the command's context only
				// (Ctrl-C): a large log takes minutes.
				ctx := cmd.Context()
				var out []rebuiltJSON
				for _, name := range names {
					p := newRebuildProgress(cmd.ErrOrStderr(), name, time.Now)
					err := c.RebuildProjection(ctx, name, p.update)
					p.finish()
					switch {
					case err == nil:
					case ctx.Err() != nil && p.total == 0:
						if holder := holderOf(ctx, c, name); holder != "" {
							return fmt.Errorf("projections rebuild: %s: interrupted while waiting for %s, which runs it, to hand it over: %w", name, holder, err)
						}
						fallthrough
					case ctx.Err() != nil:
						where := "before it began"
						if p.total > 0 {
							where = fmt.Sprintf("at clock %d of %d", p.done, p.total)
						}
						return fmt.Errorf("projections rebuild: %s: interrupted %s; run spl projections rebuild again to resume it: %w", name, where, err)
					case errors.Is(err, sdk.ErrProjectionBusy):
						// Rebuild waits for a handover until ctx ends: this is
						// for an SDK that gives up by itself.
						return fmt.Errorf("projections rebuild: %s: %w (another process runs it and did not hand it over; stop that process, or let its lease expire, and run the rebuild again)", name, err)
					default:
						return fmt.Errorf("projections rebuild: %s: %w", name, err)
					}
					out = append(out, rebuiltJSON{Name: name, Clock: p.done})
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), out)
				}
				for _, r := range out {
					fmt.Fprintf(cmd.OutOrStdout(), "rebuilt %s: up to clock %d\n", r.Name, r.Clock)
				}
				return nil
			})
		}),
	}
}

// holderOf returns the process that holds projection name's lease, or ""
// when none does or it cannot be told, for the message of a rebuild
// interrupted before it began (ctx is done: the status gets a moment of
// its own).
func holderOf(ctx context.Context, c *sdk.Client, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	ss, err := c.ProjectionStatus(ctx)
	if err != nil {
		return ""
	}
	for _, s := range ss {
		if s.Name == name {
			return s.Holder
		}
	}
	return ""
}
