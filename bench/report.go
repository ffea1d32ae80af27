package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Report gathers the figures of a run and writes them as markdown.
type Report struct {
	Cfg     Config        // sizes and bounds of the run
	Machine Machine       // where it ran
	Elapsed time.Duration // how long the whole run took

	fill    map[string]Metrics
	runs    map[string][]Metrics
	skipped map[string]string
	errors  []string
}

func newReport(cfg Config, m Machine) *Report {
	return &Report{Cfg: cfg, Machine: m, fill: map[string]Metrics{}, runs: map[string][]Metrics{}, skipped: map[string]string{}}
}

func (r *Report) skip(peer, why string)          { r.skipped[peer] = why }
func (r *Report) addFill(peer string, m Metrics) { r.fill[peer] = m }
func (r *Report) addRun(peer string, m Metrics)  { r.runs[peer] = append(r.runs[peer], m) }
func (r *Report) runError(peer string, run int, err string) {
	r.errors = append(r.errors, fmt.Sprintf("%s, run %d: %s", peer, run, err))
}

// stat is one figure of one peer over the runs.
type stat struct {
	med, lo, hi float64
	n           int
}

func (s stat) ok() bool { return s.n > 0 }

// get returns figure key of peer: over the measured runs, or from the fill.
func (r *Report) get(peer, key string) stat {
	var vs []float64
	for _, m := range r.runs[peer] {
		if v, ok := m.V[key]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		if v, ok := r.fill[peer].V[key]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return stat{}
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return stat{med: med, lo: vs[0], hi: vs[len(vs)-1], n: len(vs)}
}

// column is one figure shown in a workload's table.
type column struct {
	key, head string
	higher    bool // higher is better
}

// section is one workload's table.
type section struct {
	title, what string
	cols        []column
}

func (r *Report) sections() []section {
	c := r.Cfg
	return []section{
		{"1. Save a checkpoint, one writer, durable",
			"One writer saves checkpoints back to back, each awaited until durable (spl: `SaveCheckpoint`; raw JetStream: a synchronous publish under SyncAlways; SQL: LangGraph's put, committed).",
			[]column{{"w1.ops", "saves/s", true}, {"w1.p50", "p50 µs", false}, {"w1.p99", "p99 µs", false}}},
		{fmt.Sprintf("2. %d concurrent writers over %d threads, durable", c.Writers, c.WriteThreads),
			"Each writer awaits its own save before the next.",
			[]column{{"w2.ops", "saves/s", true}, {"w2.p50", "p50 µs", false}, {"w2.p99", "p99 µs", false}}},
		{"2b. Async saves: many in flight, awaited at the end",
			"spl: `EmitAsync` then one `Flush`; raw JetStream: async publishes (4,096 in flight) then every ack. The SQL checkpointers have no such API (LangGraph's put awaits its commit).",
			[]column{{"w2b.ops", "durable records/s", true}}},
		{fmt.Sprintf("3. Latest checkpoint of a random thread (%s records over %s threads)", human(c.Records), human(c.Threads)),
			fmt.Sprintf("One reader; at the small size (%s records over %s threads) too. spl decodes and verifies the record; raw JetStream returns the message undecoded; the SQL peers run LangGraph's get_tuple query and decode the row.", human(c.SmallRecords), human(c.SmallThreads)),
			[]column{{"w3.p50", "p50 µs", false}, {"w3.p99", "p99 µs", false}, {"w3.ops", "reads/s", true}, {"w3s.p50", "p50 µs, small", false}, {"w3s.p99", "p99 µs, small", false}}},
		{"4. Last 50 records of a thread",
			"A random long thread (100 records, spread over the log among the other active threads). spl: `QueryThread(…, Last(50))`; raw: the same window algorithm, undecoded; SQL: LangGraph's list(limit=50).",
			[]column{{"w4.p50", "p50 µs", false}, {"w4.p99", "p99 µs", false}}},
		{"5. 100 most recently active threads",
			"spl: the thread index projection (`projections.Reader.Threads`: the newest values of its KV bucket), caught up after the fill; raw: a walk back from the end of the log in growing windows of batched direct gets, thread from the subject; SQL: GROUP BY over the checkpoints table (LangGraph keeps no thread index).",
			[]column{{"w5.p50", "p50 µs", false}, {"w5.p99", "p99 µs", false}}},
		{"6. Projection rebuild / full scan",
			"spl: a rebuild of the thread index projection (`Runtime.Rebuild`: models emptied, every record applied and stored in KV); beside it, a verified scan (every record through an ordered consumer, decoded and verified, nothing folded or stored): the ceiling of a rebuild. Raw: the same ordered-consumer scan, undecoded. SQL: every checkpoint row (JSON decoded) and every blob row.",
			[]column{{"w6.rps", "rebuild or scan records/s", true}, {"w6v.rps", "verified scan records/s", true}}},
		{"7. Cold open of the big store",
			"From nothing running to the first latest-checkpoint answer: spl and raw JetStream start the embedded server (stream recovery); SQLite opens the file; PostgreSQL starts the server (stopped cleanly before). Page cache warm.",
			[]column{{"w7.ms", "ms", false}}},
		{"8. Bytes on disk per record, and memory",
			"Disk: after the fill, divided by the records (see notes for what is counted). RSS: peak resident set of the peer's worker process (`ru_maxrss`), which holds the embedded server for spl and raw JetStream and SQLite itself; PostgreSQL's server is a separate set of processes, shown as their proportional set size (PSS, shared buffers counted once) at the end of a run, not a peak.",
			[]column{{"w8.bytes", "bytes/record", false}, {"w8.total_mb", "store MiB", false}, {"rss.mb", "peak RSS MiB (runs)", false}, {"rss.fill_mb", "peak RSS MiB (fill)", false}, {"w8.server_mb", "server PSS MiB", false}}},
		{"9. A 5 MB checkpoint: save and load",
			fmt.Sprintf("%d checkpoints of 5,000 learnings of 1 KB over five threads, one writer, each durable; then the latest of a thread, decoded, %d times. spl stores such a body zstd-compressed, in its record's message when the frame fits one, else beside the record in parts in a stream of its own (the same id either way; this one, text, fits); SQL: LangGraph's schema, the lists as blobs in rows. Raw JetStream: n/a (a message holds 1 MiB).", largeCheckpoints, largeCheckpoints),
			[]column{{"w9.save_ms", "save p50 ms", false}, {"w9.load_ms", "load p50 ms", false}}},
	}
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	c := r.Cfg
	m := r.Machine
	fmt.Fprintf(&b, "# spl benchmark: %s mode\n\n", c.Mode)
	fmt.Fprintf(&b, "Run %s, %s in all. %d run(s) of every timed workload; figures are medians, with the spread (min–max) over the runs in brackets. `÷spl` is the peer's median divided by spl's: for throughputs below 1 means spl is faster, for latencies, times and sizes above 1 means spl is faster.\n\n",
		time.Now().Format("2006-01-02 15:04 MST"), r.Elapsed.Round(time.Second), c.Runs)
	b.WriteString("## Machine\n\n")
	fmt.Fprintf(&b, "| | |\n| --- | --- |\n")
	for _, kv := range [][2]string{
		{"CPU", fmt.Sprintf("%s, %d cores", m.CPU, m.Cores)},
		{"memory", fmt.Sprintf("%.1f GiB", m.MemGiB)},
		{"kernel", m.Kernel},
		{"disk", m.Disk},
		{"load at start", m.Load},
		{"Go", m.Go},
		{"nats-server", m.NATSServer},
		{"SQLite", m.SQLite + " (mattn/go-sqlite3)"},
		{"PostgreSQL", orNone(m.Postgres)},
		{"spl commit", orNone(m.Commit)},
	} {
		fmt.Fprintf(&b, "| %s | %s |\n", kv[0], kv[1])
	}
	fmt.Fprintf(&b, "\nSizes: big store %s records over %s threads (1 in 100 threads has 100 records; %s threads active at a time), small store %s over %s; write workloads over %s threads.\n\n",
		human(c.Records), human(c.Threads), human(activeThreads(c.Threads)), human(c.SmallRecords), human(c.SmallThreads), human(c.WriteThreads))
	b.WriteString("Peers: **spl** (sdk on the embedded log, in process, fsync before every ack), **jetstream** (raw JetStream, the floor: its own embedded server, same stream settings, SyncAlways, same envelope bytes, no records layer), **sqlite** (LangGraph's schema and queries adapted to SQLite, WAL, synchronous=FULL, in process), **postgres** (LangGraph's schema and queries, over loopback TCP, fsync and synchronous_commit on). See bench/README.md.\n\n")
	for peer, why := range r.skipped {
		fmt.Fprintf(&b, "> **%s skipped**: %s\n\n", peer, why)
	}
	r.targets(&b)
	for _, s := range r.sections() {
		r.table(&b, s)
	}
	b.WriteString("## Peak RSS as the workloads go (MiB, the worker's VmHWM after each; medians)\n\n| peer | after w2/w2b | after w7 cold open | after w3 | after w4 | after w5 | after w6 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range r.peers() {
		fmt.Fprintf(&b, "| %s |", p)
		for _, k := range []string{"hwm.w2", "hwm.w7", "hwm.w3", "hwm.w4", "hwm.w5", "hwm.w6"} {
			if s := r.get(p, k); s.ok() {
				fmt.Fprintf(&b, " %s |", fmtNum(s.med))
			} else {
				b.WriteString(" n/a |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString("## Fills (not measured as workloads)\n\n| peer | big store fill s | records/s |\n| --- | --- | --- |\n")
	for _, p := range r.peers() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p, fmtNum(r.get(p, "fill.secs").med), fmtNum(r.get(p, "fill.rps").med))
	}
	b.WriteString("\n")
	var notes []string
	for _, p := range r.peers() {
		for _, n := range r.fill[p].Notes {
			notes = append(notes, p+": "+n)
		}
		for _, m := range r.runs[p] {
			for _, n := range m.Notes {
				notes = append(notes, p+": "+n)
			}
		}
	}
	if len(notes)+len(r.errors) > 0 {
		b.WriteString("## Notes and errors\n\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		for _, e := range r.errors {
			fmt.Fprintf(&b, "- **error** %s\n", e)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// peers are the peers with figures, spl first.
func (r *Report) peers() []string {
	var out []string
	for _, p := range allPeers {
		if len(r.runs[p]) > 0 || len(r.fill[p].V) > 0 {
			out = append(out, p)
		}
	}
	return out
}

func (r *Report) table(b *strings.Builder, s section) {
	fmt.Fprintf(b, "## %s\n\n%s\n\n| peer |", s.title, s.what)
	for _, c := range s.cols {
		fmt.Fprintf(b, " %s | ÷spl |", c.head)
	}
	b.WriteString("\n| --- |")
	for range s.cols {
		b.WriteString(" ---: | ---: |")
	}
	b.WriteString("\n")
	for _, p := range r.peers() {
		fmt.Fprintf(b, "| %s |", p)
		for _, c := range s.cols {
			v := r.get(p, c.key)
			base := r.get("spl", c.key)
			if !v.ok() {
				b.WriteString(" n/a | |")
				continue
			}
			cell := fmtNum(v.med)
			if v.n > 1 {
				cell += fmt.Sprintf(" (%s–%s)", fmtNum(v.lo), fmtNum(v.hi))
			}
			ratio := ""
			if p != "spl" && base.ok() && base.med > 0 {
				ratio = fmt.Sprintf("%.2f×", v.med/base.med)
			}
			fmt.Fprintf(b, " %s | %s |", cell, ratio)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// target is one of the targets for spl.
type target struct {
	name   string
	value  func() (float64, bool) // the measured quantity
	unit   string                 // "×", "µs", "ms", "/s", "MiB"
	atMost bool                   // value must be ≤ limit (else ≥)
	limit  float64
	limits string // what in spl limits it, shown when missed
}

func (r *Report) targets(b *strings.Builder) {
	med := func(p, k string) (float64, bool) { s := r.get(p, k); return s.med, s.ok() }
	ratio := func(p1, k1, p2, k2 string) func() (float64, bool) {
		return func() (float64, bool) {
			a, ok1 := med(p1, k1)
			c, ok2 := med(p2, k2)
			if !ok1 || !ok2 || c == 0 {
				return 0, false
			}
			return a / c, true
		}
	}
	one := func(p, k string) func() (float64, bool) { return func() (float64, bool) { return med(p, k) } }
	peak := func() (float64, bool) {
		a, ok1 := med("spl", "rss.mb")
		f, ok2 := med("spl", "rss.fill_mb")
		if !ok1 && !ok2 {
			return 0, false
		}
		return math.Max(a, f), true
	}
	ts := []target{
		{"64 writers: spl saves/s ÷ PostgreSQL's", ratio("spl", "w2.ops", "postgres", "w2.ops"), "×", false, 1.3, limitWriters},
		{"64 writers: spl saves/s ÷ raw JetStream SyncAlways publishes/s", ratio("spl", "w2.ops", "jetstream", "w2.ops"), "×", false, 5, limitWriters},
		{"async emits: durable records/s", one("spl", "w2b.ops"), "/s", false, 80000, limitAsync},
		{"one writer: spl save p50 ÷ raw JetStream sync publish p50", ratio("spl", "w1.p50", "jetstream", "w1.p50"), "×", true, 1.2, limitOneWriter},
		{"latest checkpoint p50 (big store)", one("spl", "w3.p50"), "µs", true, 30, limitLatest},
		{"latest checkpoint p50: big store ÷ small store", ratio("spl", "w3.p50", "spl", "w3s.p50"), "×", true, 1.5, limitLatestScale},
		{"last 50 records of a thread p50", func() (float64, bool) { v, ok := med("spl", "w4.p50"); return v / 1000, ok }, "ms", true, 2, limitLast},
		{"thread index rebuild records/s", one("spl", "w6.rps"), "/s", false, 300000, limitScan},
		{"cold open of the big store", one("spl", "w7.ms"), "ms", true, 1000, limitColdOpen},
		{"peak RSS (max of runs and fill)", peak, "MiB", true, 400, limitRSS},
		{"bytes on disk per record ÷ PostgreSQL's", ratio("spl", "w8.bytes", "postgres", "w8.bytes"), "×", true, 0.9, limitDisk},
		{"5 MB checkpoint save p50 ÷ PostgreSQL's", ratio("spl", "w9.save_ms", "postgres", "w9.save_ms"), "×", true, 1, limitLarge},
		{"5 MB checkpoint load p50 ÷ PostgreSQL's", ratio("spl", "w9.load_ms", "postgres", "w9.load_ms"), "×", true, 1, limitLarge},
	}
	b.WriteString("## Targets\n\n")
	if r.Cfg.Mode != "full" {
		fmt.Fprintf(b, "*%s mode: the targets are set for the full size (1M records over 100k threads); these are indicative only.*\n\n", r.Cfg.Mode)
	}
	b.WriteString("| target | measured | required | verdict |\n| --- | ---: | ---: | --- |\n")
	var missed []target
	for _, t := range ts {
		v, ok := t.value()
		if !ok {
			fmt.Fprintf(b, "| %s | n/a | %s | not measured |\n", t.name, fmtTarget(t.limit, t.unit, t.atMost))
			continue
		}
		met := v >= t.limit
		if t.atMost {
			met = v <= t.limit
		}
		verdict := "**met**"
		if !met {
			var by float64
			if t.atMost {
				by = v / t.limit
			} else {
				by = t.limit / v
			}
			verdict = fmt.Sprintf("**missed**: %.2f× short (%.0f%%)", by, 100*math.Abs(v-t.limit)/t.limit)
			missed = append(missed, t)
		}
		fmt.Fprintf(b, "| %s | %s%s | %s | %s |\n", t.name, fmtNum(v), unitSuffix(t.unit), fmtTarget(t.limit, t.unit, t.atMost), verdict)
	}
	b.WriteString("\n")
	if len(missed) > 0 {
		b.WriteString("### Missed targets: what limits them in spl, and what would close them\n\n")
		for _, t := range missed {
			fmt.Fprintf(b, "- **%s**: %s\n", t.name, t.limits)
		}
		b.WriteString("\n")
	}
}

func unitSuffix(u string) string {
	switch u {
	case "×":
		return "×"
	case "/s":
		return "/s"
	}
	return " " + u
}

func fmtTarget(limit float64, unit string, atMost bool) string {
	op := "≥ "
	if atMost {
		op = "≤ "
	}
	return op + fmtNum(limit) + unitSuffix(unit)
}

// fmtNum formats a figure with sensible precision and thousands separators.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a < 10:
		return fmt.Sprintf("%.2f", v)
	case a < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return human(int(math.Round(v)))
}

// human writes n with thousands separators.
func human(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func orNone(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// What limits each target in spl, shown when it is missed. The figures
// quoted were measured on the 2-core machine the harness was written on
// (probes run by hand: raw publishes, atomic batches and fsyncs through
// the log's connection, CPU profiles of the sdk benchmarks, and
// testing.Benchmark of the records calls).
const (
	limitWriters     = "on the embedded log a group commit is the group's records as pipelined plain publishes (a thread with several records in the group: one atomic batch) and one fsync by the writer of the blocks written, so 64 writers that each await their ack share one fsync per group; what remains is the per-record cost on 2 cores shared with the server: records.New (~4 µs), sealing and encoding (~2 µs), and the server's store of each message with its check of Nats-Expected-Last-Subject-Sequence on the thread's wildcard subject (~8 µs). What would close it: a cheaper per-record path on both sides."
	limitAsync       = "EmitAsync keeps the writer fed with full groups (1,000 records): pipelined plain publishes and one fsync, so the fixed cost per group is small and the per-record CPU rules. A profile of the sdk benchmark (`go test -bench EmitAsync ./sdk`) puts it at ~26–31 µs of CPU per record over both cores: the server's stream loop ~10 µs (of which its check of the thread's expected last clock, a lookup of the thread's wildcard subject, ~2 µs, and writing each message to its block file, which a single server does message by message, ~2 µs), its parsing of the publishes ~3 µs, records.New ~2–4 µs, the writer ~6–8 µs (sealing and encoding, publishing, collecting acks, settling), garbage collection ~2–3 µs. 80,000/s needs under 25 µs with both cores busy all the time. Tried: sending each record as soon as it is sealed, so that the server stores the first while the writer seals the next: no gain, the process was CPU-bound already (~145% of the 2 cores, ~30 µs of CPU a record). Not done: overlapping groups. Here every group holds the same 1,000 threads, so the next group's records would chain on clocks not yet acknowledged, and an expectation on a predicted clock can pass over another writer's record that took that clock, which would break the chain. What would close it: less server CPU per message, together with fewer allocations per record on spl's side. On the server's side that is a per-thread expectation it checks without matching a wildcard (not offered), or block writes deferred to one per group: its async persist mode defers them, but acks a message before it reaches the file, so the writer's fsync would no longer cover what was acked."
	limitOneWriter   = "a lone append is a plain publish like raw JetStream's, then the writer's fsync of the block. Probed: the fsync costs what the server's own does under SyncAlways, but a publish that follows an fsync of its block takes ~50 µs against ~22 µs otherwise (the write waits on the journal commit the fsync started), so publish-then-fsync in two steps costs ~15 µs more than the server's write-and-fsync in one. Add records.New (~4 µs), sealing and encoding (~2 µs) and the server's check of Nats-Expected-Last-Subject-Sequence on the thread's wildcard subject. SaveCheckpoint also reads the thread's retention policy (cached for 2 s) and, for a thread the writer has not seen, its head: one or two round trips more on the first save of each thread. Committing a lone append on the caller's goroutine (no hand-off to the writer) was tried and measured no gain. The rest of the gap is scheduling on a busy 2-core machine. What would close it: a lone append under a server that fsyncs by itself (SyncAlways for lone publishes only, which nats-server does not offer per message)."
	limitLarge       = "the body is compressed (zstd) on save and decompressed on every load; a frame too large for one message goes in 512 KiB parts to a stream of its own, each part durable before the record's header is appended, and comes back in one batched direct get; around that, the canonical CBOR of the body is scanned and its keyed BLAKE3 computed on save and again on load (every read verifies)."
	limitLatest      = "one last-by-subject direct get over the in-process connection (the jetstream row), in which the server's lookup of the subject's last message is ~12 µs of CPU at 100k records (profiled), then log.DecodeMessage (a single-pass canonical check of the envelope, the body digest and the id: ~4 µs) and DecodeCheckpoint (~1 µs, read directly once the scanner has found the body canonical); in the small store spl now matches the raw get at the median. At 1M records the message is often outside the server's block cache and costs a block load (the p99). The target is below what the raw get alone takes on this machine. What would close it: serving the latest checkpoint from an in-process cache of verified checkpoints, without the round trip. Not done: a cache that other processes' saves must invalidate costs every reading process a delivery per checkpoint saved anywhere, it is consistent only up to that delivery's lag, and a new process (the next session of an agent) starts with it empty."
	limitLatestScale = "at 1M records the message is often not in nats-server's block cache: a miss loads a whole ~8 MB message block from the page cache (p99 in tens of ms, for the raw peer too), and spl's messages are ~25% bigger than the raw peer's (below). A latest-checkpoint read model (the projection's checkpoints bucket, or memory) would make the read independent of the log's size."
	limitLast        = "log.Tail fetches the thread's newest record, then walks back in rounds of pipelined direct gets along the Spl-Back headers, 17 records per round (4 round trips for 50), and checks the chain record by record. What remains is the server's work per get (it builds each answer's headers anew, and loads a whole block when the message is not cached: the p99) and verifying 50 records, on 2 cores shared with the server. What would close it: a batched get of a list of sequences (the server's batched direct get takes a start and a filter, not a list)."
	limitScan        = "the rebuild reads every record through an ordered consumer, verifies it on both cores (a single-pass canonical check and two BLAKE3 hashes, ~4 µs of CPU; the verified scan column is reading and verifying alone, on one core), folds it, and stores the changed values and the position in KV (on the embedded server as pipelined plain publishes, each expecting its key's revision). While the consumer reports more records pending, the changes of many batches are stored together (up to 50,000 values or a second), so a thread's values are written about once per window instead of once per batch; that took this rebuild from ~61,000/s (the previous full run) to what this table shows. What remains is the reading: the raw peer's unverified scan through the same consumer is itself under 300,000/s here, and verifying adds ~4 µs of CPU a record on 2 cores shared with the server. What would close it: a read path cheaper than a consumer's delivery per message (on the embedded server, reading the stream's block files directly), with verification kept on both cores."
	limitColdOpen    = "the embedded server recovers the stream (and the projection's KV streams) at start; with a clean shutdown it reads the index snapshot, otherwise it rebuilds per-block state. Keeping the snapshot current on close bounds it."
	limitRSS         = "the embedded nats-server's block cache lives in the same process: a read loads the whole ~8 MB block its message is in, the server holds the block through a weak pointer once the read is done, and its buffer stays live until a garbage collection after its last use; Go lets the heap grow to twice what is live. So random reads over the 1M-record store (workloads 3 to 6) keep most of the store in memory, and the peak is about twice the store (raw JetStream's worker peaks the same way; see the RSS-by-workload table). The fill's peak is the thread index's catch-up at its end (the fold's state of every thread, the changed values held for one store, the consumer's buffered deliveries, the blocks it reads), not the emits: in a fill of 400,000 records over 40,000 threads the emits peaked at 250 MiB and the catch-up took the process to 570 MiB. Tried: a soft memory limit (GOMEMLIMIT) at the store's size (1,300 MiB) held the peak at 1,314 MiB with the latest checkpoint's p50 unchanged and its p99 at 3.4 ms (bench/results/2026-11-22-memlimit.md); at 300 MiB the peak is 400 MiB, but nearly every read loads its block again: latest checkpoint p50 3.9 ms, last 50 records 40 ms, rebuild 39,000/s. What would close it: a bound on the server's block cache, or smaller blocks for the log's stream (the server takes neither through its options or the stream API; nats-io/nats-server#5740), or reads served from read models instead of the log."
	limitDisk        = "each message carries the record (header with 36-byte prev, 32-byte body digest, actor and thread; 32-byte salt; body) plus headers that the server stores with it: Spl-Id (~70 bytes), the prev-clock header, Spl-Back (where the 16 records before prev are: ~80 bytes), and the publish-protocol headers of the group commit (Nats-Expected-Last-Subject-Sequence and its subject, ~120 bytes; in an atomic batch also Nats-Batch-Id and Nats-Batch-Sequence)."
)
