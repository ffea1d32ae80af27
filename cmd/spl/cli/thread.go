package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/sdk"
)

// DefaultTailLimit is how many records "thread tail" shows by default.
const DefaultTailLimit = 50

func newThreadCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "thread",
		Short: "Read the records of a thread",
		RunE:  groupRunE,
	}
	cmd.AddCommand(newThreadTailCommand(a))
	return cmd
}

func newThreadTailCommand(a *app) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "tail THREAD [-n N]",
		Short: "Show the last records of a thread, oldest first",
		Long: `Show the last N records of a thread (all with -n 0) in clock order, one a
line: clock, time (UTC), act, kind, actor, short id and the body as compact
JSON, truncated. With --json, the full records.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			thread := args[0]
			if limit < 0 {
				return usagef("thread tail: -n must be 0 (all) or more, got %d", limit)
			}
			ctx, cancel := a.storageContext(cmd)
			defer cancel()
			c, err := a.open(ctx)
			if err != nil {
				return fmt.Errorf("thread tail: %w", err)
			}
			var opts []sdk.QueryOption
			if limit > 0 {
				opts = append(opts, sdk.Last(limit))
			}
			var recs []sdk.Record
			for r, err := range c.QueryThread(ctx, thread, opts...) {
				if errors.Is(err, sdk.ErrNotFound) {
					break // a thread with no records is empty, not missing
				}
				if err != nil {
					return fmt.Errorf("thread tail: %w", err)
				}
				recs = append(recs, r)
			}
			if a.json {
				out := make([]recordJSON, 0, len(recs))
				for _, r := range recs {
					j, err := newRecordJSON(r)
					if err != nil {
						return fmt.Errorf("thread tail: %w", err)
					}
					out = append(out, j)
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return writeRecordTable(cmd.OutOrStdout(), recs)
		}),
	}
	cmd.Flags().IntVarP(&limit, "limit", "n", DefaultTailLimit, "show the last N records (0: all)")
	return cmd
}
