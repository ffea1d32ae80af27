package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"
)

// The harness measures each peer in a process of its own (the harness
// re-executed with workerEnv set), so that each peer's peak RSS is its own
// and one peer's caches and goroutines do not slow another.

// workerEnv carries a worker's Request, as JSON.
const workerEnv = "SPL_BENCH_WORKER"

// profileEnv names a directory where every worker writes a CPU profile of
// each timed latest-checkpoint and scan phase, <peer>-run<n>-<phase>.pprof,
// to find where a figure's time goes. Unset, nothing is profiled. The
// profiler's own cost (a few percent) is in the figures of such a run.
const profileEnv = "SPL_BENCH_PROFILE"

// profileTag is <peer>-run<n>, set by the worker for profile names.
var profileTag = "bench"

// profilePhase starts a CPU profile of phase key when profileEnv is set,
// and returns what stops it.
func profilePhase(key string) func() {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, profileTag+"-"+key+".pprof"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: profile %s: %v\n", key, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "bench: profile %s: %v\n", key, err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// Request is what a worker process is asked to do.
type Request struct {
	Peer  string    `json:"peer"`
	Phase string    `json:"phase"` // "fill" or "measure"
	Run   int       `json:"run"`
	Root  string    `json:"root"` // the peer's data directory
	Cfg   Config    `json:"cfg"`
	PG    *PGServer `json:"pg,omitempty"`
	Out   string    `json:"out"` // where the worker writes its Result
	Quiet bool      `json:"quiet"`
}

// Metrics are the figures of one worker, by key ("w1.ops", "w3.p50", …),
// with notes on anything the figures need to be read with.
type Metrics struct {
	V     map[string]float64 `json:"v"`
	Notes []string           `json:"notes,omitempty"`
}

// Set records figure k.
func (m *Metrics) Set(k string, v float64) {
	if m.V == nil {
		m.V = make(map[string]float64)
	}
	m.V[k] = v
}

// Note records a note.
func (m *Metrics) Note(format string, args ...any) {
	m.Notes = append(m.Notes, fmt.Sprintf(format, args...))
}

// Result is a worker's answer.
type Result struct {
	Metrics
	Err string `json:"err,omitempty"`
}

// isWorker reports whether this process is a worker.
func isWorker() bool { return os.Getenv(workerEnv) != "" }

// workerMain runs the worker's request and returns the exit code.
func workerMain() int {
	var req Request
	if err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &req); err != nil {
		fmt.Fprintf(os.Stderr, "bench worker: bad request: %v\n", err)
		return 2
	}
	profileTag = fmt.Sprintf("%s-run%d", req.Peer, req.Run)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := Result{}
	if err := work(ctx, &req, &res.Metrics); err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(req.Out, b, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "bench worker: write result: %v\n", err)
		return 2
	}
	return 0
}

func newPeer(req *Request) (Peer, error) {
	switch req.Peer {
	case "spl":
		return &splPeer{root: req.Root}, nil
	case "spl-encrypted":
		return newEncryptedPeer(req.Root)
	case "jetstream":
		return &jsPeer{root: req.Root}, nil
	case "sqlite":
		return &sqlitePeer{root: req.Root}, nil
	case "postgres":
		if req.PG == nil {
			return nil, fmt.Errorf("postgres: no server")
		}
		return &pgPeer{srv: req.PG}, nil
	}
	return nil, fmt.Errorf("unknown peer %q", req.Peer)
}

func work(ctx context.Context, req *Request, m *Metrics) error {
	peer, err := newPeer(req)
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		if !req.Quiet {
			fmt.Fprintf(os.Stderr, "  %s: %s\n", req.Peer, fmt.Sprintf(format, args...))
		}
	}
	if err := os.MkdirAll(req.Root, 0o755); err != nil {
		return err
	}
	cfg := &req.Cfg
	switch req.Phase {
	case "fill":
		for _, st := range []struct {
			loc     string
			n, t    int
			key     string
			measure bool
		}{{"small", cfg.SmallRecords, cfg.SmallThreads, "fill_small", false}, {"big", cfg.Records, cfg.Threads, "fill", true}} {
			logf("fill %s store: %d records over %d threads", st.loc, st.n, st.t)
			_ = peer.Remove(ctx, st.loc)
			plan := NewPlan(st.n, st.t)
			t0 := time.Now()
			if err := peer.Fill(ctx, st.loc, plan); err != nil {
				return fmt.Errorf("fill %s: %w", st.loc, err)
			}
			el := time.Since(t0)
			m.Set(st.key+".secs", el.Seconds())
			m.Set(st.key+".rps", float64(st.n)/el.Seconds())
			n, note, err := peer.DiskBytes(ctx, st.loc)
			if err != nil {
				return fmt.Errorf("disk usage %s: %w", st.loc, err)
			}
			if st.measure {
				m.Set("w8.bytes", float64(n)/float64(st.n))
				m.Set("w8.total_mb", float64(n)/(1<<20))
				m.Note("w8 disk: %s", note)
			}
		}
		if pp, ok := peer.(*pgPeer); ok {
			m.Set("w8.server_mb", float64(pp.srv.PSS())/(1<<20))
		}
		return nil
	case "measure":
		if err := measure(ctx, cfg, peer, req.Run, m, logf); err != nil {
			return err
		}
		if pp, ok := peer.(*pgPeer); ok {
			m.Set("w8.server_mb", float64(pp.srv.PSS())/(1<<20))
		}
		return nil
	}
	return fmt.Errorf("unknown phase %q", req.Phase)
}

// runWorker runs one worker process and returns its result and peak RSS
// (ru_maxrss, bytes).
func runWorker(ctx context.Context, req Request, timeout time.Duration) (Result, int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return Result{}, 0, fmt.Errorf("worker: %w", err)
	}
	req.Out = filepath.Join(req.Root, fmt.Sprintf("result-%s-%d.json", req.Phase, req.Run))
	if err := os.MkdirAll(req.Root, 0o755); err != nil {
		return Result{}, 0, err
	}
	_ = os.Remove(req.Out)
	b, err := json.Marshal(req)
	if err != nil {
		return Result{}, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(b))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	runErr := cmd.Run()
	var rss int64
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss * 1024
		}
	}
	out, err := os.ReadFile(req.Out)
	if err != nil {
		if runErr != nil {
			return Result{}, rss, fmt.Errorf("worker %s %s: %w", req.Peer, req.Phase, runErr)
		}
		return Result{}, rss, fmt.Errorf("worker %s %s: no result: %w", req.Peer, req.Phase, err)
	}
	var res Result
	if err := json.Unmarshal(out, &res); err != nil {
		return Result{}, rss, fmt.Errorf("worker %s %s: bad result: %w", req.Peer, req.Phase, err)
	}
	if res.Err != "" {
		return res, rss, fmt.Errorf("worker %s %s: %s", req.Peer, req.Phase, res.Err)
	}
	return res, rss, nil
}
