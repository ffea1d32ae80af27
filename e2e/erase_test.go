package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/log/logtest"
)

// receipt is the --json receipt of session save and emit.
type receipt struct {
	ID    string `json:"id"`
	Clock uint64 `json:"clock"`
}

// save saves a checkpoint with spl and returns its receipt.
func (h *home) save(t *testing.T, thread, summary string, extra ...string) receipt {
	t.Helper()
	args := append([]string{"session", "save", "--thread", thread, "--summary", summary,
		"--learnings", "l", "--actor", seedActor, "--json"}, extra...)
	return decode[receipt](t, h.mustRun(t, nil, args...).stdout)
}

// filesHolding lists the files under dir whose bytes contain marker.
func filesHolding(t *testing.T, dir, marker string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(marker)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestErasureIsPhysical is the proof of erasure: a checkpoint's summary
// holds a unique marker; after "spl erase" and with every spl process gone
// (so the embedded server is stopped), no file under the data directory
// holds the marker any more.
func TestErasureIsPhysical(t *testing.T) {
	h := newHome(t)
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	marker := "SPL-ERASE-PROOF-" + hex.EncodeToString(rnd[:])

	h.save(t, "th_proof", "before the secret")
	secret := h.save(t, "th_proof", "the secret is "+marker)
	h.save(t, "th_proof", "after the secret")
	if found := filesHolding(t, h.dir, marker); len(found) == 0 {
		t.Fatalf("the marker is on no file before the erasure: the test would prove nothing")
	} else {
		t.Logf("before the erasure the marker is in %v", found)
	}

	out := h.mustRun(t, nil, "erase", secret.ID, "--thread", "th_proof", "--reason", "proof of erasure", "--actor", seedActor).stdout
	if !strings.Contains(out, "erased: "+secret.ID) {
		t.Fatalf("erase printed:\n%s", out)
	}
	// Every spl process has exited: the server is stopped and its files
	// closed. Nothing may hold the marker.
	if found := filesHolding(t, h.dir, marker); len(found) != 0 {
		t.Fatalf("the erased marker is still on disk in %v", found)
	}
	// The log goes on, and the thread verifies through the erasure.
	v := h.mustRun(t, nil, "verify", "th_proof", "--json").stdout
	if !strings.Contains(v, `"ok": true`) {
		t.Fatalf("verify after erasure:\n%s", v)
	}
}

func TestEraseRefusals(t *testing.T) {
	h := newHome(t)
	a := h.save(t, "th_x", "a")
	b := h.save(t, "th_x", "b")
	other := h.save(t, "th_other", "o")
	done := h.mustRun(t, nil, "erase", a.ID, "--thread", "th_x", "--reason", "r", "--actor", seedActor, "--json").stdout
	var res struct {
		Erasures []receipt `json:"erasures"`
	}
	if err := json.Unmarshal([]byte(done), &res); err != nil || len(res.Erasures) != 1 {
		t.Fatalf("erase --json: %v\n%s", err, done)
	}
	before := h.mustRun(t, nil, "thread", "tail", "th_x", "-n", "0", "--json").stdout
	otherBefore := h.mustRun(t, nil, "thread", "tail", "th_other", "-n", "0", "--json").stdout
	unknown := "bafir4icqw2edubnyo6vxli4omemigxzdg6mztntrymima5izpadlzoktj4"
	for _, tc := range []struct {
		name   string
		ids    []string
		code   int
		stderr string
	}{
		{"an erasure record", []string{res.Erasures[0].ID}, 1, "is an erasure record"},
		{"an id that does not exist", []string{unknown}, 2, "not found"},
		{"an id on another thread", []string{other.ID}, 1, `is on thread "th_other"`},
		{"a good id with a bad one", []string{b.ID, unknown}, 2, unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"erase"}, tc.ids...), "--thread", "th_x", "--reason", "r", "--actor", seedActor)
			r := h.run(t, nil, args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) || !strings.HasPrefix(r.stderr, "spl: erase: ") {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tc.code, tc.stderr)
			}
			if r.stdout != "" {
				t.Fatalf("stdout %q, want nothing", r.stdout)
			}
		})
	}
	if after := h.mustRun(t, nil, "thread", "tail", "th_x", "-n", "0", "--json").stdout; after != before {
		t.Fatalf("refused erasures changed th_x")
	}
	if after := h.mustRun(t, nil, "thread", "tail", "th_other", "-n", "0", "--json").stdout; after != otherBefore {
		t.Fatalf("refused erasures changed th_other")
	}
	again := h.mustRun(t, nil, "erase", a.ID, "--thread", "th_x", "--reason", "again", "--actor", seedActor).stdout
	if got, want := again, "already erased: "+a.ID+", nothing to do\n"; got != want {
		t.Fatalf("erasing an erased id printed %q, want %q", got, want)
	}
	if after := h.mustRun(t, nil, "thread", "tail", "th_x", "-n", "0", "--json").stdout; after != before {
		t.Fatalf("erasing an erased id changed th_x")
	}
}

func TestTombstonesAndLatest(t *testing.T) {
	h := newHome(t)
	first := h.save(t, "th_t", "first checkpoint")
	h.mustRun(t, nil, "emit", "--thread", "th_t", "--act", "DO", "--kind", "agent.step", "--body", `{"n":1}`, "--actor", seedActor)
	latest := h.save(t, "th_t", "latest checkpoint")
	h.mustRun(t, nil, "erase", latest.ID, "--thread", "th_t", "--reason", "wrong summary", "--actor", "did:sync:user:alice")

	show := h.mustRun(t, nil, "session", "show", "th_t")
	if !strings.Contains(show.stdout, "first checkpoint") || !strings.Contains(show.stdout, first.ID) || show.stderr != "" {
		t.Fatalf("session show after erasing the latest checkpoint:\n%s\n%s", show.stdout, show.stderr)
	}
	plain := h.mustRun(t, nil, "thread", "tail", "th_t").stdout
	if strings.Contains(plain, latest.ID[len(latest.ID)-12:]) {
		t.Fatalf("thread tail shows the erased record:\n%s", plain)
	}
	tail := h.mustRun(t, nil, "thread", "tail", "th_t", "--tombstones").stdout
	var line string
	for _, l := range strings.Split(tail, "\n") {
		if strings.Contains(l, latest.ID[len(latest.ID)-12:]) {
			line = l
		}
	}
	if !strings.HasPrefix(line, fmt.Sprint(latest.Clock)+" ") || !strings.Contains(line, "[erased by ") || !strings.Contains(line, ": wrong summary]") {
		t.Fatalf("no tombstone line for the erased checkpoint:\n%s", tail)
	}
	if got := strings.Count(tail, "[erased by "); got != 1 {
		t.Fatalf("%d tombstone lines, want 1:\n%s", got, tail)
	}
}

// damage opens the data directory's log in this process, behind spl's
// back, deletes the message at clock del (no erasure record) and
// republishes the record at clock forgeAt with its body changed. It
// returns the forged message's clock.
func damage(t *testing.T, dir string, del, forgeAt uint64, body map[string]any) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clock, err := logtest.Damage(ctx, dir, del, forgeAt, body)
	if err != nil {
		t.Fatal(err)
	}
	return clock
}

type problem struct {
	Clock   uint64  `json:"clock"`
	Subject string  `json:"subject"`
	ID      *string `json:"id"`
	Reason  string  `json:"reason"`
}

type verifyReport struct {
	OK      bool      `json:"ok"`
	Checked int       `json:"checked"`
	Corrupt []problem `json:"corrupt"`
	Missing []problem `json:"missing"`
}

// Damage made through the raw JetStream API: verify names exactly the
// deleted and the forged record, session show skips the forged checkpoint
// and says so.
func TestVerifyFindsDamage(t *testing.T) {
	h := newHome(t)
	h.save(t, "th_d", "a")
	step := decode[receipt](t, h.mustRun(t, nil, "emit", "--thread", "th_d", "--act", "DO", "--kind", "agent.step",
		"--body", `{"n":1}`, "--actor", seedActor, "--json").stdout)
	b := h.save(t, "th_d", "b")
	c := h.save(t, "th_d", "c: the real one")
	h.save(t, "th_clean", "untouched")
	if r := h.mustRun(t, nil, "verify", "--all"); !strings.HasSuffix(r.stdout, "\nok\n") {
		t.Fatalf("verify before the damage:\n%s", r.stdout)
	}

	forged := damage(t, h.dir, step.Clock, c.Clock, map[string]any{"summary": "c: FORGED", "learnings": []any{"x"}})

	r := h.run(t, nil, "verify", "th_d", "--json")
	if r.code != 4 {
		t.Fatalf("verify: exit %d, want 4; stderr %s", r.code, r.stderr)
	}
	rep := decode[verifyReport](t, r.stdout)
	if rep.OK || len(rep.Corrupt) != 1 || len(rep.Missing) != 1 {
		t.Fatalf("report %+v, want exactly one corrupt and one missing", rep)
	}
	if got := rep.Corrupt[0]; got.Clock != forged || got.ID == nil || *got.ID != c.ID {
		t.Fatalf("corrupt %+v, want the forged copy of %s at clock %d", got, c.ID, forged)
	}
	if got := rep.Missing[0]; got.Clock != b.Clock || got.ID == nil || *got.ID != step.ID {
		t.Fatalf("missing %+v, want the deleted %s, noticed at clock %d", got, step.ID, b.Clock)
	}
	text := h.run(t, nil, "verify", "th_d")
	if text.code != 4 || !strings.Contains(text.stdout, c.ID) || !strings.Contains(text.stdout, step.ID) {
		t.Fatalf("verify (text): exit %d\n%s", text.code, text.stdout)
	}
	if r := h.run(t, nil, "verify", "th_clean"); r.code != 0 {
		t.Fatalf("verify of an undamaged thread: exit %d\n%s", r.code, r.stdout)
	}
	all := decode[verifyReport](t, h.run(t, nil, "verify", "--all", "--json").stdout)
	if len(all.Corrupt) != 1 || len(all.Missing) != 2 || all.Missing[0].Clock != step.Clock {
		t.Fatalf("verify --all: %+v, want the forged copy, the deleted clock and the gap", all)
	}

	show := h.run(t, nil, "session", "show", "th_d")
	if show.code != 0 || !strings.Contains(show.stdout, "c: the real one") || strings.Contains(show.stdout, "FORGED") {
		t.Fatalf("session show: exit %d\n%s", show.code, show.stdout)
	}
	if got, want := show.stderr, fmt.Sprintf("spl: skipped corrupt checkpoint at clock %d\n", forged); got != want {
		t.Fatalf("session show stderr %q, want %q", got, want)
	}

	rs := h.run(t, nil, "record", "show", c.ID, "--thread", "th_d")
	if rs.code != 4 || !strings.Contains(rs.stdout, "verified    no: ") || !strings.Contains(rs.stdout, fmt.Sprintf("clock       %d", forged)) {
		t.Fatalf("record show of the forged id: exit %d\n%s", rs.code, rs.stdout)
	}
	ok := h.mustRun(t, nil, "record", "show", b.ID)
	if !strings.HasSuffix(ok.stdout, "verified    ok\n") {
		t.Fatalf("record show of an intact record:\n%s", ok.stdout)
	}
}
