// Package records is the record model of spl: the byte format of a record,
// its content id, its validation rules, and the schemas of well-known kinds.
// This comment is the format's specification; records/testdata/vectors.json
// holds test vectors that every implementation (every SDK) must pass. They
// are generated from Go values by `go test ./records -run TestVectors
// -rewrite` and reviewed as a diff.
//
// # Usage
//
//	r, err := records.New(records.ActLearn, records.KindCheckpoint,
//		"research/vector-db", "did:sync:agent:dev", time.Now(),
//		&records.Checkpoint{Summary: "compared three stores", Learnings: []string{"pgvector is enough"}})
//	if err != nil { … }            // a *records.FieldError naming the field
//	r = r.WithPrev(lastID)         // chain it after the thread's last record
//	data, err := r.Marshal()       // the envelope, ready to append
//	id := r.ID()
//
//	r, err = records.Unmarshal(data) // strict; errors wrap ErrCorrupt
//	err = r.Verify(id)               // body digest and id; errors wrap ErrCorrupt
//
// # Records
//
// A record is a header, a body and a salt. The header is hashed into the
// record's id; the body is bound to the header by a salted digest, so a body
// can be erased (and the salt with it) while the header, the id and the
// chain of ids stay verifiable, and an erased body cannot be confirmed by
// guessing it.
//
// # Canonical CBOR
//
// Everything is CBOR (RFC 8949) in the core deterministic encoding of
// section 4.2.1 (fxamacker/cbor CoreDetEncOptions):
//
//   - integers and lengths in their shortest form;
//   - definite lengths only;
//   - map keys sorted bytewise by their encoded bytes (so a shorter text key
//     comes before a longer one: "v" < "bd" < "ts" < "act" < …);
//   - floats in the shortest of float16, float32, float64 that holds the
//     value exactly (0.5 is f9 3800, 100000.0 is fa 47c35000, 0.1 is
//     fb 3fb999999999999a).
//
// Decoding is strict: it rejects duplicate map keys, indefinite lengths, any
// tag, NaN and infinities, text that is not UTF-8, simple values other than
// false, true and null (so no undefined), nesting deeper than 32 maps and
// arrays within a body, more than 131072 elements in one array or map,
// trailing bytes, and any input that does not re-encode to exactly the same
// bytes. An integer is any value from -2^64 to 2^64-1 (major types 0 and 1).
//
// # Header
//
// The header is a CBOR map with these keys, in this (canonical) order:
//
//	key       type                         rule
//	"v"       unsigned integer             format version, 1
//	"bd"      byte string, 32 bytes        body digest (below)
//	"ts"      integer                      Unix milliseconds, 1 to 253402300799999 (year 9999)
//	"act"     text                         ^[A-Z][A-Z0-9_]{1,15}$ (KNOW, LEARN, DO, SAY, FORGET, …)
//	"kind"    text                         ^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$, at most 128 bytes and 16 parts
//	"prev"    byte string, 36 bytes        binary CID of the previous record on the thread; ABSENT on the first
//	"actor"   text                         a DID: did:<method>:<id>, method [a-z0-9]+, id [A-Za-z0-9._:%-]+, at most 256 bytes
//	"thread"  text                         1 to 256 bytes of UTF-8, no control characters
//
// A header without "prev" is a map of 7 pairs (first byte 0xa7), with it 8
// (0xa8). No other keys are allowed. Kind agent.session.checkpoint requires
// act LEARN, kind core.erasure act FORGET, kinds core.retention and
// core.pin act KNOW.
//
// # Body
//
// The body is any CBOR map, at most what fits in the envelope size limit.
// Well-known kinds have schemas: [Checkpoint] for agent.session.checkpoint,
// [Erasure] for core.erasure, [Retention] for core.retention (a retention
// policy: {"scope", "keep_last", "max_age_ms"}) and [Pin] for core.pin ({"target",
// "reason"}). The bodies of core.retention and core.pin may hold no other
// keys. Other kinds are accepted with the structural checks only.
//
// # Body digest
//
// bd is the 32-byte keyed BLAKE3 hash of the body's canonical bytes, with
// the record's 32-byte random salt as the key:
//
//	bd = BLAKE3-keyed(key = salt, input = body bytes)[0:32]
//
// # Content id
//
// The id of a record is the BLAKE3-256 hash of its header's canonical bytes
// (which include bd, so the id covers the body too):
//
//	digest = BLAKE3(header bytes)[0:32]
//
// It is written as a CIDv1. The binary form (used for "prev" and in erasure
// bodies) is 36 bytes:
//
//	+------+------+------+------+-------------------+
//	| 0x01 | 0x51 | 0x1e | 0x20 | digest (32 bytes) |
//	+------+------+------+------+-------------------+
//	 CIDv1  cbor   blake3  32
//
// The text form is the multibase prefix 'b' followed by the RFC 4648 base32
// of the binary form, lower case, without padding: 59 characters, all ids
// starting "bafir4i". The stream sequence of a record in the log is its
// clock; it is assigned by the log and is not part of the id.
//
// # Envelope
//
// A record is stored as the envelope, a canonical CBOR map of three keys:
//
//	a3                      map(3)
//	   61 62                "b"
//	      <body>            the body map, embedded as is
//	   61 68                "h"
//	      <header>          the header map
//	   61 73                "s"
//	      58 20 <32 bytes>  the salt
//
// An envelope is at most [MaxRecordSize] (1 GiB) bytes; a log sets its own
// lower limit (64 MiB unless configured).
//
// # Bodies kept apart
//
// An envelope over [MaxEncodedSize] (1 MiB) does not fit one message of
// the log, and a long body may be worth compressing. Such a record is
// stored ([Record.MarshalStored]) as its header, body length and salt,
// the canonical map
//
//	a3 or a4                map(3), or map(4) with "z"
//	   61 68                "h"
//	      <header>          the header map
//	   61 6f                "o"
//	      <uint>            the body's length in bytes
//	   61 73                "s"
//	      58 20 <32 bytes>  the salt
//	   61 7a                "z" (when compressed)
//	      <bstr or uint>    the body's zstd frame, or its length
//
// Without "z" the body is beside the log as is, named by bd; with "z" a
// byte string, the body is that zstd frame; with "z" an unsigned integer,
// a zstd frame of that length is beside the log. [UnmarshalStored] reads
// the form, and [Record.AttachBody] attaches the body once fetched and
// decompressed. The header is the same, so the record's id and body
// digest do not depend on where or how its body is kept: a reader
// verifies the record as any other, and the record's envelope
// ([Record.Marshal]) is the same whole map of "b", "h" and "s" as if it
// had been inline. Vectors give the form without "z" as stored_hex.
//
// # Wire format
//
// These must never change: the canonical CBOR profile, the header keys and
// their types, the envelope keys "b", "h", "s", "o" and "z", [FormatVersion], [SaltSize],
// the CID prefix bytes 0x01 0x51 0x1e 0x20 and the multibase 'b', the body
// digest and id derivations, the body keys of [Checkpoint], [Erasure],
// [Retention] and [Pin], the scope values [ScopeThread] and [ScopeAll], and
// the kind names [KindCheckpoint], [KindErasure], [KindRetention] and
// [KindPin]. Changing any of them changes every id. A new format is a new
// "v".
//
// # Errors
//
// A record, body or id that breaks a rule is a [*FieldError], which wraps
// [ErrInvalid]. Bytes that are not a strict canonical encoding, and digests
// or ids that do not match, are errors wrapping [ErrCorrupt].
package records
