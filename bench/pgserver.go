package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGServer is a PostgreSQL server the harness runs: initdb into a
// temporary directory, started on a free loopback port with fsync and
// synchronous_commit on, as the `postgres` OS user when the harness runs
// as root (PostgreSQL refuses to run as root), stopped at the end.
type PGServer struct {
	Bin     string // directory holding initdb and postgres
	Dir     string // temporary directory: data/ and server.log
	Port    int
	RunAs   string // OS user the server runs as; "" for this process's user
	Version string // `postgres --version`
}

// pgSettings are the server's settings beyond initdb's defaults: the
// durability the comparison needs, stated explicitly, and room for the
// writers' connections.
var pgSettings = []string{
	"listen_addresses=127.0.0.1",
	"unix_socket_directories=",
	"fsync=on",
	"synchronous_commit=on",
	"full_page_writes=on",
	"max_connections=200",
}

// findPostgres finds PostgreSQL's server binaries: on PATH, else under
// /usr/lib/postgresql/*/bin (version 15 first, then the newest). When none
// is found and install is set and this process is root, it installs
// Debian's postgresql-15 with apt-get first.
func findPostgres(ctx context.Context, install bool, logf func(string, ...any)) (string, error) {
	if bin, ok := lookPostgres(); ok {
		return bin, nil
	}
	if !install {
		return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found on PATH or under /usr/lib/postgresql/*/bin; install postgresql-15 or pass -install-postgres as root")
	}
	if os.Geteuid() != 0 {
		return "", errors.New("PostgreSQL server binaries not found, and installing them needs root (apt-get install postgresql-15)")
	}
	logf("PostgreSQL not found: apt-get install -y postgresql-15")
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, tail(out))
		}
		return nil
	}
	if err := apt("install", "-y", "--no-install-recommends", "postgresql-15"); err != nil {
		logf("%v; apt-get update and retry", err)
		if err := apt("update"); err != nil {
			return "", err
		}
		if err := apt("install", "-y", "--no-install-recommends", "postgresql-15"); err != nil {
			return "", err
		}
	}
	if bin, ok := lookPostgres(); ok {
		return bin, nil
	}
	return "", errors.New("postgresql-15 installed but its binaries were not found")
}

func lookPostgres() (string, bool) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, true
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		if (vi == 15) != (vj == 15) {
			return vi == 15
		}
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
				return d, true
			}
		}
	}
	return "", false
}

// newPGServer makes a fresh cluster (initdb) in a new temporary directory.
func newPGServer(ctx context.Context, bin string) (*PGServer, error) {
	s := &PGServer{Bin: bin}
	if os.Geteuid() == 0 {
		s.RunAs = "postgres"
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("postgres --version: %w", err)
	}
	s.Version = strings.TrimSpace(string(out))
	s.Dir, err = os.MkdirTemp("", "spl-bench-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres temp dir: %w", err)
	}
	if s.RunAs != "" {
		u, err := user.Lookup(s.RunAs)
		if err != nil {
			s.Remove()
			return nil, fmt.Errorf("running as root, PostgreSQL must run as the %q user, which does not exist: %w", s.RunAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.Dir, uid, gid); err != nil {
			s.Remove()
			return nil, fmt.Errorf("chown %s to %s: %w", s.Dir, s.RunAs, err)
		}
	}
	cmd := s.command(ctx, "initdb", "-D", s.data(), "-U", "bench", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		s.Remove()
		return nil, fmt.Errorf("initdb: %w: %s", err, tail(out))
	}
	return s, nil
}

func (s *PGServer) data() string { return filepath.Join(s.Dir, "data") }

// command runs one of the server's binaries as the server's user.
func (s *PGServer) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.Bin, name)
	if s.RunAs == "" {
		return exec.CommandContext(ctx, path, args...)
	}
	if ru, err := exec.LookPath("runuser"); err == nil {
		return exec.CommandContext(ctx, ru, append([]string{"-u", s.RunAs, "--", path}, args...)...)
	}
	q := make([]string, 0, len(args)+1)
	for _, a := range append([]string{path}, args...) {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return exec.CommandContext(ctx, "su", "-s", "/bin/sh", s.RunAs, "-c", "exec "+strings.Join(q, " "))
}

// Start starts the server (on a new free port the first time) and returns
// once it accepts connections.
func (s *PGServer) Start(ctx context.Context) error {
	if s.Port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("free port: %w", err)
		}
		s.Port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	args := []string{"-D", s.data(), "-p", strconv.Itoa(s.Port)}
	for _, kv := range pgSettings {
		args = append(args, "-c", kv)
	}
	log, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("postgres log: %w", err)
	}
	defer log.Close()
	cmd := s.command(context.Background(), "postgres", args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // not hit by the terminal's ^C; stopped by pid
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case werr := <-exited:
			b, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
			return fmt.Errorf("postgres exited at start (%v): %s", werr, tail(b))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not accepting connections within 60s: %w", err)
		}
	}
}

// pid is the postmaster's process id, from postmaster.pid; 0 when the
// server is not running.
func (s *PGServer) pid() int {
	b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0
	}
	if syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// Stop stops the server (fast shutdown: SIGINT to the postmaster) and
// waits for it to exit; after 30 s it sends SIGQUIT (immediate shutdown).
func (s *PGServer) Stop() error {
	pid := s.pid()
	if pid == 0 {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		return fmt.Errorf("stop postgres (pid %d): %w", pid, err)
	}
	for i := 0; ; i++ {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		if i == 3000 {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
		}
		if i > 4000 {
			return fmt.Errorf("postgres (pid %d) did not stop", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Remove deletes the server's temporary directory.
func (s *PGServer) Remove() { _ = os.RemoveAll(s.Dir) }

// DSN is the connection string for database db.
func (s *PGServer) DSN(db string) string {
	return fmt.Sprintf("postgres://bench@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// PSS is the proportional set size of the server's processes (the
// postmaster and its children) in bytes: their memory with shared pages
// divided among them, so that shared buffers count once.
func (s *PGServer) PSS() int64 {
	root := s.pid()
	if root == 0 {
		return 0
	}
	pids := []int{root}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if procField(pid, "status", "PPid:") == int64(root) {
			pids = append(pids, pid)
		}
	}
	var total int64
	for _, pid := range pids {
		total += procField(pid, "smaps_rollup", "Pss:") * 1024
	}
	return total
}

// procField reads the first number after key in /proc/<pid>/<file>.
func procField(pid int, file, key string) int64 {
	return procNumber(fmt.Sprintf("/proc/%d/%s", pid, file), key)
}

// procNumber reads the first number after key on a line of the /proc file
// at path (0 when there is none).
func procNumber(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				n, _ := strconv.ParseInt(fs[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 800 {
		s = "…" + s[len(s)-800:]
	}
	return s
}
