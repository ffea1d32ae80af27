package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// exportJSON is the --json output of spl export.
type exportJSON struct {
	File    string               `json:"file"`
	Root    string               `json:"root"`
	Threads []exportedThreadJSON `json:"threads"`
	Records int                  `json:"records"`
	Erased  int                  `json:"erased"`
	Blocks  int                  `json:"blocks"`
	Bytes   int64                `json:"bytes"`
}

type exportedThreadJSON struct {
	Thread  string     `json:"thread"`
	Records int        `json:"records"`
	Erased  int        `json:"erased"`
	Head    records.ID `json:"head"`
}

// importJSON is the --json output of spl import.
type importJSON struct {
	File     string               `json:"file"`
	Root     string               `json:"root"`
	Threads  []importedThreadJSON `json:"threads"`
	Records  int                  `json:"records"`
	Appended int                  `json:"appended"`
}

type importedThreadJSON struct {
	Thread   string     `json:"thread"`
	Records  int        `json:"records"`
	Present  int        `json:"present"`
	Appended int        `json:"appended"`
	Head     records.ID `json:"head"`
}

func newExportCommand(a *app) *cobra.Command {
	var (
		all bool
		out string
	)
	cmd := &cobra.Command{
		Use:   "export (THREAD... | --all) -o FILE",
		Short: "Write threads to an archive (a CAR file) that spl import reads",
		Long: `Write every record of the threads named (or with --all of every thread)
to FILE, a CARv1 archive: each record's header as a block whose CID is
the record's id, its body and salt as another block, its signature in
the index block that is the archive's root. Any IPLD tool that knows
BLAKE3 can check every block against its CID, hence every header
against its id; spl import checks all of it and appends the records to
another log with the same ids.

A record an erasure removed is exported as its header only: its body is
gone, and stays gone. The erasure records that name it are exported
whole, so the imported thread verifies as this one does.

A thread that does not verify as one chain (a corrupt record, a fork)
is refused, naming it, and nothing is written (see spl verify); a
thread with no record exits 2. FILE is written whole or not at all
("-": standard output, and the summary goes to stderr).`,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			switch {
			case out == "":
				return usagef("export: -o FILE is required")
			case all && len(args) > 0:
				return usagef("export: give threads or --all, not both")
			case !all && len(args) == 0:
				return usagef("export: give the threads to export, or --all for every thread")
			}
			return a.withClient(cmd, "export", func(ctx context.Context, c *sdk.Client) error {
				res, err := exportTo(ctx, c, out, sdk.ExportOptions{Threads: args, All: all}, cmd.OutOrStdout())
				if err != nil {
					return fmt.Errorf("export: %w", err)
				}
				w := cmd.OutOrStdout()
				if out == "-" {
					w = cmd.ErrOrStderr()
				}
				return writeExport(w, a.json, out, res)
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "export every thread of the log")
	cmd.Flags().StringVarP(&out, "output", "o", "", `the archive to write ("-": standard output)`)
	return cmd
}

// exportTo writes the archive to the file named out, through a temporary
// file renamed over it once complete, or to stdout for "-".
func exportTo(ctx context.Context, c *sdk.Client, out string, o sdk.ExportOptions, stdout io.Writer) (sdk.ExportResult, error) {
	if out == "-" {
		return c.Export(ctx, stdout, o)
	}
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return sdk.ExportResult{}, &usageError{fmt.Sprintf("export: -o %s: %v", out, err)}
	}
	tmp := f.Name()
	defer os.Remove(tmp) // once renamed, there is nothing to remove
	res, err := c.Export(ctx, f, o)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, out)
	}
	return res, err
}

func writeExport(w io.Writer, asJSON bool, file string, res sdk.ExportResult) error {
	if asJSON {
		j := exportJSON{File: file, Root: res.Root, Threads: []exportedThreadJSON{}, Records: res.Records,
			Erased: res.Erased, Blocks: res.Blocks, Bytes: res.Bytes}
		for _, t := range res.Threads {
			j.Threads = append(j.Threads, exportedThreadJSON{Thread: t.Thread, Records: t.Records, Erased: t.Erased, Head: t.Head})
		}
		return writeJSON(w, j)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tRECORDS\tERASED\tHEAD")
	for _, t := range res.Threads {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", printable(t.Thread), t.Records, t.Erased, t.Head)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "exported %d records of %d threads (%d erased: header only) to %s: %d blocks, %d bytes\nroot: %s\n",
		res.Records, len(res.Threads), res.Erased, file, res.Blocks, res.Bytes, res.Root)
	return err
}

func newImportCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Append the threads of an archive (spl export) to the log, ids kept",
		Long: `Read an archive written by spl export ("-": standard input), check all
of it, then append each thread's records to the log as they are: the
same header, body, salt and signature, so the same ids and the same
chain. Nothing is written until everything is checked:

- every block against its CID, the index, every header against its id,
  every body against its header's digest, every signature, every
  thread's chain. A malformed, truncated or altered archive exits 4,
  naming the block and its byte offset, or the thread and the record;
- each thread against the log: one the log does not hold is appended
  whole; one whose first records the log holds already gets the rest
  (all of them held: nothing to do, so importing twice is harmless);
  one where the log holds another record at a position than the archive
  would fork: the import is refused, naming the thread, the position,
  the clock and both ids, exit 1.

Records an erasure removed are not in the archive; their erasure records
are, and are appended, so spl verify passes after the import as it did
where the archive was made. Redaction policies are not applied (the
records were sealed where they were written); --require-signed rules of
the log are. A client of spl serve's door cannot import.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			var r io.Reader = a.stdin
			if name != "-" {
				f, err := os.Open(name)
				if err != nil {
					return &usageError{fmt.Sprintf("import: %v", err)}
				}
				defer f.Close()
				r = f
			} else if r == nil {
				return usagef("import -: no standard input")
			}
			return a.withClient(cmd, "import", func(ctx context.Context, c *sdk.Client) error {
				res, err := c.Import(ctx, r)
				if err != nil {
					if res.Appended > 0 {
						fmt.Fprintf(cmd.ErrOrStderr(), "spl: import: %d records appended before the error\n", res.Appended)
					}
					return fmt.Errorf("import: %w", err)
				}
				return writeImport(cmd.OutOrStdout(), a.json, name, res)
			})
		}),
	}
	return cmd
}

func writeImport(w io.Writer, asJSON bool, file string, res sdk.ImportResult) error {
	if asJSON {
		j := importJSON{File: file, Root: res.Root, Threads: []importedThreadJSON{}, Records: res.Records, Appended: res.Appended}
		for _, t := range res.Threads {
			j.Threads = append(j.Threads, importedThreadJSON{Thread: t.Thread, Records: t.Records, Present: t.Present, Appended: t.Appended, Head: t.Head})
		}
		return writeJSON(w, j)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tRECORDS\tPRESENT\tAPPENDED\tHEAD")
	for _, t := range res.Threads {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", printable(t.Thread), t.Records, t.Present, t.Appended, t.Head)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Appended == 0 {
		_, err := fmt.Fprintf(w, "nothing to do: the log holds every record of %s already\n", file)
		return err
	}
	_, err := fmt.Fprintf(w, "imported %d records of %d threads from %s (root %s)\n", res.Appended, len(res.Threads), file, res.Root)
	return err
}
