package records

import (
	"bytes"
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/x448/float16"
)

// The fast path of strict decoding. Decoding into Go values and encoding
// them again (decodeCanonical) is the reference definition of "strict
// canonical CBOR" in this package, and it is slow: it builds every value of
// a body only to compare bytes. scanCanonical checks the same rules in one
// pass over the bytes, building nothing. Readers use it first and fall back
// to the reference path only when it refuses, so the reference still words
// every error, and a refusal by the scanner alone costs time, not a wrong
// answer. The scanner must never accept what the reference refuses: the
// fuzz target holds the two to the same verdict on every input.

// scanCanonical checks that data begins with one CBOR item in the strict
// canonical profile, at most depth levels of maps and arrays deep, and
// returns its length. ok is false for anything the scanner does not accept.
func scanCanonical(data []byte, depth int) (n int, ok bool) {
	if len(data) == 0 {
		return 0, false
	}
	major, arg, hl, ok := scanHead(data)
	if !ok {
		return 0, false
	}
	switch major {
	case majorUint, majorNegInt:
		return hl, true
	case majorBytes:
		end := hl + int(arg)
		if arg > uint64(len(data)) || end > len(data) {
			return 0, false
		}
		return end, true
	case majorText:
		end := hl + int(arg)
		if arg > uint64(len(data)) || end > len(data) || !utf8.Valid(data[hl:end]) {
			return 0, false
		}
		return end, true
	case majorArray:
		if depth < 1 || arg > maxElements {
			return 0, false
		}
		off := hl
		for i := uint64(0); i < arg; i++ {
			m, ok := scanCanonical(data[off:], depth-1)
			if !ok {
				return 0, false
			}
			off += m
		}
		return off, true
	case majorMap:
		if depth < 1 || arg > maxElements {
			return 0, false
		}
		off := hl
		var prevKey []byte
		for i := uint64(0); i < arg; i++ {
			if off >= len(data) {
				return 0, false
			}
			if !plainKey(data[off:]) {
				return 0, false
			}
			kn, ok := scanCanonical(data[off:], depth-1)
			if !ok {
				return 0, false
			}
			key := data[off : off+kn]
			// Keys strictly increasing bytewise: sorted and no duplicates.
			if i > 0 && bytes.Compare(prevKey, key) >= 0 {
				return 0, false
			}
			prevKey = key
			off += kn
			vn, ok := scanCanonical(data[off:], depth-1)
			if !ok {
				return 0, false
			}
			off += vn
		}
		return off, true
	case majorTag:
		return 0, false
	default: // majorSimple
		ai := data[0] & 0x1f
		switch ai {
		case 20, 21, 22: // false, true, null
			return 1, true
		case 25:
			h := binary.BigEndian.Uint16(data[1:3])
			if h&0x7c00 == 0x7c00 { // infinity or NaN
				return 0, false
			}
			return 3, true
		case 26:
			f := math.Float32frombits(binary.BigEndian.Uint32(data[1:5]))
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) || fitsFloat16(f) {
				return 0, false // not the shortest exact form
			}
			return 5, true
		case 27:
			f := math.Float64frombits(binary.BigEndian.Uint64(data[1:9]))
			if math.IsNaN(f) || math.IsInf(f, 0) || float64(float32(f)) == f {
				return 0, false // not the shortest exact form
			}
			return 9, true
		}
		return 0, false
	}
}

// fitsFloat16 reports whether f is exactly a float16, as the encoder
// decides it: by the precision check, and for values the check leaves
// open (subnormals), by a round trip.
func fitsFloat16(f float32) bool {
	switch float16.PrecisionFromfloat32(f) {
	case float16.PrecisionExact:
		return true
	case float16.PrecisionUnknown:
		return float16.Fromfloat32(f).Float32() == f
	}
	return false
}

// plainKey reports whether a map key is one the scanner decides alone: an
// integer in the int64 range, a text or byte string, false, true or null.
// Other keys (maps and arrays, which cannot be keys of a Go map; floats,
// where 0.0 and -0.0 are one key to the reference path; integers beyond
// int64) are left to the reference path.
func plainKey(data []byte) bool {
	major, ai := data[0]>>5, data[0]&0x1f
	switch major {
	case majorUint, majorBytes, majorText:
		return true
	case majorNegInt:
		_, arg, _, ok := scanHead(data)
		return ok && arg <= math.MaxInt64
	case majorSimple:
		return ai == 20 || ai == 21 || ai == 22
	}
	return false
}

// scanHead reads an item's initial byte and argument, requiring a definite
// length and the shortest encoding of the argument. For major type 7 the
// argument is the float's bits (hl counts them).
func scanHead(data []byte) (major byte, arg uint64, hl int, ok bool) {
	major, ai := data[0]>>5, data[0]&0x1f
	switch {
	case ai < 24:
		return major, uint64(ai), 1, true
	case ai == 24:
		if len(data) < 2 || (major != majorSimple && data[1] < 24) {
			return 0, 0, 0, false
		}
		return major, uint64(data[1]), 2, major != majorSimple
	case ai == 25:
		if len(data) < 3 {
			return 0, 0, 0, false
		}
		v := uint64(binary.BigEndian.Uint16(data[1:3]))
		return major, v, 3, major == majorSimple || v >= 1<<8
	case ai == 26:
		if len(data) < 5 {
			return 0, 0, 0, false
		}
		v := uint64(binary.BigEndian.Uint32(data[1:5]))
		return major, v, 5, major == majorSimple || v >= 1<<16
	case ai == 27:
		if len(data) < 9 {
			return 0, 0, 0, false
		}
		v := binary.BigEndian.Uint64(data[1:9])
		return major, v, 9, major == majorSimple || v >= 1<<32
	}
	return 0, 0, 0, false // 28–30 reserved, 31 indefinite length
}

// scanBodyMap reports whether body is exactly one canonical CBOR map.
func scanBodyMap(body []byte) bool {
	if len(body) == 0 || body[0]>>5 != majorMap {
		return false
	}
	n, ok := scanCanonical(body, maxBodyDepth)
	return ok && n == len(body)
}

// unmarshalFast decodes an envelope laid out exactly as Marshal writes it,
// {"b": body, "h": header, "s": salt}. It returns nil for anything else,
// and the caller takes the reference path.
func unmarshalFast(data []byte) *Record {
	// a3 61 62 <body> 61 68 <header> 61 73 58 20 <32 bytes>
	if len(data) < 4 || data[0] != 0xa3 || data[1] != 0x61 || data[2] != 'b' {
		return nil
	}
	bn, ok := scanCanonical(data[3:], maxBodyDepth)
	if !ok || data[3]>>5 != majorMap {
		return nil
	}
	off := 3 + bn
	if len(data) < off+2 || data[off] != 0x61 || data[off+1] != 'h' {
		return nil
	}
	off += 2
	hn, ok := scanCanonical(data[off:], 1)
	if !ok {
		return nil
	}
	hdr := data[off : off+hn]
	off += hn
	if len(data) != off+4+SaltSize || data[off] != 0x61 || data[off+1] != 's' || data[off+2] != 0x58 || data[off+3] != SaltSize {
		return nil
	}
	h, ok := headerFast(hdr)
	if !ok {
		return nil
	}
	r := &Record{Header: h, Body: bytes.Clone(data[3 : 3+bn])}
	copy(r.Salt[:], data[off+4:])
	return r
}

// headerFast decodes a header that is canonical (the scanner accepted it,
// so every length in it is within bounds) and has exactly the header's
// keys and types; its re-encoding must give
// back the same bytes, as on the reference path.
func headerFast(b []byte) (Header, bool) {
	var h Header
	_, n, hl, ok := scanHead(b)
	if !ok || b[0]>>5 != majorMap || (n != 7 && n != 8) {
		return h, false
	}
	off := hl
	for i := uint64(0); i < n; i++ {
		kmajor, kl, khl, _ := scanHead(b[off:])
		if kmajor != majorText {
			return h, false
		}
		key := string(b[off+khl : off+khl+int(kl)])
		off += khl + int(kl)
		major, arg, vhl, _ := scanHead(b[off:])
		vend := off + vhl
		if major == majorText || major == majorBytes {
			vend += int(arg)
		}
		val := b[off+vhl : vend]
		switch {
		case key == keyV && major == majorUint:
			h.V = arg
		case key == keyTS && major == majorUint && arg <= math.MaxInt64:
			h.TS = int64(arg)
		case key == keyTS && major == majorNegInt && arg <= math.MaxInt64:
			h.TS = -1 - int64(arg)
		case key == keyBD && major == majorBytes && len(val) == len(h.BD):
			copy(h.BD[:], val)
		case key == keyPrev && major == majorBytes:
			id, err := IDFromBytes(val)
			if err != nil {
				return h, false
			}
			h.Prev = id
		case key == keyAct && major == majorText:
			h.Act = string(val)
		case key == keyKind && major == majorText:
			h.Kind = string(val)
		case key == keyActor && major == majorText:
			h.Actor = string(val)
		case key == keyThread && major == majorText:
			h.Thread = string(val)
		default:
			return h, false
		}
		off = vend
	}
	// Keys are unique and each was of its type; that all were present and
	// none was a zero prev is what the re-encoding settles.
	return h, bytes.Equal(h.Encode(), b)
}
