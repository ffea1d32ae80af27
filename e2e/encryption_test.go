package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// withKey is h with SPL_ENCRYPTION_KEY_FILE set to file ("": unset).
func (h *home) withKey(file string) *home {
	env := slices.DeleteFunc(slices.Clone(h.env), func(kv string) bool {
		return strings.HasPrefix(kv, "SPL_ENCRYPTION_KEY_FILE=")
	})
	if file != "" {
		env = append(env, "SPL_ENCRYPTION_KEY_FILE="+file)
	}
	return &home{dir: h.dir, env: env}
}

// writeSecrets saves checkpoints and emits a record whose bodies hold
// secret, on a thread whose name holds it too, and lists the threads so
// that the read models store them.
func (h *home) writeSecrets(t *testing.T, secret string) {
	t.Helper()
	thread := "vault/" + secret
	h.save(t, thread, "the secret is "+secret)
	h.mustRun(t, nil, "emit", "--thread", thread, "--act", "DO", "--kind", "agent.step", "--body", `{"note":"`+secret+`"}`, "--actor", seedActor)
	h.save(t, thread, "still "+secret)
	if r := h.mustRun(t, nil, "thread", "list"); !strings.Contains(r.stdout, secret) {
		t.Fatalf("thread list:\n%s", r.stdout)
	}
}

// TestEncryptionAtRest runs the built spl as a user would: spl key new,
// SPL_ENCRYPTION_KEY_FILE for every command; no file of the data
// directory holds a body or thread name in the clear once the processes
// exit (and without a key the same scan finds them); the wrong key and
// no key fail at open, exit 3, naming the variable, and leave the log as
// it was; a new key is an export (plaintext, as documented) imported into
// a new directory.
func TestEncryptionAtRest(t *testing.T) {
	const secret = "E2E-SECRET-5d02c7"
	keys := t.TempDir()
	key, other := filepath.Join(keys, "store.key"), filepath.Join(keys, "other.key")

	plain := newHome(t)
	plain.writeSecrets(t, secret)
	if found := filesHolding(t, plain.dir, secret); len(found) < 2 {
		t.Fatalf("without a key the secret is in %v; the scan finds nothing", found)
	}

	h := newHome(t)
	h.mustRun(t, nil, "key", "new", key)
	h.mustRun(t, nil, "key", "new", other)
	enc := h.withKey(key)
	enc.writeSecrets(t, secret)
	if found := filesHolding(t, h.dir, secret); len(found) > 0 {
		t.Fatalf("encrypted: the secret is in %v", found)
	}
	before := enc.ids(t, "vault/"+secret)

	for _, c := range []struct {
		h    *home
		says []string
	}{
		{h.withKey(other), []string{"wrong encryption key", "SPL_ENCRYPTION_KEY_FILE=" + other}},
		{h.withKey(""), []string{"encryption key required", "set SPL_ENCRYPTION_KEY_FILE"}},
	} {
		r := c.h.run(t, nil, "thread", "list")
		if r.code != 3 {
			t.Fatalf("exit %d, want 3: %s", r.code, r.stderr)
		}
		for _, s := range c.says {
			if !strings.Contains(r.stderr, s) {
				t.Fatalf("stderr does not say %q:\n%s", s, r.stderr)
			}
		}
	}
	if got := enc.ids(t, "vault/"+secret); !slices.Equal(got, before) {
		t.Fatalf("after the refused opens the thread holds %v, want %v", got, before)
	}
	enc.mustRun(t, nil, "verify", "--all")

	// A new key: export, import into a new directory with it.
	archive := filepath.Join(t.TempDir(), "log.car")
	enc.mustRun(t, nil, "export", "--all", "-o", archive)
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(secret)) {
		t.Fatal("the export holds no body: it was expected in the clear")
	}
	dst := newHome(t).withKey(other)
	dst.mustRun(t, nil, "import", archive)
	dst.mustRun(t, nil, "verify", "--all")
	if got := dst.ids(t, "vault/"+secret); !slices.Equal(got, before) {
		t.Fatalf("imported thread %v, want %v", got, before)
	}
	if found := filesHolding(t, dst.dir, secret); len(found) > 0 {
		t.Fatalf("imported under the new key: the secret is in %v", found)
	}
	if r := dst.withKey(key).run(t, nil, "thread", "list"); r.code != 3 || !strings.Contains(r.stderr, "wrong encryption key") {
		t.Fatalf("the old key on the new directory: exit %d, %s", r.code, r.stderr)
	}
}
