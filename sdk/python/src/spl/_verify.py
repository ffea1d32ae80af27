"""Verification of what a reader gets from spl: a record's content id and
keyed body digest, recomputed from its stored bytes (the canonical CBOR
envelope {"b": body, "h": header, "s": salt}), as records/ in the Go module
defines them. A reader's right: no rule of spl lives here.
"""

from __future__ import annotations

import base64
import struct

from ._blake3 import blake3, blake3_pair

_CID_PREFIX = bytes((0x01, 0x51, 0x1E, 0x20))


class CorruptRecordError(Exception):
    """Stored bytes that do not verify: the one class of corruption."""


def cid_text(cid: bytes) -> str:
    return "b" + base64.b32encode(cid).decode().lower().rstrip("=")


def id_of_header(header: bytes) -> str:
    """The content id (CIDv1 text) of a header's canonical bytes."""
    return cid_text(_CID_PREFIX + blake3(header))


def body_digest(body: bytes, salt: bytes) -> bytes:
    """BLAKE3 of the body's bytes keyed with the 32-byte salt."""
    return blake3(body, salt)


def _head(b: bytes, off: int):
    if off >= len(b):
        raise CorruptRecordError("cbor: truncated")
    ib = b[off]
    major, info = ib >> 5, ib & 31
    off += 1
    if info < 24:
        return major, info, off, info
    size = {24: 1, 25: 2, 26: 4, 27: 8}.get(info)
    if size is None:
        raise CorruptRecordError("cbor: indefinite length or reserved head")
    if off + size > len(b):
        raise CorruptRecordError("cbor: truncated")
    return major, int.from_bytes(b[off:off + size], "big"), off + size, info


def _decode(b: bytes, off: int):
    """Decodes one item strictly enough for reading; returns (value, end)."""
    major, n, off, info = _head(b, off)
    if major == 0:
        return n, off
    if major == 1:
        return -1 - n, off
    if major in (2, 3):
        end = off + n
        if end > len(b):
            raise CorruptRecordError("cbor: string past the end")
        raw = b[off:end]
        return (bytes(raw) if major == 2 else raw.decode("utf-8")), end
    if major == 4:
        out = []
        for _ in range(n):
            v, off = _decode(b, off)
            out.append(v)
        return out, off
    if major == 5:
        m = {}
        for _ in range(n):
            k, off = _decode(b, off)
            if isinstance(k, list):
                k = tuple(k)
            if isinstance(k, dict):
                raise CorruptRecordError("cbor: map as a map key")
            if k in m:
                raise CorruptRecordError("cbor: duplicate map key")
            m[k], off = _decode(b, off)
        return m, off
    if major == 6:
        raise CorruptRecordError("cbor: tags are not allowed")
    # major 7
    if info == 20:
        return False, off
    if info == 21:
        return True, off
    if info == 22:
        return None, off
    if info == 25:
        return struct.unpack(">e", n.to_bytes(2, "big"))[0], off
    if info == 26:
        return struct.unpack(">f", n.to_bytes(4, "big"))[0], off
    if info == 27:
        return struct.unpack(">d", n.to_bytes(8, "big"))[0], off
    raise CorruptRecordError("cbor: simple value not allowed")


def decode(b: bytes):
    v, end = _decode(b, 0)
    if end != len(b):
        raise CorruptRecordError("cbor: data after the item")
    return v


def verify_envelope(env: bytes, want_id: str | None = None) -> dict:
    """Checks a record's stored bytes and returns {"id", "header", "body"}.

    The envelope must be a map of exactly "b", "h", "s" in canonical order;
    the header's bd must be BLAKE3 of the body keyed with the salt; the id
    computed from the header's bytes must be want_id when given. Raises
    CorruptRecordError otherwise.
    """
    env = bytes(env)
    if not env or env[0] != 0xA3:
        raise CorruptRecordError("envelope: not a map of 3 entries")
    off, parts, values = 1, {}, {}
    for key in (b"b", b"h", b"s"):
        if env[off:off + 2] != b"\x61" + key:
            raise CorruptRecordError(f"envelope: key {key.decode()} expected")
        off += 2
        values[key], end = _decode(env, off)  # each item decoded once
        parts[key] = env[off:end]
        off = end
    if off != len(env):
        raise CorruptRecordError("envelope: data after the map")
    body_bytes, header_bytes, salt_item = parts[b"b"], parts[b"h"], parts[b"s"]
    if len(salt_item) != 34 or salt_item[:2] != b"\x58\x20":
        raise CorruptRecordError("envelope: salt must be 32 bytes")
    header, body = values[b"h"], values[b"b"]
    if not isinstance(body, dict) or not isinstance(header, dict):
        raise CorruptRecordError("envelope: header and body must be maps")
    bd = header.get("bd")
    if not isinstance(bd, bytes) or len(bd) != 32:
        raise CorruptRecordError("header: bd must be 32 bytes")
    # Both hashes in one pass: the body keyed with the salt, the header.
    digest, hid = blake3_pair(body_bytes, salt_item[2:], header_bytes, None)
    if digest != bd:
        raise CorruptRecordError("body digest does not match the header's bd")
    rid = cid_text(_CID_PREFIX + hid)
    if want_id is not None and rid != want_id:
        raise CorruptRecordError(f"id: the header hashes to {rid}, not {want_id}")
    prev = header.get("prev")
    header = dict(header)
    header["prev"] = cid_text(prev) if isinstance(prev, bytes) else None
    return {"id": rid, "header": header, "body": body, "header_bytes": header_bytes, "body_bytes": body_bytes}
