package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// Lineage commands of "spl session": log, resume, fork, diff, prune. The
// rules are the service layer's (sdk/lineage.go, fork.go, diff.go,
// prune.go); these commands parse flags and print.

func newSessionLogCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "log THREAD",
		Short: "Draw the lineage of a thread's checkpoints as a tree",
		Long: `Draw the lineage of a thread as a tree: each checkpoint under its parent
(the previous checkpoint of its branch), the resumes under the checkpoint
they took up, the forks made from a checkpoint (the new thread), and the
checkpoints erased (their bodies are gone). A thread that is itself a
fork says where it came from. A checkpoint saved before lineage (no
parent in its body) hangs under the parent a save would have given it
then (the checkpoint before it, or the one a resume before it took up),
marked "~".
With --json, the nodes as data, each naming its parent.`,
		Example: `  spl session log th_auth_refactor_abc123`,
		Args:    cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "session log", func(ctx context.Context, c *sdk.Client) error {
				l, err := c.Lineage(ctx, args[0])
				if err != nil {
					return withOp("session log", err)
				}
				_ = reportSkipped(cmd, &sdk.SkippedError{Clocks: l.Corrupt})
				if a.json {
					return writeJSON(cmd.OutOrStdout(), l.Wire())
				}
				if len(l.Nodes) == 0 {
					return fmt.Errorf("session log: no checkpoint on thread %q: %w", args[0], sdk.ErrNotFound)
				}
				return writeLineage(cmd.OutOrStdout(), l, time.Now())
			})
		}),
	}
}

// writeLineage draws l as a tree, ages measured at now.
func writeLineage(w io.Writer, l sdk.Lineage, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "thread %s\n", printable(l.Thread))
	if f := l.ForkedFrom; f != nil {
		fmt.Fprintf(&b, "forked from %s at %s (clock %d)\n", printable(f.Thread), f.ID.Short(), f.Clock)
	}
	present := make(map[records.ID]bool, len(l.Nodes))
	for _, n := range l.Nodes {
		if n.Type == sdk.NodeCheckpoint || n.Type == sdk.NodeErased {
			present[n.ID] = true
		}
	}
	children := make(map[records.ID][]sdk.LineageNode)
	var roots []sdk.LineageNode
	for _, n := range l.Nodes {
		if n.Parent.IsZero() || !present[n.Parent] {
			roots = append(roots, n)
			continue
		}
		children[n.Parent] = append(children[n.Parent], n)
	}
	var draw func(n sdk.LineageNode, lead, branch string)
	draw = func(n sdk.LineageNode, lead, branch string) {
		fmt.Fprintf(&b, "%s%s%s\n", lead, branch, lineageLine(n, now))
		next := lead
		switch branch {
		case "├── ":
			next += "│   "
		case "└── ":
			next += "    "
		}
		kids := children[n.ID]
		for i, k := range kids {
			br := "├── "
			if i == len(kids)-1 {
				br = "└── "
			}
			draw(k, next, br)
		}
	}
	for _, r := range roots {
		draw(r, "", "")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// lineageLine is the line of one node of the tree.
func lineageLine(n sdk.LineageNode, now time.Time) string {
	switch n.Type {
	case sdk.NodeResume:
		return fmt.Sprintf("↻ %d  resumed by %s  %s", n.Clock, cell(n.Actor, actorWidth), ago(now, n.Time))
	case sdk.NodeFork:
		return fmt.Sprintf("⑂ %d  forked to %s (%s)  %s", n.Clock, cell(n.ToThread, summaryWidth), n.ToID.Short(), ago(now, n.Time))
	case sdk.NodeErased:
		return fmt.Sprintf("✗ %d  %s  erased: %s", n.Clock, n.ID.Short(), cell(n.Reason, summaryWidth))
	}
	mark := "●"
	if n.ImpliedParent {
		mark = "~"
	}
	cp := n.Checkpoint
	s := fmt.Sprintf("%s %d  %s  %s", mark, n.Clock, n.ID.Short(), ago(now, n.Time))
	if cp.Name != "" {
		s += "  [" + cell(cp.Name, nameWidth) + "]"
	}
	s += "  " + cell(cp.Summary, summaryWidth)
	if f := cp.ForkedFrom; f != nil {
		s += fmt.Sprintf("  (fork of %s at %s)", cell(f.Thread, nameWidth), f.ID.Short())
	}
	return s
}

// ago says how long before now t was: "45s ago", "3h ago", "2d ago".
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in the future"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

func newSessionForkCommand(a *app) *cobra.Command {
	var (
		from, to, actor string
		sets            []string
	)
	cmd := &cobra.Command{
		Use:   "fork THREAD --to NEW_THREAD [--from CHECKPOINT] [--set KEY=VALUE]... [flags]",
		Short: "Start a new thread from a checkpoint of a thread",
		Long: `Start NEW_THREAD from a checkpoint of THREAD (--from: its id, the end of its
id, or its name; default the latest). The new thread's first record is a
checkpoint with the source's summary, learnings, next steps, state and
other body keys (not its name), whose parent is the source and whose
forked_from names it ({thread, id, clock}); spl verify checks that link,
even after the source's records are erased. A fork record on THREAD
notes the fork, so "spl session log THREAD" shows it. NEW_THREAD must
hold no record.

--set KEY=VALUE (repeatable) changes the copied state: KEY is a key of
the state, or keys joined by dots into nested objects (made where
missing); VALUE is read as JSON when it is valid JSON (42, true, null,
"text", [1,2], {"a":1}), else taken as a string.`,
		Example: `  spl session fork th_auth --from migrations-done --to th_auth_try_b \
    --set approach=rewrite --set limits.max_files=20`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("to") {
				return usagef("session fork: --to is required")
			}
			req := sdk.ForkRequest{From: from, To: to}
			for _, kv := range sets {
				s, err := sdk.ParseStateSet(kv)
				if err != nil {
					return fmt.Errorf("session fork: --set: %w", err)
				}
				req.Set = append(req.Set, s)
			}
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("session fork: %w", err)
			}
			req.Actor = actor
			return a.withClient(cmd, "session fork", func(ctx context.Context, c *sdk.Client) error {
				f, ferr := c.Fork(ctx, args[0], req)
				if ferr != nil && f.Checkpoint.Record.Record == nil {
					return withOp("session fork", ferr)
				}
				if ferr != nil {
					defer fmt.Fprintf(cmd.ErrOrStderr(), "spl: warning: session fork: %v\n", ferr)
				}
				if a.json {
					j, err := f.Wire()
					if err != nil {
						return fmt.Errorf("session fork: %w", err)
					}
					return writeJSON(cmd.OutOrStdout(), j)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "forked: %s at %s (clock %d) -> %s\nid:     %s\nclock:  %d\n",
					printable(args[0]), f.From.ID, f.From.Clock, printable(to), f.Checkpoint.ID, f.Checkpoint.Clock)
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "the source checkpoint: id, end of id or name (default: the latest)")
	f.StringVar(&to, "to", "", "the new thread (required; must hold no record)")
	f.StringArrayVar(&sets, "set", nil, "change the forked state: KEY=VALUE, VALUE JSON or text (repeatable)")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}

func newSessionDiffCommand(a *app) *cobra.Command {
	var thread, threadB string
	cmd := &cobra.Command{
		Use:   "diff A B [--thread THREAD] [--thread-b THREAD]",
		Short: "Compare the bodies of two checkpoints",
		Long: `Compare the bodies of checkpoints A and B: keys added (+), removed (-)
and changed (~), into nested objects; lists compared as collections, each
item one side lacks added or removed (with its index). With --thread, A
and B are ids, ends of ids or names on that thread (B on --thread-b when
given, for a fork and its source); without, full ids anywhere in the log
(a scan of the log). With --json, the changes as data.`,
		Example: `  spl session diff --thread th_auth first migrations-done
  spl session diff --thread th_auth --thread-b th_auth_try_b migrations-done izpadlzoktj4`,
		Args: cobra.ExactArgs(2),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if threadB == "" {
				threadB = thread
			}
			return a.withClient(cmd, "session diff", func(ctx context.Context, c *sdk.Client) error {
				var (
					sides [2]sdk.SavedCheckpoint
					err   error
				)
				for i, th := range []string{thread, threadB} {
					ref := args[i]
					if th == "" {
						var id records.ID
						if id, err = c.RecordID(ctx, "", ref); err == nil {
							sides[i], err = c.CheckpointByID(ctx, "", id)
						}
					} else {
						sides[i], err = c.FindCheckpoint(ctx, th, ref)
					}
					if err != nil {
						return withOp("session diff", err)
					}
				}
				d, err := sdk.DiffCheckpoints(sides[0], sides[1])
				if err != nil {
					return withOp("session diff", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), d.Wire())
				}
				var b strings.Builder
				for i, sc := range sides {
					fmt.Fprintf(&b, "%s: %s at %s (clock %d)\n", "ab"[i:i+1], printable(sc.Header.Thread), sc.ID, sc.Clock)
				}
				if len(d.Changes) == 0 {
					b.WriteString("no differences\n")
				}
				for _, ch := range d.Changes {
					b.WriteString(printable(ch.String()) + "\n")
				}
				_, err = io.WriteString(cmd.OutOrStdout(), b.String())
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&thread, "thread", "", "the thread of A (and of B without --thread-b)")
	cmd.Flags().StringVar(&threadB, "thread-b", "", "the thread of B")
	return cmd
}

func newSessionPruneCommand(a *app) *cobra.Command {
	var (
		olderThan, actor      string
		keepLast              int
		keepCleanOnly, dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "prune THREAD (--older-than AGE | --keep-last N) [--keep-clean-only] [--dry-run] [flags]",
		Short: "Erase old checkpoints of a thread, audited by erasure records",
		Long: `Erase the checkpoints of a thread older than --older-than (36h, 7d, 2w)
and outside the newest --keep-last N; with both, a checkpoint goes only
if it is both. The newest checkpoint, named ones and pinned ones are
always kept, as retention keeps them. The erasure goes through the same
path as spl erase and retention (core.erasure records with reason
"prune: …", secure deletes), so a prune leaves an audit trail.

--keep-clean-only: of the checkpoints selected, erase only those whose
body says "is_clean": false (at the top level, in "state" or in
"metadata"), checkpoints saved in the middle of a step; clean ones
(true, or no is_clean) are kept.

--dry-run prints what would be erased and writes nothing.

To prune by age at every save instead, set a retention policy:
spl retention set --thread THREAD --keep-last 1 --max-age 7d.`,
		Example: `  spl session prune th_auth --older-than 7d --dry-run
  spl session prune th_auth --keep-last 10 --keep-clean-only`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			o := sdk.PruneOptions{KeepLast: keepLast, KeepCleanOnly: keepCleanOnly, DryRun: dryRun}
			if !cmd.Flags().Changed("older-than") && !cmd.Flags().Changed("keep-last") {
				return usagef("session prune: give --older-than, --keep-last or both")
			}
			if cmd.Flags().Changed("keep-last") && keepLast < 1 {
				return usagef("session prune: --keep-last must be at least 1, got %d", keepLast)
			}
			if olderThan != "" {
				d, err := parseAge(olderThan)
				if err != nil {
					return usagef("session prune: --older-than: %v", err)
				}
				o.OlderThan = d
			}
			if !dryRun {
				var err error
				if o.Actor, err = actorFlag(actor); err != nil {
					return fmt.Errorf("session prune: %w", err)
				}
			}
			return a.withClient(cmd, "session prune", func(ctx context.Context, c *sdk.Client) error {
				res, err := c.Prune(ctx, args[0], o)
				if err != nil {
					return withOp("session prune", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), res.Wire())
				}
				var b strings.Builder
				verb := "pruned"
				if dryRun {
					verb = "would prune"
				}
				for _, id := range res.Pruned {
					fmt.Fprintf(&b, "%s: %s\n", verb, id)
				}
				fmt.Fprintf(&b, "kept:  %d\n", res.Kept)
				for _, r := range res.Erasures {
					fmt.Fprintf(&b, "id:    %s\nclock: %d\n", r.ID, r.Clock)
				}
				_, err = io.WriteString(cmd.OutOrStdout(), b.String())
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&olderThan, "older-than", "", "erase checkpoints older than this (36h, 7d, 2w)")
	f.IntVar(&keepLast, "keep-last", 0, "keep the newest N checkpoints (at least 1)")
	f.BoolVar(&keepCleanOnly, "keep-clean-only", false, `erase only checkpoints whose body says "is_clean": false`)
	f.BoolVar(&dryRun, "dry-run", false, "print what would be erased; write nothing")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	return cmd
}

// findShown returns the checkpoint "session show" names: --id (a full
// id, or the end of one), --name, or the latest.
func findShown(cmd *cobra.Command, c *sdk.Client, thread, id, name string) (sdk.SavedCheckpoint, error) {
	ctx := cmd.Context()
	switch {
	case cmd.Flags().Changed("id") && cmd.Flags().Changed("name"):
		return sdk.SavedCheckpoint{}, usagef("session show: give --id or --name, not both")
	case cmd.Flags().Changed("name"):
		return c.CheckpointByName(ctx, thread, name)
	case cmd.Flags().Changed("id"):
		if full, err := records.ParseID(id); err == nil {
			return c.CheckpointByID(ctx, thread, full)
		}
		if len(id) < 8 {
			return sdk.SavedCheckpoint{}, usagef("session show: --id must be an id or at least its last 8 characters, got %q", id)
		}
		sc, err := c.FindCheckpoint(ctx, thread, id)
		if err == nil && !strings.HasSuffix(sc.ID.String(), id) {
			err = fmt.Errorf("no checkpoint id ending %q on thread %q: %w", id, thread, sdk.ErrNotFound)
		}
		return sc, err
	}
	return c.LatestCheckpoint(ctx, thread)
}

// readState reads --state-file: one JSON object, through the strict
// reader of records, as a checkpoint's state.
func (a *app) readState(name string) (map[string]any, error) {
	data, err := a.readBody(name)
	if err != nil {
		return nil, err
	}
	v, err := records.ValueFromJSON(data, "state")
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &records.FieldError{Field: "state", Rule: "must be a JSON object"}
	}
	return m, nil
}

// writeBodyRest writes the keys of a checkpoint's body that writeCheckpoint
// has no line for (state, metadata, any other), nested, one label each.
func writeBodyRest(b *strings.Builder, body []byte) error {
	j, err := records.BodyToJSON(body)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	shown := []string{"summary", "learnings", "next_steps", "name", "session_id", "parent", "forked_from"}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !slices.Contains(shown, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		lines, _ := nested(m[k])
		writeField(b, cell(k, 11), strings.Join(lines, "\n"))
	}
	return nil
}

// nested renders a JSON value as lines, and reports whether it is a
// scalar of one line: objects as "key: value" with nested values
// indented, lists as "- item".
func nested(v any) ([]string, bool) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			return []string{"{}"}, true
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, keyed(k+":", v[k])...)
		}
		return out, false
	case []any:
		if len(v) == 0 {
			return []string{"[]"}, true
		}
		var out []string
		for _, e := range v {
			out = append(out, keyed("-", e)...)
		}
		return out, false
	case string:
		lines := strings.Split(v, "\n")
		return lines, len(lines) == 1
	}
	j, _ := json.Marshal(v)
	return []string{string(j)}, true
}

// keyed puts label before the lines of v: on the same line for a one-line
// scalar, else above them, indented (a list item's first line beside its
// "-").
func keyed(label string, v any) []string {
	lines, scalar := nested(v)
	if scalar {
		return []string{label + " " + lines[0]}
	}
	var out []string
	if label == "-" {
		out = append(out, "- "+lines[0])
		lines = lines[1:]
	} else {
		out = append(out, label)
	}
	for _, l := range lines {
		out = append(out, "  "+l)
	}
	return out
}

// listingOf returns the --json form of cps in a thread's list.
func listingOf(cps []sdk.SavedCheckpoint) ([]wire.CheckpointListing, error) {
	out := make([]wire.CheckpointListing, 0, len(cps))
	for _, cp := range cps {
		j, err := cp.Listing()
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// reportSkipped tells stderr of the records a read passed over (err a
// *sdk.SkippedError) and returns nil for them; any other err is returned.
func reportSkipped(cmd *cobra.Command, err error) error {
	clocks, ok := sdk.Skipped(err)
	if !ok {
		return err
	}
	for _, clock := range clocks {
		fmt.Fprintf(cmd.ErrOrStderr(), "spl: skipped corrupt record at clock %d\n", clock)
	}
	return nil
}
