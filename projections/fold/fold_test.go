package fold

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// TestFoldScripts runs the scripts in testdata/: records in, read models
// out. Each case is a command line, input lines, "----", and the expected
// output up to a blank line:
//
//	append [batch=N]   each input line is a record (below), folded in
//	                   batches of N (default: all in one); prints the values
//	                   that changed
//	delete @C ...      physically deletes the records at clocks C from the log
//	replay from=C      re-applies the records from clock C on the stored
//	                   models, as after a crash before the position was
//	                   stored; prints "unchanged" or the models
//	rebuild            folds the log (without deleted records) from scratch
//	                   and prints "identical" or both models
//	dump               prints the models
//
// A record line is THREAD ACT KIND ACTOR TS [key=value ...], where ACTOR
// without a colon means did:sync:agent:ACTOR and TS is Unix milliseconds.
// Checkpoints take summary=, name=, session=; erasures take targets=@C,...
// (the records at those clocks), noclock=@C,... (the same, without their
// clocks, as the log never writes them), ghosts=THREAD,... (records that
// were never appended) and reason=; other kinds take body fields. A line "-" takes a clock without a record
// (a message that is not a record); a line "- THREAD" appends a record to
// THREAD that the fold never sees (a message that does not verify). Ids
// print as @C, or @ghostN.
func TestFoldScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptCase struct {
	cmd    string
	input  []string
	output string
	line   int
}

func parseScript(t *testing.T, path string) (cases []scriptCase, comments map[int][]string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	comments = make(map[int][]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		n++
		return sc.Text(), true
	}
	for {
		line, ok := next()
		if !ok {
			return cases, comments
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			comments[len(cases)] = append(comments[len(cases)], line)
			continue
		}
		c := scriptCase{cmd: line, line: n}
		for {
			l, ok := next()
			if !ok {
				t.Fatalf("%s:%d: no ---- after the input", path, c.line)
			}
			if l == "----" {
				break
			}
			c.input = append(c.input, l)
		}
		var out []string
		for {
			l, ok := next()
			if !ok || l == "" {
				break
			}
			out = append(out, l)
		}
		c.output = strings.Join(out, "\n")
		cases = append(cases, c)
	}
}

func runScript(t *testing.T, path string) {
	cases, comments := parseScript(t, path)
	h := newHarness(t)
	var buf strings.Builder
	for i, c := range cases {
		got := h.run(c)
		if *rewrite {
			for _, l := range comments[i] {
				buf.WriteString(l + "\n")
			}
			buf.WriteString(c.cmd + "\n")
			for _, l := range c.input {
				buf.WriteString(l + "\n")
			}
			buf.WriteString("----\n")
			if got != "" {
				buf.WriteString(got + "\n")
			}
			buf.WriteString("\n")
			continue
		}
		if got != c.output {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.cmd, got, c.output)
		}
	}
	if *rewrite {
		for _, l := range comments[len(cases)] {
			buf.WriteString(l + "\n")
		}
		out := strings.TrimRight(buf.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type harness struct {
	t      *testing.T
	ctx    context.Context
	fold   Fold
	log    *MemoryLog
	store  *MemoryStore
	state  *State
	clock  uint64
	byID   map[records.ID]string
	byTime map[uint64]*records.Record
	heads  map[string]records.ID // each thread's last record, to chain the next
	ghosts int
}

func newHarness(t *testing.T) *harness {
	h := &harness{
		t: t, ctx: context.Background(), fold: Index(), log: &MemoryLog{}, store: NewMemoryStore(),
		byID: make(map[records.ID]string), byTime: make(map[uint64]*records.Record),
		heads: make(map[string]records.ID),
	}
	h.state = NewState(h.fold, h.store, h.log, 0)
	return h
}

func (h *harness) run(c scriptCase) string {
	args := tokens(c.cmd)
	opts := options(args[1:])
	switch args[0] {
	case "append":
		var entries []records.Entry
		for _, l := range c.input {
			h.clock++
			if l == "-" {
				continue
			}
			if th, ok := strings.CutPrefix(l, "- "); ok {
				// A record of th that the fold never sees: it does not
				// verify, or it was deleted before the projector got to it.
				h.entry(th + " KNOW agent.step ghost 1")
				continue
			}
			e := h.entry(l)
			if err := h.log.Append(e); err != nil {
				h.t.Fatal(err)
			}
			entries = append(entries, e)
		}
		n := len(entries)
		if b := opts["batch"]; b != "" {
			n, _ = strconv.Atoi(b)
		}
		before := h.store.Dump()
		for chunk := range slices.Chunk(entries, max(n, 1)) {
			h.commit(h.state, chunk)
		}
		return h.diff(before, h.store.Dump())
	case "delete":
		for _, a := range args[1:] {
			h.log.Delete(h.at(a))
		}
		return "ok"
	case "replay":
		from := h.at("@" + opts["from"])
		before := h.dump(h.store)
		s := NewState(h.fold, h.store, h.log, 0)
		s.SetBase(from - 1)
		var entries []records.Entry
		for _, e := range h.log.Entries() {
			if e.Clock >= from {
				entries = append(entries, e)
			}
		}
		h.commit(s, entries)
		h.state = s
		if after := h.dump(h.store); after != before {
			return after
		}
		return "unchanged"
	case "rebuild":
		st, err := FoldMemory(h.ctx, h.fold, h.log, h.log.Entries(), 3)
		if err != nil {
			h.t.Fatalf("rebuild: %v", err)
		}
		live, fresh := h.dump(h.store), h.dump(st)
		if live == fresh {
			return "identical"
		}
		return "live:\n" + live + "\nrebuilt:\n" + fresh
	case "dump":
		return h.dump(h.store)
	}
	h.t.Fatalf("line %d: unknown command %q", c.line, args[0])
	return ""
}

// commit applies entries as one batch and stores the changes.
func (h *harness) commit(s *State, entries []records.Entry) {
	if err := s.Apply(h.ctx, entries); err != nil {
		h.t.Fatalf("apply: %v", err)
	}
	ws, err := s.Changes()
	if err != nil {
		h.t.Fatal(err)
	}
	revs, err := h.store.Commit(h.ctx, ws)
	if err != nil {
		h.t.Fatalf("commit: %v", err)
	}
	s.Committed(ws, revs)
	if len(entries) > 0 {
		s.SetBase(entries[len(entries)-1].Clock)
	}
}

func (h *harness) at(ref string) uint64 {
	c, err := strconv.ParseUint(strings.TrimPrefix(ref, "@"), 10, 64)
	if err != nil || !strings.HasPrefix(ref, "@") {
		h.t.Fatalf("bad clock reference %q", ref)
	}
	return c
}

// entry builds the record of a script line at the next clock.
func (h *harness) entry(line string) records.Entry {
	f := tokens(line)
	if len(f) < 5 {
		h.t.Fatalf("record line %q: want THREAD ACT KIND ACTOR TS [key=value ...]", line)
	}
	thread, act, kind, actor := f[0], f[1], f[2], f[3]
	if !strings.Contains(actor, ":") {
		actor = "did:sync:agent:" + actor
	}
	ts, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		h.t.Fatalf("record line %q: ts: %v", line, err)
	}
	opts := options(f[5:])
	var body any = map[string]any{}
	switch kind {
	case records.KindCheckpoint:
		body = &records.Checkpoint{Summary: opts["summary"], Learnings: []string{"l"}, Name: opts["name"], SessionID: opts["session"]}
	case records.KindErasure:
		er := &records.Erasure{Reason: opts["reason"]}
		for _, ref := range append(splitList(opts["targets"]), splitList(opts["noclock"])...) {
			r := h.byTime[h.at(ref)]
			if r == nil {
				h.t.Fatalf("record line %q: no record at %s", line, ref)
			}
			t := records.ErasureTarget{ID: r.ID(), Header: r.Header, Clock: h.at(ref)}
			if slices.Contains(splitList(opts["noclock"]), ref) {
				t.Clock = 0
			}
			er.Targets = append(er.Targets, t)
		}
		for _, th := range splitList(opts["ghosts"]) {
			g, err := records.New(records.ActKnow, "agent.step", th, actor, time.UnixMilli(1), map[string]any{})
			if err != nil {
				h.t.Fatal(err)
			}
			h.ghosts++
			h.byID[g.ID()] = fmt.Sprintf("@ghost%d", h.ghosts)
			er.Targets = append(er.Targets, records.ErasureTarget{ID: g.ID(), Header: g.Header})
		}
		body = er
	default:
		m := map[string]any{}
		for k, v := range opts {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				m[k] = n
			} else {
				m[k] = v
			}
		}
		body = m
	}
	r, err := records.New(act, kind, thread, actor, time.UnixMilli(ts), body)
	if err != nil {
		h.t.Fatalf("record line %q: %v", line, err)
	}
	r = r.WithPrev(h.heads[thread])
	h.heads[thread] = r.ID()
	e := records.Entry{Clock: h.clock, ID: r.ID(), Record: r}
	h.byID[e.ID] = fmt.Sprintf("@%d", h.clock)
	h.byTime[h.clock] = r
	return e
}

// diff prints the values that differ between two dumps of a store, as
// dump does, and "model key deleted" for the values gone.
func (h *harness) diff(before, after map[Key][]byte) string {
	var keys []Key
	for k, v := range after {
		if !bytes.Equal(before[k], v) {
			keys = append(keys, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			keys = append(keys, k)
		}
	}
	lines := make([]string, len(keys))
	for i, k := range keys {
		if v, ok := after[k]; ok {
			lines[i] = fmt.Sprintf("%s %s %s", k.Model, h.names(k.Key), h.names(string(v)))
		} else {
			lines[i] = fmt.Sprintf("%s %s deleted", k.Model, h.names(k.Key))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// dump prints every value of st, one "model key value" line each, in
// order, with ids written as @clock.
func (h *harness) dump(st *MemoryStore) string {
	vals := st.Dump()
	keys := make([]Key, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("%s %s %s", k.Model, h.names(k.Key), h.names(string(vals[k])))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// names replaces every id in s by its script name.
func (h *harness) names(s string) string {
	for id, name := range h.byID {
		s = strings.ReplaceAll(s, id.String(), name)
	}
	return s
}

// tokens splits a line at spaces, keeping double-quoted strings whole
// (without the quotes).
func tokens(line string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			inQuote, have = !inQuote, true
		case r == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

func options(args []string) map[string]string {
	m := make(map[string]string)
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			m[k] = v
		}
	}
	return m
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// The values append themselves as encoding/json encodes them.
func TestAppendJSON(t *testing.T) {
	id := records.ID{1, 2, 3}
	odd := "a\"b\\c<d>e&f\u2028g\u2029h\x01i\tj\nk\rl\bm\fn\xffo é 日本"
	for _, v := range []jsonAppender{
		&Thread{},
		&Thread{Thread: odd, Records: 3, Checkpoints: 1, First: 1, FirstID: id, Last: 9, LastID: id, LastActor: odd, LastTS: -5,
			Kinds: map[string]uint64{"b": 2, "a": 1, odd: 7}, Actors: map[string]uint64{}, AsOf: 12,
			Gaps:    []Gap{{After: 0, Before: 3, Top: id}, {After: 4, AfterID: &id, Before: 8, Top: id}},
			Session: &SessionState{Status: odd, ID: id, Clock: 4, TS: -2, Kind: odd}},
		&Checkpoint{},
		&Checkpoint{Thread: odd, ID: id, Clock: 4, TS: 1 << 40, Actor: odd, Name: odd, SessionID: "s", Summary: odd, AsOf: 9},
		&Erased{},
		&Erased{ID: id, Clock: 3, Thread: odd, Kind: "k", Prev: &id, Erasure: id, ErasureClock: 9, Reason: odd, TS: 77},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("appendJSON(%T):\n%s\nwant\n%s", v, got, want)
		}
	}
}

// An erasure that names an erasure record is refused by records.Validate,
// but one stored before that rule may be in a log. The log deletes nothing
// for such a target, so the fold takes nothing out of the models for it:
// the erasure record it names stays counted and is not listed as erased.
func TestFoldIgnoresErasureOfErasure(t *testing.T) {
	h := newHarness(t)
	h.run(scriptCase{cmd: "append", input: []string{
		"th_a KNOW agent.step ana 1000",
		`th_a FORGET core.erasure ops 1100 targets=@1 reason="r"`,
	}})
	first := h.byTime[2]
	body, err := records.Erasure{Targets: []records.ErasureTarget{{ID: first.ID(), Header: first.Header, Clock: 2}}, Reason: "old rules"}.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	forged := *first
	forged.Body = body
	forged.Header.TS = 1200
	forged.Header.Prev = first.ID()
	h.clock = 3
	e := records.Entry{Clock: 3, ID: forged.ID(), Record: &forged}
	if err := h.log.Append(e); err != nil {
		t.Fatal(err)
	}
	h.commit(h.state, []records.Entry{e})
	dump := h.store.Dump()
	if v, ok := dump[Key{ModelErased, first.ID().String()}]; ok {
		t.Fatalf("the erasure record is listed as erased: %s", v)
	}
	var th Thread
	if err := json.Unmarshal(dump[Key{ModelThreads, ThreadKey("th_a")}], &th); err != nil {
		t.Fatal(err)
	}
	if th.Records != 2 || th.First != 2 || th.Last != 3 {
		t.Fatalf("th_a = %+v, want 2 records (both erasures), first 2, last 3", th)
	}
	if got := h.run(scriptCase{cmd: "rebuild"}); got != "identical" {
		t.Fatalf("rebuild: %s", got)
	}
}
