package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHelpExportImport(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"help_export.golden", []string{"export", "--help"}},
		{"help_import.golden", []string{"import", "--help"}},
	} {
		r := spl(t, t.TempDir(), "", tc.args...)
		if r.code != ExitOK || r.stderr != "" {
			t.Fatalf("spl %v: exit %d, stderr %q", tc.args, r.code, r.stderr)
		}
		golden(t, tc.golden, r.stdout)
	}
}

func TestExportImportRefusals(t *testing.T) {
	home := t.TempDir()
	mustSPL(t, home, "", "emit", "--thread", "th_x", "--act", "DO", "--kind", "agent.step", "--body", `{"n":1}`, "--actor", "did:sync:agent:dev")
	file := filepath.Join(t.TempDir(), "x.car")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", "th_x"}, ExitUsage, "-o FILE is required"},
		{[]string{"export", "-o", file}, ExitUsage, "give the threads"},
		{[]string{"export", "th_x", "--all", "-o", file}, ExitUsage, "not both"},
		{[]string{"export", "th_none", "-o", file}, ExitNotFound, "no record"},
		{[]string{"export", "th\x01", "-o", file}, ExitUsage, "thread"},
		{[]string{"import"}, ExitUsage, "accepts 1 arg"},
		{[]string{"import", filepath.Join(t.TempDir(), "missing.car")}, ExitUsage, "no such file"},
	} {
		r := spl(t, home, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("spl %q: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a refused export left %s: %v", file, err)
	}
	// Not an archive: exit 4, saying where.
	junk := filepath.Join(t.TempDir(), "junk.car")
	if err := os.WriteFile(junk, []byte("not a car file at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := spl(t, home, "", "import", junk); r.code != ExitCorrupt || !strings.Contains(r.stderr, "archive header at byte 0") {
		t.Errorf("import of junk: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestExportImportJSON(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	mustSPL(t, src, "", "emit", "--thread", "th_j", "--act", "DO", "--kind", "agent.step", "--body", `{"n":1}`, "--actor", "did:sync:agent:dev")
	mustSPL(t, src, "", "emit", "--thread", "th_j", "--act", "DO", "--kind", "agent.step", "--body", `{"n":2}`, "--actor", "did:sync:agent:dev")
	file := filepath.Join(t.TempDir(), "j.car")
	ex := decodeJSON[exportJSON](t, mustSPL(t, src, "", "export", "th_j", "-o", file, "--json").stdout)
	if ex.Records != 2 || len(ex.Threads) != 1 || ex.Threads[0].Thread != "th_j" || !strings.HasPrefix(ex.Root, "b") || ex.File != file {
		t.Fatalf("export --json: %+v", ex)
	}
	im := decodeJSON[importJSON](t, mustSPL(t, dst, "", "import", file, "--json").stdout)
	if im.Appended != 2 || im.Root != ex.Root || im.Threads[0].Head != ex.Threads[0].Head {
		t.Fatalf("import --json: %+v", im)
	}
	if r := mustSPL(t, dst, "", "import", file); !strings.Contains(r.stdout, "nothing to do") {
		t.Fatalf("second import said:\n%s", r.stdout)
	}
	mustSPL(t, dst, "", "verify", "th_j")
}
