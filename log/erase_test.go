package log

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/spl-dev/spl/records"
)

func appendN(t *testing.T, l *Log, thread string, n int, body func(i int) map[string]any) []Entry {
	t.Helper()
	var es []Entry
	for i := range n {
		e, err := l.Append(ctxT(t), newRec(t, thread, "agent.step", body(i)))
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// interleaved appends n records to thread, each after three of noise,
// so that the thread's records lie apart in the log, and returns them.
func interleaved(t *testing.T, l *Log, thread, noise string, n int) []Entry {
	t.Helper()
	var es []Entry
	for i := range n {
		appendN(t, l, noise, 3, func(j int) map[string]any { return map[string]any{"j": j} })
		es = append(es, appendN(t, l, thread, 1, func(int) map[string]any { return map[string]any{"i": i} })...)
	}
	return es
}

func ids(es []Entry) map[records.ID]bool {
	m := make(map[records.ID]bool)
	for _, e := range es {
		m[e.ID] = true
	}
	return m
}

func readAll(t *testing.T, l *Log, thread string) []Entry {
	t.Helper()
	var out []Entry
	for e, err := range l.Read(ctxT(t), thread) {
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		out = append(out, e)
	}
	return out
}

func TestErase(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	es := appendN(t, l, "th_e", 5, func(i int) map[string]any { return map[string]any{"i": i} })
	res, err := l.Erase(ctx, "th_e", []records.ID{es[1].ID, es[3].ID}, "user asked", actor)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Erased) != 2 || len(res.Already) != 0 || res.Erasure.Clock == 0 {
		t.Fatalf("result %+v", res)
	}
	left := readAll(t, l, "th_e")
	if got, want := len(left), 4; got != want { // 3 survivors + the erasure record
		t.Fatalf("thread has %d records, want %d", got, want)
	}
	seen := ids(left)
	if seen[es[1].ID] || seen[es[3].ID] {
		t.Fatalf("an erased record is still read")
	}
	er, err := records.DecodeErasure(left[3].Record.Body)
	if err != nil {
		t.Fatal(err)
	}
	if er.Reason != "user asked" || len(er.Targets) != 2 || er.Targets[0].Clock != es[1].Clock || er.Targets[0].Header != es[1].Record.Header {
		t.Fatalf("erasure body %+v", er)
	}
	if _, err := l.At(ctx, es[1].Clock); !errors.Is(err, ErrNotFound) {
		t.Fatalf("At(erased clock): err=%v, want ErrNotFound", err)
	}

	// Again: a no-op that says so.
	res, err = l.Erase(ctx, "th_e", []records.ID{es[1].ID}, "again", actor)
	if err != nil || len(res.Already) != 1 || res.Erasure.Clock != 0 {
		t.Fatalf("erasing twice: %+v, %v", res, err)
	}
	if got := len(readAll(t, l, "th_e")); got != 4 {
		t.Fatalf("erasing twice appended: %d records", got)
	}
}

func TestEraseRefusals(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	es := appendN(t, l, "th_x", 2, func(i int) map[string]any { return map[string]any{"i": i} })
	other := appendN(t, l, "th_other", 1, func(i int) map[string]any { return map[string]any{"i": i} })
	res, err := l.Erase(ctx, "th_x", []records.ID{es[0].ID}, "r", actor)
	if err != nil {
		t.Fatal(err)
	}
	before := len(readAll(t, l, "th_x"))
	unknown := newRec(t, "th_x", "agent.step", map[string]any{"never": "appended"}).ID()
	for _, c := range []struct {
		name string
		ids  []records.ID
		want error
		text string
	}{
		{"erasure record", []records.ID{res.Erasure.ID}, ErrNotErasable, "is an erasure record"},
		{"unknown id", []records.ID{unknown}, ErrNotFound, unknown.String()},
		{"other thread", []records.ID{other[0].ID}, ErrNotErasable, `is on thread "th_other"`},
		{"mixed with a valid one", []records.ID{es[1].ID, unknown}, ErrNotFound, unknown.String()},
	} {
		_, err := l.Erase(ctx, "th_x", c.ids, "r", actor)
		if !errors.Is(err, c.want) || !bytes.Contains([]byte(err.Error()), []byte(c.text)) {
			t.Errorf("%s: err=%v, want %v containing %q", c.name, err, c.want, c.text)
		}
	}
	if got := len(readAll(t, l, "th_x")); got != before {
		t.Fatalf("refused erasures changed the thread: %d records, want %d", got, before)
	}
	if got := len(readAll(t, l, "th_other")); got != 1 {
		t.Fatalf("other thread changed: %d records", got)
	}
}

// An erasure record never names another erasure: Append refuses one, and
// one stored before that rule (forged here, as an older version could
// have written it) deletes nothing of what it names when the log carries
// it out.
func TestErasureOfErasure(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	ctx := ctxT(t)
	es := appendN(t, l, "th_x", 2, func(i int) map[string]any { return map[string]any{"i": i} })
	res, err := l.Erase(ctx, "th_x", []records.ID{es[0].ID}, "r", actor)
	if err != nil {
		t.Fatal(err)
	}
	first := res.Erasure
	// A valid erasure of es[1], whose body is then changed to name the
	// erasure record instead, with its body digest made to match.
	rec, err := records.New(records.ActForget, records.KindErasure, "th_x", actor, time.Now(),
		&records.Erasure{Targets: []records.ErasureTarget{{ID: es[1].ID, Header: es[1].Record.Header, Clock: es[1].Clock}}, Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := records.Erasure{Targets: []records.ErasureTarget{{ID: first.ID, Header: first.Record.Header, Clock: first.Clock}}, Reason: "old rules"}.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	h, err := blake3.NewKeyed(rec.Salt[:])
	if err != nil {
		t.Fatal(err)
	}
	h.Write(body)
	rec.Body = body
	h.Sum(rec.Header.BD[:0])
	var fe *records.FieldError
	if _, err := l.Append(ctx, rec); !errors.As(err, &fe) || fe.Field != "body.targets[0]" {
		t.Fatalf("Append of an erasure of an erasure: err=%v, want a field error on body.targets[0]", err)
	}
	old := rec.WithPrev(first.ID)
	if _, err := l.c.JS.PublishMsg(ctx, recordMsg(t, old)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// The next open carries out every erasure past the watermark.
	l = openTest(t, dir)
	if _, err := l.At(ctxT(t), first.Clock); err != nil {
		t.Fatalf("the erasure record named by a later erasure was deleted: %v", err)
	}
	if got := len(readAll(t, l, "th_x")); got != 3 {
		t.Fatalf("th_x has %d records, want 3 (es[1] and both erasures)", got)
	}
}

// A user kind that merely ends like the erasure kind (app.core.erasure:
// kinds may be dotted) is an ordinary record: Erase deletes it for real,
// and it erases nothing itself, even with a body shaped like an erasure.
// A true core.erasure record is still refused.
func TestEraseLookalikeKind(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	const th, kind = "th_look", "app.core.erasure"
	es := appendN(t, l, th, 2, func(i int) map[string]any { return map[string]any{"i": i} })
	lookalike, err := l.Append(ctx, newRec(t, th, kind, map[string]any{"x": 1}))
	if err != nil {
		t.Fatal(err)
	}
	// Shaped like an erasure of es[0], but of a user kind: it erases nothing.
	mimicRec, err := records.New(records.ActKnow, kind, th, actor, time.Now(),
		&records.Erasure{Targets: []records.ErasureTarget{{ID: es[0].ID, Header: es[0].Record.Header, Clock: es[0].Clock}}, Reason: "mimic"})
	if err != nil {
		t.Fatal(err)
	}
	mimic, err := l.Append(ctx, mimicRec)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(readAll(t, l, th)); !got[es[0].ID] {
		t.Fatalf("a user record shaped like an erasure hides %s from reads", es[0].ID)
	}

	res, err := l.Erase(ctx, th, []records.ID{lookalike.ID, es[0].ID}, "r", actor)
	if err != nil {
		t.Fatalf("Erase of a %s record: %v", kind, err)
	}
	if len(res.Erased) != 2 || len(res.Already) != 0 || res.Erasure.Clock == 0 {
		t.Fatalf("result %+v, want both ids erased, none already", res)
	}
	for name, e := range map[string]Entry{kind: lookalike, "es[0]": es[0]} {
		if _, err := l.At(ctx, e.Clock); !errors.Is(err, ErrNotFound) {
			t.Errorf("At(%s clock %d) after Erase: err=%v, want ErrNotFound", name, e.Clock, err)
		}
		if _, err := l.Get(ctx, e.ID, th); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s) after Erase: err=%v, want ErrNotFound", name, err)
		}
	}
	left := ids(readAll(t, l, th))
	if left[lookalike.ID] || left[es[0].ID] {
		t.Fatalf("an erased record is still read")
	}
	if !left[es[1].ID] || !left[mimic.ID] || !left[res.Erasure.ID] || len(left) != 3 {
		t.Fatalf("thread holds %v, want es[1], the mimic and the erasure", left)
	}

	// The real erasure record stays: refused, and still there.
	if _, err := l.Erase(ctx, th, []records.ID{res.Erasure.ID}, "r", actor); !errors.Is(err, ErrNotErasable) {
		t.Fatalf("Erase of a core.erasure record: err=%v, want ErrNotErasable", err)
	}
	if _, err := l.At(ctx, res.Erasure.Clock); err != nil {
		t.Fatalf("the erasure record is gone after a refused erasure: %v", err)
	}
}

// A crash between the erasure's append and its deletes is finished by the
// next open.
func TestEraseFinishedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	es := appendN(t, l, "th_crash", 3, func(i int) map[string]any { return map[string]any{"i": i} })
	crash := errors.New("injected crash")
	crashAfterAppend := stopAt(func(step string) error {
		if step == stepAppended {
			return crash
		}
		return nil
	})
	if _, err := l.Erase(ctxT(t), "th_crash", []records.ID{es[1].ID}, "r", actor, crashAfterAppend); !errors.Is(err, crash) {
		t.Fatalf("Erase: err=%v, want the injected crash", err)
	}
	if _, err := l.At(ctxT(t), es[1].Clock); err != nil {
		t.Fatalf("before reopen the record should still be there: %v", err)
	}
	// A retry in the same process finishes the deletes too.
	res, err := l.Erase(ctxT(t), "th_crash", []records.ID{es[1].ID}, "r", actor)
	if err != nil || len(res.Already) != 1 {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	if _, err := l.At(ctxT(t), es[1].Clock); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the retry: err=%v, want ErrNotFound", err)
	}
	// And a crash that leaves deletes pending is finished by the next open.
	if _, err := l.Erase(ctxT(t), "th_crash", []records.ID{es[2].ID}, "r", actor, crashAfterAppend); !errors.Is(err, crash) {
		t.Fatalf("Erase: err=%v, want the injected crash", err)
	}
	l.Close()
	l2 := openTest(t, dir)
	if _, err := l2.At(ctxT(t), es[2].Clock); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after reopen: err=%v, want ErrNotFound", err)
	}
	if ids(readAll(t, l2, "th_crash"))[es[2].ID] {
		t.Fatalf("erased record still read after reopen")
	}
}

// The erased bytes leave the disk: after the erasure and a clean stop, no
// file under the data directory holds the erased body.
func TestEraseLeavesNoBytes(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	marker := "MARKER-4f1c9a7e-erase-me"
	appendN(t, l, "th_p", 2, func(i int) map[string]any { return map[string]any{"i": i} })
	es := appendN(t, l, "th_p", 1, func(int) map[string]any { return map[string]any{"secret": marker} })
	appendN(t, l, "th_p", 2, func(i int) map[string]any { return map[string]any{"i": i} })
	if !dirHolds(t, dir, marker) {
		t.Fatalf("marker not on disk before the erasure: the test would prove nothing")
	}
	if _, err := l.Erase(ctxT(t), "th_p", []records.ID{es[0].ID}, "gdpr", actor); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if dirHolds(t, dir, marker) {
		t.Fatalf("marker still on disk after erasure")
	}
}

func dirHolds(t *testing.T, dir, marker string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a temporary file renamed away meanwhile (the mark's)
		}
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(marker)) {
			t.Logf("marker in %s", path)
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// An erasure conditional on a clock the thread has moved past erases
// nothing; on the thread's last clock it erases.
func TestEraseAfter(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	victim, err := l.Append(ctx, newRec(t, "th_ea", "agent.step", map[string]any{"n": 1}))
	if err != nil {
		t.Fatal(err)
	}
	last, err := l.Append(ctx, newRec(t, "th_ea", "agent.step", map[string]any{"n": 2}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Erase(ctx, "th_ea", []records.ID{victim.ID}, "test", actor, EraseAfter(victim.Clock))
	if !errors.Is(err, ErrMoved) {
		t.Fatalf("erase after a clock the thread moved past: %v, want ErrMoved", err)
	}
	if _, err := l.Get(ctx, victim.ID, "th_ea"); err != nil {
		t.Fatalf("the record is gone after a refused erasure: %v", err)
	}
	res, err := l.Erase(ctx, "th_ea", []records.ID{victim.ID}, "test", actor, EraseAfter(last.Clock))
	if err != nil {
		t.Fatalf("erase after the thread's last clock: %v", err)
	}
	if len(res.Erased) != 1 || res.Erasure.Record.Header.Prev != last.ID {
		t.Fatalf("erased %v, erasure chained on %s; want the victim, after %s", res.Erased, res.Erasure.Record.Header.Prev, last.ID)
	}
	if _, err := l.Get(ctx, victim.ID, "th_ea"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("erased record: %v, want ErrNotFound", err)
	}
}

// isErasureSubject matches the erasure kind exactly, on any thread token.
func TestIsErasureSubject(t *testing.T) {
	for subject, want := range map[string]bool{
		RecordSubject("th", records.KindErasure):                 true,
		RecordSubject("a thread.with dots", records.KindErasure): true,
		RecordSubject("th", "app.core.erasure"):                  false,
		RecordSubject("core", "erasure"):                         false,
		RecordSubject("th", "core.erasure.x"):                    false,
		RecordSubject("th", "agent.step"):                        false,
		"other.rec.th." + records.KindErasure:                    false,
	} {
		if got := isErasureSubject(subject); got != want {
			t.Errorf("isErasureSubject(%q) = %v, want %v", subject, got, want)
		}
	}
}
