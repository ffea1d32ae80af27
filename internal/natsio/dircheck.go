package natsio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafeDir reports a data directory that another user could change:
// not owned by the user running spl, or writable by group or others, or
// inside a directory others can write (without the sticky bit). Such a
// directory is refused, as ssh refuses a key file others can write: a
// second user could replace server.json there and make the owner's spl
// send the directory's token to a server of theirs.
var ErrUnsafeDir = errors.New("spl/natsio: unsafe data directory")

// OpenDir creates dir (mode 0700) when missing and checks that no other
// user can change it (CheckDir). Every path that uses a data directory
// (the embedded log, spl serve's lock) comes through here.
func OpenDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	return CheckDir(dir)
}

// CheckDir returns an error wrapping ErrUnsafeDir, saying how to fix it,
// when dir is not owned by the effective user or is writable by group or
// others, or when a directory above it is writable by others without the
// sticky bit, or owned by a user other than root and the effective user.
func CheckDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	me := uint32(os.Geteuid())
	st, err := statDir(abs)
	if err != nil {
		return err
	}
	switch {
	case st.Uid != me:
		return fmt.Errorf("%w: %s is owned by uid %d, not by you (uid %d): another user controls its files; use a directory of your own, or fix it with: chown %d %s && chmod 700 %s",
			ErrUnsafeDir, abs, st.Uid, me, me, abs, abs)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%w: %s is writable by group or others (mode %04o): another user could replace its files; fix it with: chmod 700 %s",
			ErrUnsafeDir, abs, st.Mode&0o7777, abs)
	}
	// The directories above: a user who can rename an ancestor can put a
	// directory of theirs in its place.
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		st, err := statDir(p)
		if err != nil {
			return err
		}
		sticky := st.Mode&syscall.S_ISVTX != 0
		switch {
		case st.Uid != me && st.Uid != 0:
			return fmt.Errorf("%w: %s, above the data directory %s, is owned by uid %d, neither you nor root: that user could replace the data directory; use a data directory elsewhere (--home, SPL_HOME)",
				ErrUnsafeDir, p, abs, st.Uid)
		case st.Mode&0o002 != 0 && !sticky:
			return fmt.Errorf("%w: %s, above the data directory %s, is writable by others without the sticky bit (mode %04o): another user could replace the data directory; fix it with: chmod o-w %s (or chmod +t %s)",
				ErrUnsafeDir, p, abs, st.Mode&0o7777, p, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func statDir(p string) (*syscall.Stat_t, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data directory: %s: %w", p, &fs.PathError{Op: "open", Path: p, Err: syscall.ENOTDIR})
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("data directory: %s: no owner to check", p)
	}
	return st, nil
}
