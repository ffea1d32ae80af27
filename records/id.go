package records

import (
	"encoding/base32"
	"fmt"
)

// CID prefix bytes of every [ID] (wire format; never change):
// CIDv1, multicodec cbor (0x51), multihash blake3 (0x1e) with a 32-byte
// digest (0x20). Each is a one-byte unsigned varint.
const (
	cidVersion   = 0x01
	cidCodecCBOR = 0x51
	cidHashBLAKE = 0x1e
	cidHashLen   = 0x20
)

// cidPrefix is the four bytes that start every binary CID of an ID.
var cidPrefix = [4]byte{cidVersion, cidCodecCBOR, cidHashBLAKE, cidHashLen}

// Sizes of the two forms of an ID.
const (
	idBinaryLen = len(cidPrefix) + 32 // 36
	idTextLen   = 1 + 58              // multibase 'b' + base32 of 36 bytes, unpadded
)

// base32Lower is RFC 4648 base32 in lower case without padding: multibase 'b'.
var base32Lower = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ID is the content id of a record: the BLAKE3-256 digest of its header's
// canonical CBOR bytes (see [Header.Encode]). Its text form is a CIDv1.
//
// The zero ID means "no id" (for example [Header.Prev] of the first record
// of a thread).
type ID [32]byte

// String returns the CIDv1 text form: "b" followed by the lower-case,
// unpadded base32 of [ID.Bytes] (59 characters).
func (id ID) String() string {
	return "b" + base32Lower.EncodeToString(id.Bytes())
}

// Bytes returns the binary CID: 0x01 0x51 0x1e 0x20 followed by the 32
// digest bytes (36 bytes).
func (id ID) Bytes() []byte {
	b := make([]byte, 0, idBinaryLen)
	b = append(b, cidPrefix[:]...)
	return append(b, id[:]...)
}

// Short returns the last 12 characters of [ID.String], for display. (The
// first characters are the same for every id.)
func (id ID) Short() string {
	s := id.String()
	return s[len(s)-12:]
}

// IsZero reports whether id is the zero ID.
func (id ID) IsZero() bool { return id == ID{} }

// MarshalText returns [ID.String], so an ID is a CID string in JSON.
func (id ID) MarshalText() ([]byte, error) {
	return []byte(id.String()), nil
}

// UnmarshalText parses the [ID.String] form, as [ParseID] does.
func (id *ID) UnmarshalText(text []byte) error {
	v, err := ParseID(string(text))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseID parses the text form of an id, as returned by [ID.String]. Only
// the canonical form is accepted: multibase prefix 'b', lower-case base32
// without padding, unused trailing bits zero. Errors wrap [ErrInvalid] and
// say what is wrong.
func ParseID(s string) (ID, error) {
	if s == "" {
		return ID{}, fmt.Errorf("parse id: %w", &FieldError{Field: "id", Rule: "must not be empty"})
	}
	if s[0] != 'b' {
		return ID{}, fmt.Errorf("parse id: %w", fieldErrorf("id",
			"multibase prefix must be 'b' (base32, lower case), got %s", quote(s[:1])))
	}
	if len(s) != idTextLen {
		return ID{}, fmt.Errorf("parse id: %w", fieldErrorf("id",
			"must be %d characters, got %d: %s", idTextLen, len(s), quote(s)))
	}
	b, err := base32Lower.DecodeString(s[1:])
	if err != nil {
		return ID{}, fmt.Errorf("parse id: %w", fieldErrorf("id",
			"not lower-case base32 (%v): %s", err, quote(s)))
	}
	if base32Lower.EncodeToString(b) != s[1:] {
		return ID{}, fmt.Errorf("parse id: %w", fieldErrorf("id",
			"non-canonical base32 (trailing bits set): %s", quote(s)))
	}
	id, err := IDFromBytes(b)
	if err != nil {
		return ID{}, fmt.Errorf("parse id %s: %w", quote(s), err)
	}
	return id, nil
}

// IDFromBytes converts a binary CID (as returned by [ID.Bytes]) to an ID.
// Errors wrap [ErrInvalid] and say which part of the prefix is wrong.
func IDFromBytes(b []byte) (ID, error) {
	var rule string
	switch {
	case len(b) != idBinaryLen:
		rule = fmt.Sprintf("binary CID must be %d bytes, got %d", idBinaryLen, len(b))
	case b[0] != cidVersion:
		rule = fmt.Sprintf("CID version must be 0x01, got 0x%02x", b[0])
	case b[1] != cidCodecCBOR:
		rule = fmt.Sprintf("CID codec must be 0x51 (cbor), got 0x%02x", b[1])
	case b[2] != cidHashBLAKE:
		rule = fmt.Sprintf("multihash must be 0x1e (blake3), got 0x%02x", b[2])
	case b[3] != cidHashLen:
		rule = fmt.Sprintf("multihash length must be 0x20 (32 bytes), got 0x%02x", b[3])
	}
	if rule != "" {
		return ID{}, fmt.Errorf("id from bytes: %w", &FieldError{Field: "id", Rule: rule})
	}
	var id ID
	copy(id[:], b[len(cidPrefix):])
	return id, nil
}
