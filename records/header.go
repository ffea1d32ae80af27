package records

import (
	"bytes"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/zeebo/blake3"
)

// Header keys (wire format; never change). headerKeys lists them in core
// deterministic order: shorter keys first, then bytewise.
const (
	keyV      = "v"
	keyBD     = "bd"
	keyTS     = "ts"
	keyAct    = "act"
	keyKind   = "kind"
	keyPrev   = "prev"
	keyActor  = "actor"
	keyThread = "thread"
)

// Header is the part of a record that is hashed into its [ID]. It is
// encoded as a canonical CBOR map with the keys named beside each field;
// "prev" is absent when Prev is zero.
type Header struct {
	V      uint64   // "v": format version, FormatVersion
	Act    string   // "act": upper-case verb, e.g. ActKnow
	Kind   string   // "kind": lower-case dotted name, e.g. KindCheckpoint
	Thread string   // "thread": 1–256 bytes of UTF-8
	Actor  string   // "actor": a DID, e.g. "did:sync:agent:dev"
	TS     int64    // "ts": Unix milliseconds, set by the emitter
	Prev   ID       // "prev": binary CID (36 bytes) of the previous record on the thread; absent when zero
	BD     [32]byte // "bd": body digest, keyed BLAKE3 of the body (key = salt)
}

// Encode returns the canonical CBOR bytes of h: a map of 7 keys (8 with
// "prev") in core deterministic key order
//
//	"v", "bd", "ts", "act", "kind", "prev", "actor", "thread"
//
// with every integer and length in its shortest form. Encode never fails;
// for a header that does not validate (say, a thread that is not UTF-8) it
// still returns the bytes, which strict decoding rejects.
func (h Header) Encode() []byte {
	n := 7
	if !h.Prev.IsZero() {
		n = 8
	}
	b := make([]byte, 0, 120+len(h.Act)+len(h.Kind)+len(h.Actor)+len(h.Thread))
	b = appendHead(b, majorMap, uint64(n))
	b = appendText(b, keyV)
	b = appendHead(b, majorUint, h.V)
	b = appendText(b, keyBD)
	b = appendBytes(b, h.BD[:])
	b = appendText(b, keyTS)
	b = appendInt(b, h.TS)
	b = appendText(b, keyAct)
	b = appendText(b, h.Act)
	b = appendText(b, keyKind)
	b = appendText(b, h.Kind)
	if !h.Prev.IsZero() {
		b = appendText(b, keyPrev)
		b = appendBytes(b, h.Prev.Bytes())
	}
	b = appendText(b, keyActor)
	b = appendText(b, h.Actor)
	b = appendText(b, keyThread)
	b = appendText(b, h.Thread)
	return b
}

// ID returns the content id of h: BLAKE3-256 of [Header.Encode].
func (h Header) ID() ID {
	return ID(blake3.Sum256(h.Encode()))
}

// DecodeHeader strictly decodes the canonical CBOR bytes of a header: a map
// with exactly the keys of [Header] ("prev" optional), each of its type
// ("v" unsigned integer, "ts" integer, "bd" a 32-byte byte string, "prev" a
// 36-byte binary CID, the rest text strings), in canonical form. Anything
// else is an error wrapping [ErrCorrupt]. DecodeHeader does not apply the
// validation rules; see [Record.Validate].
func DecodeHeader(b []byte) (Header, error) {
	h, err := decodeHeader(b)
	if err != nil {
		return Header{}, fmt.Errorf("decode header: %w", err)
	}
	return h, nil
}

func decodeHeader(b []byte) (Header, error) {
	if !rawOfType(b, majorMap) {
		return Header{}, corruptf("header is a CBOR %s, not a map", cborType(b))
	}
	var m map[string]cbor.RawMessage
	if err := decMode.Unmarshal(b, &m); err != nil {
		return Header{}, corruptErr("strict CBOR", err)
	}
	for k := range m {
		switch k {
		case keyV, keyBD, keyTS, keyAct, keyKind, keyPrev, keyActor, keyThread:
		default:
			return Header{}, corruptf("unknown header key %s", quote(k))
		}
	}
	for _, k := range []string{keyV, keyBD, keyTS, keyAct, keyKind, keyActor, keyThread} {
		if _, ok := m[k]; !ok {
			return Header{}, corruptf("missing header key %q", k)
		}
	}
	var h Header
	if !rawOfType(m[keyV], majorUint) || decMode.Unmarshal(m[keyV], &h.V) != nil {
		return Header{}, corruptf("header v: must be an unsigned integer, got %s", cborType(m[keyV]))
	}
	if !(rawOfType(m[keyTS], majorUint) || rawOfType(m[keyTS], majorNegInt)) ||
		decMode.Unmarshal(m[keyTS], &h.TS) != nil {
		return Header{}, corruptf("header ts: must be an integer in the int64 range, got %s", cborType(m[keyTS]))
	}
	bd, ok := decodeByteString(m[keyBD])
	if !ok || len(bd) != len(h.BD) {
		return Header{}, corruptf("header bd: must be a 32-byte byte string")
	}
	copy(h.BD[:], bd)
	if raw, ok := m[keyPrev]; ok {
		p, ok := decodeByteString(raw)
		if !ok {
			return Header{}, corruptf("header prev: must be a byte string, got %s", cborType(raw))
		}
		prev, err := IDFromBytes(p)
		if err != nil {
			return Header{}, corruptErr("header prev", err)
		}
		h.Prev = prev
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{keyAct, &h.Act}, {keyKind, &h.Kind}, {keyActor, &h.Actor}, {keyThread, &h.Thread}} {
		s, ok := decodeText(m[f.key])
		if !ok {
			return Header{}, corruptf("header %s: must be a text string, got %s", f.key, cborType(m[f.key]))
		}
		*f.dst = s
	}
	// The safety net: only the one canonical encoding of h is accepted
	// (minimal lengths, sorted keys, "prev" absent rather than zero).
	if !bytes.Equal(h.Encode(), b) {
		return Header{}, corruptf("header is not canonical CBOR")
	}
	return h, nil
}
