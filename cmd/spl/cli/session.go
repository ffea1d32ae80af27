package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// DefaultListLimit is how many checkpoints "session list" shows by default.
const DefaultListLimit = 50

func newSessionCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Save and read session checkpoints",
		Long: `A session checkpoint is a record of kind agent.session.checkpoint (act
LEARN) on a thread: a summary of where the work stands, what was learned and
what comes next, so that the next session can pick up where this one ended.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(newSessionSaveCommand(a), newSessionListCommand(a), newSessionShowCommand(a), newSessionPinCommand(a),
		newSessionLogCommand(a), newSessionForkCommand(a), newSessionDiffCommand(a), newSessionPruneCommand(a))
	addSessionLifecycle(a, cmd)
	return cmd
}

func newSessionSaveCommand(a *app) *cobra.Command {
	var (
		thread, actor, stateFile string
		cp                       records.Checkpoint
		learnings, next          []string
	)
	cmd := &cobra.Command{
		Use:   "save --thread THREAD --summary TEXT --learnings TEXT... [flags]",
		Short: "Save a checkpoint of a session to a thread",
		Example: `  spl session save --thread th_auth_refactor_abc123 \
    --summary "Completed auth refactor; next: migration tests" \
    --learnings "mutex pattern worked" --learnings "refactor touched 14 files" \
    --next-steps "Write migration tests" --actor did:sync:agent:dev`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("session save: %w", err)
			}
			cp.Learnings, cp.NextSteps = learnings, next
			if stateFile != "" {
				if cp.State, err = a.readState(stateFile); err != nil {
					return fmt.Errorf("session save: --state-file: %w", err)
				}
			}
			// Refuse bad input before the log is opened: nothing is stored
			// and no server is started for a checkpoint that cannot be.
			if _, err := records.New(records.ActLearn, records.KindCheckpoint, thread, actor, time.Now(), &cp); err != nil {
				return fmt.Errorf("session save: %w", err)
			}

			return a.withClient(cmd, "session save", func(ctx context.Context, c *sdk.Client) error {
				r, err := c.SaveCheckpoint(ctx, thread, actor, cp)
				var re *sdk.RetentionError
				if errors.As(err, &re) {
					// The checkpoint is saved: say so, and warn that its
					// thread's retention did not run (the next save retries).
					defer fmt.Fprintf(cmd.ErrOrStderr(), "spl: warning: session save: %v\n", re)
				} else if err != nil {
					return fmt.Errorf("session save: %w", err)
				}
				return a.writeReceipt(cmd, r, receiptJSON{
					Thread: thread, Act: records.ActLearn, Kind: records.KindCheckpoint, Actor: actor,
				})
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "thread to save the checkpoint to (required)")
	f.StringVar(&cp.Summary, "summary", "", "where the work stands (required, at most 8 KiB)")
	f.StringArrayVar(&learnings, "learnings", nil, "something learned (repeatable, at least one)")
	f.StringArrayVar(&next, "next-steps", nil, "a next step (repeatable)")
	f.StringVar(&cp.Name, "name", "", "name of the checkpoint (named checkpoints survive retention)")
	f.StringVar(&cp.SessionID, "session-id", "", "id of the session that saved it")
	f.StringVar(&stateFile, "state-file", "", `structured state: a JSON object kept as the body's "state" ("-": standard input)`)
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	_ = cmd.MarkFlagRequired("thread")
	return cmd
}

func newSessionListCommand(a *app) *cobra.Command {
	var (
		thread, actor string
		limit, offset int
	)
	cmd := &cobra.Command{
		Use:   "list [--thread THREAD] [-n N] [--offset K] [--actor DID]",
		Short: "List the checkpoints of a thread, or the latest of every thread",
		Long: `With --thread, list the newest N checkpoints of the thread (all with -n 0),
oldest first: clock, time (UTC), actor, short id, name and summary.

Without --thread, list the latest checkpoint of every thread, newest
first, with the thread: N of them (default 50, 0: all) after skipping
--offset K, so that -n 50 --offset 50 is the second page. --actor keeps
the checkpoints saved by that actor. This list comes from the checkpoint
index, a read model of the log; the command first waits, within
--timeout, until the index holds every record in the log (catching it up
itself when no spl serve runs it).`,
		Example: `  spl session list --thread th_auth_refactor_abc123
  spl session list -n 20 --offset 20`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usagef("session list: --limit must be 0 (all) or more, got %d", limit)
			}
			if !cmd.Flags().Changed("thread") {
				return a.listLatest(cmd, limit, offset, actor)
			}
			for _, name := range []string{"offset", "actor"} {
				if cmd.Flags().Changed(name) {
					return usagef("session list: --%s lists across threads, not with --thread", name)
				}
			}
			return a.withClient(cmd, "session list", func(ctx context.Context, c *sdk.Client) error {
				cps, err := c.ListCheckpoints(ctx, thread, limit)
				if err = reportSkipped(cmd, err); err != nil && !errors.Is(err, sdk.ErrNotFound) {
					return fmt.Errorf("session list: %w", err)
				}
				if a.json {
					out, err := listingOf(cps)
					if err != nil {
						return fmt.Errorf("session list: %w", err)
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				if len(cps) == 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "no checkpoints on thread %q\n", thread)
					return nil
				}
				return writeCheckpointTable(cmd.OutOrStdout(), cps, time.Now())
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "thread to list (without it: the latest checkpoint of every thread)")
	f.IntVarP(&limit, "limit", "n", DefaultListLimit, "show the newest N checkpoints (0: all)")
	f.IntVar(&offset, "offset", 0, "without --thread: skip the newest K first (paging)")
	f.StringVar(&actor, "actor", "", "without --thread: only checkpoints saved by this actor")
	return cmd
}

// listLatest is "session list" without --thread: the latest checkpoint of
// every thread, newest first, from the checkpoint index.
func (a *app) listLatest(cmd *cobra.Command, limit, offset int, actor string) error {
	if offset < 0 {
		return usagef("session list: --offset must be 0 or more, got %d", offset)
	}
	return a.withClient(cmd, "session list", func(ctx context.Context, c *sdk.Client) error {
		cps, err := c.LatestCheckpoints(ctx, sdk.CheckpointPage{
			Actor: actor, Offset: offset, Limit: limit, Freshness: sdk.Freshness{Fresh: true},
		})
		if err != nil {
			return fmt.Errorf("session list: %w", err)
		}
		if a.json {
			out := make([]latestJSON, len(cps))
			for i, cp := range cps {
				out[i] = newLatestJSON(cp)
			}
			return writeJSON(cmd.OutOrStdout(), out)
		}
		if len(cps) == 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "no checkpoints")
			return nil
		}
		return writeLatestTable(cmd.OutOrStdout(), cps)
	})
}

func newSessionShowCommand(a *app) *cobra.Command {
	var id, name string
	cmd := &cobra.Command{
		Use:   "show THREAD [--id ID | --name NAME]",
		Short: "Show a checkpoint of a thread in full: the latest, or one by id or name",
		Long: `Show a checkpoint of a thread in full: every field of its body, the
structured state and any other keys nested. Without --id or --name, the
latest: a newer checkpoint that fails verification is skipped, with a
note on stderr naming its clock, and the newest one that verifies is
shown. --id takes a full id or its last characters (at least 8, as
tables show 12); --name the newest checkpoint of that name. An erased
checkpoint exits 2 and says who erased it.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			thread := args[0]
			return a.withClient(cmd, "session show", func(ctx context.Context, c *sdk.Client) error {
				cp, err := findShown(cmd, c, thread, id, name)
				if err != nil {
					return withOp("session show", err)
				}
				for _, clock := range cp.Skipped {
					fmt.Fprintf(cmd.ErrOrStderr(), "spl: skipped corrupt checkpoint at clock %d\n", clock)
				}
				if a.json {
					j, err := newCheckpointJSON(cp)
					if err != nil {
						return fmt.Errorf("session show: %w", err)
					}
					return writeJSON(cmd.OutOrStdout(), j)
				}
				if err := writeCheckpoint(cmd.OutOrStdout(), cp); err != nil {
					return fmt.Errorf("session show: %w", err)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&id, "id", "", "the checkpoint with this id (or id end, at least 8 characters)")
	cmd.Flags().StringVar(&name, "name", "", "the newest checkpoint with this name")
	return cmd
}

// writeReceipt prints where a record landed: its id and clock, or with
// --json the receipt object.
func (a *app) writeReceipt(cmd *cobra.Command, r sdk.Receipt, j receiptJSON) error {
	j.ID, j.Clock = r.ID.String(), r.Clock
	if a.json {
		return writeJSON(cmd.OutOrStdout(), j)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "id:    %s\nclock: %d\n", j.ID, j.Clock)
	return err
}
