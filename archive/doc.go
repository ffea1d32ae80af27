// Package archive writes and reads spl archives: threads of records in a
// CARv1 file (https://ipld.io/specs/transport/car/carv1/), the format of
// `spl export` and `spl import`.
//
// # File
//
// A CARv1 stream: the header, a dag-cbor map {"roots": [<index CID>],
// "version": 1} prefixed by its length as an unsigned varint, then the
// blocks, each varint(len(CID)+len(data)) || CID || data. Every CID is a
// CIDv1 with a BLAKE3-256 multihash (0x1e, 32 bytes) of the block's data:
//
//	block           codec               data
//	index (root)    0x71 dag-cbor       the map below; its links are CIDs (tag 42)
//	record header   0x51 cbor           the header's canonical bytes: the CID IS the record's id
//	record body     0x51 cbor           {"b": <body map>, "s": <salt, 32-byte byte string>}
//
// The index is written first, then each thread's records in chain order,
// each header block followed by its body block:
//
//	{"format": "spl-archive", "threads": [
//	    {"thread": "<name>", "records": [
//	        {"h": <link to the header block>,
//	         "b": <link to the body block>,            absent when erased
//	         "sig": "<did:key>:<base64 signature>"},   absent when unsigned
//	        …]},                                       in chain order: oldest first
//	    …], "v": 1}
//
// All CBOR is canonical (RFC 8949 core deterministic encoding, which for
// these maps is dag-cbor's). A record that an erasure removed keeps its
// header block and has no body block: its body and salt are gone from
// the log, and from the archive. The erasure records that name it are in
// the archive whole, so the thread verifies after an import as it did
// before the export.
//
// # What can be checked without spl
//
// Any IPLD tool that knows BLAKE3 (go-car's `car verify`, `ipfs dag
// import`) checks every block against its CID, and so every record
// header against its id: a header's id is the BLAKE3-256 of its bytes,
// the digest its CID carries (the ids spl prints are these CIDs in
// base32). From the index, a traversal reaches every block. With a CBOR
// decoder and a BLAKE3 that takes a key (b3sum --keyed), the rest is
// checkable too: each header's "prev" is the previous header's CID, and
// its "bd" is BLAKE3 keyed with the body block's "s" over the bytes of
// its "b" (the body map as it is embedded). A signature is Ed25519 over
// "spl/v1/sig" followed by the binary CID of the header without "prev"
// (records.Header.SigningID), by the key the did:key names. What needs
// spl, or its rules, is the meaning: the schemas of kinds, which records
// an erasure erased and that each erased record's header is the one the
// erasure keeps, and the log's own checks after an import (spl verify).
//
// # Reading
//
// Read checks everything before it returns: every block against its CID,
// that the index names every block once and nothing else, each header
// against its id, each body against the header's digest (strictly, as the
// log decodes a record), each signature, each thread's chain (the first
// record has no prev, each next one's prev is the one before it), and
// that every erased record is named by a later erasure record of its
// thread that keeps the same header. Errors say where: the block's index
// and byte offset, or the thread and the record's position in it.
package archive
