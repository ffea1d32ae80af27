package storekey

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "store.key")
	if err := Create(file); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Size(), int64(Size); got != want {
		t.Fatalf("size=%v, want %v", got, want)
	}
	if got, want := fi.Mode().Perm(), os.FileMode(0o600); got != want {
		t.Fatalf("mode=%v, want %v", got, want)
	}
	k, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(k.ServerKey()), 2*Size; got != want {
		t.Fatalf("server key of %d characters, want %d", got, want)
	}
	if !k.Opens(k.Check()) {
		t.Fatal("a key does not open its own check")
	}
	if strings.Contains(k.Check(), k.ServerKey()) || k.String() != file {
		t.Fatalf("check %q or name %q shows the key", k.Check(), k.String())
	}
	// A second key is another key.
	other := filepath.Join(t.TempDir(), "other.key")
	if err := Create(other); err != nil {
		t.Fatal(err)
	}
	k2, err := Load(other)
	if err != nil {
		t.Fatal(err)
	}
	if k2.Opens(k.Check()) || k2.ServerKey() == k.ServerKey() {
		t.Fatal("two new keys are the same key")
	}
}

func TestCreateNeverReplaces(t *testing.T) {
	file := filepath.Join(t.TempDir(), "store.key")
	if err := os.WriteFile(file, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Create(file)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over a file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "precious" {
		t.Fatalf("the file was changed: %q", b)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		data []byte
		mode os.FileMode
		says string
	}{
		{"short", make31(), 0o600, "holds 31 bytes"},
		{"hex text", []byte(strings.Repeat("ab", Size) + "\n"), 0o600, "holds 65 bytes"},
		{"zeros", make([]byte, Size), 0o600, "only zero bytes"},
		{"readable", []byte(strings.Repeat("k", Size)), 0o644, "chmod 600"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(file, c.data, c.mode); err != nil {
				t.Fatal(err)
			}
			_, err := Load(file)
			if !errors.Is(err, ErrKeyFile) {
				t.Fatalf("Load: %v, want ErrKeyFile", err)
			}
			if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Load: %q names not the file or %q", err, c.says)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, ErrKeyFile) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v", err)
	}
}

func make31() []byte {
	b := make([]byte, Size-1)
	for i := range b {
		b[i] = byte(i + 1)
	}
	return b
}

func TestInside(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.MkdirAll(filepath.Join(data, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		in   bool
	}{
		{filepath.Join(data, "k"), true},
		{filepath.Join(data, "sub", "k"), true},
		{filepath.Join(link, "k"), true}, // through a link
		{filepath.Join(root, "k"), false},
		{filepath.Join(root, "data-keys", "k"), false}, // a sibling with the same prefix
	} {
		if err := os.MkdirAll(filepath.Dir(c.file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := Create(c.file); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
		k, err := Load(c.file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.Inside(data)
		if err != nil || got != c.in {
			t.Errorf("Inside(%s)=%v, %v, want %v", c.file, got, err, c.in)
		}
	}
	// A file not made yet.
	if in, err := Inside(filepath.Join(link, "sub", "new.key"), data); err != nil || !in {
		t.Errorf("Inside of a new file through a link=%v, %v, want true", in, err)
	}
}
