package cli

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func newManCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "man --dir DIR",
		Short: "Write spl's man pages, one a command, into a directory",
		Long: `Write the man pages of spl and of every command (section 1: spl.1,
spl-session.1, spl-session-save.1, ...) into DIR, made from the same text
as --help. DIR is created if missing; pages there are overwritten.

The pages' date is the build's commit time, or $SOURCE_DATE_EPOCH when set
(reproducible builds); read one with "man -l DIR/spl.1", or put DIR on
MANPATH.`,
		Example: `  spl man --dir ~/.local/share/man/man1 && man spl-session-save`,
		Args:    cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usagef("man: --dir is required")
			}
			b := thisBuild()
			date, err := manDate(b)
			if err != nil {
				return usagef("man: %v", err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("man: %w", err)
			}
			hdr := &doc.GenManHeader{Title: "SPL", Section: "1", Date: &date, Source: "spl " + b.version, Manual: "spl manual"}
			if err := doc.GenManTree(cmd.Root(), hdr, dir); err != nil {
				return fmt.Errorf("man: %w", err)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the pages to (required)")
	return cmd
}

// manDate is the date the man pages carry: $SOURCE_DATE_EPOCH when set,
// else the commit time of b, else now.
func manDate(b build) (time.Time, error) {
	if s, ok := os.LookupEnv("SOURCE_DATE_EPOCH"); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: must be seconds since 1970 (an integer)", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	if !b.time.IsZero() {
		return b.time.UTC(), nil
	}
	return time.Now().UTC(), nil
}
