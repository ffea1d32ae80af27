package rules

import (
	"flag"
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// The rules are pure: they import the standard library and records,
// nothing that could reach NATS or the log.
func TestImportsOnlyRecords(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range append(pkg.Imports, pkg.TestImports...) {
		first, _, _ := strings.Cut(imp, "/")
		if strings.Contains(first, ".") && imp != "github.com/spl-dev/spl/records" {
			t.Errorf("package rules imports %s: want only the standard library and records", imp)
		}
	}
}

// TestScripts runs the scripts in testdata/. A case is a command line,
// its input lines, "----", and the expected output up to a blank line;
// lines starting with # are comments. Commands:
//
//	retention keep_last=N [max_age=D] now=D [live]
//	    input: one checkpoint a line, oldest first: @N t=D [pinned]
//	    [exempt] (D a duration since the epoch, 90m); prints "kept N",
//	    "asked @N ..." (whom Exempt was asked), "asked live" (when the
//	    session's status was asked for) and "drop @N ..." (RetentionDrops)
//	parent [at=C]
//	    input: the thread's lineage entries, one a line, in clock order:
//	    "C checkpoint @N [erased=C]" or "C resume [@N]" (C a clock, @N
//	    the checkpoint a resume names; none: it names none); prints
//	    "parent @N" or "parent none" (Parent)
//	resume status=S [from=@N]
//	    input: the session's checkpoints, oldest first: "@N [dirty]
//	    [final]" (dirty: is_clean false; final: can_resume_from false);
//	    prints "from @N" or "refused WHY [@N]" (ResumeFrom)
//	resumable status=S
//	    input: the session's checkpoints as for resume; prints "yes" or
//	    "no" (Resumable), and "needs all" when its newest checkpoint alone
//	    does not decide (ResumeNeedsAll); the case fails when the newest
//	    alone would have decided otherwise than all of them
//	home reserved=R [thread=T] [all]
//	    prints "home H scope S" or "refused: RULE" (PolicyHome)
//	policies reserved=R thread=T [override]
//	    input: the newest policy record of a home a line, "HOME SCOPE";
//	    prints "homes H ..." (PolicyHomes) and "holds H ..." or "holds
//	    none" (PoliciesFor)
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder // the file again, with the outputs as they are now
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i := 0; i < len(lines); {
		line := lines[i]
		if line == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			i++
			continue
		}
		start := i + 1
		cmd := line
		var input []string
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			input = append(input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: no ---- after the case", path, start)
		}
		i++
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		got, err := runCase(cmd, input)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, start, err)
		}
		if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w && !*rewrite {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, start, cmd, g, w)
		}
		out.WriteString(strings.Join(append(append([]string{cmd}, input...), "----"), "\n") + "\n")
		for _, g := range got {
			out.WriteString(g + "\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// args splits "k=v" and bare words of a line.
func args(fields []string) (map[string]string, error) {
	m := make(map[string]string)
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			v = "true"
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%s given twice", k)
		}
		m[k] = v
	}
	return m, nil
}

// ids maps the script's @N to ids, and back.
type ids map[records.ID]string

func (m ids) of(name string) records.ID {
	h := records.Header{V: records.FormatVersion, Act: records.ActLearn, Kind: records.KindCheckpoint, Thread: "th", Actor: "did:sync:agent:x", TS: int64(len(m) + 1)}
	id := h.ID()
	m[id] = name
	return id
}

func runCase(cmd string, input []string) ([]string, error) {
	f := strings.Fields(cmd)
	a, err := args(f[1:])
	if err != nil {
		return nil, err
	}
	switch f[0] {
	case "retention":
		return retentionCase(a, input)
	case "parent":
		return parentCase(a, input)
	case "resume":
		return resumeCase(a, input)
	case "home":
		home, scope, err := PolicyHome(a["reserved"], a["thread"], a["all"] != "")
		if err != nil {
			return []string{"refused: " + err.Error()}, nil
		}
		return []string{"home " + home + " scope " + scope}, nil
	case "policies":
		return policiesCase(a, input)
	case "resumable":
		return resumableCase(a, input)
	}
	return nil, fmt.Errorf("unknown command %q", f[0])
}

func retentionCase(a map[string]string, input []string) ([]string, error) {
	var r Retention
	var err error
	if r.KeepLast, err = strconv.Atoi(a["keep_last"]); err != nil {
		return nil, fmt.Errorf("keep_last: %v", err)
	}
	if v, ok := a["max_age"]; ok {
		if r.MaxAge, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("max_age: %v", err)
		}
	}
	now, err := time.ParseDuration(a["now"])
	if err != nil {
		return nil, fmt.Errorf("now: %v", err)
	}
	names := ids{}
	var cps []RetentionCheckpoint
	var asked []string // the checkpoints Exempt was asked of
	for _, line := range input {
		f := strings.Fields(line)
		ca, err := args(f[1:])
		if err != nil {
			return nil, err
		}
		at, err := time.ParseDuration(ca["t"])
		if err != nil {
			return nil, fmt.Errorf("%s: t: %v", line, err)
		}
		name, exempt := f[0], ca["exempt"] != ""
		cps = append(cps, RetentionCheckpoint{ID: names.of(name), Time: time.Unix(0, 0).Add(at), Pinned: ca["pinned"] != "",
			Exempt: func() bool { asked = append(asked, name); return exempt }})
	}
	liveAsked := false
	kept, drop := RetentionDrops(cps, r, time.Unix(0, 0).Add(now), func() bool { liveAsked = true; return a["live"] != "" })
	out := []string{fmt.Sprintf("kept %d", kept)}
	if liveAsked {
		out = append(out, "asked live")
	}
	if len(asked) > 0 {
		out = append(out, "asked "+strings.Join(asked, " "))
	}
	if len(drop) > 0 {
		ds := make([]string, len(drop))
		for i, id := range drop {
			ds[i] = names[id]
		}
		out = append(out, "drop "+strings.Join(ds, " "))
	}
	return out, nil
}

// name returns the id of @N, made on first use.
func (m ids) name(n string) records.ID {
	for id, v := range m {
		if v == n {
			return id
		}
	}
	return m.of(n)
}

// uintArg reads the whole number of key k of a (0 when absent).
func uintArg(a map[string]string, k string) (uint64, error) {
	v, ok := a[k]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", k, err)
	}
	return n, nil
}

func parentCase(a map[string]string, input []string) ([]string, error) {
	at, err := uintArg(a, "at")
	if err != nil {
		return nil, err
	}
	names := ids{}
	var entries []LineageEntry
	for _, line := range input {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("%q: want CLOCK checkpoint|resume ...", line)
		}
		clock, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: clock: %v", line, err)
		}
		e := LineageEntry{Clock: clock}
		switch f[1] {
		case "checkpoint":
			if len(f) < 3 {
				return nil, fmt.Errorf("%q: a checkpoint needs its @N", line)
			}
			ea, err := args(f[3:])
			if err != nil {
				return nil, err
			}
			e.ID = names.name(f[2])
			if e.ErasedAt, err = uintArg(ea, "erased"); err != nil {
				return nil, fmt.Errorf("%q: %v", line, err)
			}
		case "resume":
			e.Resume = true
			if len(f) > 2 {
				e.ID = names.name(f[2])
			}
		default:
			return nil, fmt.Errorf("%q: want checkpoint or resume, got %q", line, f[1])
		}
		entries = append(entries, e)
	}
	p := Parent(entries, at)
	if p.IsZero() {
		return []string{"parent none"}, nil
	}
	return []string{"parent " + names[p]}, nil
}

// refusals names each Refusal in the scripts.
var refusals = map[Refusal]string{
	RefuseCompleted: "completed", RefuseNoCheckpoint: "no-checkpoint", RefuseNoCleanPoint: "no-clean-point",
	RefuseUnknownFrom: "unknown-from", RefuseNotResumable: "not-resumable",
}

// resumePoints reads a session's checkpoints, "@N [dirty] [final]" a
// line, oldest first.
func resumePoints(input []string) (ids, []ResumePoint, error) {
	names := ids{}
	var points []ResumePoint
	for _, line := range input {
		f := strings.Fields(line)
		pa, err := args(f[1:])
		if err != nil {
			return nil, nil, err
		}
		points = append(points, ResumePoint{ID: names.name(f[0]), Clean: pa["dirty"] == "", Resumable: pa["final"] == ""})
	}
	return names, points, nil
}

func resumableCase(a map[string]string, input []string) ([]string, error) {
	_, points, err := resumePoints(input)
	if err != nil {
		return nil, err
	}
	status := a["status"]
	yes := Resumable(status, points)
	out := []string{map[bool]string{true: "yes", false: "no"}[yes]}
	var newest []ResumePoint
	var last ResumePoint
	if n := len(points); n > 0 {
		newest, last = points[n-1:], points[n-1]
	}
	if ResumeNeedsAll(status, last, len(points) > 0) {
		out = append(out, "needs all")
	} else if Resumable(status, newest) != yes {
		return nil, fmt.Errorf("status %s: the newest checkpoint alone decides %v, all of them %v, and ResumeNeedsAll is false", status, !yes, yes)
	}
	return out, nil
}

func resumeCase(a map[string]string, input []string) ([]string, error) {
	names, points, err := resumePoints(input)
	if err != nil {
		return nil, err
	}
	var from records.ID
	if n, ok := a["from"]; ok {
		from = names.name(n)
	}
	i, why := ResumeFrom(a["status"], points, from)
	switch {
	case why == RefuseNotResumable:
		return []string{"refused " + refusals[why] + " " + names[points[i].ID]}, nil
	case why != NotRefused:
		if i != -1 {
			return nil, fmt.Errorf("refused %v with index %d, want -1", why, i)
		}
		return []string{"refused " + refusals[why]}, nil
	}
	return []string{"from " + names[points[i].ID]}, nil
}

func policiesCase(a map[string]string, input []string) ([]string, error) {
	var recs []PolicyRecord
	for _, line := range input {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%q: want HOME SCOPE", line)
		}
		recs = append(recs, PolicyRecord{Thread: f[0], Scope: f[1]})
	}
	reserved, thread := a["reserved"], a["thread"]
	out := []string{"homes " + strings.Join(PolicyHomes(reserved, thread), " ")}
	var holds []string
	for _, i := range PoliciesFor(reserved, thread, recs, a["override"] != "") {
		holds = append(holds, recs[i].Thread)
	}
	if len(holds) == 0 {
		holds = []string{"none"}
	}
	return append(out, "holds "+strings.Join(holds, " ")), nil
}
