package records

import (
	"bytes"
	"fmt"
)

// keyEnvOutside is the key of a stored envelope whose body is kept
// outside it: the body's length in bytes (wire format; never change).
const keyEnvOutside = "o"

// outsideOverhead is the size of an outside envelope minus its header
// and the body length's encoding: map(3) "h" … "o" … "s" bstr(32) salt.
const outsideOverhead = 1 + 2 + 2 + 2 + 2 + SaltSize

// Inline reports whether r's envelope fits one message of the log
// (MaxEncodedSize). A record that does not is stored with its body
// outside the message ([Record.MarshalOutside]).
func (r *Record) Inline() bool { return r.encodedSize() <= MaxEncodedSize }

// EncodedSize is the length of r's envelope ([Record.Marshal]).
func (r *Record) EncodedSize() int { return r.encodedSize() }

// MarshalOutside returns r's envelope as stored when its body is kept
// outside the message, beside the log: the canonical CBOR map
//
//	{"h": <header map>, "o": <the body's length, uint>, "s": <salt, bstr 32>}
//
// The header is the record's own, whose bd binds the body: where the body
// lives changes neither the id nor the body digest, and [Record.Marshal]
// of the record, its body attached ([Record.AttachBody]), is the same
// envelope as if it had always been inline.
func (r *Record) MarshalOutside() ([]byte, error) {
	if !rawOfType(r.Body, majorMap) {
		return nil, fmt.Errorf("marshal record: %w",
			fieldErrorf("body", "must be a CBOR map, got %s", cborType(r.Body)))
	}
	return r.outsideWithLen(uint64(len(r.Body))), nil
}

// Outside reports whether data, a stored envelope, is one whose body is
// kept outside it (written by [Record.MarshalOutside]), by its first
// bytes: a map of three keys whose first is "h". An inline envelope's
// first key is "b".
func Outside(data []byte) bool {
	return len(data) > 3 && data[0] == 0xa3 && data[1] == 0x61 && data[2] == 'h'
}

// UnmarshalOutside strictly decodes an envelope written by
// [Record.MarshalOutside]: it returns the record with no body, and the
// body's length, which the caller fetches from where the log keeps it
// and attaches ([Record.AttachBody]) before verifying. Errors wrap
// [ErrCorrupt].
func UnmarshalOutside(data []byte) (*Record, int, error) {
	r, n, err := unmarshalOutside(data)
	if err != nil {
		return nil, 0, fmt.Errorf("unmarshal record: %w", err)
	}
	return r, n, nil
}

func unmarshalOutside(data []byte) (*Record, int, error) {
	if !Outside(data) {
		return nil, 0, corruptf("envelope is not one whose body is kept outside it")
	}
	off := 3
	hn, ok := scanCanonical(data[off:], 1)
	if !ok {
		return nil, 0, corruptf("header: not canonical CBOR")
	}
	h, err := decodeHeader(data[off : off+hn])
	if err != nil {
		return nil, 0, fmt.Errorf("header: %w", err)
	}
	off += hn
	if len(data) < off+2 || data[off] != 0x61 || data[off+1] != keyEnvOutside[0] {
		return nil, 0, corruptf("missing envelope key %q", keyEnvOutside)
	}
	off += 2
	major, size, hl, ok := scanHead(data[off:])
	if !ok || major != majorUint || size > MaxRecordSize {
		return nil, 0, corruptf("envelope %q: must be a body length of at most %d bytes", keyEnvOutside, MaxRecordSize)
	}
	off += hl
	if len(data) != off+4+SaltSize || data[off] != 0x61 || data[off+1] != 's' || data[off+2] != 0x58 || data[off+3] != SaltSize {
		return nil, 0, corruptf("salt: must be a %d-byte byte string, last", SaltSize)
	}
	r := &Record{Header: h}
	copy(r.Salt[:], data[off+4:])
	if !bytes.Equal(r.outsideWithLen(size), data) {
		return nil, 0, corruptf("envelope is not canonical CBOR")
	}
	return r, int(size), nil
}

// outsideWithLen is MarshalOutside with the body length given.
func (r *Record) outsideWithLen(size uint64) []byte {
	h := r.Header.Encode()
	b := make([]byte, 0, outsideOverhead+len(h)+9)
	b = appendHead(b, majorMap, 3)
	b = appendText(b, keyEnvHeader)
	b = append(b, h...)
	b = appendText(b, keyEnvOutside)
	b = appendHead(b, majorUint, size)
	b = appendText(b, keyEnvSalt)
	return appendBytes(b, r.Salt[:])
}

// AttachBody sets the body of a record decoded by [UnmarshalOutside] to
// body, fetched from where the log keeps it: it must be size bytes and a
// canonical CBOR map (errors wrap [ErrCorrupt]). The body digest is
// checked by [Record.Verify], as for an inline body.
func (r *Record) AttachBody(body []byte, size int) error {
	if len(body) != size {
		return fmt.Errorf("body kept outside: %d bytes, the envelope says %d: %w", len(body), size, ErrCorrupt)
	}
	if !scanBodyMap(body) {
		if _, err := decodeBodyMap(body); err != nil {
			return fmt.Errorf("body kept outside: %w", err)
		}
	}
	r.Body = body
	return nil
}
