package lazyfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// mount mounts a lazyfs for a test, or skips it saying why it cannot.
func mount(t *testing.T) (*FS, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a FUSE file system; run the test as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3: apt-get install fuse3")
	}
	mnt, backing := t.TempDir(), t.TempDir()
	l, err := Mount(mnt, backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.CutPower() })
	return l, mnt, backing
}

// TestCutPower: what was fsynced survives a cut, what was written after
// the last fsync does not, truncation included.
func TestCutPower(t *testing.T) {
	l, mnt, backing := mount(t)
	path := filepath.Join(mnt, "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	synced := bytes.Repeat([]byte("durable."), 1000) // spans pages
	if _, err := f.Write(synced); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("LOST"), 10); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || len(got) != len(synced)+4 || string(got[10:14]) != "LOST" {
		t.Fatalf("before the cut: read %d bytes (%v), want %d with the unsynced writes", len(got), err, len(synced)+4)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(len(synced)+4) {
		t.Fatalf("before the cut: stat %v %v", fi, err)
	}
	// Never synced: empty after the cut.
	if err := os.WriteFile(filepath.Join(mnt, "g"), []byte("never synced"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := l.CutPower(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(backing, "f")); !bytes.Equal(got, synced) {
		t.Fatalf("after the cut: backing holds %d bytes, want the %d synced", len(got), len(synced))
	}

	l, err = Mount(mnt, backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.CutPower() })
	if got, _ := os.ReadFile(path); !bytes.Equal(got, synced) {
		t.Fatalf("remounted: %d bytes, want the %d synced", len(got), len(synced))
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "g")); err != nil || len(got) != 0 {
		t.Fatalf("remounted: unsynced file holds %q (%v), want empty", got, err)
	}
	// A truncation is lost unless synced too.
	if err := os.Truncate(path, 3); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "dur" {
		t.Fatalf("truncated: %q", got)
	}
	if err := l.CutPower(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(backing, "f")); !bytes.Equal(got, synced) {
		t.Fatalf("unsynced truncation survived the cut: %d bytes", len(got))
	}
}
