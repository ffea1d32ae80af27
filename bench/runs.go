package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
)

// The runs workload (-workload runs): the per-step cost of a durable run,
// spl's against a DBOS-style step table (operation_outputs keyed by
// workflow id and step id, one committed insert per step) in PostgreSQL
// and in SQLite. It runs alone, in this process, in about a minute.

const (
	runsSeq      = 2000            // sequential ops for the latency figures
	runsAsync    = 20000           // write-behind checkpoints
	runsWriters  = 64              // concurrent runs
	runsPhase    = 4 * time.Second // each concurrency phase
	runsResumeN  = 1000            // effects of the resumed run
	runsResumeRs = 7               // resumes timed
)

// stepOutput is the output stored per step by every peer, about the size
// of a small tool result.
var stepOutput = `{"line":"call-0000 {\"n\":0}","status":"ok","bytes":42,"note":"` + strings.Repeat("x", 120) + `"}`

// effectShaped is a body with the fields and sizes of the effect record
// of step i of run w.
func effectShaped(w, i int) map[string]any {
	hash := "blake3:" + strings.Repeat("0", 64)
	return map[string]any{"run_id": fmt.Sprintf("w%d", w), "thread_id": "bench", "call_id": fmt.Sprintf("c%d", i), "tool": "tool",
		"input_hash": hash, "output_hash": hash, "output": stepOutput, "timestamp_ms": time.Now().UnixMilli()}
}

type runsFigures struct {
	saveP50, effectP50, ckptP50, ckptP99 time.Duration
	steps64                              float64
	emit64                               float64 // spl only: 64 plain writers (Emit) of a record of the step's size
	ceiling64                            float64 // spl only: the same on bare JetStream without fsync (benchRunsCeiling)
	resumeP50                            time.Duration
	coalesced                            int
	err                                  string
}

func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func pct(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[int(float64(len(ds)-1)*q)]
}

// concurrently runs runsWriters writers at once for runsPhase and returns
// the steps a second they took together, timed from when the last writer
// was started to when the last one stopped. open(w) readies writer w and
// returns its step, called with i = 0, 1, … until the phase is over or a
// step fails, and what releases the writer's resources afterwards (or
// nil). The first error of a writer is returned once all have stopped.
func concurrently(open func(w int) (step func(i int) error, release func(), err error)) (float64, error) {
	var steps atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(runsPhase)
	errs := make(chan error, runsWriters)
	for w := range runsWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			step, release, err := open(w)
			if err != nil {
				errs <- err
				return
			}
			if release != nil {
				defer release()
			}
			for i := 0; time.Now().Before(deadline); i++ {
				if err := step(i); err != nil {
					errs <- err
					return
				}
				steps.Add(1)
			}
		}()
	}
	t0 := time.Now()
	wg.Wait()
	perSec := float64(steps.Load()) / time.Since(t0).Seconds()
	select {
	case err := <-errs:
		return perSec, err
	default:
		return perSec, nil
	}
}

func benchRunsSPL(ctx context.Context, dir string) (f runsFigures, err error) {
	c, err := sdk.Open(ctx, sdk.WithDir(dir), sdk.WithActor("did:sync:bench:runs"))
	if err != nil {
		return f, err
	}
	defer c.Close()
	// Durable plain save: one record of the effect's size, Emit.
	body := map[string]any{"output": stepOutput}
	var ds []time.Duration
	for i := range runsSeq {
		t0 := time.Now()
		if _, err := c.Emit(ctx, sdk.Event{Act: records.ActDo, Kind: "bench.step", Thread: "bench-save", Body: body}); err != nil {
			return f, err
		}
		if i > 50 {
			ds = append(ds, time.Since(t0))
		}
	}
	f.saveP50 = p50(ds)
	// Durable effect.
	r, err := c.OpenRun(ctx, "bench", "seq")
	if err != nil {
		return f, err
	}
	out := json.RawMessage(stepOutput)
	fn := func(context.Context) (json.RawMessage, error) { return out, nil }
	ds = ds[:0]
	for i := range runsSeq {
		t0 := time.Now()
		if _, err := r.Effect(ctx, fmt.Sprintf("c%d", i), "tool", map[string]any{"n": i}, fn); err != nil {
			return f, err
		}
		if i > 50 {
			ds = append(ds, time.Since(t0))
		}
	}
	f.effectP50 = p50(ds)
	// Write-behind phase checkpoints (light payload), time to return.
	ds = ds[:0]
	for i := range runsAsync {
		p := map[string]any{"tool_call_count": i, "model": "m"}
		t0 := time.Now()
		if err := r.Checkpoint(ctx, sdk.PhasePreToolBatch, p); err != nil {
			return f, err
		}
		ds = append(ds, time.Since(t0))
		if i%500 == 499 {
			// A runner does real work between phases; let the writer keep up.
			if err := r.Flush(ctx); err != nil {
				return f, err
			}
		}
	}
	f.ckptP50, f.ckptP99 = pct(ds, 0.5), pct(ds, 0.99)
	rep, err := r.Finish(ctx, sdk.Terminal{Result: "ok"})
	if err != nil {
		return f, err
	}
	f.coalesced = rep.Coalesced
	// 64 concurrent runs, each a loop of durable effects.
	f.steps64, err = concurrently(func(w int) (func(int) error, func(), error) {
		r, err := c.OpenRun(ctx, "bench", fmt.Sprintf("w%d", w))
		if err != nil {
			return nil, nil, err
		}
		step := func(i int) error {
			_, err := r.Effect(ctx, fmt.Sprintf("c%d", i), "tool", i, fn)
			return err
		}
		return step, func() { r.Close() }, nil
	})
	if err != nil {
		return f, err
	}
	// For reference, 64 plain writers, each awaiting an Emit of a record
	// shaped as an effect record (the same fields and sizes, a thread
	// name and a kind as long) on a thread of its own: the floor a step
	// is held to, in the same process and conditions.
	f.emit64, err = concurrently(func(w int) (func(int) error, func(), error) {
		thread := fmt.Sprintf("bench/emt/w%d/effects", w)
		step := func(i int) error {
			ev := sdk.Event{Act: records.ActDo, Kind: "bench.run.effect", Thread: thread, Body: effectShaped(w, i)}
			_, err := c.Emit(ctx, ev)
			return err
		}
		return step, nil, nil
	})
	if err != nil {
		return f, err
	}
	// Resume of a run with 1,000 effects.
	r, err = c.OpenRun(ctx, "bench", "resume")
	if err != nil {
		return f, err
	}
	for i := range runsResumeN {
		if _, err := r.Effect(ctx, fmt.Sprintf("c%d", i), "tool", i, fn); err != nil {
			return f, err
		}
	}
	_ = r.Checkpoint(ctx, sdk.PhasePostToolBatch, map[string]any{"tool_calls_total": runsResumeN})
	if err := r.Close(); err != nil {
		return f, err
	}
	ds = ds[:0]
	for range runsResumeRs {
		t0 := time.Now()
		r, err := c.ResumeRun(ctx, "bench", "resume")
		if err != nil {
			return f, err
		}
		ds = append(ds, time.Since(t0))
		if r.Resume().Effects != runsResumeN {
			return f, fmt.Errorf("resume: %d effects, want %d", r.Resume().Effects, runsResumeN)
		}
		r.Close()
	}
	f.resumeP50 = p50(ds)
	return f, nil
}

const opOutputsDDL = `CREATE TABLE IF NOT EXISTS operation_outputs (
	workflow_uuid TEXT NOT NULL,
	function_id INT NOT NULL,
	function_name TEXT NOT NULL DEFAULT '',
	output TEXT,
	error TEXT,
	PRIMARY KEY (workflow_uuid, function_id))`

func benchRunsPG(ctx context.Context, pg *PGServer) (f runsFigures, err error) {
	dsn := pg.DSN("postgres")
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return f, err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `DROP TABLE IF EXISTS operation_outputs`); err != nil {
		return f, err
	}
	if _, err := c.Exec(ctx, opOutputsDDL); err != nil {
		return f, err
	}
	ins := `INSERT INTO operation_outputs (workflow_uuid, function_id, function_name, output) VALUES ($1, $2, $3, $4)`
	var ds []time.Duration
	for i := range runsSeq {
		t0 := time.Now()
		if _, err := c.Exec(ctx, ins, "seq", i, "tool", stepOutput); err != nil {
			return f, err
		}
		if i > 50 {
			ds = append(ds, time.Since(t0))
		}
	}
	f.saveP50, f.effectP50 = p50(ds), p50(ds)
	f.steps64, err = concurrently(func(w int) (func(int) error, func(), error) {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		step := func(i int) error {
			_, err := c.Exec(ctx, ins, fmt.Sprintf("w%d", w), i, "tool", stepOutput)
			return err
		}
		return step, func() { c.Close(ctx) }, nil
	})
	if err != nil {
		return f, err
	}
	b := &pgx.Batch{}
	for i := range runsResumeN {
		b.Queue(ins, "resume", i, "tool", stepOutput)
	}
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return f, err
	}
	ds = ds[:0]
	for range runsResumeRs {
		t0 := time.Now()
		rows, err := c.Query(ctx, `SELECT function_id, output, error FROM operation_outputs WHERE workflow_uuid = $1 ORDER BY function_id`, "resume")
		if err != nil {
			return f, err
		}
		n := 0
		for rows.Next() {
			var id int
			var out, e sql.NullString
			if err := rows.Scan(&id, &out, &e); err != nil {
				return f, err
			}
			n++
		}
		rows.Close()
		ds = append(ds, time.Since(t0))
		if n != runsResumeN {
			return f, fmt.Errorf("pg resume: %d rows", n)
		}
	}
	f.resumeP50 = p50(ds)
	return f, nil
}

func benchRunsSQLite(ctx context.Context, dir string) (f runsFigures, err error) {
	dsn := "file:" + filepath.Join(dir, "runs.db") + "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=30000&_txlock=immediate"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return f, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, opOutputsDDL); err != nil {
		return f, err
	}
	ins := `INSERT INTO operation_outputs (workflow_uuid, function_id, function_name, output) VALUES (?, ?, ?, ?)`
	var ds []time.Duration
	for i := range runsSeq {
		t0 := time.Now()
		if _, err := db.ExecContext(ctx, ins, "seq", i, "tool", stepOutput); err != nil {
			return f, err
		}
		if i > 50 {
			ds = append(ds, time.Since(t0))
		}
	}
	f.saveP50, f.effectP50 = p50(ds), p50(ds)
	// A writer whose insert fails just stops: the figure is the steps the
	// writers took, and the error is not the run's.
	f.steps64, _ = concurrently(func(w int) (func(int) error, func(), error) {
		step := func(i int) error {
			_, err := db.ExecContext(ctx, ins, fmt.Sprintf("w%d", w), i, "tool", stepOutput)
			return err
		}
		return step, nil, nil
	})
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return f, err
	}
	for i := range runsResumeN {
		if _, err := tx.ExecContext(ctx, ins, "resume", i, "tool", stepOutput); err != nil {
			return f, err
		}
	}
	if err := tx.Commit(); err != nil {
		return f, err
	}
	ds = ds[:0]
	for range runsResumeRs {
		t0 := time.Now()
		rows, err := db.QueryContext(ctx, `SELECT function_id, output, error FROM operation_outputs WHERE workflow_uuid = ? ORDER BY function_id`, "resume")
		if err != nil {
			return f, err
		}
		for rows.Next() {
			var id int
			var out, e sql.NullString
			if err := rows.Scan(&id, &out, &e); err != nil {
				return f, err
			}
		}
		rows.Close()
		ds = append(ds, time.Since(t0))
	}
	f.resumeP50 = p50(ds)
	return f, nil
}

// runRunsWorkload runs the runs workload and writes its report.
func runRunsWorkload(ctx context.Context, o Options) (string, string, error) {
	logf := func(format string, args ...any) {
		if !o.Quiet {
			fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
		}
	}
	work, err := os.MkdirTemp(o.WorkDir, "spl-bench-runs-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(work)
	figs := map[string]runsFigures{}
	logf("runs: spl")
	f, err := benchRunsSPL(ctx, filepath.Join(work, "spl"))
	if err != nil {
		return "", "", fmt.Errorf("spl: %w", err)
	}
	logf("runs: bare JetStream ceiling")
	if f.ceiling64, err = benchRunsCeiling(ctx, filepath.Join(work, "ceiling")); err != nil {
		return "", "", fmt.Errorf("ceiling: %w", err)
	}
	figs["spl"] = f
	if contains(strings.Split(o.Peers, ","), "sqlite") {
		logf("runs: sqlite")
		if err := os.MkdirAll(filepath.Join(work, "sqlite"), 0o755); err != nil {
			return "", "", err
		}
		f, err := benchRunsSQLite(ctx, filepath.Join(work, "sqlite"))
		if err != nil {
			f.err = err.Error()
		}
		figs["sqlite"] = f
	}
	if contains(strings.Split(o.Peers, ","), "postgres") {
		logf("runs: postgres")
		pg, err := startPostgres(ctx, o.InstallPostgres, logf)
		if err != nil {
			figs["postgres"] = runsFigures{err: err.Error()}
		} else {
			f, err := benchRunsPG(ctx, pg)
			if err != nil {
				f.err = err.Error()
			}
			figs["postgres"] = f
			_ = pg.Stop()
			pg.Remove()
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	var b strings.Builder
	s := figs["spl"]
	fmt.Fprintf(&b, "# runs workload, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Load average at the end (/proc/loadavg): %s\n", strings.TrimSpace(string(load)))
	fmt.Fprintf(&b, "Sequential ops %d (p50 after 50 warm-up), write-behind checkpoints %d, %d concurrent runs for %s, resume of a run with %d effects (p50 of %d).\n\n",
		runsSeq, runsAsync, runsWriters, runsPhase, runsResumeN, runsResumeRs)
	b.WriteString("| peer | durable plain save p50 | durable effect p50 | write-behind checkpoint p50 / p99 | 64 runs steps/s | resume 1,000 effects p50 |\n|---|---|---|---|---|---|\n")
	for _, peer := range []string{"spl", "sqlite", "postgres"} {
		f, ok := figs[peer]
		if !ok {
			continue
		}
		if f.err != "" {
			fmt.Fprintf(&b, "| %s | error: %s | | | | |\n", peer, f.err)
			continue
		}
		ck := "n/a (a step is a committed insert)"
		if peer == "spl" {
			ck = fmt.Sprintf("%s / %s", f.ckptP50, f.ckptP99)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.0f | %s |\n", peer, f.saveP50, f.effectP50, ck, f.steps64, f.resumeP50)
	}
	b.WriteString("\n## Targets\n\n")
	fmt.Fprintf(&b, "- durable effect / durable plain save (spl): %.2f× (target ≤ 1.2×)\n", s.effectP50.Seconds()/s.saveP50.Seconds())
	fmt.Fprintf(&b, "- write-behind checkpoint p50: %s (target ≤ 10µs); snapshots coalesced in the sequential phase: %d\n", s.ckptP50, s.coalesced)
	if pg, ok := figs["postgres"]; ok && pg.err == "" {
		fmt.Fprintf(&b, "- 64 runs, spl steps/s / PostgreSQL steps/s: %.2f× (target ≥ 3×)\n", s.steps64/pg.steps64)
		fmt.Fprintf(&b, "- for reference, 64 plain writers (Emit of a record shaped as an effect record), spl: %.0f records/s, %.2f× PostgreSQL's steps/s; the runs reach %.2f× of it\n", s.emit64, s.emit64/pg.steps64, s.steps64/s.emit64)
		fmt.Fprintf(&b, "- the ceiling of one JetStream message per step: 64 writers each awaiting a publish of an effect-shaped record (built as spl builds it, with the headers spl's writer sets) to bare JetStream with no fsync at all, so not durable: %.0f messages/s, %.2f× PostgreSQL's steps/s; spl's runs reach %.2f× of it, and 3× PostgreSQL would be %.2f× of it\n", s.ceiling64, s.ceiling64/pg.steps64, s.steps64/s.ceiling64, 3*pg.steps64/s.ceiling64)
		fmt.Fprintf(&b, "- durable effect p50, spl / PostgreSQL insert p50: %.2f×\n", s.effectP50.Seconds()/pg.effectP50.Seconds())
	}
	if sq, ok := figs["sqlite"]; ok && sq.err == "" {
		fmt.Fprintf(&b, "- 64 runs, spl steps/s / SQLite steps/s: %.2f×\n", s.steps64/sq.steps64)
	}
	fmt.Fprintf(&b, "- resume of a run with 1,000 effects: %s (target ≤ 20 ms)\n", s.resumeP50)
	report := b.String()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return report, "", err
	}
	path := filepath.Join(o.Out, time.Now().Format("2006-01-02")+"-runs.md")
	return report, path, os.WriteFile(path, []byte(report), 0o644)
}
