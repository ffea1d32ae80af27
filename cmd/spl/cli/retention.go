package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

func newRetentionCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "Set, clear, show and apply retention policies for checkpoints",
		Long: `A retention policy says which session checkpoints of a thread are kept:
the newest N, those younger than a maximum age (when set), named ones and
pinned ones ("spl session pin"). The others are erased, by erasure records
with reason "retention", so retention leaves an audit trail. Retention
touches checkpoints only (kind agent.session.checkpoint), no other record.

A policy is itself a record (kind core.retention): a thread's policy on the
thread, the policy of all threads (--all) on the reserved thread
"spl/retention". The newest one wins; a thread's own policy overrides the
policy of all threads. A policy is enforced whenever a checkpoint is saved
to a thread it governs, and on every thread by "spl retention apply".`,
		RunE: groupRunE,
	}
	cmd.AddCommand(newRetentionSetCommand(a), newRetentionClearCommand(a), newRetentionShowCommand(a), newRetentionApplyCommand(a))
	return cmd
}

func newRetentionSetCommand(a *app) *cobra.Command {
	var (
		thread, maxAge, actor string
		all                   bool
		keepLast              int
	)
	cmd := &cobra.Command{
		Use:   "set (--thread THREAD | --all) --keep-last N [--max-age AGE] [flags]",
		Short: "Set the retention policy of a thread, or of all threads",
		Long: `Set the retention policy of a thread (--thread) or of every thread without
one of its own (--all): keep the newest N checkpoints (--keep-last, at
least 1), and also those younger than --max-age (a Go duration such as
36h, or days and weeks: 30d, 2w). Named and pinned checkpoints are always
kept. Setting a policy erases nothing by itself: it is enforced at the
next checkpoint saved to a thread, or by "spl retention apply".

--keep-last 0 with --max-age is an expiry: once they are older than
--max-age, a thread's checkpoints all go, the newest too, when its
session is completed; a session that is not over (running, paused,
failed, cancelled) keeps its newest, its resume point.`,
		Example: `  spl retention set --thread th_auth_refactor_abc123 --keep-last 10
  spl retention set --all --keep-last 5 --max-age 30d
  spl retention set --all --keep-last 0 --max-age 24h`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if all == cmd.Flags().Changed("thread") {
				return usagef("retention set: give --thread or --all, one of them")
			}
			if !cmd.Flags().Changed("keep-last") {
				return usagef("retention set: --keep-last is required")
			}
			p := sdk.RetentionPolicy{Thread: thread, All: all, KeepLast: keepLast}
			if maxAge != "" {
				d, err := parseAge(maxAge)
				if err != nil {
					return usagef("retention set: --max-age: %v", err)
				}
				p.MaxAge = d
			}
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("retention set: %w", err)
			}
			return a.withClient(cmd, "retention set", func(ctx context.Context, c *sdk.Client) error {
				r, err := c.SetRetention(ctx, actor, p)
				if err != nil {
					return fmt.Errorf("retention set: %w", err)
				}
				th, _ := p.Home() // checked by SetRetention
				return a.writeReceipt(cmd, r, receiptJSON{Thread: th, Act: records.ActKnow, Kind: records.KindRetention, Actor: actor})
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "thread the policy is for")
	f.BoolVar(&all, "all", false, "the policy of every thread without its own")
	f.IntVar(&keepLast, "keep-last", 0, "keep the newest N checkpoints (required; 0 with --max-age: an expiry)")
	f.StringVar(&maxAge, "max-age", "", "also keep checkpoints younger than this (36h, 30d, 2w)")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}

func newRetentionClearCommand(a *app) *cobra.Command {
	var (
		thread, actor string
		all           bool
	)
	cmd := &cobra.Command{
		Use:   "clear (--thread THREAD | --all) [flags]",
		Short: "Clear the retention policy of a thread, or of all threads",
		Long: `Clear the retention policy of a thread (--thread) or the policy of all
threads (--all): every record of that policy is erased, by erasure records
with reason "retention policy cleared", so the audit trail keeps who set
the policy and who cleared it. No checkpoint is erased. A thread whose own
policy is cleared is governed by the policy of all threads again, if there
is one; with neither, every checkpoint is kept. Clearing a policy that is
not set does nothing.`,
		Example: `  spl retention clear --thread th_auth_refactor_abc123
  spl retention clear --all`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if all == cmd.Flags().Changed("thread") {
				return usagef("retention clear: give --thread or --all, one of them")
			}
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("retention clear: %w", err)
			}
			return a.withClient(cmd, "retention clear", func(ctx context.Context, c *sdk.Client) error {
				p := sdk.RetentionPolicy{Thread: thread, All: all}
				res, err := c.ClearRetention(ctx, actor, p)
				if err != nil {
					return fmt.Errorf("retention clear: %w", err)
				}
				th, _ := p.Home() // checked by ClearRetention
				which := fmt.Sprintf("of thread %q", thread)
				if all {
					which = "of all threads"
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), newEraseJSON(th, res))
				}
				if len(res.Erasures) == 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "no retention policy %s: nothing to clear\n", which)
					return nil
				}
				return writeErase(cmd.OutOrStdout(), res)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "thread whose own policy to clear")
	f.BoolVar(&all, "all", false, "clear the policy of all threads")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}

// maxAge is the longest age parseAge accepts: the longest time.Duration,
// about 292 years.
const maxAge = time.Duration(1<<63 - 1)

// parseAge parses a maximum age: a positive Go duration, or a positive
// whole number of days ("30d") or weeks ("2w"). An age longer than a
// time.Duration holds (about 292 years) is refused, not wrapped around.
func parseAge(s string) (time.Duration, error) {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseUint(n, 10, 64)
			if errors.Is(err, strconv.ErrRange) || (err == nil && v > uint64(maxAge/unit)) {
				return 0, fmt.Errorf("must be at most %d%s (about 292 years), got %q", maxAge/unit, suffix, s)
			}
			if err != nil || v == 0 {
				return 0, fmt.Errorf("want a positive whole number of days or weeks (30d, 2w) or a Go duration (36h), got %q", s)
			}
			return time.Duration(v) * unit, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		// time.ParseDuration refuses a duration that overflows as well.
		return 0, fmt.Errorf("want a positive Go duration of at most %dh (36h) or days or weeks (30d, 2w), got %q", maxAge/time.Hour, s)
	}
	return d, nil
}

// formatAge is the inverse of parseAge, for display: "30d", "36h0m0s",
// "-" for no age limit.
func formatAge(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// policyJSON is the --json form of a retention policy.
type policyJSON = wire.RetentionPolicy

func newPolicyJSON(p sdk.RetentionPolicy) policyJSON {
	return p.Wire()
}

func newRetentionShowCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Show the retention policies in force",
		Long: `Show the retention policies in force: the policy of all threads first,
then each thread's own. No policy prints nothing on stdout ([] with --json)
and a note on stderr.`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "retention show", func(ctx context.Context, c *sdk.Client) error {
				ps, err := c.Retention(ctx)
				if err != nil {
					return fmt.Errorf("retention show: %w", err)
				}
				if a.json {
					out := make([]policyJSON, 0, len(ps))
					for _, p := range ps {
						out = append(out, newPolicyJSON(p))
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				if len(ps) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no retention policy: every checkpoint is kept")
					return nil
				}
				return writePolicies(cmd.OutOrStdout(), ps)
			})
		}),
	}
}

func writePolicies(w io.Writer, ps []sdk.RetentionPolicy) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SCOPE\tTHREAD\tKEEP LAST\tMAX AGE\tSET BY\tTIME\tID")
	for _, p := range ps {
		thread := "-"
		if !p.All {
			thread = cell(p.Thread, 40)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", p.Scope(), thread, p.KeepLast, formatAge(p.MaxAge),
			cell(p.Actor, actorWidth), tableTime(p.Time.UnixMilli()), p.ID.Short())
	}
	return tw.Flush()
}

// appliedJSON is the --json form of what retention did to one thread.
type appliedJSON struct {
	Thread   string       `json:"thread"`
	Policy   policyJSON   `json:"policy"`
	Kept     int          `json:"kept"`
	Erased   []string     `json:"erased"`
	Erasures []receiptRef `json:"erasures"`
	Corrupt  int          `json:"corrupt"`
}

func newRetentionApplyCommand(a *app) *cobra.Command {
	var actor string
	cmd := &cobra.Command{
		Use:   "apply [flags]",
		Short: "Enforce the retention policies on every thread",
		Long: `Enforce the retention policies on every thread that has checkpoints: erase
the checkpoints its policy does not keep, with one erasure record per
thread (reason "retention"). Prints one line for each thread a policy
governs: the checkpoints kept and erased, and the erasure record. Applying
again erases nothing more, and a policy change never erases what the new
policy keeps.`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("retention apply: %w", err)
			}
			return a.withClient(cmd, "retention apply", func(ctx context.Context, c *sdk.Client) error {
				res, err := c.ApplyRetention(ctx, actor)
				if werr := a.writeApplied(cmd, res); werr != nil && err == nil {
					err = werr
				}
				if err != nil {
					return fmt.Errorf("retention apply: %w", err)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&actor, "actor", "", "actor DID of the erasure records (default $SPL_ACTOR)")
	return cmd
}

func (a *app) writeApplied(cmd *cobra.Command, res []sdk.RetentionResult) error {
	if a.json {
		out := make([]appliedJSON, 0, len(res))
		for _, r := range res {
			out = append(out, appliedJSON{Thread: r.Thread, Policy: newPolicyJSON(r.Policy), Kept: r.Kept,
				Erased: idStrings(r.Erased), Erasures: receiptRefs(r.Erasures), Corrupt: r.Corrupt})
		}
		return writeJSON(cmd.OutOrStdout(), out)
	}
	w := cmd.OutOrStdout()
	if len(res) == 0 {
		_, err := fmt.Fprintln(w, "no retention policy: nothing to erase")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "THREAD\tPOLICY\tKEPT\tERASED\tERASURE")
	total := 0
	for _, r := range res {
		policy := fmt.Sprintf("%s: last %d", r.Policy.Scope(), r.Policy.KeepLast)
		if r.Policy.MaxAge > 0 {
			policy += ", " + formatAge(r.Policy.MaxAge)
		}
		erasure := "-"
		if len(r.Erasures) > 0 {
			last := r.Erasures[len(r.Erasures)-1]
			erasure = fmt.Sprintf("%s (clock %d)", last.ID, last.Clock)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", cell(r.Thread, 40), policy, r.Kept, len(r.Erased), erasure)
		total += len(r.Erased)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "erased %d checkpoints on %d threads\n", total, len(res))
	return err
}

func newSessionPinCommand(a *app) *cobra.Command {
	var thread, reason, actor string
	cmd := &cobra.Command{
		Use:   "pin ID [--thread THREAD] [--reason TEXT] [flags]",
		Short: "Pin a checkpoint so that retention keeps it",
		Long: `Pin a checkpoint: retention keeps it whatever the policy. The pin is a
record (kind core.pin) on the checkpoint's thread. ID is a whole id or
its end as the tables print it. Without --thread the checkpoint is looked
for in the whole log. Pinning a pinned checkpoint
does nothing and says so. A pin does not stop "spl erase".`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("session pin: %w", err)
			}
			return a.withClient(cmd, "session pin", func(ctx context.Context, c *sdk.Client) error {
				id, err := c.RecordID(ctx, thread, args[0])
				if err != nil {
					return fmt.Errorf("session pin: %w", err)
				}
				p, err := c.Pin(ctx, thread, actor, id, reason)
				if err != nil {
					return fmt.Errorf("session pin: %w", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), p.Wire(id))
				}
				if p.Already {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "already pinned: %s (pin %s, clock %d), nothing to do\n", id, p.ID, p.Clock)
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "pinned: %s\nid:    %s\nclock: %d\n", id, p.ID, p.Clock)
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "thread of the checkpoint (faster)")
	f.StringVar(&reason, "reason", "", "why it is pinned (at most 1 KiB)")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}
