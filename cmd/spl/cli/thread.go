package cli

import (
	"errors"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
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
	var (
		limit      int
		tombstones bool
	)
	cmd := &cobra.Command{
		Use:   "tail THREAD [-n N] [--tombstones]",
		Short: "Show the last records of a thread, oldest first",
		Long: `Show the last N records of a thread (all with -n 0) in clock order, one a
line: clock, time (UTC), act, kind, actor, short id and the body as compact
JSON, truncated. With --json, the full records.

Erased records are skipped. With --tombstones each appears in its place,
one line for each: its header, and in place of the body who erased it
(the erasure record's short id), when, and why; -n then counts them too.

Records that fail verification are left out; they are reported on stderr
and the command exits 4 after printing the others.`,
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
			var corrupt []error
			for r, err := range c.QueryThread(ctx, thread, opts...) {
				if errors.Is(err, sdk.ErrNotFound) {
					break // a thread with no records is empty, not missing
				}
				if errors.Is(err, records.ErrCorrupt) {
					corrupt = append(corrupt, flattenErrors(err)...)
					continue
				}
				if err != nil {
					return fmt.Errorf("thread tail: %w", err)
				}
				recs = append(recs, r)
			}
			var tombs []sdk.Tombstone
			if tombstones {
				ts, err := c.Tombstones(ctx, thread)
				if errors.Is(err, records.ErrCorrupt) {
					corrupt = append(corrupt, flattenErrors(err)...)
				} else if err != nil {
					return fmt.Errorf("thread tail: %w", err)
				}
				recs, tombs = lastRows(recs, ts, limit)
			}
			if err := a.writeTail(cmd, recs, tombs); err != nil {
				return fmt.Errorf("thread tail: %w", err)
			}
			if len(corrupt) > 0 {
				for _, err := range corrupt[:len(corrupt)-1] {
					fmt.Fprintf(cmd.ErrOrStderr(), "spl: thread tail: %v\n", err)
				}
				return fmt.Errorf("thread tail: %w", corrupt[len(corrupt)-1])
			}
			return nil
		}),
	}
	cmd.Flags().IntVarP(&limit, "limit", "n", DefaultTailLimit, "show the last N records (0: all)")
	cmd.Flags().BoolVar(&tombstones, "tombstones", false, "show erased records too, with who erased them, when and why")
	return cmd
}

// lastRows keeps, of the records and tombstones merged in clock order, the
// last limit (all when limit is 0).
func lastRows(recs []sdk.Record, tombs []sdk.Tombstone, limit int) ([]sdk.Record, []sdk.Tombstone) {
	if limit <= 0 || len(recs)+len(tombs) <= limit {
		return recs, tombs
	}
	clocks := make([]uint64, 0, len(recs)+len(tombs))
	for _, r := range recs {
		clocks = append(clocks, r.Clock)
	}
	for _, t := range tombs {
		clocks = append(clocks, t.Clock)
	}
	sort.Slice(clocks, func(i, j int) bool { return clocks[i] < clocks[j] })
	from := clocks[len(clocks)-limit]
	var r2 []sdk.Record
	for _, r := range recs {
		if r.Clock >= from {
			r2 = append(r2, r)
		}
	}
	var t2 []sdk.Tombstone
	for _, t := range tombs {
		if t.Clock >= from {
			t2 = append(t2, t)
		}
	}
	return r2, t2
}

// writeTail prints the records and tombstones of "thread tail".
func (a *app) writeTail(cmd *cobra.Command, recs []sdk.Record, tombs []sdk.Tombstone) error {
	if !a.json {
		return writeTailTable(cmd.OutOrStdout(), recs, tombs)
	}
	out := make([]tailJSON, 0, len(recs)+len(tombs))
	for _, r := range recs {
		j, err := newRecordJSON(r)
		if err != nil {
			return err
		}
		out = append(out, tailJSON{recordJSON: j})
	}
	for _, t := range tombs {
		out = append(out, newTombstoneJSON(t))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Clock < out[j].Clock })
	return writeJSON(cmd.OutOrStdout(), out)
}

// flattenErrors returns the errors an errors.Join holds, or err alone.
func flattenErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok && !isCorruptError(err) {
		return j.Unwrap()
	}
	return []error{err}
}
