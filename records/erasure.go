package records

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/zeebo/blake3"
)

// Erasure body keys (wire format; never change).
const (
	keyTargets      = "targets"
	keyReason       = "reason"
	keyTargetID     = "id"
	keyTargetHeader = "header"
	keyTargetClock  = "clock"
	keyTargetDigest = "digest"
)

// Erasure limits.
const maxReasonLen = 1024

// ErasureTarget names one erased record: its id and its header, kept so
// that the chain through the erased record stays verifiable, and the clock
// (log position) it had, so that the log can finish an interrupted erasure
// and account for every gap. It encodes as the map {"id": <binary CID>,
// "clock": <uint>, "header": <header map>}, "clock" absent when zero.
//
// A target may instead name a message that is no record (it does not
// decode, or does not verify: garbage published with the admin right, or
// a record damaged on disk), which has no id or header to keep: then
// Digest holds the BLAKE3-256 of the message's bytes, Clock its clock, and
// ID and Header are zero. It encodes as {"clock": <uint>, "digest":
// <32-byte string>}. Such a target explains the gap at its clock, and
// nothing else.
type ErasureTarget struct {
	ID     ID
	Header Header
	Clock  uint64
	Digest [32]byte
}

// MessageDigest is the digest a target names a message that is no record
// by: the BLAKE3-256 of the message's bytes as stored.
func MessageDigest(data []byte) [32]byte { return blake3.Sum256(data) }

// Message reports whether t names a message that is no record (by Clock
// and Digest) rather than a record (by ID and Header).
func (t ErasureTarget) Message() bool { return t.Digest != [32]byte{} }

// MarshalCBOR encodes t as a canonical CBOR map.
func (t ErasureTarget) MarshalCBOR() ([]byte, error) {
	return t.appendCBOR(nil), nil
}

func (t ErasureTarget) appendCBOR(b []byte) []byte {
	if t.Message() {
		b = appendHead(b, majorMap, 2)
		b = appendText(b, keyTargetClock)
		b = appendHead(b, majorUint, t.Clock)
		b = appendText(b, keyTargetDigest)
		return appendBytes(b, t.Digest[:])
	}
	if t.Clock == 0 {
		b = appendHead(b, majorMap, 2)
	} else {
		b = appendHead(b, majorMap, 3)
	}
	b = appendText(b, keyTargetID)
	b = appendBytes(b, t.ID.Bytes())
	if t.Clock != 0 {
		b = appendText(b, keyTargetClock)
		b = appendHead(b, majorUint, t.Clock)
	}
	b = appendText(b, keyTargetHeader)
	return append(b, t.Header.Encode()...)
}

// UnmarshalCBOR strictly decodes an erasure target: a map with the keys
// "id" and "header", and optionally "clock"; or one with the keys "clock"
// and "digest" alone.
func (t *ErasureTarget) UnmarshalCBOR(data []byte) error {
	v, err := decodeTarget("body.target", data)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Erasure is the body of a [KindErasure] record (act [ActForget]). It
// encodes as the map {"reason": text, "targets": [target, …]}.
type Erasure struct {
	Targets []ErasureTarget // "targets": at least one; each Header.ID() must equal ID
	Reason  string          // "reason": non-empty, at most 1024 bytes
}

// MarshalCBOR encodes e as a canonical CBOR map. Nil Targets encode as an
// empty array.
func (e Erasure) MarshalCBOR() ([]byte, error) {
	b := appendHead(nil, majorMap, 2)
	b = appendText(b, keyReason)
	b = appendText(b, e.Reason)
	b = appendText(b, keyTargets)
	b = appendHead(b, majorArray, uint64(len(e.Targets)))
	for _, t := range e.Targets {
		b = t.appendCBOR(b)
	}
	return b, nil
}

// UnmarshalCBOR decodes an erasure body as [DecodeErasure] does.
func (e *Erasure) UnmarshalCBOR(data []byte) error {
	d, err := DecodeErasure(data)
	if err != nil {
		return err
	}
	*e = *d
	return nil
}

// DecodeErasure strictly decodes an erasure body. Bytes that are not a
// canonical CBOR map are an error wrapping [ErrCorrupt]; a key of the wrong
// type is a *FieldError naming it ("body.reason", "body.targets[1].header").
// Keys other than "targets" and "reason" are ignored. DecodeErasure does not
// apply [Erasure.Validate].
func DecodeErasure(body []byte) (*Erasure, error) {
	e, err := decodeErasure(body)
	if err != nil {
		return nil, fmt.Errorf("decode erasure: %w", err)
	}
	return e, nil
}

func decodeErasure(body []byte) (*Erasure, error) {
	if err := checkBodyMap(body); err != nil {
		return nil, err
	}
	var m map[any]cbor.RawMessage
	if err := decMode.Unmarshal(body, &m); err != nil {
		return nil, corruptErr("strict CBOR", err)
	}
	e := &Erasure{}
	if raw, ok := m[keyReason]; ok {
		s, ok := decodeText(raw)
		if !ok {
			return nil, fieldErrorf("body.reason", "must be a text string, got %s", cborType(raw))
		}
		e.Reason = s
	}
	if raw, ok := m[keyTargets]; ok {
		var list []cbor.RawMessage
		if !rawOfType(raw, majorArray) || decMode.Unmarshal(raw, &list) != nil {
			return nil, fieldErrorf("body.targets", "must be an array of targets, got %s", cborType(raw))
		}
		e.Targets = make([]ErasureTarget, len(list))
		for i, r := range list {
			t, err := decodeTarget(fmt.Sprintf("body.targets[%d]", i), r)
			if err != nil {
				return nil, err
			}
			e.Targets[i] = t
		}
	}
	return e, nil
}

// decodeTarget decodes one erasure target; field names it in errors.
func decodeTarget(field string, data []byte) (ErasureTarget, error) {
	var m map[string]cbor.RawMessage
	if !rawOfType(data, majorMap) || decMode.Unmarshal(data, &m) != nil {
		return ErasureTarget{}, fieldErrorf(field, `must be a map {"id", "header"}, got %s`, cborType(data))
	}
	for k := range m {
		if k != keyTargetID && k != keyTargetHeader && k != keyTargetClock && k != keyTargetDigest {
			return ErasureTarget{}, fieldErrorf(field, "unknown key %s", quote(k))
		}
	}
	if raw, ok := m[keyTargetDigest]; ok {
		return decodeMessageTarget(field, m, raw)
	}
	var t ErasureTarget
	p, ok := decodeByteString(m[keyTargetID])
	if !ok {
		return ErasureTarget{}, fieldErrorf(field+".id", "must be a binary CID (byte string), got %s", cborType(m[keyTargetID]))
	}
	id, err := IDFromBytes(p)
	if err != nil {
		return ErasureTarget{}, fieldErrorf(field+".id", "must be a binary CID: %v", err)
	}
	t.ID = id
	if raw, ok := m[keyTargetClock]; ok {
		var c uint64
		if !rawOfType(raw, majorUint) || decMode.Unmarshal(raw, &c) != nil || c == 0 {
			return ErasureTarget{}, fieldErrorf(field+".clock", "must be a positive integer, got %s", cborType(raw))
		}
		t.Clock = c
	}
	raw, ok := m[keyTargetHeader]
	if !ok {
		return ErasureTarget{}, fieldErrorf(field+".header", "is missing")
	}
	h, err := decodeHeader(raw)
	if err != nil {
		return ErasureTarget{}, fieldErrorf(field+".header", "must be a record header: %v", err)
	}
	t.Header = h
	return t, nil
}

// decodeMessageTarget decodes a target that names a message that is no
// record: "clock" and "digest", and neither "id" nor "header".
func decodeMessageTarget(field string, m map[string]cbor.RawMessage, digest cbor.RawMessage) (ErasureTarget, error) {
	for _, k := range []string{keyTargetID, keyTargetHeader} {
		if _, ok := m[k]; ok {
			return ErasureTarget{}, fieldErrorf(field+"."+k, `must be absent from a target that names a message that is no record by "clock" and "digest"`)
		}
	}
	var t ErasureTarget
	p, ok := decodeByteString(digest)
	if !ok || len(p) != len(t.Digest) || [32]byte(p) == t.Digest {
		return ErasureTarget{}, fieldErrorf(field+".digest", "must be the 32-byte BLAKE3-256 of the message (byte string), got %s", cborType(digest))
	}
	t.Digest = [32]byte(p)
	raw, ok := m[keyTargetClock]
	if !ok {
		return ErasureTarget{}, fieldErrorf(field+".clock", "is missing: a message that is no record is named by its clock")
	}
	if !rawOfType(raw, majorUint) || decMode.Unmarshal(raw, &t.Clock) != nil || t.Clock == 0 {
		return ErasureTarget{}, fieldErrorf(field+".clock", "must be a positive integer, got %s", cborType(raw))
	}
	return t, nil
}

// Validate checks the erasure schema and returns the first failure as a
// *FieldError: "body.targets" (at least one), "body.targets[i].id" (equal to
// the target header's id, not repeated), "body.targets[i].clock" (a
// message target's, not repeated), "body.reason" (non-empty, at most
// 1024 bytes).
func (e *Erasure) Validate() error {
	if len(e.Targets) == 0 {
		return fieldErrorf("body.targets", "must name at least one record")
	}
	seen := make(map[ID]int, len(e.Targets))
	clocks := make(map[uint64]int)
	for i, t := range e.Targets {
		if t.Message() {
			if j, ok := clocks[t.Clock]; ok {
				return fieldErrorf(fmt.Sprintf("body.targets[%d].clock", i), "%d is named twice (also targets[%d])", t.Clock, j)
			}
			clocks[t.Clock] = i
			continue
		}
		field := fmt.Sprintf("body.targets[%d].id", i)
		if got := t.Header.ID(); got != t.ID {
			return fieldErrorf(field, "%s does not match the id of its header, %s", t.ID, got)
		}
		if j, ok := seen[t.ID]; ok {
			return fieldErrorf(field, "%s is named twice (also targets[%d])", t.ID, j)
		}
		seen[t.ID] = i
	}
	switch {
	case e.Reason == "":
		return fieldErrorf("body.reason", "must not be empty")
	case len(e.Reason) > maxReasonLen:
		return fieldErrorf("body.reason", "must be at most %d bytes, got %d", maxReasonLen, len(e.Reason))
	}
	return nil
}
