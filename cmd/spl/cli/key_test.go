package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyNew: spl key new writes 32 random bytes, mode 0600, never over a
// file, never inside the data directory.
func TestKeyNew(t *testing.T) {
	home := filepath.Join(t.TempDir(), "spl")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "store.key")
	r := mustSPL(t, home, "", "key", "new", file)
	if !strings.Contains(r.stdout, "SPL_ENCRYPTION_KEY_FILE="+file) {
		t.Fatalf("output does not say how to use the key:\n%s", r.stdout)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 32 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file of %d bytes, mode %v; want 32, 0600", fi.Size(), fi.Mode().Perm())
	}
	was, _ := os.ReadFile(file)

	r = spl(t, home, "", "key", "new", file)
	if r.code != ExitStorage || !strings.Contains(r.stderr, "never replaced") {
		t.Fatalf("key new over a file: exit %d, %s", r.code, r.stderr)
	}
	if now, _ := os.ReadFile(file); string(now) != string(was) {
		t.Fatal("the key was replaced")
	}

	inside := filepath.Join(home, "store.key")
	r = spl(t, home, "", "key", "new", inside)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "inside") {
		t.Fatalf("key new inside the data directory: exit %d, %s", r.code, r.stderr)
	}
	if _, err := os.Stat(inside); err == nil {
		t.Fatal("a key was written inside the data directory")
	}

	r = mustSPL(t, home, "", "--json", "key", "new", file+"2")
	if got := decodeJSON[keyNewJSON](t, r.stdout); got.KeyFile != file+"2" {
		t.Fatalf("--json: %+v", got)
	}
}

// TestEncryptedCLI: with SPL_ENCRYPTION_KEY_FILE every command opens the
// encrypted store; another key, or none, fails at open (exit 3) naming
// the variable and the file, and the records are there with the key.
func TestEncryptedCLI(t *testing.T) {
	home := t.TempDir()
	keys := t.TempDir()
	right, wrong := filepath.Join(keys, "right"), filepath.Join(keys, "wrong")
	mustSPL(t, home, "", "key", "new", right)
	mustSPL(t, home, "", "key", "new", wrong)

	t.Setenv("SPL_ENCRYPTION_KEY_FILE", right)
	mustSPL(t, home, "", "emit", "--thread", "t", "--act", "DO", "--kind", "agent.step", "--body", `{"n":1}`, "--actor", "did:sync:agent:test")

	t.Setenv("SPL_ENCRYPTION_KEY_FILE", wrong)
	r := spl(t, home, "", "thread", "tail", "t")
	if r.code != ExitStorage || !strings.Contains(r.stderr, "wrong encryption key") || !strings.Contains(r.stderr, "SPL_ENCRYPTION_KEY_FILE="+wrong) {
		t.Fatalf("wrong key: exit %d, %s", r.code, r.stderr)
	}
	t.Setenv("SPL_ENCRYPTION_KEY_FILE", "")
	r = spl(t, home, "", "thread", "tail", "t")
	if r.code != ExitStorage || !strings.Contains(r.stderr, "encryption key required") || !strings.Contains(r.stderr, "set SPL_ENCRYPTION_KEY_FILE") {
		t.Fatalf("no key: exit %d, %s", r.code, r.stderr)
	}
	short := filepath.Join(keys, "short")
	if err := os.WriteFile(short, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPL_ENCRYPTION_KEY_FILE", short)
	r = spl(t, home, "", "thread", "tail", "t")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "SPL_ENCRYPTION_KEY_FILE="+short) || !strings.Contains(r.stderr, "holds 9 bytes") {
		t.Fatalf("a key file that is not one: exit %d, %s", r.code, r.stderr)
	}
	t.Setenv("SPL_ENCRYPTION_KEY_FILE", right)
	if r := mustSPL(t, home, "", "thread", "tail", "t"); !strings.Contains(r.stdout, "agent.step") {
		t.Fatalf("thread tail with the key:\n%s", r.stdout)
	}
}
