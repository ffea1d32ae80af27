package natsio

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrDirInUse reports a data directory that another process serves.
var ErrDirInUse = errors.New("spl/log: data directory in use")

// DirLock is a process's hold on a data directory: exactly one process
// serves a directory at a time, the one holding an flock on <dir>/lock.
// It publishes the address of its server in <dir>/server.json for other
// processes to join. The kernel releases the lock when the process dies,
// so a crash never leaves a directory locked.
type DirLock struct {
	dir       string
	f         *os.File
	published bool
}

// addrInfo is the content of server.json.
type addrInfo struct {
	URL string `json:"url"`
	PID int    `json:"pid"`
}

// LockDir takes dir's lock without waiting. When another process holds it,
// the error wraps ErrDirInUse and names that process when it can.
func LockDir(dir string) (*DirLock, error) {
	if err := OpenDir(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if info, err := readAddr(dir); err == nil && info.PID > 0 {
				who = fmt.Sprintf("process %d (serving %s)", info.PID, info.URL)
			}
			return nil, fmt.Errorf("%w: %s is served by %s", ErrDirInUse, dir, who)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	// We hold the lock: an address left behind is stale.
	_ = os.Remove(filepath.Join(dir, addrFile))
	return &DirLock{dir: dir, f: f}, nil
}

// Publish writes the client address (host:port) of the directory's server
// where other processes of the directory look for it.
func (d *DirLock) Publish(addr string) error {
	if err := WriteJSONFile(filepath.Join(d.dir, addrFile), addrInfo{URL: addr, PID: os.Getpid()}); err != nil {
		return err
	}
	d.published = true
	return nil
}

// Withdraw removes the published address, so that no new process joins.
func (d *DirLock) Withdraw() {
	if d != nil && d.published {
		_ = os.Remove(filepath.Join(d.dir, addrFile))
		d.published = false
	}
}

// Release withdraws the address and releases the lock.
func (d *DirLock) Release() {
	if d == nil || d.f == nil {
		return
	}
	d.Withdraw()
	_ = syscall.Flock(int(d.f.Fd()), syscall.LOCK_UN)
	d.f.Close()
	d.f = nil
}

func readAddr(dir string) (addrInfo, error) {
	var info addrInfo
	b, err := os.ReadFile(filepath.Join(dir, addrFile))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, err
	}
	return info, nil
}
