package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// errDamaged reports that verification failed: corrupt or missing
// records, bad signatures, a loss, or unsigned records where they fail.
// Exit code 4.
var errDamaged = errors.New("verification failed")

func newEraseCommand(a *app) *cobra.Command {
	var thread, reason, actor string
	var clocks []uint
	cmd := &cobra.Command{
		Use:   "erase (ID... | --clock N...) --thread THREAD --reason TEXT [flags]",
		Short: "Erase records of a thread, for good",
		Long: `Erase records of a thread. One core.erasure record (act FORGET) is appended
that names them, keeps their headers (so the thread still verifies) and
the reason; then their messages are deleted securely: the server overwrites
their bytes on disk. Reads skip erased records; "thread tail --tombstones"
shows them.

An ID is a whole id, or its end as the tables print it (at least 8
characters) of a record the thread still holds. Refused, changing
nothing: an erasure record, an id that is no record, a record of another
thread, an end that several ids share (naming them). An id that is
already erased is a no-op.
Prints each erased id, then the id and clock of the erasure record.

With --clock instead of ids, erase messages of the thread that are no
records: a message that does not decode or does not verify, which has no
id to name it by (verify, session list and resume name such messages by
clock). The erasure record names each by clock and the BLAKE3 digest of
its bytes; verify then counts the clock as erased. A clock that holds a
record that verifies is refused: erase that by its id.`,
		Example: `  spl erase bafir4icqw2edubnyo6vxli4omemigxzdg6mztntrymima5izpadlzoktj4 \
    --thread th_auth_refactor_abc123 --reason "user asked to forget" --actor did:sync:agent:dev
  spl erase --clock 1042 --thread th_auth_refactor_abc123 --reason "corrupt message" --actor did:sync:agent:dev`,
		Args: cobra.ArbitraryArgs,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("thread") {
				return usagef("erase: --thread is required")
			}
			if !cmd.Flags().Changed("reason") {
				return usagef("erase: --reason is required")
			}
			switch {
			case len(args) == 0 && len(clocks) == 0:
				return usagef("erase: name the records to erase by id, or the messages that are no records by --clock")
			case len(args) > 0 && len(clocks) > 0:
				return usagef("erase: give ids or --clock, not both (a record that verifies is erased by its id)")
			}
			actor, err := actorFlag(actor)
			if err != nil {
				return fmt.Errorf("erase: %w", err)
			}
			return a.withClient(cmd, "erase", func(ctx context.Context, c *sdk.Client) error {
				var (
					res sdk.EraseResult
					err error
				)
				if len(clocks) > 0 {
					cs := make([]uint64, len(clocks))
					for i, c := range clocks {
						cs[i] = uint64(c)
					}
					res, err = c.EraseMessages(ctx, thread, actor, cs, reason)
				} else {
					var ids []records.ID
					if ids, err = resolveIDs(ctx, c, thread, args); err == nil {
						res, err = c.Erase(ctx, thread, actor, ids, reason)
					}
				}
				if err != nil {
					return withOp("erase", err)
				}
				if a.json {
					return writeJSON(cmd.OutOrStdout(), newEraseJSON(thread, res))
				}
				return writeErase(cmd.OutOrStdout(), res)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "thread of the records (required)")
	f.StringVar(&reason, "reason", "", "why they are erased, kept in the erasure record (required, at most 1 KiB)")
	f.StringVar(&actor, "actor", "", "actor DID (default $SPL_ACTOR)")
	f.UintSliceVar(&clocks, "clock", nil, "erase the message at this clock, one that is no record (repeatable)")
	return cmd
}

// withOp wraps err under the command name op, unless its message already
// starts with it (errors of the log name the operation themselves).
func withOp(op string, err error) error {
	if strings.HasPrefix(err.Error(), op+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// resolveIDs resolves record ids given as arguments, each a whole id or
// the end of one as the tables print it, on thread ("": every thread)
// (sdk.Client.RecordID: an end that several ids share is refused, naming
// them).
func resolveIDs(ctx context.Context, c *sdk.Client, thread string, args []string) ([]records.ID, error) {
	ids := make([]records.ID, 0, len(args))
	for _, s := range args {
		id, err := c.RecordID(ctx, thread, s)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// writeErase prints what an erasure did.
func writeErase(w io.Writer, res sdk.EraseResult) error {
	var b strings.Builder
	for _, id := range res.Erased {
		fmt.Fprintf(&b, "erased: %s\n", id)
	}
	for _, c := range res.ErasedClocks {
		fmt.Fprintf(&b, "erased: the message at clock %d\n", c)
	}
	already := joinIDs(res.Already)
	for _, c := range res.AlreadyClocks {
		already = strings.TrimPrefix(already+fmt.Sprintf(", the message at clock %d", c), ", ")
	}
	if len(res.Erasures) == 0 {
		fmt.Fprintf(&b, "already erased: %s, nothing to do\n", already)
	} else {
		for _, id := range res.Already {
			fmt.Fprintf(&b, "already erased: %s\n", id)
		}
		for _, c := range res.AlreadyClocks {
			fmt.Fprintf(&b, "already erased: the message at clock %d\n", c)
		}
		for _, r := range res.Erasures {
			fmt.Fprintf(&b, "id:    %s\nclock: %d\n", r.ID, r.Clock)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func joinIDs(ids []records.ID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return strings.Join(s, ", ")
}

func newVerifyCommand(a *app) *cobra.Command {
	var all, requireSigned bool
	cmd := &cobra.Command{
		Use:   "verify (THREAD | --all)",
		Short: "Check the ids, digests and chain of a thread, or of the whole log",
		Long: `Walk a thread (or with --all every thread, accounting for every clock) and
check each record's id, body digest and prev link. Records that erasures
removed are bridged through the headers the erasure records keep.

Reports the records checked, erased (explained by an erasure record),
corrupt (id or digest mismatch) and missing (a gap in a chain, or a
deleted message, that no erasure explains), listing each corrupt and
missing one. The whole log is also held to the high-water mark its data
directory keeps (the newest clock acknowledged, and the id at it): a
stream behind it (purged, deleted and recreated, restored from an older
copy) is reported as loss, with the clocks missing. Exits 0 only when
nothing is corrupt, missing or lost, else 4;
a THREAD with no records in the log exits 2 (not found).
With --all and a terminal on stderr, shows progress there.

Signatures: every record is checked against the key its actor held at
the record's clock (the key of a did:key; for another DID the newest
binding on spl/actors before the record, see spl actor). A signature that
does not verify, or by a key that is not the actor's, is listed naming
the record, the actor and the key, and exits 4. Unsigned records are
counted and listed; they fail only with --require-signed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) == 1:
				return usagef("verify: give a thread or --all, not both")
			case !all && len(args) == 0:
				return usagef("verify: give a thread to verify, or --all for the whole log")
			case !all:
				if err := records.CheckThread(args[0]); err != nil {
					return fmt.Errorf("verify: %w", err)
				}
			}
			return a.withClient(cmd, "verify", func(ctx context.Context, c *sdk.Client) error {
				var (
					rep sdk.VerifyReport
					err error
				)
				if all {
					progress := progressTo(cmd.ErrOrStderr())
					rep, err = c.VerifyAll(ctx, progress)
					if progress != nil {
						fmt.Fprintln(cmd.ErrOrStderr())
					}
				} else {
					rep, err = c.Verify(ctx, args[0])
				}
				if err != nil {
					return fmt.Errorf("verify: %w", err)
				}
				if !all && rep.Threads == 0 {
					// Nothing of the thread is in the log: a mistyped thread
					// must not pass as verified.
					return fmt.Errorf("verify: thread %q has no records, nothing to verify: %w", args[0], sdk.ErrNotFound)
				}
				if a.json {
					err = writeJSON(cmd.OutOrStdout(), newVerifyJSON(rep, requireSigned))
				} else {
					err = writeVerify(cmd.OutOrStdout(), rep, requireSigned)
				}
				if err != nil {
					return fmt.Errorf("verify: %w", err)
				}
				if rep.Loss != nil {
					return fmt.Errorf("verify: loss: clocks %d–%d missing, behind the high-water mark; %d corrupt, %d missing: %w",
						rep.Loss.From, rep.Loss.To, len(rep.Corrupt), len(rep.Missing), errDamaged)
				}
				if !rep.OKSigned(requireSigned) {
					return fmt.Errorf("verify: %d corrupt, %d missing, %d bad signatures, %d unsigned: %w",
						len(rep.Corrupt), len(rep.Missing), len(rep.BadSig), rep.UnsignedCount, errDamaged)
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "verify every thread of the log")
	cmd.Flags().BoolVar(&requireSigned, "require-signed", false, "fail on unsigned records too")
	return cmd
}

// progressTo returns a progress callback that rewrites one line on w,
// when w is a terminal; else nil.
func progressTo(w io.Writer) func(uint64) {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return func(read uint64) { fmt.Fprintf(w, "\rverify: %d records read", read) }
}

// writeVerify prints a verification report: the counts, then the corrupt
// and the missing records, one a line.
func writeVerify(w io.Writer, rep sdk.VerifyReport, requireSigned bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "threads  %d\n", rep.Threads)
	fmt.Fprintf(&b, "checked  %d\n", rep.Checked)
	fmt.Fprintf(&b, "erased   %d (explained by erasure records)\n", len(rep.Erased))
	fmt.Fprintf(&b, "corrupt  %d\n", len(rep.Corrupt))
	fmt.Fprintf(&b, "missing  %d\n", len(rep.Missing))
	fmt.Fprintf(&b, "signed   %d\n", rep.Signed)
	fmt.Fprintf(&b, "unsigned %d\n", rep.UnsignedCount)
	fmt.Fprintf(&b, "bad sigs %d\n", len(rep.BadSig))
	if l := rep.Loss; l != nil {
		fmt.Fprintf(&b, "loss     clocks %d–%d missing: %s\n", l.From, l.To, l.Reason)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, list := range []struct {
		name     string
		problems []sdk.VerifyProblem
	}{{"corrupt (id or body digest does not verify)", rep.Corrupt}, {"missing (no erasure explains the gap)", rep.Missing}} {
		if len(list.problems) == 0 {
			continue
		}
		fmt.Fprintln(w)
		if err := writeProblems(w, list.name, list.problems); err != nil {
			return err
		}
	}
	for _, list := range []struct {
		name     string
		problems []sdk.SigProblem
	}{{"bad signatures (do not verify, or not by the actor's key)", rep.BadSig}, {"unsigned", rep.Unsigned}} {
		if len(list.problems) == 0 {
			continue
		}
		fmt.Fprintln(w)
		if err := writeSigProblems(w, list.name, list.problems); err != nil {
			return err
		}
	}
	if rep.OKSigned(requireSigned) {
		_, err := fmt.Fprintln(w, "ok")
		return err
	}
	return nil
}

func writeSigProblems(w io.Writer, what string, ps []sdk.SigProblem) error {
	fmt.Fprintf(w, "%s:\n", what)
	tw := newTable(w)
	fmt.Fprintln(tw, "CLOCK\tID\tACTOR\tKEY\tREASON")
	for _, p := range ps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", p.Clock, idOrDash(p.ID), orDash(p.Actor), orDash(p.Key), cell(p.Reason, 200))
	}
	return tw.Flush()
}

func writeProblems(w io.Writer, what string, ps []sdk.VerifyProblem) error {
	fmt.Fprintf(w, "%s:\n", what)
	tw := newTable(w)
	fmt.Fprintln(tw, "CLOCK\tSUBJECT\tID\tREASON")
	for _, p := range ps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.Clock, orDash(cell(p.Subject, 120)), idOrDash(p.ID), cell(p.Reason, 200))
	}
	return tw.Flush()
}

func idOrDash(id records.ID) string {
	if id.IsZero() {
		return "-"
	}
	return id.String()
}

func newRecordCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "record",
		Short: "Look up records by id",
		RunE:  groupRunE,
	}
	cmd.AddCommand(newRecordShowCommand(a))
	return cmd
}

func newRecordShowCommand(a *app) *cobra.Command {
	var thread string
	var raw bool
	cmd := &cobra.Command{
		Use:   "show ID [--thread THREAD]",
		Short: "Show one record and whether it verifies",
		Long: `Show one record, found by id, in full, and whether it verifies: "verified
ok", or why not. Every message of the record's thread that claims the id
is checked, so a forged copy beside the original is reported.

ID may be the end of an id (8 characters or more, as the tables print
it); one that ends several ids is refused, naming them. Without --thread
the whole log is searched, which takes time in proportion to its size.
With --thread, an id that an erasure removed shows who erased it, when
and why.

With --raw it prints the record's stored bytes instead, the canonical CBOR
envelope {"b": body, "h": header, "s": salt} from which anyone can
recompute its id and body digest (GET /v1/records/{id} with Accept:
application/cbor answers the same bytes); only a record that verifies.

Exits 0 for a record that verifies or was erased, 2 when no record has the
id, 4 when a message claiming it does not verify (printed as stored).`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, "record show", func(ctx context.Context, c *sdk.Client) error {
				id, err := c.RecordID(ctx, thread, args[0])
				if err != nil {
					return fmt.Errorf("record show: %w", err)
				}
				r, err := c.Record(ctx, id, thread)
				var ee *sdk.ErasedError
				switch {
				case errors.As(err, &ee):
					return a.writeShown(cmd, r, nil, &ee.Tombstone)
				case errors.Is(err, records.ErrCorrupt):
					if werr := a.writeShown(cmd, r, err, nil); werr != nil {
						return fmt.Errorf("record show: %w", werr)
					}
					return fmt.Errorf("record show: %w", err)
				case errors.Is(err, sdk.ErrNotFound) && thread == "":
					return fmt.Errorf("record show: %w (with --thread, an erased record shows who erased it)", err)
				case err != nil:
					return fmt.Errorf("record show: %w", err)
				}
				if raw {
					data, err := r.Record.Marshal()
					if err != nil {
						return fmt.Errorf("record show: %w", err)
					}
					_, err = cmd.OutOrStdout().Write(data)
					return err
				}
				return a.writeShown(cmd, r, nil, nil)
			})
		}),
	}
	cmd.Flags().StringVar(&thread, "thread", "", "thread of the record (faster; shows erased records)")
	cmd.Flags().BoolVar(&raw, "raw", false, "print the record's stored bytes (canonical CBOR) instead")
	return cmd
}

// writeShown prints a record for "record show": verified, corrupt (the
// error), or erased (the tombstone).
func (a *app) writeShown(cmd *cobra.Command, r sdk.Record, corrupt error, ts *sdk.Tombstone) error {
	if a.json {
		j, err := newShownJSON(r, corrupt, ts)
		if err != nil {
			return err
		}
		return writeJSON(cmd.OutOrStdout(), j)
	}
	return writeShown(cmd.OutOrStdout(), r, corrupt, ts)
}
