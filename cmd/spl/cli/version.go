package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// build is what the binary knows of how it was built.
type build struct {
	version, commit string
	dirty           bool
	time            time.Time // the commit's time; zero when unknown
}

// thisBuild reads the build information of the running binary: the
// module version ("(devel)" for a build from a checkout) and the VCS
// stamp ("unknown" commit with -buildvcs=false).
func thisBuild() build {
	b := build{version: "(devel)", commit: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if bi.Main.Version != "" {
		b.version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.commit = s.Value
		case "vcs.modified":
			b.dirty = s.Value == "true"
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				b.time = t
			}
		}
	}
	return b
}

// versionText is what spl version and spl --version print: the module
// version, the commit and whether the tree had changes, and the Go that
// built it.
func versionText() string {
	b := thisBuild()
	commit := b.commit
	if b.dirty {
		commit += " (modified)"
	}
	return fmt.Sprintf("spl %s\ncommit %s\n%s %s/%s\n", b.version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print spl's version, commit and the Go that built it",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		}),
	}
}
