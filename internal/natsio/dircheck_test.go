package natsio

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckDir(t *testing.T) {
	base := t.TempDir()
	for _, c := range []struct {
		name string
		mode os.FileMode
		want string // "" when accepted
	}{
		{"private", 0o700, ""},
		{"readable", 0o755, ""},
		{"group writable", 0o770, "chmod 700"},
		{"world writable", 0o777, "chmod 700"},
	} {
		dir := filepath.Join(base, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, c.mode); err != nil {
			t.Fatal(err)
		}
		err := OpenDir(dir)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), c.want+" "+dir)):
			t.Errorf("%s: err=%v, want ErrUnsafeDir saying %q", c.name, err, c.want+" "+dir)
		}
	}
	// Below a directory others can write without the sticky bit.
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := OpenDir(filepath.Join(open, "spl")); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "chmod o-w "+open) {
		t.Errorf("below a 0777 directory: err=%v, want ErrUnsafeDir", err)
	}
	// The sticky bit (as on /tmp) makes it safe.
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := OpenDir(filepath.Join(open, "spl")); err != nil {
		t.Errorf("below a sticky 1777 directory: %v, want accepted", err)
	}
	// A new directory is made 0700.
	fi, err := os.Stat(filepath.Join(open, "spl"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("new data directory: %v %v, want 0700", fi.Mode(), err)
	}
}

func TestEmbeddedRefusesUnsafeDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spl")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := newEmbedded(dir, 0, ""); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("newEmbedded on a 0777 directory: %v, want ErrUnsafeDir", err)
	}
	if _, err := LockDir(dir); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("LockDir on a 0777 directory: %v, want ErrUnsafeDir", err)
	}
	if _, err := os.Stat(filepath.Join(dir, tokenFile)); err == nil {
		t.Errorf("a token was written into the refused directory")
	}
}
