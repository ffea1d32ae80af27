package records

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func nan() float64 { return math.NaN() }

func TestRoundTrip(t *testing.T) {
	target := testHeader(t, "erased")
	for _, tt := range []struct {
		name string
		args recordArgs
	}{
		{"note", validArgs()},
		{"checkpoint", recordArgs{ActLearn, KindCheckpoint, "研究/线程", "did:sync:agent:dev", time.UnixMilli(1700000000000),
			&Checkpoint{Summary: "s", Learnings: []string{"a", "b"}, NextSteps: []string{}, SessionID: "sess-1", Name: "v1",
				Extra: map[string]any{"model": "m", "tokens": uint64(42)}}}},
		{"erasure", recordArgs{ActForget, KindErasure, "erased", "did:sync:agent:dev", time.UnixMilli(1700000000000),
			&Erasure{Targets: []ErasureTarget{{ID: target.ID(), Header: target}}, Reason: "user request"}}},
		{"varied body", recordArgs{ActDo, "tool.call", "t", "did:key:z6Mk", time.UnixMilli(1),
			map[string]any{"i": -1, "f": 0.1, "b": []byte{0, 1}, "n": nil, "a": []any{true, false, map[string]any{}}, "u": uint64(math.MaxUint64)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.args.new()
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := r.Verify(r.ID()); err != nil {
				t.Fatalf("Verify(new record): %v", err)
			}
			// Chained.
			prev := testHeader(t, "prev").ID()
			r = r.WithPrev(prev)
			if got, want := r.Header.Prev, prev; got != want {
				t.Fatalf("Prev=%v, want %v", got, want)
			}
			data, err := r.Marshal()
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got, err := Unmarshal(data)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if got.Header != r.Header || got.Salt != r.Salt || !bytes.Equal(got.Body, r.Body) {
				t.Fatalf("Unmarshal(Marshal(r))=%+v, want %+v", got, r)
			}
			if err := got.Verify(r.ID()); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			again, err := got.Marshal()
			if err != nil {
				t.Fatalf("Marshal again: %v", err)
			}
			if !bytes.Equal(again, data) {
				t.Fatalf("Marshal(Unmarshal(data))=%x, want %x", again, data)
			}
			if got, want := got.Time(), tt.args.ts.UTC(); !got.Equal(want) {
				t.Fatalf("Time()=%v, want %v", got, want)
			}
		})
	}
}

func TestNewIsUnchainedAndSalted(t *testing.T) {
	a, err := validArgs().new()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	b, err := validArgs().new()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if !a.Header.Prev.IsZero() {
		t.Fatalf("Prev=%v, want zero", a.Header.Prev)
	}
	if a.Salt == b.Salt {
		t.Fatalf("two records got the same salt %x", a.Salt)
	}
	if a.ID() == b.ID() {
		t.Fatalf("two records with different salts got the same id")
	}
	if !bytes.Equal(a.Body, b.Body) {
		t.Fatalf("bodies differ: %x, %x", a.Body, b.Body)
	}
}

func TestVerifyDetectsCorruption(t *testing.T) {
	r, err := validArgs().new()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	id := r.ID()

	flipped := *r
	flipped.Body = bytes.Clone(r.Body)
	flipped.Body[len(flipped.Body)-1] ^= 0x01 // a byte of the text "hello"
	err = flipped.Verify(id)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify(flipped body)=%v, want ErrCorrupt", err)
	}
	if !strings.Contains(err.Error(), "body digest mismatch") {
		t.Fatalf("Verify(flipped body)=%q, want it to say body digest mismatch", err)
	}

	changed := *r
	changed.Header.Thread = "other"
	err = changed.Verify(id)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify(changed header)=%v, want ErrCorrupt", err)
	}
	if want := "id mismatch: computed " + changed.ID().String() + ", stored " + id.String(); !strings.Contains(err.Error(), want) {
		t.Fatalf("Verify(changed header)=%q, want it to contain %q", err, want)
	}

	// The same through the envelope: a flipped body byte still decodes.
	data, err := r.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	i := bytes.Index(data, []byte("hello"))
	data[i] = 'j'
	got, err := Unmarshal(data)
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if err := got.Verify(id); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify(envelope with flipped body)=%v, want ErrCorrupt", err)
	}
	if err := got.Verify(ID{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify(zero id) with flipped body=%v, want ErrCorrupt", err)
	}
}

func TestID(t *testing.T) {
	id := testHeader(t, "main").ID()
	s := id.String()
	if got, want := len(s), 59; got != want {
		t.Fatalf("len(String())=%d, want %d", got, want)
	}
	if got, want := s[:7], "bafir4i"; got != want {
		t.Fatalf("String() starts %q, want %q", got, want)
	}
	if got, want := id.Short(), s[len(s)-12:]; got != want {
		t.Fatalf("Short()=%q, want %q", got, want)
	}
	if got, want := hex.EncodeToString(id.Bytes()[:4]), "01511e20"; got != want {
		t.Fatalf("Bytes() prefix=%s, want %s", got, want)
	}
	parsed, err := ParseID(s)
	if err != nil {
		t.Fatalf("ParseID: %v", err)
	}
	if got, want := parsed, id; got != want {
		t.Fatalf("ParseID(String())=%v, want %v", got, want)
	}
	fromBytes, err := IDFromBytes(id.Bytes())
	if err != nil {
		t.Fatalf("IDFromBytes: %v", err)
	}
	if got, want := fromBytes, id; got != want {
		t.Fatalf("IDFromBytes(Bytes())=%v, want %v", got, want)
	}
	if id.IsZero() || !(ID{}).IsZero() {
		t.Fatalf("IsZero wrong")
	}

	type doc struct {
		ID ID `json:"id"`
	}
	j, err := json.Marshal(doc{id})
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if got, want := string(j), `{"id":"`+s+`"}`; got != want {
		t.Fatalf("JSON=%s, want %s", got, want)
	}
	var d doc
	if err := json.Unmarshal(j, &d); err != nil {
		t.Fatalf("json.Unmarshal: %v", err)
	}
	if got, want := d.ID, id; got != want {
		t.Fatalf("JSON round trip=%v, want %v", got, want)
	}
	if err := json.Unmarshal([]byte(`{"id":"bogus"}`), &d); !errors.Is(err, ErrInvalid) {
		t.Fatalf("json.Unmarshal(bogus id)=%v, want ErrInvalid", err)
	}
}

func TestParseIDRejects(t *testing.T) {
	good := testHeader(t, "main").ID()
	s := good.String()
	withPrefix := func(prefix string) string {
		b := append(mustHex(t, prefix), good[:]...)
		return "b" + base32Lower.EncodeToString(b)
	}
	// The last character carries 3 data bits and 2 unused bits; set one.
	last := s[len(s)-1]
	idx := strings.IndexByte("abcdefghijklmnopqrstuvwxyz234567", last)
	trailing := s[:len(s)-1] + string("abcdefghijklmnopqrstuvwxyz234567"[idx|1])
	for _, tt := range []struct {
		name, in, why string
	}{
		{"empty", "", "must not be empty"},
		{"upper-case multibase", "B" + strings.ToUpper(s[1:]), "multibase prefix must be 'b'"},
		{"base58 multibase", "z" + s[1:], "multibase prefix"},
		{"upper-case base32", "b" + strings.ToUpper(s[1:]), "not lower-case base32"},
		{"too short", s[:58], "must be 59 characters, got 58"},
		{"too long", s + "a", "must be 59 characters, got 60"},
		{"padded", s[:58] + "=", "not lower-case base32"},
		{"digit 1", s[:10] + "1" + s[11:], "not lower-case base32"},
		{"trailing bits", trailing, "non-canonical base32"},
		{"CIDv0 version", withPrefix("00511e20"), "CID version must be 0x01"},
		{"dag-cbor codec", withPrefix("01711e20"), "codec must be 0x51"},
		{"sha2-256 hash", withPrefix("01511220"), "multihash must be 0x1e"},
		{"short digest", withPrefix("01511e1f"), "multihash length must be 0x20"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "trailing bits" && trailing == s {
				t.Fatalf("test bug: trailing bits string equals the id")
			}
			_, err := ParseID(tt.in)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseID(%q)=%v, want ErrInvalid", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("ParseID(%q)=%q, want it to contain %q", tt.in, err, tt.why)
			}
		})
	}
	for _, b := range [][]byte{nil, good[:], append(good.Bytes(), 0)} {
		if _, err := IDFromBytes(b); !errors.Is(err, ErrInvalid) {
			t.Fatalf("IDFromBytes(%x)=%v, want ErrInvalid", b, err)
		}
	}
}

func TestCheckpointExtraRoundTrip(t *testing.T) {
	c := &Checkpoint{
		Summary:   "compared stores",
		Learnings: []string{"pgvector is enough"},
		NextSteps: []string{},
		SessionID: "sess-1",
		Name:      "before-refactor",
		Extra: map[string]any{
			"model":  "claude",
			"tokens": 1234,
			"cost":   0.25,
			"blob":   []byte{1, 2, 3},
			"nested": map[string]any{"k": []any{"x", -1}},
		},
	}
	r, err := New(ActLearn, KindCheckpoint, "main", "did:sync:agent:dev", time.UnixMilli(1700000000000), c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	data, err := r.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	r, err = Unmarshal(data)
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	got, err := DecodeCheckpoint(r.Body)
	if err != nil {
		t.Fatalf("DecodeCheckpoint: %v", err)
	}
	want := &Checkpoint{
		Summary:   c.Summary,
		Learnings: c.Learnings,
		NextSteps: []string{},
		SessionID: c.SessionID,
		Name:      c.Name,
		Extra: map[string]any{ // generic decoded values
			"model":  "claude",
			"tokens": uint64(1234),
			"cost":   0.25,
			"blob":   []byte{1, 2, 3},
			"nested": map[any]any{"k": []any{"x", int64(-1)}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeCheckpoint=%#v, want %#v", got, want)
	}
	again, err := encMode.Marshal(got)
	if err != nil {
		t.Fatalf("encode decoded checkpoint: %v", err)
	}
	if !bytes.Equal(again, r.Body) {
		t.Fatalf("re-encoded checkpoint=%x, want %x", again, r.Body)
	}
	var viaBody Checkpoint
	if err := r.DecodeBody(&viaBody); err != nil {
		t.Fatalf("DecodeBody: %v", err)
	}
	if !reflect.DeepEqual(&viaBody, want) {
		t.Fatalf("DecodeBody=%#v, want %#v", viaBody, want)
	}
}

func TestErasureRoundTrip(t *testing.T) {
	h1, h2 := testHeader(t, "a"), testHeader(t, "b")
	h2.Prev = h1.ID()
	e := &Erasure{Targets: []ErasureTarget{{ID: h1.ID(), Header: h1}, {ID: h2.ID(), Header: h2}}, Reason: "retention: keep last 1"}
	r, err := New(ActForget, KindErasure, "a", "did:sync:agent:dev", time.UnixMilli(1700000000000), e)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got, err := DecodeErasure(r.Body)
	if err != nil {
		t.Fatalf("DecodeErasure: %v", err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("DecodeErasure=%+v, want %+v", got, e)
	}
	var viaBody Erasure
	if err := r.DecodeBody(&viaBody); err != nil {
		t.Fatalf("DecodeBody: %v", err)
	}
	if !reflect.DeepEqual(&viaBody, e) {
		t.Fatalf("DecodeBody=%+v, want %+v", viaBody, e)
	}
}

func TestDecodeBodyStruct(t *testing.T) {
	r, err := validArgs().new()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var v struct {
		Text string `cbor:"text"`
	}
	if err := r.DecodeBody(&v); err != nil {
		t.Fatalf("DecodeBody: %v", err)
	}
	if got, want := v.Text, "hello"; got != want {
		t.Fatalf("Text=%q, want %q", got, want)
	}
	var n int
	if err := r.DecodeBody(&n); err == nil {
		t.Fatalf("DecodeBody(*int)=nil, want an error")
	}
}

func TestMarshalChecks(t *testing.T) {
	r := &Record{Header: testHeader(t, "main"), Body: mustHex(t, "80")}
	if _, err := r.Marshal(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Marshal(array body)=%v, want ErrInvalid", err)
	}
	if _, err := r.MarshalOutside(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("MarshalOutside(array body)=%v, want ErrInvalid", err)
	}
}

// An erasure target's clock round-trips, sits between "id" and "header" in
// canonical key order, and is absent when zero.
func TestErasureTargetClock(t *testing.T) {
	r, err := New(ActKnow, "agent.step", "th", "did:sync:agent:x", time.UnixMilli(1700000000000), map[string]any{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	e := Erasure{Reason: "test", Targets: []ErasureTarget{{ID: r.ID(), Header: r.Header, Clock: 42}}}
	b, err := e.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeErasure(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Targets[0].Clock != 42 || got.Targets[0].ID != r.ID() {
		t.Fatalf("decoded target %+v", got.Targets[0])
	}
	if _, err := decodeCanonical(b); err != nil {
		t.Fatalf("erasure with clock is not canonical: %v", err)
	}
	e.Targets[0].Clock = 0
	b0, _ := e.MarshalCBOR()
	if bytes.Contains(b0, []byte("clock")) {
		t.Fatalf("zero clock encoded")
	}
}

// A target that names a message that is no record, by clock and digest,
// round-trips canonically beside a record target, and every way of
// getting it wrong is refused naming the field.
func TestErasureMessageTarget(t *testing.T) {
	h := testHeader(t, "a")
	dg := [32]byte{1, 2, 3}
	e := &Erasure{Reason: "garbage", Targets: []ErasureTarget{{ID: h.ID(), Header: h, Clock: 3}, {Clock: 7, Digest: dg}}}
	r, err := New(ActForget, KindErasure, "a", "did:sync:agent:dev", time.UnixMilli(1700000000000), e)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got, err := DecodeErasure(r.Body)
	if err != nil || !reflect.DeepEqual(got, e) || !got.Targets[1].Message() || got.Targets[0].Message() {
		t.Fatalf("DecodeErasure = %+v, %v; want %+v", got, err, e)
	}
	if _, err := decodeCanonical(r.Body); err != nil {
		t.Fatalf("not canonical: %v", err)
	}
	// {"clock": 7, "digest": h'01…'} as it is written: the wire format.
	want := "a2" + "65636c6f636b" + "07" + "66646967657374" + "5820" + "010203" + strings.Repeat("00", 29)
	if b, _ := (ErasureTarget{Clock: 7, Digest: dg}).MarshalCBOR(); hex.EncodeToString(b) != want {
		t.Fatalf("message target = %x, want %s", b, want)
	}
	twice := &Erasure{Reason: "x", Targets: []ErasureTarget{{Clock: 7, Digest: dg}, {Clock: 7, Digest: [32]byte{9}}}}
	var fe *FieldError
	if err := twice.Validate(); !errors.As(err, &fe) || fe.Field != "body.targets[1].clock" {
		t.Fatalf("a clock named twice: %v, want body.targets[1].clock", err)
	}
	enc := func(m map[string]any) []byte {
		b, err := encMode.Marshal(map[string]any{"reason": "x", "targets": []any{m}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		target map[string]any
		field  string
	}{
		{map[string]any{"digest": dg[:]}, "body.targets[0].clock"},
		{map[string]any{"clock": 0, "digest": dg[:]}, "body.targets[0].clock"},
		{map[string]any{"clock": 7, "digest": dg[:5]}, "body.targets[0].digest"},
		{map[string]any{"clock": 7, "digest": make([]byte, 32)}, "body.targets[0].digest"},
		{map[string]any{"clock": 7, "digest": "text"}, "body.targets[0].digest"},
		{map[string]any{"clock": 7, "digest": dg[:], "id": h.ID().Bytes()}, "body.targets[0].id"},
		{map[string]any{"clock": 7, "digest": dg[:], "header": 1}, "body.targets[0].header"},
	} {
		_, err := DecodeErasure(enc(c.target))
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("target %v: %v, want a field error on %s", c.target, err, c.field)
		}
	}
}

// Validate's memo of New's checks does not hide a change made after New.
func TestValidateSeesChangesAfterNew(t *testing.T) {
	r, err := New(ActKnow, "agent.step", "th", "did:sync:agent:x", time.UnixMilli(1700000000000), map[string]any{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WithPrev(r.ID()).Validate(); err != nil {
		t.Fatalf("chained copy: %v", err)
	}
	bad := *r
	bad.Header.Act = "know"
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("changed act: err=%v, want ErrInvalid", err)
	}
	bad = *r
	bad.Body = []byte{0x01}
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("changed body: err=%v, want ErrInvalid", err)
	}
	cp, err := New(ActLearn, KindCheckpoint, "th", "did:sync:agent:x", time.UnixMilli(1700000000000), &Checkpoint{Summary: "s"})
	if !errors.Is(err, ErrInvalid) || cp != nil {
		t.Fatalf("checkpoint without learnings through the fast path: %v", err)
	}
}
