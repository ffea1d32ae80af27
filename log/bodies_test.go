package log

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spl-dev/spl/records"
)

// bigBody is a body of about n bytes that does not compress: a marker,
// then random bytes.
func bigBody(marker string, n int) map[string]any {
	fill := make([]byte, n)
	_, _ = rand.Read(fill)
	return map[string]any{"marker": marker, "fill": fill}
}

// chatBody is a body of about n bytes that compresses, as a conversation
// does: numbered messages, each with noise random hex digits (which
// compress by half at best).
func chatBody(n, noise int) map[string]any {
	var msgs []string
	r := make([]byte, noise/2)
	for size := 0; size < n; size += 1000 + noise {
		_, _ = rand.Read(r)
		msgs = append(msgs, fmt.Sprintf("message %d: %x ", len(msgs), r)+strings.Repeat("the agent read the file and proposed a change to the handler; ", 16))
	}
	return map[string]any{"messages": msgs}
}

// A body that compresses is stored compressed: in its message when the
// frame fits one, beside the log when not; either way it reads back as
// it was, with its id, and verifies.
func TestCompressedBodies(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	for _, c := range []struct {
		name    string
		body    map[string]any
		outside bool
	}{
		{"200 KB in its message", chatBody(200<<10, 0), false},
		{"20 MB beside the log", chatBody(20<<20, 1000), true},
		{"3 KB as is", chatBody(3<<10, 0), false},
	} {
		rec := newRec(t, "th_z", "note.text", c.body)
		e, err := l.Append(ctx, rec)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.outside {
			defer func() { // erased: its compressed parts go with it
				if _, err := l.Erase(ctx, "th_z", []records.ID{e.ID}, "test", actor); err != nil {
					t.Fatal(err)
				}
				if ms, err := l.bodies.parts(ctx, rec.Header.BD, 8); err != nil || len(ms) != 0 {
					t.Fatalf("%d parts left after the erasure (%v)", len(ms), err)
				}
			}()
		}
		m, err := l.get(ctx, getRequest{Seq: e.Clock})
		if err != nil {
			t.Fatal(err)
		}
		plain := records.Plain(m.data)
		if len(rec.Body) >= CompressMin && (plain || keptOutside(m.data) != c.outside) || len(rec.Body) < CompressMin && !plain {
			t.Fatalf("%s: a %d-byte body stored plain %v, outside %v", c.name, len(rec.Body), plain, !plain && keptOutside(m.data))
		}
		if !plain && !c.outside && len(m.data) > len(rec.Body)/4 {
			t.Fatalf("%s: %d bytes stored for a %d-byte body", c.name, len(m.data), len(rec.Body))
		}
		got, err := l.At(ctx, e.Clock)
		if err != nil || got.ID != e.ID || !bytes.Equal(got.Record.Body, rec.Body) {
			t.Fatalf("%s: read back %d bytes, %v", c.name, len(got.Record.Body), err)
		}
	}
	if rep, err := l.Verify(ctx, "th_z"); err != nil || !rep.OK() {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	if ms, _ := l.bodies.parts(ctx, [32]byte{}, 1); len(ms) != 0 {
		t.Fatalf("parts under a zero digest")
	}
}

// A compressed body that does not decompress to what its envelope says
// is corrupt, and nothing is allocated for what it claims.
func TestDecompressRefuses(t *testing.T) {
	body := []byte(strings.Repeat("a", 100_000))
	z := compress(body)
	if z == nil {
		t.Fatal("a repeated letter did not compress")
	}
	if got, err := decompress(z, len(body)); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("decompress: %v", err)
	}
	for _, c := range []struct {
		name string
		z    []byte
		size int
	}{{"shorter than it says", z, len(body) + 1}, {"longer than it says", z, len(body) - 1}, {"no frame", []byte("not zstd"), 10}} {
		if _, err := decompress(c.z, c.size); !errors.Is(err, records.ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}

// A record of 5 MiB is appended and read back whole by every read, with
// the id it had before it was stored; its message holds the header only.
func TestLargeBodyRoundTrip(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	if _, err := l.Append(ctx, newRec(t, "th_big", "note.text", map[string]any{"i": 0})); err != nil {
		t.Fatal(err)
	}
	rec := newRec(t, "th_big", "note.text", bigBody("m", 5<<20))
	e, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatalf("Append(5 MiB): %v", err)
	}
	if e.ID != rec.WithPrev(e.Record.Header.Prev).ID() {
		t.Fatalf("id of the stored record %s is not the record's", e.ID)
	}
	if _, err := l.Append(ctx, newRec(t, "th_big", "note.text", map[string]any{"i": 2})); err != nil {
		t.Fatal(err)
	}
	m, err := l.get(ctx, getRequest{Seq: e.Clock})
	if err != nil {
		t.Fatal(err)
	}
	if records.Plain(m.data) || !keptOutside(m.data) || len(m.data) > 1024 {
		t.Fatalf("stored message is %d bytes (kept outside %v), want the header alone", len(m.data), keptOutside(m.data))
	}
	check := func(how string, got Entry) {
		t.Helper()
		if got.ID != e.ID || !bytes.Equal(got.Record.Body, rec.Body) {
			t.Fatalf("%s: id %s, %d body bytes; want %s, %d", how, got.ID, len(got.Record.Body), e.ID, len(rec.Body))
		}
	}
	got, err := l.At(ctx, e.Clock)
	if err != nil {
		t.Fatal(err)
	}
	check("At", got)
	if got, err = l.Get(ctx, e.ID, "th_big"); err != nil {
		t.Fatal(err)
	}
	check("Get", got)
	all := readAll(t, l, "th_big")
	if len(all) != 3 {
		t.Fatalf("Read: %d records, want 3", len(all))
	}
	check("Read", all[1])
	tail, err := l.Tail(ctx, "th_big", 2)
	if err != nil || len(tail) != 2 {
		t.Fatalf("Tail: %d, %v", len(tail), err)
	}
	check("Tail", tail[0])
	rep, err := l.Verify(ctx, "th_big")
	if err != nil || !rep.OK() {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// A record over the log's limit is refused with ErrTooLarge and a field
// error on the body, and nothing of it is stored.
func TestLargeBodyLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Open(ctx, Options{Dir: t.TempDir(), Linger: time.Second, MaxRecord: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := newRec(t, "th_lim", "note.text", bigBody("m", 3<<20))
	_, err = l.Append(ctx, rec)
	var fe *records.FieldError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &fe) || fe.Field != "body" || !strings.Contains(fe.Rule, "the limit is 2097152") {
		t.Fatalf("Append(3 MiB) under a 2 MiB limit: %v, want ErrTooLarge naming body and the limit", err)
	}
	if n, err := l.ThreadClock(ctx, "th_lim"); err != nil || n != 0 {
		t.Fatalf("thread after the refusal: clock %d, %v; want empty", n, err)
	}
	if ms, _ := l.bodies.parts(ctx, rec.Header.BD, 8); len(ms) != 0 {
		t.Fatalf("%d parts stored for a refused record", len(ms))
	}
	if _, err := Open(ctx, Options{Dir: t.TempDir(), MaxRecord: 1000}); err == nil || !strings.Contains(err.Error(), "MaxRecord") {
		t.Fatalf("Open(MaxRecord 1000) = %v, want an error naming MaxRecord", err)
	}
}

// An erasure of a record kept outside deletes its body's parts too: no
// file of the data directory holds the body afterwards (and one did
// before, so the scan proves something).
func TestLargeBodyErased(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir)
	ctx := ctxT(t)
	marker := "MARKER-8d2e61b0-large-body"
	rec := newRec(t, "th_gone", "note.text", bigBody(marker, 2<<20))
	e, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	after, err := l.Append(ctx, newRec(t, "th_gone", "note.text", map[string]any{"i": 1}))
	if err != nil {
		t.Fatal(err)
	}
	if !dirHolds(t, dir, marker) {
		t.Fatalf("marker not on disk before the erasure: the test would prove nothing")
	}
	if _, err := l.Erase(ctx, "th_gone", []records.ID{e.ID}, "gdpr", actor); err != nil {
		t.Fatal(err)
	}
	if ms, err := l.bodies.parts(ctx, rec.Header.BD, 8); err != nil || len(ms) != 0 {
		t.Fatalf("after the erasure %d parts of the body remain (%v)", len(ms), err)
	}
	if got, err := l.At(ctx, after.Clock); err != nil || got.ID != after.ID {
		t.Fatalf("record after the erased one: %v", err)
	}
	l.Close()
	if dirHolds(t, dir, marker) {
		t.Fatalf("marker still on disk after the erasure")
	}
}

// A body whose parts are gone (deleted behind the log's back) makes its
// record corrupt, at its clock, and nothing else: the records around it
// read.
func TestLargeBodyMissingIsCorrupt(t *testing.T) {
	l := openTest(t, "")
	ctx := ctxT(t)
	rec := newRec(t, "th_miss", "note.text", bigBody("m", 2<<20))
	e, err := l.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, newRec(t, "th_miss", "note.text", map[string]any{"i": 1})); err != nil {
		t.Fatal(err)
	}
	s, err := l.bodies.bind(ctx, false)
	if err != nil || s == nil {
		t.Fatalf("bodies stream: %v", err)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = l.At(ctx, e.Clock)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Clock != e.Clock || !errors.Is(err, records.ErrCorrupt) {
		t.Fatalf("At(record without its body) = %v, want a CorruptError at clock %d", err, e.Clock)
	}
	var good, bad int
	for _, err := range l.Read(ctx, "th_miss") {
		if err != nil {
			bad++
		} else {
			good++
		}
	}
	if good != 1 || bad != 1 {
		t.Fatalf("Read: %d good, %d bad; want 1 and 1", good, bad)
	}
	rep, err := l.Verify(ctx, "th_miss")
	if err != nil || rep.OK() {
		t.Fatalf("Verify: %+v, %v; want a report of the corrupt record", rep, err)
	}
}
