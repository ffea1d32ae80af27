package records

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// FuzzUnmarshal feeds arbitrary bytes to every decoder. None may panic, and
// whenever Unmarshal accepts an envelope, Marshal must give back the same
// bytes (there is exactly one encoding of a record).
func FuzzUnmarshal(f *testing.F) {
	r, err := New(ActLearn, KindCheckpoint, "main", "did:sync:agent:dev", time.UnixMilli(1700000000000),
		&Checkpoint{Summary: "s", Learnings: []string{"l"}, Extra: map[string]any{"f": 0.5, "n": -1, "b": []byte{1}}})
	if err != nil {
		f.Fatalf("New: %v", err)
	}
	env, err := r.WithPrev(r.ID()).Marshal()
	if err != nil {
		f.Fatalf("Marshal: %v", err)
	}
	f.Add(env)
	f.Add(r.Body)
	f.Add(r.Header.Encode())
	f.Add([]byte{0xa0})
	f.Add([]byte{0xa2, 0x61, 'a', 0x01, 0x61, 'a', 0x02}) // duplicate key
	f.Add([]byte{0xbf, 0x61, 'a', 0x01, 0xff})            // indefinite length
	f.Add([]byte{0xa1, 0x61, 'a', 0xf9, 0x7e, 0x00})      // NaN

	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := Unmarshal(data); err == nil {
			out, err := r.Marshal()
			if err != nil {
				t.Fatalf("Marshal after Unmarshal: %v", err)
			}
			if !bytes.Equal(out, data) {
				t.Fatalf("Marshal(Unmarshal(%x))=%x", data, out)
			}
			_ = r.Verify(r.ID())
			_ = r.Validate()
			_, _ = BodyToJSON(r.Body)
		}
		if h, err := DecodeHeader(data); err == nil {
			if got := h.Encode(); !bytes.Equal(got, data) {
				t.Fatalf("Encode(DecodeHeader(%x))=%x", data, got)
			}
		}
		if c, err := DecodeCheckpoint(data); err == nil {
			_ = c.Validate()
		}
		if e, err := DecodeErasure(data); err == nil {
			_ = e.Validate()
		}
		if j, err := BodyToJSON(data); err == nil {
			if _, err := BodyFromJSON(j); err != nil {
				t.Fatalf("BodyFromJSON(BodyToJSON(%x)=%s): %v", data, j, err)
			}
		}
		_ = ValidateBody(KindCheckpoint, data)
		_ = ValidateBody(KindErasure, data)

		// The scanner is a fast path of the strict decoder: whatever it
		// accepts, the reference path accepts too, to the same result.
		if n, ok := scanCanonical(data, maxBodyDepth); ok && n == len(data) {
			if _, err := decodeCanonicalReference(data); err != nil {
				t.Fatalf("scanner accepted %x, the reference refuses it: %v", data, err)
			}
		}
		if fast := unmarshalFast(data); fast != nil {
			ref, err := unmarshalReference(data)
			if err != nil {
				t.Fatalf("fast path accepted envelope %x, the reference refuses it: %v", data, err)
			}
			if fast.Header != ref.Header || fast.Salt != ref.Salt || !bytes.Equal(fast.Body, ref.Body) {
				t.Fatalf("fast path and reference disagree on %x", data)
			}
		}
	})
}

// FuzzDecodeCheckpoint holds the direct checkpoint decoder to the generic
// one: whatever it decodes, the generic decoder decodes to the same value.
func FuzzDecodeCheckpoint(f *testing.F) {
	for _, c := range []Checkpoint{
		{Summary: "s", Learnings: []string{"l"}},
		{Summary: "s", Learnings: []string{}, NextSteps: []string{"a", "b"}, SessionID: "x", Name: "n"},
		{Summary: "s", Extra: map[string]any{"a": 1}},
	} {
		b, err := c.MarshalCBOR()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xa1, 0x67, 's', 'u', 'm', 'm', 'a', 'r', 'y', 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		direct, ok := decodeCheckpointDirect(data)
		if !ok {
			return
		}
		ref, err := decodeCheckpointGeneric(data)
		if err != nil {
			t.Fatalf("direct decoded %x to %+v; generic refused it: %v", data, direct, err)
		}
		if !reflect.DeepEqual(direct, ref) {
			t.Fatalf("%x: direct %+v, generic %+v", data, direct, ref)
		}
	})
}
