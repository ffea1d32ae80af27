package records

import (
	"bytes"
	"fmt"
)

// Keys of a stored envelope whose body is not in it as is (wire format;
// never change).
const (
	keyEnvOutside = "o" // the body's length in bytes
	keyEnvZ       = "z" // the body compressed: its zstd frame (bytes), or the frame's length beside the log (uint)
)

// storedOverhead bounds the size of a stored envelope minus its header
// and compressed body: map(4) "h" … "o" uint "s" bstr(32) salt "z" head.
const storedOverhead = 1 + 2 + 2 + 9 + 2 + 2 + SaltSize + 2 + 9

// Stored says how a stored envelope that is not the plain one ([Plain])
// keeps its record's body.
type Stored struct {
	// Size is the body's length in bytes.
	Size int
	// Z is the body compressed, a zstd frame, kept in the envelope; nil
	// when the body is outside.
	Z []byte
	// Outside: the body is kept beside the log (by the log, named by bd),
	// as is, or as a zstd frame of ZSize bytes when ZSize > 0.
	Outside bool
	ZSize   int
}

// Inline reports whether r's envelope fits one message of the log
// (MaxEncodedSize) as it is.
func (r *Record) Inline() bool { return r.encodedSize() <= MaxEncodedSize }

// EncodedSize is the length of r's envelope ([Record.Marshal]).
func (r *Record) EncodedSize() int { return r.encodedSize() }

// StoredSize is the length of r's envelope stored with a compressed body
// of z bytes in it.
func (r *Record) StoredSize(z int) int { return storedOverhead + len(r.Header.Encode()) + z }

// MarshalOutside is MarshalStored of a body kept outside as is.
func (r *Record) MarshalOutside() ([]byte, error) {
	return r.MarshalStored(Stored{Size: len(r.Body), Outside: true})
}

// MarshalStored returns r's envelope as stored when its body is not in it
// as is: the canonical CBOR map
//
//	{"h": <header map>, "o": <the body's length>, "s": <salt, bstr 32>}
//
// for a body kept outside, beside the log, as is; with a fourth key "z"
// for a compressed body: the zstd frame itself (a byte string) when it is
// kept in the envelope, the frame's length (an unsigned integer) when it
// is kept outside. The header is the record's own, whose bd binds the
// canonical body: where and how the body is kept changes neither the id
// nor the body digest, and [Record.Marshal] of the record, its body
// attached ([Record.AttachBody]), is the same envelope as if it had
// always been inline.
func (r *Record) MarshalStored(st Stored) ([]byte, error) {
	if !rawOfType(r.Body, majorMap) {
		return nil, fmt.Errorf("marshal record: %w",
			fieldErrorf("body", "must be a CBOR map, got %s", cborType(r.Body)))
	}
	if ok := st.Size == len(r.Body) && (st.Outside && st.Z == nil || !st.Outside && st.Z != nil && st.ZSize == 0); !ok {
		return nil, fmt.Errorf("marshal record: stored form %+v does not describe a body of %d bytes", st, len(r.Body))
	}
	return r.storedWith(st), nil
}

// storedWith is MarshalStored without the checks.
func (r *Record) storedWith(st Stored) []byte {
	h := r.Header.Encode()
	b := make([]byte, 0, storedOverhead+len(h)+len(st.Z))
	n := uint64(3)
	if st.Z != nil || st.ZSize > 0 {
		n = 4
	}
	b = appendHead(b, majorMap, n)
	b = appendText(b, keyEnvHeader)
	b = append(b, h...)
	b = appendText(b, keyEnvOutside)
	b = appendHead(b, majorUint, uint64(st.Size))
	b = appendText(b, keyEnvSalt)
	b = appendBytes(b, r.Salt[:])
	switch {
	case st.Z != nil:
		b = appendText(b, keyEnvZ)
		b = appendBytes(b, st.Z)
	case st.ZSize > 0:
		b = appendText(b, keyEnvZ)
		b = appendHead(b, majorUint, uint64(st.ZSize))
	}
	return b
}

// Plain reports whether data, a stored envelope, is the plain one
// ([Record.Marshal]: its first key "b").
func Plain(data []byte) bool {
	return len(data) > 3 && data[0] == 0xa3 && data[1] == 0x61 && data[2] == 'b'
}

// Packed reports whether data, a stored envelope, is one written by
// [Record.MarshalStored], by its first bytes: a map of three or four keys
// whose first is "h". Bytes that are neither Plain nor Packed are no
// envelope; [Unmarshal] says what is wrong with them.
func Packed(data []byte) bool {
	return len(data) > 3 && (data[0] == 0xa3 || data[0] == 0xa4) && data[1] == 0x61 && data[2] == 'h'
}

// UnmarshalStored strictly decodes an envelope written by
// [Record.MarshalStored]: it returns the record with no body, and how
// the body is kept. The caller decompresses the body, or fetches it from
// where the log keeps it, and attaches it ([Record.AttachBody]) before
// verifying. Errors wrap [ErrCorrupt].
func UnmarshalStored(data []byte) (*Record, Stored, error) {
	r, st, err := unmarshalStored(data)
	if err != nil {
		return nil, Stored{}, fmt.Errorf("unmarshal record: %w", err)
	}
	return r, st, nil
}

func unmarshalStored(data []byte) (*Record, Stored, error) {
	var st Stored
	if len(data) < 3 || (data[0] != 0xa3 && data[0] != 0xa4) || data[1] != 0x61 || data[2] != 'h' {
		return nil, st, corruptf("envelope is not one whose body is kept apart")
	}
	off := 3
	hn, ok := scanCanonical(data[off:], 1)
	if !ok {
		return nil, st, corruptf("header: not canonical CBOR")
	}
	h, err := decodeHeader(data[off : off+hn])
	if err != nil {
		return nil, st, fmt.Errorf("header: %w", err)
	}
	off += hn
	if len(data) < off+2 || data[off] != 0x61 || data[off+1] != keyEnvOutside[0] {
		return nil, st, corruptf("missing envelope key %q", keyEnvOutside)
	}
	off += 2
	major, size, hl, ok := scanHead(data[off:])
	if !ok || major != majorUint || size > MaxRecordSize {
		return nil, st, corruptf("envelope %q: must be a body length of at most %d bytes", keyEnvOutside, MaxRecordSize)
	}
	st.Size = int(size)
	off += hl
	if len(data) < off+4+SaltSize || data[off] != 0x61 || data[off+1] != 's' || data[off+2] != 0x58 || data[off+3] != SaltSize {
		return nil, st, corruptf("salt: must be a %d-byte byte string", SaltSize)
	}
	r := &Record{Header: h}
	copy(r.Salt[:], data[off+4:])
	off += 4 + SaltSize
	st.Outside = true
	if data[0] == 0xa4 {
		if len(data) < off+2 || data[off] != 0x61 || data[off+1] != keyEnvZ[0] {
			return nil, st, corruptf("missing envelope key %q", keyEnvZ)
		}
		off += 2
		major, arg, hl, ok := scanHead(data[off:])
		switch {
		case ok && major == majorBytes && uint64(len(data)-off-hl) == arg:
			st.Z, st.Outside = bytes.Clone(data[off+hl:]), false
		case ok && major == majorUint && arg > 0 && arg <= MaxRecordSize:
			st.ZSize = int(arg)
		default:
			return nil, Stored{}, corruptf("envelope %q: must be the compressed body, or its length", keyEnvZ)
		}
	}
	if !bytes.Equal(r.storedWith(st), data) {
		return nil, Stored{}, corruptf("envelope is not canonical CBOR")
	}
	return r, st, nil
}

// AttachBody sets the body of a record decoded by [UnmarshalStored] to
// body, fetched or decompressed: it must be size bytes and a canonical
// CBOR map (errors wrap [ErrCorrupt]). The body digest is checked by
// [Record.Verify], as for an inline body.
func (r *Record) AttachBody(body []byte, size int) error {
	if len(body) != size {
		return fmt.Errorf("body kept apart: %d bytes, the envelope says %d: %w", len(body), size, ErrCorrupt)
	}
	if !scanBodyMap(body) {
		if _, err := decodeBodyMap(body); err != nil {
			return fmt.Errorf("body kept apart: %w", err)
		}
	}
	r.Body = body
	return nil
}
