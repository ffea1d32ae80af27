package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// spl man writes one page a command, with the command's flags and text,
// dated as asked, and pages groff reads (as man does, through preconv:
// the help text has UTF-8 in it) without a warning.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	t.Setenv("SOURCE_DATE_EPOCH", "1764547200") // 2025-12-01
	mustSPL(t, t.TempDir(), "", "man", "--dir", dir)

	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCommand(&app{}))
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pages:\n%v\nwant one a command:\n%v", got, want)
	}
	for _, p := range []string{"spl-session-save.1", "spl-run-signal.1", "spl-man.1"} {
		if !slices.Contains(got, p) {
			t.Fatalf("no page %s among %v", p, got)
		}
	}
	save, err := os.ReadFile(filepath.Join(dir, "spl-session-save.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`.TH "SPL" "1" "Dec 2025"`, "spl-session-save - Save a checkpoint", `\fB--learnings\fP`, `\fB--thread\fP`, `\fB--home\fP`, "spl-session(1)"} {
		if !bytes.Contains(save, []byte(s)) {
			t.Fatalf("spl-session-save.1 lacks %q:\n%s", s, save)
		}
	}

	if r := spl(t, t.TempDir(), "", "man"); r.code != ExitUsage || !strings.Contains(r.stderr, "--dir is required") {
		t.Fatalf("spl man without --dir: exit %d %q", r.code, r.stderr)
	}

	if groff, err := exec.LookPath("groff"); err != nil {
		t.Log("no groff here: the pages were not rendered")
	} else {
		for _, p := range got {
			cmd := exec.Command(groff, "-k", "-man", "-Tutf8", "-ww", "-z", filepath.Join(dir, p))
			if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("groff %s: %v\n%s", p, err, out)
			}
		}
	}

	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if r := spl(t, t.TempDir(), "", "man", "--dir", t.TempDir()); r.code != ExitUsage || !strings.Contains(r.stderr, "SOURCE_DATE_EPOCH") {
		t.Fatalf("spl man with a bad SOURCE_DATE_EPOCH: exit %d %q", r.code, r.stderr)
	}
}
