package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	splog "github.com/spl-dev/spl/log"
	"github.com/spl-dev/spl/log/logtest"
	"github.com/spl-dev/spl/records"
	"github.com/spl-dev/spl/sdk"
	"github.com/spl-dev/spl/wire"
)

// saveJSON saves a checkpoint with spl and returns its receipt.
func saveJSON(t *testing.T, home, thread, summary string, extra ...string) receiptJSON {
	t.Helper()
	args := append([]string{"session", "save", "--thread", thread, "--summary", summary, "--learnings", "l", "--actor", seedActor, "--json"}, extra...)
	return decodeJSON[receiptJSON](t, mustSPL(t, home, "", args...).stdout)
}

func TestEraseCommand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SPL_ACTOR", seedActor)
	first := saveJSON(t, home, "th_e", "first")
	second := saveJSON(t, home, "th_e", "second")

	out := mustSPL(t, home, "", "erase", second.ID, "--thread", "th_e", "--reason", "user asked").stdout
	if !strings.HasPrefix(out, "erased: "+second.ID+"\n") || !idLine.MatchString(out) || !clockLine.MatchString(out) {
		t.Fatalf("erase printed:\n%s", out)
	}
	erasure := idLine.FindStringSubmatch(out)[1]
	again := mustSPL(t, home, "", "erase", second.ID, "--thread", "th_e", "--reason", "again").stdout
	if got, want := again, "already erased: "+second.ID+", nothing to do\n"; got != want {
		t.Fatalf("erasing twice printed %q, want %q", got, want)
	}

	// session show falls back to the checkpoint before the erased one.
	show := decodeJSON[wire.Checkpoint](t, mustSPL(t, home, "", "session", "show", "th_e", "--json").stdout)
	if got, want := show.ID, first.ID; got != want {
		t.Fatalf("session show: %s, want the first checkpoint %s", got, want)
	}

	// thread tail skips it; with --tombstones it has one line.
	tail := mustSPL(t, home, "", "thread", "tail", "th_e").stdout
	if strings.Contains(tail, second.ID[len(second.ID)-12:]) {
		t.Fatalf("tail shows the erased record:\n%s", tail)
	}
	tomb := mustSPL(t, home, "", "thread", "tail", "th_e", "--tombstones").stdout
	want := fmt.Sprintf("[erased by %s at ", erasure[len(erasure)-12:])
	if n := strings.Count(tomb, "[erased by "); n != 1 || !strings.Contains(tomb, want) || !strings.Contains(tomb, ": user asked]") {
		t.Fatalf("tail --tombstones lacks one line %q…: user asked]:\n%s", want, tomb)
	}
	tj := decodeJSON[[]tailJSON](t, mustSPL(t, home, "", "thread", "tail", "th_e", "--tombstones", "--json").stdout)
	if len(tj) != 3 || tj[1].ID != second.ID || tj[1].Erased == nil || tj[1].Erased.By != erasure ||
		tj[1].Erased.Reason != "user asked" || string(tj[1].Body) != "null" {
		t.Fatalf("tail --tombstones --json: %+v", tj)
	}
	if last := decodeJSON[[]tailJSON](t, mustSPL(t, home, "", "thread", "tail", "th_e", "--tombstones", "-n", "2", "--json").stdout); len(last) != 2 || last[0].ID != second.ID {
		t.Fatalf("tail --tombstones -n 2: %+v, want the tombstone and the erasure", last)
	}

	// record show: the erased id with its thread, a live one anywhere.
	rs := mustSPL(t, home, "", "record", "show", second.ID, "--thread", "th_e").stdout
	if !strings.Contains(rs, "erased      by "+erasure) || !strings.Contains(rs, "user asked") {
		t.Fatalf("record show of the erased id:\n%s", rs)
	}
	if r := spl(t, home, "", "record", "show", second.ID); r.code != ExitNotFound || !strings.Contains(r.stderr, "--thread") {
		t.Fatalf("record show of the erased id without its thread: exit %d, %s", r.code, r.stderr)
	}
	live := decodeJSON[shownJSON](t, mustSPL(t, home, "", "record", "show", first.ID, "--json").stdout)
	if !live.Verified || live.ID != first.ID || live.Problem != "" {
		t.Fatalf("record show --json: %+v", live)
	}
	if text := mustSPL(t, home, "", "record", "show", first.ID).stdout; !strings.HasSuffix(text, "verified    ok\n") {
		t.Fatalf("record show:\n%s", text)
	}

	v := decodeJSON[verifyJSON](t, mustSPL(t, home, "", "verify", "th_e", "--json").stdout)
	if !v.OK || v.Checked != 2 || len(v.Erased) != 1 || v.Erased[0].ErasedBy != erasure {
		t.Fatalf("verify --json: %+v", v)
	}
	if text := mustSPL(t, home, "", "verify", "--all").stdout; !strings.HasSuffix(text, "\nok\n") {
		t.Fatalf("verify --all:\n%s", text)
	}
}

func TestEraseRefusalsCommand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SPL_ACTOR", seedActor)
	a := saveJSON(t, home, "th_x", "a")
	b := saveJSON(t, home, "th_x", "b")
	other := saveJSON(t, home, "th_other", "o")
	done := mustSPL(t, home, "", "erase", a.ID, "--thread", "th_x", "--reason", "r").stdout
	erasure := idLine.FindStringSubmatch(done)[1]
	before := mustSPL(t, home, "", "thread", "tail", "th_x", "--json").stdout
	unknown := "bafir4icqw2edubnyo6vxli4omemigxzdg6mztntrymima5izpadlzoktj4"
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"erasure record", []string{"erase", erasure, "--thread", "th_x", "--reason", "r"}, ExitUsage, "is an erasure record"},
		{"unknown id", []string{"erase", unknown, "--thread", "th_x", "--reason", "r"}, ExitNotFound, unknown},
		{"other thread", []string{"erase", other.ID, "--thread", "th_x", "--reason", "r"}, ExitUsage, `is on thread "th_other"`},
		{"one bad among good", []string{"erase", b.ID, unknown, "--thread", "th_x", "--reason", "r"}, ExitNotFound, unknown},
		{"not an id", []string{"erase", "xyz", "--thread", "th_x", "--reason", "r"}, ExitUsage, "multibase prefix"},
		{"no reason", []string{"erase", b.ID, "--thread", "th_x"}, ExitUsage, "--reason is required"},
		{"empty reason", []string{"erase", b.ID, "--thread", "th_x", "--reason", ""}, ExitUsage, "body.reason"},
		{"no thread", []string{"erase", b.ID, "--reason", "r"}, ExitUsage, "--thread is required"},
		{"no id", []string{"erase", "--thread", "th_x", "--reason", "r"}, ExitUsage, "by id, or the messages that are no records by --clock"},
		{"ids and clocks", []string{"erase", b.ID, "--clock", "3", "--thread", "th_x", "--reason", "r"}, ExitUsage, "ids or --clock, not both"},
		{"clock zero", []string{"erase", "--clock", "0", "--thread", "th_x", "--reason", "r"}, ExitUsage, "clocks: must be positive"},
		{"clock of nothing", []string{"erase", "--clock", "999", "--thread", "th_x", "--reason", "r"}, ExitNotFound, "no message there"},
		{"verify both", []string{"verify", "th_x", "--all"}, ExitUsage, "a thread or --all"},
		{"verify neither", []string{"verify"}, ExitUsage, "give a thread to verify, or --all"},
		{"show unknown", []string{"record", "show", unknown, "--thread", "th_x"}, ExitNotFound, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := spl(t, home, "", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) || r.stdout != "" {
				t.Fatalf("exit %d, stderr %q, stdout %q; want exit %d and %q", r.code, r.stderr, r.stdout, tc.code, tc.stderr)
			}
			if got, want := strings.Count(r.stderr, "spl: "), 1; got != want {
				t.Fatalf("the error is printed %d times:\n%s", got, r.stderr)
			}
		})
	}
	if after := mustSPL(t, home, "", "thread", "tail", "th_x", "--json").stdout; after != before {
		t.Fatalf("refused erasures changed the thread:\n%s\nwas:\n%s", after, before)
	}
}

// damage opens the log in home behind spl's back, deletes the message at
// clock del without an erasure, and republishes the record at clock forge
// with its body changed. It returns the forged clock.
func damage(t *testing.T, home string, del, forgeAt uint64, body map[string]any) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clock, err := logtest.Damage(ctx, home, del, forgeAt, body)
	if err != nil {
		t.Fatal(err)
	}
	return clock
}

func TestVerifyDamageCommand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SPL_ACTOR", seedActor)
	a := saveJSON(t, home, "th_d", "a")
	b := saveJSON(t, home, "th_d", "b")
	c := saveJSON(t, home, "th_d", "c")
	forged := damage(t, home, a.Clock, c.Clock, map[string]any{"summary": "forged", "learnings": []any{"x"}})

	r := spl(t, home, "", "verify", "th_d")
	if r.code != ExitCorrupt || !strings.Contains(r.stderr, "1 corrupt, 1 missing") {
		t.Fatalf("verify: exit %d, stderr %q; want %d", r.code, r.stderr, ExitCorrupt)
	}
	for _, want := range []string{"corrupt  1", "missing  1", fmt.Sprintf("%d", forged), c.ID, a.ID, "body digest mismatch"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("verify output lacks %q:\n%s", want, r.stdout)
		}
	}
	v := decodeJSON[verifyJSON](t, spl(t, home, "", "verify", "th_d", "--json").stdout)
	if v.OK || len(v.Corrupt) != 1 || v.Corrupt[0].Clock != forged || *v.Corrupt[0].ID != c.ID ||
		len(v.Missing) != 1 || *v.Missing[0].ID != a.ID || v.Missing[0].Clock != b.Clock {
		t.Fatalf("verify --json: %+v", v)
	}

	show := spl(t, home, "", "session", "show", "th_d", "--json")
	if show.code != ExitOK || decodeJSON[wire.Checkpoint](t, show.stdout).ID != c.ID {
		t.Fatalf("session show: exit %d, %s %s", show.code, show.stdout, show.stderr)
	}
	if got, want := show.stderr, fmt.Sprintf("spl: skipped corrupt checkpoint at clock %d\n", forged); got != want {
		t.Fatalf("session show stderr=%q, want %q", got, want)
	}

	rs := spl(t, home, "", "record", "show", c.ID)
	if rs.code != ExitCorrupt || !strings.Contains(rs.stdout, "verified    no: verification failed") ||
		!strings.Contains(rs.stdout, "forged") || !strings.Contains(rs.stderr, "corrupt") {
		t.Fatalf("record show of the forged id: exit %d\n%s\n%s", rs.code, rs.stdout, rs.stderr)
	}

	tail := spl(t, home, "", "thread", "tail", "th_d")
	if tail.code != ExitCorrupt || !strings.Contains(tail.stdout, b.ID[len(b.ID)-12:]) || !strings.Contains(tail.stderr, fmt.Sprintf("clock %d", forged)) {
		t.Fatalf("thread tail: exit %d\n%s\n%s", tail.code, tail.stdout, tail.stderr)
	}
}

func TestRetentionCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SPL_ACTOR", seedActor)
	var cps []receiptJSON
	for i := range 6 {
		var extra []string
		if i == 1 {
			extra = []string{"--name", "release"}
		}
		cps = append(cps, saveJSON(t, home, "th_r", fmt.Sprintf("c%d", i), extra...))
	}
	if r := mustSPL(t, home, "", "retention", "show"); r.stdout != "" || !strings.Contains(r.stderr, "no retention policy") {
		t.Fatalf("retention show without policies: %q %q", r.stdout, r.stderr)
	}
	mustSPL(t, home, "", "session", "pin", cps[2].ID, "--reason", "keep")
	if out := mustSPL(t, home, "", "session", "pin", cps[2].ID, "--thread", "th_r").stdout; !strings.HasPrefix(out, "already pinned: ") {
		t.Fatalf("pinning twice printed %q", out)
	}
	mustSPL(t, home, "", "retention", "set", "--all", "--keep-last", "2", "--max-age", "30d")
	mustSPL(t, home, "", "retention", "set", "--thread", "th_r", "--keep-last", "1")

	ps := decodeJSON[[]policyJSON](t, mustSPL(t, home, "", "retention", "show", "--json").stdout)
	if len(ps) != 2 || ps[0].Scope != "all" || ps[0].MaxAgeMS != 30*24*3600*1000 || ps[1].Thread != "th_r" || ps[1].KeepLast != 1 {
		t.Fatalf("retention show --json: %+v", ps)
	}
	if text := mustSPL(t, home, "", "retention", "show").stdout; !strings.Contains(text, "30d") || !strings.Contains(text, "th_r") {
		t.Fatalf("retention show:\n%s", text)
	}

	applied := decodeJSON[[]appliedJSON](t, mustSPL(t, home, "", "retention", "apply", "--json").stdout)
	if len(applied) != 1 || len(applied[0].Erased) != 3 || applied[0].Kept != 3 || len(applied[0].Erasures) != 1 {
		t.Fatalf("retention apply: %+v, want 3 erased (c0, c3, c4) and 3 kept", applied)
	}
	list := decodeJSON[[]wire.Checkpoint](t, mustSPL(t, home, "", "session", "list", "--thread", "th_r", "--json").stdout)
	var got []string
	for _, cp := range list {
		got = append(got, cp.Summary)
	}
	if strings.Join(got, " ") != "c1 c2 c5" {
		t.Fatalf("checkpoints left: %v, want c1 (named) c2 (pinned) c5 (newest)", got)
	}
	if out := mustSPL(t, home, "", "retention", "apply").stdout; !strings.Contains(out, "erased 0 checkpoints on 1 threads") {
		t.Fatalf("applying twice:\n%s", out)
	}
	// Enforced at save: the previous newest goes.
	saveJSON(t, home, "th_r", "c6")
	list = decodeJSON[[]wire.Checkpoint](t, mustSPL(t, home, "", "session", "list", "--thread", "th_r", "--json").stdout)
	if len(list) != 3 || list[2].Summary != "c6" {
		t.Fatalf("after a save: %d checkpoints, newest %q", len(list), list[len(list)-1].Summary)
	}
	tomb := mustSPL(t, home, "", "thread", "tail", "th_r", "-n", "0", "--tombstones").stdout
	if got := strings.Count(tomb, ": retention]"); got != 4 {
		t.Fatalf("%d tombstones with reason retention, want 4:\n%s", got, tomb)
	}

	step := decodeJSON[receiptJSON](t, mustSPL(t, home, "", "emit", "--thread", "th_r", "--act", "DO", "--kind", "agent.step", "--body", "{}", "--json").stdout)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"retention", "set", "--keep-last", "1"}, "--thread or --all"},
		{[]string{"retention", "set", "--all", "--thread", "t", "--keep-last", "1"}, "--thread or --all"},
		{[]string{"retention", "set", "--all"}, "--keep-last is required"},
		{[]string{"retention", "set", "--all", "--keep-last", "0"}, "keep_last"},
		{[]string{"retention", "set", "--all", "--keep-last", "1", "--max-age", "soon"}, "--max-age"},
		{[]string{"retention", "set", "--thread", sdk.RetentionThread, "--keep-last", "1"}, "reserved"},
		{[]string{"session", "pin", step.ID}, "only checkpoints"},
	} {
		r := spl(t, home, "", tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("spl %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, ExitUsage, tc.stderr)
		}
	}
}

// Clearing a thread's policy leaves the policy of all threads in force;
// clearing that one leaves none. Each clear erases the policy's records.
func TestRetentionClearCommand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SPL_ACTOR", seedActor)
	mustSPL(t, home, "", "retention", "set", "--all", "--keep-last", "2")
	mustSPL(t, home, "", "retention", "set", "--thread", "th_r", "--keep-last", "1")
	mustSPL(t, home, "", "retention", "set", "--thread", "th_r", "--keep-last", "3")

	out := mustSPL(t, home, "", "retention", "clear", "--thread", "th_r").stdout
	if strings.Count(out, "erased: ") != 2 || !strings.Contains(out, "clock: ") {
		t.Fatalf("retention clear --thread printed:\n%s\nwant both policy records erased and the erasure record", out)
	}
	ps := decodeJSON[[]policyJSON](t, mustSPL(t, home, "", "retention", "show", "--json").stdout)
	if len(ps) != 1 || ps[0].Scope != "all" {
		t.Fatalf("after clearing th_r: %+v, want the policy of all threads only", ps)
	}
	cleared := decodeJSON[eraseJSON](t, mustSPL(t, home, "", "retention", "clear", "--all", "--json").stdout)
	if cleared.Thread != sdk.RetentionThread || len(cleared.Erased) != 1 || len(cleared.Erasures) != 1 {
		t.Fatalf("retention clear --all --json: %+v", cleared)
	}
	if r := mustSPL(t, home, "", "retention", "show"); r.stdout != "" || !strings.Contains(r.stderr, "no retention policy") {
		t.Fatalf("retention show after clearing both: %q %q", r.stdout, r.stderr)
	}
	if r := mustSPL(t, home, "", "retention", "clear", "--all"); r.stdout != "" || !strings.Contains(r.stderr, "nothing to clear") {
		t.Fatalf("clearing again: %q %q", r.stdout, r.stderr)
	}
	tomb := mustSPL(t, home, "", "thread", "tail", "th_r", "-n", "0", "--tombstones").stdout
	if got := strings.Count(tomb, ": "+sdk.ReasonRetentionCleared+"]"); got != 2 {
		t.Fatalf("%d tombstones with reason %q, want 2:\n%s", got, sdk.ReasonRetentionCleared, tomb)
	}
	for _, args := range [][]string{
		{"retention", "clear"},
		{"retention", "clear", "--all", "--thread", "t"},
	} {
		if r := spl(t, home, "", args...); r.code != ExitUsage || !strings.Contains(r.stderr, "--thread or --all") {
			t.Errorf("spl %v: exit %d, stderr %q; want %d naming --thread or --all", args, r.code, r.stderr, ExitUsage)
		}
	}
}

func TestParseAge(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"30d", 30 * 24 * time.Hour},
		{"2w", 14 * 24 * time.Hour},
		{"36h", 36 * time.Hour},
		{"90m", 90 * time.Minute},
	} {
		got, err := parseAge(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseAge(%q)=%v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, _ := parseAge(formatAge(got)); back != got {
			t.Errorf("formatAge(%v)=%q does not parse back", got, formatAge(got))
		}
	}
	for _, bad := range []string{"", "0d", "-1h", "d", "1.5d", "soon"} {
		if _, err := parseAge(bad); err == nil {
			t.Errorf("parseAge(%q) succeeded", bad)
		}
	}
}

func TestExitCodeErasure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&runError{fmt.Errorf("erase: %w", sdk.ErrNotErasable)}, ExitUsage},
		{&runError{fmt.Errorf("verify: %w", errDamaged)}, ExitCorrupt},
		{&runError{&splog.CorruptError{Clock: 3, Reason: "r"}}, ExitCorrupt},
		{&runError{&sdk.ErasedError{}}, ExitNotFound},
		{&runError{errors.Join(&splog.CorruptError{Clock: 3}, &splog.CorruptError{Clock: 4})}, ExitCorrupt},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v)=%v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestTailTableTombstones(t *testing.T) {
	recs := []sdk.Record{}
	var tombs []sdk.Tombstone
	for i, cp := range fixedCheckpoints() {
		if i == 1 {
			tombs = append(tombs, sdk.Tombstone{
				ID: cp.ID, Clock: cp.Clock, Header: cp.Header,
				ErasedBy: sdk.Receipt{ID: fixedID(0x77), Clock: 99}, Actor: "did:sync:user:alice",
				Time: fixedTime.Add(48 * time.Hour), Reason: "asked to be forgotten (ticket 4411)",
			})
			continue
		}
		body, err := records.Checkpoint{Summary: cp.Checkpoint.Summary, Learnings: cp.Checkpoint.Learnings}.MarshalCBOR()
		if err != nil {
			t.Fatal(err)
		}
		cp.Body = body
		recs = append(recs, cp.Record)
	}
	var b bytes.Buffer
	if err := writeTailTable(&b, recs, tombs); err != nil {
		t.Fatal(err)
	}
	b.WriteString("--\n")
	if err := writeShown(&b, sdk.Record{ID: tombs[0].ID, Clock: tombs[0].Clock}, nil, &tombs[0]); err != nil {
		t.Fatal(err)
	}
	b.WriteString("--\n")
	if err := writeShown(&b, recs[0], nil, nil); err != nil {
		t.Fatal(err)
	}
	b.WriteString("--\n")
	err := &splog.CorruptError{Clock: 12, Subject: "spl.rec.th.agent.step", Reason: "verification failed", Err: errors.New("body digest mismatch")}
	if err := writeShown(&b, sdk.Record{ID: fixedID(0x42), Clock: 12}, err, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "thread_tail_tombstones.golden", b.String())
}

func TestVerifyReport(t *testing.T) {
	rep := sdk.VerifyReport{
		Checked: 1041, Threads: 3,
		Erased: []sdk.ErasedRecord{{ID: fixedID(1), Clock: 5, Thread: "th", ErasedBy: fixedID(2), Reason: "r"}},
		Corrupt: []sdk.VerifyProblem{{Clock: 17, Subject: "spl.rec.th_d.agent.step", ID: fixedID(3),
			Reason: "verification failed: verify record: body digest mismatch: spl/records: corrupt record"}},
		Missing: []sdk.VerifyProblem{
			{Clock: 9, Subject: "spl.rec.th_d.agent.step", ID: fixedID(4), Reason: "previous record " + fixedID(4).String() + " is not in the log and no erasure names it"},
			{Clock: 8, Reason: "message deleted and no erasure names it"},
		},
		Signed: 1030, UnsignedCount: 1,
		Unsigned: []sdk.SigProblem{{Clock: 3, ID: fixedID(5), Thread: "th_d", Actor: "did:sync:agent:dev", Reason: "unsigned"}},
		BadSig: []sdk.SigProblem{{Clock: 21, ID: fixedID(6), Thread: "th_d", Actor: "did:sync:agent:dev",
			Key: "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp", Bound: "did:key:z6MkpTHR8VNsBxYAAWHut2Geadd9jSwuBV8xRoAnwWsdvktH",
			Reason: "signed by did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp, but the key of actor did:sync:agent:dev is did:key:z6MkpTHR8VNsBxYAAWHut2Geadd9jSwuBV8xRoAnwWsdvktH"}},
	}
	var b bytes.Buffer
	if err := writeVerify(&b, rep, false); err != nil {
		t.Fatal(err)
	}
	b.WriteString("--\n")
	if err := writeVerify(&b, sdk.VerifyReport{Checked: 12, Threads: 1}, false); err != nil {
		t.Fatal(err)
	}
	golden(t, "verify.golden", b.String())
}

// The commands that take a record's id take the end the tables print:
// erase (on its thread), session pin and session diff without --thread
// (looked for in the whole log).
func TestShortIDs(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SPL_ACTOR", seedActor)
	a := saveJSON(t, home, "th_short", "a")
	b := saveJSON(t, home, "th_short", "b")
	c := saveJSON(t, home, "th_short", "c")
	end := func(id string) string { return id[len(id)-12:] }

	if out := mustSPL(t, home, "", "session", "pin", end(a.ID)).stdout; !strings.HasPrefix(out, "pinned: "+a.ID+"\n") {
		t.Fatalf("session pin by the end of the id printed:\n%s", out)
	}
	if out := mustSPL(t, home, "", "session", "diff", end(a.ID), end(b.ID), "--json").stdout; !strings.Contains(out, a.ID) || !strings.Contains(out, b.ID) {
		t.Fatalf("session diff by the ends of the ids printed:\n%s", out)
	}
	if out := mustSPL(t, home, "", "erase", end(c.ID), "--thread", "th_short", "--reason", "r").stdout; !strings.HasPrefix(out, "erased: "+c.ID+"\n") {
		t.Fatalf("erase by the end of the id printed:\n%s", out)
	}
	r := spl(t, home, "", "erase", end(a.ID), "--thread", "th_other", "--reason", "r")
	if r.code != ExitNotFound || !strings.Contains(r.stderr, `no record of thread "th_other" has an id ending`) {
		t.Fatalf("erase by an end on another thread: exit %d %s", r.code, r.stderr)
	}
	if r := spl(t, home, "", "session", "pin", "bafir4"); r.code != ExitUsage {
		t.Fatalf("pin of 6 characters: exit %d %s, want %d", r.code, r.stderr, ExitUsage)
	}
}
