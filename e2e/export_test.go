package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// exportOut is the --json output of spl export.
type exportOut struct {
	Root    string `json:"root"`
	Records int    `json:"records"`
	Erased  int    `json:"erased"`
	Threads []struct {
		Thread  string `json:"thread"`
		Records int    `json:"records"`
		Erased  int    `json:"erased"`
		Head    string `json:"head"`
	} `json:"threads"`
}

// importOut is the --json output of spl import.
type importOut struct {
	Root     string `json:"root"`
	Records  int    `json:"records"`
	Appended int    `json:"appended"`
	Threads  []struct {
		Thread   string `json:"thread"`
		Present  int    `json:"present"`
		Appended int    `json:"appended"`
	} `json:"threads"`
}

// ids lists the ids of a thread's records as thread tail returns them.
func (h *home) ids(t *testing.T, thread string) []string {
	t.Helper()
	var out []string
	for _, r := range decode[[]record](t, h.mustRun(t, nil, "thread", "tail", thread, "-n", "1000", "--json").stdout) {
		out = append(out, r.ID)
	}
	return out
}

// TestExportImport is the round trip of an archive between two data
// directories: saves and emits on two threads, one checkpoint erased,
// exported, imported into a fresh directory that then verifies, with the
// same records and ids, without the erased body anywhere in the archive;
// a second import does nothing, and one that would fork a thread is
// refused with nothing written.
func TestExportImport(t *testing.T) {
	src, dst := newHome(t), newHome(t)
	marker := "EXPORT-ERASED-SECRET-4b1f"
	src.save(t, "th_exp_a", "first")
	secret := src.save(t, "th_exp_a", "the secret is "+marker)
	src.save(t, "th_exp_a", "third")
	src.mustRun(t, nil, "emit", "--thread", "th_exp_b", "--act", "DO", "--kind", "agent.step", "--body", `{"n":1}`, "--actor", seedActor)
	src.save(t, "th_exp_b", "a checkpoint on b")
	src.mustRun(t, nil, "erase", secret.ID, "--thread", "th_exp_a", "--reason", "secret", "--actor", seedActor)

	file := filepath.Join(t.TempDir(), "log.car")
	ex := decode[exportOut](t, src.mustRun(t, nil, "export", "--all", "-o", file, "--json").stdout)
	if ex.Records != 6 || ex.Erased != 1 || len(ex.Threads) != 2 {
		t.Fatalf("export: %+v", ex)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(marker)) {
		t.Fatal("the erased body is in the archive")
	}
	if bytes.Contains(data, []byte("the secret is")) {
		t.Fatal("the erased body's text is in the archive")
	}

	im := decode[importOut](t, dst.mustRun(t, nil, "import", file, "--json").stdout)
	if im.Root != ex.Root || im.Records != 6 || im.Appended != 5 {
		t.Fatalf("import: %+v (export root %s)", im, ex.Root)
	}
	if r := dst.run(t, nil, "verify", "--all"); r.code != 0 {
		t.Fatalf("verify --all after import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, th := range []string{"th_exp_a", "th_exp_b"} {
		if a, b := src.ids(t, th), dst.ids(t, th); !slices.Equal(a, b) || len(a) == 0 {
			t.Fatalf("%s: ids differ:\nsource %v\nimport %v", th, a, b)
		}
	}
	if r := dst.run(t, nil, "record", "show", secret.ID, "--thread", "th_exp_a"); !strings.Contains(r.stdout+r.stderr, "erased") {
		t.Fatalf("the erased record in the import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Again: nothing to do.
	again := decode[importOut](t, dst.mustRun(t, nil, "import", file, "--json").stdout)
	if again.Appended != 0 {
		t.Fatalf("second import appended %d", again.Appended)
	}

	// A prefix-extension: the source moves on, the import appends the rest.
	more := src.save(t, "th_exp_b", "after the export")
	file2 := filepath.Join(t.TempDir(), "more.car")
	src.mustRun(t, nil, "export", "th_exp_b", "-o", file2)
	ext := decode[importOut](t, dst.mustRun(t, nil, "import", file2, "--json").stdout)
	if ext.Appended != 1 || ext.Threads[0].Present != 2 {
		t.Fatalf("extension import: %+v", ext)
	}
	if ids := dst.ids(t, "th_exp_b"); ids[len(ids)-1] != more.ID {
		t.Fatalf("th_exp_b ends with %v, want %s", ids, more.ID)
	}

	// A fork: the target gets its own record on th_exp_a; the source
	// another one. Importing the source's is refused, naming both ids,
	// and nothing of the archive (not even its other thread) is written.
	theirs := dst.save(t, "th_exp_a", "written in the target")
	ours := src.save(t, "th_exp_a", "written in the source")
	src.save(t, "th_exp_c", "a new thread")
	file3 := filepath.Join(t.TempDir(), "fork.car")
	src.mustRun(t, nil, "export", "--all", "-o", file3)
	before := dst.ids(t, "th_exp_a")
	r := dst.run(t, nil, "import", file3)
	if r.code != 1 || !strings.Contains(r.stderr, "th_exp_a") || !strings.Contains(r.stderr, theirs.ID) || !strings.Contains(r.stderr, ours.ID) || !strings.Contains(r.stderr, "nothing written") {
		t.Fatalf("diverging import: exit %d\n%s", r.code, r.stderr)
	}
	if after := dst.ids(t, "th_exp_a"); !slices.Equal(before, after) {
		t.Fatalf("th_exp_a changed by a refused import")
	}
	if r := dst.run(t, nil, "thread", "tail", "th_exp_c"); r.code == 0 && strings.Contains(r.stdout, "a new thread") {
		t.Fatal("a refused import wrote another thread")
	}

	// A damaged archive: refused with exit 4, naming the block and offset.
	bad := filepath.Join(t.TempDir(), "bad.car")
	data[len(data)-3] ^= 0xff
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := newHome(t).run(t, nil, "import", bad); r.code != 4 || !strings.Contains(r.stderr, "block") || !strings.Contains(r.stderr, "at byte") {
		t.Fatalf("damaged import: exit %d\n%s", r.code, r.stderr)
	}
}
