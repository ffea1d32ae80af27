package main

import (
	"bufio"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// Machine describes where a run ran.
type Machine struct {
	CPU        string
	Cores      int
	MemGiB     float64
	Kernel     string
	Go         string
	Disk       string // file system and device of the stores
	Load       string // load averages at the start
	NATSServer string
	SQLite     string
	Postgres   string
	Commit     string
}

// describeMachine reads the machine's description from /proc and the
// tools.
func describeMachine(workDir string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), NATSServer: server.VERSION}
	m.CPU = firstField("/proc/cpuinfo", "model name")
	if kb := procNumber("/proc/meminfo", "MemTotal:"); kb > 0 {
		m.MemGiB = float64(kb) / (1 << 20)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	if workDir == "" {
		workDir = os.TempDir()
	}
	m.Disk = mountOf(workDir)
	if db, err := sql.Open("sqlite3", ":memory:"); err == nil {
		_ = db.QueryRow("select sqlite_version()").Scan(&m.SQLite)
		db.Close()
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}

func firstField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// mountOf names the file system holding dir: "ext4 (/dev/vda on /)".
func mountOf(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	best, desc := "", "unknown"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			continue
		}
		mp := fs[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, desc = mp, fmt.Sprintf("%s (%s on %s)", fs[2], fs[0], mp)
		}
	}
	return desc
}
