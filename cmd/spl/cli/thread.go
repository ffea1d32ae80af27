package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// DefaultTailLimit is how many records "thread tail" shows by default.
const DefaultTailLimit = 50

// DefaultThreadLimit is how many threads "thread list" shows by default.
const DefaultThreadLimit = 50

func newThreadCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "thread",
		Short: "List threads, and read the records of a thread",
		RunE:  groupRunE,
	}
	cmd.AddCommand(newThreadListCommand(a), newThreadTailCommand(a))
	return cmd
}

func newThreadListCommand(a *app) *cobra.Command {
	var (
		actor, kind, since string
		limit              int
	)
	cmd := &cobra.Command{
		Use:   "list [--actor DID] [--kind KIND] [--since AGE] [-n N]",
		Short: "List threads, newest activity first",
		Long: `List threads, newest activity first (by their newest record): the time of
the last activity (UTC), the thread, its records and checkpoints (erased
ones not counted), the actor of the newest record and the kinds of its
records, most frequent first. With --json, every field in full.

--actor keeps the threads with a record by that actor, --kind those with a
record of that kind, --since those active in that time (a Go duration such
as 90m or 36h, or whole days or weeks: 30d, 2w). -n bounds the list
(default 50, 0: all).

The list comes from the thread index, a read model of the log; the command
first waits, within --timeout, until the index holds every record in the
log (catching it up itself when no spl serve runs it).`,
		Example: `  spl thread list
  spl thread list --actor did:sync:agent:dev --since 7d -n 10`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usagef("thread list: --limit must be 0 (all) or more, got %d", limit)
			}
			if kind != "" {
				if err := records.CheckKind(kind); err != nil {
					return fmt.Errorf("thread list: --kind: %w", err)
				}
			}
			var cutoff time.Time
			if since != "" {
				d, err := parseAge(since)
				if err != nil {
					return usagef("thread list: --since: %v", err)
				}
				cutoff = time.Now().Add(-d)
			}
			return a.withClient(cmd, "thread list", func(ctx context.Context, c *sdk.Client) error {
				ts, err := c.Threads(ctx, sdk.ThreadFilter{
					Actor: actor, Kind: kind, Since: cutoff, Limit: limit,
					Freshness: sdk.Freshness{Fresh: true},
				})
				if err != nil {
					return fmt.Errorf("thread list: %w", err)
				}
				if a.json {
					out := make([]wire.Thread, len(ts))
					for i, t := range ts {
						out[i] = t.Wire()
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				if len(ts) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no threads")
					return nil
				}
				return writeThreadTable(cmd.OutOrStdout(), ts)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&actor, "actor", "", "only threads with a record by this actor")
	f.StringVar(&kind, "kind", "", "only threads with a record of this kind")
	f.StringVar(&since, "since", "", "only threads active in this time: 90m, 36h, 30d, 2w")
	f.IntVarP(&limit, "limit", "n", DefaultThreadLimit, "show at most N threads (0: all)")
	return cmd
}

func newThreadTailCommand(a *app) *cobra.Command {
	var (
		limit              int
		tombstones, follow bool
	)
	cmd := &cobra.Command{
		Use:   "tail THREAD [-n N] [--tombstones] [--follow]",
		Short: "Show the last records of a thread, oldest first",
		Long: `Show the last N records of a thread (all with -n 0) in clock order, one a
line: clock, time (UTC), act, kind, actor, short id and the body as compact
JSON, truncated. With --json, the full records.

Erased records are skipped. With --tombstones each appears in its place,
one line for each: its header, and in place of the body who erased it
(the erasure record's short id), when, and why; -n then counts them too.

Records that fail verification are left out; they are reported on stderr
and the command exits 4 after printing the others.

With --follow (-f) the command then prints each new record of the thread
as it lands, until interrupted (Ctrl-C: exit 0); an erasure record is
followed by one tombstone line for each record it erased. Records that
fail verification are reported on stderr and following goes on. --timeout
bounds the first read only. With --json, --follow prints one compact JSON
object a line (JSON Lines) instead of an array.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			thread := args[0]
			if limit < 0 {
				return usagef("thread tail: -n must be 0 (all) or more, got %d", limit)
			}
			// Not withClient: --follow ends the --timeout context itself,
			// before it follows.
			ctx, cancel := a.storageContext(cmd)
			defer cancel()
			c, err := a.open(ctx)
			if err != nil {
				return fmt.Errorf("thread tail: %w", err)
			}
			// Following goes on from the log's clock before the read, so
			// that nothing appended during the read is missed.
			var start uint64
			if follow {
				if start, err = c.LastClock(ctx); err != nil {
					return fmt.Errorf("thread tail: %w", err)
				}
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
					corrupt = append(corrupt, sdk.SplitErrors(err)...)
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
					corrupt = append(corrupt, sdk.SplitErrors(err)...)
				} else if err != nil {
					return fmt.Errorf("thread tail: %w", err)
				}
				recs, tombs = lastRows(recs, ts, limit)
			}
			if follow {
				cancel() // --timeout bounds the first read only
				return a.followTail(cmd, c, thread, start, recs, tombs, corrupt)
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
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "then print new records as they land, until interrupted")
	return cmd
}

// followTail prints the tail read (recs, tombs; corrupt on stderr), then
// every record of thread after clock start and after the tail as it
// lands, until the command's context ends.
func (a *app) followTail(cmd *cobra.Command, c *sdk.Client, thread string, start uint64,
	recs []sdk.Record, tombs []sdk.Tombstone, corrupt []error) error {
	stderr := cmd.ErrOrStderr()
	from := start
	for _, err := range corrupt {
		fmt.Fprintf(stderr, "spl: thread tail: %v\n", err)
		var ce *sdk.CorruptError
		if errors.As(err, &ce) {
			from = max(from, ce.Clock)
		}
	}
	for _, r := range recs {
		from = max(from, r.Clock)
	}
	for _, t := range tombs {
		from = max(from, t.Clock)
	}
	p := &tailPrinter{json: a.json, t: &lineTable{w: cmd.OutOrStdout()}}
	if err := p.start(recs, tombs); err != nil {
		return fmt.Errorf("thread tail: %w", err)
	}
	ctx := cmd.Context()
	for r, err := range c.Follow(ctx, thread, from+1) {
		if errors.Is(err, records.ErrCorrupt) {
			fmt.Fprintf(stderr, "spl: thread tail: %v\n", err)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("thread tail: follow: %w", err)
		}
		if err := p.record(r); err != nil {
			return fmt.Errorf("thread tail: %w", err)
		}
		ts, err := sdk.TombstonesOf(r)
		if err != nil {
			fmt.Fprintf(stderr, "spl: thread tail: %v\n", err)
			continue
		}
		for _, t := range ts {
			if err := p.tombstone(t); err != nil {
				return fmt.Errorf("thread tail: %w", err)
			}
		}
	}
	return nil // interrupted: the way a follow ends
}

// tailPrinter prints "thread tail --follow": the tail as a table (or JSON
// Lines), then one line a record or tombstone.
type tailPrinter struct {
	json bool
	t    *lineTable
}

func (p *tailPrinter) start(recs []sdk.Record, tombs []sdk.Tombstone) error {
	if p.json {
		rows := make([]tailJSON, 0, len(recs)+len(tombs))
		for _, r := range recs {
			j, err := newRecordJSON(r)
			if err != nil {
				return err
			}
			rows = append(rows, tailJSON{Record: j})
		}
		for _, t := range tombs {
			rows = append(rows, newTombstoneJSON(t))
		}
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].Clock < rows[j].Clock })
		for _, r := range rows {
			if err := writeJSONLine(p.t.w, r); err != nil {
				return err
			}
		}
		return nil
	}
	rows, err := tailRows(recs, tombs)
	if err != nil {
		return err
	}
	p.t.fit(tailHeader)
	p.t.fit(rows...)
	for _, r := range append([][]string{tailHeader}, rows...) {
		if err := p.t.line(r); err != nil {
			return err
		}
	}
	return nil
}

func (p *tailPrinter) record(r sdk.Record) error {
	if p.json {
		j, err := newRecordJSON(r)
		if err != nil {
			return err
		}
		return writeJSONLine(p.t.w, tailJSON{Record: j})
	}
	cells, err := recordCells(r)
	if err != nil {
		return err
	}
	return p.t.line(cells)
}

func (p *tailPrinter) tombstone(t sdk.Tombstone) error {
	if p.json {
		return writeJSONLine(p.t.w, newTombstoneJSON(t))
	}
	return p.t.line(tombstoneCells(t))
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
		out = append(out, tailJSON{Record: j})
	}
	for _, t := range tombs {
		out = append(out, newTombstoneJSON(t))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Clock < out[j].Clock })
	return writeJSON(cmd.OutOrStdout(), out)
}
