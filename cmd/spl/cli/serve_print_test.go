package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair (Linux): the terminal side, as a
// user's terminal is, and the side that reads what is written to it.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		t.Skipf("unlock the pseudo-terminal: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		t.Skipf("pseudo-terminal number: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return s, m
}

// The secrets spl serve created are shown once on a terminal, with how
// to use them, and never written where output is kept (a file, a pipe).
func TestPrintCreated(t *testing.T) {
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "token"), filepath.Join(dir, "read-token")}
	for i, p := range paths {
		if err := os.WriteFile(p, []byte(fmt.Sprintf("secret-%d-0123456789abcdef\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	term, reader := openPTY(t)
	printCreated(term, paths)
	got := make(chan string)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 4096)
		for !strings.Contains(b.String(), "SPL_TOKEN_FILE") {
			n, err := reader.Read(buf)
			if err != nil {
				break
			}
			b.Write(buf[:n])
		}
		got <- b.String()
	}()
	select {
	case out := <-got:
		for i, p := range paths {
			if !strings.Contains(out, fmt.Sprintf("secret-%d-0123456789abcdef", i)) || !strings.Contains(out, p) {
				t.Errorf("terminal output lacks secret %d or its path:\n%s", i, out)
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing shown on the terminal")
	}

	f, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	printCreated(f, paths)
	f.Close()
	if b, _ := os.ReadFile(f.Name()); len(b) != 0 {
		t.Errorf("written to a file: %q", b)
	}
	var buf bytes.Buffer
	printCreated(&buf, paths)
	if buf.Len() != 0 {
		t.Errorf("written to a buffer: %q", buf.String())
	}
}
