// Command bench measures spl against raw JetStream and LangGraph-style SQL
// checkpointers (SQLite and PostgreSQL), in one run, on the same payload.
//
//	go run ./bench            # full: 1M records over 100k threads, 3 runs
//	go run ./bench -short     # CI: 20k records over 2k threads, 1 run, < 2 minutes
//
// The report (markdown) is printed and written to bench/results/. See
// bench/README.md for what each workload measures and how.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Config is the size and bounds of a run.
type Config struct {
	Mode                       string        `json:"mode"`
	Records, Threads           int           // the big store: workloads 3 to 8
	SmallRecords, SmallThreads int           // the small store: latest checkpoint at the small size
	WriteThreads, Writers      int           // workload 2: writers over threads
	Write1, WriteN, Async      Bounds        // workloads 1, 2, 2b
	Reads, Recent              Bounds        // workloads 3 and 4; 5
	ScanLimit                  time.Duration // workload 6
	Runs                       int
	Peers                      []string
}

// configFor returns the configuration of a mode: full, short or tiny (the
// test's).
func configFor(mode string) (Config, error) {
	c := Config{Mode: mode, WriteThreads: 1000, Writers: 64, Peers: defaultPeers}
	switch mode {
	case "full":
		c.Records, c.Threads, c.SmallRecords, c.SmallThreads = 1_000_000, 100_000, 10_000, 1_000
		c.Write1 = Bounds{5 * time.Second, 50_000}
		c.WriteN = Bounds{5 * time.Second, 1_000_000}
		c.Async = Bounds{5 * time.Second, 1_000_000}
		c.Reads = Bounds{3 * time.Second, 200_000}
		c.Recent = Bounds{3 * time.Second, 500}
		c.ScanLimit = 3 * time.Minute
		c.Runs = 3
	case "short":
		c.Records, c.Threads, c.SmallRecords, c.SmallThreads = 20_000, 2_000, 2_000, 200
		c.Write1 = Bounds{time.Second, 20_000}
		c.WriteN = Bounds{1500 * time.Millisecond, 200_000}
		c.Async = Bounds{time.Second, 200_000}
		c.Reads = Bounds{500 * time.Millisecond, 50_000}
		c.Recent = Bounds{500 * time.Millisecond, 100}
		c.ScanLimit = 20 * time.Second
		c.Runs = 1
	case "tiny":
		c.Records, c.Threads, c.SmallRecords, c.SmallThreads = 2_000, 200, 500, 50
		c.WriteThreads, c.Writers = 100, 8
		c.Write1 = Bounds{200 * time.Millisecond, 2_000}
		c.WriteN = Bounds{300 * time.Millisecond, 5_000}
		c.Async = Bounds{200 * time.Millisecond, 5_000}
		c.Reads = Bounds{200 * time.Millisecond, 2_000}
		c.Recent = Bounds{200 * time.Millisecond, 20}
		c.ScanLimit = 10 * time.Second
		c.Runs = 1
	default:
		return c, fmt.Errorf("unknown mode %q (full, short or tiny)", mode)
	}
	return c, nil
}

// allPeers are the peers the harness knows, in the report's order;
// defaultPeers those it runs unless -peers says otherwise. spl-encrypted
// is spl with its store encrypted at rest, run on request: its ÷spl
// column is the cost of the encryption.
var (
	allPeers     = []string{"spl", "spl-encrypted", "jetstream", "sqlite", "postgres"}
	defaultPeers = []string{"spl", "jetstream", "sqlite", "postgres"}
)

// Options are the harness's command-line settings.
type Options struct {
	Mode            string
	Runs            int
	Peers           string
	Out             string // results directory; "" for none
	WorkDir         string // where the stores go
	InstallPostgres bool
	Keep            bool
	Quiet           bool
}

func main() {
	if isWorker() {
		os.Exit(workerMain())
	}
	var o Options
	short := flag.Bool("short", false, "CI size: 20k records over 2k threads, short phases, 1 run (under 2 minutes)")
	flag.StringVar(&o.Mode, "mode", "full", "size: full, short or tiny")
	flag.IntVar(&o.Runs, "runs", 0, "repeats of every timed workload (default 3 full, 1 short)")
	flag.StringVar(&o.Peers, "peers", strings.Join(defaultPeers, ","), "peers to run, comma-separated ("+strings.Join(allPeers, ", ")+")")
	flag.StringVar(&o.Out, "out", "", "results directory (default bench/results of the module)")
	flag.StringVar(&o.WorkDir, "workdir", "", "directory for the stores (default the system temp directory)")
	flag.BoolVar(&o.InstallPostgres, "install-postgres", true, "when PostgreSQL is not found and running as root, apt-get install postgresql-15")
	flag.BoolVar(&o.Keep, "keep", false, "keep the stores after the run")
	flag.BoolVar(&o.Quiet, "q", false, "no progress on stderr")
	workload := flag.String("workload", "", `"runs": only the durable-runs workload (bench/runs.go), against PostgreSQL and SQLite step tables`)
	flag.Parse()
	if *short {
		o.Mode = "short"
	}
	if o.Out == "" {
		o.Out = defaultResultsDir()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runBench := run
	if *workload == "runs" {
		runBench = runRunsWorkload
	}
	report, path, err := runBench(ctx, o)
	if report != "" {
		fmt.Print(report)
	}
	if path != "" {
		fmt.Fprintf(os.Stderr, "report written to %s\n", path)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// defaultResultsDir is bench/results under the module root (found from the
// working directory), else ./bench-results.
func defaultResultsDir() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/spl-dev/spl") {
			return filepath.Join(d, "bench", "results")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "bench-results")
		}
	}
}

// run runs the harness and returns the report and the path it was
// written to.
func run(ctx context.Context, o Options) (string, string, error) {
	cfg, err := configFor(o.Mode)
	if err != nil {
		return "", "", err
	}
	if o.Runs > 0 {
		cfg.Runs = o.Runs
	}
	cfg.Peers = nil
	for _, p := range strings.Split(o.Peers, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !contains(allPeers, p) {
			return "", "", fmt.Errorf("unknown peer %q (%s)", p, strings.Join(allPeers, ", "))
		}
		cfg.Peers = append(cfg.Peers, p)
	}
	if !contains(cfg.Peers, "spl") {
		return "", "", errors.New("peers must include spl: every ratio is to spl")
	}
	logf := func(format string, args ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	started := time.Now()
	rep := newReport(cfg, describeMachine(o.WorkDir))

	root, err := os.MkdirTemp(o.WorkDir, "spl-bench-")
	if err != nil {
		return "", "", fmt.Errorf("work directory: %w", err)
	}
	if o.Keep {
		logf("stores kept in %s", root)
	} else {
		defer os.RemoveAll(root)
	}

	var pg *PGServer
	if contains(cfg.Peers, "postgres") {
		pg, err = startPostgres(ctx, o.InstallPostgres, logf)
		if err != nil {
			rep.skip("postgres", err.Error())
			logf("skipping PostgreSQL: %v", err)
			cfg.Peers = remove(cfg.Peers, "postgres")
		} else {
			defer func() {
				if err := pg.Stop(); err != nil {
					logf("stop postgres: %v", err)
				}
				if !o.Keep {
					pg.Remove()
				}
			}()
			rep.Machine.Postgres = pg.Version
		}
	}
	rep.Cfg = cfg

	timeout := 30 * time.Minute
	if cfg.Mode != "full" {
		timeout = 5 * time.Minute
	}
	request := func(peer, phase string, runNo int) Request {
		return Request{Peer: peer, Phase: phase, Run: runNo, Root: filepath.Join(root, peer), Cfg: cfg, PG: pg, Quiet: o.Quiet}
	}
	failed := map[string]bool{}
	for _, peer := range cfg.Peers {
		logf("%s: filling (not measured)", peer)
		res, rss, err := runWorker(ctx, request(peer, "fill", 0), timeout)
		if err != nil {
			if ctx.Err() != nil {
				return "", "", ctx.Err()
			}
			failed[peer] = true
			rep.skip(peer, "fill failed: "+err.Error())
			logf("%s: %v", peer, err)
			continue
		}
		res.Set("rss.fill_mb", float64(rss)/(1<<20))
		rep.addFill(peer, res.Metrics)
	}
	for r := 1; r <= cfg.Runs; r++ {
		// Rotate the order of the peers from run to run, so that a slow
		// spell of the machine does not always land on the same peer.
		n := len(cfg.Peers)
		for j := range n {
			peer := cfg.Peers[(j+r-1)%n]
			if failed[peer] {
				continue
			}
			logf("%s: run %d of %d", peer, r, cfg.Runs)
			res, rss, err := runWorker(ctx, request(peer, "measure", r), timeout)
			if err != nil {
				if ctx.Err() != nil {
					return "", "", ctx.Err()
				}
				rep.runError(peer, r, err.Error())
				logf("%s: run %d: %v", peer, r, err)
				continue
			}
			res.Set("rss.mb", float64(rss)/(1<<20))
			rep.addRun(peer, res.Metrics)
		}
	}
	rep.Elapsed = time.Since(started)
	text := rep.Markdown()
	if o.Out == "" {
		return text, "", nil
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return text, "", fmt.Errorf("results directory: %w", err)
	}
	path := filepath.Join(o.Out, fmt.Sprintf("%s-%s.md", started.Format("2006-01-02"), cfg.Mode))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return text, "", fmt.Errorf("write report: %w", err)
	}
	return text, path, nil
}

// startPostgres finds (or installs) PostgreSQL, makes a cluster and starts
// it.
func startPostgres(ctx context.Context, install bool, logf func(string, ...any)) (*PGServer, error) {
	bin, err := findPostgres(ctx, install, logf)
	if err != nil {
		return nil, err
	}
	logf("postgres: initdb and start (%s)", bin)
	pg, err := newPGServer(ctx, bin)
	if err != nil {
		return nil, err
	}
	if err := pg.Start(ctx); err != nil {
		_ = pg.Stop()
		pg.Remove()
		return nil, err
	}
	return pg, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func remove(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
