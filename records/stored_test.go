package records

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// A record too large for one message keeps its id and body digest when
// its body is stored outside: the outside envelope decodes to the header
// and salt, the fetched body attaches and verifies, and the envelope of
// the whole record is the one it had before.
func TestOutsideRoundTrip(t *testing.T) {
	body := map[string]any{"data": strings.Repeat("x", 2<<20)}
	r, err := New(ActKnow, "note.text", "main", "did:sync:agent:dev", time.UnixMilli(1700000000000), body)
	if err != nil {
		t.Fatal(err)
	}
	r = r.WithPrev(r.ID())
	if r.Inline() {
		t.Fatalf("Inline() = true for a %d-byte envelope", r.EncodedSize())
	}
	whole, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	stored, err := r.MarshalOutside()
	if err != nil {
		t.Fatal(err)
	}
	if Plain(stored) || !Plain(whole) || !Packed(stored) || Packed(whole) || Plain([]byte("not cbor")) || Packed([]byte("not cbor")) {
		t.Fatalf("Plain and Packed do not tell the forms (and bytes that are neither) apart")
	}
	if len(stored) > 512 {
		t.Fatalf("outside envelope is %d bytes, want the header and salt only", len(stored))
	}
	got, st, err := UnmarshalStored(stored)
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size
	if size != len(r.Body) || !st.Outside || st.Z != nil || st.ZSize != 0 || got.Header != r.Header || got.Salt != r.Salt || got.Body != nil {
		t.Fatalf("UnmarshalStored = header %+v %+v, want %+v size %d outside", got.Header, st, r.Header, len(r.Body))
	}
	if err := got.AttachBody(bytes.Clone(r.Body), size); err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(r.ID()); err != nil {
		t.Fatal(err)
	}
	again, err := got.Marshal()
	if err != nil || !bytes.Equal(again, whole) {
		t.Fatalf("Marshal after AttachBody differs from the record's envelope (err %v)", err)
	}
	if _, err := Unmarshal(stored); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Unmarshal(outside envelope) = %v, want ErrCorrupt", err)
	}
	// The same record with its body compressed, in the envelope and
	// outside it: the forms round-trip, and say so.
	for _, form := range []Stored{{Size: len(r.Body), Z: []byte("zstd frame")}, {Size: len(r.Body), Outside: true, ZSize: 12345}} {
		data, err := r.MarshalStored(form)
		if err != nil {
			t.Fatal(err)
		}
		_, back, err := UnmarshalStored(data)
		if err != nil || back.Size != form.Size || string(back.Z) != string(form.Z) || back.Outside != form.Outside || back.ZSize != form.ZSize {
			t.Fatalf("UnmarshalStored(MarshalStored(%+v)) = %+v, %v", form, back, err)
		}
	}
	for _, bad := range []Stored{{Size: 1, Outside: true}, {Size: len(r.Body)}, {Size: len(r.Body), Z: []byte{1}, Outside: true}, {Size: len(r.Body), Z: []byte{1}, ZSize: 3}} {
		if _, err := r.MarshalStored(bad); err == nil {
			t.Fatalf("MarshalStored(%+v) = nil error, want a refusal", bad)
		}
	}
}

// A fetched body that is not the one the header binds, or not the length
// the envelope gives, or no canonical map, is corrupt; so is an outside
// envelope that is not the one canonical encoding.
func TestOutsideCorrupt(t *testing.T) {
	r, err := New(ActKnow, "note.text", "main", "did:sync:agent:dev", time.UnixMilli(1700000000000), map[string]any{"text": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := r.MarshalOutside()
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() (*Record, int) {
		got, st, err := UnmarshalStored(stored)
		if err != nil {
			t.Fatal(err)
		}
		return got, st.Size
	}
	got, size := fresh()
	if err := got.AttachBody(r.Body[:len(r.Body)-1], size); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("AttachBody(short body) = %v, want ErrCorrupt", err)
	}
	tampered := bytes.Replace(r.Body, []byte("hello"), []byte("jello"), 1)
	got, size = fresh()
	if err := got.AttachBody(tampered, size); err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(r.ID()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify(tampered outside body) = %v, want ErrCorrupt", err)
	}
	got, _ = fresh()
	if err := got.AttachBody([]byte{0x82, 0x01, 0x02}, 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("AttachBody(array) = %v, want ErrCorrupt", err)
	}
	// The body length in a longer form than the shortest: not canonical.
	i := bytes.Index(stored, []byte{0x61, 'o'}) + 2
	long := append(append(append([]byte{}, stored[:i]...), 0x19, 0x00, stored[i]), stored[i+1:]...)
	if _, _, err := UnmarshalStored(long); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("UnmarshalStored(length not shortest) = %v, want ErrCorrupt", err)
	}
	four := bytes.Clone(stored)
	four[0] = 0xa4 // a fourth key promised, none there
	for _, bad := range [][]byte{stored[:len(stored)-1], append(bytes.Clone(stored), 0), {0xa3, 0x61, 'h'}, four, append(bytes.Clone(four), 0x61, 'z', 0x00)} {
		if _, _, err := UnmarshalStored(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("UnmarshalStored(%x…) = %v, want ErrCorrupt", bad[:min(8, len(bad))], err)
		}
	}
}
