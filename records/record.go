package records

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/zeebo/blake3"

	"github.com/spl-dev/spl/records/internal/keyhash"
)

// Wire-format constants (never change).
const (
	// FormatVersion is the header field "v" of every record this package
	// writes.
	FormatVersion = 1

	// MaxEncodedSize is the largest envelope stored inline, in one
	// message of the log, in bytes. A record whose envelope is larger
	// keeps its body outside the message ([Record.MarshalOutside]).
	MaxEncodedSize = 1 << 20

	// MaxRecordSize is the largest envelope of any record, in bytes: the
	// format's ceiling. A log refuses records past its own, lower limit
	// (64 MiB unless configured).
	MaxRecordSize = 1 << 30

	// SaltSize is the size of the salt that keys the body digest.
	SaltSize = 32
)

// Acts: the upper-case verbs of [Header.Act]. Other verbs matching
// ^[A-Z][A-Z0-9_]{1,15}$ are valid too.
const (
	ActKnow   = "KNOW"
	ActLearn  = "LEARN"
	ActDo     = "DO"
	ActSay    = "SAY"
	ActForget = "FORGET"
)

// Well-known kinds, whose bodies have schemas in this package.
const (
	// KindCheckpoint is a session checkpoint; its body is a [Checkpoint]
	// and its act must be ActLearn.
	KindCheckpoint = "agent.session.checkpoint"

	// KindErasure erases records; its body is an [Erasure] and its act
	// must be ActForget.
	KindErasure = "core.erasure"
)

// Envelope keys (wire format; never change).
const (
	keyEnvBody   = "b"
	keyEnvHeader = "h"
	keyEnvSalt   = "s"
)

// envelopeOverhead is the size of an envelope minus its body and header:
// map(3) "b" … "h" … "s" bstr(32) salt.
const envelopeOverhead = 1 + 2 + 2 + 2 + 2 + SaltSize

// Record is one record: a header, the salt that keys its body digest, and
// its body. Body holds the canonical CBOR bytes of a map and is never
// modified in place.
type Record struct {
	Header Header
	Salt   [SaltSize]byte
	Body   []byte

	// Sig is the record's signature, when it has one (see [Record.Sign]).
	// It is not part of the record's bytes or id: the log stores it
	// beside the record (sign.go).
	Sig *Signature

	// checked is what New validated: Validate skips the work again while
	// the header (but for prev and bd) and the body slice are unchanged.
	checked *checkedState
}

// checkedState is the validated header and body of a record from New.
type checkedState struct {
	header Header
	body   []byte
}

// unchanged reports whether r still has the header and body New checked.
func (c *checkedState) unchanged(r *Record) bool {
	h := r.Header
	h.Prev, h.BD = c.header.Prev, c.header.BD
	return h == c.header && len(r.Body) == len(c.body) &&
		(len(c.body) == 0 || &r.Body[0] == &c.body[0])
}

// RawBody is a body that is already encoded as CBOR. [New] accepts it only
// if it is a map in strict, canonical form.
type RawBody []byte

// New validates and builds a record that is not yet chained (its
// [Header.Prev] is zero; see [Record.WithPrev]).
//
// body is one of:
//   - RawBody or []byte: an already encoded CBOR map, which must pass
//     strict decoding and be canonical;
//   - any other Go value that encodes to a CBOR map with core deterministic
//     encoding: a map, a struct with cbor tags, a *Checkpoint, an *Erasure.
//
// New draws a random salt (crypto/rand), sets BD to the keyed BLAKE3 of the
// body's bytes, converts ts to Unix milliseconds and runs
// [Record.Validate]. A validation failure is returned as a *FieldError.
func New(act, kind, thread, actor string, ts time.Time, body any) (*Record, error) {
	var salt [SaltSize]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, fmt.Errorf("new record: salt: %w", err)
	}
	return newRecord(act, kind, thread, actor, ts.UnixMilli(), body, salt)
}

// NewWithSalt is New with the salt given: for an author who computed the
// record's id (to sign it) before handing it over, as an HTTP client
// does. The salt must be 32 random bytes and never reused.
func NewWithSalt(act, kind, thread, actor string, ts time.Time, body any, salt [SaltSize]byte) (*Record, error) {
	return newRecord(act, kind, thread, actor, ts.UnixMilli(), body, salt)
}

// newRecord is New with the clock reading and salt given.
func newRecord(act, kind, thread, actor string, ts int64, body any, salt [SaltSize]byte) (*Record, error) {
	r := &Record{
		Header: Header{V: FormatVersion, Act: act, Kind: kind, Thread: thread, Actor: actor, TS: ts},
		Salt:   salt,
	}
	if err := r.Header.validate(); err != nil {
		return nil, err
	}
	cp, plain := plainCheckpoint(body)
	var b []byte
	if plain {
		// Straight to the bytes: the generic encoder would call
		// MarshalCBOR, then check and copy what it returns.
		b = cp.appendCBOR(make([]byte, 0, cp.sizeHint()))
	} else {
		var err error
		if b, err = encodeBody(body); err != nil {
			return nil, err
		}
	}
	r.Body = b
	r.Header.BD = bodyDigest(salt, b)
	if plain && kind == KindCheckpoint {
		// Encoded here from a Checkpoint with only strings: canonical by
		// construction, so the schema is checked on the struct, without
		// decoding the bytes again.
		if n := r.encodedSize(); n > MaxRecordSize {
			return nil, sizeError(n)
		}
		if err := cp.Validate(); err != nil {
			return nil, err
		}
	} else if err := r.Validate(); err != nil {
		return nil, err
	}
	r.checked = &checkedState{header: r.Header, body: r.Body}
	return r, nil
}

// plainCheckpoint returns body as a Checkpoint when it is one with no
// Extra fields, whose encoding holds nothing but text.
func plainCheckpoint(body any) (*Checkpoint, bool) {
	var cp *Checkpoint
	switch b := body.(type) {
	case *Checkpoint:
		cp = b
	case Checkpoint:
		cp = &b
	default:
		return nil, false
	}
	return cp, cp != nil && cp.flat()
}

// encodeBody returns the CBOR bytes of a body given to New. The bytes are
// checked by Validate, not here.
func encodeBody(body any) ([]byte, error) {
	switch b := body.(type) {
	case RawBody:
		return bytes.Clone([]byte(b)), nil
	case []byte:
		return bytes.Clone(b), nil
	}
	b, err := encMode.Marshal(body)
	if err != nil {
		return nil, fieldErrorf("body", "cannot encode as CBOR: %v", err)
	}
	return b, nil
}

// keyhashMax is the longest body bodyDigest hashes with keyhash; past it
// the library's vectorized hashing wins over keyhash's allocation-free
// one (records/internal/keyhash's benchmark).
const keyhashMax = 2048

// bodyDigest is the keyed BLAKE3-256 of body, keyed with salt.
func bodyDigest(salt [SaltSize]byte, body []byte) [32]byte {
	if len(body) <= keyhashMax {
		return keyhash.Sum256(&salt, body)
	}
	var d [32]byte
	h, err := blake3.NewKeyed(salt[:])
	if err != nil { // only for a key that is not 32 bytes
		return d
	}
	_, _ = h.Write(body)
	h.Sum(d[:0])
	return d
}

// ID returns the record's content id, [Header.ID].
func (r *Record) ID() ID { return r.Header.ID() }

// WithPrev returns a shallow copy of r with Header.Prev set to prev. The
// copy shares r's Body, which is never modified.
func (r *Record) WithPrev(prev ID) *Record {
	c := *r
	c.Header.Prev = prev
	return &c
}

// Time returns the record's timestamp, Header.TS, as a UTC time.
func (r *Record) Time() time.Time { return time.UnixMilli(r.Header.TS).UTC() }

// DecodeBody strictly decodes the body into v (a pointer), with the decoding
// profile described in the package documentation. Keys of v's struct type
// that the body lacks are left alone; body keys v lacks are ignored.
func (r *Record) DecodeBody(v any) error {
	if err := decMode.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode body: %w", err)
	}
	return nil
}

// Marshal returns the record's envelope: the canonical CBOR map
//
//	{"b": <body map, embedded as is>, "h": <header map>, "s": <salt, bstr 32>}
//
// Marshal checks only that the body is a CBOR map and that the envelope fits
// MaxRecordSize; call [Record.Validate] for the rest.
func (r *Record) Marshal() ([]byte, error) {
	if !rawOfType(r.Body, majorMap) {
		return nil, fmt.Errorf("marshal record: %w",
			fieldErrorf("body", "must be a CBOR map, got %s", cborType(r.Body)))
	}
	h := r.Header.Encode()
	n := envelopeOverhead + len(r.Body) + len(h)
	if n > MaxRecordSize {
		return nil, fmt.Errorf("marshal record: %w", sizeError(n))
	}
	b := make([]byte, 0, n)
	b = appendHead(b, majorMap, 3)
	b = appendText(b, keyEnvBody)
	b = append(b, r.Body...)
	b = appendText(b, keyEnvHeader)
	b = append(b, h...)
	b = appendText(b, keyEnvSalt)
	b = appendBytes(b, r.Salt[:])
	return b, nil
}

// encodedSize is the length of r's envelope.
func (r *Record) encodedSize() int {
	return envelopeOverhead + len(r.Body) + len(r.Header.Encode())
}

func sizeError(n int) *FieldError {
	return fieldErrorf("body", "record is %d bytes encoded; the limit is %d", n, MaxRecordSize)
}

// Unmarshal strictly decodes an envelope written by [Record.Marshal]. The
// envelope must be canonical, have exactly the keys "b", "h" and "s", a
// header that [DecodeHeader] accepts, a body that is a canonical CBOR map
// and a 32-byte salt, and be at most MaxRecordSize bytes. Any structural
// problem is an error wrapping [ErrCorrupt]. Marshal of the result returns
// data again, byte for byte.
//
// Unmarshal neither checks the body digest nor applies the validation rules:
// call [Record.Verify] (and [Record.Validate] when writing). The record does
// not share memory with data.
func Unmarshal(data []byte) (*Record, error) {
	r, err := unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("unmarshal record: %w", err)
	}
	return r, nil
}

func unmarshal(data []byte) (*Record, error) {
	if len(data) > MaxRecordSize {
		return nil, corruptf("record is %d bytes; the limit is %d", len(data), MaxRecordSize)
	}
	if r := unmarshalFast(data); r != nil {
		return r, nil
	}
	return unmarshalReference(data)
}

// unmarshalReference is unmarshal through the strict decoder: the
// definition the fast path is held to, and the source of its errors.
func unmarshalReference(data []byte) (*Record, error) {
	if !rawOfType(data, majorMap) {
		return nil, corruptf("envelope is a CBOR %s, not a map", cborType(data))
	}
	var env map[string]cbor.RawMessage
	if err := envDecMode.Unmarshal(data, &env); err != nil {
		return nil, corruptErr("envelope", err)
	}
	for k := range env {
		if k != keyEnvBody && k != keyEnvHeader && k != keyEnvSalt {
			return nil, corruptf("unknown envelope key %s", quote(k))
		}
	}
	for _, k := range []string{keyEnvBody, keyEnvHeader, keyEnvSalt} {
		if _, ok := env[k]; !ok {
			return nil, corruptf("missing envelope key %q", k)
		}
	}
	h, err := decodeHeader(env[keyEnvHeader])
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	body := []byte(env[keyEnvBody]) // a copy of data's bytes
	if _, err := decodeBodyMap(body); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	salt, ok := decodeByteString(env[keyEnvSalt])
	if !ok || len(salt) != SaltSize {
		return nil, corruptf("salt: must be a %d-byte byte string", SaltSize)
	}
	r := &Record{Header: h, Body: body}
	copy(r.Salt[:], salt)
	// The envelope itself must be the one canonical encoding.
	if out, err := r.Marshal(); err != nil || !bytes.Equal(out, data) {
		return nil, corruptf("envelope is not canonical CBOR")
	}
	return r, nil
}

// Verify checks the record's integrity: the body digest recomputed from
// Salt and Body must equal Header.BD, and the id computed from the header
// must equal want. A zero want skips the id comparison. A mismatch is an
// error wrapping [ErrCorrupt] that says which: "body digest mismatch" or
// "id mismatch: computed X, stored Y".
func (r *Record) Verify(want ID) error {
	if bodyDigest(r.Salt, r.Body) != r.Header.BD {
		return fmt.Errorf("verify record: body digest mismatch: %w", ErrCorrupt)
	}
	if want.IsZero() {
		return nil
	}
	if got := r.ID(); got != want {
		return fmt.Errorf("verify record: id mismatch: computed %s, stored %s: %w", got, want, ErrCorrupt)
	}
	return nil
}
